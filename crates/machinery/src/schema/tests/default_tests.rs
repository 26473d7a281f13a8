//! Table tests for defaulting: (schema, object, defaulted object).

use serde_json::{Value, json};

use super::{compile, object_with, spec_with};

/// (name, schema of spec's properties, spec before, spec after)
type Row = (&'static str, Value, Value, Value);

fn rows() -> Vec<Row> {
    vec![
        (
            "absent field gets its default",
            json!({"replicas": {"type": "integer", "default": 1}}),
            json!({}),
            json!({"replicas": 1}),
        ),
        (
            "present field keeps its value",
            json!({"replicas": {"type": "integer", "default": 1}}),
            json!({"replicas": 3}),
            json!({"replicas": 3}),
        ),
        (
            "null non-nullable gets the default",
            json!({"mode": {"type": "string", "default": "auto"}}),
            json!({"mode": null}),
            json!({"mode": "auto"}),
        ),
        (
            "null nullable stays null",
            json!({"mode": {"type": "string", "nullable": true, "default": "auto"}}),
            json!({"mode": null}),
            json!({"mode": null}),
        ),
        (
            "null non-nullable without default is dropped",
            json!({"mode": {"type": "string"}}),
            json!({"mode": null}),
            json!({}),
        ),
        (
            "object default is a deep copy and gets nested defaults",
            json!({"opts": {"type": "object", "default": {}, "properties": {"a": {"type": "integer", "default": 5}, "b": {"type": "string"}}}}),
            json!({}),
            json!({"opts": {"a": 5}}),
        ),
        (
            "nested defaults in existing objects",
            json!({"opts": {"type": "object", "properties": {"a": {"type": "integer", "default": 5}}}}),
            json!({"opts": {}}),
            json!({"opts": {"a": 5}}),
        ),
        (
            "defaults inside array items",
            json!({"ports": {"type": "array", "items": {"type": "object", "properties": {
                "port": {"type": "integer"}, "protocol": {"type": "string", "default": "TCP"}}}}}),
            json!({"ports": [{"port": 80}, {"port": 53, "protocol": "UDP"}]}),
            json!({"ports": [{"port": 80, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]}),
        ),
        (
            "null array item gets the items default, without default it stays",
            json!({"a": {"type": "array", "items": {"type": "string", "default": "d"}}, "b": {"type": "array", "items": {"type": "string"}}}),
            json!({"a": ["x", null], "b": [null]}),
            json!({"a": ["x", "d"], "b": [null]}),
        ),
        (
            "defaults inside additionalProperties values",
            json!({"m": {"type": "object", "additionalProperties": {"type": "object", "properties": {"w": {"type": "integer", "default": 1}}}}}),
            json!({"m": {"k1": {}, "k2": {"w": 2}}}),
            json!({"m": {"k1": {"w": 1}, "k2": {"w": 2}}}),
        ),
        (
            "null additionalProperties value gets the value default",
            json!({"m": {"type": "object", "additionalProperties": {"type": "string", "default": "v"}}}),
            json!({"m": {"k": null}}),
            json!({"m": {"k": "v"}}),
        ),
        (
            "junctor defaults are ignored",
            json!({"a": {"type": "object", "anyOf": [{"properties": {"x": {"default": 1}}}]}}),
            json!({"a": {}}),
            json!({"a": {}}),
        ),
        (
            "default under a type mismatch is not applied",
            json!({"a": {"type": "object", "properties": {"x": {"type": "integer", "default": 1}}}}),
            json!({"a": "str"}),
            json!({"a": "str"}),
        ),
        (
            "preserve-unknown node still defaults its declared properties",
            json!({"a": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"x": {"type": "integer", "default": 1}}}}),
            json!({"a": {"other": true}}),
            json!({"a": {"other": true, "x": 1}}),
        ),
    ]
}

#[test]
fn default_table() {
    for (name, props, before, after) in rows() {
        let s = compile(&spec_with(props));
        let mut obj = object_with(before);
        s.default(&mut obj);
        assert_eq!(obj, object_with(after.clone()), "case {name:?}");
        s.default(&mut obj);
        assert_eq!(obj, object_with(after), "case {name:?}: second run");
    }
}

#[test]
fn spec_default_and_required_satisfied_by_default() {
    let s = compile(
        &json!({"type": "object", "properties": {"spec": {"type": "object", "default": {}, "required": ["size"],
        "properties": {"size": {"type": "integer", "default": 3, "maximum": 5}}}}}),
    );
    let mut obj = json!({"apiVersion": "v1", "kind": "K", "metadata": {}});
    s.default(&mut obj);
    assert_eq!(obj["spec"], json!({"size": 3}));
    assert!(s.validate(&obj).is_empty());
}

#[test]
fn metadata_is_never_defaulted() {
    let s = compile(
        &json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {
        "name": {"type": "string", "default": "x"}}}}}),
    );
    let mut obj = json!({"metadata": {"namespace": null}});
    s.default(&mut obj);
    assert_eq!(obj, json!({"metadata": {"namespace": null}}));
}

#[test]
fn mutating_a_defaulted_object_does_not_touch_the_schema() {
    let s = compile(&spec_with(
        json!({"o": {"type": "object", "default": {"k": "v"}, "x-kubernetes-preserve-unknown-fields": true}}),
    ));
    let mut a = object_with(json!({}));
    s.default(&mut a);
    a["spec"]["o"]["k"] = json!("changed");
    let mut b = object_with(json!({}));
    s.default(&mut b);
    assert_eq!(b["spec"]["o"]["k"], json!("v"));
}
