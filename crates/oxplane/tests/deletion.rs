//! Deletion policies that tell the truth (FD-01, FD-02, FD-03, FD-05), end to end with the
//! real kubectl: a claim composes NopResources (or FakeThings in the local fake cloud), gets
//! its connection secret, and when deleted shows `Deleting` at once — the claim, its composite
//! and the composed resources — naming what holds the deletion until it lets go.

use crate::support;

use std::time::{Duration, Instant};

use oxplane_providers::fakecloud::cloud::FakeCloud;
use serde_json::Value;
use support::{Server, condition, is_true, within};

const T_REACT: Duration = Duration::from_secs(10);
const T_DEL: Duration = Duration::from_secs(30);

const FUNCTIONS: &str = "apiVersion: pkg.crossplane.io/v1
kind: Function
metadata:
  name: function-patch-and-transform
spec:
  package: xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform:v0.8.2
";

fn xrd(policy: &str) -> String {
    format!(
        "apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata:
  name: xdatabases.example.org
spec:
  group: example.org
  names: {{kind: XDatabase, plural: xdatabases}}
  claimNames: {{kind: Database, plural: databases}}
  defaultCompositeDeletePolicy: {policy}
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
              user: {{type: string}}
"
    )
}

/// Two NopResources held by a test finalizer, publishing a password the claim receives.
const NOP_COMPOSITION: &str = r#"
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata: {name: xdatabases}
spec:
  compositeTypeRef: {apiVersion: example.org/v1alpha1, kind: XDatabase}
  writeConnectionSecretsToNamespace: default
  mode: Pipeline
  pipeline:
  - step: compose
    functionRef: {name: function-patch-and-transform}
    input:
      apiVersion: pt.fn.crossplane.io/v1beta1
      kind: Resources
      resources:
      - name: role
        base: &nop
          apiVersion: nop.crossplane.io/v1alpha1
          kind: NopResource
          metadata:
            finalizers: [test.oxplane.io/hold]
          spec:
            forProvider:
              conditionAfter: [{time: 0s, conditionType: Ready, conditionStatus: "True"}]
              connectionDetails: [{name: password, value: s3cr3t}]
            writeConnectionSecretToRef: {namespace: default}
        patches:
        - {type: CombineFromComposite, combine: {variables: [{fromFieldPath: metadata.uid}], strategy: string, string: {fmt: "%s-role"}}, toFieldPath: spec.writeConnectionSecretToRef.name}
        connectionDetails:
        - {name: password, type: FromConnectionSecretKey, fromConnectionSecretKey: password}
        - {name: user, type: FromFieldPath, fromFieldPath: spec.forProvider.fields.user}
        - {name: endpoint, type: FromValue, value: db.example.org}
      - name: database
        base:
          apiVersion: nop.crossplane.io/v1alpha1
          kind: NopResource
          metadata:
            finalizers: [test.oxplane.io/hold]
          spec:
            forProvider:
              conditionAfter: [{time: 0s, conditionType: Ready, conditionStatus: "True"}]
  - step: ready
    functionRef: {name: function-auto-ready}
"#;

fn claim(name: &str, user: &str, policy: Option<&str>) -> String {
    let policy = policy.map(|p| format!("\n  compositeDeletePolicy: {p}")).unwrap_or_default();
    format!(
        "apiVersion: example.org/v1alpha1\nkind: Database\nmetadata:\n  name: {name}\n  namespace: team-a\nspec:\n  user: {user}\n  writeConnectionSecretToRef:\n    name: {name}-conn{policy}\n"
    )
}




fn deleting_with(object: &Value, message: impl Fn(&str) -> bool) -> bool {
    condition(object, "Ready").is_some_and(|c| c["status"] == "False" && c["reason"] == "Deleting" && message(c["message"].as_str().unwrap_or_default()))
}

/// Every object of the tree with a deletionTimestamp must not say Ready=True.
fn assert_no_ready_while_deleting(server: &Server) {
    for kind in ["databases.example.org", "xdatabases.example.org", "nopresources"] {
        let Some(list) = server.get(&[kind, "-A"]) else { continue };
        for item in list["items"].as_array().unwrap() {
            if item["metadata"]["deletionTimestamp"].is_string() {
                assert!(
                    condition(item, "Ready").is_none_or(|c| c["status"] != "True"),
                    "{kind} {} is deleting but Ready=True",
                    item["metadata"]["name"]
                );
            }
        }
    }
}

