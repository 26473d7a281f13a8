//! Deletion semantics: finalizers hold objects, preconditions guard deletes, the garbage
//! collector follows owner references (background, foreground, orphan), namespaces and CRDs
//! delete their content before they go.

use crate::support;

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions, PropagationPolicy};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::json;
use support::TestServer;

/// How long a test waits for the server's controllers to act.
const PATIENCE: Duration = Duration::from_secs(30);

async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while tokio::time::Instant::now() < deadline {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting until {what}");
}

fn config_map(name: &str, owners: serde_json::Value, finalizers: &[&str]) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "ownerReferences": owners, "finalizers": finalizers},
        "data": {"k": "v"},
    }))
    .unwrap()
}

fn owner_ref(owner: &ConfigMap, block: bool) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "name": owner.metadata.name, "uid": owner.metadata.uid, "blockOwnerDeletion": block})
}

async fn gone(api: &Api<ConfigMap>, name: &str) -> bool {
    api.get_opt(name).await.unwrap().is_none()
}

async fn release(api: &Api<ConfigMap>, name: &str) {
    api.patch(name, &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": null}}))).await.unwrap();
}

#[tokio::test]
async fn finalizers_hold_an_object_until_the_last_one_goes() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(server.client().await, "default");
    cms.create(&PostParams::default(), &config_map("held", json!([]), &["example.com/a", "example.com/b"])).await.unwrap();

    let answer = cms.delete("held", &DeleteParams::default()).await.unwrap();
    let pending = answer.left().expect("a held object is returned, not a Status");
    let stamp = pending.metadata.deletion_timestamp.clone().expect("deletionTimestamp set");

    // No finalizer may be added now; the timestamp does not move.
    let error = cms
        .patch("held", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": ["example.com/a", "example.com/b", "example.com/c"]}})))
        .await
        .unwrap_err();
    assert!(matches!(&error, kube::Error::Api(s) if s.code == 422 && s.message.contains("no new finalizers")), "{error:?}");
    let moved = cms
        .patch("held", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"deletionTimestamp": "2001-01-01T00:00:00Z"}})))
        .await
        .unwrap();
    assert_eq!(moved.metadata.deletion_timestamp, Some(stamp));

    // A second delete changes nothing; dropping one finalizer keeps it; the last one frees it.
    assert!(cms.delete("held", &DeleteParams::default()).await.unwrap().is_left());
    cms.patch("held", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": ["example.com/b"]}}))).await.unwrap();
    assert!(!gone(&cms, "held").await);
    release(&cms, "held").await;
    assert!(gone(&cms, "held").await);
}

#[tokio::test]
async fn deletes_check_preconditions_and_honour_dry_run() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(server.client().await, "default");
    let created = cms.create(&PostParams::default(), &config_map("guarded", json!([]), &[])).await.unwrap();

    let wrong_uid = DeleteParams { preconditions: Some(Preconditions { uid: Some("nope".into()), resource_version: None }), ..Default::default() };
    let error = cms.delete("guarded", &wrong_uid).await.unwrap_err();
    assert!(matches!(&error, kube::Error::Api(s) if s.code == 409 && s.message.contains("Precondition failed: UID")), "{error:?}");
    let wrong_rv = DeleteParams { preconditions: Some(Preconditions { uid: None, resource_version: Some("1".into()) }), ..Default::default() };
    let error = cms.delete("guarded", &wrong_rv).await.unwrap_err();
    assert!(matches!(&error, kube::Error::Api(s) if s.code == 409 && s.message.contains("ResourceVersion")), "{error:?}");

    let dry = DeleteParams { dry_run: true, ..Default::default() };
    cms.delete("guarded", &dry).await.unwrap();
    assert!(!gone(&cms, "guarded").await, "a dry-run delete leaves the object");

    let right = DeleteParams {
        preconditions: Some(Preconditions { uid: created.metadata.uid.clone(), resource_version: created.metadata.resource_version.clone() }),
        ..Default::default()
    };
    assert!(cms.delete("guarded", &right).await.unwrap().is_right(), "an unheld object is deleted at once");
    assert!(gone(&cms, "guarded").await);
}

