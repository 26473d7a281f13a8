//! Tests for schema compilation: keyword type errors, patterns, depth
//! limits, and the accessors the server uses (list types, map keys,
//! preserve-unknown-fields).

use serde_json::{Value, json};

use super::compile;
use crate::schema::{JsonType, ListType, MapType, Schema, SchemaError};

#[test]
fn bad_keywords_are_schema_errors() {
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"type": "strnig"}),
            r#"openAPIV3Schema.type: Invalid value: "strnig": supported values"#,
        ),
        (
            json!({"type": 5}),
            "openAPIV3Schema.type: Invalid value: must be a string",
        ),
        (
            json!({"type": "object", "properties": {"a": 5}}),
            "openAPIV3Schema.properties[a]: Invalid value: must be a JSON object",
        ),
        (
            json!({"properties": []}),
            "openAPIV3Schema.properties: Invalid value: must be an object",
        ),
        (
            json!({"items": [{"type": "string"}]}),
            "openAPIV3Schema.items: Invalid value: must be a single schema",
        ),
        (
            json!({"required": ["a", 1]}),
            "openAPIV3Schema.required: Invalid value: must be an array of strings",
        ),
        (
            json!({"minimum": "1"}),
            "openAPIV3Schema.minimum: Invalid value: must be a number",
        ),
        (
            json!({"maxLength": -1}),
            "openAPIV3Schema.maxLength: Invalid value: must be a non-negative integer",
        ),
        (
            json!({"maxItems": 1.5}),
            "openAPIV3Schema.maxItems: Invalid value: must be a non-negative integer",
        ),
        (
            json!({"multipleOf": 0}),
            "openAPIV3Schema.multipleOf: Invalid value: must be greater than 0",
        ),
        (
            json!({"nullable": "yes"}),
            "openAPIV3Schema.nullable: Invalid value: must be a boolean",
        ),
        (
            json!({"enum": "a"}),
            "openAPIV3Schema.enum: Invalid value: must be an array",
        ),
        (
            json!({"x-kubernetes-list-type": "bag"}),
            "openAPIV3Schema.x-kubernetes-list-type: Invalid value: supported values",
        ),
        (
            json!({"x-kubernetes-map-type": "deep"}),
            "openAPIV3Schema.x-kubernetes-map-type: Invalid value: supported values",
        ),
        (
            json!({"anyOf": {}}),
            "openAPIV3Schema.anyOf: Invalid value: must be an array",
        ),
        (
            json!({"allOf": [{"pattern": "("}]}),
            "openAPIV3Schema.allOf[0].pattern: Invalid value: \"(\": not a valid regular expression",
        ),
        (
            json!({"properties": {"a": {"$ref": "#/definitions/x"}}}),
            "openAPIV3Schema.properties[a].$ref: Forbidden",
        ),
        (
            json!("object"),
            "openAPIV3Schema: Invalid value: must be a JSON object",
        ),
    ];
    for (schema, want) in cases {
        match Schema::compile(&schema) {
            Ok(_) => panic!("{schema} should not compile"),
            Err(e) => assert!(e.to_string().starts_with(want), "{schema}: got {e:?}"),
        }
    }
}

