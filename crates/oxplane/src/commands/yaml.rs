//! Block YAML as Kubernetes' Go tools print objects (`sigs.k8s.io/yaml` over `yaml.v2`): keys
//! sorted, sequences not indented under their key, strings quoted only when they would read
//! back as something else. `trace -o yaml` and `render` print with it. Written here because
//! the YAML crates at hand indent sequences and quote differently, and users diff this output
//! against Crossplane's.

use std::fmt::Write as _;

use serde_json::Value;

/// Block YAML in the style of Go's YAML library as Kubernetes tools use it: keys sorted,
/// sequences not indented under their key, strings quoted only when they would read as
/// something else. No trailing newline.
pub fn yaml(value: &Value, indent: usize) -> String {
    let mut out = String::new();
    yaml_into(&mut out, value, indent);
    out.trim_end_matches('\n').to_string()
}

fn yaml_into(out: &mut String, value: &Value, indent: usize) {
    let pad = " ".repeat(indent);
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, v) in map {
                let _ = write!(out, "{pad}{}:", yaml_scalar(key));
                match v {
                    Value::Object(m) if !m.is_empty() => {
                        out.push('\n');
                        yaml_into(out, v, indent + 2);
                    }
                    Value::Array(a) if !a.is_empty() => {
                        out.push('\n');
                        yaml_into(out, v, indent);
                    }
                    _ => {
                        let _ = writeln!(out, " {}", yaml_inline(v));
                    }
                }
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for item in items {
                match item {
                    Value::Object(m) if !m.is_empty() => {
                        let mut nested = String::new();
                        yaml_into(&mut nested, item, indent + 2);
                        // The first line's indentation becomes "- ".
                        let _ = write!(out, "{pad}- {}", &nested[indent + 2..]);
                    }
                    Value::Array(a) if !a.is_empty() => {
                        let mut nested = String::new();
                        yaml_into(&mut nested, item, indent + 2);
                        let _ = write!(out, "{pad}- {}", &nested[indent + 2..]);
                    }
                    _ => {
                        let _ = writeln!(out, "{pad}- {}", yaml_inline(item));
                    }
                }
            }
        }
        other => {
            let _ = writeln!(out, "{pad}{}", yaml_inline(other));
        }
    }
}

fn yaml_inline(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => yaml_scalar(s),
        Value::Array(_) => "[]".into(),
        Value::Object(_) => "{}".into(),
    }
}

/// A string as a YAML scalar: plain when it reads back as the same string, single-quoted when
/// only its punctuation forbids plain, double-quoted when it holds control characters.
fn yaml_scalar(s: &str) -> String {
    let reads_as_other = matches!(
        s.to_ascii_lowercase().as_str(),
        "" | "~" | "null" | "true" | "false" | "yes" | "no" | "on" | "off" | "y" | "n" | ".nan" | ".inf" | "-.inf" | "+.inf"
    ) || s.parse::<f64>().is_ok()
        || s.starts_with("0x")
        || s.starts_with("0o")
        || is_timestamp(s);
    if s.chars().any(|c| c.is_control()) {
        return serde_json::to_string(s).unwrap_or_default();
    }
    if reads_as_other {
        return format!("\"{s}\"");
    }
    let first = s.chars().next().unwrap_or(' ');
    let plain = !matches!(first, '-' | '?' | ':' | ',' | '[' | ']' | '{' | '}' | '#' | '&' | '*' | '!' | '|' | '>' | '\'' | '"' | '%' | '@' | '`' | ' ')
        && !s.ends_with(' ')
        && !s.contains(": ")
        && !s.contains(" #")
        && !s.ends_with(':');
    if plain { s.to_string() } else { format!("'{}'", s.replace('\'', "''")) }
}

/// Whether YAML reads `s` as a timestamp (`2024-01-01`, `2024-01-01T00:00:00Z`,
/// `2024-1-2 3:04:05`), which Go's YAML library quotes so it stays a string.
fn is_timestamp(s: &str) -> bool {
    let digits = |part: &str, min: usize, max: usize| (min..=max).contains(&part.len()) && part.bytes().all(|b| b.is_ascii_digit());
    let (date, time) = match s.find(['T', 't', ' ']) {
        Some(at) => (&s[..at], Some(&s[at + 1..])),
        None => (s, None),
    };
    let mut parts = date.split('-');
    let date_ok = matches!((parts.next(), parts.next(), parts.next(), parts.next()),
        (Some(y), Some(m), Some(d), None) if digits(y, 4, 4) && digits(m, 1, 2) && digits(d, 1, 2));
    date_ok && time.is_none_or(|time| time.split(':').count() == 3 && time.split(':').next().is_some_and(|h| digits(h, 1, 2)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_that_read_as_other_types_are_quoted() {
        for (input, printed) in [
            ("2024-01-01T00:00:00Z", "\"2024-01-01T00:00:00Z\""),
            ("2024-01-01", "\"2024-01-01\""),
            ("2024-1-2 3:04:05", "\"2024-1-2 3:04:05\""),
            ("True", "\"True\""),
            ("12", "\"12\""),
            ("db.t3.micro", "db.t3.micro"),
            ("1s", "1s"),
            ("2024-01", "2024-01"),
            ("Unready resources: a", "'Unready resources: a'"),
        ] {
            assert_eq!(yaml_scalar(input), printed, "{input}");
        }
    }
}
