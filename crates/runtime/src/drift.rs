//! Drift: an object, or the external resource behind it, changed behind its controller's back
//! and reverted by the controller. What is shared by the two controllers that revert drift
//! (the composite reconciler re-applying a composed resource, the managed reconciler updating
//! an external resource): which fields of a desired object an observed one no longer holds,
//! who changed them (the managers `managedFields` says own them now), the wording of the
//! `DriftCorrected` event, and its counter.
//!
//! Crossplane has no event for this (crossplane-runtime only says `UpdatedExternalResource`),
//! so the reason is oxplane's own.

use oxplane_machinery::apply::{Path, Untyped, field_set_of, lookup, parse_managed_fields, path_string};
use serde_json::Value;

/// The reason of the Warning event recorded when drift is reverted.
pub const REASON: &str = "DriftCorrected";

/// A field that drifted and the managers that own it now (none when it was removed, or its
/// owner is not known).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DriftedField {
    /// The field, as Kubernetes prints paths: `.spec.forProvider.size`.
    pub path: String,
    /// The field managers that own it now, other than the controller's own.
    pub managers: Vec<String>,
}

/// The fields `desired` sets that `observed` no longer holds: a leaf with another value or
/// missing. A list is a leaf, but one that still holds every item desired is not drift (lists
/// merged by key keep others' items beside ours); an empty object desired only asks that the
/// object exist.
pub fn changed_fields(desired: &Value, observed: &Value) -> Vec<Path> {
    field_set_of::<Untyped>(desired, None)
        .leaves()
        .into_iter()
        .filter(|path| {
            let Some(want) = lookup(desired, path) else { return false };
            let have = lookup(observed, path);
            match (want, have) {
                (_, None) => true,
                (Value::Array(want), Some(Value::Array(have))) => !want.iter().all(|item| have.contains(item)),
                (Value::Object(want), Some(have)) if want.is_empty() => !have.is_object(),
                (want, Some(have)) => want != have,
            }
        })
        .collect()
}

/// Who changed each of `paths` in `object`: the managers whose `managedFields` entries own the
/// field (or an atomic field above it), `except` the controller's own. An object whose
/// `managedFields` cannot be read names no managers.
pub fn attribute(object: &Value, paths: &[Path], except: &str) -> Vec<DriftedField> {
    let entries = parse_managed_fields(object).unwrap_or_default();
    paths
        .iter()
        .map(|path| {
            let mut managers: Vec<String> = entries
                .iter()
                .filter(|entry| entry.manager != except && (0..=path.len()).any(|n| entry.fields.contains(&path[..n])))
                .map(|entry| entry.manager.clone())
                .collect();
            managers.sort();
            managers.dedup();
            DriftedField { path: path_string(path), managers }
        })
        .collect()
}

/// The `DriftCorrected` message for drift of an object's own fields:
/// `reverted .spec.forProvider.size (changed by kubectl-edit), .metadata.labels.team (removed
/// or changed by an unknown manager)`.
pub fn message(fields: &[DriftedField]) -> String {
    if fields.is_empty() {
        return "reverted a change made behind the control plane's back (the fields are not known)".into();
    }
    let listed: Vec<String> = fields
        .iter()
        .map(|field| match field.managers.as_slice() {
            [] => format!("{} (removed or changed by an unknown manager)", field.path),
            managers => format!("{} (changed by {})", field.path, managers.join(", ")),
        })
        .collect();
    format!("reverted {}", listed.join(", "))
}

/// The `DriftCorrected` message for drift of an external resource, with the fields its
/// provider reported (`diff`).
pub fn external_message(diff: &str) -> String {
    if diff.is_empty() {
        "reverted the external resource, changed outside the control plane (the provider names no fields)".into()
    } else {
        format!("reverted the external resource, changed outside the control plane in: {diff}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn paths(desired: Value, observed: Value) -> Vec<String> {
        changed_fields(&desired, &observed).iter().map(|p| path_string(p)).collect()
    }

    #[test]
    fn changed_leaves_are_named_and_equal_or_extra_ones_are_not() {
        let desired = json!({"apiVersion": "v1", "kind": "X", "metadata": {"name": "a", "labels": {"team": "x"}},
            "spec": {"size": 2, "color": "red", "tags": ["a", "b"], "empty": {}}});
        let same = json!({"apiVersion": "v1", "kind": "X", "metadata": {"name": "a", "uid": "u", "labels": {"team": "x", "other": "y"}},
            "spec": {"size": 2, "color": "red", "tags": ["b", "z", "a"], "empty": {"someone": "else"}, "extra": 1}, "status": {"ok": true}});
        assert!(paths(desired.clone(), same).is_empty());
        let drifted = json!({"metadata": {"name": "a"}, "spec": {"size": 3, "color": "red", "tags": ["a"], "empty": 1}});
        assert_eq!(paths(desired, drifted), [".metadata.labels.team", ".spec.empty", ".spec.size", ".spec.tags"]);
    }

    #[test]
    fn the_managers_owning_a_field_now_are_named_but_not_the_controller() {
        let object = json!({"metadata": {"managedFields": [
            {"manager": "composer", "operation": "Apply", "apiVersion": "v1", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:spec": {"f:color": {}, "f:tags": {}}}},
            {"manager": "kubectl-edit", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:spec": {"f:size": {}, "f:tags": {}}}},
            {"manager": "kubectl-patch", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:spec": {"f:blob": {}}}}
        ]}});
        let desired = json!({"spec": {"size": 1, "tags": ["a"], "blob": {"inner": 1}, "gone": true}});
        let observed = json!({"spec": {"size": 5, "tags": ["b"], "blob": 7}});
        let fields = attribute(&object, &changed_fields(&desired, &observed), "composer");
        assert_eq!(
            fields,
            [
                DriftedField { path: ".spec.blob.inner".into(), managers: vec!["kubectl-patch".into()] },
                DriftedField { path: ".spec.gone".into(), managers: vec![] },
                DriftedField { path: ".spec.size".into(), managers: vec!["kubectl-edit".into()] },
                DriftedField { path: ".spec.tags".into(), managers: vec!["kubectl-edit".into()] },
            ]
        );
        assert_eq!(
            message(&fields),
            "reverted .spec.blob.inner (changed by kubectl-patch), .spec.gone (removed or changed by an unknown manager), \
             .spec.size (changed by kubectl-edit), .spec.tags (changed by kubectl-edit)"
        );
    }

    #[test]
    fn unreadable_managed_fields_name_no_manager() {
        let object = json!({"metadata": {"managedFields": "nonsense"}});
        let fields = attribute(&object, &changed_fields(&json!({"spec": {"a": 1}}), &json!({})), "me");
        assert_eq!(fields, [DriftedField { path: ".spec.a".into(), managers: vec![] }]);
    }
}
