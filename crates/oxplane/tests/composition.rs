//! Composition end to end with the real kubectl, from a clean start: the getting-started
//! example (provider-nop, built-in functions, a v2 namespaced XRD, a Pipeline Composition, an
//! XR) exactly as the README walks through it; a v1 (LegacyCluster) XRD with the same
//! pipeline, and a second Composition chosen by its labels. Composed NopResources carry
//! Crossplane's names, labels, annotation and owner reference, and `kubectl wait` sees the XR
//! Ready.

use crate::support;

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{Server, table};

fn example(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/getting-started").join(file);
    path.to_str().unwrap().to_string()
}

fn json(server: &Server, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    serde_json::from_str(&server.kubectl(&all)).unwrap()
}

fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Asserts what every composed resource of `xr` carries.
fn assert_composed(nops: &Value, xr: &Value, prefix: &str) -> Vec<String> {
    let uid = xr["metadata"]["uid"].as_str().unwrap();
    let mine: Vec<&Value> = nops["items"].as_array().unwrap().iter().filter(|n| n["metadata"]["ownerReferences"][0]["uid"] == uid).collect();
    let mut names = Vec::new();
    for nop in &mine {
        let name = nop["metadata"]["name"].as_str().unwrap();
        assert!(name.starts_with(&format!("{prefix}-")) && name.len() == prefix.len() + 13, "{name}");
        assert_eq!(nop["metadata"]["labels"]["crossplane.io/composite"], prefix);
        assert_eq!(nop["metadata"]["generateName"], format!("{prefix}-"));
        let owner = &nop["metadata"]["ownerReferences"][0];
        assert_eq!((owner["controller"].as_bool(), owner["blockOwnerDeletion"].as_bool()), (Some(true), Some(true)));
        assert_eq!(owner["kind"], xr["kind"]);
        names.push(nop["metadata"]["annotations"]["crossplane.io/composition-resource-name"].as_str().unwrap().to_string());
    }
    names.sort();
    names
}

#[test]
fn the_getting_started_example_works_as_the_readme_says() {
    let server = Server::start();
    server.kubectl(&["apply", "-f", &example("00-provider.yaml"), "-f", &example("01-functions.yaml")]);
    server.kubectl(&["wait", "--for=condition=Healthy", "provider/provider-nop", "function/function-patch-and-transform", "function/function-auto-ready", "--timeout=60s"]);
    server.kubectl(&["apply", "-f", &example("02-xrd.yaml")]);
    server.kubectl(&["wait", "--for=condition=Established", "xrd/apps.example.org", "--timeout=60s"]);
    server.kubectl(&["apply", "-f", &example("03-composition.yaml"), "-f", &example("04-app.yaml")]);
    server.kubectl(&["wait", "--for=condition=Ready", "app/my-app", "--timeout=60s"]);

    let apps = table(&server, &["get", "app", "my-app"]);
    assert_eq!(apps[0], ["NAME", "SYNCED", "READY", "COMPOSITION", "AGE"], "{apps:?}");
    assert_eq!(apps[1][..4], ["my-app", "True", "True", "apps"], "{apps:?}");
    let app = json(&server, &["get", "app", "my-app"]);
    assert_eq!(app["status"]["databaseSize"], "db.t3.medium");
    let nops = json(&server, &["get", "nopresources", "-n", "default"]);
    assert_eq!(assert_composed(&nops, &app, "my-app"), ["cache", "database"]);
    // `kubectl get composite` and `kubectl get managed` find them by category.
    assert!(server.kubectl(&["get", "composite", "-A", "-o", "name"]).contains("app.example.org/my-app"));
    assert_eq!(server.kubectl(&["get", "managed", "-A", "-o", "name"]).lines().count(), 2);
    let xrds = table(&server, &["get", "xrd"]);
    assert_eq!(xrds[0], ["NAME", "ESTABLISHED", "OFFERED", "AGE"]);
    assert_eq!(xrds[1][..2], ["apps.example.org", "True"]);
    let described = server.kubectl(&["describe", "app", "my-app"]);
    assert!(described.contains("Successfully selected composition: apps"), "{described}");
}

const LEGACY_XRD: &str = r#"
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata:
  name: xparents.example.org
spec:
  group: example.org
  names:
    kind: XParent
    plural: xparents
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
              label: {type: string}
"#;

