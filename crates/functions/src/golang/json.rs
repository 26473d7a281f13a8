//! Go's `encoding/json.Marshal` of a JSON value: object keys sorted, no spaces, `<`, `>`, `&`,
//! U+2028 and U+2029 escaped, and float64 numbers in Go's format (`5`, `0.1`, `1e+21`,
//! `1e-7`). `ToJson` transforms and connection details built from non-string fields show
//! these bytes to users, and hashes (`ToSha256`) are taken over them.

use serde_json::{Number, Value};

use super::strconv::format_float;

/// The bytes Go's `json.Marshal` produces for `value`.
pub fn marshal(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&number(n)),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, key);
                out.push(':');
                write_value(out, item);
            }
            out.push('}');
        }
    }
}

/// A number as Go writes it: integers as they are, float64 in `%f` form unless tiny or huge.
fn number(n: &Number) -> String {
    if !n.is_f64() {
        return n.to_string();
    }
    let f = n.as_f64().unwrap_or_default();
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let s = format_float(f, b'e', -1);
        // Go shortens a two-digit negative exponent: e-07 becomes e-7.
        if let Some(pos) = s.rfind("e-0") {
            return format!("{}e-{}", &s[..pos], &s[pos + 3..]);
        }
        return s;
    }
    format_float(f, b'f', -1)
}

fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c if c < ' ' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use serde_json::json;

    use super::*;
    use crate::golang::value::float;

    #[test]
    fn marshals_as_go_does() {
        assert_eq!(marshal(&float(5.0)), "5");
        assert_eq!(marshal(&float(5.5)), "5.5");
        assert_eq!(marshal(&float(0.1)), "0.1");
        assert_eq!(marshal(&float(1e21)), "1e+21");
        assert_eq!(marshal(&float(1e-7)), "1e-7");
        assert_eq!(marshal(&float(-1.5e-10)), "-1.5e-10");
        assert_eq!(marshal(&float(123456789.0)), "123456789");
        assert_eq!(marshal(&json!(42)), "42");
        assert_eq!(marshal(&json!({"b": [1, null, true], "a": "x"})), r#"{"a":"x","b":[1,null,true]}"#);
        assert_eq!(marshal(&json!("<a & b>")), r#""\u003ca \u0026 b\u003e""#);
        assert_eq!(marshal(&json!("q\"\\\n\u{1}\u{8}")), r#""q\"\\\n\u0001\b""#);
        assert_eq!(marshal(&json!("é\u{2028}")), "\"é\\u2028\"");
    }
}
