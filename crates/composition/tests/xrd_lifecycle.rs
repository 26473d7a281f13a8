//! XRDs on an in-process server: the conditions and events of an XRD offering a claim, from
//! establishment through a spec change to a deletion that waits for its claims, then its
//! composites (crossplane-spec §1.1, §3.1); and nested composites — an XR of one XRD composing
//! an XR of another, both Ready, the outer one's deletion taking the inner one and what it
//! composed with it.

use crate::support;

use oxplane_runtime::kinds::Kind;
use oxplane_runtime::object;
use serde_json::{Value, json};
use support::{Plane, condition, config_maps, is_true, xrds};

const CLAIM_XRD: &str = r#"
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata:
  name: xdatabases.example.org
spec:
  group: example.org
  names: {kind: XDatabase, plural: xdatabases}
  claimNames: {kind: Database, plural: databases}
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
"#;

const HOLD: &str = "test.oxplane.io/hold";

/// The `(reason, message)` of the XRD's Normal events.
async fn xrd_events(plane: &Plane, xrd: &Value) -> Vec<(String, String)> {
    plane.events_of(xrd).await.into_iter().filter(|(t, _, _)| t == "Normal").map(|(_, r, m)| (r, m)).collect()
}


#[tokio::test]
async fn an_xrd_reports_establishing_offering_restarting_and_terminating() {
    let plane = Plane::start().await;
    plane.apply_yaml(CLAIM_XRD).await;
    let xrd = plane
        .wait_object(&xrds(), None, "xdatabases.example.org", "Established and Offered", |x| is_true(x, "Established") && is_true(x, "Offered"))
        .await;
    assert_eq!(condition(&xrd, "Established").unwrap().reason, "WatchingCompositeResource");
    assert_eq!(condition(&xrd, "Offered").unwrap().reason, "WatchingCompositeResourceClaim");
    assert_eq!(
        xrd["status"]["controllers"],
        json!({
            "compositeResourceType": {"apiVersion": "example.org/v1alpha1", "kind": "XDatabase"},
            "compositeResourceClaimType": {"apiVersion": "example.org/v1alpha1", "kind": "Database"},
        })
    );
    assert!(object::has_finalizer(&xrd, "defined.apiextensions.crossplane.io") && object::has_finalizer(&xrd, "offered.apiextensions.crossplane.io"));
    plane.wait_event(&xrd, "Normal", "EstablishComposite", "Applied composite resource CustomResourceDefinition: xdatabases.example.org").await;
    plane.wait_event(&xrd, "Normal", "OfferClaim", "Applied composite resource claim CustomResourceDefinition: databases.example.org").await;

    // A spec change restarts the XR controller.
    let kube = &plane.runtime.kube;
    kube.merge_patch(&xrds(), None, "xdatabases.example.org", &json!({"spec": {"defaultCompositionRef": {"name": "elsewhere"}}})).await.unwrap();
    plane.wait_event(&xrd, "Normal", "RestartComposite", "XRD specification changed; restarting controller to apply updates").await;
    plane.wait_object(&xrds(), None, "xdatabases.example.org", "Established again", |x| is_true(x, "Established")).await;

    // A claim and a composite that cannot go yet hold the XRD's deletion, claims first.
    plane.apply_yaml("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-a\n").await;
    let claims = Kind::new("example.org", "v1alpha1", "Database", "databases", true);
    let composites = Kind::new("example.org", "v1alpha1", "XDatabase", "xdatabases", false);
    let claim = json!({"apiVersion": "example.org/v1alpha1", "kind": "Database", "metadata": {"name": "held", "namespace": "team-a", "finalizers": [HOLD]}, "spec": {}});
    let xr = json!({"apiVersion": "example.org/v1alpha1", "kind": "XDatabase", "metadata": {"name": "held", "finalizers": [HOLD]}, "spec": {}});
    plane.kind_of(&claim).await;
    kube.create(&claims, &claim).await.unwrap();
    kube.create(&composites, &xr).await.unwrap();
    kube.delete(&xrds(), None, "xdatabases.example.org", &Default::default()).await.unwrap();
    let terminating = plane
        .wait_object(&xrds(), None, "xdatabases.example.org", "Established=False while terminating", |x| {
            condition(x, "Established").is_some_and(|c| c.status == "False" && c.reason == "TerminatingCompositeResource")
        })
        .await;
    let offered = condition(&terminating, "Offered").unwrap();
    assert_eq!((offered.status.as_str(), offered.reason.as_str()), ("False", "TerminatingCompositeResourceClaim"));
    plane.wait_event(&xrd, "Normal", "RedactClaim", "waiting for defined composite resource claims to be deleted").await;
    assert!(!xrd_events(&plane, &xrd).await.iter().any(|(r, _)| r == "TerminateComposite"), "composites wait for the claims");

    kube.merge_patch(&claims, Some("team-a"), "held", &json!({"metadata": {"finalizers": null}})).await.unwrap();
    plane.wait_event(&xrd, "Normal", "RedactClaim", "Deleted composite resource claim CustomResourceDefinition: databases.example.org").await;
    plane.wait_event(&xrd, "Normal", "TerminateComposite", "waiting for defined composite resources to be deleted").await;
    // Every composite is deleted (also the claim's), and the one held stays until let go.
    let remaining = plane
        .wait("only the held composite left", async |p| {
            let left = p.runtime.kube.list(&composites, None, None).await.unwrap();
            (left.len() == 1 && object::is_deleting(&left[0])).then_some(left)
        })
        .await;
    assert_eq!(object::name(&remaining[0]), Some("held"));
    assert_eq!(plane.core.xrds.running(), ["xdatabases.example.org"], "the controllers run until the composites are gone");

    kube.merge_patch(&composites, None, "held", &json!({"metadata": {"finalizers": null}})).await.unwrap();
    plane.wait_event(&xrd, "Normal", "TerminateComposite", "Deleted composite resource CustomResourceDefinition: xdatabases.example.org").await;
    plane.wait("the XRD gone", async |p| p.runtime.kube.get(&xrds(), None, "xdatabases.example.org").await.unwrap().is_none().then_some(())).await;
    assert!(plane.core.xrds.running().is_empty());
    let warnings: Vec<_> = plane.events_of(&xrd).await.into_iter().filter(|(t, _, _)| t == "Warning").collect();
    assert!(warnings.is_empty(), "{warnings:?}");
}

