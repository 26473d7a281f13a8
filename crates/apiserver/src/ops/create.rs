//! POST: create an object.

use oxplane_store::{Write, WriteResult};
use serde_json::{Value, json};

use super::admission::{AdmissionRequest, Operation};
use super::prepare::{admit, check_type, is_crd, normalize, validate};
use super::managed::{Ownership, check_manager, record_update};
use super::{WriteOptions, Written, lifecycle};
use crate::objects;
use crate::registry::ResourceDef;
use crate::state::{AppState, store_error};
use crate::status::{ApiError, Cause};

/// Characters of generated name suffixes (no vowels, no look-alikes), as Kubernetes uses.
const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// `generateName` plus five random characters.
fn generated_name(prefix: &str) -> String {
    use rand::Rng;
    let mut rng = rand::rng();
    let suffix: String = (0..5).map(|_| SUFFIX_ALPHABET[rng.random_range(0..SUFFIX_ALPHABET.len())] as char).collect();
    format!("{prefix}{suffix}")
}

/// Creates `object` (already decoded) in `namespace`; `raw` is the request body when it is the
/// object itself, for duplicate-field detection.
pub async fn create(
    state: &AppState,
    resource: &ResourceDef,
    namespace: Option<&str>,
    object: Value,
    raw: Option<&[u8]>,
    options: &WriteOptions,
) -> Result<Written, ApiError> {
    create_with(state, resource, namespace, object, raw, options, Ownership::Record(options.manager())).await
}

/// [`create`], with the way its field ownership is recorded.
pub(super) async fn create_with(
    state: &AppState,
    resource: &ResourceDef,
    namespace: Option<&str>,
    mut object: Value,
    raw: Option<&[u8]>,
    options: &WriteOptions,
    ownership: Ownership<'_>,
) -> Result<Written, ApiError> {
    if !object.is_object() {
        return Err(ApiError::bad_request("the request body must be a JSON object"));
    }
    if resource.namespaced && namespace.is_none() {
        return Err(ApiError::new(
            crate::status::Reason::MethodNotAllowed,
            format!("the server does not allow this method on the requested resource: {} are created inside a namespace", resource.plural),
        ));
    }
    check_type(resource, &mut object)?;
    crate::convert::to_storage(resource, &mut object);
    let generate = objects::meta_str(&object, "generateName").filter(|g| !g.is_empty()).map(String::from);
    let explicit = objects::meta_str(&object, "name").unwrap_or_default().to_string();
    let mut name = explicit.clone();
    if name.is_empty()
        && let Some(prefix) = &generate
    {
        name = generated_name(prefix);
        objects::metadata_mut(&mut object)?.insert("name".into(), json!(name));
    }
    if name.is_empty() {
        let cause = Cause {
            reason: "FieldValueRequired".into(),
            message: "Required value: name or generateName is required".into(),
            field: "metadata.name".into(),
        };
        return Err(ApiError::invalid(&resource.kind, &resource.group, &name, vec![cause]));
    }
    // RBAC objects are named by path segments (`system:basic-user`), others by DNS subdomains.
    let name_error = if resource.group == crate::authz::RBAC_GROUP { objects::validate_path_segment_name(&name) } else { objects::validate_name(&name) };
    if let Some(cause) = name_error {
        return Err(ApiError::invalid(&resource.kind, &resource.group, &name, vec![cause]));
    }
    match namespace {
        Some(ns) if resource.namespaced => {
            if objects::meta_str(&object, "namespace").is_some_and(|b| b != ns) {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            objects::metadata_mut(&mut object)?.insert("namespace".into(), json!(ns));
        }
        _ => {
            if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.remove("namespace");
            }
        }
    }
    normalize(resource, &mut object)?;
    let request = AdmissionRequest {
        operation: Operation::Create,
        resource,
        namespace,
        name: &name,
        subresource: None,
        old: None,
        dry_run: options.dry_run,
        propagation: None,
        user: options.user.as_ref(),
    };
    state.admission.mutate(state, &request, &mut object).await?;
    let warnings = admit(resource, None, &mut object, &name, options.field_validation, raw, None)?;
    validate(resource, &object, &name)?;
    objects::stamp_new(&mut object)?;
    // With a status subresource, status is written only through it (and by the server for CRDs).
    if resource.subresources.iter().any(|s| s == "status")
        && let Some(map) = object.as_object_mut()
    {
        map.remove("status");
    }
    server_defaults(resource, &mut object);
    if let Ownership::Record(manager) = ownership {
        check_manager(manager)?;
        record_update(resource, None, &mut object, manager, None)?;
    }
    state.admission.validate(state, &request, &object).await?;
    if options.dry_run {
        crate::convert::present(resource, &mut object);
        return Ok(Written { object, warnings, created: true });
    }
    // With a conversion webhook the object is stored in the storage version; the client gets
    // it back in the version it wrote.
    let mut stored_form = object.clone();
    crate::webhooks::conversion::to_storage(&state.cache, resource, &mut stored_form).await?;
    // A generated name may collide: pick another a few times, as Kubernetes does.
    let mut attempts = if explicit.is_empty() && generate.is_some() { 8 } else { 1 };
    loop {
        attempts -= 1;
        let key = resource.key(namespace, &name);
        match state.store.write(Write::Create { key, value: objects::to_store(&stored_form) }).await.map_err(store_error)? {
            WriteResult::Committed(event) => {
                objects::set_resource_version(&mut object, event.revision());
                if is_crd(resource) {
                    object = crate::http::crds::establish(state, object).await?;
                }
                crate::convert::present(resource, &mut object);
                return Ok(Written { object, warnings, created: true });
            }
            WriteResult::Rejected { .. } if attempts > 0 => {
                name = generated_name(generate.as_deref().unwrap_or_default());
                objects::metadata_mut(&mut object)?.insert("name".into(), json!(name));
                objects::metadata_mut(&mut stored_form)?.insert("name".into(), json!(name));
            }
            WriteResult::Rejected { .. } => return Err(ApiError::already_exists(&resource.group, &resource.plural, &name)),
        }
    }
}

/// What the server sets on new objects of some kinds: a Namespace starts `Active` and held by
/// its content finalizer; a CRD is held until its custom resources are cleaned up.
fn server_defaults(resource: &ResourceDef, object: &mut Value) {
    if lifecycle::is_namespace(resource) {
        object["status"] = json!({"phase": "Active"});
        if object["spec"]["finalizers"].is_null() {
            object["spec"] = json!({"finalizers": [lifecycle::NAMESPACE_CONTENT]});
        }
    }
    if is_crd(resource) && !lifecycle::has_finalizer(object, lifecycle::CRD_CLEANUP) {
        let mut list = lifecycle::finalizers(object);
        list.push(lifecycle::CRD_CLEANUP.to_string());
        lifecycle::set_finalizers(object, &list);
    }
}
