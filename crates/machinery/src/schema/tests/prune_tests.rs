//! Table tests for pruning: (schema, object, pruned paths, object after pruning).

use serde_json::{Value, json};

use super::compile;

/// (name, root schema, object, expected pruned paths, expected object)
type Row = (&'static str, Value, Value, Vec<&'static str>, Value);

fn rows() -> Vec<Row> {
    let spec_ab = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "a": {"type": "string"},
        "items": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}}
    }}}});
    vec![
        (
            "unknown spec field",
            spec_ab.clone(),
            json!({"apiVersion": "v1", "kind": "K", "metadata": {"name": "n"}, "spec": {"a": "x", "foo": 1}}),
            vec![".spec.foo"],
            json!({"apiVersion": "v1", "kind": "K", "metadata": {"name": "n"}, "spec": {"a": "x"}}),
        ),
        (
            "unknown top-level field; apiVersion/kind/metadata always kept",
            spec_ab.clone(),
            json!({"apiVersion": "v1", "kind": "K", "metadata": {"anything": {"goes": true}}, "status": {}}),
            vec![".status"],
            json!({"apiVersion": "v1", "kind": "K", "metadata": {"anything": {"goes": true}}}),
        ),
        (
            "inside array items",
            spec_ab.clone(),
            json!({"spec": {"items": [{"name": "a", "bar": 1}, {"name": "b"}, {"bar": 2, "baz": 3}]}}),
            vec![
                ".spec.items[0].bar",
                ".spec.items[2].bar",
                ".spec.items[2].baz",
            ],
            json!({"spec": {"items": [{"name": "a"}, {"name": "b"}, {}]}}),
        ),
        (
            "metadata not pruned even if the schema declares it",
            json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {"name": {"type": "string"}}}}}),
            json!({"metadata": {"name": "n", "labels": {"a": "b"}}}),
            vec![],
            json!({"metadata": {"name": "n", "labels": {"a": "b"}}}),
        ),
        (
            "preserve-unknown-fields keeps unknown fields whole but prunes declared children",
            json!({"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {
                "known": {"type": "object", "properties": {"k": {"type": "string"}}}}}}}),
            json!({"spec": {"free": {"deep": {"x": 1}}, "known": {"k": "v", "junk": 1}}}),
            vec![".spec.known.junk"],
            json!({"spec": {"free": {"deep": {"x": 1}}, "known": {"k": "v"}}}),
        ),
        (
            "additionalProperties schema prunes inside map values",
            json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"m": {"type": "object",
                "additionalProperties": {"type": "object", "properties": {"v": {"type": "string"}}}}}}}}),
            json!({"spec": {"m": {"k1": {"v": "a", "junk": 1}, "k2": {"v": "b"}}}}),
            vec![".spec.m.k1.junk"],
            json!({"spec": {"m": {"k1": {"v": "a"}, "k2": {"v": "b"}}}}),
        ),
        (
            "additionalProperties true keeps everything",
            json!({"type": "object", "properties": {"spec": {"type": "object", "additionalProperties": true}}}),
            json!({"spec": {"a": {"b": 1}}}),
            vec![],
            json!({"spec": {"a": {"b": 1}}}),
        ),
        (
            "embedded resource keeps apiVersion, kind and metadata",
            json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"template": {"type": "object",
                "x-kubernetes-embedded-resource": true, "properties": {"spec": {"type": "object"}}}}}}}),
            json!({"spec": {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "x": 1}, "spec": {"y": 1}, "status": {}}}}),
            vec![".spec.template.spec.y", ".spec.template.status"],
            json!({"spec": {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "x": 1}, "spec": {}}}}),
        ),
        (
            "embedded resource with preserve keeps everything",
            json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"res": {"type": "object",
                "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}}}}}),
            json!({"spec": {"res": {"apiVersion": "v1", "kind": "Pod", "spec": {"y": 1}}}}),
            vec![],
            json!({"spec": {"res": {"apiVersion": "v1", "kind": "Pod", "spec": {"y": 1}}}}),
        ),
        (
            "junctors never declare fields",
            json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"a": {"type": "string"}},
                "anyOf": [{"properties": {"b": {"type": "string"}}}], "allOf": [{"properties": {"c": {}}}]}}}),
            json!({"spec": {"a": "1", "b": "2", "c": "3"}}),
            vec![".spec.b", ".spec.c"],
            json!({"spec": {"a": "1"}}),
        ),
        (
            "array without items schema: objects inside lose their fields",
            json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"arr": {"type": "array"}}}}}),
            json!({"spec": {"arr": [{"a": 1}, 2, [{"b": 1}]]}}),
            vec![".spec.arr[0].a", ".spec.arr[2][0].b"],
            json!({"spec": {"arr": [{}, 2, [{}]]}}),
        ),
        (
            "object where a scalar is declared loses its fields (validation reports the type)",
            json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"s": {"type": "string"}}}}}),
            json!({"spec": {"s": {"a": 1}}}),
            vec![".spec.s.a"],
            json!({"spec": {"s": {}}}),
        ),
        (
            "untyped preserve node keeps arrays of objects",
            json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"raw": {"x-kubernetes-preserve-unknown-fields": true}}}}}),
            json!({"spec": {"raw": [{"a": 1}]}}),
            vec![],
            json!({"spec": {"raw": [{"a": 1}]}}),
        ),
        (
            "preserve on an array does not protect item fields",
            json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"arr": {"type": "array",
                "x-kubernetes-preserve-unknown-fields": true, "items": {"type": "object", "properties": {"a": {"type": "integer"}}}}}}}}),
            json!({"spec": {"arr": [{"a": 1, "b": 2}]}}),
            vec![".spec.arr[0].b"],
            json!({"spec": {"arr": [{"a": 1}]}}),
        ),
        (
            "root that preserves unknown fields",
            json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
            json!({"spec": {"a": 1}, "status": 2}),
            vec![],
            json!({"spec": {"a": 1}, "status": 2}),
        ),
    ]
}

#[test]
fn prune_table() {
    for (name, schema, mut object, paths, expected) in rows() {
        let s = compile(&schema);
        let got = s.prune(&mut object);
        assert_eq!(got, paths, "case {name:?}");
        assert_eq!(object, expected, "case {name:?}");
        assert!(
            s.prune(&mut object).is_empty(),
            "case {name:?}: second prune"
        );
    }
}

#[test]
fn prune_paths_feed_strict_messages() {
    let s = compile(&json!({"type": "object", "properties": {"spec": {"type": "object"}}}));
    let mut obj = json!({"spec": {"foo": 1}});
    let msgs: Vec<String> = s
        .prune(&mut obj)
        .iter()
        .map(|p| format!("unknown field {:?}", p.trim_start_matches('.')))
        .collect();
    assert_eq!(msgs, vec![r#"unknown field "spec.foo""#]);
}
