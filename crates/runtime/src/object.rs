//! Reading and changing the metadata of JSON objects: names, labels, annotations, finalizers,
//! owner references, timestamps. Every helper tolerates missing or mistyped fields (input can
//! be anything a user stored) and never panics.

use serde_json::{Map, Value, json};

/// Where an object lives: its namespace (none for cluster-scoped objects) and name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// The namespace, if the object is namespaced.
    pub namespace: Option<String>,
    /// The name.
    pub name: String,
}

impl ObjectKey {
    /// A key from its parts.
    pub fn new(namespace: Option<&str>, name: &str) -> Self {
        ObjectKey { namespace: namespace.filter(|ns| !ns.is_empty()).map(str::to_string), name: name.to_string() }
    }

    /// The key of an object, if it has a name.
    pub fn of(object: &Value) -> Option<Self> {
        Some(ObjectKey::new(namespace(object), name(object)?))
    }
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => write!(f, "{}", self.name),
        }
    }
}

/// `metadata.name`.
pub fn name(object: &Value) -> Option<&str> {
    object.pointer("/metadata/name").and_then(Value::as_str)
}

/// `metadata.namespace` (none when empty).
pub fn namespace(object: &Value) -> Option<&str> {
    object.pointer("/metadata/namespace").and_then(Value::as_str).filter(|ns| !ns.is_empty())
}

/// `metadata.uid`.
pub fn uid(object: &Value) -> Option<&str> {
    object.pointer("/metadata/uid").and_then(Value::as_str)
}

/// `metadata.generation` (0 when absent).
pub fn generation(object: &Value) -> i64 {
    object.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(0)
}

/// `metadata.resourceVersion`.
pub fn resource_version(object: &Value) -> Option<&str> {
    object.pointer("/metadata/resourceVersion").and_then(Value::as_str)
}

/// Whether `metadata.deletionTimestamp` is set.
pub fn is_deleting(object: &Value) -> bool {
    object.pointer("/metadata/deletionTimestamp").is_some_and(|v| !v.is_null())
}

/// One annotation.
pub fn annotation<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object.pointer("/metadata/annotations").and_then(|a| a.get(key)).and_then(Value::as_str)
}

/// One label.
pub fn label<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object.pointer("/metadata/labels").and_then(|l| l.get(key)).and_then(Value::as_str)
}

/// The labels as a map (empty when none).
pub fn labels(object: &Value) -> Map<String, Value> {
    object.pointer("/metadata/labels").and_then(Value::as_object).cloned().unwrap_or_default()
}

/// A mutable object at `metadata.<field>`, created (and made an object) if needed.
fn metadata_map<'a>(object: &'a mut Value, field: &str) -> Option<&'a mut Map<String, Value>> {
    if !object.is_object() {
        return None;
    }
    let metadata = object.as_object_mut()?.entry("metadata").or_insert_with(|| json!({}));
    if !metadata.is_object() {
        *metadata = json!({});
    }
    let map = metadata.as_object_mut()?.entry(field).or_insert_with(|| json!({}));
    if !map.is_object() {
        *map = json!({});
    }
    map.as_object_mut()
}

/// Sets an annotation.
pub fn set_annotation(object: &mut Value, key: &str, value: &str) {
    if let Some(map) = metadata_map(object, "annotations") {
        map.insert(key.to_string(), Value::String(value.to_string()));
    }
}

/// Removes an annotation.
pub fn remove_annotation(object: &mut Value, key: &str) {
    if let Some(map) = object.pointer_mut("/metadata/annotations").and_then(Value::as_object_mut) {
        map.remove(key);
    }
}

/// Removes `metadata.managedFields`: the caches keep objects without them, so an object read
/// from the API is stripped the same way wherever it stands in for a cached one (a function's
/// request, and so its `meta.tag`, must not depend on where an object was read from).
pub fn strip_managed_fields(object: &mut Value) {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("managedFields");
    }
}

/// Sets a label.
pub fn set_label(object: &mut Value, key: &str, value: &str) {
    if let Some(map) = metadata_map(object, "labels") {
        map.insert(key.to_string(), Value::String(value.to_string()));
    }
}

/// Removes a label; whether it was there.
pub fn remove_label(object: &mut Value, key: &str) -> bool {
    object.pointer_mut("/metadata/labels").and_then(Value::as_object_mut).is_some_and(|m| m.remove(key).is_some())
}

/// The finalizers.
pub fn finalizers(object: &Value) -> Vec<String> {
    object
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default()
}

/// Whether the object carries `finalizer`.
pub fn has_finalizer(object: &Value, finalizer: &str) -> bool {
    object
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|list| list.iter().any(|f| f.as_str() == Some(finalizer)))
}

/// Adds a finalizer; whether it was added.
pub fn add_finalizer(object: &mut Value, finalizer: &str) -> bool {
    if has_finalizer(object, finalizer) {
        return false;
    }
    let Some(metadata) = object.as_object_mut().map(|o| o.entry("metadata").or_insert_with(|| json!({}))) else {
        return false;
    };
    let Some(metadata) = metadata.as_object_mut() else {
        return false;
    };
    let list = metadata.entry("finalizers").or_insert_with(|| json!([]));
    if !list.is_array() {
        *list = json!([]);
    }
    if let Some(list) = list.as_array_mut() {
        list.push(Value::String(finalizer.to_string()));
    }
    true
}

