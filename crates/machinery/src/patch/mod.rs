//! PATCH bodies for stored objects: JSON merge patch ([`merge`]), JSON Patch
//! ([`json_patch`]) and Kubernetes strategic merge patch ([`strategic`]).
//!
//! This file owns what the three share: the nesting limit and the helpers
//! that enforce it without recursion, value comparison and rendering for
//! messages, and the patch metadata of the built-in kinds ([`for_kind`]),
//! which is data about Kubernetes types rather than part of the merge.
//!
//! Every entry point takes the stored object and the request body as
//! `serde_json::Value`s and returns a new value, so a failed patch leaves the
//! stored object untouched. Bodies come straight from HTTP clients: no path
//! panics, and recursive code only runs on values checked against
//! [`MAX_DEPTH`].

pub mod json_patch;
pub mod merge;
pub mod strategic;

pub use json_patch::JsonPatchError;
pub use merge::MergeError;
pub use strategic::{ListStrategy, NoSchema, PatchSchema, StrategicError};

use serde_json::Value;

// JSON equality where numbers compare by value (`1` equals `1.0`, as Go's float64 decoding
// makes them for the Kubernetes API server) and integers exactly: one definition, the schema's.
pub(crate) use crate::schema::json::json_equal;

/// The deepest nesting of arrays and objects a patch or document may have.
///
/// serde_json's parser already stops at 128 levels, so anything parsed from a
/// request fits; the limit guards values built some other way and keeps every
/// recursive walk here far from the end of a 2 MiB async worker stack.
pub const MAX_DEPTH: usize = 256;

/// The patch metadata of a built-in kind, ObjectMeta's lists included.
#[derive(Debug)]
pub struct BuiltinSchema {
    kind: &'static str,
    lists: &'static [ListRule],
}

/// A list's field path and how it merges.
type ListRule = (&'static [&'static str], Rule);

/// [`ListStrategy`] without the allocation, so schemas can be statics.
#[derive(Debug, Clone, Copy)]
enum Rule {
    Key(&'static str),
    Primitives,
    Replace,
}

const OBJECT_META_LISTS: &[ListRule] = &[
    (&["metadata", "ownerReferences"], Rule::Key("uid")),
    (&["metadata", "finalizers"], Rule::Primitives),
    (&["metadata", "managedFields"], Rule::Replace),
];

const fn builtin(kind: &'static str, lists: &'static [ListRule]) -> BuiltinSchema {
    BuiltinSchema { kind, lists }
}

/// Kinds whose only merge lists are ObjectMeta's; their other lists replace.
pub static OBJECT_META_ONLY: BuiltinSchema = builtin("", &[]);

static BUILTINS: &[BuiltinSchema] = &[
    builtin(
        "ServiceAccount",
        &[
            (&["secrets"], Rule::Key("name")),
            (&["imagePullSecrets"], Rule::Key("name")),
        ],
    ),
    builtin("Namespace", &[(&["spec", "finalizers"], Rule::Primitives)]),
    // Data maps merge like any other map, so these need nothing beyond metadata.
    builtin("ConfigMap", &[]),
    builtin("Secret", &[]),
    builtin("Event", &[]),
];

impl BuiltinSchema {
    /// The kind this schema describes (empty for [`OBJECT_META_ONLY`]).
    pub fn kind(&self) -> &'static str {
        self.kind
    }
}

impl PatchSchema for BuiltinSchema {
    fn list_strategy(&self, path: &[&str]) -> ListStrategy {
        let rule = OBJECT_META_LISTS
            .iter()
            .chain(self.lists)
            .find(|r| r.0 == path);
        match rule.map(|r| r.1) {
            Some(Rule::Key(key)) => ListStrategy::MergeByKey(key.to_string()),
            Some(Rule::Primitives) => ListStrategy::MergePrimitives,
            Some(Rule::Replace) | None => ListStrategy::Replace,
        }
    }
}

/// The schema of built-in kind `kind` (e.g. `"ServiceAccount"`), if known.
///
/// Kubernetes refuses strategic merge patches for kinds without patch
/// metadata (custom resources) with 415, so an unknown kind is `None` rather
/// than a silent fallback; callers that want one can use [`OBJECT_META_ONLY`].
pub fn for_kind(kind: &str) -> Option<&'static dyn PatchSchema> {
    BUILTINS
        .iter()
        .find(|s| s.kind == kind)
        .map(|s| s as &'static dyn PatchSchema)
}

