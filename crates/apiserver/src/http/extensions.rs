//! What the layers running beside the server add to its HTTP surface without the server
//! knowing them: metrics appended to `/metrics`, JSON pages under `/debug/oxplane/<name>`, and
//! actions answered at `POST /oxplane/v1alpha1/<name>` (such as the composition engine's dry-run
//! plans). All go through authentication and RBAC like any request; an action that takes an
//! object is also allowed only to users who may create and patch that object.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::AppState;
use crate::status::{ApiError, Reason};

type MetricsSource = Arc<dyn Fn() -> String + Send + Sync>;
type DebugPage = Arc<dyn Fn() -> Value + Send + Sync>;
/// An action: the request's JSON body in, a JSON answer or a Status out.
pub type Action = Arc<dyn Fn(Value) -> futures::future::BoxFuture<'static, Result<Value, ApiError>> + Send + Sync>;

/// Where actions are served.
pub const ACTIONS_PATH: &str = "/oxplane/v1alpha1";

/// Registered metric sources and debug pages.
#[derive(Default)]
pub struct Extensions {
    metrics: RwLock<Vec<MetricsSource>>,
    debug: RwLock<BTreeMap<String, DebugPage>>,
    actions: RwLock<BTreeMap<String, Action>>,
}

impl Extensions {
    /// Adds a source of Prometheus text appended to `/metrics`.
    pub fn add_metrics(&self, source: impl Fn() -> String + Send + Sync + 'static) {
        self.metrics.write().unwrap_or_else(|p| p.into_inner()).push(Arc::new(source));
    }

    /// Serves `page()` as JSON at `/debug/oxplane/<name>`.
    pub fn add_debug_page(&self, name: &str, page: impl Fn() -> Value + Send + Sync + 'static) {
        self.debug.write().unwrap_or_else(|p| p.into_inner()).insert(name.to_string(), Arc::new(page));
    }

    /// Every registered metric source's text.
    pub fn render_metrics(&self) -> String {
        let sources: Vec<MetricsSource> = self.metrics.read().unwrap_or_else(|p| p.into_inner()).clone();
        sources.iter().map(|source| source()).collect()
    }

    /// Answers `POST /oxplane/v1alpha1/<name>` with `action(body)`. The body must be a
    /// Kubernetes object (apiVersion, kind, metadata.name) of a served kind.
    pub fn add_action(&self, name: &str, action: Action) {
        self.actions.write().unwrap_or_else(|p| p.into_inner()).insert(name.to_string(), action);
    }

    fn action(&self, name: &str) -> Option<Action> {
        self.actions.read().unwrap_or_else(|p| p.into_inner()).get(name).cloned()
    }

    fn page(&self, name: &str) -> Option<DebugPage> {
        self.debug.read().unwrap_or_else(|p| p.into_inner()).get(name).cloned()
    }
}

pub(super) async fn debug_page(State(state): State<Arc<AppState>>, Path(name): Path<String>) -> Response {
    match state.extensions.page(&name) {
        Some(page) => Json(page()).into_response(),
        None => ApiError::new(Reason::NotFound, format!("no debug page {name:?}")).into_response(),
    }
}

pub(super) async fn action(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
    axum::Extension(user): axum::Extension<crate::authn::UserInfo>,
    body: axum::body::Bytes,
) -> Response {
    let Some(action) = state.extensions.action(&name) else {
        return ApiError::new(Reason::NotFound, "the server could not find the requested resource").into_response();
    };
    let object: Value = match serde_json::from_slice(&body) {
        Ok(object @ Value::Object(_)) => object,
        Ok(_) => return ApiError::new(Reason::BadRequest, "the request body must be a JSON object").into_response(),
        Err(error) => return ApiError::new(Reason::BadRequest, format!("the request body is not valid JSON: {error}")).into_response(),
    };
    if let Err(error) = may_write(&state, &user, &object).await {
        return error.into_response();
    }
    match action(object).await {
        Ok(answer) => Json(answer).into_response(),
        Err(error) => error.into_response(),
    }
}

/// Refuses an action on `object` to a user who may not both create and patch it: an action
/// such as a plan reveals what writing the object would do.
async fn may_write(state: &AppState, user: &crate::authn::UserInfo, object: &Value) -> Result<(), ApiError> {
    let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str).unwrap_or_default();
    let (api_version, kind, name) = (text("/apiVersion"), text("/kind"), text("/metadata/name"));
    if api_version.is_empty() || kind.is_empty() || name.is_empty() {
        return Err(ApiError::new(Reason::BadRequest, "the object must have apiVersion, kind and metadata.name"));
    }
    let Some(def) = state.registry.find_kind(api_version, kind) else {
        return Err(ApiError::new(Reason::BadRequest, format!("no kind {kind:?} is registered for version {api_version:?}")));
    };
    if user.in_group(crate::authn::MASTERS) {
        return Ok(());
    }
    let namespace = if def.namespaced { text("/metadata/namespace") } else { "" };
    for verb in ["create", "patch"] {
        let resource = crate::authz::ResourceAttributes {
            namespace: namespace.to_string(),
            group: def.group.clone(),
            version: def.version.clone(),
            resource: def.plural.clone(),
            subresource: String::new(),
            name: name.to_string(),
        };
        let attributes = crate::authz::Attributes::for_resource(user.clone(), verb, resource);
        if let crate::authz::Decision::Deny(reason) = state.authorizer.authorize(&attributes).await {
            return Err(crate::authz::forbidden(&attributes, &reason));
        }
    }
    Ok(())
}
