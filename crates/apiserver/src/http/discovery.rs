//! Legacy discovery: `/api`, `/api/v1`, `/apis`, `/apis/<group>/<version>`.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use serde_json::{Value, json};

use super::AppState;
use crate::registry::ResourceDef;
use crate::status::ApiError;

pub(super) async fn core_versions() -> Json<Value> {
    Json(json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}))
}

pub(super) async fn groups(State(state): State<Arc<AppState>>) -> Json<Value> {
    let mut groups: Vec<Value> = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    for (group, _) in state.registry.group_versions() {
        if group.is_empty() || seen.contains(&group) {
            continue;
        }
        let versions: Vec<Value> = state
            .registry
            .group_versions()
            .into_iter()
            .filter(|(g, _)| *g == group)
            .map(|(g, v)| json!({"groupVersion": format!("{g}/{v}"), "version": v}))
            .collect();
        let preferred = versions.first().cloned().unwrap_or(Value::Null);
        groups.push(json!({"name": group, "versions": versions, "preferredVersion": preferred}));
        seen.push(group);
    }
    Json(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}))
}

pub(super) async fn core_resources(State(state): State<Arc<AppState>>, Path(version): Path<String>) -> Result<Json<Value>, ApiError> {
    resource_list(&state, "", &version)
}

pub(super) async fn group_resources(
    State(state): State<Arc<AppState>>,
    Path((group, version)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    resource_list(&state, &group, &version)
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
            entries.push(json!({
                "name": format!("{}/{sub}", r.plural),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    let group_version = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
    Ok(Json(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": entries})))
}
