//! Crossplane's own examples of trace output: the same trees, printed byte for byte (the
//! single-tree table and dot forms are checked end to end against a server, in tests/trace.rs).

use serde_json::{Value, json};

use super::*;

fn cond(type_: &str, status: &str, reason: &str, message: &str) -> Value {
    let mut c = json!({"type": type_, "status": status, "reason": reason, "lastTransitionTime": null});
    if !message.is_empty() {
        c["message"] = json!(message);
    }
    c
}

fn object(kind: &str, name: &str, namespace: Option<&str>, resource: Option<&str>, conditions: Vec<Value>) -> Value {
    let mut o = json!({"apiVersion": "test.cloud/v1alpha1", "kind": kind, "metadata": {"name": name},
        "status": {"conditions": conditions}});
    if let Some(ns) = namespace {
        o["metadata"]["namespace"] = json!(ns);
    }
    if let Some(r) = resource {
        o["metadata"]["annotations"] = json!({"crossplane.io/composition-resource-name": r});
    }
    o
}

fn node(object: Value, children: Vec<Node>) -> Node {
    Node { object, error: None, children }
}

const LONG: &str = "Error with bucket child 1: Sint eu mollit tempor ad minim do commodo irure. Magna labore irure magna. Non cillum id nulla. Anim culpa do duis consectetur.";

/// Crossplane's "complex resource": a claim, its composite, a bucket with three users and a
/// user beside it.
pub fn complex_resource() -> Node {
    let t = |ty| cond(ty, "True", "", "");
    node(
        object("ObjectStorage", "test-resource", Some("default"), None, vec![t("Synced"), t("Ready")]),
        vec![node(
            object("XObjectStorage", "test-resource-hash", None, None, vec![t("Synced"), t("Ready")]),
            vec![
                node(
                    object("Bucket", "test-resource-bucket-hash", None, Some("one"), vec![t("Synced"), t("Ready")]),
                    vec![
                        node(
                            object("User", "test-resource-child-1-bucket-hash", None, Some("two"),
                                vec![t("Synced"), cond("Ready", "False", "SomethingWrongHappened", LONG)]),
                            vec![],
                        ),
                        node(
                            object("User", "test-resource-child-mid-bucket-hash", None, Some("three"),
                                vec![cond("Synced", "False", "CantSync", "Sync error with bucket child mid"), cond("Ready", "True", "AllGood", "")]),
                            vec![],
                        ),
                        node(
                            object("User", "test-resource-child-2-bucket-hash", None, Some("four"),
                                vec![t("Synced"), cond("Ready", "False", "SomethingWrongHappened", "Error with bucket child 2")]),
                            vec![node(object("User", "test-resource-child-2-1-bucket-hash", None, Some(""), vec![t("Synced")]), vec![])],
                        ),
                    ],
                ),
                node(object("User", "test-resource-user-hash", None, None, vec![t("Ready"), cond("Synced", "Unknown", "", "")]), vec![]),
            ],
        )],
    )
}

/// Crossplane's "simple resource".
pub fn simple_resource() -> Node {
    let t = |ty| cond(ty, "True", "", "");
    node(
        object("SimpleResource", "simple-resource", Some("default"), None, vec![t("Synced"), t("Ready")]),
        vec![node(
            object("XSimpleResource", "simple-resource-hash", None, None, vec![t("Synced"), t("Ready")]),
            vec![node(object("Something", "simple-resource-something-hash", None, Some("something"), vec![t("Synced"), t("Ready")]), vec![])],
        )],
    )
}

fn package(kind: &str, name: &str, image_field: &str, image: &str, state: Option<&str>, conditions: Vec<Value>, children: Vec<Node>) -> Node {
    let mut o = json!({"apiVersion": "pkg.crossplane.io/v1", "kind": kind, "metadata": {"name": name},
        "spec": {image_field: image}, "status": {"conditions": conditions}});
    if let Some(s) = state {
        o["spec"]["desiredState"] = json!(s);
    }
    node(o, children)
}