const NESTED: &str = r#"
apiVersion: apiextensions.crossplane.io/v2
kind: CompositeResourceDefinition
metadata:
  name: xinners.example.org
spec:
  group: example.org
  names: {kind: XInner, plural: xinners}
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
              value: {type: string}
---
apiVersion: apiextensions.crossplane.io/v2
kind: CompositeResourceDefinition
metadata:
  name: xouters.example.org
spec:
  group: example.org
  names: {kind: XOuter, plural: xouters}
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
              value: {type: string}
---
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: xinners
spec:
  compositeTypeRef: {apiVersion: example.org/v1, kind: XInner}
  mode: Pipeline
  pipeline:
  - step: compose
    functionRef: {name: function-patch-and-transform}
    input:
      apiVersion: pt.fn.crossplane.io/v1beta1
      kind: Resources
      resources:
      - name: settings
        base: {apiVersion: v1, kind: ConfigMap, data: {role: inner}}
        patches:
        - {fromFieldPath: spec.value, toFieldPath: data.value}
      - name: more
        base: {apiVersion: v1, kind: ConfigMap, data: {role: more}}
  - step: ready
    functionRef: {name: function-auto-ready}
---
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: xouters
spec:
  compositeTypeRef: {apiVersion: example.org/v1, kind: XOuter}
  mode: Pipeline
  pipeline:
  - step: compose
    functionRef: {name: function-patch-and-transform}
    input:
      apiVersion: pt.fn.crossplane.io/v1beta1
      kind: Resources
      resources:
      - name: inner
        base: {apiVersion: example.org/v1, kind: XInner, spec: {}}
        patches:
        - {fromFieldPath: spec.value, toFieldPath: spec.value}
  - step: ready
    functionRef: {name: function-auto-ready}
