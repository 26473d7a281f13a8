//! The JSONPath subset Kubernetes uses in `additionalPrinterColumns` and kubectl-style
//! expressions: `.a.b`, `.a[0]`, `.a[*]`, `['key.with.dots']` and filters such as
//! `.status.conditions[?(@.type=="Ready")].status`. Written here because the general JSONPath
//! crates differ from Kubernetes on filters and on missing keys (which must yield nothing,
//! never an error).

use serde_json::Value;

/// One step of a path.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Step {
    Field(String),
    Index(usize),
    All,
    /// `[?(@.a.b == "v")]` (also `!=`).
    Filter { path: Vec<String>, value: String, equal: bool },
}

/// A parsed path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonPath {
    steps: Vec<Step>,
}

/// A path that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid JSONPath {path:?}: {reason}")]
pub struct JsonPathError {
    /// The input.
    pub path: String,
    /// What is wrong.
    pub reason: String,
}

impl JsonPath {
    /// Parses `path` (an optional `{...}` wrapper and leading `$` are accepted).
    pub fn parse(path: &str) -> Result<JsonPath, JsonPathError> {
        let fail = |reason: &str| JsonPathError { path: path.to_string(), reason: reason.to_string() };
        let mut text = path.trim();
        if let Some(inner) = text.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
            text = inner.trim();
        }
        text = text.strip_prefix('$').unwrap_or(text);
        let chars: Vec<char> = text.chars().collect();
        let mut steps = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            match chars[i] {
                '.' => {
                    i += 1;
                    let name = field_name(&chars, &mut i);
                    if name.is_empty() {
                        if i >= chars.len() {
                            break;
                        }
                        continue;
                    }
                    if name == "*" {
                        steps.push(Step::All);
                    } else {
                        steps.push(Step::Field(name));
                    }
                }
                '[' => {
                    let close = find_close(&chars, i).ok_or_else(|| fail("unclosed '['"))?;
                    let inner: String = chars[i + 1..close].iter().collect();
                    steps.push(parse_bracket(inner.trim()).ok_or_else(|| fail("unsupported bracket expression"))?);
                    i = close + 1;
                }
                c if i == 0 && (c.is_alphanumeric() || c == '_') => {
                    // A path without a leading dot, as printer columns sometimes have.
                    steps.push(Step::Field(field_name(&chars, &mut i)));
                }
                _ => return Err(fail("unexpected character")),
            }
        }
        Ok(JsonPath { steps })
    }

    /// Every value the path selects in `root` (none if a key is missing).
    pub fn find<'a>(&self, root: &'a Value) -> Vec<&'a Value> {
        let mut current = vec![root];
        for step in &self.steps {
            let mut next = Vec::new();
            for value in current {
                match step {
                    Step::Field(name) => next.extend(value.get(name)),
                    Step::Index(i) => next.extend(value.get(*i)),
                    Step::All => match value {
                        Value::Array(items) => next.extend(items),
                        Value::Object(map) => next.extend(map.values()),
                        _ => {}
                    },
                    Step::Filter { path, value: wanted, equal } => {
                        if let Value::Array(items) = value {
                            for item in items {
                                let mut at = Some(item);
                                for key in path {
                                    at = at.and_then(|v| v.get(key));
                                }
                                let text = at.map(scalar_text);
                                let matches = text.as_deref() == Some(wanted.as_str());
                                if matches == *equal && (at.is_some() || !*equal) {
                                    next.push(item);
                                }
                            }
                        }
                    }
                }
            }
            current = next;
        }
        current
    }
}

/// Index of the `]` closing the `[` at `open`, skipping quoted text.
fn find_close(chars: &[char], open: usize) -> Option<usize> {
    let mut quote: Option<char> = None;
    let mut depth = 0;
    for (i, &c) in chars.iter().enumerate().skip(open) {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '[') => depth += 1,
            (None, ']') => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

fn unquote(text: &str) -> Option<&str> {
    let text = text.trim();
    text.strip_prefix('\'')
        .and_then(|t| t.strip_suffix('\''))
        .or_else(|| text.strip_prefix('"').and_then(|t| t.strip_suffix('"')))
}

fn parse_bracket(inner: &str) -> Option<Step> {
    if inner == "*" {
        return Some(Step::All);
    }
    if let Ok(i) = inner.parse::<usize>() {
        return Some(Step::Index(i));
    }
    if let Some(key) = unquote(inner) {
        return Some(Step::Field(key.to_string()));
    }
    let filter = inner.strip_prefix("?(")?.strip_suffix(')')?.trim();
    let (lhs, rhs, equal) = if let Some((l, r)) = filter.split_once("!=") {
        (l, r, false)
    } else if let Some((l, r)) = filter.split_once("==") {
        (l, r, true)
    } else {
        return None;
    };
    let path: Vec<String> = lhs.trim().strip_prefix("@.")?.split('.').map(String::from).collect();
    let value = unquote(rhs).map(String::from).unwrap_or_else(|| rhs.trim().to_string());
    Some(Step::Filter { path, value, equal })
}

/// A scalar as kubectl prints it: strings bare, everything else as JSON.
pub fn scalar_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A field name up to the next unescaped `.` or `[`; `\.` is a dot within the name (as in
/// `.metadata.annotations.crossplane\.io/external-name`).
fn field_name(chars: &[char], i: &mut usize) -> String {
    let mut name = String::new();
    while *i < chars.len() && chars[*i] != '.' && chars[*i] != '[' {
        if chars[*i] == '\\' && chars.get(*i + 1) == Some(&'.') {
            name.push('.');
            *i += 2;
            continue;
        }
        name.push(chars[*i]);
        *i += 1;
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn find(path: &str, doc: &Value) -> Vec<Value> {
        JsonPath::parse(path).unwrap().find(doc).into_iter().cloned().collect()
    }

    #[test]
    fn printer_column_paths() {
        let doc = json!({
            "metadata": {"name": "x", "annotations": {"crossplane.io/external-name": "ext"}},
            "spec": {"items": [1, 2]},
            "status": {"conditions": [
                {"type": "Synced", "status": "True"},
                {"type": "Ready", "status": "False", "reason": "Creating"}]}
        });
        assert_eq!(find(".metadata.name", &doc), [json!("x")]);
        assert_eq!(find("{.metadata.name}", &doc), [json!("x")]);
        assert_eq!(find(".status.conditions[?(@.type=='Ready')].status", &doc), [json!("False")]);
        assert_eq!(find(".status.conditions[?(@.type==\"Synced\")].status", &doc), [json!("True")]);
        assert_eq!(find(".status.conditions[?(@.type!='Ready')].type", &doc), [json!("Synced")]);
        assert_eq!(find(".metadata.annotations['crossplane.io/external-name']", &doc), [json!("ext")]);
        // A dot escaped with a backslash belongs to the key (as Crossplane's EXTERNAL-NAME column writes it).
        assert_eq!(find(".metadata.annotations.crossplane\\.io/external-name", &doc), [json!("ext")]);
        assert_eq!(find(".spec.items[1]", &doc), [json!(2)]);
        assert_eq!(find(".spec.items[*]", &doc), [json!(1), json!(2)]);
        assert!(find(".spec.missing.deeper", &doc).is_empty());
        assert!(find(".status.conditions[?(@.type=='Nope')].status", &doc).is_empty());
    }

    #[test]
    fn malformed_paths_are_errors() {
        assert!(JsonPath::parse(".a[").is_err());
        assert!(JsonPath::parse(".a[?(@.b ~ 1)]").is_err());
        assert!(JsonPath::parse("#").is_err());
    }
}
