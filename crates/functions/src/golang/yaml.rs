//! `gopkg.in/yaml.v3`'s `Marshal` of a JSON value, as function-go-templating's `toYaml`
//! prints it: keys sorted, four-space indentation, sequences indented inside mappings,
//! strings quoted (double quotes) only where YAML would read them as something else,
//! multi-line strings as literal blocks, float64s in Go's shortest form.

use serde_json::Value;

use super::strconv::{format_float, quote};

/// The YAML text `yaml.v3` writes for `value` (ending in a newline).
pub fn marshal(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Object(m) if !m.is_empty() => write_map(&mut out, m, 0),
        Value::Array(a) if !a.is_empty() => write_seq(&mut out, a, 0),
        other => {
            out.push_str(&scalar(other, 0));
            out.push('\n');
        }
    }
    out
}

fn pad(out: &mut String, n: usize) {
    out.extend(std::iter::repeat_n(' ', n));
}

fn write_map(out: &mut String, m: &serde_json::Map<String, Value>, indent: usize) {
    let mut first = true;
    for (k, v) in m {
        if !first {
            pad(out, indent);
        }
        first = false;
        out.push_str(&key(k));
        out.push(':');
        write_value_after_key(out, v, indent);
    }
}

fn write_value_after_key(out: &mut String, v: &Value, indent: usize) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            out.push('\n');
            pad(out, indent + 4);
            write_map(out, m, indent + 4);
        }
        Value::Array(a) if !a.is_empty() => {
            out.push('\n');
            pad(out, indent + 4);
            write_seq(out, a, indent + 4);
        }
        other => {
            out.push(' ');
            out.push_str(&scalar(other, indent + 4));
            out.push('\n');
        }
    }
}

fn write_seq(out: &mut String, a: &[Value], indent: usize) {
    for (n, v) in a.iter().enumerate() {
        if n > 0 {
            pad(out, indent);
        }
        out.push_str("- ");
        match v {
            Value::Object(m) if !m.is_empty() => write_map(out, m, indent + 2),
            Value::Array(inner) if !inner.is_empty() => write_seq(out, inner, indent + 2),
            other => {
                out.push_str(&scalar(other, indent + 2));
                out.push('\n');
            }
        }
    }
}

fn key(k: &str) -> String {
    if needs_quotes(k) { quote(k, false) } else { k.to_string() }
}

fn scalar(v: &Value, indent: usize) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) if n.is_f64() => {
            let f = n.as_f64().unwrap_or_default();
            format_float(f, b'g', -1)
        }
        Value::Number(n) => n.to_string(),
        Value::String(s) => string(s, indent),
        Value::Array(_) => "[]".into(),
        Value::Object(_) => "{}".into(),
    }
}

fn string(s: &str, indent: usize) -> String {
    if s.contains('\n') && !s.contains(['\r', '\t']) && !s.starts_with(' ') {
        let chomp = if s.ends_with('\n') { if s.ends_with("\n\n") { "+" } else { "" } } else { "-" };
        let mut out = format!("|{chomp}");
        let body = s.strip_suffix('\n').unwrap_or(s);
        for line in body.split('\n') {
            out.push('\n');
            if !line.is_empty() {
                out.extend(std::iter::repeat_n(' ', indent));
                out.push_str(line);
            }
        }
        return out;
    }
    if needs_quotes(s) { quote(s, false) } else { s.to_string() }
}

/// Whether a plain scalar would not read back as this string.
fn needs_quotes(s: &str) -> bool {
    if s.is_empty() {
        return true;
    }
    let lower = s.to_ascii_lowercase();
    if matches!(lower.as_str(), "true" | "false" | "yes" | "no" | "on" | "off" | "y" | "n" | "null" | "~" | ".inf" | "-.inf" | "+.inf" | ".nan")
    {
        return true;
    }
    if looks_numeric(s) {
        return true;
    }
    let first = s.chars().next().unwrap_or(' ');
    if "-?:,[]{}#&*!|>'\"%@`".contains(first) && !(first == '-' && s.len() > 1 && !s[1..].starts_with(' ')) {
        return true;
    }
    if s.starts_with(' ') || s.ends_with(' ') || s.contains(": ") || s.contains(" #") || s.ends_with(':') {
        return true;
    }
    s.chars().any(|c| c.is_control())
}

fn looks_numeric(s: &str) -> bool {
    let t = s.strip_prefix(['+', '-']).unwrap_or(s).replace('_', "");
    if t.is_empty() {
        return false;
    }
    if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0o")).or_else(|| t.strip_prefix("0b")) {
        return !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit());
    }
    t.parse::<f64>().is_ok() && t.chars().next().is_some_and(|c| c.is_ascii_digit() || c == '.')
}

/// YAML text into a JSON value (`yaml.v3`'s `Unmarshal` into `any`: integers stay
/// integers, other numbers float64).
pub fn unmarshal(text: &str) -> Result<Value, String> {
    if text.trim().is_empty() {
        return Ok(Value::Null);
    }
    serde_yaml_ng::from_str::<Value>(text).map_err(|e| format!("yaml: {e}"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    #[test]
    fn marshals_like_yaml_v3() {
        let v = json!({"b": [1, "x", {"k": "v", "j": 2.5}], "a": {"n": null, "t": "true", "e": "", "m": {}}, "s": "line1\nline2"});
        assert_eq!(
            marshal(&v),
            "a:\n    e: \"\"\n    m: {}\n    \"n\": null\n    t: \"true\"\nb:\n    - 1\n    - x\n    - j: 2.5\n      k: v\ns: |-\n    line1\n    line2\n"
        );
        assert_eq!(marshal(&json!("plain")), "plain\n");
        assert_eq!(marshal(&json!(1000000.0)), "1e+06\n");
        assert_eq!(marshal(&json!(["1", "-x", "- y", "a: b"])), "- \"1\"\n- -x\n- \"- y\"\n- \"a: b\"\n");
    }

    #[test]
    fn round_trips() {
        let v = json!({"a": [1, {"b": "c: d", "e": ["", "yes", "12"]}], "f": "multi\nline\n", "g": 1.5});
        assert_eq!(unmarshal(&marshal(&v)).unwrap(), v);
    }
}
