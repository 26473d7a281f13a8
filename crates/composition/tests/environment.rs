//! EnvironmentConfigs through the built-in function-environment-configs and
//! function-extra-resources on an in-process server: the composition environment is built
//! from configs chosen by reference and by a label taken from the composite, a ConfigMap is
//! fetched into it, patch-and-transform composes from it, a changed EnvironmentConfig reaches
//! the composed resource at once (it is watched as a required resource), and a config that
//! cannot be found says so on the composite.

use crate::support;

use std::time::{Duration, Instant};

use oxplane_runtime::conditions;
use oxplane_runtime::kinds::Kind;
use serde_json::{Value, json};
use support::{Plane, is_true};

const CONFIGS: &str = r#"
apiVersion: apiextensions.crossplane.io/v1beta1
kind: EnvironmentConfig
metadata: {name: base}
data:
  region: eu-west-1
  tier: {size: small, replicas: 2}
---
apiVersion: apiextensions.crossplane.io/v1beta1
kind: EnvironmentConfig
metadata: {name: team-blue, labels: {team: blue}}
data:
  owner: blue-team
  tier: {size: large}
---
apiVersion: apiextensions.crossplane.io/v1beta1
kind: EnvironmentConfig
metadata: {name: team-red, labels: {team: red}}
data:
  owner: red-team
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: default, labels: {purpose: settings}}
data: {color: green}
"#;

const XRD: &str = r#"
apiVersion: apiextensions.crossplane.io/v2
kind: CompositeResourceDefinition
metadata: {name: xapps.example.org}
spec:
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
          spec:
            type: object
            properties:
              team: {type: string}
"#;

const COMPOSITION: &str = r#"
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata: {name: xapps}
spec:
  compositeTypeRef: {apiVersion: example.org/v1, kind: XApp}
  mode: Pipeline
  pipeline:
  - step: environment
    functionRef: {name: function-environment-configs}
    input:
      apiVersion: environmentconfigs.fn.crossplane.io/v1beta1
      kind: Input
      spec:
        defaultData: {region: us-east-1, fallback: "yes"}
        environmentConfigs:
        - type: Reference
          ref: {name: base}
        - type: Selector
          selector:
            mode: Single
            matchLabels:
            - {key: team, type: FromCompositeFieldPath, valueFromFieldPath: spec.team}
  - step: settings
    functionRef: {name: function-extra-resources}
    input:
      apiVersion: extra-resources.fn.crossplane.io/v1beta1
      kind: Input
      spec:
        into: {type: Environment}
        extraResources:
        - type: Selector
          apiVersion: v1
          kind: ConfigMap
          namespace: default
          toFieldPath: settings
          selector:
            maxMatch: 1
            matchLabels:
            - {key: purpose, type: Value, value: settings}
  - step: compose
    functionRef: {name: function-patch-and-transform}
    input:
      apiVersion: pt.fn.crossplane.io/v1beta1
      kind: Resources
      resources:
      - name: env
        base:
          apiVersion: v1
          kind: ConfigMap
          data: {}
        patches:
        - {type: FromEnvironmentFieldPath, fromFieldPath: region, toFieldPath: data.region}
        - {type: FromEnvironmentFieldPath, fromFieldPath: fallback, toFieldPath: data.fallback}
        - {type: FromEnvironmentFieldPath, fromFieldPath: owner, toFieldPath: data.owner}
        - {type: FromEnvironmentFieldPath, fromFieldPath: tier.size, toFieldPath: data.size}
        - type: FromEnvironmentFieldPath
          fromFieldPath: tier.replicas
          toFieldPath: data.replicas
          transforms: [{type: convert, convert: {toType: string}}]
        - {type: FromEnvironmentFieldPath, fromFieldPath: "settings.data.color", toFieldPath: data.color}
        readinessChecks: [{type: None}]
"#;

fn xapp(name: &str, team: &str) -> String {
    format!("apiVersion: example.org/v1\nkind: XApp\nmetadata: {{name: {name}, namespace: default}}\nspec: {{team: {team}}}\n")
}

