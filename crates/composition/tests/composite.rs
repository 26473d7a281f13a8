//! Composite resources end to end on an in-process server: an XRD becomes a served kind with
//! its controller, a Composition gets a revision, and an XR is composed through the built-in
//! patch-and-transform and auto-ready functions into ConfigMaps — named, labelled, annotated
//! and owned as Crossplane does it, kept in sync in real time, garbage-collected when no
//! longer desired — for v2 namespaced XRs and for legacy (`LegacyCluster`) ones.

use crate::support;

use oxplane_runtime::conditions;
use oxplane_runtime::kinds::Kind;
use oxplane_runtime::object;
use serde_json::{Value, json};
use support::{Plane, is_true};

const XRD: &str = r#"
apiVersion: apiextensions.crossplane.io/v2
kind: CompositeResourceDefinition
metadata:
  name: xapps.example.org
spec:
  group: example.org
  names:
    kind: XApp
    plural: xapps
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
              color: {type: string}
          status:
            type: object
            properties:
              observedColor: {type: string}
"#;

const COMPOSITION: &str = r#"
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: xapps
spec:
  compositeTypeRef:
    apiVersion: example.org/v1
    kind: XApp
  mode: Pipeline
  pipeline:
  - step: patch-and-transform
    functionRef:
      name: function-patch-and-transform
    input:
      apiVersion: pt.fn.crossplane.io/v1beta1
      kind: Resources
      resources:
      - name: settings
        base:
          apiVersion: v1
          kind: ConfigMap
          data: {role: settings}
        patches:
        - fromFieldPath: spec.color
          toFieldPath: data.color
        - type: ToCompositeFieldPath
          fromFieldPath: data.color
          toFieldPath: status.observedColor
      - name: extra
        base:
          apiVersion: v1
          kind: ConfigMap
          data: {role: extra}
  - step: ready
    functionRef:
      name: function-auto-ready
"#;

fn xapp_kind() -> Kind {
    Kind::new("example.org", "v1", "XApp", "xapps", true)
}

fn config_maps() -> Kind {
    Kind::new("", "v1", "ConfigMap", "configmaps", true)
}

async fn composed(plane: &Plane, xr: &Value) -> Vec<Value> {
    let uid = object::uid(xr).unwrap().to_string();
    plane
        .runtime
        .kube
        .list(&config_maps(), Some("default"), None)
        .await
        .unwrap()
        .into_iter()
        .filter(|cm| object::controller_uid(cm) == Some(uid.as_str()))
        .collect()
}

