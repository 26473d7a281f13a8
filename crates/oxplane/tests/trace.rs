//! `oxplane trace` against a real server, read through the kubeconfig as a user would: trees
//! built as real objects (the ones of Crossplane's own trace examples), printed byte for byte
//! as Crossplane prints them in every form; connection Secrets; a package with its revision;
//! and `-w` redrawing in a terminal (tmux) as a condition changes, until q.

use crate::support;

use std::process::Command;
use std::time::Duration;

use support::{Server, within};

fn crd(kind: &str, plural: &str, scope: &str) -> String {
    format!(
        "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {plural}.test.cloud
spec:
  group: test.cloud
  names: {{kind: {kind}, plural: {plural}, singular: {singular}, listKind: {kind}List}}
  scope: {scope}
  versions:
  - name: v1alpha1
    served: true
    storage: true
    subresources: {{status: {{}}}}
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
---
",
        singular = kind.to_lowercase()
    )
}

fn object(kind: &str, name: &str, namespace: Option<&str>, resource: Option<&str>, spec: &str) -> String {
    let mut out = format!("apiVersion: test.cloud/v1alpha1\nkind: {kind}\nmetadata:\n  name: {name}\n");
    if let Some(ns) = namespace {
        out.push_str(&format!("  namespace: {ns}\n"));
    }
    if let Some(r) = resource {
        out.push_str(&format!("  annotations:\n    crossplane.io/composition-resource-name: \"{r}\"\n"));
    }
    out.push_str(&format!("spec: {spec}\n---\n"));
    out
}

fn refs(names: &[(&str, &str)]) -> String {
    let items: Vec<String> =
        names.iter().map(|(k, n)| format!("{{apiVersion: test.cloud/v1alpha1, kind: {k}, name: {n}}}")).collect();
    format!("{{resourceRefs: [{}]}}", items.join(", "))
}

/// Sets `status.conditions` of an object: (type, status, reason, message).
fn conditions(server: &Server, target: &str, namespace: Option<&str>, conditions: &[(&str, &str, &str, &str)]) {
    let list: Vec<serde_json::Value> = conditions
        .iter()
        .map(|(t, s, r, m)| {
            let mut c = serde_json::json!({"type": t, "status": s, "reason": r, "lastTransitionTime": "2026-01-01T00:00:00Z"});
            if !m.is_empty() {
                c["message"] = serde_json::json!(m);
            }
            c
        })
        .collect();
    let patch = serde_json::json!({"status": {"conditions": list}}).to_string();
    let mut args = vec!["patch", target, "--subresource=status", "--type=merge", "-p", &patch];
    if let Some(ns) = namespace {
        args.extend(["-n", ns]);
    }
    server.kubectl(&args);
}

const LONG: &str = "Error with bucket child 1: Sint eu mollit tempor ad minim do commodo irure. Magna labore irure magna. Non cillum id nulla. Anim culpa do duis consectetur.";

/// Builds Crossplane's "complex resource" example as real objects: a claim, its composite, a
/// bucket with three users (one with a child of its own) and a user beside the bucket.
fn build_complex_resource(server: &Server) {
    let mut yaml = String::new();
    for (kind, plural, scope) in [
        ("ObjectStorage", "objectstorages", "Namespaced"),
        ("XObjectStorage", "xobjectstorages", "Cluster"),
        ("Bucket", "buckets", "Cluster"),
        ("User", "users", "Cluster"),
        ("UserAccessKey", "useraccesskeys", "Namespaced"),
        ("AccessKey", "accesskeys", "Namespaced"),
    ] {
        yaml.push_str(&crd(kind, plural, scope));
    }
    server.apply(&yaml);
    server.kubectl(&["wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"]);
    let mut yaml = String::new();
    yaml.push_str(&object(
        "ObjectStorage",
        "test-resource",
        Some("default"),
        None,
        "{resourceRef: {apiVersion: test.cloud/v1alpha1, kind: XObjectStorage, name: test-resource-hash}}",
    ));
    yaml.push_str(&object(
        "XObjectStorage",
        "test-resource-hash",
        None,
        None,
        &refs(&[("Bucket", "test-resource-bucket-hash"), ("User", "test-resource-user-hash")]),
    ));
    yaml.push_str(&object(
        "Bucket",
        "test-resource-bucket-hash",
        None,
        Some("one"),
        &refs(&[
            ("User", "test-resource-child-1-bucket-hash"),
            ("User", "test-resource-child-mid-bucket-hash"),
            ("User", "test-resource-child-2-bucket-hash"),
        ]),
    ));
    yaml.push_str(&object("User", "test-resource-child-1-bucket-hash", None, Some("two"), "{}"));
    yaml.push_str(&object("User", "test-resource-child-mid-bucket-hash", None, Some("three"), "{}"));
    yaml.push_str(&object(
        "User",
        "test-resource-child-2-bucket-hash",
        None,
        Some("four"),
        &refs(&[("User", "test-resource-child-2-1-bucket-hash")]),
    ));
    yaml.push_str(&object("User", "test-resource-child-2-1-bucket-hash", None, Some(""), "{}"));
    yaml.push_str(&object("User", "test-resource-user-hash", None, None, "{}"));
    server.apply(&yaml);
    let t = |ty| (ty, "True", "", "");
    conditions(server, "objectstorage/test-resource", Some("default"), &[t("Synced"), t("Ready")]);
    conditions(server, "xobjectstorage/test-resource-hash", None, &[t("Synced"), t("Ready")]);
    conditions(server, "bucket/test-resource-bucket-hash", None, &[t("Synced"), t("Ready")]);
    conditions(server, "user/test-resource-child-1-bucket-hash", None, &[t("Synced"), ("Ready", "False", "SomethingWrongHappened", LONG)]);
    conditions(
        server,
        "user/test-resource-child-mid-bucket-hash",
        None,
        &[("Synced", "False", "CantSync", "Sync error with bucket child mid"), ("Ready", "True", "AllGood", "")],
    );
    conditions(
        server,
        "user/test-resource-child-2-bucket-hash",
        None,
        &[t("Synced"), ("Ready", "False", "SomethingWrongHappened", "Error with bucket child 2")],
    );
    conditions(server, "user/test-resource-child-2-1-bucket-hash", None, &[t("Synced")]);
    conditions(server, "user/test-resource-user-hash", None, &[t("Ready"), ("Synced", "Unknown", "", "")]);
}

