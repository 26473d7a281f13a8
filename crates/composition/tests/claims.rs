//! Claims on an in-process server: a claim in a namespace gets a composite (bound both ways,
//! labelled with the claim), becomes Ready with it, and receives its connection Secret with
//! the keys the Composition publishes; deleting it in the foreground shows `Deleting` at once
//! and names the composed resource that holds the deletion, until it lets go.

use crate::support;

use oxplane_runtime::conditions;
use oxplane_runtime::kinds::Kind;
use oxplane_runtime::managed::connection;
use oxplane_runtime::object;
use serde_json::{Value, json};
use support::{Plane, is_true};

const SETUP: &str = r#"
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata:
  name: xdatabases.example.org
spec:
  group: example.org
  names: {kind: XDatabase, plural: xdatabases}
  claimNames: {kind: Database, plural: databases}
  connectionSecretKeys: [username, endpoint]
  defaultCompositeDeletePolicy: Foreground
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
              owner: {type: string}
          status:
            type: object
            properties:
              address: {type: string}
---
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: xdatabases
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
      - name: settings
        base:
          apiVersion: v1
          kind: ConfigMap
          metadata: {namespace: default}
          data: {host: db.internal}
        patches:
        - {fromFieldPath: spec.owner, toFieldPath: data.owner}
        - {type: ToCompositeFieldPath, fromFieldPath: data.host, toFieldPath: status.address}
        connectionDetails:
        - {name: username, type: FromFieldPath, fromFieldPath: data.owner}
        - {name: endpoint, type: FromFieldPath, fromFieldPath: data.host}
        - {name: internal, type: FromValue, value: not-published}
        readinessChecks:
        - type: None
"#;

fn claims() -> Kind {
    Kind::new("example.org", "v1alpha1", "Database", "databases", true)
}

fn composites() -> Kind {
    Kind::new("example.org", "v1alpha1", "XDatabase", "xdatabases", false)
}

#[tokio::test]
async fn a_claim_binds_publishes_and_deletes_truthfully() {
    let plane = Plane::start().await;
    plane.apply_yaml(SETUP).await;
    plane.apply_yaml("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-a\n").await;
    let claim = json!({
        "apiVersion": "example.org/v1alpha1", "kind": "Database",
        "metadata": {"name": "orders", "namespace": "team-a", "labels": {"team": "a"}},
        "spec": {"owner": "alice", "writeConnectionSecretToRef": {"name": "orders-conn"}}
    });
    plane.kind_of(&claim).await;
    let created = plane.runtime.kube.create(&claims(), &claim).await.unwrap();
    assert_eq!(created["spec"]["compositeDeletePolicy"], "Foreground", "the XRD's default");
    let claim = plane.wait_object(&claims(), Some("team-a"), "orders", "the claim Ready", |c| is_true(c, "Ready") && is_true(c, "Synced")).await;
    let xr_name = claim["spec"]["resourceRef"]["name"].as_str().unwrap().to_string();
    assert!(xr_name.starts_with("orders-"), "{xr_name}");
    assert_eq!(claim["status"]["address"], "db.internal", "the composite's status reaches the claim");
    let xr = plane.runtime.kube.get(&composites(), None, &xr_name).await.unwrap().unwrap();
    assert_eq!(xr["spec"]["claimRef"], json!({"apiVersion": "example.org/v1alpha1", "kind": "Database", "namespace": "team-a", "name": "orders"}));
    assert_eq!(xr["spec"]["owner"], "alice");
    assert!(xr["spec"].get("writeConnectionSecretToRef").is_some_and(|r| r["namespace"] == "default"), "{xr}");
    assert_eq!(object::label(&xr, "crossplane.io/claim-name"), Some("orders"));
    assert_eq!(object::label(&xr, "crossplane.io/claim-namespace"), Some("team-a"));
    assert_eq!(object::label(&xr, "team"), Some("a"));
    let composed: Vec<Value> = plane.runtime.kube.list(&Kind::new("", "v1", "ConfigMap", "configmaps", true), Some("default"), Some("crossplane.io/claim-name=orders")).await.unwrap();
    assert_eq!(composed.len(), 1);
    assert_eq!(object::label(&composed[0], "crossplane.io/claim-namespace"), Some("team-a"));

    // The claim's Secret: the keys the XRD publishes, in the claim's namespace.
    let secret = plane
        .wait("the claim's connection secret", async |p| p.runtime.kube.get(&connection::secret_kind(), Some("team-a"), "orders-conn").await.unwrap())
        .await;
    assert_eq!(secret["type"], "connection.crossplane.io/v1alpha1");
    let data = connection::decode_data(&secret);
    assert_eq!(data.keys().collect::<Vec<_>>(), ["endpoint", "username"], "connectionSecretKeys filter");
    assert_eq!(data["username"], b"alice");
    assert_eq!(object::controller_uid(&secret), object::uid(&claim));
    let claim = plane.runtime.kube.get(&claims(), Some("team-a"), "orders").await.unwrap().unwrap();
    assert!(claim["status"]["connectionDetails"]["lastPublishedTime"].is_string());
    let events = plane.events_of(&claim).await;
    assert!(events.iter().any(|(_, r, m)| r == "BindCompositeResource" && m == "Successfully bound composite resource"), "{events:?}");

    // A finalizer holds the composed ConfigMap: the foreground deletion waits, and says for what.
    let cm_name = object::name(&composed[0]).unwrap().to_string();
    let cms = Kind::new("", "v1", "ConfigMap", "configmaps", true);
    plane.runtime.kube.merge_patch(&cms, Some("default"), &cm_name, &json!({"metadata": {"finalizers": ["test.oxplane.io/hold"]}})).await.unwrap();
    plane.runtime.kube.delete(&claims(), Some("team-a"), "orders", &Default::default()).await.unwrap();
    let expected = format!(
        "waiting for composite resource XDatabase/{xr_name} to be deleted: waiting for 1 composed resource to be deleted: ConfigMap/{cm_name} (finalizers: test.oxplane.io/hold)"
    );
    let deleting = plane
        .wait_object(&claims(), Some("team-a"), "orders", "the blocker named", |c| {
            conditions::get(c, "Ready").is_some_and(|r| r.reason == "Deleting" && r.message == expected)
        })
        .await;
    assert!(is_true(&deleting, "Synced"));
    let xr = plane.runtime.kube.get(&composites(), None, &xr_name).await.unwrap().unwrap();
    assert_eq!(conditions::get(&xr, "Ready").unwrap().reason, "Deleting");
    plane.runtime.kube.merge_patch(&cms, Some("default"), &cm_name, &json!({"metadata": {"finalizers": null}})).await.unwrap();
    plane.wait("the claim to go", async |p| p.runtime.kube.get(&claims(), Some("team-a"), "orders").await.unwrap().is_none().then_some(())).await;
    assert!(plane.runtime.kube.get(&composites(), None, &xr_name).await.unwrap().is_none());
}
