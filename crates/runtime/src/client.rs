//! The API client every controller uses: kube-rs requests for any kind, with objects as plain
//! JSON. Controllers work on JSON because most kinds they touch (composite resources, composed
//! resources, managed resources of any provider) are defined at runtime by CRDs.
//!
//! Failures are [`ApiError`]s carrying the server's code and reason, so callers branch on
//! "not found" or "conflict" rather than on message text.

use futures::{Stream, StreamExt};
use kube::api::{DeleteParams, GetParams, ListParams, Patch, PatchParams, PostParams, Preconditions, PropagationPolicy, WatchParams};
use kube::core::{Request, WatchEvent};
use serde_json::Value;

use crate::kinds::Kind;

/// A failed API request.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    /// The HTTP code (0 when the request never got an answer).
    pub code: u16,
    /// The Kubernetes reason (`NotFound`, `Conflict`, ...), or `Transport`.
    pub reason: String,
    /// What the server said.
    pub message: String,
}

impl ApiError {
    /// Whether the object (or its kind) does not exist.
    pub fn is_not_found(&self) -> bool {
        self.code == 404
    }

    /// Whether a write lost an optimistic-concurrency race.
    pub fn is_conflict(&self) -> bool {
        self.code == 409 && self.reason == "Conflict"
    }

    /// Whether a create found the name taken.
    pub fn is_already_exists(&self) -> bool {
        self.code == 409 && self.reason == "AlreadyExists"
    }

    /// Whether the server refused the object as invalid.
    pub fn is_invalid(&self) -> bool {
        self.code == 422
    }

    /// Whether RBAC refused the request (403 Forbidden).
    pub fn is_forbidden(&self) -> bool {
        self.code == 403
    }

    /// An error that did not come from the server.
    pub fn transport(message: impl Into<String>) -> Self {
        ApiError { code: 0, reason: "Transport".into(), message: message.into() }
    }
}

impl From<kube::Error> for ApiError {
    fn from(error: kube::Error) -> Self {
        match error {
            kube::Error::Api(status) => ApiError { code: status.code, reason: status.reason.clone(), message: status.message.clone() },
            other => ApiError::transport(other.to_string()),
        }
    }
}

/// How a delete is made.
#[derive(Clone, Debug, Default)]
pub struct DeleteOptions {
    /// `propagationPolicy`: `Background`, `Foreground` or `Orphan` (none: the server's default).
    pub propagation: Option<String>,
    /// Delete only the object with this uid.
    pub uid: Option<String>,
    /// Delete only at this resourceVersion.
    pub resource_version: Option<String>,
}

/// One page of a list.
#[derive(Clone, Debug, Default)]
pub struct ListPage {
    /// The objects (each with `apiVersion` and `kind` set).
    pub items: Vec<Value>,
    /// The list's resourceVersion, to watch from.
    pub resource_version: String,
    /// The continue token of the next page, if any.
    pub continue_token: Option<String>,
}

/// The field manager of every write that is not a server-side apply: the name Crossplane's
/// controllers write under (their binary's name), so `managedFields` never says `unknown`.
pub const FIELD_MANAGER: &str = "crossplane";

/// The client.
#[derive(Clone)]
pub struct Kube {
    client: kube::Client,
}

/// Parameters of a create or a replace, recorded under [`FIELD_MANAGER`].
fn post_params() -> PostParams {
    PostParams { field_manager: Some(FIELD_MANAGER.to_string()), ..PostParams::default() }
}

/// Parameters of a patch that is not an apply, recorded under [`FIELD_MANAGER`].
fn patch_params() -> PatchParams {
    PatchParams { field_manager: Some(FIELD_MANAGER.to_string()), ..PatchParams::default() }
}

fn request_error(error: kube::core::request::Error) -> ApiError {
    ApiError::transport(format!("cannot build request: {error}"))
}

fn name_of(object: &Value) -> Result<(Option<&str>, &str), ApiError> {
    let namespace = object.pointer("/metadata/namespace").and_then(Value::as_str);
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError { code: 422, reason: "Invalid".into(), message: "object has no metadata.name".into() })?;
    Ok((namespace, name))
}