/// Whether `value` nests arrays and objects more than `max` levels deep.
///
/// Walks with an explicit stack, because its whole point is to be safe on
/// values too deep for recursion.
pub fn exceeds_depth(value: &Value, max: usize) -> bool {
    let mut stack: Vec<(&Value, usize)> = vec![(value, 1)];
    while let Some((v, level)) = stack.pop() {
        match v {
            Value::Array(items) if level <= max => {
                stack.extend(items.iter().map(|c| (c, level + 1)))
            }
            Value::Object(map) if level <= max => {
                stack.extend(map.values().map(|c| (c, level + 1)))
            }
            Value::Array(_) | Value::Object(_) => return true,
            _ => {}
        }
    }
    false
}

/// How many levels of arrays and objects `value` nests (a scalar is 0).
pub fn depth_of(value: &Value) -> usize {
    measure(value).0
}

/// The depth of `value`, as [`depth_of`], and roughly how many bytes it
/// takes as JSON, from one walk with an explicit stack.
fn measure(value: &Value) -> (usize, usize) {
    let (mut deepest, mut size) = (0usize, 0usize);
    let mut stack: Vec<(&Value, usize)> = vec![(value, 1)];
    while let Some((v, level)) = stack.pop() {
        size = size.saturating_add(match v {
            Value::String(s) => s.len().saturating_add(2),
            Value::Array(items) => {
                stack.extend(items.iter().map(|c| (c, level + 1)));
                deepest = deepest.max(level);
                items.len().saturating_add(2)
            }
            Value::Object(map) => {
                stack.extend(map.values().map(|c| (c, level + 1)));
                deepest = deepest.max(level);
                map.keys()
                    .fold(2usize, |n, k| n.saturating_add(k.len() + 4))
            }
            _ => 6,
        });
    }
    (deepest, size)
}

/// A short name for the JSON type of `value`, for error messages.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Compact JSON for messages, shortened by [`shorten`].
fn render(value: &Value) -> String {
    shorten(value.to_string())
}

/// Cuts text for a message to a couple of hundred bytes, so that one huge
/// value or path from a request cannot bloat a response or a log line.
fn shorten(mut text: String) -> String {
    const LIMIT: usize = 200;
    if text.len() > LIMIT {
        let cut = (0..=LIMIT)
            .rev()
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(0);
        text.truncate(cut);
        text.push('…');
    }
    text
}

/// Helpers shared by the tests of the three patch kinds.
#[cfg(test)]
mod test_support {
    use proptest::prelude::*;
    use serde_json::{Map, Value};

    /// Scalars of every JSON type, `null` only when asked for.
    pub(super) fn arb_scalar(allow_null: bool) -> BoxedStrategy<Value> {
        let non_null = prop_oneof![
            any::<bool>().prop_map(Value::Bool),
            (-5i64..5).prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            (-100.0f64..100.0).prop_map(Value::from),
            "[a-c]{0,3}".prop_map(Value::from),
        ];
        if allow_null {
            prop_oneof![1 => Just(Value::Null), 6 => non_null].boxed()
        } else {
            non_null.boxed()
        }
    }

    /// Small JSON documents whose object keys match `keys`, so that two
    /// generated values share keys often enough to exercise merging.
    pub(super) fn arb_value(allow_null: bool, keys: &'static str) -> BoxedStrategy<Value> {
        arb_tree(arb_scalar(allow_null), keys)
    }