fn release_holds(server: &Server) {
    for nop in server.kubectl(&["get", "nopresources", "-o", "name"]).lines() {
        let object = server.get(&[nop]).unwrap();
        let kept: Vec<&Value> = object["metadata"]["finalizers"].as_array().unwrap().iter().filter(|f| *f != "test.oxplane.io/hold").collect();
        let patch = serde_json::json!({"metadata": {"finalizers": kept}}).to_string();
        server.kubectl(&["patch", nop, "--type=merge", "-p", &patch]);
    }
}

fn nop_plane(policy: &str) -> Server {
    let server = Server::start_with(&["--provider", "provider-nop"]);
    server.kubectl_stdin(&["apply", "-f", "-"], &format!("{FUNCTIONS}---\napiVersion: pkg.crossplane.io/v1\nkind: Function\nmetadata:\n  name: function-auto-ready\nspec:\n  package: xpkg.crossplane.io/crossplane-contrib/function-auto-ready:v0.5.0\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-a\n"));
    server.kubectl(&["wait", "--for=condition=Healthy", "provider/provider-nop", "function/function-auto-ready", "function/function-patch-and-transform", "--timeout=60s"]);
    server.kubectl_stdin(&["apply", "-f", "-"], &xrd(policy));
    server.kubectl(&["wait", "--for=condition=Offered", "xrd/xdatabases.example.org", "--timeout=60s"]);
    server.kubectl_stdin(&["apply", "-f", "-"], NOP_COMPOSITION);
    server
}

#[test]
fn a_claim_composes_gets_its_secret_and_fd01_shows_deleting_at_once() {
    let server = nop_plane("Foreground");
    server.kubectl_stdin(&["apply", "-f", "-"], &claim("c1", "alice", None));
    server.kubectl(&["wait", "--for=condition=Ready", "database/c1", "-n", "team-a", "--timeout=60s"]);
    let claims: Vec<Vec<String>> = server.kubectl(&["get", "databases", "-n", "team-a"]).lines().map(|l| l.split_whitespace().map(str::to_string).collect()).collect();
    assert_eq!(claims[0], ["NAME", "SYNCED", "READY", "CONNECTION-SECRET", "AGE"]);
    assert_eq!(claims[1][..4], ["c1", "True", "True", "c1-conn"]);
    // The connection secret appears in the claim's namespace with the composition's keys.
    within(T_REACT, "the claim's secret", || server.get(&["secret", "c1-conn", "-n", "team-a"]).is_some());
    let secret = server.get(&["secret", "c1-conn", "-n", "team-a"]).unwrap();
    let mut keys: Vec<&str> = secret["data"].as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, ["endpoint", "password"], "user is not set, so not published");
    assert_eq!(secret["type"], "connection.crossplane.io/v1alpha1");
    let nops = server.get(&["nopresources", "-l", "crossplane.io/claim-name=c1"]).unwrap();
    assert_eq!(nops["items"].as_array().unwrap().len(), 2);
    assert!(nops["items"].as_array().unwrap().iter().all(|n| n["metadata"]["labels"]["crossplane.io/claim-namespace"] == "team-a"));

    // FD-01: delete; within 5 s everything says Deleting.
    let xr_name = server.get(&["database", "c1", "-n", "team-a"]).unwrap()["spec"]["resourceRef"]["name"].as_str().unwrap().to_string();
    let asked = Instant::now();
    server.kubectl(&["delete", "database", "c1", "-n", "team-a", "--wait=false"]);
    within(Duration::from_secs(5), "the claim, composite and resources deleting", || {
        let claim = server.get(&["database", "c1", "-n", "team-a"]);
        let xr = server.get(&["xdatabase", &xr_name]);
        let nops = server.get(&["nopresources", "-l", "crossplane.io/claim-name=c1"]);
        claim.is_some_and(|c| deleting_with(&c, |_| true) && condition(&c, "Synced").is_some_and(|s| s["status"] == "True"))
            && xr.is_some_and(|x| deleting_with(&x, |_| true))
            && nops.is_some_and(|n| n["items"].as_array().unwrap().iter().all(|i| i["metadata"]["deletionTimestamp"].is_string()))
    });
    assert!(asked.elapsed() < Duration::from_secs(5));
    let events = server.kubectl(&["get", "events", "-n", "team-a", "--field-selector", "involvedObject.name=c1", "-o", "json"]);
    assert!(events.contains("DeleteCompositeResource"), "{events}");
    // The blockers are named, and nothing in the tree is Ready while it is deleting.
    within(T_REACT, "the claim naming its blockers", || {
        server.get(&["database", "c1", "-n", "team-a"]).is_some_and(|c| {
            deleting_with(&c, |m| m.contains("waiting for 2 composed resources to be deleted") && m.contains("(waiting for finalizers to be removed: test.oxplane.io/hold)"))
        })
    });
    for _ in 0..6 {
        assert_no_ready_while_deleting(&server);
        std::thread::sleep(Duration::from_millis(500));
    }
    release_holds(&server);
    within(T_DEL, "the claim to go", || {
        assert_no_ready_while_deleting(&server);
        server.get(&["database", "c1", "-n", "team-a"]).is_none()
    });
    assert!(server.get(&["xdatabase", &xr_name]).is_none());
    assert!(server.kubectl(&["get", "nopresources", "-o", "name"]).trim().is_empty());
}

