//! Functions that go bad after composing: each XR first composes through a function served
//! over gRPC, then its Function is pointed at a server that is down, hangs past the call
//! timeout, answers garbage, sends a message over the 4 MiB limit, closes the stream, presents
//! a certificate from another CA, or returns a Fatal result. Each XR says so in `Synced=False`
//! (step, function and cause, verbatim) and a Warning event, is retried, keeps what it had
//! composed, and composes again once the function is good; other XRs keep composing meanwhile.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use oxplane_functions::grpc::tls::CertificateAuthority;
use oxplane_functions::grpc::ServerTls;
use oxplane_functions::protocol::{FnResult, RunFunctionRequest, RunFunctionResponse};
use oxplane_functions::{Function, FunctionError, PatchAndTransform};
use oxplane_runtime::kinds::Kind;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::support::{Plane, Served, XAPP_XRD, condition, config_maps, functions, is_true, serve_function, xapps};

/// How a fault server misbehaves.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// Never answers.
    Hang,
    /// Answers a gRPC message that is not a protobuf `RunFunctionResponse`.
    Garbage,
    /// Answers a 5 MiB message.
    Oversize,
    /// Resets the stream instead of answering.
    CloseStream,
}

/// A gRPC service at `FunctionRunnerService`'s path that misbehaves as told, below the
/// generated code (which would not send what a broken function sends), and counts calls.
#[derive(Clone)]
struct FaultService {
    fault: Fault,
    calls: Arc<AtomicUsize>,
}

impl tonic::server::NamedService for FaultService {
    const NAME: &'static str = "apiextensions.fn.proto.v1.FunctionRunnerService";
}

/// One gRPC length-prefixed message (uncompressed).
fn grpc_message(payload: &[u8]) -> Bytes {
    let mut framed = Vec::with_capacity(payload.len() + 5);
    framed.push(0);
    framed.extend_from_slice(&u32::try_from(payload.len()).unwrap().to_be_bytes());
    framed.extend_from_slice(payload);
    framed.into()
}

type Frames = Vec<Result<Frame<Bytes>, Box<dyn std::error::Error + Send + Sync>>>;

impl tower::Service<http::Request<tonic::body::Body>> for FaultService {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let (fault, calls) = (self.fault, self.calls.clone());
        Box::pin(async move {
            calls.fetch_add(1, Ordering::SeqCst);
            let _ = request.into_body().collect().await;
            let ok = || {
                let mut trailers = http::HeaderMap::new();
                trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
                Ok(Frame::trailers(trailers))
            };
            let frames: Frames = match fault {
                Fault::Hang => std::future::pending().await,
                // A field 2 (`desired`) whose length runs past the end of the message.
                Fault::Garbage => vec![Ok(Frame::data(grpc_message(&[0x12, 0x7f, 0x01, 0x02]))), ok()],
                Fault::Oversize => vec![Ok(Frame::data(grpc_message(&vec![0x20; 5 * 1024 * 1024]))), ok()],
                Fault::CloseStream => vec![Err("the function went away".into())],
            };
            let body = tonic::body::Body::new(StreamBody::new(futures::stream::iter(frames)));
            Ok(http::Response::builder().header("content-type", "application/grpc").body(body).unwrap())
        })
    }
}

/// A function that refuses every request with a Fatal result.
struct Refuses;

#[async_trait::async_trait]
impl Function for Refuses {
    async fn run(&self, request: RunFunctionRequest) -> Result<RunFunctionResponse, FunctionError> {
        Ok(RunFunctionResponse {
            desired: request.desired,
            results: vec![FnResult::fatal("the quota for settings is used up")],
            ..Default::default()
        })
    }
}

async fn serve_fault(fault: Fault, calls: Arc<AtomicUsize>) -> Served {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let (stop, stopped) = oneshot::channel::<()>();
    let router = tonic::transport::Server::builder().add_service(FaultService { fault, calls });
    tokio::spawn(router.serve_with_incoming_shutdown(tonic::transport::server::TcpIncoming::from(listener), async move {
        let _ = stopped.await;
    }));
    Served { address, stop }
}

/// The Function `name` pointed at `address`, insecure or with mutual TLS.
fn function(name: &str, address: &str, mutual_tls: bool) -> Value {
    let annotations = if mutual_tls {
        json!({"oxplane.io/function-endpoint": address})
    } else {
        json!({"render.crossplane.io/runtime": "Development", "render.crossplane.io/runtime-development-target": address})
    };
    json!({
        "apiVersion": "pkg.crossplane.io/v1",
        "kind": "Function",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"package": "xpkg.example.org/team/function-remote:v0.1.0"},
    })
}