fn body(object: &Value) -> Result<Vec<u8>, ApiError> {
    serde_json::to_vec(object).map_err(|e| ApiError::transport(format!("cannot encode object: {e}")))
}

impl Kube {
    /// A client over a kube-rs client (in-process or dialling a server).
    pub fn new(client: kube::Client) -> Self {
        Kube { client }
    }

    /// The underlying kube-rs client.
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// GET of a raw path, as JSON (discovery documents).
    pub async fn get_path(&self, path: &str) -> Result<Value, ApiError> {
        let request = http::Request::get(path).body(Vec::new()).map_err(|e| ApiError::transport(e.to_string()))?;
        Ok(self.client.request::<Value>(request).await?)
    }

    /// The object, or `None` when it does not exist.
    pub async fn get(&self, kind: &Kind, namespace: Option<&str>, name: &str) -> Result<Option<Value>, ApiError> {
        let request = Request::new(kind.collection_path(namespace)).get(name, &GetParams::default()).map_err(request_error)?;
        match self.client.request::<Value>(request).await {
            Ok(object) => Ok(Some(object)),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
            Err(error) => Err(error.into()),
        }
    }

    /// Every object of the kind (in `namespace`, or everywhere), optionally by label selector.
    pub async fn list(&self, kind: &Kind, namespace: Option<&str>, label_selector: Option<&str>) -> Result<Vec<Value>, ApiError> {
        let mut items = Vec::new();
        let mut continue_token = None;
        loop {
            let page = self.list_page(kind, namespace, label_selector, continue_token.as_deref()).await?;
            items.extend(page.items);
            match page.continue_token {
                Some(token) => continue_token = Some(token),
                None => return Ok(items),
            }
        }
    }

    /// One page of a list of up to 500 objects.
    pub async fn list_page(
        &self,
        kind: &Kind,
        namespace: Option<&str>,
        label_selector: Option<&str>,
        continue_token: Option<&str>,
    ) -> Result<ListPage, ApiError> {
        let mut params = ListParams::default().limit(500);
        if let Some(selector) = label_selector {
            params = params.labels(selector);
        }
        if let Some(token) = continue_token {
            params = params.continue_token(token);
        }
        let request = Request::new(kind.collection_path(namespace)).list(&params).map_err(request_error)?;
        let mut list: Value = self.client.request(request).await?;
        let resource_version = list.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or_default().to_string();
        let continue_token =
            list.pointer("/metadata/continue").and_then(Value::as_str).filter(|t| !t.is_empty()).map(str::to_string);
        let mut items = match list.get_mut("items").map(Value::take) {
            Some(Value::Array(items)) => items,
            _ => Vec::new(),
        };
        // List items carry no apiVersion/kind; put them back so every object is self-describing.
        for item in &mut items {
            if let Some(map) = item.as_object_mut() {
                map.insert("apiVersion".into(), Value::String(kind.api_version()));
                map.insert("kind".into(), Value::String(kind.gvk.kind.clone()));
            }
        }
        Ok(ListPage { items, resource_version, continue_token })
    }

    /// Watch events of the kind (everywhere) from `resource_version`, with bookmarks.
    pub async fn watch(
        &self,
        kind: &Kind,
        resource_version: &str,
        timeout_seconds: u32,
    ) -> Result<impl Stream<Item = Result<WatchEvent<Value>, ApiError>> + use<>, ApiError> {
        let params = WatchParams::default().timeout(timeout_seconds);
        let request = Request::new(kind.collection_path(None)).watch(&params, resource_version).map_err(request_error)?;
        let stream = self.client.request_events::<Value>(request).await?;
        Ok(stream.map(|item| item.map_err(ApiError::from)))
    }

    /// Creates the object.
    pub async fn create(&self, kind: &Kind, object: &Value) -> Result<Value, ApiError> {
        let namespace = object.pointer("/metadata/namespace").and_then(Value::as_str);
        let request =
            Request::new(kind.collection_path(namespace)).create(&post_params(), body(object)?).map_err(request_error)?;
        Ok(self.client.request(request).await?)
    }

