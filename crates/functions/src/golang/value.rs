//! Which Go type a JSON value stands for, and the two number views Crossplane uses.
//!
//! Crossplane passes resources to functions as protobuf `Struct`s, where every number is a
//! float64; a function that computes a number (a `convert` to `int64`, a `ClampMin` bound)
//! may produce an int64. Go's formatting differs between the two (`%d` of a float64 is an
//! error form), so a value keeps its Go type in its JSON number: a float number
//! ([`serde_json::Number::is_f64`]) is a float64, an integer number is an int64.
//! [`as_float64`] turns what a function reads into the float64 view; [`as_kubernetes`] turns
//! what a function writes into what Kubernetes' JSON decoding would hold (integral numbers
//! as integers), which is also how the result serializes (`5`, not `5.0`).

use serde_json::{Number, Value};

/// The Go type a JSON value stands for, as Go's `%T` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GoType {
    /// A nil interface (JSON null).
    Nil,
    /// `bool`.
    Bool,
    /// `float64`.
    Float64,
    /// `int64`.
    Int64,
    /// `string`.
    String,
    /// `[]interface {}`.
    Slice,
    /// `map[string]interface {}`.
    Map,
}

impl GoType {
    /// The Go type of a value.
    pub fn of(value: &Value) -> GoType {
        match value {
            Value::Null => GoType::Nil,
            Value::Bool(_) => GoType::Bool,
            Value::Number(n) if n.is_f64() => GoType::Float64,
            Value::Number(_) => GoType::Int64,
            Value::String(_) => GoType::String,
            Value::Array(_) => GoType::Slice,
            Value::Object(_) => GoType::Map,
        }
    }

    /// The type's name as `%T` prints it (`<nil>` for a nil interface).
    pub fn name(self) -> &'static str {
        match self {
            GoType::Nil => "<nil>",
            GoType::Bool => "bool",
            GoType::Float64 => "float64",
            GoType::Int64 => "int64",
            GoType::String => "string",
            GoType::Slice => "[]interface {}",
            GoType::Map => "map[string]interface {}",
        }
    }
}

/// A float64 JSON number (`null` for NaN and infinities, which JSON cannot hold).
pub fn float(f: f64) -> Value {
    Number::from_f64(f).map_or(Value::Null, Value::Number)
}

/// The value as a function reads it from a protobuf `Struct`: every number a float64.
pub fn as_float64(value: Value) -> Value {
    match value {
        Value::Number(n) if !n.is_f64() => n.as_f64().map_or(Value::Number(n), float),
        Value::Array(items) => Value::Array(items.into_iter().map(as_float64).collect()),
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, as_float64(v))).collect()),
        other => other,
    }
}

/// The value as Kubernetes' JSON decoding would hold it after a round trip: a float64 that
/// is integral (and fits an int64) becomes an integer, so it serializes as `5`, not `5.0`.
pub fn as_kubernetes(value: Value) -> Value {
    match value {
        Value::Number(n) => match n.as_f64() {
            // 2^63 is the first float64 an int64 cannot hold.
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 9_223_372_036_854_775_808.0 => {
                Value::from(f as i64)
            }
            _ => Value::Number(n),
        },
        Value::Array(items) => Value::Array(items.into_iter().map(as_kubernetes).collect()),
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, as_kubernetes(v))).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use serde_json::json;

    use super::*;

    #[test]
    fn types_follow_the_number_kind() {
        assert_eq!(GoType::of(&json!(5.0)), GoType::Float64);
        assert_eq!(GoType::of(&json!(5)), GoType::Int64);
        assert_eq!(GoType::of(&json!(null)).name(), "<nil>");
        assert_eq!(GoType::of(&json!({})).name(), "map[string]interface {}");
        assert_eq!(GoType::of(&json!([])).name(), "[]interface {}");
    }

    #[test]
    fn number_views_round_trip() {
        let read = as_float64(json!({"a": [1, 2.5], "b": "s", "c": 7}));
        assert!(read["a"][0].is_f64());
        assert!(read["c"].is_f64());
        let written = as_kubernetes(read);
        assert_eq!(written, json!({"a": [1, 2.5], "b": "s", "c": 7}));
        assert!(written["c"].is_i64());
        assert!(written["a"][1].is_f64());
        assert!(as_kubernetes(float(1e300)).is_f64());
    }
}