    /// Small JSON documents with leaves from `leaf` and keys matching `keys`.
    pub(super) fn arb_tree(leaf: BoxedStrategy<Value>, keys: &'static str) -> BoxedStrategy<Value> {
        leaf.prop_recursive(4, 40, 4, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                arb_object_of(inner, keys),
            ]
        })
        .boxed()
    }

    /// Objects whose values come from `values`.
    pub(super) fn arb_object_of(
        values: BoxedStrategy<Value>,
        keys: &'static str,
    ) -> BoxedStrategy<Value> {
        prop::collection::btree_map(keys, values, 0..4)
            .prop_map(|m| Value::Object(m.into_iter().collect::<Map<String, Value>>()))
            .boxed()
    }

    /// Builds `{"a":{"a":...}}` `levels` deep without recursion.
    pub(super) fn nested_objects(levels: usize) -> Value {
        let mut v = Value::Object(Map::new());
        for _ in 1..levels {
            let mut m = Map::new();
            m.insert("a".to_string(), v);
            v = Value::Object(m);
        }
        v
    }

    /// Builds `[[[...]]]` `levels` deep without recursion.
    pub(super) fn nested_arrays(levels: usize) -> Value {
        let mut v = Value::Array(Vec::new());
        for _ in 1..levels {
            v = Value::Array(vec![v]);
        }
        v
    }

    /// Takes a deep value apart level by level, because serde_json's own drop
    /// recurses and would overflow the test thread's stack.
    pub(super) fn drop_deep(mut v: Value) {
        loop {
            v = match v {
                Value::Array(mut items) => match items.pop() {
                    Some(inner) => inner,
                    None => return,
                },
                Value::Object(map) => match map.into_iter().next() {
                    Some((_, inner)) => inner,
                    None => return,
                },
                _ => return,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::{drop_deep, nested_arrays, nested_objects};
    use super::*;
    use serde_json::json;

    #[test]
    fn depth_counts_containers() {
        let cases = [
            (json!(1), 0),
            (json!({}), 1),
            (json!({"a": [1, {"b": {}}]}), 4),
            (json!([[], [[[]]]]), 4),
        ];
        for (value, depth) in cases {
            assert_eq!(depth_of(&value), depth, "{value}");
            assert!(!exceeds_depth(&value, depth), "{value}");
            assert_eq!(exceeds_depth(&value, depth.saturating_sub(1)), depth > 0);
        }
    }

    #[test]
    fn depth_check_survives_very_deep_values() {
        for deep in [nested_arrays(100_000), nested_objects(100_000)] {
            assert!(exceeds_depth(&deep, MAX_DEPTH));
            assert_eq!(depth_of(&deep), 100_000);
            drop_deep(deep);
        }
    }

    #[test]
    fn knows_the_builtin_kinds() {
        let strategy = |kind: &str, path: &[&str]| for_kind(kind).map(|s| s.list_strategy(path));
        let key = |k: &str| Some(ListStrategy::MergeByKey(k.to_string()));
        for kind in [
            "ServiceAccount",
            "Namespace",
            "ConfigMap",
            "Secret",
            "Event",
        ] {
            assert_eq!(strategy(kind, &["metadata", "ownerReferences"]), key("uid"));
            let finalizers = strategy(kind, &["metadata", "finalizers"]);
            assert_eq!(finalizers, Some(ListStrategy::MergePrimitives));
            let managed = strategy(kind, &["metadata", "managedFields"]);
            assert_eq!(managed, Some(ListStrategy::Replace));
        }
        assert_eq!(strategy("ServiceAccount", &["secrets"]), key("name"));
        assert_eq!(
            strategy("ServiceAccount", &["imagePullSecrets"]),
            key("name")
        );
        let ns = strategy("Namespace", &["spec", "finalizers"]);
        assert_eq!(ns, Some(ListStrategy::MergePrimitives));
        assert_eq!(
            strategy("ConfigMap", &["secrets"]),
            Some(ListStrategy::Replace)
        );
        assert!(for_kind("Widget").is_none() && for_kind("configmap").is_none());
        assert_eq!(
            OBJECT_META_ONLY.list_strategy(&["metadata", "ownerReferences"]),
            key("uid").unwrap_or_default()
        );
        assert_eq!(OBJECT_META_ONLY.kind(), "");
    }
}

/// The properties the brief asks of all three patch kinds, on random input.
#[cfg(test)]
mod properties {
    use super::test_support::{arb_object_of, arb_scalar, arb_tree, arb_value};
    use super::*;
    use proptest::prelude::*;
    use serde_json::{Map, json};

    /// A merge patch that turns `a` into `b`, built the straightforward way.
    fn diff(a: &Value, b: &Value) -> Value {
        match (a, b) {
            (Value::Object(a), Value::Object(b)) => {
                let mut patch = Map::new();
                for key in a.keys() {
                    if !b.contains_key(key) {
                        patch.insert(key.clone(), Value::Null);
                    }
                }
                for (key, bv) in b {
                    match a.get(key) {
                        Some(av) if av == bv => {}
                        Some(av) if av.is_object() && bv.is_object() => {
                            patch.insert(key.clone(), diff(av, bv));
                        }
                        _ => {
                            patch.insert(key.clone(), bv.clone());
                        }
                    }
                }
                Value::Object(patch)
            }
            _ => b.clone(),
        }
    }

    /// A document, a pointer into it and the value found there.
    fn doc_and_path() -> impl Strategy<Value = (Value, String, Value)> {
        let walk = prop::collection::vec(any::<prop::sample::Index>(), 0..5);
        (arb_value(true, "[a~/0-]{0,2}"), walk).prop_map(|(doc, walk)| {
            let (mut path, mut cur) = (String::new(), &doc);
            for step in walk {
                let (token, next) = match cur {
                    Value::Array(a) if !a.is_empty() => {
                        let i = step.index(a.len());
                        (i.to_string(), &a[i])
                    }
                    Value::Object(m) if !m.is_empty() => match m.iter().nth(step.index(m.len())) {
                        Some((k, v)) => (k.replace('~', "~0").replace('/', "~1"), v),
                        None => break,
                    },
                    _ => break,
                };
                path = format!("{path}/{token}");
                cur = next;
            }
            let found = cur.clone();
            (doc, path, found)
        })
    }

    /// Operations built from plausible parts, so that many get past
    /// validation and exercise the appliers.
    fn arb_ops() -> impl Strategy<Value = Value> {
        let op = prop_oneof![
            Just("add"),
            Just("remove"),
            Just("replace"),
            Just("move"),
            Just("copy"),
            Just("test"),
            Just("x"),
        ];
        let ptr = "(/(a|b|0|1|-|~0|~1|~|0[0-9]|[0-9]{1,21}))*";
        let one = (op, ptr, ptr, arb_value(true, "[ab]"), 0..4u8).prop_map(
            |(op, path, from, value, omit)| {
                let mut m = Map::new();
                m.insert("op".into(), json!(op));
                for (i, key, v) in [
                    (1, "path", json!(path)),
                    (2, "from", json!(from)),
                    (3, "value", value),
                ] {
                    if omit != i {
                        m.insert(key.into(), v);
                    }
                }
                Value::Object(m)
            },
        );
        prop::collection::vec(one, 0..6).prop_map(Value::Array)
    }

    /// Strategic patches full of directives, aimed at the lists of [`Fuzz`].
    fn arb_strategic_patch() -> BoxedStrategy<Value> {
        let leaf = prop_oneof![
            arb_scalar(true),
            "replace|delete|merge|[ab]|name".prop_map(Value::from),
        ];
        let keys = "\\$patch|\\$retainKeys|\\$setElementOrder/[abc]|\\$deleteFromPrimitiveList/[abc]|[abc]|name";
        arb_object_of(arb_tree(leaf.boxed(), keys), keys)
    }

    /// A schema with every kind of list: `a` by key, `b` primitives, `c` atomic.
    struct Fuzz;

    impl PatchSchema for Fuzz {
        fn list_strategy(&self, path: &[&str]) -> ListStrategy {
            match path.last() {
                Some(&"a") => ListStrategy::MergeByKey("name".to_string()),
                Some(&"b") => ListStrategy::MergePrimitives,
                _ => ListStrategy::Replace,
            }
        }

        fn is_atomic_map(&self, path: &[&str]) -> bool {
            path.last() == Some(&"c")
        }
    }

    fn has_directive_keys(value: &Value) -> bool {
        match value {
            Value::Array(items) => items.iter().any(has_directive_keys),
            Value::Object(map) => map.iter().any(|(k, v)| {
                k == "$patch"
                    || k == "$retainKeys"
                    || k.starts_with("$setElementOrder/")
                    || k.starts_with("$deleteFromPrimitiveList/")
                    || has_directive_keys(v)
            }),
            _ => false,
        }
    }

    proptest! {
        /// (a) A merge patch computed as the difference of two documents
        /// turns the first into the second.
        #[test]
        fn merge_patch_of_a_diff_reaches_the_target(
            a in arb_value(false, "[a-d]"),
            b in arb_value(false, "[a-d]"),
        ) {
            prop_assert_eq!(merge::apply(&a, &diff(&a, &b)), b);
        }

        /// (b) Testing a value that is there succeeds and changes nothing.
        #[test]
        fn json_patch_test_of_an_existing_value_is_a_no_op(
            (doc, path, found) in doc_and_path()
        ) {
            let ops = json!([{"op":"test","path":path,"value":found}]);
            prop_assert_eq!(json_patch::apply(&doc, &ops), Ok(doc));
        }

        /// (c) Without metadata, directives or nulls, a strategic merge patch
        /// is a merge patch.
        #[test]
        fn strategic_without_schema_is_a_merge_patch(
            original in arb_value(true, "[a-d]"),
            patch in arb_object_of(arb_value(false, "[a-d]"), "[a-d]"),
        ) {
            let expected = merge::apply(&original, &patch);
            prop_assert_eq!(strategic::apply(&original, &patch, &NoSchema), Ok(expected));
        }

        /// (d) Random bodies produce a result or an error, never a panic.
        #[test]
        fn random_bodies_never_panic(
            doc in arb_value(true, "[ab0]|name"),
            raw in arb_value(true, "op|path|value|from|[ab]"),
            ops in arb_ops(),
            smp in arb_strategic_patch(),
        ) {
            prop_assert_eq!(merge::try_apply(&doc, &raw), Ok(merge::apply(&doc, &raw)));
            for body in [&raw, &ops] {
                if let Err(e) = json_patch::apply(&doc, body) {
                    prop_assert!(matches!(e.status_code(), 400 | 422), "{}", e);
                }
            }
            let schemas: [&dyn PatchSchema; 3] = [&Fuzz, &NoSchema, &OBJECT_META_ONLY];
            for schema in schemas {
                for patch in [&raw, &smp] {
                    if let Ok(v) = strategic::apply(&doc, patch, schema) {
                        prop_assert!(!has_directive_keys(&v), "{} gave {}", patch, v);
                    }
                }
            }
        }
    }
}
