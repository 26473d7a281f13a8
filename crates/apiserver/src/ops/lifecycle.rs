//! Finalizers and deletion state: when an object is being deleted, which finalizers hold it,
//! and the rules updates must keep while it is (no new finalizers; `deletionTimestamp` never
//! moves). A Namespace is also held by its `spec.finalizers`, which only the `finalize`
//! subresource changes.

use serde_json::{Value, json};

use crate::registry::ResourceDef;
use crate::status::{ApiError, Cause};

/// The garbage collector deletes dependents with `blockOwnerDeletion` before the owner goes.
pub const FOREGROUND: &str = "foregroundDeletion";
/// The garbage collector strips this owner from its dependents before the owner goes.
pub const ORPHAN: &str = "orphan";
/// A CRD goes only after every custom resource of it is gone.
pub const CRD_CLEANUP: &str = "customresourcecleanup.apiextensions.k8s.io";
/// A Namespace's `spec.finalizers` entry held until its content is gone.
pub const NAMESPACE_CONTENT: &str = "kubernetes";

/// Whether the object has a `deletionTimestamp`.
pub fn is_deleting(object: &Value) -> bool {
    object["metadata"]["deletionTimestamp"].as_str().is_some_and(|t| !t.is_empty())
}

/// `metadata.finalizers` (strings only).
pub fn finalizers(object: &Value) -> Vec<String> {
    string_list(&object["metadata"]["finalizers"])
}

/// Whether `metadata.finalizers` holds `name`.
pub fn has_finalizer(object: &Value, name: &str) -> bool {
    object["metadata"]["finalizers"].as_array().is_some_and(|list| list.iter().any(|f| f.as_str() == Some(name)))
}

fn string_list(value: &Value) -> Vec<String> {
    value.as_array().map(|list| list.iter().filter_map(|f| f.as_str().map(String::from)).collect()).unwrap_or_default()
}

/// Sets `metadata.finalizers` (removing the field when empty, as Kubernetes stores it).
pub fn set_finalizers(object: &mut Value, list: &[String]) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        if list.is_empty() {
            meta.remove("finalizers");
        } else {
            meta.insert("finalizers".into(), json!(list));
        }
    }
}

/// Whether `resource` is the core Namespace kind.
pub fn is_namespace(resource: &ResourceDef) -> bool {
    resource.group.is_empty() && resource.kind == "Namespace"
}

/// A Namespace's `spec.finalizers`.
pub fn namespace_finalizers(object: &Value) -> Vec<String> {
    string_list(&object["spec"]["finalizers"])
}

/// Whether a deleting object has nothing left holding it, so it must leave the store now.
pub fn ready_to_vanish(resource: &ResourceDef, object: &Value) -> bool {
    is_deleting(object)
        && finalizers(object).is_empty()
        && (!is_namespace(resource) || namespace_finalizers(object).is_empty())
}

/// The rules an update of a deleting object must keep: no finalizer may be added.
/// (`deletionTimestamp` itself is carried over from the stored object by the update path.)
pub fn check_update(resource: &ResourceDef, old: &Value, new: &Value, name: &str) -> Result<(), ApiError> {
    if !is_deleting(old) {
        return Ok(());
    }
    let before = finalizers(old);
    let added: Vec<String> = finalizers(new).into_iter().filter(|f| !before.contains(f)).collect();
    if added.is_empty() {
        return Ok(());
    }
    let quoted: Vec<String> = added.iter().map(|f| format!("{f:?}")).collect();
    Err(ApiError::invalid(&resource.kind, &resource.group, name, vec![Cause {
        reason: "FieldValueForbidden".into(),
        message: format!(
            "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
            quoted.join(", ")
        ),
        field: "metadata.finalizers".into(),
    }]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::builtins;

    fn resource(kind: &str) -> ResourceDef {
        builtins().into_iter().find(|r| r.kind == kind).unwrap()
    }

    #[test]
    fn deleting_objects_may_drop_but_not_add_finalizers() {
        let cm = resource("ConfigMap");
        let old = json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["a", "b"]}});
        assert!(check_update(&cm, &old, &json!({"metadata": {"finalizers": ["a"]}}), "x").is_ok());
        let error = check_update(&cm, &old, &json!({"metadata": {"finalizers": ["a", "c"]}}), "x").unwrap_err();
        assert!(error.to_status()["details"]["causes"][0]["message"].as_str().unwrap().contains("\"c\""));
        // Not deleting: anything goes.
        assert!(check_update(&cm, &json!({"metadata": {}}), &json!({"metadata": {"finalizers": ["z"]}}), "x").is_ok());
    }

    #[test]
    fn namespaces_are_held_by_spec_finalizers_too() {
        let ns = resource("Namespace");
        let held = json!({"metadata": {"deletionTimestamp": "t"}, "spec": {"finalizers": ["kubernetes"]}});
        assert!(!ready_to_vanish(&ns, &held));
        let free = json!({"metadata": {"deletionTimestamp": "t"}, "spec": {}});
        assert!(ready_to_vanish(&ns, &free));
        assert!(!ready_to_vanish(&ns, &json!({"metadata": {}})));
        let cm = resource("ConfigMap");
        assert!(ready_to_vanish(&cm, &json!({"metadata": {"deletionTimestamp": "t", "finalizers": []}})));
    }

    #[test]
    fn finalizer_lists_are_removed_when_empty() {
        let mut object = json!({"metadata": {"finalizers": ["a"]}});
        set_finalizers(&mut object, &[]);
        assert!(object["metadata"].get("finalizers").is_none());
        set_finalizers(&mut object, &["b".to_string()]);
        assert_eq!(finalizers(&object), vec!["b"]);
        assert!(has_finalizer(&object, "b"));
    }
}
