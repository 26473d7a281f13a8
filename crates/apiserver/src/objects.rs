//! Stored objects: how an API object becomes a store value and back, and the metadata the
//! server owns (uid, creationTimestamp, generation, resourceVersion).

use bytes::Bytes;
use oxplane_store::KeyValue;
use serde_json::{Map, Value, json};

use crate::status::{ApiError, Cause};

/// The current time as Kubernetes writes timestamps: RFC 3339, second precision, UTC.
pub fn now_rfc3339() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Decodes a stored value and stamps it with its resourceVersion.
pub fn from_store(kv: &KeyValue) -> Result<Value, ApiError> {
    let mut object: Value = serde_json::from_slice(&kv.value)
        .map_err(|e| ApiError::internal(format!("stored object {} is not valid JSON: {e}", kv.key)))?;
    set_resource_version(&mut object, kv.mod_revision);
    Ok(object)
}

/// Encodes an object for the store, without its resourceVersion (the store's revision is it).
pub fn to_store(object: &Value) -> Bytes {
    let mut object = object.clone();
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
    }
    Bytes::from(object.to_string())
}

/// Sets `metadata.resourceVersion`.
pub fn set_resource_version(object: &mut Value, revision: u64) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(revision.to_string()));
    }
}

/// The object's `metadata` map, created if missing.
pub fn metadata_mut(object: &mut Value) -> Result<&mut Map<String, Value>, ApiError> {
    let map = object.as_object_mut().ok_or_else(|| ApiError::bad_request("the body must be a JSON object"))?;
    let meta = map.entry("metadata").or_insert_with(|| json!({}));
    meta.as_object_mut().ok_or_else(|| ApiError::bad_request("metadata must be an object"))
}

/// A string field of `metadata`.
pub fn meta_str<'a>(object: &'a Value, field: &str) -> Option<&'a str> {
    object.get("metadata")?.get(field)?.as_str()
}

/// Checks a name against DNS-1123 subdomain rules (what most kinds require).
pub fn validate_name(name: &str) -> Option<Cause> {
    (!oxplane_machinery::names::is_dns1123_subdomain(name)).then(|| Cause {
        reason: "FieldValueInvalid".into(),
        message: format!("Invalid value: \"{name}\": {}", oxplane_machinery::names::SUBDOMAIN_RULE),
        field: "metadata.name".into(),
    })
}

/// Kubernetes' checks of an object's `metadata.labels` (qualified-name keys, label values) and
/// `metadata.annotations` (keys are qualified names once lower-cased; keys and values together
/// at most 256 KiB), one cause per problem, as kube-apiserver's `ValidateObjectMeta` reports
/// them for every kind.
pub fn validate_labels_and_annotations(object: &Value) -> Vec<Cause> {
    use oxplane_machinery::golang::go_quote;
    use oxplane_machinery::selectors::{label_key_problems, label_value_problems};
    let invalid = |field: &str, value: &str, problem: String| Cause {
        reason: "FieldValueInvalid".into(),
        message: format!("Invalid value: {}: {problem}", go_quote(value)),
        field: field.into(),
    };
    let mut causes = Vec::new();
    let map = |field: &str| object.get("metadata").and_then(|m| m.get(field)).and_then(Value::as_object);
    for (key, value) in map("labels").into_iter().flatten() {
        causes.extend(label_key_problems(key).into_iter().map(|p| invalid("metadata.labels", key, p)));
        if let Some(value) = value.as_str() {
            causes.extend(label_value_problems(value).into_iter().map(|p| invalid("metadata.labels", value, p)));
        }
    }
    for key in map("annotations").into_iter().flatten().map(|(key, _)| key) {
        causes.extend(label_key_problems(&key.to_lowercase()).into_iter().map(|p| invalid("metadata.annotations", key, p)));
    }
    let annotation_bytes: usize = map("annotations").into_iter().flatten().map(|(key, value)| key.len() + value.as_str().map_or(0, str::len)).sum();
    if annotation_bytes > TOTAL_ANNOTATION_SIZE_LIMIT {
        causes.push(Cause {
            reason: "FieldValueTooLong".into(),
            message: format!("Too long: must have at most {TOTAL_ANNOTATION_SIZE_LIMIT} bytes"),
            field: "metadata.annotations".into(),
        });
    }
    causes
}

/// The most bytes an object's annotations may hold, keys and values together (256 KiB, as
/// kube-apiserver's `TotalAnnotationSizeLimitB`).
pub const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

