//! Crossplane conformance, end to end with the real kubectl: manifests written for Crossplane,
//! applied unchanged, get what Crossplane gives them. One test per defect found that way:
//! XRDs refused at admission by the CRDs they would generate, namespaced Usages of their own
//! namespace, spec fields and generations only users change, provider CRDs owned by their
//! revision with a revision history, common annotations, every 422 with its causes (on every
//! write path, for built-in and custom kinds), field managers named as Crossplane's, and a
//! missing function reported by its real cause.

use crate::crossplane_crds::{invalid, unexpected_answer};
use crate::support;

use std::time::Duration;

use serde_json::Value;
use support::{Server, condition, is_true, within};

const T: Duration = Duration::from_secs(60);

/// Managers of the object's `managedFields`, as `manager/operation`.
fn managers(object: &Value) -> Vec<String> {
    object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| format!("{}/{}", m["manager"].as_str().unwrap_or_default(), m["operation"].as_str().unwrap_or_default()))
        .collect()
}

fn get_full(server: &Server, args: &[&str]) -> Value {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend(["-o", "json", "--show-managed-fields"]);
    serde_json::from_str(&server.kubectl(&all)).unwrap()
}

#[test]
fn an_xrd_whose_claim_crd_would_be_invalid_is_refused_at_admission() {
    let server = Server::start();
    let xrd = "apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata:
  name: xnopresourcestwo.nop.example.org
spec:
  group: nop.example.org
  names:
    kind: XNopResourceTwo
    plural: xnopresourcestwo
  claimNames:
    kind: NopResourceTwo
    plural: Nopresourcestwo
  versions:
  - name: v1alpha1
    served: true
    referenceable: true
    schema:
      openAPIV3Schema:
        type: object
";
    let refused = server.kubectl_fails(&["apply", "-f", "-"], xrd);
    assert!(refused.contains(r#"The CompositeResourceDefinition "xnopresourcestwo.nop.example.org" is invalid"#), "{refused}");
    assert!(refused.contains(r#"spec.claimNames.plural: Invalid value: "Nopresourcestwo""#), "{refused}");
    assert!(server.get(&["xrd", "xnopresourcestwo.nop.example.org"]).is_none(), "nothing is stored");
    // The same XRD with a lowercase claim plural is accepted and offers its claim.
    server.apply(&xrd.replace("plural: Nopresourcestwo", "plural: nopresourcestwo"));
    server.kubectl(&["wait", "--for=condition=Offered", "xrd/xnopresourcestwo.nop.example.org", "--timeout=60s"]);
}

#[test]
fn a_namespaced_usage_of_its_own_namespace_becomes_ready() {
    let server = Server::start();
    server.apply(
        "apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: default
  labels: {tier: critical}
---
apiVersion: protection.crossplane.io/v1beta1
kind: Usage
metadata:
  name: protect-settings
  namespace: default
spec:
  of:
    apiVersion: v1
    kind: ConfigMap
    resourceSelector:
      matchLabels: {tier: critical}
  reason: production settings
",
    );
    within(T, "the Usage to become Ready", || server.get(&["usages.protection.crossplane.io", "protect-settings", "-n", "default"]).is_some_and(|u| is_true(&u, "Ready")));
    let usage = server.get(&["usages.protection.crossplane.io", "protect-settings", "-n", "default"]).unwrap();
    assert_eq!(usage["spec"]["of"]["resourceRef"], serde_json::json!({"name": "settings"}), "the Usage's own namespace is not written");
    let refused = server.kubectl_fails(&["delete", "configmap", "settings", "-n", "default"], "");
    assert!(refused.contains("production settings"), "{refused}");
}

#[test]
fn a_selector_that_matches_nothing_is_reported_as_json() {
    let server = Server::start();
    server.apply(
        "apiVersion: protection.crossplane.io/v1beta1
kind: Usage
metadata:
  name: protect-nothing
  namespace: default
spec:
  of:
    apiVersion: v1
    kind: ConfigMap
    resourceSelector:
      matchLabels: {tier: critical}
  reason: nothing to protect yet
",
    );
    within(T, "the Usage to report the selector", || {
        server
            .get(&["usages.protection.crossplane.io", "protect-nothing", "-n", "default"])
            .and_then(|u| condition(&u, "Synced"))
            .is_some_and(|c| c["message"].as_str().unwrap_or_default().contains(r#"no "ConfigMap" found matching labels: {"tier":"critical"}"#))
    });
    // The scan every end-to-end test runs as it ends finds nothing here either.
    assert_eq!(server.debug_formatted_messages(), Vec::<String>::new());
}

/// A v2 XRD defining the namespaced `XApp`.
const XAPP_XRD: &str = "apiVersion: apiextensions.crossplane.io/v2
kind: CompositeResourceDefinition
metadata:
  name: xapps.example.org
spec:
  scope: Namespaced
  group: example.org
  names: {kind: XApp, plural: xapps}
  versions:
  - name: v1
    served: true
    referenceable: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object}
";

#[test]
fn controllers_leave_spec_and_generation_to_users() {
    let server = Server::start();
    server.apply(
        "apiVersion: pkg.crossplane.io/v1beta1
kind: Function
metadata:
  name: function-patch-and-transform
spec:
  package: xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform:v0.8.2
",
    );
    server.apply(XAPP_XRD);
    server.kubectl(&["wait", "--for=condition=Healthy", "function/function-patch-and-transform", "--timeout=60s"]);
    server.kubectl(&["wait", "--for=condition=Established", "xrd/xapps.example.org", "--timeout=60s"]);
    for (kind, name) in [("function", "function-patch-and-transform"), ("xrd", "xapps.example.org")] {
        let object = get_full(&server, &[kind, name]);
        assert_eq!(object["metadata"]["generation"], 1, "{kind}/{name} was created once and never changed by a user");
        if kind == "xrd" {
            assert!(object["spec"].get("defaultCompositeDeletePolicy").is_none(), "a v2 XRD gets no claim-only field: {object}");
        }
        // Only the user's manager owns spec fields.
        for entry in object["metadata"]["managedFields"].as_array().unwrap() {
            if entry["manager"] != "kubectl-client-side-apply" {
                assert!(entry["fieldsV1"].get("f:spec").is_none(), "{kind}/{name}: {entry}");
            }
        }
    }
}

const PROVIDER: &str = "apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-nop
spec:
  package: xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0
  commonLabels:
    team: platform
  commonAnnotations:
    owner.example.org/contact: platform@example.org
";

/// The owner reference of `object` that is its controller.
fn controller_of(object: &Value) -> Option<Value> {
    object["metadata"]["ownerReferences"].as_array()?.iter().find(|r| r["controller"] == true).cloned()
}

#[test]
fn provider_crds_are_owned_by_the_active_revision_and_history_is_kept() {
    let server = Server::start();
    server.apply(PROVIDER);
    server.kubectl(&["wait", "--for=condition=Healthy", "provider/provider-nop", "--timeout=60s"]);
    let first = server.get(&["provider", "provider-nop"]).unwrap()["status"]["currentRevision"].as_str().unwrap().to_string();
    let crd = server.get(&["crd", "nopresources.nop.crossplane.io"]).unwrap();
    let owner = controller_of(&crd).expect("the CRD has a controller");
    assert_eq!((owner["kind"].as_str(), owner["name"].as_str()), (Some("ProviderRevision"), Some(first.as_str())), "{crd}");
    let owners = crd["metadata"]["ownerReferences"].as_array().unwrap();
    assert!(owners.iter().any(|o| o["kind"] == "Provider" && o["name"] == "provider-nop"), "{owners:?}");

    // An upgrade moves the controller reference and keeps one inactive revision.
    server.apply(&PROVIDER.replace("v0.4.0", "v0.4.1"));
    within(T, "the upgrade", || {
        let provider = server.get(&["provider", "provider-nop"]).unwrap();
        provider["status"]["currentRevision"].as_str() != Some(first.as_str()) && is_true(&provider, "Healthy")
    });
    let second = server.get(&["provider", "provider-nop"]).unwrap()["status"]["currentRevision"].as_str().unwrap().to_string();
    within(T, "the CRD's controller to move to the new revision", || {
        server.get(&["crd", "nopresources.nop.crossplane.io"]).and_then(|c| controller_of(&c)).is_some_and(|o| o["name"] == second.as_str())
    });
    within(T, "the old revision to become inactive", || {
        server.get(&["providerrevision", &first]).is_some_and(|r| r["spec"]["desiredState"] == "Inactive")
    });

    // A third version: only revisionHistoryLimit (1) inactive revisions stay.
    server.apply(&PROVIDER.replace("v0.4.0", "v0.4.2"));
    within(T, "the oldest revision to be collected", || {
        let names = server.kubectl(&["get", "providerrevisions", "-o", "name"]);
        names.lines().count() == 2 && !names.contains(&first) && names.contains(&second)
    });
}

#[test]
fn common_labels_and_annotations_reach_the_revision_and_the_crds() {
    let server = Server::start();
    server.apply(PROVIDER);
    server.kubectl(&["wait", "--for=condition=Healthy", "provider/provider-nop", "--timeout=60s"]);
    let revisions = server.get(&["providerrevisions"]).unwrap();
    let revision = &revisions["items"][0];
    assert_eq!(revision["spec"]["commonLabels"]["team"], "platform", "{revision}");
    assert_eq!(revision["spec"]["commonAnnotations"]["owner.example.org/contact"], "platform@example.org", "{revision}");
    let crd = server.get(&["crd", "nopresources.nop.crossplane.io"]).unwrap();
    assert_eq!(crd["metadata"]["labels"]["team"], "platform");
    assert_eq!(crd["metadata"]["annotations"]["owner.example.org/contact"], "platform@example.org");
}

#[test]
fn a_rejected_server_side_apply_says_why() {
    let server = Server::start();
    let composition = "apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: twice
spec:
  compositeTypeRef: {apiVersion: example.org/v1, kind: XApp}
  mode: Pipeline
  pipeline:
  - step: render
    functionRef: {name: function-patch-and-transform}
  - step: render
    functionRef: {name: function-auto-ready}
";
    for args in [&["apply", "--server-side", "-f", "-"][..], &["apply", "-f", "-"][..], &["create", "-f", "-"][..]] {
        let refused = server.kubectl_fails(args, composition);
        let (_, why) = refused.split_once(r#"The Composition "twice" is invalid: "#).unwrap_or_else(|| panic!("{args:?}: {refused}"));
        assert!(why.contains("spec.pipeline") && why.contains("render"), "{args:?}: {refused}");
    }
    // The Status itself carries the causes, as kube-apiserver's do.
    let out = server.kubectl_command(&["apply", "--server-side", "-f", "-", "-v=8"]).stdin(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let out = {
        use std::io::Write;
        let mut out = out;
        out.stdin.take().unwrap().write_all(composition.as_bytes()).unwrap();
        out.wait_with_output().unwrap()
    };
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains(r#"\"code\":422"#) && log.contains(r#"\"causes\":[{"#), "{log}");
}

#[test]
fn controller_writes_are_recorded_under_crossplane_field_managers() {
    let server = Server::start();
    server.apply(PROVIDER);
    server.kubectl(&["wait", "--for=condition=Healthy", "provider/provider-nop", "--timeout=60s"]);
    let provider = get_full(&server, &["provider", "provider-nop"]);
    let found = managers(&provider);
    assert!(found.iter().any(|m| m == "crossplane/Update"), "{found:?}");
    for kind in ["provider", "providerrevisions", "crd"] {
        let text = server.kubectl(&["get", kind, "-o", "json", "--show-managed-fields"]);
        assert!(!text.contains(r#""manager": "unknown""#), "{kind}: {text}");
    }
}

#[test]
fn a_missing_function_is_reported_on_the_composite_by_its_cause() {
    let server = Server::start();
    server.apply(
        "apiVersion: pkg.crossplane.io/v1
kind: Function
metadata:
  name: function-does-not-exist
spec:
  package: 127.0.0.1:1/crossplane-contrib/function-does-not-exist:v0.1.0
---
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: app
spec:
  compositeTypeRef: {apiVersion: example.org/v1, kind: XApp}
  mode: Pipeline
  pipeline:
  - step: render
    functionRef: {name: function-does-not-exist}
",
    );
    server.apply(XAPP_XRD);
    server.kubectl(&["wait", "--for=condition=Established", "xrd/xapps.example.org", "--timeout=60s"]);
    // The Function says Installed and Healthy, both False, with why.
    within(T, "the Function's conditions", || {
        server.get(&["function", "function-does-not-exist"]).is_some_and(|f| {
            let (installed, healthy) = (condition(&f, "Installed"), condition(&f, "Healthy"));
            installed.is_some_and(|c| c["status"] == "False" && c["reason"] == "UnpackingPackage")
                && healthy.is_some_and(|c| c["status"] == "False" && c["message"].as_str().unwrap_or_default().starts_with("cannot unpack package: "))
        })
    });
    let table = server.kubectl(&["get", "function", "function-does-not-exist"]);
    let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(row[1..3], ["False", "False"], "INSTALLED and HEALTHY are never blank: {table}");
    server.apply("apiVersion: example.org/v1\nkind: XApp\nmetadata:\n  name: app\n  namespace: default\nspec: {}\n");
    within(T, "the composite to name the cause", || {
        server.get(&["xapp", "app", "-n", "default"]).and_then(|xr| condition(&xr, "Synced")).is_some_and(|c| {
            let message = c["message"].as_str().unwrap_or_default();
            c["status"] == "False" && message.contains(r#"Function "function-does-not-exist" is not installed: cannot unpack package"#)
        })
    });
}

/// The shell block of the README's "Your first ten minutes", run line by line as written
/// (in the example's folder, against a fresh server): every command must succeed.
#[test]
fn every_getting_started_command_of_the_readme_works_as_written() {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let (_, section) = readme.split_once("## Your first ten minutes").expect("the README has its getting-started section");
    let (_, block) = section.split_once("```sh\n").unwrap();
    let (block, _) = block.split_once("```").unwrap();
    let server = Server::start();
    let mut ran = 0;
    for line in block.lines().map(str::trim).filter(|l| l.starts_with("kubectl ")) {
        let out = std::process::Command::new("sh")
            .args(["-c", line])
            .current_dir(root.join("examples/getting-started"))
            .env("KUBECONFIG", server.kubeconfig())
            .env("HOME", server.dir())
            .output()
            .unwrap();
        assert!(out.status.success(), "{line}\n{}", String::from_utf8_lossy(&out.stderr));
        ran += 1;
    }
    assert!(ran >= 8, "{block}");
    let size = server.kubectl(&["get", "app", "my-app", "-o", "jsonpath={.status.databaseSize}"]);
    assert_eq!(size, "db.t3.medium");
}

/// Every write path (create, update, merge and JSON patch, server-side and client-side apply)
/// refuses an invalid built-in object and an invalid custom resource with a 422 whose causes
/// kubectl prints after "is invalid:" (kube-apiserver's `details.causes`; without them kubectl
/// prints the bare "is invalid").
#[test]
fn every_write_path_says_why_it_refuses() {
    let server = Server::start();
    let config_map = |labels: &str| format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: default\n  labels: {{{labels}}}\ndata: {{a: b}}\n");
    let environment = |data: &str| format!("apiVersion: apiextensions.crossplane.io/v1beta1\nkind: EnvironmentConfig\nmetadata:\n  name: settings\ndata: {data}\n");
    let bad_label = r#"metadata.labels: Invalid value: "not valid!""#;
    let bad_data = r#"data: Invalid value: "integer""#;
    // (what, valid manifest, invalid manifest, object, merge patch, JSON patch, the cause kubectl prints)
    let kinds = [
        ("ConfigMap", config_map("tier: gold"), config_map("tier: 'not valid!'"), "configmap/settings", r#"{"metadata":{"labels":{"tier":"not valid!"}}}"#, r#"[{"op":"replace","path":"/metadata/labels/tier","value":"not valid!"}]"#, bad_label),
        ("EnvironmentConfig", environment("{tier: gold}"), environment("1"), "environmentconfig/settings", r#"{"data":1}"#, r#"[{"op":"replace","path":"/data","value":1}]"#, bad_data),
    ];
    let mut wrong = Vec::new();
    for (kind, valid, refused, object, merge, json_patch, cause) in &kinds {
        let expected = invalid(kind, "settings", cause);
        let mut check = |path: &str, answer: Result<String, String>| wrong.extend(unexpected_answer(&format!("{kind} {path}"), answer, &expected));
        check("create", server.kubectl_try(&["create", "-f", "-"], refused));
        check("server-side apply (create)", server.kubectl_try(&["apply", "--server-side", "-f", "-"], refused));
        server.apply(valid);
        check("update", server.kubectl_try(&["replace", "-f", "-"], refused));
        check("merge patch", server.kubectl_try(&["patch", object, "-n", "default", "--type=merge", "-p", merge], ""));
        check("JSON patch", server.kubectl_try(&["patch", object, "-n", "default", "--type=json", "-p", json_patch], ""));
        check("client-side apply (patch)", server.kubectl_try(&["apply", "-f", "-"], refused));
        check("server-side apply (patch)", server.kubectl_try(&["apply", "--server-side", "--force-conflicts", "-f", "-"], refused));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