#[tokio::test]
async fn background_deletion_collects_dependents_and_orphans_of_missing_owners() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(server.client().await, "default");
    let owner = cms.create(&PostParams::default(), &config_map("owner", json!([]), &[])).await.unwrap();
    for i in 0..3 {
        cms.create(&PostParams::default(), &config_map(&format!("dep-{i}"), json!([owner_ref(&owner, false)]), &[])).await.unwrap();
    }
    // A dependent of two owners survives while one of them lives.
    let other = cms.create(&PostParams::default(), &config_map("other", json!([]), &[])).await.unwrap();
    cms.create(&PostParams::default(), &config_map("shared", json!([owner_ref(&owner, false), owner_ref(&other, false)]), &[])).await.unwrap();

    cms.delete("owner", &DeleteParams::background()).await.unwrap();
    for i in 0..3 {
        let name = format!("dep-{i}");
        eventually(&format!("{name} is collected"), || gone(&cms, &name)).await;
    }
    eventually("the shared dependent loses the gone owner", || async {
        let shared = cms.get("shared").await.unwrap();
        shared.metadata.owner_references.unwrap_or_default().len() == 1
    })
    .await;

    // An owner reference naming a uid that never existed: collected.
    let ghost = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "ghost", "uid": "00000000-0000-0000-0000-000000000000"}]);
    cms.create(&PostParams::default(), &config_map("haunted", ghost, &[])).await.unwrap();
    eventually("a dependent of a missing owner is collected", || gone(&cms, "haunted")).await;

    // An owner re-created under the same name is a different owner.
    let first = cms.create(&PostParams::default(), &config_map("phoenix", json!([]), &[])).await.unwrap();
    cms.delete("phoenix", &DeleteParams::default()).await.unwrap();
    cms.create(&PostParams::default(), &config_map("phoenix", json!([]), &[])).await.unwrap();
    cms.create(&PostParams::default(), &config_map("ash", json!([owner_ref(&first, false)]), &[])).await.unwrap();
    eventually("the dependent of the first incarnation is collected", || gone(&cms, "ash")).await;
    assert!(!gone(&cms, "phoenix").await);
}

#[tokio::test]
async fn foreground_deletion_waits_for_blocking_dependents() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(server.client().await, "default");
    let owner = cms.create(&PostParams::default(), &config_map("fg-owner", json!([]), &[])).await.unwrap();
    cms.create(&PostParams::default(), &config_map("fg-held", json!([owner_ref(&owner, true)]), &["example.com/hold"])).await.unwrap();
    cms.create(&PostParams::default(), &config_map("fg-free", json!([owner_ref(&owner, true)]), &[])).await.unwrap();

    let pending = cms.delete("fg-owner", &DeleteParams::foreground()).await.unwrap().left().expect("owner held");
    assert!(pending.metadata.finalizers.unwrap().contains(&"foregroundDeletion".to_string()));
    eventually("the free dependent goes first", || gone(&cms, "fg-free")).await;
    eventually("the held dependent is deleting", || async {
        cms.get("fg-held").await.unwrap().metadata.deletion_timestamp.is_some()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!gone(&cms, "fg-owner").await, "the owner waits for its blocking dependent");

    release(&cms, "fg-held").await;
    eventually("the owner goes once its dependents are gone", || gone(&cms, "fg-owner")).await;
}

#[tokio::test]
async fn orphan_deletion_keeps_dependents_without_the_owner() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(server.client().await, "default");
    let owner = cms.create(&PostParams::default(), &config_map("orphaner", json!([]), &[])).await.unwrap();
    cms.create(&PostParams::default(), &config_map("kept", json!([owner_ref(&owner, true)]), &[])).await.unwrap();
    let orphan = DeleteParams { propagation_policy: Some(PropagationPolicy::Orphan), ..Default::default() };
    cms.delete("orphaner", &orphan).await.unwrap();
    eventually("the owner goes", || gone(&cms, "orphaner")).await;
    let kept = cms.get("kept").await.unwrap();
    assert!(kept.metadata.owner_references.unwrap_or_default().is_empty());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!gone(&cms, "kept").await);
}

#[tokio::test]
async fn cluster_scoped_dependents_of_namespaced_owners_are_never_collected() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let owner = cms.create(&PostParams::default(), &config_map("ns-owner", json!([]), &[])).await.unwrap();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let dependent: Namespace = serde_json::from_value(json!({"metadata": {"name": "invalid-dependent", "ownerReferences": [owner_ref(&owner, false)]}})).unwrap();
    namespaces.create(&PostParams::default(), &dependent).await.unwrap();
    cms.delete("ns-owner", &DeleteParams::default()).await.unwrap();
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    eventually("a warning event names the invalid reference", || async {
        let list = events.list(&ListParams::default().fields("involvedObject.name=invalid-dependent")).await.unwrap();
        list.items.iter().any(|e| e.reason.as_deref() == Some("OwnerRefInvalidNamespace") && e.type_.as_deref() == Some("Warning"))
    })
    .await;
    assert!(namespaces.get_opt("invalid-dependent").await.unwrap().is_some());
}

