//! GET and LIST, served from the watch cache with Kubernetes' resourceVersion semantics:
//! unset reads the latest committed state, `0` whatever the cache holds, `N` at least N.
//! Paginated lists stay on the first page's snapshot: from the cache while nothing changed,
//! otherwise from the store at that revision.

use std::sync::Arc;

use axum::http::header;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use oxplane_store::{RangeRequest, Revision};
use serde::ser::{Serialize, SerializeStruct, Serializer};
use serde_json::{Value, json};

use super::AppState;
use super::query::Query;
use super::select::Selection;
use crate::objects;
use crate::registry::ResourceDef;
use crate::status::{ApiError, Reason};

pub use crate::state::{cache_error, parse_revision};

/// Brings the cache to the freshness a read asks for.
pub async fn ensure_fresh(state: &AppState, resource_version: Option<&str>) -> Result<(), ApiError> {
    state.ensure_fresh(resource_version).await
}

/// One object.
pub async fn get(state: &AppState, resource: &ResourceDef, key: &str, name: &str, query: &Query) -> Result<Value, ApiError> {
    ensure_fresh(state, query.resource_version.as_deref()).await?;
    match state.cache.get(key) {
        (Some(object), _) => {
            let mut object = (*object).clone();
            crate::webhooks::conversion::present(&state.cache, resource, &mut object).await?;
            Ok(object)
        }
        (None, _) => Err(ApiError::not_found(&resource.group, &resource.plural, name)),
    }
}

fn encode_continue(revision: Revision, last_key: &str) -> String {
    URL_SAFE_NO_PAD.encode(format!("{revision}\0{last_key}"))
}

fn decode_continue(token: &str) -> Result<(Revision, String), ApiError> {
    let invalid = || ApiError::bad_request("the continue parameter is invalid; restart the list without it");
    let raw = URL_SAFE_NO_PAD.decode(token).map_err(|_| invalid())?;
    let raw = String::from_utf8(raw).map_err(|_| invalid())?;
    let (revision, key) = raw.split_once('\0').ok_or_else(invalid)?;
    Ok((revision.parse().map_err(|_| invalid())?, key.to_string()))
}

/// A list as read: the selected objects as the client sees them (shared with the watch cache
/// when that is how they are stored, so a large list copies nothing), the revision they are at,
/// and a continue token if it was limited.
pub struct Listed {
    kind: String,
    api_version: String,
    revision: Revision,
    continue_token: Option<String>,
    items: Vec<Arc<Value>>,
}

impl Listed {
    /// The listed objects.
    pub fn objects(&self) -> impl Iterator<Item = &Value> {
        self.items.iter().map(|item| &**item)
    }

    /// The list's `metadata`: its resourceVersion and continue token.
    pub fn metadata(&self) -> Value {
        let mut metadata = json!({"resourceVersion": self.revision.to_string()});
        if let Some(token) = &self.continue_token {
            metadata["continue"] = json!(token);
        }
        metadata
    }

    /// The list as a JSON response, serialized straight from the shared objects into a buffer
    /// sized for them.
    pub fn into_response(self) -> Response {
        // Stored objects are about this size each on the wire; a close guess saves the buffer
        // from growing (and copying) a dozen times on a large list.
        const TYPICAL_OBJECT_BYTES: usize = 1_536;
        let mut body = Vec::with_capacity(256 + self.items.len() * TYPICAL_OBJECT_BYTES);
        match serde_json::to_writer(&mut body, &self) {
            Ok(()) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
            Err(error) => ApiError::internal(format!("cannot encode the list: {error}")).into_response(),
        }
    }
}

impl Serialize for Listed {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut list = serializer.serialize_struct("List", 4)?;
        list.serialize_field("apiVersion", &self.api_version)?;
        list.serialize_field("items", &ListItems(&self.items))?;
        list.serialize_field("kind", &self.kind)?;
        list.serialize_field("metadata", &self.metadata())?;
        list.end()
    }
}

/// The items of a list, serialized as a JSON array of the shared objects.
struct ListItems<'a>(&'a [Arc<Value>]);

impl Serialize for ListItems<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(|item| &**item))
    }
}

/// Lists the objects under `prefix` that `selection` picks.
pub async fn list(
    state: &AppState,
    resource: &Arc<ResourceDef>,
    prefix: &str,
    selection: &Selection,
    query: &Query,
) -> Result<Listed, ApiError> {
    let (candidates, revision, after) = match &query.continue_token {
        None => {
            ensure_fresh(state, query.resource_version.as_deref()).await?;
            let (items, revision) = state.cache.list(prefix);
            (items, revision, None)
        }
        Some(token) => {
            let (revision, last_key) = decode_continue(token)?;
            if !last_key.starts_with(prefix) {
                return Err(ApiError::bad_request("the continue parameter belongs to a different list"));
            }
            let (items, cached) = state.cache.list(prefix);
            if cached == revision {
                (items, revision, Some(last_key))
            } else {
                (from_store(state, prefix, revision).await?, revision, Some(last_key))
            }
        }
    };
    // A CRD's conversion webhook converts the whole list in one call.
    let candidates = crate::webhooks::conversion::present_shared(&state.cache, resource, candidates).await?;
    let mut items = Vec::new();
    let mut continue_token = None;
    let mut last_key = String::new();
    for stored in candidates {
        let key = resource.key(objects::meta_str(&stored, "namespace"), objects::meta_str(&stored, "name").unwrap_or_default());
        if after.as_deref().is_some_and(|after| key.as_str() <= after) {
            continue;
        }
        // Selectors see the object as the client does (events.k8s.io field names, say); an
        // object the client sees as stored is shared, not copied.
        let object = if crate::convert::needs_conversion(resource, &stored) {
            let mut object = (*stored).clone();
            crate::convert::present(resource, &mut object);
            Arc::new(object)
        } else {
            stored
        };
        if !selection.matches(&object) {
            continue;
        }
        if query.limit > 0 && items.len() == query.limit {
            continue_token = Some(encode_continue(revision, &last_key));
            break;
        }
        last_key = key;
        items.push(object);
    }
    Ok(Listed { kind: format!("{}List", resource.kind), api_version: resource.api_version(), revision, continue_token, items })
}

/// The objects under `prefix` at a past revision, read from the store.
async fn from_store(state: &AppState, prefix: &str, revision: Revision) -> Result<Vec<Arc<Value>>, ApiError> {
    let request = RangeRequest { prefix: prefix.to_string(), revision: Some(revision), ..Default::default() };
    let response = state.store.range(request).await.map_err(|e| match e {
        oxplane_store::StoreError::Compacted { .. } => ApiError::new(
            Reason::Expired,
            "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
        ),
        other => crate::state::store_error(other),
    })?;
    response.kvs.iter().map(|kv| objects::from_store(kv).map(Arc::new)).collect()
}
