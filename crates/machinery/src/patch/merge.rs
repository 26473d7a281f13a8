//! JSON merge patch (RFC 7386), the `application/merge-patch+json` body.
//!
//! Owns applying a merge patch to a stored object. The walk is iterative, so a
//! deep patch cannot overflow the stack here; [`try_apply`] additionally
//! rejects inputs deeper than [`MAX_DEPTH`] for callers that go on to clone,
//! serialise or drop the result with serde_json's recursive code.

use super::{MAX_DEPTH, exceeds_depth};
use serde_json::{Map, Value};
use thiserror::Error;

/// Why a merge patch was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MergeError {
    /// The request body nests deeper than the limit.
    #[error("the merge patch is nested more than {max} levels deep")]
    PatchTooDeep {
        /// The limit that was exceeded.
        max: usize,
    },
    /// The stored object nests deeper than the limit.
    #[error("the object to patch is nested more than {max} levels deep")]
    ObjectTooDeep {
        /// The limit that was exceeded.
        max: usize,
    },
}

impl MergeError {
    /// The HTTP status a server should answer with.
    pub fn status_code(&self) -> u16 {
        match self {
            MergeError::PatchTooDeep { .. } => 400,
            MergeError::ObjectTooDeep { .. } => 422,
        }
    }
}

/// Applies merge patch `patch` to `target` and returns the patched document.
///
/// Never fails: RFC 7386 gives every pair of JSON values a result.
pub fn apply(target: &Value, patch: &Value) -> Value {
    let Value::Object(_) = patch else {
        // A non-object patch is not a set of changes but the new document.
        return patch.clone();
    };
    let mut result = match target {
        Value::Object(_) => target.clone(),
        _ => Value::Object(Map::new()),
    };
    merge_in_place(&mut result, patch);
    result
}

/// Like [`apply`], but refuses inputs nested deeper than [`MAX_DEPTH`].
pub fn try_apply(target: &Value, patch: &Value) -> Result<Value, MergeError> {
    if exceeds_depth(patch, MAX_DEPTH) {
        return Err(MergeError::PatchTooDeep { max: MAX_DEPTH });
    }
    if exceeds_depth(target, MAX_DEPTH) {
        return Err(MergeError::ObjectTooDeep { max: MAX_DEPTH });
    }
    Ok(apply(target, patch))
}

