//! Management policies against the local fake cloud, as a table: every policy set Crossplane
//! supports, `[]` (paused) and unsupported sets, for cluster-scoped (with `deletionPolicy`) and
//! namespaced things. For each: whether the external thing is created, whether a spec change
//! (drift) reaches the cloud, whether late initialization writes the cloud's values back into
//! the spec, and whether deleting the managed resource deletes the thing or orphans it.
//!
//! Every row runs in one server (one per scope): a resource per row that starts with no
//! external thing (is it created?) and, for rows that cannot create, one adopting a thing made
//! in the cloud beforehand (so drift, late initialization and deletion are seen for them too).

use crate::support;

use std::time::Duration;

use oxplane_providers::fakecloud::FakeCloudProvider;
use oxplane_providers::fakecloud::cloud::FakeCloud;
use oxplane_runtime::Runtime;
use oxplane_runtime::conditions;
use oxplane_runtime::kinds::Kind;
use oxplane_runtime::managed::annotations::EXTERNAL_NAME;
use oxplane_runtime::object;
use serde_json::{Value, json};
use support::{events_of, install, start, wait_for, wait_object};

const PACKAGE: &str = "xpkg.oxplane.io/oxplane/provider-fakecloud:v0.1.0";
const NAMESPACE: &str = "default";
/// The colour the cloud gives a thing it was not told one for.
const CLOUD_DEFAULT_COLOR: &str = "blue";
/// The colour of things made in the cloud beforehand, for adoption.
const FOREIGN_COLOR: &str = "green";

/// What a row expects.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Expect {
    /// A supported, non-empty set, with what it allows.
    Allows { create: bool, update: bool, late_init: bool, delete: bool },
    /// `[]`: nothing at all.
    Paused,
    /// An unsupported set: refused with `CannotUseInvalidManagementPolicy`, nothing done.
    Invalid,
}

struct Row {
    set: &'static [&'static str],
    /// `spec.deletionPolicy` (cluster-scoped things only).
    deletion_policy: Option<&'static str>,
    expect: Expect,
}

const fn allows(set: &'static [&'static str], create: bool, update: bool, late_init: bool, delete: bool) -> Row {
    Row { set, deletion_policy: None, expect: Expect::Allows { create, update, late_init, delete } }
}

/// Written from the reference table of supported sets (crossplane-spec §3.10), not from the
/// code under test.
const ROWS: &[Row] = &[
    //     set                                                                  create update late   delete
    allows(&["*"], true, true, true, true),
    allows(&["Observe", "Create", "Update", "LateInitialize", "Delete"], true, true, true, true),
    allows(&["Observe"], false, false, false, false),
    allows(&["Observe", "Create", "Update", "Delete"], true, true, false, true),
    allows(&["Observe", "Create", "Update", "LateInitialize"], true, true, true, false),
    allows(&["Observe", "Create", "Update"], true, true, false, false),
    allows(&["Observe", "Create", "Delete", "LateInitialize"], true, false, true, true),
    allows(&["Observe", "Create", "LateInitialize"], true, false, true, false),
    allows(&["Observe", "Create", "Delete"], true, false, false, true),
    allows(&["Observe", "Create"], true, false, false, false),
    allows(&["Observe", "Delete"], false, false, false, true),
    allows(&["Observe", "Update"], false, true, false, false),
    allows(&["Observe", "LateInitialize"], false, false, true, false),
    allows(&["Observe", "Update", "LateInitialize"], false, true, true, false),
    // Order is irrelevant.
    allows(&["Delete", "Create", "Observe"], true, false, false, true),
    Row { set: &[], deletion_policy: None, expect: Expect::Paused },
    Row { set: &["Create"], deletion_policy: None, expect: Expect::Invalid },
    Row { set: &["Observe", "*"], deletion_policy: None, expect: Expect::Invalid },
    Row { set: &["Update", "Delete"], deletion_policy: None, expect: Expect::Invalid },
    // Cluster-scoped things also have a deletion policy: `Orphan` with `*` orphans, while a
    // non-default set that names Delete deletes whatever it says.
    Row {
        set: &["*"],
        deletion_policy: Some("Orphan"),
        expect: Expect::Allows { create: true, update: true, late_init: true, delete: false },
    },
    Row {
        set: &["Observe", "Create", "Update", "Delete"],
        deletion_policy: Some("Orphan"),
        expect: Expect::Allows { create: true, update: true, late_init: false, delete: true },
    },
];

