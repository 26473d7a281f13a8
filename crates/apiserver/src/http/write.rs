//! Writes: create, update (PUT, including the status subresource) and delete. Every write is a
//! compare-and-swap on the store, so concurrent writers never lose each other's changes.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use oxplane_store::{StoreError, Write, WriteResult};
use serde_json::{Value, json};

use super::AppState;
use super::validation::{FieldValidation, admit, with_warnings};
use crate::objects;
use crate::registry::ResourceDef;
use crate::status::{ApiError, Cause, Reason};

/// Maps store failures to API errors.
pub fn store_error(error: StoreError) -> ApiError {
    match error {
        StoreError::Compacted { requested, compacted } => {
            ApiError::new(Reason::Expired, format!("too old resource version: {requested} ({compacted})"))
        }
        StoreError::DiskFull(_) => {
            tracing::error!(%error, "write refused: disk full");
            ApiError::new(Reason::ServiceUnavailable, error.to_string())
        }
        other => {
            tracing::error!(error = %other, "store failure");
            ApiError::internal(other.to_string())
        }
    }
}

/// Parses a request body as a JSON object.
pub fn parse_body(body: &[u8]) -> Result<Value, ApiError> {
    let object: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the request body is not valid JSON: {e}")))?;
    if !object.is_object() {
        return Err(ApiError::bad_request("the request body must be a JSON object"));
    }
    Ok(object)
}

/// Checks (or fills in) `apiVersion` and `kind` against the URL's resource.
fn check_type(resource: &ResourceDef, object: &mut Value) -> Result<(), ApiError> {
    let expected = (resource.api_version(), resource.kind.clone());
    let found = (
        object.get("apiVersion").and_then(Value::as_str).unwrap_or_default().to_string(),
        object.get("kind").and_then(Value::as_str).unwrap_or_default().to_string(),
    );
    if found.0.is_empty() && found.1.is_empty() {
        object["apiVersion"] = json!(expected.0);
        object["kind"] = json!(expected.1);
        return Ok(());
    }
    if found != expected {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({}) does not match the expected API version ({}) or the kind ({}) does not match the expected kind ({})",
            found.0, expected.0, found.1, expected.1
        )));
    }
    Ok(())
}

/// Kind-specific normalisation on every write: Secrets fold `stringData` into `data`.
pub(super) fn normalize(resource: &ResourceDef, object: &mut Value) -> Result<(), ApiError> {
    if resource.group.is_empty() && resource.kind == "Secret" {
        use base64::Engine;
        let string_data = object.as_object_mut().and_then(|o| o.remove("stringData"));
        if let Some(Value::Object(entries)) = string_data {
            let data = object.as_object_mut().map(|o| o.entry("data").or_insert_with(|| json!({})));
            if let Some(Value::Object(data)) = data {
                for (key, value) in entries {
                    let text = value.as_str().ok_or_else(|| {
                        ApiError::bad_request(format!(
                            "Secret in version \"v1\" cannot be handled as a Secret: stringData.{key} must be a string"
                        ))
                    })?;
                    data.insert(key, json!(base64::engine::general_purpose::STANDARD.encode(text)));
                }
            }
        }
        if object.get("type").is_none() {
            object["type"] = json!("Opaque");
        }
    }
    Ok(())
}

/// Whether `resource` is the CustomResourceDefinition kind itself.
fn is_crd(resource: &ResourceDef) -> bool {
    resource.group == "apiextensions.k8s.io" && resource.kind == "CustomResourceDefinition"
}

/// Kind-specific validation of the object about to be stored.
pub(super) fn validate(resource: &ResourceDef, object: &Value, name: &str) -> Result<(), ApiError> {
    if is_crd(resource) {
        let causes = crate::crd::validate(object);
        if !causes.is_empty() {
            return Err(ApiError::invalid(&resource.kind, &resource.group, name, causes));
        }
    }
    if resource.group.is_empty() && matches!(resource.kind.as_str(), "ConfigMap" | "Secret") {
        check_data_maps(resource, object)?;
    }
    Ok(())
}

