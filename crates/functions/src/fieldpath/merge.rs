//! Merging a value into what a field already holds, as patch `toFieldPath` policies ask.
//!
//! Crossplane merges with the `mergo` library under two switches, and users see the results
//! of those rules, so they are kept here:
//! - `keep_map_values` (`MergeObjects*`): a key the destination already has keeps its value,
//!   unless that value is empty (null, `false`, `0`, `""`, `[]`, `{}`), which the source fills.
//!   Without it (`ForceMergeObjects*`) the source wins.
//! - `append_slice` (`*AppendArrays`): where both sides hold arrays, the source's elements that
//!   the destination does not already hold are appended. Without it arrays follow the rule
//!   above like any other value.
//!
//! Objects on both sides always merge key by key, recursively. Two deliberate differences from
//! mergo's accidents: with `Force*` a source object replaces a destination scalar (mergo kept
//! the scalar), and duplicates are left out when appending at every depth, not only at the top.

use serde_json::Value;

/// How a value is merged into an existing one. `None` in place of options means "replace".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MergeOptions {
    /// Keep values the destination already has (`MergeObjects`).
    pub keep_map_values: bool,
    /// Append arrays instead of replacing them (`*AppendArrays`).
    pub append_slice: bool,
}

/// `src` merged into `dst` under `options`. A null on either side yields `src`.
pub fn merge_values(dst: Value, src: Value, options: &MergeOptions) -> Value {
    if dst.is_null() || src.is_null() {
        return src;
    }
    merge_entry(dst, src, options)
}

fn merge_entry(dst: Value, src: Value, options: &MergeOptions) -> Value {
    match (dst, src) {
        (Value::Object(mut dst), Value::Object(src)) => {
            for (key, src_value) in src {
                let merged = match dst.remove(&key) {
                    Some(dst_value) => merge_entry(dst_value, src_value, options),
                    None => src_value,
                };
                dst.insert(key, merged);
            }
            Value::Object(dst)
        }
        (Value::Array(mut dst), Value::Array(src)) if options.append_slice => {
            let new: Vec<Value> =
                src.into_iter().filter(|s| !dst.iter().any(|d| values_equal(d, s))).collect();
            dst.extend(new);
            Value::Array(dst)
        }
        (dst, Value::Null) => {
            if options.keep_map_values {
                dst
            } else {
                Value::Null
            }
        }
        (dst, src) => {
            if !options.keep_map_values || is_empty(&dst) {
                src
            } else {
                dst
            }
        }
    }
}

/// Whether a value is "empty" in mergo's sense (Go's zero value or an empty collection).
pub(crate) fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

/// JSON equality where numbers compare by value, so `5` equals `5.0` (Crossplane holds every
/// number as a float64 on one side and may hold it as an int64 on the other).
pub(crate) fn values_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if let (Some(x), Some(y)) = (x.as_i64(), y.as_i64()) {
                x == y
            } else {
                x.as_f64() == y.as_f64()
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| values_equal(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| values_equal(v, w)))
        }
        _ => a == b,
    }
}