const PIPELINE: &str = r#"
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: xparents
spec:
  compositeTypeRef:
    apiVersion: example.org/v1alpha1
    kind: XParent
  mode: Pipeline
  pipeline:
  - step: compose
    functionRef:
      name: function-patch-and-transform
    input:
      apiVersion: pt.fn.crossplane.io/v1beta1
      kind: Resources
      resources:
      - name: first
        base: &nop
          apiVersion: nop.crossplane.io/v1alpha1
          kind: NopResource
          spec:
            forProvider:
              conditionAfter:
              - {time: 0s, conditionType: Ready, conditionStatus: "True"}
        patches:
        - fromFieldPath: spec.label
          toFieldPath: metadata.labels[example.org/label]
      - name: second
        base: *nop
  - step: ready
    functionRef:
      name: function-auto-ready
"#;

const CLASSIC: &str = r#"
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: xparents-classic
  labels:
    style: classic
spec:
  compositeTypeRef:
    apiVersion: example.org/v1alpha1
    kind: XParent
  pipeline:
  - step: compose
    functionRef:
      name: function-patch-and-transform
    input:
      apiVersion: pt.fn.crossplane.io/v1beta1
      kind: Resources
      resources:
      - name: only
        base:
          apiVersion: nop.crossplane.io/v1alpha1
          kind: NopResource
          spec:
            forProvider:
              conditionAfter:
              - {time: 0s, conditionType: Ready, conditionStatus: "True"}
        patches:
        - fromFieldPath: spec.label
          toFieldPath: metadata.labels[example.org/label]
  - step: ready
    functionRef:
      name: function-auto-ready
"#;

#[test]
fn a_legacy_xrd_composes_with_pipelines_chosen_by_reference_and_by_labels() {
    let server = Server::start_with(&["--provider", "provider-nop"]);
    server.kubectl_stdin(&["apply", "-f", "-"], &std::fs::read_to_string(example("01-functions.yaml")).unwrap());
    server.kubectl(&["wait", "--for=condition=Healthy", "provider/provider-nop", "function/function-auto-ready", "--timeout=60s"]);
    server.kubectl_stdin(&["apply", "-f", "-"], LEGACY_XRD);
    server.kubectl(&["wait", "--for=condition=Established", "xrd/xparents.example.org", "--timeout=60s"]);
    server.kubectl_stdin(&["apply", "-f", "-"], PIPELINE);
    server.kubectl_stdin(&["apply", "-f", "-"], CLASSIC);
    server.kubectl_stdin(
        &["apply", "-f", "-"],
        "apiVersion: example.org/v1alpha1\nkind: XParent\nmetadata:\n  name: p1\nspec:\n  label: blue\n  compositionRef:\n    name: xparents\n---\n\
         apiVersion: example.org/v1alpha1\nkind: XParent\nmetadata:\n  name: p2\nspec:\n  label: green\n  compositionSelector:\n    matchLabels:\n      style: classic\n",
    );
    server.kubectl(&["wait", "--for=condition=Ready", "xparent/p1", "xparent/p2", "--timeout=60s"]);
    let parents = table(&server, &["get", "xparents"]);
    assert_eq!(parents[0], ["NAME", "SYNCED", "READY", "COMPOSITION", "AGE"]);
    assert_eq!(parents[1][..4], ["p1", "True", "True", "xparents"]);
    assert_eq!(parents[2][..4], ["p2", "True", "True", "xparents-classic"]);
    let wide = table(&server, &["get", "xparents", "-o", "wide"]);
    assert_eq!(wide[0], ["NAME", "SYNCED", "READY", "COMPOSITION", "COMPOSITIONREVISION", "AGE"]);

    let nops = json(&server, &["get", "nopresources"]);
    let p1 = json(&server, &["get", "xparent", "p1"]);
    let p2 = json(&server, &["get", "xparent", "p2"]);
    assert_eq!(assert_composed(&nops, &p1, "p1"), ["first", "second"]);
    assert_eq!(assert_composed(&nops, &p2, "p2"), ["only"]);
    assert_eq!(p1["spec"]["resourceRefs"].as_array().unwrap().len(), 2, "legacy XRs keep their references at the top of spec");
    assert_eq!(server.kubectl(&["get", "nopresources", "-l", "example.org/label=green", "-o", "name"]).lines().count(), 1);

    // Deleting the XR in the foreground waits for what it composed.
    server.kubectl(&["delete", "xparent", "p1", "--cascade=foreground", "--timeout=60s"]);
    eventually("p1's resources to be gone", || server.kubectl(&["get", "nopresources", "-l", "crossplane.io/composite=p1", "-o", "name"]).trim().is_empty());
}
