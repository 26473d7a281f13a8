//! Several `oxplane up` processes on one etcd: each serves the whole API (its watch cache fed
//! by etcd's watch), one kubeconfig works against all of them, and the controllers run on
//! exactly one, elected through a Lease, moving to another when the leader is killed.

use crate::support;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

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
    // Let the watch start before writing.
    std::thread::sleep(Duration::from_secs(2));
    let names: Vec<String> = (0..10).map(|i| format!("from-b-{i}")).collect();
    for name in &names {
        b.kubectl(&["create", "configmap", name]);
    }
    let mut got = Vec::new();
    while got.len() < names.len() {
        let line = seen.recv_timeout(Duration::from_secs(30)).expect("watch events on A");
        if let Some(name) = line.strip_prefix("configmap/") {
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

    // All along, the follower did not lead.
    assert!(!leads(&servers[follower]), "both replicas ran the controllers");

    servers[leader].kill();
    // Once the lease (15 s) has expired, the follower takes it over. The bound leaves room for
    // a loaded machine; an election that never moves still fails it.
    within(Duration::from_secs(60), "the follower leads", || leads(&servers[follower]));
    assert_eq!(holder(&servers[follower]), identity(&servers[follower]));
    servers[follower].kubectl_stdin(&["apply", "-f", "-"], &NOP.replace("NAME", "after"));
    servers[follower].kubectl(&["wait", "--for=condition=Ready", "nopresource/after", "--timeout=60s"]);
}