/// Crossplane's "complex package": a Configuration, its revision and dependencies.
pub fn complex_package() -> Node {
    let active = || cond("Installed", "True", "ActivePackageRevision", "");
    let healthy = || cond("Healthy", "True", "HealthyPackageRevision", "");
    package("Configuration", "platform-ref-aws", "package", "xpkg.crossplane.io/crossplane/platform-ref-aws:v0.9.0", None, vec![active(), healthy()], vec![
        package("ConfigurationRevision", "platform-ref-aws-9ad7b5db2899", "image", "xpkg.crossplane.io/crossplane/platform-ref-aws:v0.9.0", Some("Active"), vec![active(), healthy()], vec![]),
        package("Configuration", "crossplane-configuration-aws-network", "package", "xpkg.crossplane.io/crossplane/configuration-aws-network:v0.7.0", None, vec![active(), healthy()], vec![
            package("ConfigurationRevision", "crossplane-configuration-aws-network-97be9100cfe1", "image", "xpkg.crossplane.io/crossplane/configuration-aws-network:v0.7.0", Some("Active"), vec![active(), healthy()], vec![]),
            package("Provider", "crossplane-provider-aws-ec2", "package", "xpkg.crossplane.io/crossplane/provider-aws-ec2:v0.47.0", None,
                vec![active(), cond("Healthy", "Unknown", "UnknownPackageRevisionHealth", "cannot resolve package dependencies: incompatible dependencies: [xpkg.crossplane.io/crossplane-contrib/provider-helm xpkg.crossplane.io/crossplane-contrib/provider-kubernetes]")],
                vec![
                    package("ProviderRevision", "crossplane-provider-aws-ec2-9ad7b5db2899", "image", "xpkg.crossplane.io/crossplane/provider-aws-ec2:v0.47.0", Some("Active"),
                        vec![active(), cond("Healthy", "False", "UnhealthyPackageRevision", "post establish runtime hook failed for package: provider package deployment has no condition of type \"Available\" yet")], vec![]),
                    package("Provider", "crossplane-provider-aws-something", "package", "xpkg.crossplane.io/crossplane/provider-aws-something:v0.47.0", None, vec![active()], vec![]),
                ]),
        ]),
    ])
}

#[test]
fn a_list_is_one_table() {
    // Crossplane's list example: the second tree is aligned with the first.
    let expected_tail = "\
SimpleResource/simple-resource (default)                           True      True    
└─ XSimpleResource/simple-resource-hash                            True      True    
   └─ Something/simple-resource-something-hash         something   True      True    
";
    let out = print_list(Output::Wide, &[complex_resource(), simple_resource()]);
    assert_eq!(out.lines().count(), 1 + 8 + 3, "{out}");
    assert!(out.starts_with("NAME                                                   RESOURCE    SYNCED    READY   STATUS\n"), "{out}");
    assert!(out.ends_with(expected_tail), "{out}");
}

#[test]
fn package_tables_match_crossplane() {
    let expected = "\
NAME                                                                            VERSION   INSTALLED   HEALTHY   STATE    STATUS                                                                                              
Configuration/platform-ref-aws                                                  v0.9.0    True        True      -        HealthyPackageRevision                                                                              
├─ ConfigurationRevision/platform-ref-aws-9ad7b5db2899                          v0.9.0    True        True      Active   HealthyPackageRevision                                                                              
└─ Configuration/crossplane-configuration-aws-network                           v0.7.0    True        True      -        HealthyPackageRevision                                                                              
   ├─ ConfigurationRevision/crossplane-configuration-aws-network-97be9100cfe1   v0.7.0    True        True      Active   HealthyPackageRevision                                                                              
   └─ Provider/crossplane-provider-aws-ec2                                      v0.47.0   True        Unknown   -        UnknownPackageRevisionHealth: ...-helm xpkg.crossplane.io/crossplane-contrib/provider-kubernetes]   
      ├─ ProviderRevision/crossplane-provider-aws-ec2-9ad7b5db2899              v0.47.0   True        False     Active   UnhealthyPackageRevision: ...ider package deployment has no condition of type \"Available\" yet       
      └─ Provider/crossplane-provider-aws-something                             v0.47.0   True        -         -        ActivePackageRevision                                                                               
";
    assert_eq!(print(Output::Default, &complex_package()), expected);
    let wide = print(Output::Wide, &complex_package());
    let first = wide.lines().nth(1).unwrap();
    assert!(first.starts_with("Configuration/platform-ref-aws                                                  xpkg.crossplane.io/crossplane/platform-ref-aws            v0.9.0    True"), "{first}");
    assert!(wide.contains("UnknownPackageRevisionHealth: cannot resolve package dependencies: incompatible dependencies: [xpkg.crossplane.io/crossplane-contrib/provider-helm xpkg.crossplane.io/crossplane-contrib/provider-kubernetes]   \n"));
}

