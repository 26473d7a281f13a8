//! PATCH: JSON merge patch, JSON patch (Go-library semantics) and strategic merge patch
//! (built-in kinds only; custom resources answer 415, as Kubernetes does). The patch is applied
//! to the stored object and written with compare-and-swap; on a concurrent change it is applied
//! again to the new version, unless the patch itself pins a resourceVersion.

use serde_json::Value;

use super::managed::Ownership;
use super::update::{Commit, commit};
use super::{ObjectTarget, WriteOptions, Written};
use crate::objects;
use crate::state::{AppState, store_error};
use crate::patch::{self, JsonPatchError, StrategicError};
use crate::registry::ResourceDef;
use crate::status::{ApiError, Reason};

/// The patch formats, by request content type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchType {
    /// `application/merge-patch+json`
    Merge,
    /// `application/json-patch+json`
    Json,
    /// `application/strategic-merge-patch+json`
    Strategic,
    /// `application/apply-patch+yaml`
    Apply,
}

impl PatchType {
    /// The patch type of a content type.
    pub fn from_content_type(content_type: Option<&str>) -> Result<PatchType, ApiError> {
        match content_type {
            Some("application/merge-patch+json") => Ok(PatchType::Merge),
            Some("application/json-patch+json") => Ok(PatchType::Json),
            Some("application/strategic-merge-patch+json") => Ok(PatchType::Strategic),
            Some("application/apply-patch+yaml") | Some("application/apply-patch+cbor") => Ok(PatchType::Apply),
            other => Err(ApiError::new(
                Reason::UnsupportedMediaType,
                format!(
                    "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {})",
                    other.unwrap_or("no content type")
                ),
            )),
        }
    }
}

fn json_patch_error(error: JsonPatchError) -> ApiError {
    let reason = match error {
        JsonPatchError::Malformed(_) => Reason::BadRequest,
        JsonPatchError::TooManyOperations { .. } => Reason::RequestEntityTooLarge,
        _ => Reason::Invalid,
    };
    ApiError::new(reason, error.to_string())
}

fn strategic_error(error: StrategicError) -> ApiError {
    let reason = if error.status_code() == 400 { Reason::BadRequest } else { Reason::Invalid };
    ApiError::new(reason, error.to_string())
}

/// Applies the patch body to `current` (an object of `resource`, or a view of one).
pub fn apply_to(resource: &ResourceDef, patch_type: PatchType, current: &Value, body: &[u8]) -> Result<Value, ApiError> {
    let parsed: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the patch is not valid JSON: {e}")))?;
    match patch_type {
        PatchType::Merge => {
            if !parsed.is_object() {
                return Err(ApiError::bad_request("a merge patch must be a JSON object"));
            }
            patch::merge::try_apply(current, &parsed).map_err(|e| ApiError::new(Reason::Invalid, e.to_string()))
        }
        PatchType::Json => patch::json_patch::apply(current, &parsed).map_err(json_patch_error),
        PatchType::Strategic => {
            if resource.crd.is_some() {
                return Err(ApiError::new(
                    Reason::UnsupportedMediaType,
                    "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
                ));
            }
            let schema = patch::for_kind(&resource.kind).unwrap_or(&patch::OBJECT_META_ONLY);
            patch::strategic::apply(current, &parsed, schema).map_err(strategic_error)
        }
        // Server-side apply does not go through `apply_to`; `patch` hands it to `ops::apply`.
        PatchType::Apply => Err(ApiError::new(
            Reason::UnsupportedMediaType,
            "server-side apply is not available for this subresource; use a merge, JSON or strategic merge patch",
        )),
    }
}

/// Whether a patch body sets `metadata.resourceVersion` (a merge or strategic patch naming it,
/// or a JSON patch adding or replacing it).
fn pins_resource_version(patch_type: PatchType, body: &[u8]) -> bool {
    let Ok(parsed) = serde_json::from_slice::<Value>(body) else { return false };
    match patch_type {
        PatchType::Merge | PatchType::Strategic => parsed.pointer("/metadata/resourceVersion").is_some_and(|v| !v.is_null()),
        PatchType::Json => parsed.as_array().is_some_and(|ops| {
            ops.iter().any(|op| op.get("path").and_then(Value::as_str) == Some("/metadata/resourceVersion") && matches!(op.get("op").and_then(Value::as_str), Some("add" | "replace")))
        }),
        PatchType::Apply => false,
    }
}

/// PATCH an object (or one of its subresources).
pub async fn patch(
    state: &AppState,
    target: &ObjectTarget<'_>,
    patch_type: PatchType,
    body: &[u8],
    options: &WriteOptions,
) -> Result<Written, ApiError> {
    if patch_type == PatchType::Apply {
        return super::apply(state, target, body, options).await;
    }
    let ObjectTarget { resource, name, .. } = *target;
    let key = target.key();
    // A resourceVersion the patch itself sets is a precondition; the one the object already
    // carried is not (a patch without one applies to whatever is current).
    let pins = pins_resource_version(patch_type, body);
    for attempt in 0..super::RACE_RETRIES {
        super::after_race(attempt).await;
        let Some(kv) = state.store.get(&key).await.map_err(store_error)?.kv else {
            return Err(ApiError::not_found(&resource.group, &resource.plural, name));
        };
        let old = objects::from_store(&kv)?;
        // The patch is written against the client's view of the object.
        let mut view = old.clone();
        crate::webhooks::conversion::present(&state.cache, resource, &mut view).await?;
        let mut patched = apply_to(resource, patch_type, &view, body)?;
        crate::convert::to_storage(resource, &mut patched);
        if !patched.is_object() {
            return Err(ApiError::bad_request("the patched object is not a JSON object"));
        }
        let pinned = pins.then(|| objects::meta_str(&patched, "resourceVersion").map(String::from)).flatten();
        if let Some(rv) = &pinned
            && *rv != kv.mod_revision.to_string()
        {
            return Err(ApiError::conflict(&resource.group, &resource.plural, name));
        }
        if objects::meta_str(&patched, "name").is_some_and(|n| n != name) {
            return Err(ApiError::bad_request("metadata.name cannot be changed by a patch"));
        }
        match commit(state, target, &kv, &old, patched, None, options, Ownership::Record(options.manager())).await? {
            Commit::Written(written) => return Ok(written),
            Commit::Raced if pinned.is_some() => return Err(ApiError::conflict(&resource.group, &resource.plural, name)),
            Commit::Raced => continue,
        }
    }
    Err(ApiError::conflict(&resource.group, &resource.plural, name))
}
