//! At most one external create per managed resource, proven with kill -9: the real `oxplane`
//! process is killed at every step of an asynchronous create (before the intent is saved,
//! after it, after the cloud committed the create but before its answer was read, after the
//! answer with the identifier was read, after the identifier was saved, before Ready is
//! written), once for each of nine managed resources — one per management-policy set that
//! includes Create, with and without LateInitialize — and restarted each time; and killed twice
//! in a row for one resource (a crash during the recovery from a crash). The fake cloud (random
//! identifiers, creates that take a while) then holds exactly one thing per resource, every
//! resource is Ready with the thing's identifier as its external name, and its spec (with
//! `initProvider`) is as applied but for what LateInitialize may fill.
//!
//! Variants: namespaced resources (the v2 `.m.` group) killed twice each keep the guarantee;
//! a cloud that cannot look things up by tag fails closed after a lost create and
//! recovers once told the identifier; names taken from the resource recover on their own;
//! Observe-only never creates, across restarts.

use crate::support;

use std::path::Path;
use std::time::{Duration, Instant};

use oxplane_providers::fakecloud::cloud::FakeCloud;
use oxplane_runtime::client::Kube;
use oxplane_runtime::conditions;
use oxplane_runtime::kinds::Kind;
use oxplane_runtime::managed::fault;
use oxplane_runtime::managed::reconciler::CREATION_RESULT_UNKNOWN;
use oxplane_runtime::object;
use serde_json::{Value, json};
use support::Server;

const CREATE_SETS: [&[&str]; 9] = [
    &["*"],
    &["Observe", "Create", "Update", "LateInitialize", "Delete"],
    &["Observe", "Create", "Update", "Delete"],
    &["Observe", "Create", "Update", "LateInitialize"],
    &["Observe", "Create", "Update"],
    &["Observe", "Create", "Delete", "LateInitialize"],
    &["Observe", "Create", "LateInitialize"],
    &["Observe", "Create", "Delete"],
    &["Observe", "Create"],
];

/// Cluster-scoped resources, or namespaced ones (the v2 `.m.` group) in this namespace.
const NAMESPACE: &str = "default";

fn group(namespaced: bool) -> &'static str {
    if namespaced { "fakecloud.m.oxplane.io" } else { "fakecloud.oxplane.io" }
}

/// The process, the cloud, and a runtime for talking to both.
struct Harness {
    rt: tokio::runtime::Runtime,
    cloud: FakeCloud,
    server: Server,
    state: tempfile::TempDir,
    /// FakeThings and their ProviderConfig are namespaced (in [`NAMESPACE`]).
    namespaced: bool,
}

impl Harness {
    /// `oxplane up` with provider-fakecloud, dying at `point` (comma-separated points: at each)
    /// once per resource.
    fn start(point: Option<&str>) -> Harness {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let cloud = rt.block_on(FakeCloud::start(Duration::from_millis(500))).unwrap();
        let state = tempfile::tempdir().unwrap();
        let mut server = Server::new(&["--provider", "provider-fakecloud"]);
        if let Some(point) = point {
            server.env_always(fault::FAULT_KILL_AT, point);
            server.env_always(fault::FAULT_STATE_DIR, state.path().to_str().unwrap());
        }
        server.spawn();
        let harness = Harness { rt, cloud, server, state, namespaced: false };
        harness.wait_provider();
        harness
    }

    fn thing_kind(&self) -> Kind {
        Kind::new(group(self.namespaced), "v1alpha1", "FakeThing", "fakethings", self.namespaced)
    }

    fn config_kind(&self) -> Kind {
        Kind::new(group(self.namespaced), "v1alpha1", "ProviderConfig", "providerconfigs", self.namespaced)
    }

    /// The `metadata` of a new object called `name`.
    fn metadata(&self, name: &str) -> Value {
        if self.namespaced { json!({"name": name, "namespace": NAMESPACE}) } else { json!({"name": name}) }
    }

