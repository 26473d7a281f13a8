//! Object endpoints: `/api/v1/...` and `/apis/<group>/<version>/...`, for every served kind.
//!
//! Paths are parsed here rather than by the router because Kubernetes' URL space is ambiguous
//! to a pattern router: `/api/v1/namespaces/x` is a Namespace, `/api/v1/namespaces/x/configmaps`
//! a collection inside it.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use oxplane_store::{RangeRequest, StoreError, Write, WriteResult};
use serde_json::{Value, json};

use super::AppState;
use crate::objects;
use crate::registry::ResourceDef;
use crate::status::{ApiError, Reason};

/// What a request addresses.
struct Target {
    resource: Arc<ResourceDef>,
    namespace: Option<String>,
    name: Option<String>,
    subresource: Option<String>,
}

pub(super) async fn core(
    State(state): State<Arc<AppState>>,
    method: Method,
    Path((version, rest)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    dispatch(&state, method, "", &version, &rest, body).await.unwrap_or_else(IntoResponse::into_response)
}

pub(super) async fn grouped(
    State(state): State<Arc<AppState>>,
    method: Method,
    Path((group, version, rest)): Path<(String, String, String)>,
    body: Bytes,
) -> Response {
    dispatch(&state, method, &group, &version, &rest, body).await.unwrap_or_else(IntoResponse::into_response)
}

fn unknown() -> ApiError {
    ApiError::new(Reason::NotFound, "the server could not find the requested resource")
}

/// Resolves `rest` (the path after the group-version) to a target.
fn parse(state: &AppState, group: &str, version: &str, rest: &str) -> Result<Target, ApiError> {
    let parts: Vec<&str> = rest.split('/').filter(|p| !p.is_empty()).collect();
    let lookup = |plural: &str| state.registry.get(group, version, plural).ok_or_else(unknown);
    let target = match parts.as_slice() {
        ["namespaces", ns, plural, tail @ ..] if group.is_empty() || !ns.is_empty() => {
            match state.registry.get(group, version, plural) {
                Some(resource) if resource.namespaced => Target {
                    resource,
                    namespace: Some(ns.to_string()),
                    name: tail.first().map(|s| s.to_string()),
                    subresource: tail.get(1).map(|s| s.to_string()),
                },
                // `/api/v1/namespaces/<name>/<subresource>` (status, finalize).
                _ if group.is_empty() && tail.is_empty() => Target {
                    resource: lookup("namespaces")?,
                    namespace: None,
                    name: Some(ns.to_string()),
                    subresource: Some(plural.to_string()),
                },
                _ => return Err(unknown()),
            }
        }
        [plural] => Target { resource: lookup(plural)?, namespace: None, name: None, subresource: None },
        [plural, name] => {
            Target { resource: lookup(plural)?, namespace: None, name: Some(name.to_string()), subresource: None }
        }
        [plural, name, sub] => Target {
            resource: lookup(plural)?,
            namespace: None,
            name: Some(name.to_string()),
            subresource: Some(sub.to_string()),
        },
        _ => return Err(unknown()),
    };
    if target.name.is_some() && !target.resource.namespaced && target.namespace.is_some() {
        return Err(unknown());
    }
    if let Some(sub) = &target.subresource
        && !target.resource.subresources.contains(sub)
    {
        return Err(unknown());
    }
    if parts.len() > 5 {
        return Err(unknown());
    }
    Ok(target)
}

async fn dispatch(
    state: &AppState,
    method: Method,
    group: &str,
    version: &str,
    rest: &str,
    body: Bytes,
) -> Result<Response, ApiError> {
    let target = parse(state, group, version, rest)?;
    match (method, &target.name) {
        (Method::GET, None) => list(state, &target).await,
        (Method::GET, Some(name)) => get(state, &target, name).await.map(|o| Json(o).into_response()),
        (Method::POST, None) => create(state, &target, &body).await,
        (Method::DELETE, Some(name)) => delete(state, &target, name).await,
        (method, _) => Err(ApiError::new(
            Reason::MethodNotAllowed,
            format!("{method} is not supported on this resource yet"),
        )),
    }
}

fn store_error(error: StoreError) -> ApiError {
    tracing::warn!(%error, "store failure");
    match error {
        StoreError::Compacted { requested, compacted } => {
            ApiError::new(Reason::Expired, format!("too old resource version: {requested} ({compacted})"))
        }
        StoreError::DiskFull(_) => ApiError::new(Reason::ServiceUnavailable, error.to_string()),
        other => ApiError::internal(other.to_string()),
    }
}

async fn get(state: &AppState, target: &Target, name: &str) -> Result<Value, ApiError> {
    let r = &target.resource;
    let key = r.key(target.namespace.as_deref(), name);
    let got = state.store.get(&key).await.map_err(store_error)?;
    let kv = got.kv.ok_or_else(|| ApiError::not_found(&r.group, &r.plural, name))?;
    objects::from_store(&kv)
}

async fn list(state: &AppState, target: &Target) -> Result<Response, ApiError> {
    let r = &target.resource;
    let prefix = match &target.namespace {
        Some(ns) => r.namespace_prefix(ns),
        None => r.prefix(),
    };
    let response =
        state.store.range(RangeRequest { prefix, ..Default::default() }).await.map_err(store_error)?;
    let items: Vec<Value> = response.kvs.iter().map(objects::from_store).collect::<Result<_, _>>()?;
    Ok(Json(json!({
        "kind": format!("{}List", r.kind),
        "apiVersion": r.api_version(),
        "metadata": {"resourceVersion": response.revision.to_string()},
        "items": items,
    }))
    .into_response())
}

async fn create(state: &AppState, target: &Target, body: &[u8]) -> Result<Response, ApiError> {
    let r = &target.resource;
    let mut object: Value =
        serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("the request body is not valid JSON: {e}")))?;
    if !object.is_object() {
        return Err(ApiError::bad_request("the request body must be a JSON object"));
    }
    let expected = (r.api_version(), r.kind.clone());
    let found = (
        object.get("apiVersion").and_then(Value::as_str).unwrap_or_default().to_string(),
        object.get("kind").and_then(Value::as_str).unwrap_or_default().to_string(),
    );
    if found.0.is_empty() || found.1.is_empty() {
        object["apiVersion"] = json!(expected.0);
        object["kind"] = json!(expected.1);
    } else if found != expected {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({}) does not match the expected API version ({}) or the kind ({}) does not match ({})",
            found.0, expected.0, found.1, expected.1
        )));
    }
    let name = objects::meta_str(&object, "name").unwrap_or_default().to_string();
    if let Some(cause) = objects::validate_name(&name) {
        let cause = if name.is_empty() {
            crate::status::Cause { reason: "FieldValueRequired".into(), message: "Required value: name or generateName is required".into(), field: "metadata.name".into() }
        } else {
            cause
        };
        return Err(ApiError::invalid(&r.kind, &r.group, &name, vec![cause]));
    }
    if let Some(ns) = &target.namespace {
        let body_ns = objects::meta_str(&object, "namespace");
        if body_ns.is_some_and(|b| b != ns) {
            return Err(ApiError::bad_request("the namespace of the provided object does not match the namespace sent on the request"));
        }
        let ns_key = format!("/registry/core/namespaces/{ns}");
        if state.store.get(&ns_key).await.map_err(store_error)?.kv.is_none() {
            return Err(ApiError::not_found("", "namespaces", ns));
        }
        objects::metadata_mut(&mut object)?.insert("namespace".into(), json!(ns));
    }
    objects::stamp_new(&mut object)?;
    let key = r.key(target.namespace.as_deref(), &name);
    match state.store.write(Write::Create { key, value: objects::to_store(&object) }).await.map_err(store_error)? {
        WriteResult::Committed(event) => {
            objects::set_resource_version(&mut object, event.revision());
            Ok((StatusCode::CREATED, Json(object)).into_response())
        }
        WriteResult::Rejected { .. } => Err(ApiError::already_exists(&r.group, &r.plural, &name)),
    }
}

async fn delete(state: &AppState, target: &Target, name: &str) -> Result<Response, ApiError> {
    let r = &target.resource;
    let key = r.key(target.namespace.as_deref(), name);
    loop {
        let Some(kv) = state.store.get(&key).await.map_err(store_error)?.kv else {
            return Err(ApiError::not_found(&r.group, &r.plural, name));
        };
        let write = Write::Delete { key: key.clone(), expected: kv.mod_revision };
        if let WriteResult::Committed(_) = state.store.write(write).await.map_err(store_error)? {
            let object = objects::from_store(&kv)?;
            return Ok(Json(object).into_response());
        }
    }
}