/// kill -9 during a Foreground claim deletion, at several moments: right after the delete was
/// accepted, while it waits for held resources, and while they are let go. After each restart
/// the deletion carries on and nothing in the tree says Ready while it is deleting.
#[test]
fn a_foreground_claim_deletion_survives_kill_9_and_stays_truthful() {
    let mut server = nop_plane("Foreground");
    server.apply(&claim("c1", "dave", None));
    server.kubectl(&["wait", "--for=condition=Ready", "database/c1", "-n", "team-a", "--timeout=60s"]);
    let xr_name = server.get(&["database", "c1", "-n", "team-a"]).unwrap()["spec"]["resourceRef"]["name"].as_str().unwrap().to_string();
    server.kubectl(&["delete", "database", "c1", "-n", "team-a", "--wait=false"]);
    // Killed within moments of the request: whatever was written is all there is.
    for pause in [Duration::ZERO, Duration::from_millis(150), Duration::from_millis(600)] {
        std::thread::sleep(pause);
        server.kill_and_restart();
        assert_no_ready_while_deleting(&server);
    }
    // The tree is deleting, and says what it waits for.
    within(T_REACT, "the claim naming its blockers after restarts", || {
        server.get(&["database", "c1", "-n", "team-a"]).is_some_and(|c| deleting_with(&c, |m| m.contains("waiting for 2 composed resources to be deleted")))
            && server.get(&["xdatabase", &xr_name]).is_some_and(|x| deleting_with(&x, |m| m.contains("test.oxplane.io/hold")))
    });
    server.kill_and_restart();
    for _ in 0..4 {
        assert_no_ready_while_deleting(&server);
        assert!(server.get(&["database", "c1", "-n", "team-a"]).is_some_and(|c| deleting_with(&c, |_| true)));
        std::thread::sleep(Duration::from_millis(250));
    }
    // Let go, and be killed while the tree goes.
    release_holds(&server);
    std::thread::sleep(Duration::from_millis(100));
    server.kill_and_restart();
    within(T_DEL, "the claim to go after the restarts", || {
        assert_no_ready_while_deleting(&server);
        server.get(&["database", "c1", "-n", "team-a"]).is_none()
    });
    assert!(server.get(&["xdatabase", &xr_name]).is_none());
    within(T_REACT, "no NopResource left", || server.kubectl(&["get", "nopresources", "-o", "name"]).trim().is_empty());
}

#[test]
fn fd03_a_background_deletion_lets_the_claim_go_while_resources_finish() {
    let server = nop_plane("Foreground");
    server.kubectl_stdin(&["apply", "-f", "-"], &claim("c1", "bob", Some("Background")));
    server.kubectl(&["wait", "--for=condition=Ready", "database/c1", "-n", "team-a", "--timeout=60s"]);
    server.kubectl(&["delete", "database", "c1", "-n", "team-a", "--wait=false"]);
    within(T_DEL, "the claim to go", || {
        assert_no_ready_while_deleting(&server);
        server.get(&["database", "c1", "-n", "team-a"]).is_none()
    });
    // The held resources are still going, on their own.
    within(T_REACT, "the resources deleting", || {
        server.get(&["nopresources"]).is_some_and(|l| {
            let items = l["items"].as_array().unwrap().clone();
            items.len() == 2 && items.iter().all(|i| i["metadata"]["deletionTimestamp"].is_string())
        })
    });
    assert_no_ready_while_deleting(&server);
    release_holds(&server);
    within(T_DEL, "the resources to go", || server.kubectl(&["get", "nopresources", "-o", "name"]).trim().is_empty());
}