/// Crossplane's expected default table for the complex resource.
const COMPLEX_DEFAULT: &str = "\
NAME                                                   SYNCED    READY   STATUS
ObjectStorage/test-resource (default)                  True      True    
└─ XObjectStorage/test-resource-hash                   True      True    
   ├─ Bucket/test-resource-bucket-hash                 True      True    
   │  ├─ User/test-resource-child-1-bucket-hash        True      False   SomethingWrongHappened: ...rure magna. Non cillum id nulla. Anim culpa do duis consectetur.
   │  ├─ User/test-resource-child-mid-bucket-hash      False     True    CantSync: Sync error with bucket child mid
   │  └─ User/test-resource-child-2-bucket-hash        True      False   SomethingWrongHappened: Error with bucket child 2
   │     └─ User/test-resource-child-2-1-bucket-hash   True      -       
   └─ User/test-resource-user-hash                     Unknown   True    
";

/// Crossplane's expected wide table for the complex resource.
const COMPLEX_WIDE: &str = "\
NAME                                                   RESOURCE   SYNCED    READY   STATUS
ObjectStorage/test-resource (default)                             True      True    
└─ XObjectStorage/test-resource-hash                              True      True    
   ├─ Bucket/test-resource-bucket-hash                 one        True      True    
   │  ├─ User/test-resource-child-1-bucket-hash        two        True      False   SomethingWrongHappened: Error with bucket child 1: Sint eu mollit tempor ad minim do commodo irure. Magna labore irure magna. Non cillum id nulla. Anim culpa do duis consectetur.
   │  ├─ User/test-resource-child-mid-bucket-hash      three      False     True    CantSync: Sync error with bucket child mid
   │  └─ User/test-resource-child-2-bucket-hash        four       True      False   SomethingWrongHappened: Error with bucket child 2
   │     └─ User/test-resource-child-2-1-bucket-hash              True      -       
   └─ User/test-resource-user-hash                                Unknown   True    
";

