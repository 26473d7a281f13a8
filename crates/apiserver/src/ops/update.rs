//! Updates: PUT, the commit step every update shares (PUT, PATCH, apply and the server's own
//! read-modify-write through [`modify`]), and the merge of a proposed object with the stored
//! one that keeps server-owned metadata and splits what each subresource may change.

use oxplane_store::{KeyValue, Write, WriteResult};
use serde_json::{Value, json};

use super::admission::{AdmissionRequest, Operation};
use super::prepare::{admit, check_type, is_crd, normalize, validate};
use super::managed::{Ownership, check_manager, record_update};
use super::{ObjectTarget, WriteOptions, Written, lifecycle};
use crate::objects;
use crate::registry::ResourceDef;
use crate::state::{AppState, parse_revision, store_error};
use crate::status::{ApiError, Cause};

/// The outcome of one compare-and-swap attempt.
pub(super) enum Commit {
    /// Stored (or, for a dry run, checked).
    Written(Written),
    /// The object changed since it was read; read it again.
    Raced,
}

#[allow(clippy::too_many_arguments)] // one commit step shared by every update path
/// Stores `proposed` as the new state of the object read as `kv`/`old`, after every check a
/// write must pass. A deleting object whose last finalizer the update removes leaves the store.
pub(super) async fn commit(
    state: &AppState,
    target: &ObjectTarget<'_>,
    kv: &KeyValue,
    old: &Value,
    proposed: Value,
    raw: Option<&[u8]>,
    options: &WriteOptions,
    ownership: Ownership<'_>,
) -> Result<Commit, ApiError> {
    let ObjectTarget { resource, namespace, name, subresource } = *target;
    // With a conversion webhook, the update is made in the version written through: the
    // stored object is converted to it here, the result back to the storage version below.
    let conversion = crate::webhooks::conversion::for_resource(&state.cache, resource);
    let converted_old;
    let old = match &conversion {
        Some(conversion) => {
            let mut view = old.clone();
            crate::webhooks::conversion::convert(&state.cache, conversion, std::slice::from_mut(&mut view), &resource.api_version()).await?;
            converted_old = view;
            &converted_old
        }
        None => old,
    };
    // Computed ownership covers the whole object, also when a subresource write keeps the
    // rest of the stored metadata.
    let computed = match ownership {
        Ownership::Computed => Some(proposed["metadata"].get("managedFields").cloned()),
        Ownership::Record(_) => None,
    };
    let mut object = merge_for_update(resource, old, proposed, subresource)?;
    if let Some(managed) = computed {
        let meta = objects::metadata_mut(&mut object)?;
        match managed {
            Some(list) => meta.insert("managedFields".into(), list),
            None => meta.remove("managedFields"),
        };
    }
    normalize(resource, &mut object)?;
    let request = AdmissionRequest {
        operation: Operation::Update,
        resource,
        namespace,
        name,
        subresource,
        old: Some(old),
        dry_run: options.dry_run,
        propagation: None,
        user: options.user.as_ref(),
    };
    state.admission.mutate(state, &request, &mut object).await?;
    // A custom resource written through another served version of its storage (conversion
    // `None`) stays in the version it is stored in, with that version's defaults: a
    // controller adding a finalizer through v1 never writes v1's defaults into an object a
    // user wrote as v2, nor moves its generation.
    let stored_version = old
        .get("apiVersion")
        .and_then(Value::as_str)
        .filter(|v| resource.crd.is_some() && *v != resource.api_version())
        .and_then(|v| state.registry.find_kind(v, &resource.kind))
        .filter(|stored| stored.storage == resource.storage && stored.version != resource.version);
    if let Some(stored) = &stored_version {
        object["apiVersion"] = json!(stored.api_version());
    }
    let warnings = admit(resource, stored_version.as_deref(), &mut object, name, options.field_validation, raw, Some(old))?;
    validate(resource, &object, name)?;
    lifecycle::check_update(resource, old, &object, name)?;
    if let Ownership::Record(manager) = ownership {
        check_manager(manager)?;
        record_update(resource, Some(old), &mut object, manager, subresource)?;
    }
    state.admission.validate(state, &request, &object).await?;
    if options.dry_run {
        crate::convert::present(resource, &mut object);
        return Ok(Commit::Written(Written { object, warnings, created: false }));
    }
    let key = target.key();
    if lifecycle::ready_to_vanish(resource, &object) {
        // The last finalizer went: the object leaves the store now.
        return match state.store.write(Write::Delete { key, expected: kv.mod_revision }).await.map_err(store_error)? {
            WriteResult::Committed(event) => {
                objects::set_resource_version(&mut object, event.revision());
                removed(state, resource, name);
                crate::convert::present(resource, &mut object);
                Ok(Commit::Written(Written { object, warnings, created: false }))
            }
            WriteResult::Rejected { .. } => Ok(Commit::Raced),
        };
    }
    if unchanged(old, &object) {
        // As kube-apiserver: a write that changes nothing (managedFields timestamps aside) is
        // not persisted; the object keeps its resourceVersion and no watcher hears of it.
        let mut object = old.clone();
        objects::set_resource_version(&mut object, kv.mod_revision);
        crate::convert::present(resource, &mut object);
        return Ok(Commit::Written(Written { object, warnings, created: false }));
    }
    let value = match &conversion {
        Some(conversion) => {
            let mut stored = object.clone();
            crate::webhooks::conversion::convert(&state.cache, conversion, std::slice::from_mut(&mut stored), &conversion.storage_api_version()).await?;
            objects::to_store(&stored)
        }
        None => objects::to_store(&object),
    };
    let write = Write::Update { key, value, expected: kv.mod_revision };
    match state.store.write(write).await.map_err(store_error)? {
        WriteResult::Committed(event) => {
            objects::set_resource_version(&mut object, event.revision());
            if is_crd(resource) && subresource.is_none() && !lifecycle::is_deleting(&object) {
                object = crate::http::crds::establish(state, object).await?;
            }
            crate::convert::present(resource, &mut object);
            Ok(Commit::Written(Written { object, warnings, created: false }))
        }
        WriteResult::Rejected { .. } => Ok(Commit::Raced),
    }
}

