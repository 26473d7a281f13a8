//! What CronOperations and WatchOperations share: the Operations they create from their
//! `operationTemplate`, which of those still run, the history limits
//! (`successfulHistoryLimit` 3, `failedHistoryLimit` 1, oldest deleted first), and the status
//! fields `runningOperationRefs` and `lastSuccessfulTime`.

use oxplane_runtime::client::{DeleteOptions, Kube};
use oxplane_runtime::conditions;
use oxplane_runtime::controller::ReconcileError;
use oxplane_runtime::object;
use serde_json::{Map, Value, json};

use super::operation::is_complete;
use super::operation_kind;

/// Kept successful Operations when `successfulHistoryLimit` is unset.
pub const DEFAULT_SUCCESSFUL_HISTORY_LIMIT: i64 = 3;
/// Kept failed Operations when `failedHistoryLimit` is unset.
pub const DEFAULT_FAILED_HISTORY_LIMIT: i64 = 1;

/// An Operation named `name` from `owner`'s `spec.operationTemplate`: the template's labels
/// and annotations, `label=<owner name>`, `annotations`, and `owner` as controller.
pub fn operation_from_template(owner: &Value, label: &str, name: &str, annotations: &Map<String, Value>) -> Value {
    let template = owner.pointer("/spec/operationTemplate").cloned().unwrap_or_else(|| json!({}));
    let mut labels = template.pointer("/metadata/labels").and_then(Value::as_object).cloned().unwrap_or_default();
    labels.insert(label.to_string(), json!(object::name(owner).unwrap_or_default()));
    let mut all_annotations = template.pointer("/metadata/annotations").and_then(Value::as_object).cloned().unwrap_or_default();
    all_annotations.extend(annotations.clone());
    let mut metadata = json!({
        "name": name,
        "labels": labels,
        "ownerReferences": [object::owner_reference(owner, true, true)],
    });
    if !all_annotations.is_empty() {
        metadata["annotations"] = Value::Object(all_annotations);
    }
    json!({
        "apiVersion": "ops.crossplane.io/v1alpha1",
        "kind": "Operation",
        "metadata": metadata,
        "spec": template.get("spec").cloned().unwrap_or_else(|| json!({})),
    })
}

/// The Operations `owner` created (labelled `label=<owner name>`), newest first.
pub async fn owned(kube: &Kube, label: &str, owner: &str) -> Result<Vec<Value>, ReconcileError> {
    let mut operations = kube.list(&operation_kind(), None, Some(&format!("{label}={owner}"))).await?;
    operations.sort_by(|a, b| {
        let key = |o: &Value| (o.pointer("/metadata/creationTimestamp").and_then(Value::as_str).unwrap_or_default().to_string(), object::name(o).unwrap_or_default().to_string());
        key(b).cmp(&key(a))
    });
    Ok(operations)
}

fn succeeded(operation: &Value) -> bool {
    conditions::is_true(operation, "Succeeded")
}

/// Deletes finished Operations beyond the owner's history limits (the oldest); returns the
/// ones kept, newest first.
pub async fn collect_garbage(kube: &Kube, owner: &Value, operations: Vec<Value>) -> Result<Vec<Value>, ReconcileError> {
    let limit = |field: &str, default: i64| owner.pointer(&format!("/spec/{field}")).and_then(Value::as_i64).unwrap_or(default).max(0) as usize;
    let (keep_succeeded, keep_failed) = (limit("successfulHistoryLimit", DEFAULT_SUCCESSFUL_HISTORY_LIMIT), limit("failedHistoryLimit", DEFAULT_FAILED_HISTORY_LIMIT));
    let (mut seen_succeeded, mut seen_failed) = (0, 0);
    let mut kept = Vec::new();
    for operation in operations {
        let excess = if !is_complete(&operation) {
            false
        } else if succeeded(&operation) {
            seen_succeeded += 1;
            seen_succeeded > keep_succeeded
        } else {
            seen_failed += 1;
            seen_failed > keep_failed
        };
        if excess {
            let name = object::name(&operation).unwrap_or_default().to_string();
            if let Err(error) = kube.delete(&operation_kind(), None, &name, &DeleteOptions::default()).await
                && !error.is_not_found()
            {
                return Err(error.into());
            }
        } else {
            kept.push(operation);
        }
    }
    Ok(kept)
}

/// When the condition of `type_` last changed.
fn transition_time(object: &Value, type_: &str) -> Option<String> {
    object
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))?
        .get("lastTransitionTime")?
        .as_str()
        .map(str::to_string)
}

