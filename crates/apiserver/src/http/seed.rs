//! Objects every cluster starts with: the `default`, `kube-system`, `kube-public` and
//! `kube-node-lease` namespaces.

use oxplane_store::{Write, WriteResult};
use serde_json::json;

use super::AppState;
use crate::objects;

/// The namespaces Kubernetes creates at start.
pub const SEEDED_NAMESPACES: [&str; 4] = ["default", "kube-system", "kube-public", "kube-node-lease"];

/// Creates the seeded namespaces that do not exist yet.
pub async fn namespaces(state: &AppState) -> Result<(), oxplane_store::StoreError> {
    for name in SEEDED_NAMESPACES {
        let key = format!("/registry/core/namespaces/{name}");
        if state.store.get(&key).await?.kv.is_some() {
            continue;
        }
        let mut namespace = json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        });
        if objects::stamp_new(&mut namespace).is_err() {
            continue;
        }
        // Losing a race with another creator is fine: the namespace exists either way.
        let _: WriteResult = state.store.write(Write::Create { key, value: objects::to_store(&namespace) }).await?;
    }
    Ok(())
}
