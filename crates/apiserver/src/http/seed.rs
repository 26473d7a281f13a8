//! Objects every cluster starts with: the `default`, `kube-system`, `kube-public` and
//! `kube-node-lease` namespaces, and the `kubernetes` Service in `default` whose Endpoints say
//! where the API server listens.

use std::net::SocketAddr;

use oxplane_store::{Write, WriteResult};
use serde_json::{Value, json};

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

/// Writes the `kubernetes` Service and its Endpoints in `default`, as kube-apiserver keeps them:
/// the Endpoints name the address this server listens on (updated when it changes between
/// starts). The Service is headless (`clusterIP: None`): oxplane routes no cluster IPs, so
/// it does not pretend to have one; clients reach the server through the Endpoints' address.
pub async fn kubernetes_service(state: &AppState, listen: SocketAddr) -> Result<(), oxplane_store::StoreError> {
    let labels = json!({"component": "apiserver", "provider": "kubernetes"});
    let service = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "kubernetes", "namespace": "default", "labels": labels},
        "spec": {
            "type": "ClusterIP",
            "clusterIP": "None",
            "clusterIPs": ["None"],
            "sessionAffinity": "None",
            "ipFamilies": [if listen.is_ipv4() { "IPv4" } else { "IPv6" }],
            "ipFamilyPolicy": "SingleStack",
            "internalTrafficPolicy": "Cluster",
            "ports": [{"name": "https", "port": listen.port(), "protocol": "TCP", "targetPort": listen.port()}],
        },
        "status": {"loadBalancer": {}},
    });
    let endpoints = json!({
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {"name": "kubernetes", "namespace": "default", "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
        "subsets": [{"addresses": [{"ip": listen.ip().to_string()}], "ports": [{"name": "https", "port": listen.port(), "protocol": "TCP"}]}],
    });
    ensure(state, "/registry/core/services/default/kubernetes", service, &["spec"]).await?;
    ensure(state, "/registry/core/endpoints/default/kubernetes", endpoints, &["subsets"]).await
}

/// Creates `desired` at `key`, or brings the fields named by `owned` back to it; other fields
/// (labels a user added, say) are left alone.
async fn ensure(state: &AppState, key: &str, mut desired: Value, owned: &[&str]) -> Result<(), oxplane_store::StoreError> {
    for _ in 0..5 {
        let current = state.store.get(key).await?.kv;
        let write = match &current {
            None => {
                if objects::stamp_new(&mut desired).is_err() {
                    return Ok(());
                }
                Write::Create { key: key.to_string(), value: objects::to_store(&desired) }
            }
            Some(kv) => {
                let Ok(mut stored) = objects::from_store(kv) else { return Ok(()) };
                if owned.iter().all(|field| stored[*field] == desired[*field]) {
                    return Ok(());
                }
                for field in owned {
                    stored[*field] = desired[*field].clone();
                }
                if owned.contains(&"spec") {
                    let generation = stored["metadata"]["generation"].as_i64().unwrap_or(1);
                    stored["metadata"]["generation"] = json!(generation + 1);
                }
                Write::Update { key: key.to_string(), value: objects::to_store(&stored), expected: kv.mod_revision }
            }
        };
        if let WriteResult::Committed(_) = state.store.write(write).await? {
            return Ok(());
        }
    }
    Ok(())
}
