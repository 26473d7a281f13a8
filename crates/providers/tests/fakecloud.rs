//! The managed-resource runtime against the local fake cloud (random identifiers,
//! asynchronous creates): every management-policy set creates exactly once and saves the
//! identifier whatever its policies say; Observe-only never creates; a lost create response is
//! settled by lookup, or fails closed when the cloud cannot look things up; deletes, orphans,
//! ProviderConfig usage.

use crate::support;

use std::time::Duration;

use oxplane_providers::fakecloud::cloud::FakeCloud;
use oxplane_providers::fakecloud::FakeCloudProvider;
use oxplane_runtime::Runtime;
use oxplane_runtime::conditions;
use oxplane_runtime::kinds::Kind;
use oxplane_runtime::managed::reconciler::CREATION_RESULT_UNKNOWN;
use oxplane_runtime::object;
use serde_json::{Value, json};
use support::{events_of, install, start, wait_for, wait_object};

const PACKAGE: &str = "xpkg.oxplane.io/oxplane/provider-fakecloud:v0.1.0";

fn thing_kind() -> Kind {
    Kind::new("fakecloud.oxplane.io", "v1alpha1", "FakeThing", "fakethings", false)
}

fn config_kind() -> Kind {
    Kind::new("fakecloud.oxplane.io", "v1alpha1", "ProviderConfig", "providerconfigs", false)
}

async fn config(runtime: &Runtime, name: &str, cloud: &FakeCloud, lookup: bool, deterministic: bool) {
    let config = json!({
        "apiVersion": "fakecloud.oxplane.io/v1alpha1", "kind": "ProviderConfig",
        "metadata": {"name": name},
        "spec": {"endpoint": cloud.endpoint(), "lookup": lookup, "deterministicNames": deterministic}
    });
    runtime.kube.create(&config_kind(), &config).await.unwrap();
}

fn thing(name: &str, config: &str, policies: Value) -> Value {
    json!({
        "apiVersion": "fakecloud.oxplane.io/v1alpha1", "kind": "FakeThing",
        "metadata": {"name": name},
        "spec": {"forProvider": {"size": 2}, "managementPolicies": policies, "providerConfigRef": {"name": config}}
    })
}

fn ready_and_synced(o: &Value) -> bool {
    conditions::is_true(o, "Ready") && conditions::is_true(o, "Synced")
}

#[tokio::test]
async fn every_policy_set_with_create_creates_once_and_saves_the_identifier() {
    let (server, runtime) = start().await;
    let _provider = install(&runtime, &FakeCloudProvider::default(), PACKAGE).await;
    let cloud = FakeCloud::start(Duration::from_millis(300)).await.unwrap();
    config(&runtime, "default", &cloud, true, false).await;
    let sets = [
        json!(["*"]),
        json!(["Observe", "Create", "Update", "LateInitialize", "Delete"]),
        json!(["Observe", "Create", "Update", "Delete"]),
        json!(["Observe", "Create", "Update", "LateInitialize"]),
        json!(["Observe", "Create", "Update"]),
        json!(["Observe", "Create", "Delete", "LateInitialize"]),
        json!(["Observe", "Create", "LateInitialize"]),
        json!(["Observe", "Create", "Delete"]),
        json!(["Observe", "Create"]),
    ];
    for (i, set) in sets.iter().enumerate() {
        let mut t = thing(&format!("t{i}"), "default", set.clone());
        // initProvider is used at create only.
        t["spec"]["initProvider"] = json!({"tags": {"team": "a"}});
        runtime.kube.create(&thing_kind(), &t).await.unwrap();
    }
    for (i, set) in sets.iter().enumerate() {
        let name = format!("t{i}");
        let mr = wait_object(&runtime, &thing_kind(), None, &name, "Ready and Synced", ready_and_synced).await;
        let uid = object::uid(&mr).unwrap();
        let things = cloud.things_of(uid);
        assert_eq!(things.len(), 1, "{set}: {things:?}");
        assert_eq!(cloud.creates_of(uid), 1, "{set}");
        assert_eq!(things[0]["tags"]["team"], "a", "{set}: initProvider reached the create");
        // The identifier is saved whatever the policies say about late initialization.
        assert_eq!(object::annotation(&mr, "crossplane.io/external-name"), things[0]["id"].as_str(), "{set}");
        assert!(object::annotation(&mr, "crossplane.io/external-create-succeeded").is_some(), "{set}");
        let late_init = set.as_array().unwrap().iter().any(|a| a == "*" || a == "LateInitialize");
        if late_init {
            wait_object(&runtime, &thing_kind(), None, &name, "late initialization", |o| o["spec"]["forProvider"]["color"] == "blue").await;
        } else {
            // Without LateInitialize the spec stays exactly as applied.
            assert_eq!(mr["spec"]["forProvider"], json!({"size": 2}), "{set}");
        }
        assert_eq!(mr["status"]["atProvider"]["state"], "ready");
        let events = events_of(&runtime, &mr).await;
        assert!(events.iter().any(|(t, r, _)| t == "Normal" && r == "CreatedExternalResource"), "{set}: {events:?}");
    }
    assert_eq!(cloud.live().len(), sets.len());
    server.stop().await;
}