"#;

/// ConfigMaps in `default` controlled by the object with `uid`.
async fn config_maps_of(plane: &Plane, uid: &str) -> Vec<Value> {
    let all = plane.runtime.kube.list(&config_maps(), Some("default"), None).await.unwrap();
    all.into_iter().filter(|c| object::controller_uid(c) == Some(uid)).collect()
}

#[tokio::test]
async fn a_nested_xr_is_composed_ready_and_deleted_with_its_parent() {
    let plane = Plane::start().await;
    plane.apply_yaml(NESTED).await;
    let outers = Kind::new("example.org", "v1", "XOuter", "xouters", true);
    let inners = Kind::new("example.org", "v1", "XInner", "xinners", true);
    let top = json!({"apiVersion": "example.org/v1", "kind": "XOuter", "metadata": {"name": "top", "namespace": "default"}, "spec": {"value": "one"}});
    plane.kind_of(&top).await;
    plane.runtime.kube.create(&outers, &top).await.unwrap();
    let top = plane.wait_object(&outers, Some("default"), "top", "the outer XR Ready", |x| is_true(x, "Ready") && is_true(x, "Synced")).await;

    // The inner XR: composed, controlled and labelled by the outer one, Ready with its own resources.
    let refs = top["spec"]["crossplane"]["resourceRefs"].as_array().unwrap().clone();
    assert_eq!(refs.len(), 1);
    assert_eq!((refs[0]["apiVersion"].as_str(), refs[0]["kind"].as_str()), (Some("example.org/v1"), Some("XInner")));
    let inner_name = refs[0]["name"].as_str().unwrap().to_string();
    assert!(inner_name.starts_with("top-"), "{inner_name}");
    let inner = plane.runtime.kube.get(&inners, Some("default"), &inner_name).await.unwrap().unwrap();
    assert!(is_true(&inner, "Ready") && is_true(&inner, "Synced"), "{inner}");
    assert_eq!(object::controller_uid(&inner), object::uid(&top));
    assert_eq!(object::label(&inner, "crossplane.io/composite"), Some("top"), "the root's name, inherited");
    assert_eq!(object::annotation(&inner, "crossplane.io/composition-resource-name"), Some("inner"));
    assert_eq!(inner["spec"]["crossplane"]["compositionRef"]["name"], "xinners");
    let inner_uid = object::uid(&inner).unwrap().to_string();
    let cms = config_maps_of(&plane, &inner_uid).await;
    assert_eq!(cms.len(), 2);
    for cm in &cms {
        assert_eq!(object::label(cm, "crossplane.io/composite"), Some("top"));
        assert!(object::name(cm).unwrap().starts_with("top-"));
    }
    assert!(cms.iter().any(|c| c["data"] == json!({"role": "inner", "value": "one"})), "{cms:?}");

    // A change to the outer XR flows through the inner one to its ConfigMap.
    plane.runtime.kube.merge_patch(&outers, Some("default"), "top", &json!({"spec": {"value": "two"}})).await.unwrap();
    plane
        .wait("the change at the bottom", async |p| {
            config_maps_of(p, &inner_uid).await.iter().any(|c| c["data"] == json!({"role": "inner", "value": "two"})).then_some(())
        })
        .await;

    // Deleting the outer XR deletes the inner one and what it composed.
    plane.runtime.kube.delete(&outers, Some("default"), "top", &Default::default()).await.unwrap();
    plane
        .wait("everything gone", async |p| {
            let outer = p.runtime.kube.get(&outers, Some("default"), "top").await.unwrap();
            let inner = p.runtime.kube.get(&inners, Some("default"), &inner_name).await.unwrap();
            (outer.is_none() && inner.is_none() && config_maps_of(p, &inner_uid).await.is_empty()).then_some(())
        })
        .await;
}