/// ConfigMap and Secret data are maps of strings, base64 where the kind says so; Kubernetes
/// refuses anything else when decoding the body (400), so nothing malformed is ever stored.
fn check_data_maps(resource: &ResourceDef, object: &Value) -> Result<(), ApiError> {
    use base64::Engine;
    let base64_fields: &[&str] = if resource.kind == "Secret" { &["data"] } else { &["binaryData"] };
    for field in ["data", "binaryData"] {
        let Some(value) = object.get(field) else { continue };
        if value.is_null() {
            continue;
        }
        let map = value.as_object().ok_or_else(|| {
            ApiError::bad_request(format!("{} in version \"v1\" cannot be handled as a {}: {field} must be a map of strings", resource.kind, resource.kind))
        })?;
        for (key, entry) in map {
            let text = entry.as_str().ok_or_else(|| {
                ApiError::bad_request(format!(
                    "{} in version \"v1\" cannot be handled as a {}: {field}.{key} must be a string",
                    resource.kind, resource.kind
                ))
            })?;
            if base64_fields.contains(&field) && base64::engine::general_purpose::STANDARD.decode(text).is_err() {
                return Err(ApiError::bad_request(format!(
                    "{} in version \"v1\" cannot be handled as a {}: {field}.{key} is not valid base64",
                    resource.kind, resource.kind
                )));
            }
        }
    }
    Ok(())
}

/// The namespace must exist for anything created in it. The cache answers at once when it
/// holds the namespace (namespaces are not deleted by this server yet); only a miss waits for
/// the cache to catch up with the store, so a namespace created just before is found.
async fn check_namespace(state: &AppState, namespace: &str) -> Result<(), ApiError> {
    let key = format!("/registry/core/namespaces/{namespace}");
    if state.cache.get(&key).0.is_some() {
        return Ok(());
    }
    super::read::ensure_fresh(state, None).await?;
    if state.cache.get(&key).0.is_none() {
        return Err(ApiError::not_found("", "namespaces", namespace));
    }
    Ok(())
}

/// Options every write verb takes.
#[derive(Clone, Copy, Debug, Default)]
pub struct WriteOptions {
    /// `dryRun=All`: do everything but store.
    pub dry_run: bool,
    /// What to do about unknown and duplicate fields.
    pub field_validation: FieldValidation,
}

impl WriteOptions {
    /// From the `dryRun` and `fieldValidation` query parameters.
    pub fn from_query(dry_run: Option<&str>, field_validation: Option<&str>) -> Result<Self, ApiError> {
        let dry_run = match dry_run {
            None | Some("") => false,
            Some("All") => true,
            Some(other) => {
                return Err(ApiError::bad_request(format!("dryRun: Unsupported value: \"{other}\": supported values: \"All\"")));
            }
        };
        Ok(WriteOptions { dry_run, field_validation: FieldValidation::from_query(field_validation)? })
    }
}

/// One object (or one of its subresources) that a request addresses.
#[derive(Clone, Copy, Debug)]
pub struct ObjectTarget<'a> {
    /// Its resource.
    pub resource: &'a ResourceDef,
    /// Its namespace, for namespaced resources.
    pub namespace: Option<&'a str>,
    /// Its name.
    pub name: &'a str,
    /// The subresource addressed, if any.
    pub subresource: Option<&'a str>,
}

/// Characters of generated name suffixes (no vowels, no look-alikes), as Kubernetes uses.
const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// `generateName` plus five random characters.
fn generated_name(prefix: &str) -> String {
    use rand::Rng;
    let mut rng = rand::rng();
    let suffix: String = (0..5).map(|_| SUFFIX_ALPHABET[rng.random_range(0..SUFFIX_ALPHABET.len())] as char).collect();
    format!("{prefix}{suffix}")
}

