//! Whether an observed object holds everything a desired one says: how provider-http compares
//! an answer with the payload and provider-kubernetes a target object with its manifest. The
//! server may add fields (defaults, bookkeeping); only what the desired value sets is compared.

use serde_json::Value;

/// Whether `have` holds everything `want` does (objects key by key, recursively; lists item by
/// item and of the same length; numbers by value, so `1` and `1.0` are equal).
pub fn contains(have: &Value, want: &Value) -> bool {
    match (have, want) {
        (Value::Object(have), Value::Object(want)) => want.iter().all(|(k, w)| have.get(k).is_some_and(|h| contains(h, w))),
        (Value::Array(have), Value::Array(want)) => want.len() == have.len() && have.iter().zip(want).all(|(h, w)| contains(h, w)),
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        _ => have == want,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn containment_is_a_subset_check() {
        assert!(contains(&json!({"a": 1, "b": {"c": 2, "d": 3}}), &json!({"b": {"c": 2}})));
        assert!(!contains(&json!({"a": 1}), &json!({"a": 2})));
        assert!(contains(&json!({"n": 1.0}), &json!({"n": 1})));
        assert!(!contains(&json!({"l": [1, 2]}), &json!({"l": [1]})));
        assert!(!contains(&json!({}), &json!({"missing": null})));
    }
}
