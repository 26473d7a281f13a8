//! Providers as packages, end to end with the real kubectl: a Provider for provider-nop
//! installs its CRDs and controllers; NopResources become Ready and show Crossplane's columns;
//! uninstalling waits, saying why, while managed resources exist, then removes the CRDs and
//! stops the watches without an error logged. An unknown package says which ones exist.

use crate::support;

use std::time::{Duration, Instant};

use serde_json::Value;
use support::{Server, condition};

const PROVIDER: &str = "apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-nop
spec:
  package: xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0
";

const NOPS: &str = "apiVersion: nop.crossplane.io/v1alpha1
kind: NopResource
metadata:
  name: first
spec:
  forProvider:
    conditionAfter:
    - time: 0s
      conditionType: Ready
      conditionStatus: \"True\"
      conditionReason: Available
---
apiVersion: nop.crossplane.io/v1alpha1
kind: NopResource
metadata:
  name: second
spec:
  forProvider:
    conditionAfter:
    - time: 1s
      conditionType: Ready
      conditionStatus: \"True\"
";

/// Polls `check` every 200 ms for up to 60 s.
fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn json(server: &Server, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    serde_json::from_str(&server.kubectl(&all)).unwrap()
}


#[test]
fn a_provider_package_installs_serves_and_uninstalls_cleanly() {
    let server = Server::start();
    server.kubectl_stdin(&["apply", "-f", "-"], PROVIDER);
    server.kubectl(&["wait", "--for=condition=Healthy", "provider/provider-nop", "--timeout=60s"]);
    let providers = server.kubectl(&["get", "providers"]);
    let header: Vec<&str> = providers.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "INSTALLED", "HEALTHY", "PACKAGE", "AGE"], "{providers}");
    let row: Vec<&str> = providers.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(row[..4], ["provider-nop", "True", "True", "xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0"], "{providers}");
    let revisions = json(&server, &["get", "providerrevisions"]);
    let revision = &revisions["items"][0];
    assert_eq!(revision["metadata"]["labels"]["pkg.crossplane.io/package"], "provider-nop");
    assert_eq!(revision["spec"]["desiredState"], "Active");
    assert_eq!(revision["spec"]["revision"], 1);

    server.kubectl_stdin(&["apply", "-f", "-"], NOPS);
    server.kubectl(&["wait", "--for=condition=Ready", "nopresource/first", "nopresource/second", "--timeout=60s"]);
    let table = server.kubectl(&["get", "nopresources"]);
    let lines: Vec<Vec<&str>> = table.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(lines[0], ["NAME", "READY", "SYNCED", "EXTERNAL-NAME", "AGE"], "{table}");
    assert_eq!(lines[1][..4], ["first", "True", "True", "first"], "{table}");
    assert_eq!(lines[2][..4], ["second", "True", "True", "second"], "{table}");
    // `kubectl get managed` finds them through the category.
    assert!(server.kubectl(&["get", "managed", "-o", "name"]).contains("nopresource.nop.crossplane.io/first"));

    // Uninstalling waits while managed resources exist, and says which.
    server.kubectl(&["delete", "provider", "provider-nop", "--wait=false"]);
    eventually("the blocked uninstall to be reported", || {
        let provider = json(&server, &["get", "provider", "provider-nop"]);
        condition(&provider, "Healthy").is_some_and(|c| {
            c["reason"] == "UninstallBlocked"
                && c["message"] == "cannot uninstall while 2 managed resources still exist: NopResource/first, NopResource/second; delete them first"
        })
    });
    assert!(server.kubectl(&["get", "nopresources"]).contains("first"), "the resources keep being served");
    server.kubectl(&["delete", "nopresources", "--all", "--timeout=60s"]);
    eventually("the provider to go", || server.kubectl(&["get", "providers", "-o", "name"]).trim().is_empty());
    let crd = server.kubectl_fails(&["get", "crd", "nopresources.nop.crossplane.io"], "");
    assert!(crd.contains("NotFound") || crd.contains("not found"), "{crd}");
    assert!(server.kubectl(&["get", "providerrevisions", "-o", "name"]).trim().is_empty());

    // No watch on the provider's kinds is left, and nothing went wrong on the way.
    eventually("the NopResource informer to stop", || {
        let watches: Value = serde_json::from_str(&server.kubectl(&["get", "--raw", "/debug/oxplane/watches"])).unwrap();
        !watches["informers"].as_array().unwrap().iter().any(|i| i["kind"].as_str().unwrap_or_default().contains("nop.crossplane.io"))
    });
    let metrics = server.kubectl(&["get", "--raw", "/metrics"]);
    assert!(!metrics.contains("oxplane_controllers_running{controller=\"managed/nopresource"), "no NopResource controller runs any more");
    assert!(metrics.contains("oxplane_reconciles_total{controller=\"managed/nopresource.nop.crossplane.io\",result=\"success\"}"));
    for line in server.warnings() {
        for bad in ["cannot stop", "Informer to sync", "cannot get informer", "panic"] {
            assert!(!line.contains(bad), "{line}");
        }
    }
}

#[test]
fn an_unknown_package_lists_the_built_in_providers() {
    // Not built in, it is pulled: from a registry on loopback where nothing listens (the tests
    // send nothing off the machine), so it cannot be.
    let server = Server::start();
    server.kubectl_stdin(
        &["apply", "-f", "-"],
        "apiVersion: pkg.crossplane.io/v1\nkind: Provider\nmetadata:\n  name: provider-aws-s3\nspec:\n  package: 127.0.0.1:9/upbound/provider-aws-s3:v1.0.0\n",
    );
    eventually("the refusal", || {
        let provider = json(&server, &["get", "provider", "provider-aws-s3"]);
        condition(&provider, "Installed").is_some_and(|c| {
            c["status"] == "False"
                && c["reason"] == "UnpackingPackage"
                && c["message"].as_str().unwrap().ends_with("built-in providers: provider-fakecloud, provider-http, provider-kubernetes, provider-nop, provider-sql")
        })
    });
    // Deleting a package that never installed is immediate.
    server.kubectl(&["delete", "provider", "provider-aws-s3", "--timeout=30s"]);
}

#[test]
fn providers_named_at_start_are_installed() {
    let server = Server::start_with(&["--provider", "provider-nop"]);
    server.kubectl(&["wait", "--for=condition=Healthy", "provider/provider-nop", "--timeout=60s"]);
    server.kubectl_stdin(&["apply", "-f", "-"], NOPS);
    server.kubectl(&["wait", "--for=condition=Ready", "nopresource/first", "--timeout=60s"]);
}