#[test]
fn invalid_pattern_message_is_single_line() {
    let err = Schema::compile(&json!({"type": "string", "pattern": "[a-"}));
    match err {
        Err(SchemaError::InvalidPattern {
            pattern, message, ..
        }) => {
            assert_eq!(pattern, "[a-");
            assert!(!message.contains('\n'));
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn nulls_and_unknown_keywords_are_ignored() {
    let s = compile(
        &json!({"type": "object", "description": "d", "x-kubernetes-validations": [{"rule": "self.a > 0"}],
        "example": {"a": 1}, "maxLength": null, "properties": {"a": {"type": "integer", "default": null, "nullable": true}}}),
    );
    assert_eq!(s.root().json_type(), Some(JsonType::Object));
    assert_eq!(
        s.node_at("a").and_then(|n| n.default_value()),
        Some(&Value::Null)
    );
}

fn nested_schema(depth: usize) -> Value {
    let mut v = json!({"type": "string"});
    for _ in 1..depth {
        v = json!({"type": "object", "properties": {"a": v}});
    }
    v
}

#[test]
fn schema_depth_is_bounded() {
    assert!(Schema::compile(&nested_schema(128)).is_ok());
    match Schema::compile(&nested_schema(129)) {
        Err(SchemaError::TooDeep { max, .. }) => assert_eq!(max, 128),
        other => panic!("unexpected {other:?}"),
    }
    let mut deep = json!(1);
    for _ in 0..200 {
        deep = json!([deep]);
    }
    let err = Schema::compile(&json!({"type": "array", "default": deep}));
    assert!(matches!(err, Err(SchemaError::TooDeep { .. })), "{err:?}");
    let err = Schema::compile(&json!({"enum": [deep]}));
    assert!(matches!(err, Err(SchemaError::TooDeep { .. })), "{err:?}");
}

#[test]
fn accessors_for_server_side_apply() {
    let s = compile(&json!({"type": "object", "properties": {
    "spec": {"type": "object", "x-kubernetes-map-type": "atomic", "properties": {
        "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port", "protocol"],
            "items": {"type": "object", "properties": {"port": {"type": "integer"}, "protocol": {"type": "string"}}}},
        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "labels": {"type": "object", "additionalProperties": {"type": "object", "x-kubernetes-map-type": "granular",
            "properties": {"v": {"type": "string"}}}},
        "raw": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"typed": {"type": "string"}}},
        "free": {"type": "object", "additionalProperties": true},
        "port": {"x-kubernetes-int-or-string": true},
        "embedded": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}
    }}}}));
    assert_eq!(s.list_type_at("spec.ports"), Some(ListType::Map));
    assert_eq!(
        s.list_map_keys_at("spec.ports"),
        ["port".to_string(), "protocol".to_string()]
    );
    assert_eq!(
        s.list_map_keys_at(".spec.ports"),
        ["port".to_string(), "protocol".to_string()]
    );
    assert_eq!(s.list_type_at("spec.tags"), Some(ListType::Set));
    assert!(s.list_map_keys_at("spec.tags").is_empty());
    assert_eq!(s.list_type_at("spec.nothing"), None);
    assert_eq!(s.map_type_at("spec"), Some(MapType::Atomic));
    assert_eq!(s.map_type_at("spec.labels[app]"), Some(MapType::Granular));
    assert_eq!(s.map_type_at("spec.labels.app"), Some(MapType::Granular));
    assert_eq!(
        s.node_at("spec.ports[3].port").and_then(|n| n.json_type()),
        Some(JsonType::Integer)
    );
    assert_eq!(
        s.node_at("spec.ports[*].protocol")
            .and_then(|n| n.json_type()),
        Some(JsonType::String)
    );
    assert!(s.node_at("spec.port").is_some_and(|n| n.is_int_or_string()));
    assert!(
        s.node_at("spec.embedded")
            .is_some_and(|n| n.is_embedded_resource())
    );
    assert!(s.node_at("").is_some());
    assert!(s.node_at("spec.nothing.deeper").is_none());
    assert!(s.preserves_unknown_fields_at("spec.raw"));
    assert!(s.preserves_unknown_fields_at("spec.raw.anything.below[0]"));
    assert!(!s.preserves_unknown_fields_at("spec.raw.typed"));
    assert!(s.preserves_unknown_fields_at("spec.free.x.y"));
    assert!(!s.preserves_unknown_fields_at("spec"));
    assert!(!s.preserves_unknown_fields_at("spec.unknown"));
    let spec = s
        .root()
        .property("spec")
        .map(|n| n.properties().map(|(k, _)| k).collect::<Vec<_>>());
    assert_eq!(spec.map(|v| v.len()), Some(7));
    assert!(
        s.node_at("spec.ports")
            .and_then(|n| n.items())
            .is_some_and(|i| i.required().is_empty())
    );
    assert!(
        s.node_at("spec.labels")
            .and_then(|n| n.additional_properties())
            .is_some()
    );
    assert!(!s.node_at("spec.port").is_some_and(|n| n.is_nullable()));
    assert!(
        s.node_at("spec.free")
            .is_some_and(|n| n.keeps_unknown_fields() && !n.preserves_unknown_fields())
    );
}

#[test]
fn patterns_compile_once_and_are_shared_by_clones() {
    let s = compile(
        &json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "^x+$"}}}),
    );
    let c = s.clone();
    assert!(c.validate(&json!({"a": "xx"})).is_empty());
    assert_eq!(c.validate(&json!({"a": "y"})).len(), 1);
}