#[tokio::test]
async fn a_deleted_namespace_terminates_its_content_first() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "doomed"}})).unwrap()).await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "doomed");
    cms.create(&PostParams::default(), &config_map("plain", json!([]), &[])).await.unwrap();
    cms.create(&PostParams::default(), &config_map("sticky", json!([]), &["example.com/hold"])).await.unwrap();

    let pending = namespaces.delete("doomed", &DeleteParams::default()).await.unwrap().left().expect("namespace held");
    assert_eq!(pending.status.unwrap().phase.as_deref(), Some("Terminating"));
    let error = cms.create(&PostParams::default(), &config_map("late", json!([]), &[])).await.unwrap_err();
    assert!(matches!(&error, kube::Error::Api(s) if s.code == 403 && s.message.contains("being terminated")), "{error:?}");

    eventually("the plain content goes", || gone(&cms, "plain")).await;
    eventually("the namespace says which finalizer holds it", || async {
        let ns = namespaces.get("doomed").await.unwrap();
        let conditions = ns.status.and_then(|s| s.conditions).unwrap_or_default();
        conditions.iter().any(|c| c.type_ == "NamespaceFinalizersRemaining" && c.message.as_deref().unwrap_or_default().contains("example.com/hold"))
    })
    .await;
    release(&cms, "sticky").await;
    eventually("the namespace goes", || async { namespaces.get_opt("doomed").await.unwrap().is_none() }).await;

    let error = namespaces.delete("default", &DeleteParams::default()).await.unwrap_err();
    assert!(matches!(&error, kube::Error::Api(s) if s.code == 403), "{error:?}");
}

fn gadget_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    }))
    .unwrap()
}

#[tokio::test]
async fn a_deleted_crd_removes_its_resources_then_its_kind() {
    use futures::StreamExt;
    let server = TestServer::start().await;
    let client = server.client().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let created = crds.create(&PostParams::default(), &gadget_crd()).await.unwrap();
    assert!(created.metadata.finalizers.unwrap().contains(&"customresourcecleanup.apiextensions.k8s.io".to_string()));
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Gadget"));
    let gadgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &resource);
    let gadget = |name: &str, finalizers: &[&str]| -> DynamicObject {
        serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": name, "finalizers": finalizers}})).unwrap()
    };
    gadgets.create(&PostParams::default(), &gadget("g1", &[])).await.unwrap();
    gadgets.create(&PostParams::default(), &gadget("g2", &["example.com/hold"])).await.unwrap();

    // A raw watch on the kind: it must end when the kind goes.
    let mut watch = gadgets.watch(&kube::api::WatchParams::default().timeout(290), "0").await.unwrap().boxed();

    crds.delete("gadgets.example.com", &DeleteParams::default()).await.unwrap();
    eventually("the free gadget goes", || async { gadgets.get_opt("g1").await.unwrap().is_none() }).await;
    eventually("the CRD says it is terminating", || async {
        let crd = crds.get("gadgets.example.com").await.unwrap();
        crd.status.and_then(|s| s.conditions).unwrap_or_default().iter().any(|c| c.type_ == "Terminating" && c.status == "True")
    })
    .await;
    let error = gadgets.create(&PostParams::default(), &gadget("g3", &[])).await.unwrap_err();
    assert!(matches!(&error, kube::Error::Api(s) if s.code == 405), "{error:?}");

    gadgets.patch("g2", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": null}}))).await.unwrap();
    eventually("the CRD goes", || async { crds.get_opt("gadgets.example.com").await.unwrap().is_none() }).await;
    let error = gadgets.list(&ListParams::default()).await.unwrap_err();
    assert!(matches!(&error, kube::Error::Api(s) if s.code == 404), "{error:?}");
    let ended = tokio::time::timeout(PATIENCE, async { while watch.next().await.is_some() {} }).await;
    assert!(ended.is_ok(), "the watch on the removed kind ends");

    // Re-created, the kind is served again, empty.
    crds.create(&PostParams::default(), &gadget_crd()).await.unwrap();
    assert!(gadgets.list(&ListParams::default()).await.unwrap().items.is_empty());
}

#[tokio::test]
async fn a_foreground_deletion_finishes_after_a_restart() {
    let first = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(first.client().await, "default");
    let owner = cms.create(&PostParams::default(), &config_map("root", json!([]), &[])).await.unwrap();
    cms.create(&PostParams::default(), &config_map("leaf", json!([owner_ref(&owner, true)]), &["example.com/hold"])).await.unwrap();
    cms.delete("root", &DeleteParams::foreground()).await.unwrap();
    eventually("the leaf is deleting", || async { cms.get("leaf").await.unwrap().metadata.deletion_timestamp.is_some() }).await;

    let moved = tempfile::tempdir().unwrap();
    let from = first.dir.path().to_path_buf();
    first.stop_keeping(&from, moved.path()).await;
    let second = TestServer::start_in(moved.path()).await;
    let cms: Api<ConfigMap> = Api::namespaced(second.client().await, "default");
    assert!(!gone(&cms, "root").await, "the owner still waits after the restart");
    release(&cms, "leaf").await;
    eventually("the owner goes once the restarted collector sees the leaf gone", || gone(&cms, "root")).await;
}