/// A Composition `name` whose first step composes `settings` in-process and whose second
/// composes `remote-made` through the Function `remote` (patch-and-transform when healthy).
fn composition(name: &str, remote: &str) -> String {
    format!(
        r#"
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: {name}
spec:
  compositeTypeRef: {{apiVersion: example.org/v1, kind: XApp}}
  mode: Pipeline
  pipeline:
  - step: settings
    functionRef: {{name: function-patch-and-transform}}
    input:
      apiVersion: pt.fn.crossplane.io/v1beta1
      kind: Resources
      resources:
      - name: settings
        base: {{apiVersion: v1, kind: ConfigMap, data: {{role: settings}}}}
  - step: remote
    functionRef: {{name: {remote}}}
    input:
      apiVersion: pt.fn.crossplane.io/v1beta1
      kind: Resources
      resources:
      - name: remote-made
        base: {{apiVersion: v1, kind: ConfigMap, data: {{role: remote}}}}
        patches:
        - fromFieldPath: spec.color
          toFieldPath: data.color
  - step: ready
    functionRef: {{name: function-auto-ready}}
"#
    )
}

fn xapp(name: &str, composition: &str) -> String {
    format!("apiVersion: example.org/v1\nkind: XApp\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  color: red\n  crossplane:\n    compositionRef: {{name: {composition}}}\n")
}

/// The ConfigMaps composed for the XR `uid`, by composition resource name.
async fn composed(plane: &Plane, uid: &str) -> Vec<String> {
    let mut names: Vec<String> = plane
        .runtime
        .kube
        .list(&config_maps(), Some("default"), None)
        .await
        .unwrap()
        .into_iter()
        .filter(|c| oxplane_runtime::object::controller_uid(c) == Some(uid))
        .filter_map(|c| oxplane_runtime::object::annotation(&c, "crossplane.io/composition-resource-name").map(str::to_string))
        .collect();
    names.sort();
    names
}