#[tokio::test]
async fn observe_only_never_creates_and_adopts_an_existing_identifier() {
    let (server, runtime) = start().await;
    let _provider = install(&runtime, &FakeCloudProvider::default(), PACKAGE).await;
    let cloud = FakeCloud::start(Duration::ZERO).await.unwrap();
    config(&runtime, "default", &cloud, true, false).await;
    runtime.kube.create(&thing_kind(), &thing("watcher", "default", json!(["Observe"]))).await.unwrap();
    let mr = wait_object(&runtime, &thing_kind(), None, "watcher", "the missing resource reported", |o| {
        conditions::get(o, "Synced").is_some_and(|c| c.message == "observe failed: external resource does not exist")
    })
    .await;
    assert_eq!(conditions::get(&mr, "Ready").unwrap().status, "False");
    assert!(cloud.live().is_empty());

    // Point it at something that exists (made by someone else): it is observed, not created.
    runtime.kube.create(&thing_kind(), &thing("maker", "default", json!(["*"]))).await.unwrap();
    let maker = wait_object(&runtime, &thing_kind(), None, "maker", "the other thing", ready_and_synced).await;
    let id = object::annotation(&maker, "crossplane.io/external-name").unwrap().to_string();
    runtime.kube.merge_patch(&thing_kind(), None, "watcher", &json!({"metadata": {"annotations": {"crossplane.io/external-name": id}}})).await.unwrap();
    let watcher = wait_object(&runtime, &thing_kind(), None, "watcher", "observing the existing thing", ready_and_synced).await;
    assert_eq!(cloud.creates_of(object::uid(&watcher).unwrap()), 0);
    assert_eq!(cloud.live().len(), 1);
    server.stop().await;
}

#[tokio::test]
async fn a_lost_create_response_is_settled_by_lookup_without_a_second_create() {
    let (server, runtime) = start().await;
    let _provider = install(&runtime, &FakeCloudProvider::default(), PACKAGE).await;
    let cloud = FakeCloud::start(Duration::from_millis(200)).await.unwrap();
    config(&runtime, "default", &cloud, true, false).await;
    cloud.drop_next_create_response();
    runtime.kube.create(&thing_kind(), &thing("lost", "default", json!(["Observe", "Create", "Update", "Delete"]))).await.unwrap();
    let mr = wait_object(&runtime, &thing_kind(), None, "lost", "Ready and Synced", ready_and_synced).await;
    let uid = object::uid(&mr).unwrap();
    assert_eq!(cloud.creates_of(uid), 1);
    assert_eq!(object::annotation(&mr, "crossplane.io/external-name"), cloud.things_of(uid)[0]["id"].as_str());
    server.stop().await;
}

