//! Object endpoints: `/api/v1/...` and `/apis/<group>/<version>/...`, for every served kind.
//!
//! Paths are parsed here rather than by the router because Kubernetes' URL space is ambiguous
//! to a pattern router: `/api/v1/namespaces/x` is a Namespace, `/api/v1/namespaces/x/configmaps`
//! a collection inside it.

use std::sync::Arc;

use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::Extension;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, Method, header};
use axum::response::{IntoResponse, Response};

use super::metrics::RequestInfo;
use super::query::Query;
use super::select::Selection;
use super::watch::{self, WatchRequest};
use super::{AppState, read, scale, write};
use crate::authn::UserInfo;
use crate::ops::{self, DeleteOptions, ObjectTarget, PatchType, WriteOptions};
use crate::registry::ResourceDef;
use crate::table::IncludeObject;
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
    headers: HeaderMap,
    user: Option<Extension<UserInfo>>,
    Path((version, rest)): Path<(String, String)>,
    RawQuery(raw_query): RawQuery,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let user = user.map(|Extension(user)| user);
    handle(&state, Request { method, headers, raw_query, body, user }, "", &version, &rest).await
}

pub(super) async fn grouped(
    State(state): State<Arc<AppState>>,
    method: Method,
    headers: HeaderMap,
    user: Option<Extension<UserInfo>>,
    Path((group, version, rest)): Path<(String, String, String)>,
    RawQuery(raw_query): RawQuery,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let user = user.map(|Extension(user)| user);
    handle(&state, Request { method, headers, raw_query, body, user }, &group, &version, &rest).await
}

async fn handle(state: &AppState, request: Request, group: &str, version: &str, rest: &str) -> Response {
    let info = RequestInfo::parse(&request.method, group, version, rest, request.raw_query.as_deref());
    let mut response = dispatch(state, request, group, version, rest).await.unwrap_or_else(IntoResponse::into_response);
    // Read by the counting middleware, for the per-resource request metric.
    response.extensions_mut().insert(info);
    response
}

/// The request body, or the Status for a body that could not be read (413 past the limit).
fn body_or_error(body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    body.map_err(|rejection| {
        if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                Reason::RequestEntityTooLarge,
                format!("Request entity too large: limit is {}", super::MAX_BODY),
            )
        } else {
            ApiError::bad_request(format!("the request body could not be read: {rejection}"))
        }
    })
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

/// The parts of a request the handlers use.
struct Request {
    method: Method,
    headers: HeaderMap,
    raw_query: Option<String>,
    body: Result<Bytes, BytesRejection>,
    /// Who asks (set by the authentication middleware).
    user: Option<UserInfo>,
}

/// The media type of the request body, without parameters.
fn content_type(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
    Some(value.split(';').next().unwrap_or_default().trim().to_ascii_lowercase())
}

/// The form a client asked to receive objects in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Output {
    /// The objects themselves.
    Plain,
    /// A `meta.k8s.io` Table (kubectl get).
    Table,
    /// `PartialObjectMetadata`: only each object's metadata (kube-rs `list_metadata`,
    /// client-go metadata informers).
    Metadata,
}

/// Picks the first `Accept` range this server serves; 406 if it serves none of them.
fn output(headers: &HeaderMap) -> Result<Output, ApiError> {
    let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else { return Ok(Output::Plain) };
    for range in accept.split(',') {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or_default().to_ascii_lowercase();
        let params: Vec<(String, String)> = parts
            .filter_map(|p| p.split_once('=').map(|(k, v)| (k.trim().to_string(), v.trim().to_string())))
            .collect();
        let param = |name: &str| params.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
        let meta_v1 = param("g") == Some("meta.k8s.io") && matches!(param("v"), Some("v1") | Some("v1beta1"));
        match media.as_str() {
            "application/json" | "application/*" | "*/*" => match param("as") {
                None => return Ok(Output::Plain),
                Some("Table") if meta_v1 => return Ok(Output::Table),
                Some("PartialObjectMetadata" | "PartialObjectMetadataList") if meta_v1 => return Ok(Output::Metadata),
                // Other conversions are not served; try the next range.
                Some(_) => continue,
            },
            _ => continue,
        }
    }
    Err(ApiError::new(
        Reason::NotAcceptable,
        format!("only the following media types are accepted: application/json, application/json;as=Table;v=v1;g=meta.k8s.io, application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io (asked for {accept})"),
    ))
}

fn table_response(table: serde_json::Value) -> Response {
    let mut response = Json(table).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, axum::http::HeaderValue::from_static(crate::table::TABLE_CONTENT_TYPE));
    response
}