/// Merges `patch` into `root` with an explicit work list instead of recursion.
fn merge_in_place(root: &mut Value, patch: &Value) {
    let mut work: Vec<(&mut Value, &Map<String, Value>)> = Vec::new();
    if let Value::Object(p) = patch {
        work.push((root, p));
    }
    while let Some((target, patch)) = work.pop() {
        if !target.is_object() {
            // RFC 7386: an object patch applied to a non-object starts from {}.
            *target = Value::Object(Map::new());
        }
        let Value::Object(map) = target else {
            continue;
        };
        let mut deletes = false;
        for (key, value) in patch {
            match value {
                Value::Null => deletes = true,
                // Merged below, once every key of this level is in place.
                Value::Object(_) => {
                    map.entry(key.clone()).or_insert(Value::Null);
                }
                other => {
                    map.insert(key.clone(), other.clone());
                }
            }
        }
        if deletes {
            // One retain pass rather than a remove per key: Map::remove
            // reorders the remaining keys when serde_json is built with
            // preserve_order, and retain keeps them in place either way.
            map.retain(|key, _| !patch.get(key).is_some_and(Value::is_null));
        }
        for (key, slot) in map.iter_mut() {
            if let Some(Value::Object(sub)) = patch.get(key) {
                work.push((slot, sub));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{drop_deep, nested_objects};
    use super::*;
    use serde_json::json;

    #[test]
    fn rfc7386_examples() {
        // Appendix A of RFC 7386: (target, patch, result).
        let cases = [
            (json!({"a":"b"}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"b"}), json!({"b":"c"}), json!({"a":"b","b":"c"})),
            (json!({"a":"b"}), json!({"a":null}), json!({})),
            (
                json!({"a":"b","b":"c"}),
                json!({"a":null}),
                json!({"b":"c"}),
            ),
            (json!({"a":["b"]}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"c"}), json!({"a":["b"]}), json!({"a":["b"]})),
            (
                json!({"a":{"b":"c"}}),
                json!({"a":{"b":"d","c":null}}),
                json!({"a":{"b":"d"}}),
            ),
            (json!({"a":[{"b":"c"}]}), json!({"a":[1]}), json!({"a":[1]})),
            (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
            (json!({"a":"b"}), json!(["c"]), json!(["c"])),
            (json!({"a":"foo"}), json!(null), json!(null)),
            (json!({"a":"foo"}), json!("bar"), json!("bar")),
            (json!({"e":null}), json!({"a":1}), json!({"e":null,"a":1})),
            (json!([1, 2]), json!({"a":"b","c":null}), json!({"a":"b"})),
            (
                json!({}),
                json!({"a":{"bb":{"ccc":null}}}),
                json!({"a":{"bb":{}}}),
            ),
        ];
        for (target, patch, expected) in cases {
            assert_eq!(apply(&target, &patch), expected, "{target} + {patch}");
        }
    }

    #[test]
    fn kubernetes_shaped_patches() {
        let cases = [
            // Adding a label keeps the others.
            (
                json!({"metadata":{"name":"x","labels":{"a":"1"}}}),
                json!({"metadata":{"labels":{"b":"2"}}}),
                json!({"metadata":{"name":"x","labels":{"a":"1","b":"2"}}}),
            ),
            // Removing an annotation with null.
            (
                json!({"metadata":{"annotations":{"a":"1","b":"2"}}}),
                json!({"metadata":{"annotations":{"a":null}}}),
                json!({"metadata":{"annotations":{"b":"2"}}}),
            ),
            // Lists are always replaced, finalizers included.
            (
                json!({"metadata":{"finalizers":["a","b"]}}),
                json!({"metadata":{"finalizers":["c"]}}),
                json!({"metadata":{"finalizers":["c"]}}),
            ),
            // Deleting a key that is not there is not an error.
            (
                json!({"data":{}}),
                json!({"data":{"gone":null}}),
                json!({"data":{}}),
            ),
            // An empty patch changes nothing.
            (json!({"a":{"b":1}}), json!({}), json!({"a":{"b":1}})),
        ];
        for (target, patch, expected) in cases {
            assert_eq!(apply(&target, &patch), expected, "{target} + {patch}");
        }
    }

    #[test]
    fn try_apply_rejects_deep_inputs() {
        let deep = nested_objects(MAX_DEPTH + 1);
        assert_eq!(
            try_apply(&json!({}), &deep),
            Err(MergeError::PatchTooDeep { max: MAX_DEPTH })
        );
        assert_eq!(
            try_apply(&deep, &json!({})),
            Err(MergeError::ObjectTooDeep { max: MAX_DEPTH })
        );
        assert_eq!(MergeError::PatchTooDeep { max: 1 }.status_code(), 400);
        let ok = nested_objects(MAX_DEPTH);
        assert_eq!(try_apply(&json!({}), &ok), Ok(ok.clone()));
        drop_deep(deep);
    }

    #[test]
    fn apply_is_iterative() {
        // Far deeper than any stack could recurse through. merge_in_place is
        // called directly because cloning the input is serde_json's recursion,
        // not ours.
        let depth = 20_000;
        let mut patch = json!(1);
        for _ in 0..depth {
            // Not json!: it would re-serialise `patch` recursively.
            let mut level = Map::new();
            level.insert("a".to_string(), patch);
            patch = Value::Object(level);
        }
        let mut result = Value::Object(Map::new());
        merge_in_place(&mut result, &patch);
        assert_eq!(super::super::depth_of(&result), depth);
        drop_deep(result);
        drop_deep(patch);
    }
}
