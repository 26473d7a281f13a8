//! Several `oxplane up` processes on one etcd: each serves the whole API (its watch cache fed
//! by etcd's watch), one kubeconfig works against all of them, and the controllers run on
//! exactly one, elected through a Lease, moving to another when the leader is killed, with
//! every composed resource created exactly once across the move.

use crate::support;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use oxplane_providers::fakecloud::cloud::FakeCloud;
use oxplane_store::etcd::testing::{self, EtcdCluster};
use support::{Server, shared_encryption_config as encryption_config, within};

fn replicas(count: usize, prefix: &str, config: &str, extra: &[&str]) -> Vec<Server> {
    let cluster = EtcdCluster::shared();
    let endpoints = cluster.endpoints().join(",");
    let mut args = vec!["--etcd", &endpoints, "--etcd-prefix", prefix, "--encryption-provider-config", config];
    args.extend_from_slice(extra);
    (0..count).map(|_| Server::start_with(&args)).collect()
}

#[test]
fn replicas_serve_the_same_objects_to_one_kubeconfig_and_watches_see_every_write_in_order() {
    let config_dir = tempfile::tempdir().unwrap();
    let config = encryption_config(config_dir.path());
    let servers = replicas(3, &testing::unique_prefix("replicas"), &config, &[]);
    let (a, b, c) = (&servers[0], &servers[1], &servers[2]);

    // A's kubeconfig (CA and admin token) works against B and C.
    for other in [b, c] {
        let out = a.kubectl(&["--server", &other.url(), "get", "namespace", "default", "-o", "name"]);
        assert_eq!(out, "namespace/default\n");
    }

    // A watch on A sees writes made through B, in order.
    let mut watch = a
        .kubectl_command(&["get", "configmaps", "--watch-only", "-o", "name"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (lines, seen) = mpsc::channel();
    let stdout = watch.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                return;
            }
        }
    });
    // The watch has started once it shows a write: write markers through B until one shows.
    for marker in 0.. {
        assert!(marker < 60, "the watch on A never showed a write");
        b.kubectl(&["create", "configmap", &format!("marker-{marker}")]);
        if seen.recv_timeout(Duration::from_secs(1)).is_ok_and(|line| line.starts_with("configmap/marker-")) {
            break;
        }
    }
    let names: Vec<String> = (0..10).map(|i| format!("from-b-{i}")).collect();
    for name in &names {
        b.kubectl(&["create", "configmap", name]);
    }
    let mut got = Vec::new();
    while got.len() < names.len() {
        let line = seen.recv_timeout(Duration::from_secs(30)).expect("watch events on A");
        if let Some(name) = line.strip_prefix("configmap/").filter(|name| !name.starts_with("marker-")) {
            got.push(name.to_string());
        }
    }
    let _ = watch.kill();
    let _ = watch.wait();
    assert_eq!(got, names);

    // Every replica lists the same objects at the same resourceVersion once caught up.
    let list = |server: &Server| server.kubectl(&["get", "configmaps", "-o", "name"]);
    assert_eq!(list(a), list(b));
    assert_eq!(list(b), list(c));
    c.kubectl(&["delete", "configmap", "from-b-0"]);
    within(Duration::from_secs(10), "the delete through C reaches A", || !list(a).contains("from-b-0\n"));
}

const NOP: &str = "apiVersion: nop.crossplane.io/v1alpha1
kind: NopResource
metadata:
  name: NAME
spec:
  forProvider:
    conditionAfter:
    - time: 0s
      conditionType: Ready
      conditionStatus: \"True\"
";

fn leads(server: &Server) -> bool {
    server.log().contains("leading: starting the controllers")
}