#[tokio::test]
async fn a_namespaced_xr_is_composed_kept_in_sync_and_collected() {
    let plane = Plane::start().await;
    plane.apply_yaml(XRD).await;
    let xrd_kind = Kind::new("apiextensions.crossplane.io", "v1", "CompositeResourceDefinition", "compositeresourcedefinitions", false);
    let xrd = plane.wait_object(&xrd_kind, None, "xapps.example.org", "the XRD to be established", |x| is_true(x, "Established")).await;
    assert_eq!(conditions::get(&xrd, "Established").unwrap().reason, "WatchingCompositeResource");
    assert_eq!(xrd["status"]["controllers"]["compositeResourceType"], json!({"apiVersion": "example.org/v1", "kind": "XApp"}));
    assert!(object::has_finalizer(&xrd, "defined.apiextensions.crossplane.io"));
    plane.apply_yaml(COMPOSITION).await;
    let revisions = Kind::new("apiextensions.crossplane.io", "v1", "CompositionRevision", "compositionrevisions", false);
    let revision = plane
        .wait("the first revision", async |p| p.runtime.kube.list(&revisions, None, Some("crossplane.io/composition-name=xapps")).await.unwrap().pop())
        .await;
    assert_eq!(revision["spec"]["revision"], 1);
    assert!(object::name(&revision).unwrap().starts_with("xapps-"));

    plane
        .apply_yaml("apiVersion: example.org/v1\nkind: XApp\nmetadata:\n  name: shop\n  namespace: default\nspec:\n  color: red\n")
        .await;
    let xr = plane
        .wait_object(&xapp_kind(), Some("default"), "shop", "the XR to be Ready", |x| is_true(x, "Ready") && is_true(x, "Synced"))
        .await;
    assert_eq!(xr["spec"]["crossplane"]["compositionRef"]["name"], "xapps");
    assert_eq!(xr["spec"]["crossplane"]["compositionRevisionRef"]["name"], revision["metadata"]["name"]);
    assert_eq!(xr["status"]["observedColor"], "red");
    assert_eq!(conditions::get(&xr, "Responsive").unwrap().reason, "WatchCircuitClosed");
    assert_eq!(object::label(&xr, "crossplane.io/composite"), Some("shop"));
    let refs = xr["spec"]["crossplane"]["resourceRefs"].as_array().unwrap().clone();
    assert_eq!(refs.len(), 2);
    assert!(refs.iter().all(|r| r["apiVersion"] == "v1" && r["kind"] == "ConfigMap" && r.get("namespace").is_none()), "{refs:?}");

    let cms = composed(&plane, &xr).await;
    assert_eq!(cms.len(), 2);
    for cm in &cms {
        let name = object::name(cm).unwrap();
        assert!(name.starts_with("shop-") && name.len() == "shop-".len() + 12, "{name}");
        assert_eq!(cm["metadata"]["generateName"], "shop-");
        assert_eq!(object::label(cm, "crossplane.io/composite"), Some("shop"));
        let owner = object::controller_ref(cm).unwrap();
        assert_eq!(owner["blockOwnerDeletion"], true);
        assert_eq!(owner["kind"], "XApp");
        let managers: Vec<&str> = cm["metadata"]["managedFields"].as_array().unwrap().iter().filter_map(|m| m["manager"].as_str()).collect();
        assert!(managers.iter().any(|m| m.starts_with("apiextensions.crossplane.io/composed/")), "{managers:?}");
    }
    let settings = cms.iter().find(|c| object::annotation(c, "crossplane.io/composition-resource-name") == Some("settings")).unwrap();
    assert_eq!(settings["data"], json!({"role": "settings", "color": "red"}));
    let events = plane.events_of(&xr).await;
    assert!(events.iter().any(|(t, r, m)| t == "Normal" && r == "SelectComposition" && m == "Successfully selected composition: xapps"), "{events:?}");

    // A change to the XR reaches the composed resources, and a composed change the XR.
    let kube = &plane.runtime.kube;
    kube.merge_patch(&xapp_kind(), Some("default"), "shop", &json!({"spec": {"color": "blue"}})).await.unwrap();
    let settings_name = object::name(settings).unwrap().to_string();
    plane.wait_object(&config_maps(), Some("default"), &settings_name, "the new color", |c| c["data"]["color"] == "blue").await;
    plane.wait_object(&xapp_kind(), Some("default"), "shop", "the status to follow", |x| x["status"]["observedColor"] == "blue").await;

    // Drift is reverted at once, and a deleted composed resource comes back (same name).
    kube.merge_patch(&config_maps(), Some("default"), &settings_name, &json!({"data": {"color": "green"}})).await.unwrap();
    plane.wait_object(&config_maps(), Some("default"), &settings_name, "drift reverted", |c| c["data"]["color"] == "blue").await;
    kube.delete(&config_maps(), Some("default"), &settings_name, &Default::default()).await.unwrap();
    plane.wait_object(&config_maps(), Some("default"), &settings_name, "the ConfigMap back", |c| c["data"]["color"] == "blue").await;

    // A composition that no longer wants "extra": a new revision, and "extra" is deleted.
    let compositions = Kind::new("apiextensions.crossplane.io", "v1", "Composition", "compositions", false);
    let mut composition = kube.get(&compositions, None, "xapps").await.unwrap().unwrap();
    let resources = composition["spec"]["pipeline"][0]["input"]["resources"].as_array_mut().unwrap();
    resources.retain(|r| r["name"] != "extra");
    kube.replace(&compositions, &composition).await.unwrap();
    plane
        .wait("extra to be collected", async |p| {
            let xr = p.runtime.kube.get(&xapp_kind(), Some("default"), "shop").await.unwrap()?;
            (composed(p, &xr).await.len() == 1 && xr["spec"]["crossplane"]["resourceRefs"].as_array()?.len() == 1).then_some(())
        })
        .await;
    let xr = kube.get(&xapp_kind(), Some("default"), "shop").await.unwrap().unwrap();
    assert_ne!(xr["spec"]["crossplane"]["compositionRevisionRef"]["name"], revision["metadata"]["name"], "the new revision is used");

    // Deleting the XR deletes what it composed.
    kube.delete(&xapp_kind(), Some("default"), "shop", &Default::default()).await.unwrap();
    let uid = object::uid(&xr).unwrap().to_string();
    plane
        .wait("composed resources to go", async |p| {
            let left = p.runtime.kube.list(&config_maps(), Some("default"), None).await.unwrap();
            let left: Vec<&Value> = left.iter().filter(|c| object::controller_uid(c) == Some(uid.as_str())).collect();
            left.is_empty().then_some(())
        })
        .await;

    // Deleting the XRD removes its CRD and stops its controller.
    kube.delete(&xrd_kind, None, "xapps.example.org", &Default::default()).await.unwrap();
    plane.wait("the XRD to go", async |p| p.runtime.kube.get(&xrd_kind, None, "xapps.example.org").await.unwrap().is_none().then_some(())).await;
    let crds = Kind::new("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", false);
    assert!(kube.get(&crds, None, "xapps.example.org").await.unwrap().is_none());
    assert!(plane.core.xrds.running().is_empty());
}