/// Crossplane's expected dot graph for the complex resource.
const COMPLEX_DOT: &str = "graph  {\n\t\n\
\tn1[label=\"Name: ObjectStorage/test-resource\\nApiVersion: test.cloud/v1alpha1\\nNamespace: default\\nReady: True\\nSynced: True\\n\",penwidth=\"2\"];\n\
\tn2[label=\"Name: XObjectStorage/test-resource-hash\\nApiVersion: test.cloud/v1alpha1\\nReady: True\\nSynced: True\\n\",penwidth=\"2\"];\n\
\tn3[label=\"Name: Bucket/test-resource-bucket-hash\\nApiVersion: test.cloud/v1alpha1\\nReady: True\\nSynced: True\\n\",penwidth=\"2\"];\n\
\tn4[label=\"Name: User/test-resource-user-hash\\nApiVersion: test.cloud/v1alpha1\\nReady: True\\nSynced: Unknown\\n\",penwidth=\"2\"];\n\
\tn5[label=\"Name: User/test-resource-child-1-bucket-hash\\nApiVersion: test.cloud/v1alpha1\\nReady: False\\nSynced: True\\n\",penwidth=\"2\"];\n\
\tn6[label=\"Name: User/test-resource-child-mid-bucket-hash\\nApiVersion: test.cloud/v1alpha1\\nReady: True\\nSynced: False\\n\",penwidth=\"2\"];\n\
\tn7[label=\"Name: User/test-resource-child-2-bucket-hash\\nApiVersion: test.cloud/v1alpha1\\nReady: False\\nSynced: True\\n\",penwidth=\"2\"];\n\
\tn8[label=\"Name: User/test-resource-child-2-1-bucket-hash\\nApiVersion: test.cloud/v1alpha1\\nReady: \\nSynced: True\\n\",penwidth=\"2\"];\n\
\tn1--n2;\n\tn2--n3;\n\tn2--n4;\n\tn3--n5;\n\tn3--n6;\n\tn3--n7;\n\tn7--n8;\n\t\n}\n";

fn trace(server: &Server, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_oxplane")).arg("trace").args(args).env("KUBECONFIG", server.kubeconfig()).output().unwrap()
}

