//! Drift made visible: a composed resource changed with `kubectl patch` or `kubectl edit` is
//! re-applied by its composite, and a FakeThing whose external thing is changed in the cloud
//! is updated by its managed reconciler; each revert is a Warning event `DriftCorrected` on the
//! object naming the fields (and, for composed resources, kubectl's field manager), and
//! `oxplane_drift_corrected_total{group,kind}` counts them.

use crate::support;

use std::time::Duration;

use oxplane_providers::fakecloud::cloud::FakeCloud;
use serde_json::{Value, json};
use support::{Server, within};

const FUNCTIONS: &str = "apiVersion: pkg.crossplane.io/v1
kind: Function
metadata:
  name: function-patch-and-transform
spec:
  package: xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform:v0.8.2
";

const PLATFORM: &str = "apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata:
  name: xwatched.example.org
spec:
  group: example.org
  names:
    kind: XWatched
    plural: xwatched
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
              colour: {type: string}
---
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: watched
spec:
  compositeTypeRef:
    apiVersion: example.org/v1alpha1
    kind: XWatched
  mode: Pipeline
  pipeline:
  - step: compose
    functionRef:
      name: function-patch-and-transform
    input:
      apiVersion: pt.fn.crossplane.io/v1beta1
      kind: Resources
      resources:
      - name: nop
        base:
          apiVersion: nop.crossplane.io/v1alpha1
          kind: NopResource
          spec:
            forProvider:
              fields:
                size: small
        patches:
        - fromFieldPath: spec.colour
          toFieldPath: spec.forProvider.fields.colour
";