#[tokio::test]
async fn without_lookup_a_lost_create_fails_closed_until_told_the_identifier() {
    let (server, runtime) = start().await;
    let _provider = install(&runtime, &FakeCloudProvider::default(), PACKAGE).await;
    let cloud = FakeCloud::start(Duration::ZERO).await.unwrap();
    cloud.set_lookup(false);
    config(&runtime, "blind", &cloud, false, false).await;
    cloud.drop_next_create_response();
    runtime.kube.create(&thing_kind(), &thing("blind", "blind", json!(["*"]))).await.unwrap();
    let mr = wait_object(&runtime, &thing_kind(), None, "blind", "failing closed", |o| {
        conditions::get(o, "Synced").is_some_and(|c| c.status == "False" && c.message == CREATION_RESULT_UNKNOWN)
    })
    .await;
    assert_eq!(conditions::get(&mr, "Ready").unwrap().reason, "Creating");
    let uid = object::uid(&mr).unwrap().to_string();
    // It stays closed: no second create, however long we wait.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(cloud.creates_of(&uid), 1);
    wait_for("the warning event", async || {
        events_of(&runtime, &mr)
            .await
            .iter()
            .any(|(t, r, m)| t == "Warning" && r == "CannotInitializeManagedResource" && m == CREATION_RESULT_UNKNOWN)
            .then_some(())
    })
    .await;

    // A person finds the identifier and says so: the resource is adopted, nothing created.
    let id = cloud.things_of(&uid)[0]["id"].as_str().unwrap().to_string();
    runtime.kube.merge_patch(&thing_kind(), None, "blind", &json!({"metadata": {"annotations": {"crossplane.io/external-name": id}}})).await.unwrap();
    wait_object(&runtime, &thing_kind(), None, "blind", "Ready after adoption", ready_and_synced).await;
    assert_eq!(cloud.creates_of(&uid), 1);
    assert_eq!(cloud.live().len(), 1);
    server.stop().await;
}

#[tokio::test]
async fn deterministic_names_create_under_the_resource_name() {
    let (server, runtime) = start().await;
    let _provider = install(&runtime, &FakeCloudProvider::default(), PACKAGE).await;
    let cloud = FakeCloud::start(Duration::ZERO).await.unwrap();
    config(&runtime, "named", &cloud, false, true).await;
    runtime.kube.create(&thing_kind(), &thing("alice", "named", json!(["*"]))).await.unwrap();
    let mr = wait_object(&runtime, &thing_kind(), None, "alice", "Ready", ready_and_synced).await;
    assert_eq!(object::annotation(&mr, "crossplane.io/external-name"), Some("alice"));
    assert_eq!(cloud.live()[0]["id"], "alice");
    server.stop().await;
}

#[tokio::test]
async fn deletes_name_what_blocks_them_and_orphans_stay() {
    let (server, runtime) = start().await;
    let _provider = install(&runtime, &FakeCloudProvider::default(), PACKAGE).await;
    let cloud = FakeCloud::start(Duration::ZERO).await.unwrap();
    config(&runtime, "default", &cloud, true, false).await;
    runtime.kube.create(&thing_kind(), &thing("doomed", "default", json!(["*"]))).await.unwrap();
    let mut kept = thing("kept", "default", json!(["*"]));
    kept["spec"]["deletionPolicy"] = json!("Orphan");
    runtime.kube.create(&thing_kind(), &kept).await.unwrap();
    wait_object(&runtime, &thing_kind(), None, "doomed", "Ready", ready_and_synced).await;
    wait_object(&runtime, &thing_kind(), None, "kept", "Ready", ready_and_synced).await;
    assert_eq!(cloud.live().len(), 2);

    cloud.fail_deletes(Some("permission denied"));
    runtime.kube.delete(&thing_kind(), None, "doomed", &Default::default()).await.unwrap();
    let blocked = wait_object(&runtime, &thing_kind(), None, "doomed", "the blocked delete reported", |o| {
        conditions::get(o, "Synced").is_some_and(|c| c.message == "delete failed: permission denied")
    })
    .await;
    let ready = conditions::get(&blocked, "Ready").unwrap();
    assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("False", "Deleting"));
    assert_eq!(ready.message, "cannot delete external resource: permission denied");
    cloud.fail_deletes(None);
    wait_for("the resource to go", async || runtime.kube.get(&thing_kind(), None, "doomed").await.unwrap().is_none().then_some(())).await;

    runtime.kube.delete(&thing_kind(), None, "kept", &Default::default()).await.unwrap();
    wait_for("the orphan to go", async || runtime.kube.get(&thing_kind(), None, "kept").await.unwrap().is_none().then_some(())).await;
    let live = cloud.live();
    assert_eq!(live.len(), 1, "{live:?}");
    server.stop().await;
}