fn trace_ok(server: &Server, args: &[&str]) -> String {
    let out = trace(server, args);
    assert!(out.status.success(), "trace {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn trace_prints_crossplane_s_examples_byte_for_byte_and_watches() {
    let server = Server::start_with(&["--provider", "provider-nop"]);
    build_complex_resource(&server);

    // Every way of naming the type reaches the same tree.
    for args in [
        &["objectstorage/test-resource"][..],
        &["objectstorages.test.cloud", "test-resource", "-n", "default"],
        &["ObjectStorage.v1alpha1.test.cloud/test-resource"],
    ] {
        assert_eq!(trace_ok(&server, args), COMPLEX_DEFAULT, "{args:?}");
    }
    assert_eq!(trace_ok(&server, &["objectstorage/test-resource", "-o", "wide"]), COMPLEX_WIDE);
    assert_eq!(trace_ok(&server, &["objectstorage/test-resource", "-o", "dot"]), COMPLEX_DOT);
    // The alias of Crossplane's CLI from v2.4.
    let out = Command::new(env!("CARGO_BIN_EXE_oxplane"))
        .args(["resource", "trace", "objectstorage/test-resource", "--kubeconfig"])
        .arg(server.kubeconfig())
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), COMPLEX_DEFAULT);

    // JSON and YAML carry the whole objects as the server returns them.
    let json: serde_json::Value = serde_json::from_str(&trace_ok(&server, &["objectstorage/test-resource", "-o", "json"])).unwrap();
    let bucket = &json["children"][0]["children"][0];
    assert_eq!(bucket["object"]["metadata"]["annotations"]["crossplane.io/composition-resource-name"], "one");
    assert!(bucket["object"]["metadata"]["uid"].is_string());
    assert_eq!(bucket["children"][2]["children"][0]["object"]["metadata"]["name"], "test-resource-child-2-1-bucket-hash");
    let yaml: serde_json::Value = serde_saphyr::from_str(&trace_ok(&server, &["objectstorage/test-resource", "-o", "yaml"])).unwrap();
    assert_eq!(yaml, json);

    // Without a name: every object of the kind, one table.
    let all = trace_ok(&server, &["user"]);
    assert_eq!(all.lines().count(), 1 + 5 + 1, "{all}"); // the header, five users, one child
    assert!(all.lines().nth(1).unwrap().starts_with("User/test-resource-child-1-bucket-hash        True      False   SomethingWrongHappened: ..."), "{all}");
    let json: serde_json::Value = serde_json::from_str(&trace_ok(&server, &["user", "-o", "json"])).unwrap();
    assert_eq!(json["items"].as_array().unwrap().len(), 5);

    // Crossplane's documented example with a connection Secret (-s), a missing object and errors.
    server.apply(
        "apiVersion: test.cloud/v1alpha1
kind: UserAccessKey
metadata: {name: my-keys, namespace: default}
spec:
  crossplane:
    resourceRefs: [{apiVersion: test.cloud/v1alpha1, kind: AccessKey, name: my-keys-14c0578cad85}]
  writeConnectionSecretToRef: {name: my-keys-connection-details}
---
apiVersion: test.cloud/v1alpha1
kind: AccessKey
metadata: {name: my-keys-14c0578cad85, namespace: default}
spec: {}
---
apiVersion: v1
kind: Secret
metadata: {name: my-keys-connection-details, namespace: default}
",
    );
    let available = [("Synced", "True", "ReconcileSuccess", ""), ("Ready", "True", "Available", "")];
    conditions(&server, "useraccesskey/my-keys", Some("default"), &available);
    conditions(&server, "accesskey/my-keys-14c0578cad85", Some("default"), &available);
    assert_eq!(
        trace_ok(&server, &["useraccesskey", "my-keys", "-s"]),
        "\
NAME                                             SYNCED   READY   STATUS
UserAccessKey/my-keys (default)                  True     True    Available
├─ AccessKey/my-keys-14c0578cad85 (default)      True     True    Available
└─ Secret/my-keys-connection-details (default)   -        -       
"
    );
    server.kubectl(&["delete", "secret", "my-keys-connection-details"]);
    let missing = trace_ok(&server, &["useraccesskey/my-keys", "-s"]);
    assert!(missing.ends_with("└─ Secret/my-keys-connection-details (default)   -        -       Error: secrets \"my-keys-connection-details\" not found\n"), "{missing}");
    let out = trace(&server, &["useraccesskey/nobody"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot get requested resource: kind=UserAccessKey name=nobody namespace=default (verify context, namespace, and that the resource exists)"));
    let out = trace(&server, &["nosuchkind/x"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot get mapping for resource: the server doesn't have a resource type \"nosuchkind\""));

    // A package: the Provider and its active revision, in the package table.
    within(Duration::from_secs(60), "provider-nop to be healthy", || {
        server.get(&["provider", "provider-nop"]).is_some_and(|p| support::is_true(&p, "Healthy"))
    });
    let package = trace_ok(&server, &["provider/provider-nop"]);
    let lines: Vec<Vec<&str>> = package.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(lines[0], ["NAME", "VERSION", "INSTALLED", "HEALTHY", "STATE", "STATUS"], "{package}");
    let provider = server.get(&["provider", "provider-nop"]).unwrap();
    let version = provider["spec"]["package"].as_str().unwrap().rsplit_once(':').unwrap().1.to_string();
    let reason = support::condition(&provider, "Healthy").unwrap()["reason"].as_str().unwrap().to_string();
    assert_eq!(lines[1], ["Provider/provider-nop", &version, "True", "True", "-", &reason], "{package}");
    assert!(lines[2][0].starts_with("└─") && lines[2][1].starts_with("ProviderRevision/provider-nop-"), "{package}");
    assert!(lines[2].contains(&"Active"), "{package}");
    let wide = trace_ok(&server, &["provider/provider-nop", "-o", "wide", "--show-package-revisions", "none"]);
    assert_eq!(wide.lines().count(), 2, "{wide}");
    assert!(wide.lines().next().unwrap().starts_with("NAME                    PACKAGE"), "{wide}");

    watch_redraws_in_a_terminal(&server);
}

/// `trace -w` in tmux: the tree is drawn, redrawn when a condition changes, and q quits.
fn watch_redraws_in_a_terminal(server: &Server) {
    let socket = format!("oxplane-trace-{}", std::process::id());
    let tmux = |args: &[&str]| Command::new("tmux").arg("-L").arg(&socket).args(args).output().unwrap();
    let command = format!(
        "KUBECONFIG={} {} trace objectstorage/test-resource -w; echo trace-exited; sleep 120",
        server.kubeconfig().display(),
        env!("CARGO_BIN_EXE_oxplane")
    );
    let started = tmux(&["new-session", "-d", "-x", "250", "-y", "40", "-s", "trace", &command]);
    assert!(started.status.success(), "{}", String::from_utf8_lossy(&started.stderr));
    let screen = || String::from_utf8_lossy(&tmux(&["capture-pane", "-p", "-t", "trace"]).stdout).into_owned();
    let trimmed = |s: &str| s.lines().map(str::trim_end).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("\n");
    let expected = trimmed(COMPLEX_DEFAULT);
    within(Duration::from_secs(60), "the tree to be drawn", || trimmed(&screen()) == expected);
    conditions(server, "user/test-resource-child-2-bucket-hash", None, &[("Synced", "True", "", ""), ("Ready", "True", "Fixed", "")]);
    let redrawn = trimmed(&COMPLEX_DEFAULT.replace(
        "   │  └─ User/test-resource-child-2-bucket-hash        True      False   SomethingWrongHappened: Error with bucket child 2",
        "   │  └─ User/test-resource-child-2-bucket-hash        True      True    Fixed",
    ));
    within(Duration::from_secs(60), "the tree to be redrawn in place", || trimmed(&screen()) == redrawn);
    tmux(&["send-keys", "-t", "trace", "q"]);
    within(Duration::from_secs(60), "q to end the watch", || screen().contains("trace-exited"));
    assert!(screen().starts_with("NAME "), "the redraw replaced the first frame: {}", screen());
    tmux(&["kill-server"]);
}