/// One scope's kinds.
struct Scope {
    thing: Kind,
    namespace: Option<&'static str>,
    api_version: &'static str,
}

impl Scope {
    fn cluster() -> Scope {
        Scope {
            thing: Kind::new("fakecloud.oxplane.io", "v1alpha1", "FakeThing", "fakethings", false),
            namespace: None,
            api_version: "fakecloud.oxplane.io/v1alpha1",
        }
    }

    fn namespaced() -> Scope {
        Scope {
            thing: Kind::new("fakecloud.m.oxplane.io", "v1alpha1", "FakeThing", "fakethings", true),
            namespace: Some(NAMESPACE),
            api_version: "fakecloud.m.oxplane.io/v1alpha1",
        }
    }

    /// The default config things use when they name none.
    async fn config(&self, runtime: &Runtime, cloud: &FakeCloud) {
        let (kind, api_version, kind_name) = if self.namespace.is_some() {
            (
                Kind::new("fakecloud.m.oxplane.io", "v1alpha1", "ClusterProviderConfig", "clusterproviderconfigs", false),
                self.api_version,
                "ClusterProviderConfig",
            )
        } else {
            (Kind::new("fakecloud.oxplane.io", "v1alpha1", "ProviderConfig", "providerconfigs", false), self.api_version, "ProviderConfig")
        };
        let config = json!({"apiVersion": api_version, "kind": kind_name, "metadata": {"name": "default"}, "spec": {"endpoint": cloud.endpoint()}});
        runtime.kube.create(&kind, &config).await.unwrap();
    }

    async fn create(&self, runtime: &Runtime, name: &str, row: &Row, external_name: Option<&str>) {
        let mut thing = json!({
            "apiVersion": self.api_version, "kind": "FakeThing",
            "metadata": {"name": name},
            "spec": {"forProvider": {"size": 2}, "managementPolicies": row.set}
        });
        if let Some(namespace) = self.namespace {
            thing["metadata"]["namespace"] = json!(namespace);
        }
        if let Some(id) = external_name {
            thing["metadata"]["annotations"] = json!({EXTERNAL_NAME: id});
        }
        if let Some(policy) = row.deletion_policy {
            thing["spec"]["deletionPolicy"] = json!(policy);
        }
        runtime.kube.create(&self.thing, &thing).await.unwrap();
    }

    async fn get(&self, runtime: &Runtime, name: &str) -> Option<Value> {
        runtime.kube.get(&self.thing, self.namespace, name).await.unwrap()
    }

    async fn wait(&self, runtime: &Runtime, name: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
        wait_object(runtime, &self.thing, self.namespace, name, what, check).await
    }
}

fn synced(o: &Value) -> Option<conditions::Condition> {
    conditions::get(o, "Synced")
}

/// The Synced condition was computed for the object's current generation.
fn synced_at_generation(o: &Value) -> bool {
    synced(o).is_some_and(|c| c.observed_generation == object::generation(o))
}

/// Whether the row's first reconcile is over (for the resource that has an external thing).
fn settled(expect: Expect, o: &Value) -> bool {
    match expect {
        Expect::Allows { .. } => conditions::is_true(o, "Ready") && conditions::is_true(o, "Synced"),
        Expect::Paused => synced(o).is_some_and(|c| c.status == "False" && c.reason == "ReconcilePaused"),
        Expect::Invalid => synced(o).is_some_and(|c| c.status == "False" && c.reason == "ReconcileError"),
    }
}

fn creates(expect: Expect) -> bool {
    matches!(expect, Expect::Allows { create: true, .. })
}

