//! Usages end to end with the real kubectl (US-01, US-03, US-04, US-07): a claim composes a
//! `used` and a `using` NopResource and a Usage between them. Replacing or removing the Usage
//! in the Composition lets it go at once while the used resource stays protected as long as
//! any Usage still wants it; deleting the claim deletes the using resource before the used
//! one; a standalone Usage protects until it is deleted.

use crate::support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{Server, condition, is_true, within};

const T_REACT: Duration = Duration::from_secs(10);
const T_DEL: Duration = Duration::from_secs(30);
const NOP: &str = "nop.crossplane.io/v1alpha1";
const USAGES: &str = "usages.apiextensions.crossplane.io";
const HOLD: &str = "test.oxplane.io/hold";

const PLANE: &str = "apiVersion: pkg.crossplane.io/v1
kind: Function
metadata:
  name: function-patch-and-transform
spec:
  package: xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform:v0.8.2
---
apiVersion: pkg.crossplane.io/v1
kind: Function
metadata:
  name: function-auto-ready
spec:
  package: xpkg.crossplane.io/crossplane-contrib/function-auto-ready:v0.5.0
---
apiVersion: v1
kind: Namespace
metadata:
  name: team-a
---
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata:
  name: xstacks.example.org
spec:
  group: example.org
  names: {kind: XStack, plural: xstacks}
  claimNames: {kind: Stack, plural: stacks}
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
";

/// A composed NopResource labelled with its role, Ready at once.
fn nop(role: &str, held: bool) -> Value {
    let mut base = json!({
        "apiVersion": NOP, "kind": "NopResource",
        "metadata": {"labels": {"role": role}},
        "spec": {"forProvider": {"conditionAfter": [{"time": "0s", "conditionType": "Ready", "conditionStatus": "True"}]}}
    });
    if held {
        base["metadata"]["finalizers"] = json!([HOLD]);
    }
    json!({"name": role, "base": base})
}

/// A composed Usage of `used` by `using`, both picked by label among the composite's resources.
fn usage(resource_name: &str, version: &str) -> Value {
    let pick = |role: &str| json!({"apiVersion": NOP, "kind": "NopResource", "resourceSelector": {"matchControllerRef": true, "matchLabels": {"role": role}}});
    json!({"name": resource_name, "base": {
        "apiVersion": "apiextensions.crossplane.io/v1beta1", "kind": "Usage",
        "metadata": {"labels": {"version": version}},
        "spec": {"of": pick("used"), "by": pick("using")}
    }})
}

/// The Composition of XStacks: `used`, `using` (held by a test finalizer when asked) and the
/// given Usages `(resource name, version label)`.
/// The Composition: function-patch-and-transform, then function-auto-ready.
fn composition(usages: &[(&str, &str)], hold_using: bool) -> String {
    let mut resources = vec![nop("used", false), nop("using", hold_using)];
    resources.extend(usages.iter().map(|(name, version)| usage(name, version)));
    let mut spec = json!({"compositeTypeRef": {"apiVersion": "example.org/v1alpha1", "kind": "XStack"}});
    spec["mode"] = json!("Pipeline");
    spec["pipeline"] = json!([
        {"step": "compose", "functionRef": {"name": "function-patch-and-transform"},
         "input": {"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources", "resources": resources}},
        {"step": "ready", "functionRef": {"name": "function-auto-ready"}}
    ]);
    json!({"apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition", "metadata": {"name": "xstacks"}, "spec": spec}).to_string()
}

fn claim(policy: &str) -> String {
    format!("apiVersion: example.org/v1alpha1\nkind: Stack\nmetadata:\n  name: c1\n  namespace: team-a\nspec:\n  compositeDeletePolicy: {policy}\n")
}