async fn point(plane: &Plane, name: &str, address: &str, mutual_tls: bool) {
    let current = plane.runtime.kube.get(&functions(), None, name).await.unwrap().unwrap();
    let mut updated = function(name, address, mutual_tls);
    updated["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
    updated["metadata"]["finalizers"] = current["metadata"]["finalizers"].clone();
    plane.runtime.kube.replace(&functions(), &updated).await.unwrap();
}

#[tokio::test]
async fn a_function_gone_bad_is_named_retried_keeps_what_was_composed_and_recovers() {
    let plane = Plane::start().await;
    let ca = CertificateAuthority::load_or_create(&plane.server.path().join("pki/functions")).unwrap();
    let good_certs = plane.server.path().join("good-certs");
    ca.write_server_dir(&good_certs, &["127.0.0.1".to_string()]).unwrap();
    let stranger = CertificateAuthority::load_or_create(&plane.server.path().join("another-ca")).unwrap();
    let stranger_certs = plane.server.path().join("stranger-certs");
    stranger.write_server_dir(&stranger_certs, &["127.0.0.1".to_string()]).unwrap();

    let good = serve_function(Arc::new(PatchAndTransform), None).await;
    let good_tls = serve_function(Arc::new(PatchAndTransform), Some(ServerTls::from_dir(&good_certs).unwrap())).await;
    let calls = Arc::new(AtomicUsize::new(0));
    let hang = serve_fault(Fault::Hang, calls.clone()).await;
    let garbage = serve_fault(Fault::Garbage, calls.clone()).await;
    let oversize = serve_fault(Fault::Oversize, calls.clone()).await;
    let closes = serve_fault(Fault::CloseStream, calls.clone()).await;
    let wrong_cert = serve_function(Arc::new(PatchAndTransform), Some(ServerTls::from_dir(&stranger_certs).unwrap())).await;
    let fatal = serve_function(Arc::new(Refuses), None).await;
    let down = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap().to_string();

    // (Function, the address it goes bad at, mutual TLS, the cause the XR must name.)
    let cases: Vec<(&str, String, bool, String)> = vec![
        ("f-down", down.clone(), false, "rpc error: code = Unavailable desc = tcp connect error: Connection refused (os error 111)".into()),
        ("f-hang", hang.address.clone(), false, "no response within 10s".into()),
        (
            "f-garbage",
            garbage.address.clone(),
            false,
            "rpc error: code = Internal desc = failed to decode Protobuf message: RunFunctionResponse.desired: buffer underflow".into(),
        ),
        ("f-oversize", oversize.address.clone(), false, "rpc error: code = OutOfRange desc = Error, decoded message length too large: found 5242880 bytes, the limit is: 4194304 bytes".into()),
        ("f-closes", closes.address.clone(), false, "rpc error: code = Internal desc = h2 protocol error: http2 error: stream error received: unexpected internal error encountered".into()),
        ("f-wrong-cert", wrong_cert.address.clone(), true, "rpc error: code = Unavailable desc = invalid peer certificate: BadSignature".into()),
        ("f-fatal", fatal.address.clone(), false, String::new()),
    ];
    for (name, _, mutual_tls, _) in &cases {
        let address = if *mutual_tls { &good_tls.address } else { &good.address };
        plane.runtime.kube.create(&functions(), &function(name, address, *mutual_tls)).await.unwrap();
    }
    for (name, ..) in &cases {
        plane.wait_object(&functions(), None, name, "the function to be healthy", |f| is_true(f, "Healthy")).await;
    }
    plane.apply_yaml(XAPP_XRD).await;
    for (name, ..) in &cases {
        plane.apply_yaml(&composition(&format!("via-{name}"), name)).await;
        plane.apply_yaml(&xapp(&format!("xr-{name}"), &format!("via-{name}"))).await;
    }
    let mut uids = Vec::new();
    for (name, ..) in &cases {
        let xr = plane.wait_object(&xapps(), Some("default"), &format!("xr-{name}"), "the XR to compose", |x| is_true(x, "Ready")).await;
        let uid = oxplane_runtime::object::uid(&xr).unwrap().to_string();
        assert_eq!(composed(&plane, &uid).await, ["remote-made", "settings"]);
        uids.push(uid);
    }

    // Every function goes bad, and every XR is reconciled again (a change of its own, as
    // otherwise only its poll interval would bring the next call).
    for (name, address, mutual_tls, _) in &cases {
        point(&plane, name, address, *mutual_tls).await;
    }
    for (name, address, ..) in &cases {
        // The Function's new endpoint is in use once its revision says so.
        let revisions = Kind::new("pkg.crossplane.io", "v1", "FunctionRevision", "functionrevisions", false);
        let selector = format!("pkg.crossplane.io/package={name}");
        plane
            .wait(&format!("{name} to point at {address}"), async |p| {
                let revision = p.runtime.kube.list(&revisions, None, Some(&selector)).await.unwrap().pop()?;
                (revision["status"]["endpoint"] == address.as_str()).then_some(())
            })
            .await;
    }
    for (name, ..) in &cases {
        let touch = json!({"metadata": {"annotations": {"example.org/touched": "yes"}}});
        plane.runtime.kube.merge_patch(&xapps(), Some("default"), &format!("xr-{name}"), &touch).await.unwrap();
    }
    plane.apply_yaml(&composition("via-built-ins", "function-patch-and-transform")).await;
    plane.apply_yaml(&xapp("bystander", "via-built-ins")).await;
    let mut failed = Vec::new();
    for (name, _, _, cause) in &cases {
        let message = if cause.is_empty() {
            "cannot compose resources: pipeline step \"remote\" returned a fatal result: the quota for settings is used up".to_string()
        } else {
            format!("cannot compose resources: cannot run Composition pipeline step \"remote\": cannot run Function \"{name}\": {cause}")
        };
        let xr = plane
            .wait_object(&xapps(), Some("default"), &format!("xr-{name}"), &format!("xr-{name} to fail"), |x| {
                condition(x, "Synced").is_some_and(|c| c.status == "False" && c.message.contains("\"remote\""))
            })
            .await;
        let synced = condition(&xr, "Synced").unwrap();
        assert_eq!((synced.reason.as_str(), synced.message.as_str()), ("ReconcileError", message.as_str()));
        // Events are recorded beside the status, not before it.
        plane
            .wait(&format!("a Warning event on xr-{name}"), async |p| {
                p.events_of(&xr).await.iter().any(|(t, _, m)| t == "Warning" && *m == message).then_some(())
            })
            .await;
        failed.push(xr);
    }
    // Meanwhile another XR composed, and nothing already composed was deleted.
    plane.wait_object(&xapps(), Some("default"), "bystander", "the bystander to compose", |x| is_true(x, "Ready")).await;
    for uid in &uids {
        assert_eq!(composed(&plane, uid).await, ["remote-made", "settings"]);
    }
    // Retried: the fault servers are called again without anyone touching the XRs.
    let so_far = calls.load(Ordering::SeqCst);
    plane.wait("the failing XRs to be retried", async |_| (calls.load(Ordering::SeqCst) >= so_far + 4).then_some(())).await;

    // The functions are good again: every XR composes again by itself.
    for (name, _, mutual_tls, _) in &cases {
        let address = if *mutual_tls { &good_tls.address } else { &good.address };
        point(&plane, name, address, *mutual_tls).await;
    }
    for (name, ..) in &cases {
        plane.wait_object(&xapps(), Some("default"), &format!("xr-{name}"), "the XR to recover", |x| is_true(x, "Synced") && is_true(x, "Ready")).await;
    }
    for uid in &uids {
        assert_eq!(composed(&plane, uid).await, ["remote-made", "settings"]);
    }
}