/// The resource of row `i` that has an external thing: the fresh one where the set creates,
/// else the one adopting a thing made beforehand.
fn subject(i: usize, expect: Expect) -> String {
    if creates(expect) { format!("fresh-{i}") } else { format!("adopted-{i}") }
}

async fn policy_table(scope: Scope) {
    let (server, runtime) = start().await;
    let _provider = install(&runtime, &FakeCloudProvider::default(), PACKAGE).await;
    let cloud = FakeCloud::start(Duration::ZERO).await.unwrap();
    scope.config(&runtime, &cloud).await;
    let rows: Vec<(usize, &Row)> = ROWS.iter().enumerate().filter(|(_, r)| scope.namespace.is_none() || r.deletion_policy.is_none()).collect();

    // Every row: one resource with nothing in the cloud, and, where the set cannot create, one
    // adopting a thing made behind the control plane's back.
    let mut foreign = std::collections::BTreeMap::new();
    for &(i, row) in &rows {
        scope.create(&runtime, &format!("fresh-{i}"), row, None).await;
        if !creates(row.expect) {
            let id = cloud.insert(json!({"size": 2, "color": FOREIGN_COLOR}));
            scope.create(&runtime, &format!("adopted-{i}"), row, Some(&id)).await;
            foreign.insert(i, id);
        }
    }

    // Creation, and the first reconcile of each resource.
    let mut ids = std::collections::BTreeMap::new();
    for &(i, row) in &rows {
        let set = row.set;
        let fresh = format!("fresh-{i}");
        let uid = object::uid(&scope.get(&runtime, &fresh).await.unwrap()).unwrap().to_string();
        match row.expect {
            Expect::Allows { create: true, .. } => {
                let mr = scope.wait(&runtime, &fresh, "created and Ready", |o| settled(row.expect, o)).await;
                let held = cloud.things_of(&uid);
                assert_eq!(held.len(), 1, "{set:?}: {held:?}");
                assert_eq!(cloud.creates_of(&uid), 1, "{set:?}");
                let id = held[0]["id"].as_str().unwrap().to_string();
                assert_eq!(object::annotation(&mr, EXTERNAL_NAME), Some(id.as_str()), "{set:?}");
                ids.insert(i, id);
            }
            Expect::Allows { create: false, .. } => {
                let only_observe = set == ["Observe"];
                let mr = scope
                    .wait(&runtime, &fresh, "the missing thing reported", |o| {
                        synced(o).is_some_and(|c| c.status == "False" && c.reason == "ReconcileError" && c.message.contains("external resource does not exist"))
                    })
                    .await;
                if only_observe {
                    assert_eq!(synced(&mr).unwrap().message, "observe failed: external resource does not exist");
                }
                assert_eq!(conditions::get(&mr, "Ready").map(|c| (c.status, c.reason)), Some(("False".into(), "Unavailable".into())), "{set:?}");
            }
            Expect::Paused => {
                let mr = scope.wait(&runtime, &fresh, "paused", |o| settled(row.expect, o)).await;
                assert!(object::finalizers(&mr).is_empty(), "{set:?}: {mr}");
            }
            Expect::Invalid => {
                let mr = scope.wait(&runtime, &fresh, "refused", |o| settled(row.expect, o)).await;
                let message = synced(&mr).unwrap().message;
                assert!(message.starts_with("`spec.managementPolicies` is set to a value("), "{set:?}: {message}");
                assert!(message.ends_with(") which is not supported. Check docs for supported policies"), "{set:?}: {message}");
                wait_for("the invalid-policy event", async || {
                    events_of(&runtime, &mr).await.iter().any(|(t, r, m)| t == "Warning" && r == "CannotUseInvalidManagementPolicy" && *m == message).then_some(())
                })
                .await;
                assert!(object::finalizers(&mr).is_empty(), "{set:?}: {mr}");
            }
        }
        if !creates(row.expect) {
            assert_eq!(cloud.creates_of(&uid), 0, "{set:?}");
            assert!(cloud.things_of(&uid).is_empty(), "{set:?}");
            let adopted = scope.wait(&runtime, &format!("adopted-{i}"), "the adopted thing reconciled", |o| settled(row.expect, o)).await;
            assert_eq!(cloud.creates_of(object::uid(&adopted).unwrap()), 0, "{set:?}");
            ids.insert(i, foreign[&i].clone());
        }
    }

    // Late initialization: the cloud's colour lands in the spec only with LateInitialize (by
    // the reconcile that reported Ready, so it is there already or never).
    let mut generations = std::collections::BTreeMap::new();
    for &(i, row) in &rows {
        let name = subject(i, row.expect);
        let mr = scope.get(&runtime, &name).await.unwrap();
        let cloud_color = if creates(row.expect) { CLOUD_DEFAULT_COLOR } else { FOREIGN_COLOR };
        match row.expect {
            Expect::Allows { late_init: true, .. } => {
                assert_eq!(mr["spec"]["forProvider"], json!({"size": 2, "color": cloud_color}), "{:?} late-initialises", row.set)
            }
            _ => assert_eq!(mr["spec"]["forProvider"], json!({"size": 2}), "{:?} leaves the spec alone", row.set),
        }
        generations.insert(i, object::generation(&mr));
    }

    // Drift: the spec asks for another size; only sets with Update change the thing.
    for &(i, row) in &rows {
        let name = subject(i, row.expect);
        let patch = json!({"spec": {"forProvider": {"size": 3}}});
        runtime.kube.merge_patch(&scope.thing, scope.namespace, &name, &patch).await.unwrap();
    }
    for &(i, row) in &rows {
        let name = subject(i, row.expect);
        // The reconcile that saw the new spec is over once Synced carries its generation.
        let mr = scope.wait(&runtime, &name, "the changed spec reconciled", |o| object::generation(o) > generations[&i] && synced_at_generation(o)).await;
        let thing = cloud.thing(&ids[&i]).unwrap();
        let updates = matches!(row.expect, Expect::Allows { update: true, .. });
        assert_eq!(thing["spec"]["size"], if updates { 3 } else { 2 }, "{:?}: {thing}", row.set);
        if let Expect::Allows { .. } = row.expect {
            // Not updating is not an error: the set says so.
            assert!(conditions::is_true(&mr, "Synced"), "{:?}: {mr}", row.set);
            let updated = async || events_of(&runtime, &mr).await.iter().any(|(_, r, _)| r == "UpdatedExternalResource").then_some(());
            if updates {
                wait_for("the update event", updated).await;
            } else {
                assert_eq!(updated().await, None, "{:?}", row.set);
            }
        }
    }

    // Deletion: the thing goes with the resource only where the set (and deletion policy)
    // says Delete; otherwise it is orphaned. Paused and refused resources never took a
    // finalizer: they go at once, and leave their thing.
    for &(i, row) in &rows {
        runtime.kube.delete(&scope.thing, scope.namespace, &format!("fresh-{i}"), &Default::default()).await.unwrap();
        if !creates(row.expect) {
            runtime.kube.delete(&scope.thing, scope.namespace, &format!("adopted-{i}"), &Default::default()).await.unwrap();
        }
    }
    for &(i, row) in &rows {
        for name in [format!("fresh-{i}"), format!("adopted-{i}")] {
            wait_for("the resource to go", async || scope.get(&runtime, &name).await.is_none().then_some(())).await;
        }
        let deletes = matches!(row.expect, Expect::Allows { delete: true, .. });
        assert_eq!(cloud.thing(&ids[&i]).is_none(), deletes, "{:?} {:?}: deleted", row.set, row.deletion_policy);
    }
    let expected_left = rows.iter().filter(|(_, r)| !matches!(r.expect, Expect::Allows { delete: true, .. })).count();
    assert_eq!(cloud.live().len(), expected_left);
    server.stop().await;
}

#[tokio::test]
async fn every_policy_set_on_cluster_scoped_things() {
    policy_table(Scope::cluster()).await;
}

#[tokio::test]
async fn every_policy_set_on_namespaced_things() {
    policy_table(Scope::namespaced()).await;
}