/// The object a POST or PUT carries: JSON (also when no type is declared, as the Python client
/// sends it) or Kubernetes protobuf (kubectl 1.32+ for built-in kinds). For JSON, the raw
/// bytes come back too, for duplicate-field detection.
pub(crate) fn request_object<'a>(headers: &HeaderMap, body: &'a [u8]) -> Result<(serde_json::Value, Option<&'a [u8]>), ApiError> {
    match content_type(headers).as_deref() {
        None | Some("") | Some("application/json") | Some("*/*") => Ok((ops::parse_body(body)?, Some(body))),
        Some(crate::protobuf::MEDIA_TYPE) => Ok((decode_protobuf(body)?, None)),
        Some(other) => Err(unsupported_body(other)),
    }
}

/// Checks that a body is JSON (scale objects come only as JSON).
fn require_json_body(headers: &HeaderMap) -> Result<(), ApiError> {
    match content_type(headers).as_deref() {
        None | Some("") | Some("application/json") | Some("*/*") => Ok(()),
        Some(other) => Err(unsupported_body(other)),
    }
}

fn unsupported_body(other: &str) -> ApiError {
    ApiError::new(
        Reason::UnsupportedMediaType,
        format!("the body of the request was in an unknown format - accepted media types include: application/json, application/vnd.kubernetes.protobuf (got {other})"),
    )
}

fn decode_protobuf(body: &[u8]) -> Result<serde_json::Value, ApiError> {
    use crate::protobuf::ProtobufError;
    crate::protobuf::decode_object(body).map_err(|error| match error {
        ProtobufError::UnsupportedKind { .. } => ApiError::new(Reason::UnsupportedMediaType, error.to_string()),
        other => ApiError::bad_request(format!("the protobuf request body could not be decoded: {other}")),
    })
}

/// A DELETE body as JSON bytes (protobuf `DeleteOptions` are decoded first).
fn delete_body(headers: &HeaderMap, body: &[u8]) -> Result<Vec<u8>, ApiError> {
    match content_type(headers).as_deref() {
        Some(crate::protobuf::MEDIA_TYPE) if !body.is_empty() => Ok(decode_protobuf(body)?.to_string().into_bytes()),
        _ => Ok(body.to_vec()),
    }
}

/// The field manager a User-Agent names: its product token (`kubectl/v1.32.0 (...)` → `kubectl`).
fn user_agent_manager(headers: &HeaderMap) -> Option<String> {
    let agent = headers.get(header::USER_AGENT)?.to_str().ok()?;
    let product = agent.split('/').next()?.trim();
    (!product.is_empty()).then(|| product.chars().take(128).collect())
}

/// `DeleteOptions` from a DELETE's body and query.
fn delete_options(headers: &HeaderMap, body: &[u8], query: &Query) -> Result<DeleteOptions, ApiError> {
    let body = delete_body(headers, body)?;
    DeleteOptions::parse(&body, query.propagation_policy.as_deref(), query.orphan_dependents, query.dry_run.as_deref())
}

/// [`delete_options`], made as `options.user`.
fn delete_options_as(headers: &HeaderMap, body: &[u8], query: &Query, options: &WriteOptions) -> Result<DeleteOptions, ApiError> {
    Ok(DeleteOptions { user: options.user.clone(), ..delete_options(headers, body, query)? })
}

async fn dispatch(
    state: &AppState,
    request: Request,
    group: &str,
    version: &str,
    rest: &str,
) -> Result<Response, ApiError> {
    let Request { method, headers, raw_query, body, user } = request;
    let body = body_or_error(body)?;
    let target = parse(state, group, version, rest)?;
    let deprecation = target.resource.deprecation_warning.clone();
    let response = dispatch_to(state, method, headers, raw_query, body, target, user).await?;
    // Every response of a deprecated version says so, as kube-apiserver's do (kubectl prints it).
    Ok(match deprecation {
        Some(warning) => super::validation::with_warnings(response, &[warning]),
        None => response,
    })
}