#[test]
fn controllers_run_on_one_replica_and_move_when_it_is_killed() {
    let config_dir = tempfile::tempdir().unwrap();
    let config = encryption_config(config_dir.path());
    let mut servers = replicas(2, &testing::unique_prefix("leader"), &config, &["--provider", "provider-nop"]);
    within(Duration::from_secs(60), "one replica leads", || servers.iter().any(leads));
    let leaders: Vec<usize> = (0..2).filter(|&i| leads(&servers[i])).collect();
    assert_eq!(leaders.len(), 1, "exactly one replica runs the controllers");
    let (leader, follower) = (leaders[0], 1 - leaders[0]);
    let holder = |server: &Server| {
        let lease = server.get(&["lease", "-n", "kube-system", "oxplane-controllers"]).unwrap();
        lease["spec"]["holderIdentity"].as_str().unwrap_or_default().to_string()
    };
    let identity = |server: &Server| format!("{}_{}", server.url(), server.pid());
    assert_eq!(holder(&servers[follower]), identity(&servers[leader]));

    // The leader's controllers reconcile what is written through the follower (once the
    // leader has installed Crossplane's CRDs and the Provider).
    within(Duration::from_secs(60), "the leader installs provider-nop", || {
        servers[follower].kubectl_try(&["get", "provider", "provider-nop"], "").is_ok()
    });
    servers[follower].kubectl(&["wait", "--for=condition=Healthy", "provider/provider-nop", "--timeout=60s"]);
    servers[follower].kubectl_stdin(&["apply", "-f", "-"], &NOP.replace("NAME", "before"));
    servers[follower].kubectl(&["wait", "--for=condition=Ready", "nopresource/before", "--timeout=60s"]);

    // All along, the follower did not lead: neither Crossplane's controllers nor the in-server
    // ones (garbage collector, namespaces, ...) ran on it.
    assert!(!leads(&servers[follower]), "both replicas ran the controllers");
    let in_server = |server: &Server| server.log().contains("leading: in-server controllers started");
    assert!(in_server(&servers[leader]) && !in_server(&servers[follower]), "the in-server controllers run on the leader only");

    servers[leader].kill();
    // Once the lease (15 s) has expired, the follower takes it over. The bound leaves room for
    // a loaded machine; an election that never moves still fails it.
    within(Duration::from_secs(60), "the follower leads", || leads(&servers[follower]));
    assert_eq!(holder(&servers[follower]), identity(&servers[follower]));
    servers[follower].kubectl_stdin(&["apply", "-f", "-"], &NOP.replace("NAME", "after"));
    servers[follower].kubectl(&["wait", "--for=condition=Ready", "nopresource/after", "--timeout=60s"]);
    // The in-server controllers moved too: the namespace controller, now on the follower alone,
    // empties and removes a deleted namespace.
    assert!(in_server(&servers[follower]));
    servers[follower].kubectl(&["create", "namespace", "doomed"]);
    servers[follower].kubectl(&["create", "configmap", "inside", "-n", "doomed"]);
    servers[follower].kubectl(&["delete", "namespace", "doomed", "--wait=false"]);
    within(Duration::from_secs(60), "the deleted namespace is gone", || servers[follower].get(&["namespace", "doomed"]).is_none());
}

/// How many composites the leader is killed in the middle of composing.
const COMPOSITES: usize = 500;

/// Function, ProviderConfig (for the cloud at `endpoint`), XRD and Composition: each XLedger
/// composes one FakeThing, an object of the fake cloud named by the cloud.
fn ledger_platform(endpoint: &str) -> [String; 3] {
    let function = "apiVersion: pkg.crossplane.io/v1
kind: Function
metadata:
  name: function-patch-and-transform
spec:
  package: xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform:v0.8.2
"
    .to_string();
    let config = format!(
        "apiVersion: fakecloud.oxplane.io/v1alpha1
kind: ProviderConfig
metadata:
  name: default
spec:
  endpoint: {endpoint}
  lookup: true
"
    );
    let xrd = "apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata:
  name: xledgers.ledger.example.org
spec:
  group: ledger.example.org
  names: {kind: XLedger, plural: xledgers}
  versions:
  - name: v1alpha1
    served: true
    referenceable: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
---
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: xledgers
spec:
  compositeTypeRef: {apiVersion: ledger.example.org/v1alpha1, kind: XLedger}
  mode: Pipeline
  pipeline:
  - step: compose
    functionRef: {name: function-patch-and-transform}
    input:
      apiVersion: pt.fn.crossplane.io/v1beta1
      kind: Resources
      resources:
      - name: thing
        base:
          apiVersion: fakecloud.oxplane.io/v1alpha1
          kind: FakeThing
          spec: {forProvider: {size: 1}}
        patches:
        - {fromFieldPath: spec.size, toFieldPath: spec.forProvider.size}
"
    .to_string();
    [function, config, xrd]
}

