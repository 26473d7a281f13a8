//! Bad input on an in-process server: an XR composed to Ready whose Composition is switched to
//! a broken one (a step naming a function that is not installed, a patch with an unparsable
//! `toFieldPath`, a step returning a fatal result) says so precisely — `Synced=False` with
//! Crossplane's reason and message, and a Warning event `ComposeResources` — and deletes
//! nothing it had composed; restoring the good Composition brings it back to Ready.

use crate::support;

use oxplane_runtime::kinds::Kind;
use oxplane_runtime::object;
use serde_json::{Value, json};
use support::{Plane, XAPP_XRD as XRD, compositions, condition, config_maps, is_true};


const COMPOSITION: &str = r#"
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: xapps
spec:
  compositeTypeRef: {apiVersion: example.org/v1, kind: XApp}
  mode: Pipeline
  pipeline:
  - step: patch-and-transform
    functionRef: {name: function-patch-and-transform}
    input:
      apiVersion: pt.fn.crossplane.io/v1beta1
      kind: Resources
      resources:
      - name: settings
        base: {apiVersion: v1, kind: ConfigMap, data: {role: settings}}
        patches:
        - {fromFieldPath: spec.color, toFieldPath: data.color}
      - name: extra
        base: {apiVersion: v1, kind: ConfigMap, data: {role: extra}}
  - step: ready
    functionRef: {name: function-auto-ready}
"#;

fn xapps() -> Kind {
    Kind::new("example.org", "v1", "XApp", "xapps", true)
}

/// The composed ConfigMaps as `(name, uid)`, and whether any is being deleted.
async fn composed(plane: &Plane, xr: &Value) -> (Vec<(String, String)>, bool) {
    let uid = object::uid(xr).unwrap();
    let cms: Vec<Value> = plane
        .runtime
        .kube
        .list(&config_maps(), Some("default"), None)
        .await
        .unwrap()
        .into_iter()
        .filter(|cm| object::controller_uid(cm) == Some(uid))
        .collect();
    let deleting = cms.iter().any(object::is_deleting);
    let mut ids: Vec<(String, String)> = cms.iter().map(|c| (object::name(c).unwrap().to_string(), object::uid(c).unwrap().to_string())).collect();
    ids.sort();
    (ids, deleting)
}

/// Replaces the Composition's pipeline with `pipeline`.
async fn set_pipeline(plane: &Plane, pipeline: Value) {
    let mut composition = plane.runtime.kube.get(&compositions(), None, "xapps").await.unwrap().unwrap();
    composition["spec"]["pipeline"] = pipeline;
    plane.runtime.kube.replace(&compositions(), &composition).await.unwrap();
}

#[tokio::test]
async fn a_broken_composition_is_reported_precisely_and_deletes_nothing() {
    let plane = Plane::start().await;
    plane.apply_yaml(XRD).await;
    plane.apply_yaml(COMPOSITION).await;
    let xr = json!({"apiVersion": "example.org/v1", "kind": "XApp", "metadata": {"name": "shop", "namespace": "default"}, "spec": {"color": "red"}});
    plane.kind_of(&xr).await;
    plane.runtime.kube.create(&xapps(), &xr).await.unwrap();
    let xr = plane.wait_object(&xapps(), Some("default"), "shop", "the XR Ready", |x| is_true(x, "Ready") && is_true(x, "Synced")).await;
    let refs = xr["spec"]["crossplane"]["resourceRefs"].clone();
    assert_eq!(refs.as_array().unwrap().len(), 2);
    let (before, _) = composed(&plane, &xr).await;
    assert_eq!(before.len(), 2);
    let good: Value = plane.runtime.kube.get(&compositions(), None, "xapps").await.unwrap().unwrap()["spec"]["pipeline"].clone();

    let mut bad_path = good.clone();
    bad_path[0]["input"]["resources"][0]["patches"][0]["toFieldPath"] = json!("data[color");
    let mut no_resources = good.clone();
    no_resources[0]["input"].as_object_mut().unwrap().remove("resources");
    let mut unknown = good.clone();
    unknown.as_array_mut().unwrap().push(json!({"step": "mystery", "functionRef": {"name": "function-not-installed"}}));
    let cases = [
        (
            "a step whose function is not installed",
            unknown,
            "cannot compose resources: cannot run Composition pipeline step \"mystery\": cannot get gRPC client connection for Function \"function-not-installed\": \
             cannot find an active FunctionRevision (a FunctionRevision with spec.desiredState: Active): no Function named \"function-not-installed\" exists",
        ),
        (
            "a patch with an invalid toFieldPath",
            bad_path,
            "cannot compose resources: pipeline step \"patch-and-transform\" returned a fatal result: \
             cannot render composed resource \"settings\" \"FromCompositeFieldPath\" patch at index 0: cannot patch to object: cannot parse path \"data[color\": unterminated '[' at position 4",
        ),
        (
            "a step returning a fatal result",
            no_resources,
            "cannot compose resources: pipeline step \"patch-and-transform\" returned a fatal result: \
             invalid Function input: resources: Required value: resources or environment patches are required",
        ),
    ];
    for (what, pipeline, message) in cases {
        let revision = plane.runtime.kube.get(&xapps(), Some("default"), "shop").await.unwrap().unwrap()["spec"]["crossplane"]["compositionRevisionRef"].clone();
        set_pipeline(&plane, pipeline).await;
        let failed = plane
            .wait_object(&xapps(), Some("default"), "shop", what, |x| {
                condition(x, "Synced").is_some_and(|c| c.status == "False" && c.reason == "ReconcileError" && c.message == message)
            })
            .await;
        assert_ne!(failed["spec"]["crossplane"]["compositionRevisionRef"], revision, "{what}: the new revision (Automatic) is the one that fails");
        plane.wait_event(&failed, "Warning", "ComposeResources", message).await;
        // Nothing was collected: the references and the objects are the ones composed before.
        assert_eq!(failed["spec"]["crossplane"]["resourceRefs"], refs, "{what}");
        let (after, deleting) = composed(&plane, &failed).await;
        assert_eq!(after, before, "{what}");
        assert!(!deleting, "{what}: a composed resource is being deleted");
        assert!(is_true(&failed, "Ready"), "{what}: readiness is not re-judged by a failed pipeline");
    }

    // The good Composition back: its revision is the newest again, and the XR recovers.
    set_pipeline(&plane, good).await;
    let xr = plane
        .wait_object(&xapps(), Some("default"), "shop", "the XR recovered", |x| {
            is_true(x, "Synced") && is_true(x, "Ready") && condition(x, "Synced").unwrap().reason == "ReconcileSuccess"
        })
        .await;
    assert_eq!(xr["spec"]["crossplane"]["resourceRefs"], refs);
    assert_eq!(composed(&plane, &xr).await, (before, false));
}
