//! Leader election against `oxplane up`: two processes run `kube-lease-manager` electors on one
//! Lease (it takes leases with server-side apply and relies on 409 conflicts); exactly one
//! leads, and when it is killed the other takes over.

use crate::support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use support::Server;

const KUBECONFIG_VAR: &str = "OXPLANE_ELECTOR_KUBECONFIG";
const IDENTITY_VAR: &str = "OXPLANE_ELECTOR_IDENTITY";
const LEASE: &str = "elector-test";

#[test]
#[ignore = "runs only as a child of `one_leader_and_failover_between_two_processes`"]
fn elector_child() {
    let (Ok(kubeconfig), Ok(identity)) = (std::env::var(KUBECONFIG_VAR), std::env::var(IDENTITY_VAR)) else { return };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async move {
        let config = kube::config::Kubeconfig::read_from(&kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(config, &Default::default()).await.unwrap();
        let client = kube::Client::try_from(config).unwrap();
        let manager = kube_lease_manager::LeaseManagerBuilder::new(client, LEASE)
            .with_namespace("default")
            .with_identity(identity.clone())
            .with_duration(3)
            .with_grace(1)
            .build()
            .await
            .unwrap();
        let (mut leading, _task) = manager.watch().await;
        loop {
            println!("STATE {identity} {}", *leading.borrow_and_update());
            if leading.changed().await.is_err() {
                println!("STOPPED {identity}");
                return;
            }
        }
    });
}

struct Elector {
    identity: String,
    child: Child,
}

impl Drop for Elector {
    fn drop(&mut self) {
        // A failed assertion must not leave electors running.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn(server: &Server, identity: &str, states: mpsc::Sender<(String, bool)>) -> Elector {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["leader_election::elector_child", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env(KUBECONFIG_VAR, server.kubeconfig())
        .env(IDENTITY_VAR, identity)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            // The test harness may print its own text before ours on the first line.
            let Some(report) = line.split("STATE ").nth(1) else { continue };
            let parts: Vec<&str> = report.split_whitespace().collect();
            if let [who, leading] = parts.as_slice() {
                let _ = states.send((who.to_string(), *leading == "true"));
            }
        }
    });
    Elector { identity: identity.to_string(), child }
}

/// Collects state reports until `done` holds for the latest state of each elector.
fn wait_for(states: &mpsc::Receiver<(String, bool)>, latest: &mut std::collections::BTreeMap<String, bool>, what: &str, done: impl Fn(&std::collections::BTreeMap<String, bool>) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done(latest) {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "timed out waiting until {what}; states: {latest:?}");
        if let Ok((who, leading)) = states.recv_timeout(left.min(Duration::from_millis(200))) {
            latest.insert(who, leading);
        }
    }
}

#[test]
fn one_leader_and_failover_between_two_processes() {
    let server = Server::start();
    let (tx, states) = mpsc::channel();
    let mut electors = vec![spawn(&server, "alpha", tx.clone()), spawn(&server, "beta", tx)];
    let mut latest = std::collections::BTreeMap::new();
    wait_for(&states, &mut latest, "both report and one leads", |l| l.len() == 2 && l.values().filter(|v| **v).count() == 1);

    // Leadership is stable: for a few lease durations nobody else claims it.
    let leader = latest.iter().find(|(_, v)| **v).map(|(k, _)| k.clone()).unwrap();
    let settle = Instant::now() + Duration::from_secs(8);
    while Instant::now() < settle {
        if let Ok((who, leading)) = states.recv_timeout(Duration::from_millis(200)) {
            latest.insert(who, leading);
        }
        assert_eq!(latest.values().filter(|v| **v).count(), 1, "exactly one leader at any time: {latest:?}");
    }
    let holder = server.kubectl(&["get", "lease", LEASE, "-o", "jsonpath={.spec.holderIdentity}"]);
    assert_eq!(holder, leader);

    // Kill the leader: the other takes over once the lease expires.
    let position = electors.iter().position(|e| e.identity == leader).unwrap();
    drop(electors.remove(position));
    latest.remove(&leader);
    let survivor = electors[0].identity.clone();
    wait_for(&states, &mut latest, "the survivor leads", |l| l.get(&survivor) == Some(&true));
    let holder = server.kubectl(&["get", "lease", LEASE, "-o", "jsonpath={.spec.holderIdentity}"]);
    assert_eq!(holder, survivor);
}
