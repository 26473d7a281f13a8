//! Discovery: legacy (`/api`, `/api/v1`, `/apis`, `/apis/<group>`, `/apis/<group>/<version>`) and aggregated
//! (`apidiscovery.k8s.io/v2` on `/api` and `/apis`, which kubectl prefers: two requests instead
//! of one per group-version). Both are computed from the registry, so a CRD shows at once.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::AppState;
use super::metrics::RequestInfo;
use crate::registry::ResourceDef;
use crate::status::ApiError;

/// The content type of aggregated discovery responses.
const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Whether the client accepts aggregated discovery (`apidiscovery.k8s.io/v2`).
fn wants_aggregated(headers: &HeaderMap) -> bool {
    let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else { return false };
    accept.split(',').any(|range| {
        let params: Vec<&str> = range.split(';').map(str::trim).collect();
        params.first() == Some(&"application/json")
            && params.contains(&"g=apidiscovery.k8s.io")
            && params.contains(&"v=v2")
            && params.contains(&"as=APIGroupDiscoveryList")
    })
}

fn aggregated_response(body: Value) -> Response {
    let mut response = Json(body).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(AGGREGATED));
    response
}

/// One resource in aggregated form.
fn aggregated_resource(r: &ResourceDef) -> Value {
    let kind = json!({"group": r.group, "version": r.version, "kind": r.kind});
    let subresources: Vec<Value> = r
        .subresources
        .iter()
        .map(|sub| {
            let (response_kind, verbs) = match sub.as_str() {
                "scale" => (json!({"group": "autoscaling", "version": "v1", "kind": "Scale"}), subresource_verbs(sub)),
                "token" => (json!({"group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest"}), subresource_verbs(sub)),
                _ => (kind.clone(), subresource_verbs(sub)),
            };
            json!({"subresource": sub, "responseKind": response_kind, "verbs": verbs})
        })
        .collect();
    json!({
        "resource": r.plural,
        "responseKind": kind,
        "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": r.singular,
        "verbs": r.verbs(),
        "shortNames": r.short_names,
        "categories": r.categories,
        "subresources": subresources,
    })
}

/// The aggregated discovery list of the core group (`core == true`) or of all other groups.
fn aggregated(state: &AppState, core: bool) -> Value {
    let resources = state.registry.all();
    let items: Vec<Value> = state
        .registry
        .groups()
        .into_iter()
        .filter(|(group, _)| group.is_empty() == core)
        .map(|(group, versions)| {
            let versions: Vec<Value> = versions
                .into_iter()
                .map(|version| {
                    let entries: Vec<Value> = resources
                        .iter()
                        .filter(|r| r.group == group && r.version == version)
                        .map(|r| aggregated_resource(r))
                        .collect();
                    json!({"version": version, "resources": entries, "freshness": "Current"})
                })
                .collect();
            json!({"metadata": {"name": group, "creationTimestamp": null}, "versions": versions})
        })
        .collect();
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items})
}

pub(super) async fn core_versions(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    if wants_aggregated(&headers) {
        return aggregated_response(aggregated(&state, true));
    }
    Json(json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []})).into_response()
}

pub(super) async fn groups(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    if wants_aggregated(&headers) {
        return aggregated_response(aggregated(&state, false));
    }
    legacy_groups(&state).into_response()
}

fn legacy_groups(state: &AppState) -> Json<Value> {
    let groups: Vec<Value> = state
        .registry
        .groups()
        .into_iter()
        .filter(|(group, _)| !group.is_empty())
        .map(|(group, versions)| api_group(&group, &versions))
        .collect();
    Json(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}))
}

/// One group in legacy form: its served versions, the first preferred.
fn api_group(group: &str, versions: &[String]) -> Value {
    let versions: Vec<Value> = versions.iter().map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v})).collect();
    let preferred = versions.first().cloned().unwrap_or(Value::Null);
    json!({"name": group, "versions": versions, "preferredVersion": preferred})
}

/// `/apis/<group>`: the `APIGroup` (404 once nothing of the group is served).
pub(super) async fn group(State(state): State<Arc<AppState>>, Path(group): Path<String>) -> Result<Json<Value>, ApiError> {
    let (name, versions) = state
        .registry
        .groups()
        .into_iter()
        .find(|(name, _)| !name.is_empty() && *name == group)
        .ok_or_else(|| ApiError::new(crate::status::Reason::NotFound, "the server could not find the requested resource"))?;
    let mut body = api_group(&name, &versions);
    body["kind"] = json!("APIGroup");
    body["apiVersion"] = json!("v1");
    Ok(Json(body))
}

pub(super) async fn core_resources(State(state): State<Arc<AppState>>, Path(version): Path<String>) -> Response {
    counted(resource_list(&state, "", &version), "", &version)
}

pub(super) async fn group_resources(State(state): State<Arc<AppState>>, Path((group, version)): Path<(String, String)>) -> Response {
    counted(resource_list(&state, &group, &version), &group, &version)
}

/// A group-version's discovery answer, counted with the resource requests (resource "") so
/// that a client still asking about a group that is gone shows in the metrics.
fn counted(answer: Result<Json<Value>, ApiError>, group: &str, version: &str) -> Response {
    let mut response = answer.into_response();
    response.extensions_mut().insert(RequestInfo::discovery(group, version));
    response
}

fn resource_list(state: &AppState, group: &str, version: &str) -> Result<Json<Value>, ApiError> {
    let resources: Vec<Arc<ResourceDef>> =
        state.registry.all().into_iter().filter(|r| r.group == group && r.version == version).collect();
    if resources.is_empty() {
        return Err(ApiError::new(crate::status::Reason::NotFound, "the server could not find the requested resource"));
    }
    let mut entries = Vec::new();
    for r in &resources {
        entries.push(json!({
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": r.verbs(),
            "shortNames": r.short_names,
            "categories": r.categories,
        }));
        for sub in &r.subresources {
            let (group, version, kind) = if sub == "token" { ("authentication.k8s.io", "v1", "TokenRequest") } else { ("", "", r.kind.as_str()) };
            let mut entry = json!({
                "name": format!("{}/{sub}", r.plural),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": kind,
                "verbs": subresource_verbs(sub),
            });
            if !group.is_empty() {
                entry["group"] = json!(group);
                entry["version"] = json!(version);
            }
            entries.push(entry);
        }
    }
    let group_version = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
    Ok(Json(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": entries})))
}

/// The verbs a subresource is served with.
fn subresource_verbs(sub: &str) -> Vec<&'static str> {
    match sub {
        "token" => vec!["create"],
        _ => vec!["get", "patch", "update"],
    }
}