#[test]
fn dot_matches_crossplane() {
    let list = print_list(Output::Dot, &[complex_resource(), simple_resource()]);
    // Nodes are ordered by their numbers as strings: n11 (id "10") comes after n2.
    let order: Vec<&str> = list.lines().filter_map(|l| l.strip_prefix('\t')?.split('[').next()).filter(|l| !l.contains("--") && l.starts_with('n')).collect();
    assert_eq!(order, ["n1", "n2", "n11", "n3", "n4", "n5", "n6", "n7", "n8", "n9", "n10"]);
    assert!(list.contains("\tn10--n11;\n"));
    let packages = print(Output::Dot, &complex_package());
    assert!(packages.contains("\tn2[label=\"Name: platform-ref-aws-9ad7b5db2899\\nApiVersion: pkg.crossplane.io/v1\\nPackage: xpkg.crossplane.io/crossplane/platform-ref-aws:v0.9.0\\nHealthy: True\\nState: HealthyPackageRevision\\n\",penwidth=\"2\"];\n"), "{packages}");
    assert!(packages.contains("\tn7[label=\"Name: crossplane-provider-aws-something\\nApiVersion: pkg.crossplane.io/v1\\nPackage: xpkg.crossplane.io/crossplane/provider-aws-something:v0.47.0\\nInstalled: True\\nHealthy: \\n\",penwidth=\"2\"];\n"));
}

#[test]
fn json_is_object_then_children_with_sorted_keys() {
    let out = print(Output::Json, &complex_resource());
    assert!(out.starts_with("{\n  \"object\": {\n    \"apiVersion\": \"test.cloud/v1alpha1\",\n    \"kind\": \"ObjectStorage\",\n    \"metadata\": {\n      \"name\": \"test-resource\",\n      \"namespace\": \"default\"\n    },\n"), "{out}");
    assert!(out.contains("\n  },\n  \"children\": [\n    {\n      \"object\": {\n"), "{out}");
    assert!(out.ends_with("\n}\n"));
    let parsed: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(parsed["children"][0]["children"][0]["children"][2]["children"][0]["object"]["metadata"]["name"], "test-resource-child-2-1-bucket-hash");
    let list: Value = serde_json::from_str(&print_list(Output::Json, &[complex_resource(), simple_resource()])).unwrap();
    assert_eq!(list["items"][1]["object"]["kind"], "SimpleResource");
    assert_eq!(print_list(Output::Json, &[]), "{\n  \"items\": []\n}\n");
}

#[test]
fn yaml_reads_back_as_the_json_tree() {
    let yaml_text = print(Output::Yaml, &complex_resource());
    assert!(yaml_text.starts_with("children:\n- children:\n  - children:\n"), "{yaml_text}");
    assert!(yaml_text.contains("status: \"True\"\n"), "{yaml_text}");
    let from_yaml: Value = serde_saphyr::from_str(&yaml_text).unwrap();
    let from_json: Value = serde_json::from_str(&print(Output::Json, &complex_resource())).unwrap();
    assert_eq!(from_yaml, from_json);
}

#[test]
fn deleting_and_errors_come_first() {
    let mut n = complex_resource();
    n.object["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    assert!(print(Output::Default, &n).lines().nth(1).unwrap().ends_with("True      True    Deleting"));
    let failed = Node {
        object: json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "default"}}),
        error: Some(super::super::tree::NodeError { message: "secrets \"s\" not found".into(), status: None }),
        children: vec![],
    };
    assert_eq!(print(Output::Default, &failed), "NAME                 SYNCED   READY   STATUS\nSecret/s (default)   -        -       Error: secrets \"s\" not found\n");
}

#[test]
fn image_tags() {
    assert_eq!(split_tag("xpkg.crossplane.io/crossplane/provider-aws-ec2:v0.47.0"), ("xpkg.crossplane.io/crossplane/provider-aws-ec2".into(), "v0.47.0".into()));
    assert_eq!(split_tag("provider-nop"), ("provider-nop".into(), "latest".into()));
    assert_eq!(split_tag("localhost:5000/p"), ("localhost:5000/p".into(), "latest".into()));
    assert_eq!(split_tag("r/p@sha256:abc"), ("r/p@sha256:abc".into(), String::new()));
}