/// `DriftCorrected` event messages on the object named `name`, with their counts.
fn drift_events(server: &Server, name: &str) -> Vec<(String, u64)> {
    let selector = format!("involvedObject.name={name}");
    let events = server.get(&["events", "-A", "--field-selector", &selector]).unwrap_or(Value::Null);
    events["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["reason"] == "DriftCorrected" && e["type"] == "Warning")
        .map(|e| (e["message"].as_str().unwrap_or_default().to_string(), e["count"].as_u64().unwrap_or(1)))
        .collect()
}

/// The value of `oxplane_drift_corrected_total` for a group and kind (0 when not counted yet).
fn drift_count(server: &Server, group: &str, kind: &str) -> u64 {
    let metrics = server.kubectl(&["get", "--raw", "/metrics"]);
    let series = format!("oxplane_drift_corrected_total{{group=\"{group}\",kind=\"{kind}\"}} ");
    metrics.lines().find_map(|l| l.strip_prefix(series.as_str())).map_or(0, |v| v.trim().parse().unwrap())
}

#[test]
fn a_composed_resource_changed_by_kubectl_is_reverted_with_an_event_naming_the_field_and_manager() {
    let server = Server::start_with(&["--provider", "provider-nop"]);
    server.apply(FUNCTIONS);
    server.kubectl(&["wait", "--for=condition=Healthy", "provider/provider-nop", "function/function-patch-and-transform", "--timeout=60s"]);
    server.apply(PLATFORM.split("---\n").next().unwrap());
    server.kubectl(&["wait", "--for=condition=Established", "xrd/xwatched.example.org", "--timeout=60s"]);
    server.apply(PLATFORM);
    server.apply("apiVersion: example.org/v1alpha1\nkind: XWatched\nmetadata:\n  name: w1\nspec:\n  colour: blue\n");
    let mut nop = String::new();
    within(Duration::from_secs(60), "the NopResource to be composed", || {
        match support::composed_nops(&server, "w1").get("nop") {
            Some(n) => {
                nop = n["metadata"]["name"].as_str().unwrap().to_string();
                true
            }
            None => false,
        }
    });
    let field = |name: &str| server.get(&["nopresource", &nop]).map(|n| n["spec"]["forProvider"]["fields"][name].clone()).unwrap_or(Value::Null);
    within(Duration::from_secs(30), "the colour to be composed", || field("colour") == "blue");
    assert!(drift_events(&server, &nop).is_empty(), "composing is not drift");
    assert_eq!(drift_count(&server, "nop.crossplane.io", "NopResource"), 0);

    // kubectl patch: the field goes back and the event names it and kubectl's manager.
    server.kubectl(&["patch", "nopresource", &nop, "--type=merge", "-p", r#"{"spec":{"forProvider":{"fields":{"colour":"red"}}}}"#]);
    within(Duration::from_secs(30), "the patched colour to be reverted", || field("colour") == "blue");
    within(Duration::from_secs(10), "a DriftCorrected event naming kubectl-patch", || {
        drift_events(&server, &nop).iter().any(|(m, _)| m == "reverted .spec.forProvider.fields.colour (changed by kubectl-patch)")
    });
    assert_eq!(drift_count(&server, "nop.crossplane.io", "NopResource"), 1);

    // kubectl edit (the editor is sed): the same, under kubectl-edit.
    let mut edit = server.kubectl_command(&["edit", "nopresource", &nop]);
    edit.env("KUBE_EDITOR", "sed -i -e s/size:\\ small/size:\\ huge/");
    let out = edit.output().unwrap();
    assert!(out.status.success(), "kubectl edit: {}", String::from_utf8_lossy(&out.stderr));
    within(Duration::from_secs(30), "the edited size to be reverted", || field("size") == "small");
    within(Duration::from_secs(10), "a DriftCorrected event naming kubectl-edit", || {
        drift_events(&server, &nop).iter().any(|(m, _)| m == "reverted .spec.forProvider.fields.size (changed by kubectl-edit)")
    });
    assert_eq!(drift_count(&server, "nop.crossplane.io", "NopResource"), 2);

    // A change of the composite is not drift of what it composes.
    server.kubectl(&["patch", "xwatched", "w1", "--type=merge", "-p", r#"{"spec":{"colour":"green"}}"#]);
    within(Duration::from_secs(30), "the new colour to be composed", || field("colour") == "green");
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(drift_events(&server, &nop).len(), 2, "{:?}", drift_events(&server, &nop));
    assert_eq!(drift_count(&server, "nop.crossplane.io", "NopResource"), 2);
}

#[test]
fn an_external_thing_changed_in_the_cloud_is_reverted_with_an_event_naming_the_fields() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let cloud = rt.block_on(FakeCloud::start(Duration::from_millis(100))).unwrap();
    let server = Server::start_with(&["--provider", "provider-fakecloud"]);
    server.kubectl(&["wait", "--for=condition=Healthy", "provider/provider-fakecloud", "--timeout=60s"]);
    server.apply(&format!(
        "apiVersion: fakecloud.oxplane.io/v1alpha1\nkind: ProviderConfig\nmetadata:\n  name: default\nspec:\n  endpoint: {}\n",
        cloud.endpoint()
    ));
    server.apply(
        "apiVersion: fakecloud.oxplane.io/v1alpha1\nkind: FakeThing\nmetadata:\n  name: watched\n  annotations:\n    crossplane.io/poll-interval: 1s\n\
spec:\n  forProvider:\n    size: 3\n    color: teal\n",
    );
    support::wait_ready_and_synced(&server, "fakething.fakecloud.oxplane.io/watched");
    let thing = server.get(&["fakething.fakecloud.oxplane.io/watched"]).unwrap();
    let id = thing["metadata"]["annotations"]["crossplane.io/external-name"].as_str().unwrap().to_string();
    std::thread::sleep(Duration::from_secs(2));
    assert!(drift_events(&server, "watched").is_empty(), "creating is not drift");

    assert!(cloud.set_spec(&id, json!({"size": 8, "color": "teal"})));
    within(Duration::from_secs(30), "the size to be reverted in the cloud", || cloud.thing(&id).is_some_and(|t| t["spec"]["size"] == 3));
    within(Duration::from_secs(10), "a DriftCorrected event naming size", || {
        drift_events(&server, "watched").iter().any(|(m, _)| m == "reverted the external resource, changed outside the control plane in: size")
    });
    assert_eq!(drift_count(&server, "fakecloud.oxplane.io", "FakeThing"), 1);

    // A spec change is applied with an update, and is not drift.
    server.kubectl(&["patch", "fakething.fakecloud.oxplane.io", "watched", "--type=merge", "-p", r#"{"spec":{"forProvider":{"size":4}}}"#]);
    within(Duration::from_secs(30), "the new size to reach the cloud", || cloud.thing(&id).is_some_and(|t| t["spec"]["size"] == 4));
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(drift_count(&server, "fakecloud.oxplane.io", "FakeThing"), 1);

    assert!(cloud.set_spec(&id, json!({"size": 4, "color": "plum"})));
    within(Duration::from_secs(30), "the colour to be reverted in the cloud", || cloud.thing(&id).is_some_and(|t| t["spec"]["color"] == "teal"));
    within(Duration::from_secs(10), "a DriftCorrected event naming color", || {
        drift_events(&server, "watched").iter().any(|(m, _)| m == "reverted the external resource, changed outside the control plane in: color")
    });
    assert_eq!(drift_count(&server, "fakecloud.oxplane.io", "FakeThing"), 2);
}
