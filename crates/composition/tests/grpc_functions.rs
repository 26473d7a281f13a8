//! Pipeline steps whose functions are served over gRPC: a Function with an
//! `oxplane.io/function-endpoint` is called with mutual TLS (certificates from the plane's CA),
//! one with Crossplane's development annotations in plain text; an unreachable function makes
//! the Function unhealthy and the XR say which step, function and cause, and both recover by
//! themselves once the function is up.

use std::sync::Arc;

use oxplane_functions::grpc::tls::CertificateAuthority;
use oxplane_functions::grpc::ServerTls;
use oxplane_functions::{AutoReady, PatchAndTransform};
use oxplane_runtime::kinds::Kind;
use serde_json::Value;
use tokio::net::TcpListener;

use crate::support::{self, Plane, XAPP_XRD, condition, functions, is_true, serve_on, xapps};

fn function_revisions() -> Kind {
    Kind::new("pkg.crossplane.io", "v1", "FunctionRevision", "functionrevisions", false)
}

fn composition(patch_and_transform: &str, ready: &str) -> String {
    format!(
        r#"
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: xapps
spec:
  compositeTypeRef: {{apiVersion: example.org/v1, kind: XApp}}
  mode: Pipeline
  pipeline:
  - step: patch-and-transform
    functionRef: {{name: {patch_and_transform}}}
    input:
      apiVersion: pt.fn.crossplane.io/v1beta1
      kind: Resources
      resources:
      - name: settings
        base: {{apiVersion: v1, kind: ConfigMap, data: {{role: settings}}}}
        patches:
        - fromFieldPath: spec.color
          toFieldPath: data.color
  - step: ready
    functionRef: {{name: {ready}}}
"#
    )
}

async fn revision_of(plane: &Plane, function: &str) -> Value {
    plane
        .wait(&format!("the revision of {function}"), async |p| {
            p.runtime.kube.list(&function_revisions(), None, Some(&format!("pkg.crossplane.io/package={function}"))).await.unwrap().pop()
        })
        .await
}

#[tokio::test]
async fn steps_run_over_mutual_tls_and_plain_text() {
    let plane = Plane::start().await;
    let ca = CertificateAuthority::load_or_create(&plane.server.path().join("pki/functions")).unwrap();
    let certs = plane.server.path().join("pt-certs");
    ca.write_server_dir(&certs, &["127.0.0.1".to_string()]).unwrap();
    let pt = serve_on(Arc::new(PatchAndTransform), TcpListener::bind("127.0.0.1:0").await.unwrap(), Some(ServerTls::from_dir(&certs).unwrap())).await;
    let ready = serve_on(Arc::new(AutoReady), TcpListener::bind("127.0.0.1:0").await.unwrap(), None).await;
    plane
        .apply_yaml(&format!(
            r#"
apiVersion: pkg.crossplane.io/v1
kind: Function
metadata:
  name: remote-pt
  annotations: {{oxplane.io/function-endpoint: "{pt}"}}
spec:
  package: xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform:v0.8.0
---
apiVersion: pkg.crossplane.io/v1
kind: Function
metadata:
  name: remote-ready
  annotations:
    render.crossplane.io/runtime: Development
    render.crossplane.io/runtime-development-target: "{ready}"
spec:
  package: xpkg.example.org/team/function-not-built-in:v0.1.0
"#,
            pt = pt.address,
            ready = ready.address
        ))
        .await;
    for (name, address) in [("remote-pt", &pt.address), ("remote-ready", &ready.address)] {
        plane.wait_object(&functions(), None, name, "the function to be healthy", |f| is_true(f, "Healthy")).await;
        assert_eq!(revision_of(&plane, name).await["status"]["endpoint"], address.as_str());
    }
    plane.apply_yaml(XAPP_XRD).await;
    plane.apply_yaml(&composition("remote-pt", "remote-ready")).await;
    plane.apply_yaml("apiVersion: example.org/v1\nkind: XApp\nmetadata:\n  name: shop\n  namespace: default\nspec:\n  color: red\n").await;
    let xr = plane.wait_object(&xapps(), Some("default"), "shop", "the XR to be Ready", |x| is_true(x, "Ready") && is_true(x, "Synced")).await;
    let uid = oxplane_runtime::object::uid(&xr).unwrap().to_string();
    let cms: Vec<Value> = plane
        .runtime
        .kube
        .list(&support::config_maps(), Some("default"), None)
        .await
        .unwrap()
        .into_iter()
        .filter(|c| oxplane_runtime::object::controller_uid(c) == Some(uid.as_str()))
        .collect();
    assert_eq!(cms.len(), 1);
    assert_eq!(cms[0]["data"]["color"], "red");
}

#[tokio::test]
async fn an_unreachable_function_is_named_and_everything_recovers_when_it_comes_up() {
    let plane = Plane::start().await;
    let port = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap().port();
    let address = format!("127.0.0.1:{port}");
    plane
        .apply_yaml(&format!(
            "apiVersion: pkg.crossplane.io/v1\nkind: Function\nmetadata:\n  name: late-pt\n  annotations:\n    render.crossplane.io/runtime: Development\n    render.crossplane.io/runtime-development-target: \"{address}\"\nspec:\n  package: xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform:v0.8.0\n"
        ))
        .await;
    let function = plane
        .wait_object(&functions(), None, "late-pt", "the function to be unhealthy", |f| condition(f, "Healthy").is_some_and(|c| c.status == "False"))
        .await;
    let healthy = condition(&function, "Healthy").unwrap();
    assert_eq!(healthy.reason, "UnhealthyPackageRevision");
    assert_eq!(
        healthy.message,
        format!("cannot reach function \"late-pt\" at {address}: transport error: tcp connect error: Connection refused (os error 111)")
    );
    assert_eq!(revision_of(&plane, "late-pt").await["status"]["endpoint"], address.as_str());

    plane.apply_yaml(XAPP_XRD).await;
    plane.apply_yaml(&composition("late-pt", "function-auto-ready")).await;
    plane.apply_yaml("apiVersion: example.org/v1\nkind: XApp\nmetadata:\n  name: shop\n  namespace: default\nspec:\n  color: red\n").await;
    let xr = plane
        .wait_object(&xapps(), Some("default"), "shop", "the XR to say why it is not synced", |x| condition(x, "Synced").is_some_and(|c| c.status == "False"))
        .await;
    let synced = condition(&xr, "Synced").unwrap();
    assert_eq!(synced.reason, "ReconcileError");
    assert_eq!(
        synced.message,
        "cannot compose resources: cannot run Composition pipeline step \"patch-and-transform\": cannot run Function \"late-pt\": rpc error: code = Unavailable desc = tcp connect error: Connection refused (os error 111)"
    );
    let events = plane.events_of(&xr).await;
    assert!(events.iter().any(|(t, _, m)| t == "Warning" && m.contains("cannot run Function \"late-pt\"")), "{events:?}");

    // The function comes up on its address: the Function turns healthy and the XR composes,
    // without anyone touching either.
    let _served = serve_on(Arc::new(PatchAndTransform), TcpListener::bind(&address).await.unwrap(), None).await;
    plane.wait_object(&functions(), None, "late-pt", "the function to recover", |f| is_true(f, "Healthy")).await;
    plane.wait_object(&xapps(), Some("default"), "shop", "the XR to recover", |x| is_true(x, "Ready") && is_true(x, "Synced")).await;
}
