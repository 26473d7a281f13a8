//! The write-path hooks that make a stored CRD a served kind before the request returns.

use oxplane_store::{Write, WriteResult};
use serde_json::Value;

use super::AppState;
use crate::state::store_error;
use crate::crd;
use crate::objects;
use crate::status::ApiError;

/// Registers the CRD's resources and writes its status; returns the CRD as stored.
pub async fn establish(state: &AppState, mut object: Value) -> Result<Value, ApiError> {
    let name = objects::meta_str(&object, "name").unwrap_or_default().to_string();
    let key = format!("{}{name}", crd::CRD_PREFIX);
    // A concurrent writer may move the CRD on; retry on the fresh copy a few times.
    for _ in 0..5 {
        let conflict = state.registry.set_custom(&name, crd::resources(&object)).err();
        let status = crd::accepted_status(&object, conflict);
        if object.get("status") == Some(&status) {
            return Ok(object);
        }
        let expected = crate::cache::resource_version(&object);
        object["status"] = status;
        let write = Write::Update { key: key.clone(), value: objects::to_store(&object), expected };
        match state.store.write(write).await.map_err(store_error)? {
            WriteResult::Committed(event) => {
                objects::set_resource_version(&mut object, event.revision());
                return Ok(object);
            }
            WriteResult::Rejected { current: Some(kv) } => object = objects::from_store(&kv)?,
            WriteResult::Rejected { current: None } => {
                state.registry.remove_custom(&name);
                return Err(ApiError::not_found("apiextensions.k8s.io", "customresourcedefinitions", &name));
            }
        }
    }
    Err(ApiError::conflict("apiextensions.k8s.io", "customresourcedefinitions", &name))
}

/// Serves every stored CRD again (at start).
pub async fn establish_all(state: &AppState) -> Result<(), ApiError> {
    let (crds, _) = state.cache.list(crd::CRD_PREFIX);
    for object in crds {
        if crd::validate(&object).is_empty() {
            establish(state, (*object).clone()).await?;
        }
    }
    Ok(())
}

/// Serves the CRDs that other servers on the same store write. The server that stores a CRD
/// serves it in the request (above); every other server learns of it from its watch cache,
/// fed by the shared store's watch, and serves or stops serving it here. Their status is the
/// writing server's to set.
pub fn follow_other_servers(state: &std::sync::Arc<AppState>) {
    use crate::cache::{EventType, Live};
    use tokio::sync::broadcast::error::RecvError;

    let weak = std::sync::Arc::downgrade(state);
    tokio::spawn(async move {
        loop {
            let Some(state) = weak.upgrade() else { return };
            let mut watch = match state.cache.watch(crd::CRD_PREFIX, None) {
                Ok(watch) => watch,
                Err(error) => {
                    tracing::warn!(%error, "cannot follow stored CRDs; retrying");
                    drop(state);
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    continue;
                }
            };
            let serve = |state: &AppState, key: &str, kind: EventType, object: &Value| {
                let Some(name) = key.strip_prefix(crd::CRD_PREFIX) else { return };
                match kind {
                    EventType::Deleted => state.registry.remove_custom(name),
                    EventType::Added | EventType::Modified if crd::validate(object).is_empty() => {
                        if let Err(conflict) = state.registry.set_custom(name, crd::resources(object)) {
                            tracing::warn!(crd = name, conflict, "a stored CRD cannot be served");
                        }
                    }
                    EventType::Added | EventType::Modified => {}
                }
            };
            for event in &watch.initial {
                serve(&state, &event.key, event.kind, &event.object);
            }
            drop(state);
            loop {
                match watch.live.recv().await {
                    Ok(Live::Event(event)) if event.key.starts_with(crd::CRD_PREFIX) => {
                        let Some(state) = weak.upgrade() else { return };
                        serve(&state, &event.key, event.kind, &event.object);
                    }
                    Ok(Live::Event(_)) => {}
                    // Missed events: start over from the cache's current CRDs.
                    Ok(Live::Reset) | Err(RecvError::Lagged(_)) => break,
                    Err(RecvError::Closed) => return,
                }
            }
        }
    });
}