    /// Replaces the object (a PUT: it must carry the resourceVersion it was read at).
    pub async fn replace(&self, kind: &Kind, object: &Value) -> Result<Value, ApiError> {
        let (namespace, name) = name_of(object)?;
        let request =
            Request::new(kind.collection_path(namespace)).replace(name, &post_params(), body(object)?).map_err(request_error)?;
        Ok(self.client.request(request).await?)
    }

    /// Replaces the object's status (a PUT of the status subresource).
    pub async fn replace_status(&self, kind: &Kind, object: &Value) -> Result<Value, ApiError> {
        let (namespace, name) = name_of(object)?;
        let request = Request::new(kind.collection_path(namespace))
            .replace_subresource("status", name, &post_params(), body(object)?)
            .map_err(request_error)?;
        Ok(self.client.request(request).await?)
    }

    /// A JSON merge patch of the object.
    pub async fn merge_patch(&self, kind: &Kind, namespace: Option<&str>, name: &str, patch: &Value) -> Result<Value, ApiError> {
        let request = Request::new(kind.collection_path(namespace))
            .patch(name, &patch_params(), &Patch::Merge(patch))
            .map_err(request_error)?;
        Ok(self.client.request(request).await?)
    }

    /// A JSON merge patch of the object's status.
    pub async fn merge_patch_status(&self, kind: &Kind, namespace: Option<&str>, name: &str, patch: &Value) -> Result<Value, ApiError> {
        let request = Request::new(kind.collection_path(namespace))
            .patch_subresource("status", name, &patch_params(), &Patch::Merge(patch))
            .map_err(request_error)?;
        Ok(self.client.request(request).await?)
    }

    /// Server-side apply of `object` as `manager` (with `force`, conflicts take ownership).
    pub async fn apply(&self, kind: &Kind, object: &Value, manager: &str, force: bool) -> Result<Value, ApiError> {
        let (namespace, name) = name_of(object)?;
        let mut params = PatchParams::apply(manager);
        params.force = force;
        let request =
            Request::new(kind.collection_path(namespace)).patch(name, &params, &Patch::Apply(object)).map_err(request_error)?;
        Ok(self.client.request(request).await?)
    }

    /// What a server-side apply of `object` as `manager` would store, without storing it
    /// (`dryRun=All`): the merged object, or the created one with its defaults.
    pub async fn apply_dry_run(&self, kind: &Kind, object: &Value, manager: &str, force: bool) -> Result<Value, ApiError> {
        let (namespace, name) = name_of(object)?;
        let mut params = PatchParams::apply(manager);
        params.force = force;
        params.dry_run = true;
        let request =
            Request::new(kind.collection_path(namespace)).patch(name, &params, &Patch::Apply(object)).map_err(request_error)?;
        Ok(self.client.request(request).await?)
    }

    /// Server-side apply of the status subresource.
    pub async fn apply_status(&self, kind: &Kind, object: &Value, manager: &str, force: bool) -> Result<Value, ApiError> {
        let (namespace, name) = name_of(object)?;
        let mut params = PatchParams::apply(manager);
        params.force = force;
        let request = Request::new(kind.collection_path(namespace))
            .patch_subresource("status", name, &params, &Patch::Apply(object))
            .map_err(request_error)?;
        Ok(self.client.request(request).await?)
    }

    /// Deletes the object; `Ok(false)` when it was already gone.
    pub async fn delete(&self, kind: &Kind, namespace: Option<&str>, name: &str, options: &DeleteOptions) -> Result<bool, ApiError> {
        let propagation_policy = match options.propagation.as_deref() {
            Some("Foreground") => Some(PropagationPolicy::Foreground),
            Some("Background") => Some(PropagationPolicy::Background),
            Some("Orphan") => Some(PropagationPolicy::Orphan),
            _ => None,
        };
        let mut params = DeleteParams { propagation_policy, ..DeleteParams::default() };
        if options.uid.is_some() || options.resource_version.is_some() {
            params.preconditions = Some(Preconditions { uid: options.uid.clone(), resource_version: options.resource_version.clone() });
        }
        let request = Request::new(kind.collection_path(namespace)).delete(name, &params).map_err(request_error)?;
        match self.client.request_text(request).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
            Err(error) => Err(error.into()),
        }
    }
}
