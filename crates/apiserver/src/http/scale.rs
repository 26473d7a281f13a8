//! The `scale` subresource of custom resources: an `autoscaling/v1` Scale view of the paths a
//! CRD names (`specReplicasPath`, `statusReplicasPath`, `labelSelectorPath`). Writing it sets
//! the spec replicas of the object, with the same optimistic concurrency as any update.

use axum::Json;
use axum::response::{IntoResponse, Response};
use oxplane_store::{Write, WriteResult};
use serde_json::{Value, json};

use super::AppState;
use crate::ops::{ObjectTarget, PatchType, WriteOptions, apply_to, parse_body};
use crate::state::store_error;
use crate::objects;
use crate::registry::ScalePaths;
use crate::status::{ApiError, Cause};

/// The value at a dotted path such as `.spec.replicas`.
fn at<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
    path.trim_start_matches('.').split('.').try_fold(object, |v, key| v.get(key))
}

/// Sets the value at a dotted path, creating objects on the way.
fn set(object: &mut Value, path: &str, value: Value) {
    let mut keys: Vec<&str> = path.trim_start_matches('.').split('.').collect();
    let Some(last) = keys.pop() else { return };
    let mut node = object;
    for key in keys {
        if !node[key].is_object() {
            node[key] = json!({});
        }
        node = &mut node[key];
    }
    node[last] = value;
}

/// The Scale view of an object.
pub fn to_scale(paths: &ScalePaths, object: &Value) -> Value {
    let meta = &object["metadata"];
    let mut scale = json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"],
            "resourceVersion": meta["resourceVersion"], "creationTimestamp": meta["creationTimestamp"],
        },
        "spec": {"replicas": at(object, &paths.spec_replicas).cloned().unwrap_or(json!(0))},
        "status": {"replicas": paths.status_replicas.as_deref().and_then(|p| at(object, p)).cloned().unwrap_or(json!(0))},
    });
    if let Some(selector) = paths.label_selector.as_deref().and_then(|p| at(object, p)).and_then(Value::as_str) {
        scale["status"]["selector"] = json!(selector);
    }
    if let Some(meta) = scale["metadata"].as_object_mut() {
        meta.retain(|_, v| !v.is_null());
    }
    scale
}

/// PUT or PATCH of the scale subresource: `body` is a Scale (or a patch to one).
pub async fn write(
    state: &AppState,
    target: &ObjectTarget<'_>,
    paths: &ScalePaths,
    patch: Option<PatchType>,
    body: &[u8],
    options: &WriteOptions,
) -> Result<Response, ApiError> {
    let resource = target.resource;
    let key = resource.key(target.namespace, target.name);
    let Some(kv) = state.store.get(&key).await.map_err(store_error)?.kv else {
        return Err(ApiError::not_found(&resource.group, &resource.plural, target.name));
    };
    let mut object = objects::from_store(&kv)?;
    let current = to_scale(paths, &object);
    let scale = match patch {
        Some(patch_type) => apply_to(resource, patch_type, &current, body)?,
        None => parse_body(body)?,
    };
    if let Some(rv) = objects::meta_str(&scale, "resourceVersion")
        && rv != kv.mod_revision.to_string()
    {
        return Err(ApiError::conflict(&resource.group, &resource.plural, target.name));
    }
    let replicas = scale["spec"]["replicas"].as_i64().filter(|r| *r >= 0).ok_or_else(|| {
        ApiError::invalid("Scale", "autoscaling", target.name, vec![Cause {
            reason: "FieldValueInvalid".into(),
            message: format!("Invalid value: {}: must be a non-negative integer", scale["spec"]["replicas"]),
            field: "spec.replicas".into(),
        }])
    })?;
    set(&mut object, &paths.spec_replicas, json!(replicas));
    let generation = object["metadata"]["generation"].as_i64().unwrap_or(1);
    if at(&object, &paths.spec_replicas) != at(&objects::from_store(&kv)?, &paths.spec_replicas) {
        objects::metadata_mut(&mut object)?.insert("generation".into(), json!(generation + 1));
    }
    if options.dry_run {
        return Ok(Json(to_scale(paths, &object)).into_response());
    }
    let write = Write::Update { key, value: objects::to_store(&object), expected: kv.mod_revision };
    match state.store.write(write).await.map_err(store_error)? {
        WriteResult::Committed(event) => {
            objects::set_resource_version(&mut object, event.revision());
            Ok(Json(to_scale(paths, &object)).into_response())
        }
        WriteResult::Rejected { .. } => Err(ApiError::conflict(&resource.group, &resource.plural, target.name)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_views_read_and_write_the_named_paths() {
        let paths = ScalePaths {
            spec_replicas: ".spec.replicas".into(),
            status_replicas: Some(".status.replicas".into()),
            label_selector: Some(".status.selector".into()),
        };
        let object = json!({"metadata": {"name": "w", "resourceVersion": "7"}, "spec": {"replicas": 3}, "status": {"replicas": 2, "selector": "app=w"}});
        let scale = to_scale(&paths, &object);
        assert_eq!(scale["spec"]["replicas"], 3);
        assert_eq!(scale["status"], json!({"replicas": 2, "selector": "app=w"}));
        assert_eq!(scale["metadata"], json!({"name": "w", "resourceVersion": "7"}));
        let mut empty = json!({"metadata": {"name": "w"}});
        set(&mut empty, ".spec.deep.replicas", json!(5));
        assert_eq!(empty["spec"]["deep"]["replicas"], 5);
        assert_eq!(to_scale(&paths, &json!({"metadata": {}}))["spec"]["replicas"], 0);
    }
}