async fn plane() -> Plane {
    let plane = Plane::start().await;
    for name in ["function-environment-configs", "function-extra-resources"] {
        plane
            .apply_yaml(&format!(
                "apiVersion: pkg.crossplane.io/v1\nkind: Function\nmetadata:\n  name: {name}\nspec:\n  package: xpkg.crossplane.io/crossplane-contrib/{name}:v0.4.0\n"
            ))
            .await;
        plane.wait(name, async |p| p.core.functions.get(name).is_some().then_some(())).await;
    }
    plane.apply_yaml(CONFIGS).await;
    plane.apply_yaml(XRD).await;
    plane.apply_yaml(COMPOSITION).await;
    plane
}

/// The data of the ConfigMap composed for the XApp `name`, once it satisfies `check`.
async fn composed_data(plane: &Plane, name: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    let configmaps = Kind::new("", "v1", "ConfigMap", "configmaps", true);
    plane
        .wait(what, async |p| {
            let items = p.runtime.kube.list(&configmaps, Some("default"), Some(&format!("crossplane.io/composite={name}"))).await.ok()?;
            let data = items.first()?.get("data")?.clone();
            check(&data).then_some(data)
        })
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_environment_comes_from_configs_by_reference_and_by_label_and_follows_their_changes() {
    let plane = plane().await;
    let xapps = plane.kind_of(&json!({"apiVersion": "example.org/v1", "kind": "XApp"})).await;
    plane.apply_yaml(&xapp("a1", "blue")).await;
    let data = composed_data(&plane, "a1", "a1 composed", |d| d.get("owner").is_some()).await;
    assert_eq!(
        data,
        json!({"region": "eu-west-1", "fallback": "yes", "owner": "blue-team", "size": "large", "replicas": "2", "color": "green"}),
        "base over the defaults, team-blue over base (objects merged key by key), the settings fetched"
    );
    let xr = plane.wait_object(&xapps, Some("default"), "a1", "a1 Ready", |x| is_true(x, "Ready")).await;
    assert!(is_true(&xr, "Synced"));

    // A changed EnvironmentConfig reaches the composed resource at once (well before the
    // composite's periodic requeue).
    let configs = plane.kind_of(&json!({"apiVersion": "apiextensions.crossplane.io/v1beta1", "kind": "EnvironmentConfig"})).await;
    let asked = Instant::now();
    plane.runtime.kube.merge_patch(&configs, None, "team-blue", &json!({"data": {"owner": "blue-team-2"}})).await.unwrap();
    composed_data(&plane, "a1", "the new owner", |d| d["owner"] == "blue-team-2").await;
    assert!(asked.elapsed() < Duration::from_secs(10), "took {:?}", asked.elapsed());
    // So does a new label on another config: the selection changes.
    plane.runtime.kube.merge_patch(&xapps, Some("default"), "a1", &json!({"spec": {"team": "red"}})).await.unwrap();
    let data = composed_data(&plane, "a1", "the red team", |d| d["owner"] == "red-team").await;
    assert_eq!(data["size"], "small");

    // A selector that finds no config fails the pipeline, and the composite says why.
    plane.apply_yaml(&xapp("b1", "green")).await;
    let xr = plane
        .wait_object(&xapps, Some("default"), "b1", "b1 not synced", |x| conditions::get(x, "Synced").is_some_and(|c| c.status == "False"))
        .await;
    let message = conditions::get(&xr, "Synced").unwrap().message;
    assert!(message.contains("pipeline step \"environment\" returned a fatal result"), "{message}");
    assert!(message.contains("environment config"), "{message}");
    // Labelling a config for that team heals it without any change to the composite.
    let asked = Instant::now();
    plane.runtime.kube.merge_patch(&configs, None, "team-red", &json!({"metadata": {"labels": {"team": "green"}}})).await.unwrap();
    let data = composed_data(&plane, "b1", "b1 composed", |d| d.get("owner").is_some()).await;
    assert_eq!(data["owner"], "red-team");
    assert!(asked.elapsed() < Duration::from_secs(10), "took {:?}", asked.elapsed());
    plane.wait_object(&xapps, Some("default"), "b1", "b1 Synced", |x| is_true(x, "Synced")).await;
}
