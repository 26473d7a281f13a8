//! provider-http and kill -9: the real `oxplane` process is killed between a Request's POST
//! reaching the server and its answer being read (or saved), and restarted. The REST service
//! (served by the test, so it outlives the process) then holds at most one user per Request:
//!
//! - a Request whose OBSERVE URL comes from its payload (found by name) is looked up after
//!   the restart and becomes Ready, never posted twice;
//! - a Request whose OBSERVE URL needs the id the server assigned, whose answer was lost,
//!   stops with `Synced=False` and the message saying what to do, and posts nothing more;
//! - a Request killed after its answer was saved but before the create was recorded settles
//!   from the saved answer and becomes Ready.

use crate::support;

use std::time::{Duration, Instant};

use oxplane_providers::http::testing::RestServer;
use oxplane_runtime::client::Kube;
use oxplane_runtime::conditions;
use oxplane_runtime::kinds::Kind;
use oxplane_runtime::managed::fault;
use oxplane_runtime::managed::reconciler::CREATION_RESULT_UNKNOWN;
use serde_json::{Value, json};
use support::Server;

struct Harness {
    rt: tokio::runtime::Runtime,
    rest: RestServer,
    server: Server,
    state: tempfile::TempDir,
}

fn request_kind() -> Kind {
    Kind::new("http.crossplane.io", "v1alpha2", "Request", "requests", false)
}

impl Harness {
    fn start(point: &str) -> Harness {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let rest = rt.block_on(RestServer::start()).unwrap();
        let state = tempfile::tempdir().unwrap();
        let mut server = Server::new(&["--provider", "provider-http"]);
        server.env_always(fault::FAULT_KILL_AT, point);
        server.env_always(fault::FAULT_STATE_DIR, state.path().to_str().unwrap());
        server.spawn();
        let mut harness = Harness { rt, rest, server, state };
        let provider = Kind::new("pkg.crossplane.io", "v1", "Provider", "providers", false);
        harness.eventually_restarting("provider-http to be healthy", Duration::from_secs(60), |h| {
            h.kube().and_then(|k| h.rt.block_on(k.get(&provider, None, "provider-http")).ok().flatten()).is_some_and(|p| conditions::is_true(&p, "Healthy"))
        });
        let config = json!({"apiVersion": "http.crossplane.io/v1alpha1", "kind": "ProviderConfig", "metadata": {"name": "default"}, "spec": {"credentials": {"source": "None"}}});
        let config_kind = Kind::new("http.crossplane.io", "v1alpha1", "ProviderConfig", "providerconfigs", false);
        harness.eventually_restarting("the ProviderConfig", Duration::from_secs(60), |h| {
            h.kube().is_some_and(|k| match h.rt.block_on(k.create(&config_kind, &config)) {
                Ok(_) => true,
                Err(error) => error.is_already_exists(),
            })
        });
        harness
    }

    fn kube(&self) -> Option<Kube> {
        let client = self.rt.block_on(async { tokio::time::timeout(Duration::from_secs(5), self.server.client()).await }).ok()?;
        Some(Kube::new(client))
    }

    fn get(&self, name: &str) -> Option<Value> {
        self.rt.block_on(self.kube()?.get(&request_kind(), None, name)).ok().flatten()
    }

    fn create(&mut self, request: &Value) {
        self.eventually_restarting("the create to be accepted", Duration::from_secs(60), |h| {
            h.kube().is_some_and(|k| match h.rt.block_on(k.create(&request_kind(), request)) {
                Ok(_) => true,
                Err(error) => error.is_already_exists(),
            })
        });
    }

    /// Polls `check`, bringing the process back whenever it killed itself.
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

    fn markers(&self) -> usize {
        std::fs::read_dir(self.state.path()).unwrap().count()
    }
}

/// A user Request; `by_name`: OBSERVE finds the user by its name, else by the id the POST
/// answered with.
fn user(name: &str, base_url: &str, by_name: bool) -> Value {
    let observe_url = if by_name { ".payload.baseUrl + \"/by-name/\" + .payload.body.username" } else { ".payload.baseUrl + \"/\" + (.response.body.id|tostring)" };
    json!({
        "apiVersion": "http.crossplane.io/v1alpha2", "kind": "Request",
        "metadata": {"name": name},
        "spec": {"forProvider": {
            "headers": {"Content-Type": ["application/json"]},
            "payload": {"baseUrl": format!("{base_url}/users"), "body": json!({"username": name}).to_string()},
            "mappings": [
                {"action": "CREATE", "method": "POST", "url": ".payload.baseUrl", "body": "{ username: .payload.body.username }"},
                {"action": "OBSERVE", "method": "GET", "url": observe_url},
                {"action": "REMOVE", "method": "DELETE", "url": ".payload.baseUrl + \"/\" + (.response.body.id|tostring)"}
            ]
        }}
    })
}

fn ready_and_synced(o: &Value) -> bool {
    conditions::is_true(o, "Ready") && conditions::is_true(o, "Synced")
}

fn users_named(rest: &RestServer, name: &str) -> usize {
    rest.users().iter().filter(|u| u["username"] == name).count()
}

#[test]
fn a_kill_between_the_post_and_its_answer_never_creates_twice() {
    let mut harness = Harness::start(fault::CREATE_RESPONSE_UNREAD);
    let base = harness.rest.base_url();

    // Found by name: looked up after the restart.
    harness.create(&user("byname", &base, true));
    harness.eventually_restarting("the found-by-name Request to be Ready", Duration::from_secs(120), |h| h.get("byname").is_some_and(|r| ready_and_synced(&r)));
    assert_eq!(harness.markers(), 1, "the process died once, between the POST and its answer");
    assert!(harness.server.starts() >= 2);
    assert_eq!(users_named(&harness.rest, "byname"), 1);
    assert_eq!(harness.rest.posts(), 1);

    // Found by the assigned id, whose answer was lost: fails closed.
    harness.create(&user("byid", &base, false));
    harness.eventually_restarting("the by-id Request to fail closed", Duration::from_secs(120), |h| {
        h.get("byid").is_some_and(|r| conditions::get(&r, "Synced").is_some_and(|c| c.status == "False" && c.message == CREATION_RESULT_UNKNOWN))
    });
    assert_eq!(harness.markers(), 2);
    assert_eq!(users_named(&harness.rest, "byid"), 1);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(users_named(&harness.rest, "byid"), 1, "nothing is posted again");
    assert_eq!(harness.rest.posts(), 2);
}

#[test]
fn a_kill_after_the_answer_was_saved_settles_from_it() {
    let mut harness = Harness::start(fault::AFTER_EXTERNAL_CREATE);
    let base = harness.rest.base_url();
    harness.create(&user("saved", &base, false));
    harness.eventually_restarting("the Request to be Ready", Duration::from_secs(120), |h| h.get("saved").is_some_and(|r| ready_and_synced(&r)));
    assert_eq!(harness.markers(), 1, "the process died once, before the create was recorded");
    assert_eq!(users_named(&harness.rest, "saved"), 1);
    assert_eq!(harness.rest.posts(), 1);
}