/// Removes a finalizer; whether it was there.
pub fn remove_finalizer(object: &mut Value, finalizer: &str) -> bool {
    let Some(list) = object.pointer_mut("/metadata/finalizers").and_then(Value::as_array_mut) else {
        return false;
    };
    let before = list.len();
    list.retain(|f| f.as_str() != Some(finalizer));
    before != list.len()
}

/// The owner reference marked `controller: true`, if any.
pub fn controller_ref(object: &Value) -> Option<&Value> {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)?
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
}

/// The uid of the controller owner, if any.
pub fn controller_uid(object: &Value) -> Option<&str> {
    controller_ref(object).and_then(|r| r.get("uid")).and_then(Value::as_str)
}

/// An owner reference to `owner` (`controller` marks it the controller; `block` sets
/// `blockOwnerDeletion`).
pub fn owner_reference(owner: &Value, controller: bool, block: bool) -> Value {
    json!({
        "apiVersion": owner.get("apiVersion").cloned().unwrap_or(Value::Null),
        "kind": owner.get("kind").cloned().unwrap_or(Value::Null),
        "name": name(owner).unwrap_or_default(),
        "uid": uid(owner).unwrap_or_default(),
        "controller": controller,
        "blockOwnerDeletion": block,
    })
}

/// Adds an owner reference unless one with the same uid is there; whether it was added.
pub fn add_owner_reference(object: &mut Value, reference: Value) -> bool {
    let Some(uid) = reference.get("uid").and_then(Value::as_str).map(str::to_string) else {
        return false;
    };
    let Some(metadata) = object.as_object_mut().map(|o| o.entry("metadata").or_insert_with(|| json!({}))) else {
        return false;
    };
    let Some(metadata) = metadata.as_object_mut() else {
        return false;
    };
    let list = metadata.entry("ownerReferences").or_insert_with(|| json!([]));
    if !list.is_array() {
        *list = json!([]);
    }
    let Some(list) = list.as_array_mut() else {
        return false;
    };
    if list.iter().any(|r| r.get("uid").and_then(Value::as_str) == Some(uid.as_str())) {
        return false;
    }
    list.push(reference);
    true
}

/// Takes `metadata` and `spec` from `saved` (what a write returned), keeping the status
/// computed in memory.
pub fn adopt_saved(object: &mut Value, saved: Value) {
    for field in ["metadata", "spec"] {
        if let (Some(value), Some(root)) = (saved.get(field), object.as_object_mut()) {
            root.insert(field.to_string(), value.clone());
        }
    }
}

/// Sets `status.<key>` (making `status` an object if needed).
pub fn set_status_field(object: &mut Value, key: &str, value: Value) {
    if let Some(root) = object.as_object_mut() {
        let status = root.entry("status").or_insert_with(|| json!({}));
        if !status.is_object() {
            *status = json!({});
        }
        status[key] = value;
    }
}

/// Now, as Kubernetes writes times (RFC 3339, seconds, UTC).
pub fn now_rfc3339() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Parses an RFC 3339 time.
pub fn parse_time(text: &str) -> Option<jiff::Timestamp> {
    text.parse().ok()
}

/// The object's age, from `metadata.creationTimestamp` (zero when unknown or in the future).
pub fn age(object: &Value) -> std::time::Duration {
    let Some(created) = object.pointer("/metadata/creationTimestamp").and_then(Value::as_str).and_then(parse_time) else {
        return std::time::Duration::ZERO;
    };
    let elapsed = jiff::Timestamp::now().duration_since(created);
    std::time::Duration::try_from(elapsed).unwrap_or(std::time::Duration::ZERO)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn metadata_helpers_tolerate_missing_and_mistyped_fields() {
        let mut odd = json!({"metadata": {"annotations": "nope", "finalizers": 3}});
        set_annotation(&mut odd, "a", "1");
        assert_eq!(annotation(&odd, "a"), Some("1"));
        assert!(add_finalizer(&mut odd, "f"));
        assert!(!add_finalizer(&mut odd, "f"));
        assert_eq!(finalizers(&odd), vec!["f"]);
        assert!(remove_finalizer(&mut odd, "f"));
        assert!(!remove_finalizer(&mut odd, "f"));
        let mut not_an_object = json!(5);
        set_label(&mut not_an_object, "a", "b");
        assert_eq!(not_an_object, json!(5));
    }

    #[test]
    fn owner_references_are_added_once_by_uid() {
        let owner = json!({"apiVersion": "v1", "kind": "X", "metadata": {"name": "o", "uid": "u1"}});
        let mut child = json!({"metadata": {"name": "c"}});
        assert!(add_owner_reference(&mut child, owner_reference(&owner, true, true)));
        assert!(!add_owner_reference(&mut child, owner_reference(&owner, false, false)));
        assert_eq!(controller_uid(&child), Some("u1"));
    }

    #[test]
    fn times() {
        let now = now_rfc3339();
        assert!(parse_time(&now).is_some(), "{now}");
        assert_eq!(now.len(), 20);
        let old = json!({"metadata": {"creationTimestamp": "2020-01-01T00:00:00Z"}});
        assert!(age(&old).as_secs() > 86_400);
        assert_eq!(age(&json!({})), std::time::Duration::ZERO);
    }
}