/// POST: create an object.
pub async fn create(
    state: &AppState,
    resource: &ResourceDef,
    namespace: Option<&str>,
    body: &[u8],
    options: WriteOptions,
) -> Result<Response, ApiError> {
    let mut object = parse_body(body)?;
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
    if let Some(cause) = objects::validate_name(&name) {
        return Err(ApiError::invalid(&resource.kind, &resource.group, &name, vec![cause]));
    }
    if let Some(ns) = namespace {
        if objects::meta_str(&object, "namespace").is_some_and(|b| b != ns) {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        check_namespace(state, ns).await?;
        objects::metadata_mut(&mut object)?.insert("namespace".into(), json!(ns));
    } else if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("namespace");
    }
    normalize(resource, &mut object)?;
    let warnings = admit(resource, &mut object, &name, options.field_validation, Some(body))?;
    validate(resource, &object, &name)?;
    objects::stamp_new(&mut object)?;
    // With a status subresource, status is written only through it (and by the server for CRDs).
    if resource.subresources.iter().any(|s| s == "status")
        && let Some(map) = object.as_object_mut()
    {
        map.remove("status");
    }
    if resource.group.is_empty() && resource.kind == "Namespace" {
        object["status"] = json!({"phase": "Active"});
        if object["spec"]["finalizers"].is_null() {
            object["spec"] = json!({"finalizers": ["kubernetes"]});
        }
    }
    if options.dry_run {
        crate::convert::present(resource, &mut object);
        return Ok(with_warnings((StatusCode::CREATED, Json(object)).into_response(), &warnings));
    }
    // A generated name may collide: pick another a few times, as Kubernetes does.
    let mut attempts = if explicit.is_empty() && generate.is_some() { 8 } else { 1 };
    loop {
        attempts -= 1;
        let key = resource.key(namespace, &name);
        match state.store.write(Write::Create { key, value: objects::to_store(&object) }).await.map_err(store_error)? {
            WriteResult::Rejected { .. } if attempts > 0 => {
                name = generated_name(generate.as_deref().unwrap_or_default());
                objects::metadata_mut(&mut object)?.insert("name".into(), json!(name));
            }
            result => break created(state, resource, object, result, &name).await.map(|r| with_warnings(r, &warnings)),
        }
    }
}

/// The answer to a create, once the store has spoken.
async fn created(state: &AppState, resource: &ResourceDef, mut object: Value, result: WriteResult, name: &str) -> Result<Response, ApiError> {
    match result {
        WriteResult::Committed(event) => {
            objects::set_resource_version(&mut object, event.revision());
            if is_crd(resource) {
                object = super::crds::establish(state, object).await?;
            }
            crate::convert::present(resource, &mut object);
            Ok((StatusCode::CREATED, Json(object)).into_response())
        }
        WriteResult::Rejected { .. } => Err(ApiError::already_exists(&resource.group, &resource.plural, name)),
    }
}