#[test]
fn the_leader_killed_while_composing_500_composites_creates_each_composed_resource_once() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let cloud = rt.block_on(FakeCloud::start(Duration::from_millis(300))).unwrap();
    let config_dir = tempfile::tempdir().unwrap();
    let config = encryption_config(config_dir.path());
    let mut servers = replicas(2, &testing::unique_prefix("ledger"), &config, &["--provider", "provider-fakecloud"]);
    within(Duration::from_secs(60), "one replica leads", || servers.iter().any(leads));
    let leader = (0..2).find(|&i| leads(&servers[i])).unwrap();
    // Everything goes through the follower, which outlives the leader.
    let api = servers.remove(1 - leader);
    let mut leader = servers.remove(0);
    let [function, provider_config, xrd] = ledger_platform(&cloud.endpoint());
    // Once the leader has installed Crossplane's CRDs and the Provider.
    within(Duration::from_secs(120), "the leader installs provider-fakecloud", || {
        api.kubectl_try(&["get", "provider", "provider-fakecloud"], "").is_ok()
    });
    api.kubectl_stdin(&["apply", "-f", "-"], &function);
    api.kubectl(&["wait", "--for=condition=Healthy", "provider/provider-fakecloud", "function/function-patch-and-transform", "--timeout=120s"]);
    api.kubectl_stdin(&["apply", "-f", "-"], &provider_config);
    api.kubectl_stdin(&["apply", "-f", "-"], &xrd);
    api.kubectl(&["wait", "--for=condition=Established", "xrd/xledgers.ledger.example.org", "--timeout=120s"]);
    let composites: String = (0..COMPOSITES)
        .map(|i| format!("apiVersion: ledger.example.org/v1alpha1\nkind: XLedger\nmetadata:\n  name: x{i}\nspec:\n  size: {i}\n---\n"))
        .collect();
    api.kubectl_stdin(&["apply", "-f", "-"], &composites);

    // kill -9 the leader in the middle of composing: some things exist in the cloud, not all.
    within(Duration::from_secs(300), "the leader creates things", || cloud.live().len() >= COMPOSITES / 10);
    leader.kill();
    let before = cloud.live().len();
    assert!(before < COMPOSITES, "the leader finished before it was killed");
    eprintln!("the leader was killed with {before} of {COMPOSITES} things created");
    within(Duration::from_secs(60), "the follower leads", || leads(&api));

    // Every composite converges, each composing exactly one FakeThing, each created once in
    // the cloud (its ledger counts creates per managed resource, ever).
    let ready = || {
        let list = api.get(&["xledgers"]).unwrap_or_default();
        let items = list["items"].as_array().cloned().unwrap_or_default();
        items.iter().filter(|x| support::is_true(x, "Ready")).count()
    };
    within(Duration::from_secs(900), "every composite Ready", || ready() == COMPOSITES);
    let things = api.get(&["fakethings.fakecloud.oxplane.io"]).unwrap();
    let things = things["items"].as_array().unwrap();
    assert_eq!(things.len(), COMPOSITES, "composed resources");
    for thing in things {
        let uid = thing["metadata"]["uid"].as_str().unwrap();
        let name = thing["metadata"]["name"].as_str().unwrap();
        assert_eq!(cloud.creates_of(uid), 1, "{name} was created {} times", cloud.creates_of(uid));
        let held = cloud.things_of(uid);
        assert_eq!(held.len(), 1, "{name}: {held:?}");
        assert_eq!(thing["metadata"]["annotations"]["crossplane.io/external-name"].as_str(), held[0]["id"].as_str(), "{name}");
    }
    assert_eq!(cloud.live().len(), COMPOSITES, "things in the cloud (the leader died at {before})");
}