/// A server with provider-nop, the functions and the XRD, and claim `c1` Ready.
fn ready_claim(usages: &[(&str, &str)], hold_using: bool, policy: &str) -> Server {
    let server = Server::start_with(&["--provider", "provider-nop"]);
    server.apply(PLANE);
    server.kubectl(&["wait", "--for=condition=Healthy", "provider/provider-nop", "function/function-auto-ready", "function/function-patch-and-transform", "--timeout=60s"]);
    server.kubectl(&["wait", "--for=condition=Offered", "xrd/xstacks.example.org", "--timeout=60s"]);
    server.apply(&composition(usages, hold_using));
    server.apply(&claim(policy));
    server.kubectl(&["wait", "--for=condition=Ready", "stack/c1", "-n", "team-a", "--timeout=60s"]);
    server
}

/// The NopResource with this role, if it exists.
fn role(server: &Server, role: &str) -> Option<Value> {
    server.get(&["nopresources", "-l", &format!("role={role}")]).and_then(|l| l["items"].as_array()?.first().cloned())
}

/// The Usages labelled `version`.
fn usages(server: &Server, version: &str) -> Vec<Value> {
    server.get(&[USAGES, "-l", &format!("version={version}")]).map(|l| l["items"].as_array().unwrap().clone()).unwrap_or_default()
}

fn in_use(object: &Value) -> bool {
    object["metadata"]["labels"]["crossplane.io/in-use"] == "true"
}

fn deleting(object: &Value) -> bool {
    object["metadata"]["deletionTimestamp"].is_string()
}

/// The reasons of the events recorded on an object.
fn event_reasons(server: &Server, name: &str) -> Vec<String> {
    let selector = format!("involvedObject.name={name}");
    let events: Value = serde_json::from_str(&server.kubectl(&["get", "events", "-A", "--field-selector", &selector, "-o", "json"])).unwrap();
    events["items"].as_array().unwrap().iter().map(|e| e["reason"].as_str().unwrap_or_default().to_string()).collect()
}

/// `kubectl get --watch` of one object, printing its resourceVersion and in-use label.
struct LabelWatch {
    child: std::process::Child,
}

impl LabelWatch {
    fn start(server: &Server, object: &str) -> LabelWatch {
        let template = r#"{.metadata.resourceVersion} {.metadata.labels.crossplane\.io/in-use}{"\n"}"#;
        let child = server
            .kubectl_command(&["get", object, "--watch", "-o", &format!("jsonpath={template}")])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // The first line is the object as it is now: the watch has started once it is printed.
        std::thread::sleep(Duration::from_secs(1));
        LabelWatch { child }
    }

    /// Stops the watch; every version it saw, as (resourceVersion, label value).
    fn stop(mut self) -> Vec<(String, String)> {
        use std::io::Read;
        self.child.kill().unwrap();
        let mut out = String::new();
        self.child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
        self.child.wait().unwrap();
        out.lines().map(|l| l.split_once(' ').map(|(v, l)| (v.to_string(), l.to_string())).unwrap_or((l.to_string(), String::new()))).collect()
    }
}

/// Nothing of the tree is left: no claim, composite, NopResource or Usage.
fn tree_gone(server: &Server) -> bool {
    ["stacks.example.org", "xstacks.example.org", "nopresources", USAGES]
        .iter()
        .all(|kind| server.kubectl(&["get", kind, "-A", "-o", "name"]).trim().is_empty())
}