/// PUT: replace an object (or, for `subresource = Some("status")`, only its status).
pub async fn update(
    state: &AppState,
    resource: &ResourceDef,
    namespace: Option<&str>,
    name: &str,
    subresource: Option<&str>,
    body: &[u8],
    options: WriteOptions,
) -> Result<Response, ApiError> {
    let mut incoming = parse_body(body)?;
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
        Some(rv) => Some(super::read::parse_revision(rv).map_err(|_| {
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
    let key = resource.key(namespace, name);
    let current = state.store.get(&key).await.map_err(store_error)?.kv;
    let Some(current) = current else {
        return Err(ApiError::not_found(&resource.group, &resource.plural, name));
    };
    let expected = expected.unwrap_or(current.mod_revision);
    if expected != current.mod_revision {
        return Err(ApiError::conflict(&resource.group, &resource.plural, name));
    }
    let old = objects::from_store(&current)?;
    let mut object = merge_for_update(resource, &old, incoming, subresource)?;
    normalize(resource, &mut object)?;
    let warnings = admit(resource, &mut object, name, options.field_validation, Some(body))?;
    validate(resource, &object, name)?;
    if options.dry_run {
        crate::convert::present(resource, &mut object);
        return Ok(with_warnings(Json(object).into_response(), &warnings));
    }
    let write = Write::Update { key, value: objects::to_store(&object), expected };
    match state.store.write(write).await.map_err(store_error)? {
        WriteResult::Committed(event) => {
            objects::set_resource_version(&mut object, event.revision());
            if is_crd(resource) && subresource.is_none() {
                object = super::crds::establish(state, object).await?;
            }
            crate::convert::present(resource, &mut object);
            Ok(with_warnings(Json(object).into_response(), &warnings))
        }
        WriteResult::Rejected { .. } => Err(ApiError::conflict(&resource.group, &resource.plural, name)),
    }
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

/// Builds the object to store from the current one and the request body: server-owned
/// metadata is kept, the status subresource splits what each endpoint may change, and the
/// generation moves when the spec (anything but metadata and status) changes.
pub fn merge_for_update(resource: &ResourceDef, old: &Value, incoming: Value, subresource: Option<&str>) -> Result<Value, ApiError> {
    let has_status = resource.subresources.iter().any(|s| s == "status");
    let mut object = match subresource {
        Some("status") => {
            let mut object = old.clone();
            copy_status(&incoming, &mut object);
            object
        }
        _ => {
            let mut object = incoming;
            if has_status {
                copy_status(old, &mut object);
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

/// DELETE: remove an object. Like most Kubernetes kinds, the answer is a `Status` naming it.
pub async fn delete(
    state: &AppState,
    resource: &ResourceDef,
    namespace: Option<&str>,
    name: &str,
    options: WriteOptions,
) -> Result<Response, ApiError> {
    let key = resource.key(namespace, name);
    loop {
        let Some(kv) = state.store.get(&key).await.map_err(store_error)?.kv else {
            return Err(ApiError::not_found(&resource.group, &resource.plural, name));
        };
        let object = objects::from_store(&kv)?;
        if !options.dry_run {
            let write = Write::Delete { key: key.clone(), expected: kv.mod_revision };
            if let WriteResult::Rejected { .. } = state.store.write(write).await.map_err(store_error)? {
                continue;
            }
            if is_crd(resource) {
                state.registry.remove_custom(name);
            }
        }
        return Ok(Json(deleted_status(resource, name, &object)).into_response());
    }
}

/// The `Status` answering a completed deletion.
pub fn deleted_status(resource: &ResourceDef, name: &str, object: &Value) -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {"name": name, "group": resource.group, "kind": resource.plural, "uid": object["metadata"]["uid"]},
    })
}

/// DELETE on a collection: deletes every selected object, answering with the list deleted.
pub async fn delete_collection(
    state: &AppState,
    resource: &ResourceDef,
    prefix: &str,
    selection: &super::select::Selection,
    options: WriteOptions,
) -> Result<Response, ApiError> {
    super::read::ensure_fresh(state, None).await?;
    let (stored, _) = state.cache.list(prefix);
    let mut deleted = Vec::new();
    for object in stored {
        let mut view = (*object).clone();
        crate::convert::present(resource, &mut view);
        if !selection.matches(&view) {
            continue;
        }
        let name = objects::meta_str(&object, "name").unwrap_or_default().to_string();
        let namespace = objects::meta_str(&object, "namespace").map(String::from);
        match delete(state, resource, namespace.as_deref(), &name, options).await {
            Ok(_) => deleted.push(view),
            // Gone meanwhile: someone else deleted it.
            Err(error) if error.reason == Reason::NotFound => {}
            Err(error) => return Err(error),
        }
    }
    Ok(Json(json!({
        "kind": format!("{}List", resource.kind),
        "apiVersion": resource.api_version(),
        "metadata": {},
        "items": deleted,
    }))
    .into_response())
}
