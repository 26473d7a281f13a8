//! JSON value helpers shared by the walkers: nesting depth, numeric
//! comparison, semantic equality (so `1` equals `1.0`, as after Kubernetes'
//! JSON decoding), canonical keys for duplicate detection, and rendering of
//! values and paths in Kubernetes' message style.

use std::cmp::Ordering;
use std::fmt::Write;

use serde_json::{Number, Value};

/// Whether `value` nests containers more than `max` levels deep (iterative, so it cannot overflow).
pub(super) fn depth_exceeds(value: &Value, max: usize) -> bool {
    let mut stack: Vec<(&Value, usize)> = vec![(value, 1)];
    while let Some((v, depth)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match v {
            Value::Array(items) => Box::new(items.iter()),
            Value::Object(map) => Box::new(map.values()),
            _ => continue,
        };
        if depth > max {
            return true;
        }
        stack.extend(children.map(|c| (c, depth + 1)));
    }
    false
}

/// Whether a JSON number is integral (3 and 3.0 both are; Kubernetes treats 3.0 as an integer).
pub(super) fn is_integer(n: &Number) -> bool {
    if n.is_i64() || n.is_u64() {
        return true;
    }
    n.as_f64()
        .is_some_and(|f| f.is_finite() && f.fract() == 0.0)
}

/// Kubernetes' name for a value's JSON type, used in type errors.
pub(super) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if is_integer(n) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Compares two numbers exactly when both are integers that fit 64 bits, otherwise as f64.
pub(super) fn cmp_numbers(a: &Number, b: &Number) -> Option<Ordering> {
    match (as_i128(a), as_i128(b)) {
        (Some(x), Some(y)) => Some(x.cmp(&y)),
        _ => a.as_f64()?.partial_cmp(&b.as_f64()?),
    }
}

/// The number as i128 when it is stored as an integer (not as a float).
fn as_i128(n: &Number) -> Option<i128> {
    n.as_i64()
        .map(i128::from)
        .or_else(|| n.as_u64().map(i128::from))
}

/// Whether `n` is a multiple of `m` (`m` > 0 is guaranteed at compile time).
pub(super) fn is_multiple_of(n: &Number, m: &Number) -> bool {
    if let (Some(a), Some(b)) = (as_i128(n), as_i128(m)) {
        return b != 0 && a.checked_rem(b) == Some(0);
    }
    match (n.as_f64(), m.as_f64()) {
        (Some(a), Some(b)) if b != 0.0 => {
            let q = a / b;
            q.is_finite() && (q - q.round()).abs() <= 1e-9 * q.abs().max(1.0)
        }
        _ => false,
    }
}

/// Semantic JSON equality: numbers compare by value, objects ignore key order.
pub(crate) fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => cmp_numbers(x, y) == Some(Ordering::Equal),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_equal(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}

/// A canonical string for a value (sorted keys, normalised numbers), for O(n) duplicate detection.
///
/// Sorting keys ourselves matters because serde_json's `preserve_order`
/// feature, if enabled elsewhere in the build, changes map iteration order.
pub(super) fn canonical(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Number(n) => out.push_str(&canonical_number(n)),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String((*key).clone()).to_string());
                out.push(':');
                if let Some(v) = map.get(*key) {
                    write_canonical(v, out);
                }
            }
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// Integral numbers print as integers whatever their storage, so 1 and 1.0 share a key.
fn canonical_number(n: &Number) -> String {
    if let Some(i) = as_i128(n) {
        return i.to_string();
    }
    match n.as_f64() {
        Some(f) if f.fract() == 0.0 && f.abs() < 1e18 => format!("{}", f as i64),
        Some(f) => format!("{f:?}"),
        None => n.to_string(),
    }
}

/// Renders a number the way Go's `%v` would for JSON-decoded values (10.0 prints as 10).
pub(super) fn render_number(n: &Number) -> String {
    match n.as_f64() {
        Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", f as i64),
        _ => n.to_string(),
    }
}

/// Longest rendering of a value inside a message; big objects are cut so errors stay readable.
const RENDER_LIMIT: usize = 256;

/// Renders a value for a message: JSON, strings quoted, long renderings shortened with `...`.
pub(super) fn render(value: &Value) -> String {
    let full = match value {
        Value::Number(n) => render_number(n),
        other => other.to_string(),
    };
    if full.len() <= RENDER_LIMIT {
        return full;
    }
    let mut cut = RENDER_LIMIT;
    while !full.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut short = full[..cut].to_string();
    short.push_str("...");
    short
}

/// Renders a string as a quoted JSON string.
pub(super) fn quote(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

/// Field path of a property: `spec` + `replicas` → `spec.replicas`.
pub(super) fn child_path(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_string()
    } else {
        format!("{parent}.{name}")
    }
}

/// Field path of an array element: `spec.items` + 2 → `spec.items[2]`.
pub(super) fn index_path(parent: &str, index: usize) -> String {
    let mut s = String::with_capacity(parent.len() + 6);
    s.push_str(parent);
    let _ = write!(s, "[{index}]");
    s
}

/// Field path of a map entry: `spec.labels` + `key` → `spec.labels[key]`.
pub(super) fn key_path(parent: &str, key: &str) -> String {
    format!("{parent}[{key}]")
}