/// US-01 then US-03: the Usage is replaced (the used resource never loses its protection and
/// the old Usage never waits), then removed (the protection goes), then the claim is deleted.
fn replace_then_remove(policy: &str) {
    let server = ready_claim(&[("u-initial", "initial")], false, policy);
    let columns: Vec<String> = server.kubectl(&["get", USAGES]).lines().next().unwrap().split_whitespace().map(str::to_string).collect();
    assert_eq!(columns, ["NAME", "DETAILS", "READY", "AGE"]);
    let initial = usages(&server, "initial");
    assert_eq!(initial.len(), 1);
    let initial = &initial[0];
    assert!(is_true(initial, "Ready"), "{initial}");
    let used = role(&server, "used").unwrap();
    let using = role(&server, "using").unwrap();
    assert!(in_use(&used), "{used}");
    assert_eq!(
        initial["metadata"]["annotations"]["crossplane.io/usage-details"],
        format!("NopResource/{} uses NopResource/{}", using["metadata"]["name"].as_str().unwrap(), used["metadata"]["name"].as_str().unwrap())
    );
    let initial_name = initial["metadata"]["name"].as_str().unwrap().to_string();

    // US-01: a new revision replaces u-initial by u-updated. A watch sees every version of
    // the used resource, so even a short loss of the label would show.
    let watch = LabelWatch::start(&server, &format!("nopresource/{}", used["metadata"]["name"].as_str().unwrap()));
    server.apply(&composition(&[("u-updated", "updated")], false));
    let deadline = Instant::now() + T_REACT + Duration::from_secs(30);
    let mut updated_ready_after = None;
    let started = Instant::now();
    loop {
        let used = role(&server, "used").unwrap();
        assert!(in_use(&used), "the used resource lost its protection while a Usage was replaced: {used}");
        let initial_gone = usages(&server, "initial").is_empty();
        if updated_ready_after.is_none() && usages(&server, "updated").first().is_some_and(|u| is_true(u, "Ready")) {
            updated_ready_after = Some(started.elapsed());
        }
        if initial_gone && updated_ready_after.is_some() {
            break;
        }
        assert!(Instant::now() < deadline, "u-initial gone: {initial_gone}, u-updated ready: {updated_ready_after:?}");
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(updated_ready_after.unwrap() < T_REACT, "u-updated Ready after {updated_ready_after:?}");
    // Sampled a little longer: the protection stays.
    for _ in 0..4 {
        assert!(in_use(&role(&server, "used").unwrap()));
        std::thread::sleep(Duration::from_millis(500));
    }
    let versions = watch.stop();
    assert!(!versions.is_empty(), "the watch saw nothing");
    assert!(versions.iter().all(|(_, label)| label == "true"), "a version of the used resource without crossplane.io/in-use: {versions:?}");
    let reasons = event_reasons(&server, &initial_name);
    assert!(!reasons.iter().any(|r| r == "WaitingUsingDeleted"), "the replaced Usage waited: {reasons:?}");

    // US-03: the Usage is removed; the used resource loses its protection.
    server.apply(&composition(&[], false));
    within(T_REACT, "the used resource unprotected", || role(&server, "used").is_some_and(|u| !in_use(&u)));
    within(T_REACT, "no Usage left", || server.kubectl(&["get", USAGES, "-o", "name"]).trim().is_empty());
    server.kubectl(&["delete", "stack", "c1", "-n", "team-a", "--wait=false"]);
    within(T_DEL, "the whole tree gone", || tree_gone(&server));
}

#[test]
fn us01_us03_a_replaced_then_removed_usage_in_a_pipeline_lets_go_foreground() {
    replace_then_remove("Foreground");
}

#[test]
fn us01_us03_a_replaced_then_removed_usage_in_a_pipeline_lets_go_background() {
    replace_then_remove("Background");
}

/// US-04: deleting the claim deletes `using` first; `used` is not deleted while `using`
/// exists, and goes after it.
fn deletion_keeps_order(policy: &str) {
    let server = ready_claim(&[("u", "initial")], true, policy);
    let usage_name = usages(&server, "initial")[0]["metadata"]["name"].as_str().unwrap().to_string();
    server.kubectl(&["delete", "stack", "c1", "-n", "team-a", "--wait=false"]);
    within(T_REACT, "the using resource deleting", || role(&server, "using").is_some_and(|u| deleting(&u)));
    // The used resource's deletion is refused while the using one is there.
    within(T_REACT * 2, "a refused deletion of the used resource", || {
        role(&server, "used").is_some_and(|u| u["metadata"]["annotations"]["usage.crossplane.io/deletion-attempt-with-policy"].is_string())
    });
    for _ in 0..8 {
        let used = role(&server, "used").expect("the used resource stays while the using one exists");
        assert!(!deleting(&used), "the used resource is deleting while its user exists: {used}");
        assert!(in_use(&used));
        let usage = usages(&server, "initial");
        assert_eq!(usage.len(), 1, "the Usage stays while the using resource exists");
        if deleting(&usage[0]) {
            assert!(event_reasons(&server, &usage_name).iter().any(|r| r == "WaitingUsingDeleted"));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    // The XR says what its deletion waits for.
    if policy == "Foreground" {
        let xr = server.get(&["xstacks"]).unwrap()["items"][0].clone();
        let ready = condition(&xr, "Ready").unwrap();
        assert_eq!(ready["reason"], "Deleting", "{xr}");
        let message = ready["message"].as_str().unwrap();
        assert!(message.contains(&format!("its deletion is blocked by Usage/{usage_name})")) && message.contains(HOLD), "{message}");
    }

    // Release the user: it goes, then the used resource, then everything.
    let using = role(&server, "using").unwrap();
    let name = format!("nopresource/{}", using["metadata"]["name"].as_str().unwrap());
    server.kubectl(&["patch", &name, "--type=merge", "-p", r#"{"metadata":{"finalizers":null}}"#]);
    let deadline = Instant::now() + T_DEL + Duration::from_secs(30);
    while role(&server, "using").is_some() {
        let used = role(&server, "used").unwrap();
        assert!(!deleting(&used), "the used resource is deleting while its user exists: {used}");
        assert!(Instant::now() < deadline, "the using resource did not go");
        std::thread::sleep(Duration::from_millis(100));
    }
    within(T_DEL + Duration::from_secs(30), "the whole tree gone", || tree_gone(&server));
}

#[test]
fn us04_a_background_claim_deletion_deletes_the_user_before_the_used() {
    deletion_keeps_order("Background");
}

#[test]
fn us04_a_foreground_claim_deletion_deletes_the_user_before_the_used() {
    deletion_keeps_order("Foreground");
}

/// US-07 with the v2 kinds: a standalone `protection.crossplane.io` Usage (namespaced) and a
/// ClusterUsage protect until they are deleted, and deleting them does not wait for the user;
/// a Usage with `replayDeletion` deletes what it protected once it goes, if that was refused.
#[test]
fn us07_a_standalone_usage_protects_until_it_is_deleted() {
    let server = Server::start();
    server.apply(
        "apiVersion: pkg.crossplane.io/v1\nkind: Provider\nmetadata:\n  name: provider-nop\nspec:\n  package: xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.5.0\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-a\n",
    );
    server.kubectl(&["wait", "--for=condition=Healthy", "provider/provider-nop", "--timeout=60s"]);
    let ready = r#"{conditionAfter: [{time: 0s, conditionType: Ready, conditionStatus: "True"}]}"#;
    server.apply(&format!(
        "apiVersion: {NOP}\nkind: NopResource\nmetadata: {{name: db, namespace: team-a}}\nspec: {{forProvider: {ready}}}\n---\napiVersion: {NOP}\nkind: NopResource\nmetadata: {{name: app, namespace: team-a}}\nspec: {{forProvider: {ready}}}\n---\napiVersion: {NOP}\nkind: ClusterNopResource\nmetadata: {{name: network}}\nspec: {{forProvider: {ready}}}\n"
    ));
    server.apply(&format!(
        "apiVersion: protection.crossplane.io/v1beta1\nkind: Usage\nmetadata: {{name: app-uses-db, namespace: team-a}}\nspec:\n  of: {{apiVersion: {NOP}, kind: NopResource, resourceRef: {{name: db}}}}\n  by: {{apiVersion: {NOP}, kind: NopResource, resourceRef: {{name: app}}}}\n---\napiVersion: protection.crossplane.io/v1beta1\nkind: ClusterUsage\nmetadata: {{name: keep-network}}\nspec:\n  of: {{apiVersion: {NOP}, kind: ClusterNopResource, resourceRef: {{name: network}}}}\n  reason: shared by every team\n  replayDeletion: true\n"
    ));
    server.kubectl(&["wait", "--for=condition=Ready", "usage.protection.crossplane.io/app-uses-db", "-n", "team-a", "--timeout=30s"]);
    server.kubectl(&["wait", "--for=condition=Ready", "clusterusage/keep-network", "--timeout=30s"]);
    let db = server.get(&["nopresource", "db", "-n", "team-a"]).unwrap();
    assert!(in_use(&db), "{db}");
    let columns = server.kubectl(&["get", "clusterusages"]);
    assert!(columns.lines().nth(1).unwrap().contains("shared by every team"), "{columns}");

    // Deleting a used resource is refused with Crossplane's message.
    let refused = server.kubectl_fails(&["delete", "nopresource", "db", "-n", "team-a"], "");
    assert!(
        refused.contains(r#"This resource is in-use by 1 usage(s), including the *v1beta1.Usage "app-uses-db" (in namespace "team-a") by resource NopResource/app."#),
        "{refused}"
    );
    let refused = server.kubectl_fails(&["delete", "clusternopresource", "network"], "");
    assert!(refused.contains(r#"including the *v1beta1.ClusterUsage "keep-network" with reason: "shared by every team"."#), "{refused}");
    let db = server.get(&["nopresource", "db", "-n", "team-a"]).unwrap();
    assert!(!deleting(&db));
    assert_eq!(db["metadata"]["annotations"]["usage.crossplane.io/deletion-attempt-with-policy"], "Background");

    // Deleting the standalone Usage while its user exists: it goes at once, and so does the
    // protection; the used resource can then be deleted.
    server.kubectl(&["delete", "usage.protection.crossplane.io", "app-uses-db", "-n", "team-a", "--wait=false"]);
    within(T_REACT, "the Usage gone", || server.get(&["usage.protection.crossplane.io", "app-uses-db", "-n", "team-a"]).is_none());
    assert!(server.get(&["nopresource", "app", "-n", "team-a"]).is_some_and(|a| !deleting(&a)));
    within(T_REACT, "db unprotected", || server.get(&["nopresource", "db", "-n", "team-a"]).is_some_and(|d| !in_use(&d)));
    server.kubectl(&["delete", "nopresource", "db", "-n", "team-a", "--timeout=30s"]);
    // The ClusterUsage replays the refused deletion when it goes.
    server.kubectl(&["delete", "clusterusage", "keep-network", "--timeout=30s"]);
    within(T_REACT, "the refused deletion of network replayed", || server.get(&["clusternopresource", "network"]).is_none());
}

/// kill -9 during a Usage-protected deletion: after the used resource's deletion was refused,
/// and again while the user goes. After each restart the used resource is still protected
/// while its user exists, and in the end the whole tree goes, the used resource last.
#[test]
fn a_usage_protected_deletion_survives_kill_9() {
    let mut server = ready_claim(&[("u", "initial")], true, "Background");
    server.kubectl(&["delete", "stack", "c1", "-n", "team-a", "--wait=false"]);
    within(T_REACT * 2, "a refused deletion of the used resource", || {
        role(&server, "used").is_some_and(|u| u["metadata"]["annotations"]["usage.crossplane.io/deletion-attempt-with-policy"].is_string())
    });
    for _ in 0..2 {
        server.kill_and_restart();
        for _ in 0..4 {
            let used = role(&server, "used").expect("the used resource stays while the using one exists");
            assert!(!deleting(&used) && in_use(&used), "{used}");
            assert!(role(&server, "using").is_some_and(|u| deleting(&u)));
            std::thread::sleep(Duration::from_millis(250));
        }
    }
    let using = role(&server, "using").unwrap();
    let name = format!("nopresource/{}", using["metadata"]["name"].as_str().unwrap());
    server.kubectl(&["patch", &name, "--type=merge", "-p", r#"{"metadata":{"finalizers":null}}"#]);
    std::thread::sleep(Duration::from_millis(100));
    server.kill_and_restart();
    let deadline = Instant::now() + T_DEL + Duration::from_secs(30);
    while role(&server, "using").is_some() {
        assert!(role(&server, "used").is_some_and(|u| !deleting(&u)), "the used resource went before its user");
        assert!(Instant::now() < deadline, "the using resource did not go");
        std::thread::sleep(Duration::from_millis(100));
    }
    within(T_DEL + Duration::from_secs(30), "the whole tree gone after the restarts", || tree_gone(&server));
}