#[tokio::test]
async fn namespaced_things_track_provider_config_usage() {
    let (server, runtime) = start().await;
    let _provider = install(&runtime, &FakeCloudProvider::default(), PACKAGE).await;
    let cloud = FakeCloud::start(Duration::ZERO).await.unwrap();
    let pc_kind = Kind::new("fakecloud.m.oxplane.io", "v1alpha1", "ProviderConfig", "providerconfigs", true);
    let kind = Kind::new("fakecloud.m.oxplane.io", "v1alpha1", "FakeThing", "fakethings", true);
    let usage_kind = Kind::new("fakecloud.m.oxplane.io", "v1alpha1", "ProviderConfigUsage", "providerconfigusages", true);
    runtime
        .kube
        .create(&pc_kind, &json!({"apiVersion": "fakecloud.m.oxplane.io/v1alpha1", "kind": "ProviderConfig",
            "metadata": {"name": "local", "namespace": "default"}, "spec": {"endpoint": cloud.endpoint()}}))
        .await
        .unwrap();
    let thing = json!({"apiVersion": "fakecloud.m.oxplane.io/v1alpha1", "kind": "FakeThing",
        "metadata": {"name": "n1", "namespace": "default"},
        "spec": {"forProvider": {"size": 1}, "providerConfigRef": {"kind": "ProviderConfig", "name": "local"},
                 "writeConnectionSecretToRef": {"name": "n1-conn"}}});
    runtime.kube.create(&kind, &thing).await.unwrap();
    let mr = wait_object(&runtime, &kind, Some("default"), "n1", "Ready", ready_and_synced).await;
    let usage = runtime.kube.get(&usage_kind, Some("default"), object::uid(&mr).unwrap()).await.unwrap().unwrap();
    assert_eq!(object::label(&usage, "crossplane.io/provider-config"), Some("local"));
    assert_eq!(object::label(&usage, "crossplane.io/provider-config-kind"), Some("ProviderConfig"));
    assert_eq!(usage["resourceRef"]["name"], "n1");
    let pc = wait_object(&runtime, &pc_kind, Some("default"), "local", "one user counted", |o| o["status"]["users"] == 1).await;
    assert!(object::has_finalizer(&pc, "in-use.crossplane.io"));
    let secret = runtime.kube.get(&oxplane_runtime::managed::connection::secret_kind(), Some("default"), "n1-conn").await.unwrap().unwrap();
    assert_eq!(oxplane_runtime::managed::connection::decode_data(&secret)["endpoint"], cloud.endpoint().into_bytes());

    // A config in use cannot go; once its user is gone, it does.
    runtime.kube.delete(&pc_kind, Some("default"), "local", &Default::default()).await.unwrap();
    wait_object(&runtime, &pc_kind, Some("default"), "local", "deletion blocked", |o| {
        conditions::get(o, "Terminating").is_some_and(|c| c.status == "True" && c.reason == "InUse")
    })
    .await;
    runtime.kube.delete(&kind, Some("default"), "n1", &Default::default()).await.unwrap();
    wait_for("the config to go", async || runtime.kube.get(&pc_kind, Some("default"), "local").await.unwrap().is_none().then_some(())).await;
    assert!(cloud.live().is_empty());
    server.stop().await;
}