/// The local fake cloud, the binary with provider-fakecloud, and claims of FakeThings.
struct CloudPlane {
    rt: tokio::runtime::Runtime,
    cloud: FakeCloud,
    server: Server,
}

fn cloud_plane(deterministic: bool, deletion: Duration) -> CloudPlane {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let cloud = rt.block_on(FakeCloud::start(Duration::from_millis(300))).unwrap();
    cloud.set_deletion(deletion);
    let server = Server::start_with(&["--provider", "provider-fakecloud"]);
    server.kubectl_stdin(&["apply", "-f", "-"], &format!("{FUNCTIONS}---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-a\n"));
    server.kubectl(&["wait", "--for=condition=Healthy", "provider/provider-fakecloud", "function/function-patch-and-transform", "--timeout=60s"]);
    server.kubectl_stdin(
        &["apply", "-f", "-"],
        &format!(
            "apiVersion: fakecloud.oxplane.io/v1alpha1\nkind: ProviderConfig\nmetadata:\n  name: default\nspec:\n  endpoint: {}\n  deterministicNames: {deterministic}\n",
            cloud.endpoint()
        ),
    );
    server.kubectl_stdin(&["apply", "-f", "-"], &xrd("Background"));
    server.kubectl(&["wait", "--for=condition=Offered", "xrd/xdatabases.example.org", "--timeout=60s"]);
    // One FakeThing named (externally) after the claim's user; Ready when the cloud says so.
    server.kubectl_stdin(
        &["apply", "-f", "-"],
        r#"
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata: {name: xdatabases}
spec:
  compositeTypeRef: {apiVersion: example.org/v1alpha1, kind: XDatabase}
  mode: Pipeline
  pipeline:
  - step: compose
    functionRef: {name: function-patch-and-transform}
    input:
      apiVersion: pt.fn.crossplane.io/v1beta1
      kind: Resources
      resources:
      - name: role
        base:
          apiVersion: fakecloud.oxplane.io/v1alpha1
          kind: FakeThing
          spec: {forProvider: {size: 1}}
        patches:
        - {fromFieldPath: spec.user, toFieldPath: "metadata.annotations[crossplane.io/external-name]"}
"#,
    );
    CloudPlane { rt, cloud, server }
}

#[test]
fn fd02_a_blocked_deletion_names_its_blocker_until_released() {
    let plane = cloud_plane(false, Duration::ZERO);
    let server = &plane.server;
    server.kubectl_stdin(&["apply", "-f", "-"], &claim("c1", "carol", Some("Foreground")).replace("  user: carol\n", ""));
    within(Duration::from_secs(60), "c1 Ready", || server.get(&["database", "c1", "-n", "team-a"]).is_some_and(|c| is_true(&c, "Ready")));
    let xr_name = server.get(&["database", "c1", "-n", "team-a"]).unwrap()["spec"]["resourceRef"]["name"].as_str().unwrap().to_string();
    plane.cloud.fail_deletes(Some("permission denied"));
    server.kubectl(&["delete", "database", "c1", "-n", "team-a", "--wait=false"]);
    let named = |object: &Value| deleting_with(object, |m| m.contains("waiting for 1 composed resource to be deleted: FakeThing/") && m.ends_with("(cannot delete external resource: permission denied)"));
    within(T_REACT * 2, "the claim and the composite naming the blocker", || {
        server.get(&["database", "c1", "-n", "team-a"]).is_some_and(|c| named(&c)) && server.get(&["xdatabase", &xr_name]).is_some_and(|x| named(&x))
    });
    // kubectl's own wait gives up, while the claim says why.
    let out = server.kubectl_try(&["delete", "database", "c1", "-n", "team-a", "--timeout=5s"], "");
    assert!(out.is_err(), "the deletion cannot finish while the cloud refuses");
    assert!(server.get(&["database", "c1", "-n", "team-a"]).is_some_and(|c| named(&c)));
    // A Warning event on the claim names the blocker that stands, once (not on every requeue,
    // nor for the passing states of the deletion).
    let warnings = || {
        // An empty list prints nothing with --ignore-not-found.
        let events = server.get(&["events", "-n", "team-a", "--field-selector", "involvedObject.name=c1,type=Warning"]).unwrap_or_default();
        events["items"].as_array().into_iter().flatten().filter(|e| e["reason"] == "DeleteCompositeResource").cloned().collect::<Vec<Value>>()
    };
    within(T_REACT, "a warning naming the blocker", || !warnings().is_empty());
    std::thread::sleep(Duration::from_secs(6));
    let blocked = warnings();
    assert_eq!(blocked.len(), 1, "{blocked:?}");
    let message = blocked[0]["message"].as_str().unwrap();
    assert!(message.starts_with("Deletion is blocked: waiting for 1 composed resource to be deleted: FakeThing/"), "{message}");
    assert!(message.ends_with("(cannot delete external resource: permission denied)"), "{message}");
    assert_eq!(blocked[0]["count"], 1, "repeated within a minute: {}", blocked[0]);
    plane.cloud.fail_deletes(None);
    within(T_DEL, "everything to go", || server.get(&["database", "c1", "-n", "team-a"]).is_none());
    within(T_DEL, "no FakeThing left", || server.kubectl(&["get", "fakethings.fakecloud.oxplane.io", "-o", "name"]).trim().is_empty());
    assert!(plane.cloud.live().is_empty());
    drop(plane.rt);
}