    fn namespace(&self) -> Option<&'static str> {
        self.namespaced.then_some(NAMESPACE)
    }

    fn kube(&self) -> Kube {
        Kube::new(self.rt.block_on(self.server.client()))
    }

    fn wait_provider(&self) {
        let kube = self.kube();
        let provider = Kind::new("pkg.crossplane.io", "v1", "Provider", "providers", false);
        self.eventually("provider-fakecloud to be healthy", Duration::from_secs(60), |_| {
            let p = self.rt.block_on(kube.get(&provider, None, "provider-fakecloud")).ok().flatten();
            p.is_some_and(|p| conditions::is_true(&p, "Healthy"))
        });
    }

    fn config(&self, lookup: bool, deterministic: bool) {
        let config = json!({
            "apiVersion": format!("{}/v1alpha1", group(self.namespaced)), "kind": "ProviderConfig",
            "metadata": self.metadata("default"),
            "spec": {"endpoint": self.cloud.endpoint(), "lookup": lookup, "deterministicNames": deterministic}
        });
        self.rt.block_on(self.kube().create(&self.config_kind(), &config)).unwrap();
    }

    fn create(&mut self, name: &str, policies: &[&str]) {
        let mut thing = json!({
            "apiVersion": format!("{}/v1alpha1", group(self.namespaced)), "kind": "FakeThing",
            "metadata": self.metadata(name),
            "spec": {"forProvider": for_provider(), "initProvider": init_provider(), "managementPolicies": policies}
        });
        if self.namespaced {
            thing["spec"]["providerConfigRef"] = json!({"kind": "ProviderConfig", "name": "default"});
        }
        // The process may die under us: retry on a fresh connection until the create lands.
        self.eventually_restarting("the create to be accepted", Duration::from_secs(60), |h| {
            match h.rt.block_on(h.kube().create(&h.thing_kind(), &thing)) {
                Ok(_) => true,
                Err(error) => error.is_already_exists(),
            }
        });
    }

    fn get(&self, name: &str) -> Option<Value> {
        let client = self.rt.block_on(async { tokio::time::timeout(Duration::from_secs(5), self.server.client()).await }).ok()?;
        self.rt.block_on(Kube::new(client).get(&self.thing_kind(), self.namespace(), name)).ok().flatten()
    }

    /// Polls `check`, restarting the process whenever it died, until `check` holds.
    fn eventually(&self, what: &str, limit: Duration, mut check: impl FnMut(&Harness) -> bool) {
        let deadline = Instant::now() + limit;
        loop {
            if check(self) {
                return;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Like `eventually`, but brings the process back whenever it killed itself.
    fn eventually_restarting(&mut self, what: &str, limit: Duration, check: impl Fn(&Harness) -> bool) {
        let deadline = Instant::now() + limit;
        loop {
            if self.server.exited() {
                self.server.spawn();
            }
            if check(self) {
                return;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what} ({} starts)", self.server.starts());
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

fn ready_and_synced(thing: &Value) -> bool {
    conditions::is_true(thing, "Ready") && conditions::is_true(thing, "Synced")
}

/// Every resource has exactly one external thing, created once, named by its external name.
fn assert_exactly_one_each(harness: &Harness, names: &[String]) {
    for name in names {
        let thing = harness.get(name).unwrap();
        let uid = object::uid(&thing).unwrap();
        let held = harness.cloud.things_of(uid);
        assert_eq!(held.len(), 1, "{name}: {held:?}");
        assert_eq!(harness.cloud.creates_of(uid), 1, "{name}");
        assert_eq!(object::annotation(&thing, "crossplane.io/external-name"), held[0]["id"].as_str(), "{name}");
    }
    assert_eq!(harness.cloud.live().len(), names.len());
}

/// The spec's `forProvider` as applied.
fn for_provider() -> Value {
    json!({"size": 1})
}

/// The spec's `initProvider` as applied: used by the create only, never late-initialised over.
fn init_provider() -> Value {
    json!({"color": "green", "tags": {"team": "a"}})
}

/// The spec is as applied, whatever crashes happened: `initProvider` untouched, `forProvider`
/// unchanged but for the colour LateInitialize copies from the thing (which got it from
/// `initProvider`), and only where the set has LateInitialize.
fn assert_spec_kept(harness: &Harness, name: &str, set: &[&str]) {
    let thing = harness.get(name).unwrap();
    let spec = &thing["spec"];
    assert_eq!(spec["initProvider"], init_provider(), "{name} {set:?}");
    assert_eq!(spec["managementPolicies"], json!(set), "{name}");
    let late_init = set.iter().any(|a| *a == "*" || *a == "LateInitialize");
    let mut expected = for_provider();
    if late_init {
        expected["color"] = json!("green");
    }
    assert_eq!(spec["forProvider"], expected, "{name} {set:?}");
    let held = harness.cloud.things_of(object::uid(&thing).unwrap());
    assert_eq!(held[0]["spec"]["color"], "green", "{name}: initProvider reached the create");
    assert_eq!(held[0]["tags"]["team"], "a", "{name}: initProvider reached the create");
}

fn markers(dir: &Path) -> usize {
    std::fs::read_dir(dir).unwrap().count()
}

/// Kills the process at `point` once for each of the nine resources (see [`crash_at_each`]).
fn crash_at(point: &str, one_at_a_time: bool) {
    crash_at_each(&[point], one_at_a_time, &CREATE_SETS);
}

/// [`crash_at_each`] for cluster-scoped resources.
fn crash_at_each(points: &[&str], one_at_a_time: bool, sets: &[&[&str]]) {
    crash_at_each_scoped(false, points, one_at_a_time, sets);
}

/// Kills the process at each of `points` once for each resource, one resource per set. With
/// `one_at_a_time`, each resource is created once the previous one is Ready, so no other
/// resource's death can carry it past a point (needed for points after the external create,
/// which a resource whose create was interrupted earlier settles by lookup instead of passing).
fn crash_at_each_scoped(namespaced: bool, points: &[&str], one_at_a_time: bool, sets: &[&[&str]]) {
    let mut harness = Harness::start(Some(&points.join(",")));
    harness.namespaced = namespaced;
    harness.config(true, false);
    let names: Vec<String> = (0..sets.len()).map(|i| format!("t{i}")).collect();
    for (name, set) in names.iter().zip(sets) {
        harness.create(name, set);
        if one_at_a_time {
            harness.eventually_restarting("the resource to be Ready", Duration::from_secs(120), |h| h.get(name).is_some_and(|t| ready_and_synced(&t)));
        }
    }
    let all_ready = |h: &Harness| names.iter().all(|n| h.get(n).is_some_and(|t| ready_and_synced(&t)));
    harness.eventually_restarting("every resource to be Ready", Duration::from_secs(240), all_ready);
    // Each resource met every point, and the process died there for it (two resources
    // reaching a point at the same moment share a death).
    assert_eq!(markers(harness.state.path()), names.len() * points.len(), "each fault point fired once per resource");
    assert!(harness.server.starts() > points.len(), "{} starts", harness.server.starts());
    assert_exactly_one_each(&harness, &names);
    for (name, set) in names.iter().zip(sets) {
        assert_spec_kept(&harness, name, set);
    }

    // And nothing more happens after one more (clean) restart.
    harness.server.kill_and_restart();
    harness.eventually("the resources to be reconciled again", Duration::from_secs(60), all_ready);
    std::thread::sleep(Duration::from_secs(2));
    assert_exactly_one_each(&harness, &names);
    for (name, set) in names.iter().zip(sets) {
        assert_spec_kept(&harness, name, set);
    }
}

#[test]
fn killed_before_the_create_intent_is_saved() {
    crash_at(fault::BEFORE_CREATE_INTENT, false);
}

#[test]
fn killed_after_the_create_intent_is_saved() {
    // Every resource passes this point before anything reaches the cloud: all at once.
    crash_at(fault::AFTER_CREATE_INTENT, false);
}

#[test]
fn killed_after_the_cloud_committed_before_its_answer_was_read() {
    crash_at(fault::CREATE_RESPONSE_UNREAD, true);
}

#[test]
fn killed_after_the_cloud_answered_before_the_identifier_is_saved() {
    crash_at(fault::AFTER_EXTERNAL_CREATE, true);
}

#[test]
fn killed_after_the_identifier_is_saved() {
    crash_at(fault::AFTER_CREATE_SAVED, true);
}

#[test]
fn killed_before_ready_is_written() {
    crash_at(fault::BEFORE_READY_WRITE, true);
}

/// With and without LateInitialize: the sets a double crash runs for.
const DOUBLE_CRASH_SETS: [&[&str]; 2] = [&["*"], &["Observe", "Create", "Update", "Delete"]];

#[test]
fn killed_after_the_intent_and_again_after_the_identifier_came_back() {
    // The first death leaves an intent of unknown outcome: the lookup finds nothing, the
    // creation grace passes, the create is made again, and the process dies once more with
    // the identifier in hand but unsaved.
    crash_at_each(&[fault::AFTER_CREATE_INTENT, fault::AFTER_EXTERNAL_CREATE], true, &DOUBLE_CRASH_SETS);
}

#[test]
fn killed_before_the_answer_was_read_and_again_before_ready_is_written() {
    // The first death leaves a committed create nobody heard of: the lookup finds it, and the
    // process dies again as the recovered resource is about to be Ready.
    crash_at_each(&[fault::CREATE_RESPONSE_UNREAD, fault::BEFORE_READY_WRITE], true, &CREATE_SETS);
}

#[test]
fn namespaced_resources_are_created_once_across_two_kills() {
    // The v2 `.m.` kind with a namespaced ProviderConfig: killed with a committed create
    // nobody heard of, then again as the recovered resource is about to be Ready.
    crash_at_each_scoped(true, &[fault::CREATE_RESPONSE_UNREAD, fault::BEFORE_READY_WRITE], true, &DOUBLE_CRASH_SETS);
}

#[test]
fn a_cloud_without_lookup_fails_closed_and_recovers_when_told() {
    let mut harness = Harness::start(Some(fault::AFTER_EXTERNAL_CREATE));
    harness.cloud.set_lookup(false);
    harness.config(false, false);
    let closed = |name: &'static str| {
        move |h: &Harness| {
            h.get(name).is_some_and(|t| {
                conditions::get(&t, "Synced").is_some_and(|c| c.status == "False" && c.message == CREATION_RESULT_UNKNOWN)
            })
        }
    };
    // Each dies after the cloud created its thing. One at a time: the kill of one must not
    // land while the other's create is still on its way (that one would fail closed too, as
    // it should, but with nothing created that the test could hand back).
    harness.create("blind", &["*"]);
    harness.eventually_restarting("the killed create to fail closed", Duration::from_secs(120), closed("blind"));
    harness.create("dropped", &["Observe", "Create", "Update", "Delete"]);
    harness.eventually_restarting("the second killed create to fail closed", Duration::from_secs(120), closed("dropped"));
    let _ = &harness;
    // Closed stays closed across a restart: no second create.
    harness.server.kill_and_restart();
    std::thread::sleep(Duration::from_secs(3));
    for name in ["blind", "dropped"] {
        let thing = harness.get(name).unwrap();
        let uid = object::uid(&thing).unwrap().to_string();
        assert_eq!(harness.cloud.creates_of(&uid), 1, "{name}");
        assert!(closed(if name == "blind" { "blind" } else { "dropped" })(&harness), "{name} stays closed");
        // A person tells it the identifier; it is adopted without another create.
        let id = harness.cloud.things_of(&uid)[0]["id"].as_str().unwrap().to_string();
        let patch = json!({"metadata": {"annotations": {"crossplane.io/external-name": id}}});
        harness.rt.block_on(harness.kube().merge_patch(&harness.thing_kind(), None, name, &patch)).unwrap();
    }
    harness.eventually_restarting("both to be adopted", Duration::from_secs(60), |h| {
        ["blind", "dropped"].iter().all(|n| h.get(n).is_some_and(|t| ready_and_synced(&t)))
    });
    assert_exactly_one_each(&harness, &["blind".to_string(), "dropped".to_string()]);
}

#[test]
fn names_taken_from_the_resource_recover_on_their_own() {
    for point in [fault::AFTER_CREATE_INTENT, fault::AFTER_EXTERNAL_CREATE] {
        let mut harness = Harness::start(Some(point));
        harness.cloud.set_lookup(false);
        harness.config(false, true);
        harness.create("alice", &["Observe", "Create", "Update", "Delete"]);
        harness.eventually_restarting("alice to be Ready", Duration::from_secs(120), |h| h.get("alice").is_some_and(|t| ready_and_synced(&t)));
        assert_eq!(markers(harness.state.path()), 1, "{point}");
        let thing = harness.get("alice").unwrap();
        assert_eq!(object::annotation(&thing, "crossplane.io/external-name"), Some("alice"));
        let live = harness.cloud.live();
        assert_eq!(live.len(), 1, "{point}: {live:?}");
        assert_eq!(live[0]["id"], "alice");
    }
}

#[test]
fn observe_only_never_creates_across_restarts() {
    let mut harness = Harness::start(None);
    harness.config(true, false);
    harness.create("watcher", &["Observe"]);
    let reported = |h: &Harness| {
        h.get("watcher").is_some_and(|t| {
            conditions::get(&t, "Synced").is_some_and(|c| c.message == "observe failed: external resource does not exist")
                && conditions::get(&t, "Ready").is_some_and(|c| c.status == "False")
        })
    };
    harness.eventually("the missing resource to be reported", Duration::from_secs(60), reported);
    for _ in 0..2 {
        harness.server.kill_and_restart();
        harness.eventually("the missing resource to be reported again", Duration::from_secs(60), reported);
    }
    let uid = object::uid(&harness.get("watcher").unwrap()).unwrap().to_string();
    assert_eq!(harness.cloud.creates_of(&uid), 0);
    assert!(harness.cloud.live().is_empty());
}