/// Operations still running (not yet succeeded or failed).
pub fn running(operations: &[Value]) -> Vec<&Value> {
    operations.iter().filter(|o| !is_complete(o) && !object::is_deleting(o)).collect()
}

/// Names of the Operations still running.
pub fn running_names(operations: &[Value]) -> Vec<String> {
    running(operations).iter().filter_map(|o| object::name(o).map(str::to_string)).collect()
}

/// `concurrencyPolicy: Replace`: deletes the running Operations and drops them from the list.
pub async fn delete_running(kube: &Kube, operations: &mut Vec<Value>) -> Result<(), ReconcileError> {
    let busy = running_names(operations);
    for name in &busy {
        match kube.delete(&operation_kind(), None, name, &DeleteOptions::default()).await {
            Ok(_) => {}
            Err(error) if error.is_not_found() => {}
            Err(error) => return Err(error.into()),
        }
    }
    operations.retain(|o| !object::name(o).is_some_and(|n| busy.iter().any(|b| b == n)));
    Ok(())
}

/// Sets `runningOperationRefs` and `lastSuccessfulTime` from the owner's Operations.
pub fn set_run_status(owner: &mut Value, operations: &[Value]) {
    let refs: Vec<Value> = running(operations).iter().map(|o| json!({"name": object::name(o).unwrap_or_default()})).collect();
    if refs.is_empty() {
        if let Some(status) = owner.get_mut("status").and_then(Value::as_object_mut) {
            status.remove("runningOperationRefs");
        }
    } else {
        object::set_status_field(owner, "runningOperationRefs", Value::Array(refs));
    }
    let last_success = operations.iter().filter(|o| succeeded(o)).filter_map(|o| transition_time(o, "Succeeded")).max();
    let previous = owner.pointer("/status/lastSuccessfulTime").and_then(Value::as_str).map(str::to_string);
    if let Some(time) = last_success.into_iter().chain(previous).max() {
        object::set_status_field(owner, "lastSuccessfulTime", json!(time));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn operations_carry_the_template_the_label_and_the_owner() {
        let owner = json!({
            "apiVersion": "ops.crossplane.io/v1alpha1", "kind": "CronOperation",
            "metadata": {"name": "nightly", "uid": "u1"},
            "spec": {"operationTemplate": {"metadata": {"labels": {"team": "a"}, "annotations": {"note": "x"}},
                "spec": {"mode": "Pipeline", "pipeline": [{"step": "s", "functionRef": {"name": "f"}}]}}},
        });
        let mut extra = Map::new();
        extra.insert("k".into(), json!("v"));
        let op = operation_from_template(&owner, "ops.crossplane.io/cronoperation", "nightly-60", &extra);
        assert_eq!(op["metadata"]["name"], "nightly-60");
        assert_eq!(op["metadata"]["labels"], json!({"team": "a", "ops.crossplane.io/cronoperation": "nightly"}));
        assert_eq!(op["metadata"]["annotations"], json!({"note": "x", "k": "v"}));
        assert_eq!(op["metadata"]["ownerReferences"][0]["uid"], "u1");
        assert_eq!(op["metadata"]["ownerReferences"][0]["controller"], true);
        assert_eq!(op["spec"]["pipeline"][0]["step"], "s");
    }

    #[test]
    fn run_status_lists_running_operations_and_the_last_success() {
        let op = |name: &str, status: Option<(&str, &str)>| {
            let conditions: Vec<Value> = status
                .into_iter()
                .map(|(s, t)| json!({"type": "Succeeded", "status": s, "reason": "r", "lastTransitionTime": t}))
                .collect();
            json!({"metadata": {"name": name}, "status": {"conditions": conditions}})
        };
        let ops = vec![
            op("a", None),
            op("b", Some(("True", "2026-01-01T00:00:02Z"))),
            op("c", Some(("True", "2026-01-01T00:00:05Z"))),
            op("d", Some(("False", "2026-01-01T00:00:09Z"))),
            op("e", Some(("Unknown", "2026-01-01T00:00:09Z"))),
        ];
        let mut owner = json!({"metadata": {"name": "o"}});
        set_run_status(&mut owner, &ops);
        assert_eq!(owner["status"]["runningOperationRefs"], json!([{"name": "a"}, {"name": "e"}]));
        assert_eq!(owner["status"]["lastSuccessfulTime"], "2026-01-01T00:00:05Z");
        set_run_status(&mut owner, &[]);
        assert!(owner["status"].get("runningOperationRefs").is_none());
        assert_eq!(owner["status"]["lastSuccessfulTime"], "2026-01-01T00:00:05Z");
    }
}