#[test]
fn fd05_a_claim_recreated_while_its_old_tree_deletes_waits_for_the_name() {
    let plane = cloud_plane(true, Duration::from_secs(6));
    let server = &plane.server;
    server.kubectl_stdin(&["apply", "-f", "-"], &claim("c1", "alice", None));
    within(Duration::from_secs(60), "c1 Ready", || server.get(&["database", "c1", "-n", "team-a"]).is_some_and(|c| is_true(&c, "Ready")));
    let old_xr = server.get(&["database", "c1", "-n", "team-a"]).unwrap()["spec"]["resourceRef"]["name"].as_str().unwrap().to_string();
    let old_thing = server.get(&["fakethings.fakecloud.oxplane.io"]).unwrap()["items"][0].clone();
    assert_eq!(old_thing["metadata"]["annotations"]["crossplane.io/external-name"], "alice");

    server.kubectl(&["delete", "database", "c1", "-n", "team-a", "--wait=false"]);
    within(T_DEL, "the same claim accepted again", || server.kubectl_try(&["create", "-f", "-"], &claim("c1", "alice", None)).is_ok());
    within(T_REACT, "the new claim bound to a new composite", || {
        server.get(&["database", "c1", "-n", "team-a"]).is_some_and(|c| c["spec"]["resourceRef"]["name"].as_str().is_some_and(|n| n != old_xr))
    });
    // The new FakeThing waits for the old one to release "alice" instead of adopting it.
    within(T_REACT, "the new resource waiting for the name", || {
        server.get(&["fakethings.fakecloud.oxplane.io"]).is_some_and(|l| {
            l["items"].as_array().unwrap().iter().any(|t| {
                t["metadata"]["uid"] != old_thing["metadata"]["uid"]
                    && condition(t, "Ready").is_some_and(|r| {
                        r["status"] == "False"
                            && r["message"].as_str().is_some_and(|m| m.starts_with("waiting for external name \"alice\" to be released by FakeThing/") && m.ends_with("(deleting)"))
                    })
                    && condition(t, "Synced").is_some_and(|s| s["status"] == "True")
            })
        })
    });
    within(Duration::from_secs(60), "the new claim Ready", || server.get(&["database", "c1", "-n", "team-a"]).is_some_and(|c| is_true(&c, "Ready")));
    let things = server.get(&["fakethings.fakecloud.oxplane.io"]).unwrap();
    let items = things["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "the old resource is gone");
    let new_uid = items[0]["metadata"]["uid"].as_str().unwrap();
    let live = plane.cloud.live();
    assert_eq!(live.len(), 1, "{live:?}");
    assert_eq!(live[0]["id"], "alice");
    assert_eq!(live[0]["tags"]["crossplane-mr-uid"], new_uid, "the live alice belongs to the new resource");
    drop(plane.rt);
}
