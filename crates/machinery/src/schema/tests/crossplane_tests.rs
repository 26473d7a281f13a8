//! End-to-end tests with Crossplane-like schemas: a composite resource whose
//! status carries `conditions` as a list-map keyed by `type`, a
//! preserve-unknown-fields `parameters` object, and embedded resources.

use serde_json::{Value, json};

use super::{compile, rendered};
use crate::schema::{ListType, Schema, validate_structural};

fn xr_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["compositionRef"],
                "properties": {
                    "compositionRef": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string", "minLength": 1}}},
                    "compositionUpdatePolicy": {"type": "string", "enum": ["Automatic", "Manual"], "default": "Automatic"},
                    "parameters": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "resourceRefs": {"type": "array", "x-kubernetes-list-type": "atomic", "items": {"type": "object",
                        "required": ["apiVersion", "kind"],
                        "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"}, "name": {"type": "string"}}}},
                    "writeConnectionSecretToRef": {"type": "object", "required": ["name"], "properties": {
                        "name": {"type": "string"}, "namespace": {"type": "string"}}},
                    "resources": {"type": "array", "items": {"type": "object", "properties": {
                        "name": {"type": "string"},
                        "base": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true},
                        "template": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {
                            "spec": {"type": "object", "properties": {"forProvider": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}
                    }}}
                }
            },
            "status": {
                "type": "object",
                "properties": {
                    "conditions": {
                        "type": "array",
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["type"],
                        "items": {"type": "object", "required": ["lastTransitionTime", "reason", "status", "type"], "properties": {
                            "lastTransitionTime": {"type": "string", "format": "date-time"},
                            "message": {"type": "string"},
                            "reason": {"type": "string"},
                            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                            "type": {"type": "string"}
                        }}
                    },
                    "connectionDetails": {"type": "object", "properties": {"lastPublishedTime": {"type": "string", "format": "date-time"}}}
                }
            }
        }
    })
}

fn condition(t: &str, status: &str) -> Value {
    json!({"type": t, "status": status, "reason": "Available", "lastTransitionTime": "2024-05-01T10:00:00Z"})
}

fn xr() -> Value {
    json!({
        "apiVersion": "example.org/v1alpha1",
        "kind": "XDatabase",
        "metadata": {"name": "db", "labels": {"crossplane.io/composite": "db"}, "annotations": {"a": "b"}},
        "spec": {
            "compositionRef": {"name": "aws"},
            "parameters": {"size": "large", "nested": {"anything": [1, {"x": null}]}},
            "resourceRefs": [{"apiVersion": "rds.aws.upbound.io/v1beta1", "kind": "Instance", "name": "db-x", "uid": "dropped"}],
            "resources": [{
                "name": "rds",
                "base": {"apiVersion": "rds.aws.upbound.io/v1beta1", "kind": "Instance", "spec": {"forProvider": {"region": "eu-west-1"}}},
                "template": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"},
                    "spec": {"forProvider": {"keep": true}, "other": 1}}
            }],
            "unknownTopLevel": true
        },
        "status": {"conditions": [condition("Ready", "True"), condition("Synced", "True")]}
    })
}

fn pipeline(schema: &Schema, object: &mut Value) -> (Vec<String>, Vec<String>) {
    schema.default(object);
    let pruned = schema.prune(object);
    (pruned, rendered(&schema.validate(object)))
}

#[test]
fn crossplane_schema_is_structural() {
    assert_eq!(validate_structural(&xr_schema()), Vec::<String>::new());
}

#[test]
fn composite_resource_pipeline() {
    let s = compile(&xr_schema());
    let mut obj = xr();
    let (pruned, errors) = pipeline(&s, &mut obj);
    assert_eq!(
        pruned,
        vec![
            ".spec.resourceRefs[0].uid",
            ".spec.resources[0].template.spec.other",
            ".spec.unknownTopLevel"
        ]
    );
    assert_eq!(errors, Vec::<String>::new());
    assert_eq!(obj["spec"]["compositionUpdatePolicy"], json!("Automatic"));
    assert_eq!(
        obj["spec"]["parameters"]["nested"],
        json!({"anything": [1, {"x": null}]})
    );
    assert_eq!(obj["metadata"]["annotations"], json!({"a": "b"}));
    assert_eq!(
        obj["spec"]["resources"][0]["base"]["spec"],
        json!({"forProvider": {"region": "eu-west-1"}})
    );
}

#[test]
fn conditions_are_a_list_map_keyed_by_type() {
    let s = compile(&xr_schema());
    let mut obj = xr();
    obj["status"]["conditions"] = json!([condition("Ready", "True"), condition("Ready", "False"), {"status": "Maybe", "reason": "r",
        "lastTransitionTime": "yesterday"}]);
    let (_, errors) = pipeline(&s, &mut obj);
    assert_eq!(errors, vec![
        r#"status.conditions[1]: Duplicate value: {"type":"Ready"}"#.to_string(),
        r#"status.conditions[2].lastTransitionTime: Invalid value: "yesterday": status.conditions[2].lastTransitionTime in body must be of type date-time: "yesterday""#.to_string(),
        r#"status.conditions[2].status: Unsupported value: "Maybe": supported values: "True", "False", "Unknown""#.to_string(),
        "status.conditions[2].type: Required value".to_string(),
    ]);
    assert_eq!(s.list_type_at("status.conditions"), Some(ListType::Map));
    assert_eq!(
        s.list_map_keys_at("status.conditions"),
        ["type".to_string()]
    );
    assert_eq!(s.list_type_at("spec.resourceRefs"), Some(ListType::Atomic));
}

#[test]
fn required_fields_and_embedded_resources() {
    let s = compile(&xr_schema());
    let mut obj = xr();
    obj["spec"]["compositionRef"] = json!({});
    obj["spec"]["resources"][0]["template"] = json!({"metadata": {}});
    obj["spec"]["resources"][0]["base"] = json!({"kind": 3});
    let (_, errors) = pipeline(&s, &mut obj);
    assert_eq!(errors, vec![
        "spec.compositionRef.name: Required value".to_string(),
        r#"spec.resources[0].base.kind: Invalid value: "integer": spec.resources[0].base.kind in body must be of type string: "integer""#.to_string(),
        "spec.resources[0].template.apiVersion: Required value".to_string(),
        "spec.resources[0].template.kind: Required value".to_string(),
    ]);
    let mut missing = xr();
    if let Some(spec) = missing["spec"].as_object_mut() {
        spec.remove("compositionRef");
    }
    let (_, errors) = pipeline(&s, &mut missing);
    assert_eq!(
        errors,
        vec!["spec.compositionRef: Required value".to_string()]
    );
}

#[test]
fn preserve_unknown_fields_accessors() {
    let s = compile(&xr_schema());
    assert!(s.preserves_unknown_fields_at("spec.parameters"));
    assert!(s.preserves_unknown_fields_at("spec.parameters.anything.deep[3].x"));
    assert!(s.preserves_unknown_fields_at("spec.resources[0].base.spec"));
    assert!(!s.preserves_unknown_fields_at("spec.resources[0].template"));
    assert!(
        s.node_at("spec.resources[0].base")
            .is_some_and(|n| n.is_embedded_resource())
    );
}