#[test]
fn an_api_only_replica_refuses_deleting_what_a_usage_protects() {
    let config_dir = tempfile::tempdir().unwrap();
    let config = encryption_config(config_dir.path());
    let prefix = testing::unique_prefix("api-only");
    let with_controllers = replicas(1, &prefix, &config, &[]).remove(0);
    let api_only = replicas(1, &prefix, &config, &["--controllers=false"]).remove(0);
    within(Duration::from_secs(60), "the Usage kind served", || {
        api_only.kubectl_try(&["get", "usages.protection.crossplane.io"], "").is_ok()
    });
    api_only.kubectl(&["create", "configmap", "db-config"]);
    api_only.apply(
        "apiVersion: protection.crossplane.io/v1beta1\nkind: Usage\nmetadata: {name: keep-db-config, namespace: default}\nspec:\n  of: {apiVersion: v1, kind: ConfigMap, resourceRef: {name: db-config}}\n  reason: the database reads db-config\n",
    );
    within(Duration::from_secs(60), "db-config labelled in use by the replica running the controllers", || {
        api_only.get(&["configmap", "db-config"]).is_some_and(|c| c["metadata"]["labels"]["crossplane.io/in-use"] == "true")
    });
    let refused = api_only.kubectl_fails(&["delete", "configmap", "db-config"], "");
    assert!(refused.contains("This resource is in-use by 1 usage(s)"), "{refused}");
    assert!(api_only.get(&["configmap", "db-config"]).is_some());
    with_controllers.kubectl(&["delete", "usage.protection.crossplane.io", "keep-db-config"]);
    within(Duration::from_secs(60), "db-config deletable once the Usage is gone", || {
        api_only.kubectl_try(&["delete", "configmap", "db-config"], "").is_ok()
    });
}

/// The URL the Object CRD's conversion webhook is called at, as `server` reads it.
fn conversion_url(server: &Server) -> Option<String> {
    let crd = server.get(&["crd", "objects.kubernetes.crossplane.io"])?;
    crd["spec"]["conversion"]["webhook"]["clientConfig"]["url"].as_str().map(str::to_string)
}

#[test]
fn conversions_follow_the_controllers_leader() {
    let config_dir = tempfile::tempdir().unwrap();
    let config = encryption_config(config_dir.path());
    let prefix = testing::unique_prefix("conversion");
    let args = ["--provider", "provider-kubernetes"];
    let mut servers = replicas(2, &prefix, &config, &args);
    within(Duration::from_secs(60), "one replica leads", || servers.iter().any(leads));
    let leader = (0..2).find(|&i| leads(&servers[i])).unwrap();
    let api = servers.remove(1 - leader);
    let mut leader = servers.remove(0);
    within(Duration::from_secs(120), "the leader installs provider-kubernetes", || api.kubectl_try(&["get", "provider", "provider-kubernetes"], "").is_ok());
    api.kubectl(&["wait", "--for=condition=Healthy", "provider/provider-kubernetes", "--timeout=120s"]);
    api.apply(
        "apiVersion: kubernetes.crossplane.io/v1alpha1\nkind: Object\nmetadata:\n  name: imported\nspec:\n  managementPolicy: Observe\n  forProvider:\n    manifest:\n      apiVersion: v1\n      kind: ConfigMap\n      metadata:\n        name: existing\n        namespace: default\n",
    );
    let read_older = || api.kubectl_try(&["get", "objects.v1alpha1.kubernetes.crossplane.io", "imported", "-o", "jsonpath={.spec.managementPolicy}"], "");
    assert_eq!(read_older().unwrap(), "Observe");
    let pointed = conversion_url(&api).unwrap();

    // A replica that starts and goes again leaves the CRD calling the leader's webhook.
    let mut passing = replicas(1, &prefix, &config, &args).remove(0);
    assert_eq!(conversion_url(&api).unwrap(), pointed, "a follower pointed the CRD at itself");
    passing.kill();
    assert_eq!(read_older().unwrap(), "Observe");

    // The leader killed: conversions fail until the new leader points the CRD at its own
    // webhook as it takes over; then they work again.
    leader.kill();
    within(Duration::from_secs(60), "the follower leads", || leads(&api));
    within(Duration::from_secs(30), "v1alpha1 reads again", || read_older().is_ok_and(|p| p == "Observe"));
    assert_ne!(conversion_url(&api).unwrap(), pointed);
}
