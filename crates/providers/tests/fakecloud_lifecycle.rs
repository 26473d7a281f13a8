//! The managed-resource runtime's lifecycle against the local fake cloud: `crossplane.io/paused`
//! (nothing observed, created, updated or deleted while paused; everything resumes after),
//! the poll interval (a change made in the cloud behind the control plane's back is noticed
//! with no watch event: the provider's interval and the `crossplane.io/poll-interval`
//! annotation), a create the cloud refuses (`external-create-failed`, then one create once it
//! accepts), and ClusterProviderConfig / cluster-scoped ProviderConfig usage tracking.

use crate::support;

use std::time::Duration;

use oxplane_providers::fakecloud::FakeCloudProvider;
use oxplane_providers::fakecloud::cloud::FakeCloud;
use oxplane_runtime::Runtime;
use oxplane_runtime::conditions;
use oxplane_runtime::kinds::Kind;
use oxplane_runtime::managed::annotations;
use oxplane_runtime::managed::reconciler::CREATION_RESULT_UNKNOWN;
use oxplane_runtime::object;
use serde_json::{Value, json};
use support::{events_of, install, start, wait_for, wait_object};

const PACKAGE: &str = "xpkg.oxplane.io/oxplane/provider-fakecloud:v0.1.0";
const PAUSED_MESSAGE: &str = "Reconciliation is paused either through the `spec.managementPolicies` or the pause annotation";

fn thing_kind() -> Kind {
    Kind::new("fakecloud.oxplane.io", "v1alpha1", "FakeThing", "fakethings", false)
}

fn config_kind() -> Kind {
    Kind::new("fakecloud.oxplane.io", "v1alpha1", "ProviderConfig", "providerconfigs", false)
}

async fn config(runtime: &Runtime, cloud: &FakeCloud, lookup: bool) {
    let config = json!({
        "apiVersion": "fakecloud.oxplane.io/v1alpha1", "kind": "ProviderConfig",
        "metadata": {"name": "default"},
        "spec": {"endpoint": cloud.endpoint(), "lookup": lookup}
    });
    runtime.kube.create(&config_kind(), &config).await.unwrap();
}

fn thing(name: &str, policies: Value) -> Value {
    json!({
        "apiVersion": "fakecloud.oxplane.io/v1alpha1", "kind": "FakeThing",
        "metadata": {"name": name},
        "spec": {"forProvider": {"size": 2}, "managementPolicies": policies}
    })
}

fn ready_and_synced(o: &Value) -> bool {
    conditions::is_true(o, "Ready") && conditions::is_true(o, "Synced")
}

/// `Synced=False/ReconcilePaused`, computed for the object's current generation.
fn paused_at_current_generation(o: &Value) -> bool {
    conditions::get(o, "Synced").is_some_and(|c| {
        c.status == "False" && c.reason == "ReconcilePaused" && c.observed_generation == object::generation(o)
    })
}

async fn annotate(runtime: &Runtime, name: &str, key: &str, value: Value) {
    let patch = json!({"metadata": {"annotations": {key: value}}});
    runtime.kube.merge_patch(&thing_kind(), None, name, &patch).await.unwrap();
}

async fn has_event(runtime: &Runtime, object: &Value, type_: &str, reason: &str) -> bool {
    events_of(runtime, object).await.iter().any(|(t, r, _)| t == type_ && r == reason)
}

/// Events are recorded in the background: waits for one to show up.
async fn wait_event(runtime: &Runtime, object: &Value, type_: &str, reason: &str) {
    wait_for(&format!("a {type_} {reason} event"), async || has_event(runtime, object, type_, reason).await.then_some(())).await;
}

