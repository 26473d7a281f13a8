//! Every Usage finalizer has a way out: a Usage whose used or using kind is not served (never
//! was, or its CRD went) says so while it lives, and is let go at once when deleted, instead of
//! waiting forever for something that cannot exist.

use crate::support;

use oxplane_runtime::conditions;
use oxplane_runtime::kinds::Kind;
use serde_json::json;
use support::{Plane, is_true};

const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.org}
spec:
  group: example.org
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  scope: Cluster
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;

fn cluster_usages() -> Kind {
    Kind::new("protection.crossplane.io", "v1beta1", "ClusterUsage", "clusterusages", false)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_usage_of_a_kind_that_is_not_served_says_so_and_is_let_go_when_deleted() {
    let plane = Plane::start().await;
    let usages = cluster_usages();
    // A typo in the kind: it never was served.
    plane
        .apply_yaml(
            "apiVersion: protection.crossplane.io/v1beta1\nkind: ClusterUsage\nmetadata: {name: typo}\nspec:\n  of: {apiVersion: example.org/v1, kind: Wigdet, resourceRef: {name: w1}}\n  reason: keep it\n",
        )
        .await;
    let usage = plane
        .wait_object(&usages, None, "typo", "the typo reported", |u| conditions::get(u, "Synced").is_some_and(|c| c.status == "False"))
        .await;
    let message = conditions::get(&usage, "Synced").unwrap().message;
    assert!(message.contains("Wigdet") && message.contains("not served"), "{message}");
    plane.runtime.kube.delete(&usages, None, "typo", &Default::default()).await.unwrap();
    plane.wait("the typo Usage gone", async |p| p.runtime.kube.get(&usages, None, "typo").await.unwrap().is_none().then_some(())).await;

    // A kind that goes while a Usage protects one of its objects, and uses one of them.
    plane.apply_yaml(CRD).await;
    let widgets = plane.kind_of(&json!({"apiVersion": "example.org/v1", "kind": "Widget"})).await;
    plane.apply_yaml("apiVersion: example.org/v1\nkind: Widget\nmetadata: {name: w1}\n---\napiVersion: example.org/v1\nkind: Widget\nmetadata: {name: w2}\n").await;
    plane
        .apply_yaml(
            "apiVersion: protection.crossplane.io/v1beta1\nkind: ClusterUsage\nmetadata: {name: w2-uses-w1, annotations: {crossplane.io/composition-resource-name: usage}}\nspec:\n  of: {apiVersion: example.org/v1, kind: Widget, resourceRef: {name: w1}}\n  by: {apiVersion: example.org/v1, kind: Widget, resourceRef: {name: w2}}\n",
        )
        .await;
    plane.wait_object(&usages, None, "w2-uses-w1", "the Usage Ready", |u| is_true(u, "Ready")).await;
    let w1 = plane.runtime.kube.get(&widgets, None, "w1").await.unwrap().unwrap();
    assert_eq!(w1["metadata"]["labels"]["crossplane.io/in-use"], "true");

    let crds = Kind::new("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", false);
    plane.runtime.kube.delete(&crds, None, "widgets.example.org", &Default::default()).await.unwrap();
    plane.wait("the CRD gone", async |p| p.runtime.kube.get(&crds, None, "widgets.example.org").await.unwrap().is_none().then_some(())).await;
    // The Usage, marked as composed, would wait for its user; its user's kind is gone, so it
    // cannot exist, and the Usage goes.
    plane.runtime.kube.delete(&usages, None, "w2-uses-w1", &Default::default()).await.unwrap();
    plane.wait("the Usage gone", async |p| p.runtime.kube.get(&usages, None, "w2-uses-w1").await.unwrap().is_none().then_some(())).await;
}
