//! Scenario and property tests for the apply engine, with shared helpers.

mod apply_tests;
mod list_tests;
mod prop_tests;
mod update_tests;

use serde_json::{Value, json};

use crate::apply::*;

pub(super) const NOW: &str = "2024-01-01T00:00:00Z";
pub(super) const LATER: &str = "2024-01-02T00:00:00Z";

pub(super) fn schema() -> crate::schema::Node {
    crate::apply::types::schema_node(&json!({"properties": {
        "metadata": {"properties": {
            "labels": {"additionalProperties": {}},
            "finalizers": {"x-kubernetes-list-type": "set"}
        }},
        "spec": {"properties": {
            "replicas": {},
            "args": {"x-kubernetes-list-type": "atomic"},
            "tags": {"x-kubernetes-list-type": "set"},
            "selector": {"x-kubernetes-map-type": "atomic"},
            "containers": {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"properties": {"name": {}, "image": {}, "port": {}}}}
        }, "additionalProperties": {}},
        "status": {"additionalProperties": {}}
    }}))
    .unwrap()
}

/// Applies with the test schema in the whole-object scope.
pub(super) fn ap(
    live: Option<&Value>,
    managed: &[ManagedFieldsEntry],
    config: Value,
    mgr: &str,
    force: bool,
) -> Result<Applied, ApplyError> {
    apply(
        live,
        managed,
        &config,
        mgr,
        "v1",
        force,
        Scope::WholeObject,
        Some(&schema()),
        NOW,
    )
}

/// Chains an apply onto a previous result, panicking on error.
pub(super) fn ap_on(prev: &Applied, config: Value, mgr: &str, force: bool) -> Applied {
    ap(Some(&prev.object), &prev.managed, config, mgr, force).unwrap()
}

pub(super) fn fields_of(managed: &[ManagedFieldsEntry], mgr: &str) -> Value {
    managed
        .iter()
        .find(|e| e.manager == mgr)
        .map(|e| e.fields.to_fields_v1())
        .unwrap_or(Value::Null)
}

pub(super) fn conflicts(r: Result<Applied, ApplyError>) -> Vec<(String, String)> {
    match r {
        Err(ApplyError::Conflicts(c)) => c.0.into_iter().map(|c| (c.manager, c.path)).collect(),
        other => panic!("expected conflicts, got {other:?}"),
    }
}

pub(super) fn base() -> Value {
    json!({"apiVersion": "v1", "kind": "Thing", "metadata": {"name": "t"}})
}

pub(super) fn with(mut v: Value, extra: Value) -> Value {
    if let (Some(m), Value::Object(e)) = (v.as_object_mut(), extra) {
        m.extend(e);
    }
    v
}