const LEGACY: &str = r#"
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata:
  name: xsettings.legacy.example.org
spec:
  group: legacy.example.org
  names:
    kind: XSetting
    plural: xsettings
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
              value: {type: string}
---
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: xsettings
spec:
  compositeTypeRef:
    apiVersion: legacy.example.org/v1alpha1
    kind: XSetting
  pipeline:
  - step: patch-and-transform
    functionRef:
      name: function-patch-and-transform
    input:
      apiVersion: pt.fn.crossplane.io/v1beta1
      kind: Resources
      resources:
      - name: setting
        base:
          apiVersion: v1
          kind: ConfigMap
          metadata:
            namespace: default
          data: {source: legacy}
        patches:
        - fromFieldPath: spec.value
          toFieldPath: data.value
"#;

#[tokio::test]
async fn a_legacy_xr_composes_with_its_machinery_at_the_top_of_spec() {
    let plane = Plane::start().await;
    plane.apply_yaml(LEGACY).await;
    let kind = Kind::new("legacy.example.org", "v1alpha1", "XSetting", "xsettings", false);
    let xr = json!({"apiVersion": "legacy.example.org/v1alpha1", "kind": "XSetting", "metadata": {"name": "s1"}, "spec": {"value": "42"}});
    plane.kind_of(&xr).await;
    plane.runtime.kube.create(&kind, &xr).await.unwrap();
    // Legacy XRs keep their machinery at the top of spec.
    let xr = plane.wait_object(&kind, None, "s1", "the XR to be Synced", |x| is_true(x, "Synced") && x["spec"]["resourceRefs"].is_array()).await;
    assert_eq!(xr["spec"]["compositionRef"]["name"], "xsettings");
    let cms = composed(&plane, &xr).await;
    assert_eq!(cms.len(), 1);
    assert_eq!(cms[0]["data"], json!({"source": "legacy", "value": "42"}));
    assert_eq!(object::annotation(&cms[0], "crossplane.io/composition-resource-name"), Some("setting"));
    // A ConfigMap has no Ready condition: the default readiness check keeps the XR unready, naming it.
    let xr = plane
        .wait_object(&kind, None, "s1", "the unready resource named", |x| {
            conditions::get(x, "Ready").is_some_and(|c| c.reason == "Creating" && c.message == "Unready resources: setting")
        })
        .await;
    assert_eq!(xr["spec"]["resourceRefs"][0]["namespace"], "default");
}

#[tokio::test]
async fn composed_resources_are_observed_alike_from_the_cache_and_from_the_api() {
    let plane = Plane::start().await;
    plane.apply_yaml(XRD).await;
    let xrd_kind = Kind::new("apiextensions.crossplane.io", "v1", "CompositeResourceDefinition", "compositeresourcedefinitions", false);
    let xrd = plane.wait_object(&xrd_kind, None, "xapps.example.org", "the XRD to be established", |x| is_true(x, "Established")).await;
    plane.apply_yaml(COMPOSITION).await;
    plane.apply_yaml("apiVersion: example.org/v1\nkind: XApp\nmetadata:\n  name: alike\n  namespace: default\nspec:\n  color: blue\n").await;
    let xr = plane.wait_object(&xapp_kind(), Some("default"), "alike", "the XR to be Ready", |x| is_true(x, "Ready") && is_true(x, "Synced")).await;
    let xr_type = oxplane_composition::composite::shape::XrType::of(&xrd).unwrap();

    // Read from the API (as while a cache syncs), then as a cache holds them: a function's
    // request, and so its meta.tag and the response cache's key, must be the same either way.
    let from_api = |_: &oxplane_runtime::kinds::Gvk, _: &object::ObjectKey| None;
    let (read, read_objects) = oxplane_composition::composite::reconciler::observe(&plane.runtime, &xr_type, &xr, &from_api).await.unwrap();
    assert_eq!(read.resources.len(), 2);
    let stored = composed(&plane, &xr).await;
    assert!(stored.iter().all(|cm| cm["metadata"].get("managedFields").is_some()), "the API serves managedFields");
    let as_cached = |_: &oxplane_runtime::kinds::Gvk, key: &object::ObjectKey| {
        let mut cm = stored.iter().find(|cm| object::name(cm) == Some(key.name.as_str()))?.clone();
        cm["metadata"].as_object_mut()?.remove("managedFields");
        Some(cm)
    };
    let (cached, cached_objects) = oxplane_composition::composite::reconciler::observe(&plane.runtime, &xr_type, &xr, &as_cached).await.unwrap();
    assert_eq!(read_objects, cached_objects);
    assert_eq!(read, cached);
}