/// Whether `new` is `old` but for its resourceVersion and the timestamps of its
/// managedFields entries.
fn unchanged(old: &Value, new: &Value) -> bool {
    fn comparable(object: &Value) -> Value {
        let mut object = object.clone();
        if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("resourceVersion");
            if let Some(entries) = meta.get_mut("managedFields").and_then(Value::as_array_mut) {
                for entry in entries.iter_mut().filter_map(Value::as_object_mut) {
                    entry.remove("time");
                }
            }
        }
        object
    }
    comparable(old) == comparable(new)
}

/// What follows an object's removal from the store: a CRD's kinds stop being served.
pub(super) fn removed(state: &AppState, resource: &ResourceDef, name: &str) {
    if is_crd(resource) {
        state.registry.remove_custom(name);
    }
}

/// PUT: replaces an object (or one of its subresources) with `incoming`.
pub async fn update(
    state: &AppState,
    target: &ObjectTarget<'_>,
    mut incoming: Value,
    raw: Option<&[u8]>,
    options: &WriteOptions,
) -> Result<Written, ApiError> {
    let ObjectTarget { resource, name, .. } = *target;
    if !incoming.is_object() {
        return Err(ApiError::bad_request("the request body must be a JSON object"));
    }
    check_type(resource, &mut incoming)?;
    crate::convert::to_storage(resource, &mut incoming);
    if let Some(body_name) = objects::meta_str(&incoming, "name")
        && body_name != name
    {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    let expected = match objects::meta_str(&incoming, "resourceVersion") {
        Some(rv) => Some(parse_revision(rv).map_err(|_| {
            ApiError::invalid(&resource.kind, &resource.group, name, vec![Cause {
                reason: "FieldValueInvalid".into(),
                message: format!("Invalid value: {rv:?}: must be a resource version returned by the server"),
                field: "metadata.resourceVersion".into(),
            }])
        })?),
        None if resource.unconditional_update => None,
        None => {
            return Err(ApiError::invalid(&resource.kind, &resource.group, name, vec![Cause {
                reason: "FieldValueInvalid".into(),
                message: "Invalid value: 0x0: must be specified for an update".into(),
                field: "metadata.resourceVersion".into(),
            }]));
        }
    };
    let Some(kv) = state.store.get(&target.key()).await.map_err(store_error)?.kv else {
        return Err(ApiError::not_found(&resource.group, &resource.plural, name));
    };
    if expected.is_some_and(|expected| expected != kv.mod_revision) {
        return Err(ApiError::conflict(&resource.group, &resource.plural, name));
    }
    let old = objects::from_store(&kv)?;
    match commit(state, target, &kv, &old, incoming, raw, options, Ownership::Record(options.manager())).await? {
        Commit::Written(written) => Ok(written),
        Commit::Raced => Err(ApiError::conflict(&resource.group, &resource.plural, name)),
    }
}

/// The server's own read-modify-write: `change` edits the stored object (in storage form) and
/// says whether it changed anything; the result is committed like any update, retrying when
/// the object moves. `None` when the object is gone or `change` changed nothing.
pub async fn modify<F>(state: &AppState, target: &ObjectTarget<'_>, options: &WriteOptions, mut change: F) -> Result<Option<Written>, ApiError>
where
    F: FnMut(&mut Value) -> bool,
{
    for attempt in 0..super::RACE_RETRIES {
        super::after_race(attempt).await;
        let Some(kv) = state.store.get(&target.key()).await.map_err(store_error)?.kv else { return Ok(None) };
        let old = objects::from_store(&kv)?;
        let mut new = old.clone();
        if !change(&mut new) {
            return Ok(None);
        }
        match commit(state, target, &kv, &old, new, None, options, Ownership::Record(options.manager())).await? {
            Commit::Written(written) => return Ok(Some(written)),
            Commit::Raced => continue,
        }
    }
    Err(ApiError::conflict(&target.resource.group, &target.resource.plural, target.name))
}

/// Makes `to`'s status that of `from` (absent if `from` has none).
fn copy_status(from: &Value, to: &mut Value) {
    match from.get("status") {
        Some(status) => to["status"] = status.clone(),
        None => {
            if let Some(map) = to.as_object_mut() {
                map.remove("status");
            }
        }
    }
}

/// Makes `to`'s `spec.finalizers` those of `from` (a Namespace's content finalizers).
fn copy_spec_finalizers(from: &Value, to: &mut Value) {
    let finalizers = from["spec"].get("finalizers").cloned();
    if !to["spec"].is_object() {
        to["spec"] = json!({});
    }
    if let Some(spec) = to["spec"].as_object_mut() {
        match finalizers {
            Some(list) => spec.insert("finalizers".into(), list),
            None => spec.remove("finalizers"),
        };
    }
}

/// Builds the object to store from the current one and the request body: server-owned
/// metadata is kept, the status subresource splits what each endpoint may change, and the
/// generation moves when the spec (anything but apiVersion, metadata and status) changes.
pub fn merge_for_update(resource: &ResourceDef, old: &Value, incoming: Value, subresource: Option<&str>) -> Result<Value, ApiError> {
    let has_status = resource.subresources.iter().any(|s| s == "status");
    let namespace = lifecycle::is_namespace(resource);
    let mut object = match subresource {
        Some("status") => {
            let mut object = old.clone();
            copy_status(&incoming, &mut object);
            object
        }
        // A Namespace's content finalizers change only through `finalize`.
        Some("finalize") if namespace => {
            let mut object = old.clone();
            copy_spec_finalizers(&incoming, &mut object);
            object
        }
        _ => {
            let mut object = incoming;
            if has_status {
                copy_status(old, &mut object);
            }
            if namespace {
                copy_spec_finalizers(old, &mut object);
            }
            object
        }
    };
    let old_meta = old.get("metadata").cloned().unwrap_or_else(|| json!({}));
    let meta = objects::metadata_mut(&mut object)?;
    for owned in ["uid", "creationTimestamp", "generation", "namespace", "name", "deletionTimestamp", "deletionGracePeriodSeconds"] {
        match old_meta.get(owned) {
            Some(value) => meta.insert(owned.into(), value.clone()),
            None => meta.remove(owned),
        };
    }
    let spec_changed = {
        let strip = |v: &Value| {
            let mut v = v.clone();
            if let Some(map) = v.as_object_mut() {
                map.remove("metadata");
                // Writing through another served version of the same storage changes only
                // apiVersion (conversion `None`); that is not a change of the spec.
                map.remove("apiVersion");
                if has_status {
                    map.remove("status");
                }
            }
            v
        };
        strip(old) != strip(&object)
    };
    if spec_changed {
        let generation = old_meta.get("generation").and_then(Value::as_i64).unwrap_or(1) + 1;
        objects::metadata_mut(&mut object)?.insert("generation".into(), json!(generation));
    }
    Ok(object)
}