/// Checks a name that only has to be one URL path segment (RBAC's roles and bindings): not
/// `.` or `..`, no `/` or `%`.
pub fn validate_path_segment_name(name: &str) -> Option<Cause> {
    let why = match name {
        "." | ".." => format!("may not be '{name}'"),
        _ if name.contains('/') => "may not contain '/'".to_string(),
        _ if name.contains('%') => "may not contain '%'".to_string(),
        _ => return None,
    };
    Some(Cause { reason: "FieldValueInvalid".into(), message: format!("Invalid value: \"{name}\": {why}"), field: "metadata.name".into() })
}

/// Fills the metadata the server owns on create.
pub fn stamp_new(object: &mut Value) -> Result<(), ApiError> {
    let meta = metadata_mut(object)?;
    meta.insert("uid".into(), Value::String(uuid::Uuid::new_v4().to_string()));
    meta.insert("creationTimestamp".into(), Value::String(now_rfc3339()));
    meta.insert("generation".into(), json!(1));
    meta.remove("resourceVersion");
    meta.remove("deletionTimestamp");
    meta.remove("deletionGracePeriodSeconds");
    Ok(())
}

/// The `PartialObjectMetadata` view of an object: its type and metadata only.
pub fn partial_metadata(object: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": object["metadata"]})
}

/// A list turned into a `PartialObjectMetadataList`.
pub fn metadata_list<'a>(items: impl IntoIterator<Item = &'a Value>, metadata: Value) -> Value {
    let items: Vec<Value> = items.into_iter().map(partial_metadata).collect();
    json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": metadata, "items": items})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_annotation_keys_are_checked_as_kubernetes_checks_them() {
        let good = json!({"metadata": {"labels": {"app.kubernetes.io/name": "web", "tier": "", "Version": "v1_2.3"},
                                        "annotations": {"Example.com/Owner": "any value: at all!", "note": ""}}});
        assert!(validate_labels_and_annotations(&good).is_empty());
        let bad = json!({"metadata": {"labels": {"tier": "not valid!", "bad key!": "x", "a/b/c": "x"}, "annotations": {"-lead": "x"}}});
        let causes = validate_labels_and_annotations(&bad);
        let text: Vec<String> = causes.iter().map(|c| format!("{}: {}", c.field, c.message)).collect();
        assert!(text.iter().any(|t| t.starts_with(r#"metadata.labels: Invalid value: "not valid!": a valid label must be an empty string"#)), "{text:?}");
        assert!(text.iter().any(|t| t.starts_with(r#"metadata.labels: Invalid value: "bad key!": name part must consist of"#)), "{text:?}");
        assert!(text.iter().any(|t| t.starts_with(r#"metadata.labels: Invalid value: "a/b/c": a qualified name must consist of"#)), "{text:?}");
        assert!(text.iter().any(|t| t.starts_with(r#"metadata.annotations: Invalid value: "-lead": name part must consist of"#)), "{text:?}");
        assert!(causes.iter().all(|c| c.reason == "FieldValueInvalid"));
        let long = json!({"metadata": {"labels": {"x": "v".repeat(64)}}});
        assert_eq!(validate_labels_and_annotations(&long)[0].message, format!(r#"Invalid value: "{}": must be no more than 63 characters"#, "v".repeat(64)));
    }

    #[test]
    fn annotations_hold_at_most_256_kib_keys_and_values_together() {
        let sized = |bytes: usize| json!({"metadata": {"annotations": {"a": "", "note": "x".repeat(bytes - 5)}}});
        assert!(validate_labels_and_annotations(&sized(TOTAL_ANNOTATION_SIZE_LIMIT)).is_empty());
        let causes = validate_labels_and_annotations(&sized(TOTAL_ANNOTATION_SIZE_LIMIT + 1));
        assert_eq!(causes.len(), 1);
        assert_eq!((causes[0].reason.as_str(), causes[0].field.as_str()), ("FieldValueTooLong", "metadata.annotations"));
        assert_eq!(causes[0].message, "Too long: must have at most 262144 bytes");
    }

    #[test]
    fn names_follow_dns_subdomain_rules() {
        assert!(validate_name("my-app.v1").is_none());
        assert!(validate_name("a").is_none());
        for bad in ["", "Upper", "-lead", "trail-", "a..b", "under_score", &"x".repeat(254)] {
            assert!(validate_name(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn timestamps_have_second_precision() {
        let t = now_rfc3339();
        assert_eq!(t.len(), 20, "{t}");
        assert!(t.ends_with('Z'));
    }
}