async fn dispatch_to(
    state: &AppState,
    method: Method,
    headers: HeaderMap,
    raw_query: Option<String>,
    body: Bytes,
    target: Target,
    user: Option<UserInfo>,
) -> Result<Response, ApiError> {
    let query = Query::parse(raw_query.as_deref())?;
    let mut options = WriteOptions::from_query(&query)?;
    options.user = user;
    // Without `fieldManager`, a write is recorded under the client's name, as Kubernetes takes
    // it from the User-Agent; server-side apply alone must name its manager.
    let applying = method == Method::PATCH && content_type(&headers).as_deref() == Some("application/apply-patch+yaml");
    if options.field_manager.is_none() && !applying {
        options.field_manager = user_agent_manager(&headers);
    }
    let r = &target.resource;
    let ns = target.namespace.as_deref();
    if r.create_only {
        // Creates are routed to the review's own handler before this one; nothing is stored
        // under its name to read, change or delete (kube-apiserver's wording).
        return Err(ApiError::new(Reason::MethodNotAllowed, "the server does not allow this method on the requested resource"));
    }
    match (method.clone(), target.name.as_deref()) {
        (method, Some(name)) if target.subresource.as_deref() == Some("token") => match (method, ns) {
            (Method::POST, Some(ns)) => crate::authn::service_accounts::requests::token_request(state, &headers, &body, ns, name).await,
            (method, _) => Err(ApiError::new(Reason::MethodNotAllowed, format!("{method} is not supported on serviceaccounts/token: only POST (create)"))),
        },
        (Method::GET, None) => {
            let prefix = match ns {
                Some(ns) => r.namespace_prefix(ns),
                None => r.prefix(),
            };
            let selection = Selection::parse(r, query.label_selector.as_deref(), query.field_selector.as_deref())?;
            let output = output(&headers)?;
            let table = match output {
                Output::Table => Some(IncludeObject::parse(query.include_object.as_deref()).map_err(ApiError::bad_request)?),
                _ => None,
            };
            if query.watch {
                let after = match query.resource_version.as_deref() {
                    None | Some("0") => None,
                    Some(rv) => Some(read::parse_revision(rv)?),
                };
                let request = WatchRequest {
                    resource: r.clone(),
                    prefix,
                    after,
                    selection,
                    bookmarks: query.allow_watch_bookmarks,
                    bookmark_interval: state.bookmark_interval,
                    timeout: query.timeout_seconds.map(Duration::from_secs),
                    table,
                    metadata_only: output == Output::Metadata,
                };
                return Ok(watch::stream(&state.cache, &state.registry, request, &state.metrics.watchers));
            }
            let list = read::list(state, r, &prefix, &selection, &query).await?;
            match (output, table) {
                (Output::Table, Some(include)) => Ok(table_response(crate::table::table(r, list.objects(), list.metadata(), include, true))),
                (Output::Metadata, _) => Ok(Json(crate::objects::metadata_list(list.objects(), list.metadata())).into_response()),
                _ => Ok(list.into_response()),
            }
        }
        (Method::GET, Some(name)) if target.subresource.as_deref() == Some("scale") => {
            let object = read::get(state, r, &r.key(ns, name), name, &query).await?;
            let paths = r.scale.as_ref().ok_or_else(unknown)?;
            Ok(Json(scale::to_scale(paths, &object)).into_response())
        }
        (Method::PUT | Method::PATCH, Some(name)) if target.subresource.as_deref() == Some("scale") => {
            let paths = r.scale.as_ref().ok_or_else(unknown)?;
            let patch_type = match method {
                Method::PATCH => Some(PatchType::from_content_type(content_type(&headers).as_deref())?),
                _ => {
                    require_json_body(&headers)?;
                    None
                }
            };
            let object = ObjectTarget { resource: r, namespace: ns, name, subresource: Some("scale") };
            scale::write(state, &object, paths, patch_type, &body, &options).await
        }
        (Method::GET, Some(name)) => {
            let object = read::get(state, r, &r.key(ns, name), name, &query).await?;
            match output(&headers)? {
                Output::Table => {
                    let include = IncludeObject::parse(query.include_object.as_deref()).map_err(ApiError::bad_request)?;
                    let metadata = serde_json::json!({"resourceVersion": object["metadata"]["resourceVersion"]});
                    Ok(table_response(crate::table::table(r, [&object], metadata, include, true)))
                }
                Output::Metadata => Ok(Json(crate::objects::partial_metadata(&object)).into_response()),
                Output::Plain => Ok(Json(object).into_response()),
            }
        }
        (Method::POST, None) => {
            let (object, raw) = request_object(&headers, &body)?;
            ops::create(state, r, ns, object, raw, &options).await.map(write::created)
        }
        (Method::PUT, Some(name)) => {
            let target = ObjectTarget { resource: r, namespace: ns, name, subresource: target.subresource.as_deref() };
            let (object, raw) = request_object(&headers, &body)?;
            ops::update(state, &target, object, raw, &options).await.map(write::updated)
        }
        (Method::PATCH, Some(name)) => {
            let patch_type = PatchType::from_content_type(content_type(&headers).as_deref())?;
            let target = ObjectTarget { resource: r, namespace: ns, name, subresource: target.subresource.as_deref() };
            ops::patch(state, &target, patch_type, &body, &options).await.map(write::updated)
        }
        (Method::DELETE, Some(name)) => {
            let options = delete_options_as(&headers, &body, &query, &options)?;
            let target = ObjectTarget { resource: r, namespace: ns, name, subresource: None };
            ops::delete(state, &target, &options).await.map(|outcome| write::deleted(r, name, outcome))
        }
        (Method::DELETE, None) => {
            let prefix = match ns {
                Some(ns) => r.namespace_prefix(ns),
                None => r.prefix(),
            };
            let selection = Selection::parse(r, query.label_selector.as_deref(), query.field_selector.as_deref())?;
            let options = delete_options_as(&headers, &body, &query, &options)?;
            let items = ops::delete_collection(state, r, &prefix, |view| selection.matches(view), &options).await?;
            Ok(write::deleted_list(r, items))
        }
        (method, _) => Err(ApiError::new(
            Reason::MethodNotAllowed,
            format!("{method} is not supported on this resource yet"),
        )),
    }
}