#[tokio::test]
async fn paused_resources_are_left_alone_until_unpaused() {
    let (server, runtime) = start().await;
    // A short poll: were anything still polled while paused, it would show within seconds.
    let _provider = install(&runtime, &FakeCloudProvider { poll_interval: Duration::from_secs(1) }, PACKAGE).await;
    let cloud = FakeCloud::start(Duration::ZERO).await.unwrap();
    config(&runtime, &cloud, true).await;

    // Paused from birth: not even observed, so nothing is created and no finalizer is added.
    let mut t = thing("p", json!(["*"]));
    t["metadata"]["annotations"] = json!({annotations::PAUSED: "true"});
    runtime.kube.create(&thing_kind(), &t).await.unwrap();
    let mr = wait_object(&runtime, &thing_kind(), None, "p", "paused", paused_at_current_generation).await;
    assert_eq!(conditions::get(&mr, "Synced").unwrap().reason, "ReconcilePaused");
    wait_for("the paused event", async || {
        events_of(&runtime, &mr).await.iter().any(|(t, r, m)| t == "Normal" && r == "ReconciliationPaused" && m == PAUSED_MESSAGE).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mr = runtime.kube.get(&thing_kind(), None, "p").await.unwrap().unwrap();
    let uid = object::uid(&mr).unwrap().to_string();
    assert!(cloud.live().is_empty());
    assert_eq!(cloud.creates_of(&uid), 0);
    assert!(object::finalizers(&mr).is_empty(), "{mr}");
    assert_eq!(object::annotation(&mr, annotations::CREATE_PENDING), None);
    assert!(conditions::get(&mr, "Ready").is_none(), "{mr}");
    // `crossplane.io/paused` pauses only with "true".
    annotate(&runtime, "p", annotations::PAUSED, json!("false")).await;
    let mr = wait_object(&runtime, &thing_kind(), None, "p", "created once unpaused", ready_and_synced).await;
    let id = object::annotation(&mr, annotations::EXTERNAL_NAME).unwrap().to_string();
    assert_eq!(cloud.creates_of(&uid), 1);
    let mr = wait_object(&runtime, &thing_kind(), None, "p", "late initialization", |o| o["spec"]["forProvider"]["color"] == "blue").await;

    // Paused again: a spec change is not applied, a change in the cloud is not observed.
    annotate(&runtime, "p", annotations::PAUSED, json!("true")).await;
    wait_object(&runtime, &thing_kind(), None, "p", "paused again", paused_at_current_generation).await;
    let at_provider = mr["status"]["atProvider"].clone();
    runtime.kube.merge_patch(&thing_kind(), None, "p", &json!({"spec": {"forProvider": {"size": 5}}})).await.unwrap();
    assert!(cloud.set_spec(&id, json!({"size": 2, "color": "red"})));
    // The spec change was seen (the condition carries its generation) and nothing was done.
    wait_object(&runtime, &thing_kind(), None, "p", "the new generation seen while paused", |o| {
        object::generation(o) > object::generation(&mr) && paused_at_current_generation(o)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(cloud.thing(&id).unwrap()["spec"], json!({"size": 2, "color": "red"}), "updated while paused");
    let mr = runtime.kube.get(&thing_kind(), None, "p").await.unwrap().unwrap();
    assert_eq!(mr["status"]["atProvider"], at_provider, "observed while paused");
    assert!(!has_event(&runtime, &mr, "Normal", "UpdatedExternalResource").await);

    // Unpaused: the drift is corrected (size from the spec, color back to the late-initialised one).
    annotate(&runtime, "p", annotations::PAUSED, Value::Null).await;
    wait_for("the update once unpaused", async || (cloud.thing(&id)?["spec"] == json!({"size": 5, "color": "blue"})).then_some(())).await;
    let mr = wait_object(&runtime, &thing_kind(), None, "p", "Synced again", |o| {
        ready_and_synced(o) && conditions::get(o, "Synced").unwrap().observed_generation == object::generation(o)
    })
    .await;
    wait_event(&runtime, &mr, "Normal", "UpdatedExternalResource").await;

    // Deleted while paused: the finalizer holds it and the thing stays, until unpaused.
    annotate(&runtime, "p", annotations::PAUSED, json!("true")).await;
    wait_object(&runtime, &thing_kind(), None, "p", "paused before the delete", paused_at_current_generation).await;
    runtime.kube.delete(&thing_kind(), None, "p", &Default::default()).await.unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mr = runtime.kube.get(&thing_kind(), None, "p").await.unwrap().expect("a paused resource is not finalized");
    assert!(object::is_deleting(&mr));
    assert!(cloud.thing(&id).is_some(), "deleted while paused");
    annotate(&runtime, "p", annotations::PAUSED, Value::Null).await;
    wait_for("the resource to go once unpaused", async || runtime.kube.get(&thing_kind(), None, "p").await.unwrap().is_none().then_some(())).await;
    assert!(cloud.live().is_empty());
    assert_eq!(cloud.creates_of(&uid), 1);
    server.stop().await;
}

#[tokio::test]
async fn an_external_change_is_noticed_at_the_provider_poll_interval() {
    let (server, runtime) = start().await;
    let _provider = install(&runtime, &FakeCloudProvider { poll_interval: Duration::from_secs(1) }, PACKAGE).await;
    let cloud = FakeCloud::start(Duration::ZERO).await.unwrap();
    config(&runtime, &cloud, true).await;
    runtime.kube.create(&thing_kind(), &thing("managed", json!(["*"]))).await.unwrap();
    let foreign = cloud.insert(json!({"size": 1, "color": "green"}));
    let mut watched = thing("watched", json!(["Observe"]));
    watched["metadata"]["annotations"] = json!({annotations::EXTERNAL_NAME: foreign});
    runtime.kube.create(&thing_kind(), &watched).await.unwrap();
    let managed = wait_object(&runtime, &thing_kind(), None, "managed", "Ready", |o| ready_and_synced(o) && o["spec"]["forProvider"]["color"] == "blue").await;
    let watched = wait_object(&runtime, &thing_kind(), None, "watched", "Ready", ready_and_synced).await;
    assert_eq!(watched["status"]["atProvider"]["color"], "green");
    let id = object::annotation(&managed, annotations::EXTERNAL_NAME).unwrap().to_string();

    // Changes in the cloud only: no write to either resource, so no watch event wakes them.
    assert!(cloud.set_spec(&id, json!({"size": 9, "color": "blue"})));
    assert!(cloud.set_spec(&foreign, json!({"size": 1, "color": "red"})));
    wait_for("the drift to be corrected", async || (cloud.thing(&id)?["spec"]["size"] == 2).then_some(())).await;
    wait_object(&runtime, &thing_kind(), None, "watched", "the change observed", |o| o["status"]["atProvider"]["color"] == "red").await;
    let managed_after = runtime.kube.get(&thing_kind(), None, "managed").await.unwrap().unwrap();
    assert_eq!(object::generation(&managed_after), object::generation(&managed), "nothing changed the resource's spec");
    wait_event(&runtime, &managed_after, "Normal", "UpdatedExternalResource").await;
    // Observe-only: noticed, never written back.
    assert_eq!(cloud.thing(&foreign).unwrap()["spec"], json!({"size": 1, "color": "red"}));
    server.stop().await;
}

#[tokio::test]
async fn the_poll_interval_annotation_overrides_a_long_provider_interval() {
    let (server, runtime) = start().await;
    let _provider = install(&runtime, &FakeCloudProvider { poll_interval: Duration::from_secs(3600) }, PACKAGE).await;
    let cloud = FakeCloud::start(Duration::ZERO).await.unwrap();
    config(&runtime, &cloud, true).await;
    let mut ids = Vec::new();
    for (name, interval) in [("quick", Some("1s")), ("slow", None)] {
        let id = cloud.insert(json!({"size": 1, "color": "green"}));
        let mut t = thing(name, json!(["Observe"]));
        t["metadata"]["annotations"] = json!({annotations::EXTERNAL_NAME: id});
        if let Some(interval) = interval {
            t["metadata"]["annotations"][annotations::POLL_INTERVAL] = json!(interval);
        }
        runtime.kube.create(&thing_kind(), &t).await.unwrap();
        wait_object(&runtime, &thing_kind(), None, name, "Ready", ready_and_synced).await;
        ids.push(id);
    }
    // Let the reconciles the first writes woke (finalizer, annotations) finish first.
    tokio::time::sleep(Duration::from_secs(1)).await;
    for id in &ids {
        assert!(cloud.set_spec(id, json!({"size": 1, "color": "red"})));
    }
    wait_object(&runtime, &thing_kind(), None, "quick", "the change observed", |o| o["status"]["atProvider"]["color"] == "red").await;
    // The same change, a few of the short intervals later, is still unseen at the long one.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let slow = runtime.kube.get(&thing_kind(), None, "slow").await.unwrap().unwrap();
    assert_eq!(slow["status"]["atProvider"]["color"], "green");
    server.stop().await;
}

#[tokio::test]
async fn a_refused_create_is_recorded_and_a_later_create_proceeds_once() {
    let (server, runtime) = start().await;
    let _provider = install(&runtime, &FakeCloudProvider::default(), PACKAGE).await;
    let cloud = FakeCloud::start(Duration::from_millis(200)).await.unwrap();
    config(&runtime, &cloud, true).await;
    cloud.fail_creates(Some("quota exceeded"));
    runtime.kube.create(&thing_kind(), &thing("refused", json!(["*"]))).await.unwrap();
    let mr = wait_object(&runtime, &thing_kind(), None, "refused", "the refusal reported", |o| {
        conditions::get(o, "Synced").is_some_and(|c| c.status == "False" && c.message == "create failed: quota exceeded")
    })
    .await;
    let ready = conditions::get(&mr, "Ready").unwrap();
    assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("False", "Creating"));
    let mr = wait_object(&runtime, &thing_kind(), None, "refused", "the failure recorded", |o| {
        object::annotation(o, annotations::CREATE_FAILED).is_some()
    })
    .await;
    assert!(object::annotation(&mr, annotations::CREATE_PENDING).is_some());
    assert_eq!(object::annotation(&mr, annotations::CREATE_SUCCEEDED), None);
    assert_eq!(object::annotation(&mr, annotations::EXTERNAL_NAME), None);
    wait_for("the warning event", async || {
        events_of(&runtime, &mr)
            .await
            .iter()
            .any(|(t, r, m)| t == "Warning" && r == "CannotCreateExternalResource" && m == "create failed: quota exceeded")
            .then_some(())
    })
    .await;
    let uid = object::uid(&mr).unwrap().to_string();
    assert!(cloud.live().is_empty());

    // The cloud accepts again: the next attempt creates, once.
    cloud.fail_creates(None);
    let mr = wait_object(&runtime, &thing_kind(), None, "refused", "Ready", ready_and_synced).await;
    let held = cloud.things_of(&uid);
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(cloud.creates_of(&uid), 1);
    assert_eq!(object::annotation(&mr, annotations::EXTERNAL_NAME), held[0]["id"].as_str());
    assert!(object::annotation(&mr, annotations::CREATE_SUCCEEDED).is_some());
    assert!(!annotations::create_outcome_unknown(&mr));
    wait_event(&runtime, &mr, "Normal", "CreatedExternalResource").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(cloud.creates_of(&uid), 1);
    assert_eq!(cloud.live().len(), 1);
    server.stop().await;
}

/// The retry after a refused create starts at once (its own annotation write wakes it), so its
/// intent is written within the same second as the failure. Were the two timestamps equal, the
/// retry's intent would look settled by the old failure, and a lost response would be
/// followed by a second create on a cloud that cannot look things up.
#[tokio::test]
async fn a_lost_create_right_after_a_refused_one_still_fails_closed() {
    let (server, runtime) = start().await;
    let _provider = install(&runtime, &FakeCloudProvider::default(), PACKAGE).await;
    let cloud = FakeCloud::start(Duration::ZERO).await.unwrap();
    cloud.set_lookup(false);
    config(&runtime, &cloud, false).await;
    cloud.fail_next_create("quota exceeded");
    cloud.drop_next_create_response();
    runtime.kube.create(&thing_kind(), &thing("unlucky", json!(["*"]))).await.unwrap();
    let failed_closed = |o: &Value| conditions::get(o, "Synced").is_some_and(|c| c.status == "False" && c.message == CREATION_RESULT_UNKNOWN);
    // Settled either way: failed closed (right), or created again and Ready (wrong).
    let mr = wait_object(&runtime, &thing_kind(), None, "unlucky", "the lost create to settle", |o| failed_closed(o) || ready_and_synced(o)).await;
    let uid = object::uid(&mr).unwrap().to_string();
    assert_eq!(cloud.creates_of(&uid), 1, "a create of unknown outcome was repeated: {:?}", mr["metadata"]["annotations"]);
    assert!(failed_closed(&mr), "{mr}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(cloud.creates_of(&uid), 1, "a create of unknown outcome was repeated");
    assert_eq!(cloud.live().len(), 1);
    server.stop().await;
}

#[tokio::test]
async fn cluster_provider_configs_track_usage_and_block_deletion_while_used() {
    let (server, runtime) = start().await;
    let _provider = install(&runtime, &FakeCloudProvider::default(), PACKAGE).await;
    let cloud = FakeCloud::start(Duration::ZERO).await.unwrap();
    let cpc_kind = Kind::new("fakecloud.m.oxplane.io", "v1alpha1", "ClusterProviderConfig", "clusterproviderconfigs", false);
    let kind = Kind::new("fakecloud.m.oxplane.io", "v1alpha1", "FakeThing", "fakethings", true);
    let usage_kind = Kind::new("fakecloud.m.oxplane.io", "v1alpha1", "ProviderConfigUsage", "providerconfigusages", true);
    let namespace_kind = Kind::new("", "v1", "Namespace", "namespaces", false);
    runtime.kube.create(&namespace_kind, &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-b"}})).await.unwrap();
    runtime
        .kube
        .create(&cpc_kind, &json!({"apiVersion": "fakecloud.m.oxplane.io/v1alpha1", "kind": "ClusterProviderConfig",
            "metadata": {"name": "shared"}, "spec": {"endpoint": cloud.endpoint()}}))
        .await
        .unwrap();
    // Users in two namespaces: a cluster-scoped config serves them all.
    let users = ["default", "team-b"];
    for namespace in users {
        let thing = json!({"apiVersion": "fakecloud.m.oxplane.io/v1alpha1", "kind": "FakeThing",
            "metadata": {"name": "user", "namespace": namespace},
            "spec": {"forProvider": {"size": 1}, "providerConfigRef": {"kind": "ClusterProviderConfig", "name": "shared"}}});
        runtime.kube.create(&kind, &thing).await.unwrap();
    }
    for namespace in users {
        let mr = wait_object(&runtime, &kind, Some(namespace), "user", "Ready", ready_and_synced).await;
        let usage = runtime.kube.get(&usage_kind, Some(namespace), object::uid(&mr).unwrap()).await.unwrap().expect("a usage per user");
        assert_eq!(object::label(&usage, "crossplane.io/provider-config"), Some("shared"));
        assert_eq!(object::label(&usage, "crossplane.io/provider-config-kind"), Some("ClusterProviderConfig"));
        assert_eq!(usage["providerConfigRef"], json!({"kind": "ClusterProviderConfig", "name": "shared"}));
        assert_eq!(usage["resourceRef"]["name"], "user");
        assert_eq!(usage["resourceRef"]["kind"], "FakeThing");
        let owner = &usage["metadata"]["ownerReferences"][0];
        assert_eq!((owner["uid"].as_str(), owner["controller"].as_bool()), (object::uid(&mr), Some(true)));
    }
    let cpc = wait_object(&runtime, &cpc_kind, None, "shared", "both users counted", |o| o["status"]["users"] == 2).await;
    assert!(object::has_finalizer(&cpc, "in-use.crossplane.io"));

    // Deleting a config in use is blocked, and says so, until its last user is gone.
    runtime.kube.delete(&cpc_kind, None, "shared", &Default::default()).await.unwrap();
    let cpc = wait_object(&runtime, &cpc_kind, None, "shared", "deletion blocked", |o| {
        conditions::get(o, "Terminating").is_some_and(|c| c.status == "True" && c.reason == "InUse")
    })
    .await;
    wait_for("the blocking event", async || {
        events_of(&runtime, &cpc)
            .await
            .iter()
            .any(|(t, r, m)| t == "Warning" && r == "UsageAccounting" && m == "Blocking deletion while usages still exist")
            .then_some(())
    })
    .await;
    runtime.kube.delete(&kind, Some("default"), "user", &Default::default()).await.unwrap();
    wait_object(&runtime, &cpc_kind, None, "shared", "one user left", |o| o["status"]["users"] == 1).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(runtime.kube.get(&cpc_kind, None, "shared").await.unwrap().is_some(), "a config with a user left went away");
    runtime.kube.delete(&kind, Some("team-b"), "user", &Default::default()).await.unwrap();
    wait_for("the config to go", async || runtime.kube.get(&cpc_kind, None, "shared").await.unwrap().is_none().then_some(())).await;
    assert!(cloud.live().is_empty());
    server.stop().await;
}

#[tokio::test]
async fn cluster_scoped_provider_configs_track_usage_and_block_deletion_while_used() {
    let (server, runtime) = start().await;
    let _provider = install(&runtime, &FakeCloudProvider::default(), PACKAGE).await;
    let cloud = FakeCloud::start(Duration::ZERO).await.unwrap();
    let usage_kind = Kind::new("fakecloud.oxplane.io", "v1alpha1", "ProviderConfigUsage", "providerconfigusages", false);
    config(&runtime, &cloud, true).await;
    // No providerConfigRef: the config named "default".
    runtime.kube.create(&thing_kind(), &thing("legacy", json!(["*"]))).await.unwrap();
    let mr = wait_object(&runtime, &thing_kind(), None, "legacy", "Ready", ready_and_synced).await;
    let usage = runtime.kube.get(&usage_kind, None, object::uid(&mr).unwrap()).await.unwrap().expect("a usage");
    assert_eq!(object::label(&usage, "crossplane.io/provider-config"), Some("default"));
    // Untyped: a legacy group has one config kind.
    assert_eq!(object::label(&usage, "crossplane.io/provider-config-kind"), None);
    assert_eq!(usage["providerConfigRef"], json!({"name": "default"}));
    assert_eq!(usage["resourceRef"]["name"], "legacy");
    let pc = wait_object(&runtime, &config_kind(), None, "default", "the user counted", |o| o["status"]["users"] == 1).await;
    assert!(object::has_finalizer(&pc, "in-use.crossplane.io"));

    runtime.kube.delete(&config_kind(), None, "default", &Default::default()).await.unwrap();
    wait_object(&runtime, &config_kind(), None, "default", "deletion blocked", |o| {
        conditions::get(o, "Terminating").is_some_and(|c| c.status == "True" && c.reason == "InUse")
    })
    .await;
    runtime.kube.delete(&thing_kind(), None, "legacy", &Default::default()).await.unwrap();
    wait_for("the config to go", async || runtime.kube.get(&config_kind(), None, "default").await.unwrap().is_none().then_some(())).await;
    wait_for("the usage to go", async || runtime.kube.get(&usage_kind, None, object::uid(&mr).unwrap()).await.unwrap().is_none().then_some(())).await;
    // The thing was deleted with the resource, while the config still stood to connect with.
    assert!(cloud.live().is_empty());
    server.stop().await;
}
