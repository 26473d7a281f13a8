//! provider-nop against a real in-process API server: the managed-resource reconciler makes a
//! NopResource Ready on schedule, names it, publishes its connection details, and lets it go.

use crate::support;

use oxplane_runtime::conditions;
use oxplane_runtime::kinds::Kind;
use oxplane_runtime::object;
use serde_json::json;
use support::{start, wait_for};

async fn install(runtime: &oxplane_runtime::Runtime, package: &str) -> oxplane_runtime::provider::ProviderHandle {
    support::install(runtime, &oxplane_providers::nop::NopProvider, package).await
}

#[tokio::test]
async fn a_nop_resource_becomes_ready_publishes_details_and_is_deleted() {
    let (server, runtime) = start().await;
    let _provider = install(&runtime, "xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0").await;
    let kind = Kind::new("nop.crossplane.io", "v1alpha1", "NopResource", "nopresources", false);
    let nop = json!({
        "apiVersion": "nop.crossplane.io/v1alpha1",
        "kind": "NopResource",
        "metadata": {"name": "example"},
        "spec": {
            "forProvider": {
                "conditionAfter": [
                    {"time": "0s", "conditionType": "Ready", "conditionStatus": "False", "conditionReason": "Waiting"},
                    {"time": "2s", "conditionType": "Ready", "conditionStatus": "True", "conditionReason": "Available"}
                ],
                "connectionDetails": [{"name": "username", "value": "admin"}, {"name": "password", "value": "s3cr3t"}]
            },
            "writeConnectionSecretToRef": {"name": "example-conn", "namespace": "default"}
        }
    });
    runtime.kube.create(&kind, &nop).await.unwrap();

    // Synced at once, not Ready until its 2 seconds are up.
    let first = wait_for("Synced", async || {
        let o = runtime.kube.get(&kind, None, "example").await.unwrap()?;
        conditions::is_true(&o, "Synced").then_some(o)
    })
    .await;
    assert_eq!(conditions::get(&first, "Ready").map(|c| c.reason), Some("Waiting".to_string()));
    assert_eq!(object::annotation(&first, "crossplane.io/external-name"), Some("example"));
    assert!(object::has_finalizer(&first, "finalizer.managedresource.crossplane.io"));
    let ready = wait_for("Ready", async || {
        let o = runtime.kube.get(&kind, None, "example").await.unwrap()?;
        conditions::is_true(&o, "Ready").then_some(o)
    })
    .await;
    let synced = conditions::get(&ready, "Synced").unwrap();
    assert_eq!((synced.reason.as_str(), synced.observed_generation), ("ReconcileSuccess", 1));

    let secret = runtime.kube.get(&oxplane_runtime::managed::connection::secret_kind(), Some("default"), "example-conn").await.unwrap().unwrap();
    assert_eq!(secret["type"], "connection.crossplane.io/v1alpha1");
    let data = oxplane_runtime::managed::connection::decode_data(&secret);
    assert_eq!(data["username"], b"admin");
    assert_eq!(data["password"], b"s3cr3t");
    assert_eq!(object::controller_uid(&secret), object::uid(&ready));

    // Deleting releases the finalizer; the Secret goes with its owner.
    runtime.kube.delete(&kind, None, "example", &Default::default()).await.unwrap();
    wait_for("the NopResource to go", async || runtime.kube.get(&kind, None, "example").await.unwrap().is_none().then_some(())).await;
    server.stop().await;
}

#[tokio::test]
async fn the_v0_5_layout_serves_namespaced_nop_resources() {
    let (server, runtime) = start().await;
    let provider = install(&runtime, "xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.5.0").await;
    let kind = Kind::new("nop.crossplane.io", "v1alpha1", "NopResource", "nopresources", true);
    let nop = json!({
        "apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource",
        "metadata": {"name": "n1", "namespace": "default"},
        "spec": {"forProvider": {"conditionAfter": [{"time": "0s", "conditionType": "Ready", "conditionStatus": "True"}]},
                 "writeConnectionSecretToRef": {"name": "n1-conn"}}
    });
    let created = runtime.kube.create(&kind, &nop).await.unwrap();
    assert_eq!(created["spec"]["providerConfigRef"], json!({"kind": "ClusterProviderConfig", "name": "default"}));
    wait_for("Ready", async || {
        let o = runtime.kube.get(&kind, Some("default"), "n1").await.unwrap()?;
        conditions::is_true(&o, "Ready").then_some(())
    })
    .await;
    // Its own namespace holds the Secret (there are no connection details: an empty Secret).
    assert!(runtime.kube.get(&oxplane_runtime::managed::connection::secret_kind(), Some("default"), "n1-conn").await.unwrap().is_some());

    // Stopping the provider stops its watches: nothing watches NopResources any more.
    assert!(runtime.watches.subscriptions().keys().any(|(c, _)| c == "managed/nopresource.nop.crossplane.io"));
    provider.stop();
    assert!(!runtime.watches.subscriptions().keys().any(|(c, _)| c.starts_with("managed/")));
    server.stop().await;
}

