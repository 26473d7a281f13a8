//! Functions over gRPC: a built-in served by [`serve`] and called by [`GrpcFunction`] answers
//! as it does in-process, in plain text and with mutual TLS from oxplane's CA; a v1beta1-only
//! function is reached by the fallback; failures name their cause.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use oxplane_functions::grpc::proto::v1beta1;
use oxplane_functions::grpc::tls::{CertificateAuthority, LEAF_VALIDITY};
use oxplane_functions::grpc::{FunctionEndpoint, GrpcFunction, ServerTls, serve, tag};
use oxplane_functions::protocol::{Capability, Function, FunctionError, Resource, RunFunctionRequest, RunFunctionResponse, State};
use oxplane_functions::{AutoReady, PatchAndTransform};
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// A running function server, stopped when dropped.
struct Served {
    address: String,
    _stop: oneshot::Sender<()>,
}

async fn start(function: Arc<dyn Function>, tls: Option<ServerTls>) -> Served {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(async move {
        serve(function, listener, tls, async move {
            let _ = stopped.await;
        })
        .await
        .unwrap();
    });
    Served { address, _stop: stop }
}

fn request() -> RunFunctionRequest {
    let xr = json!({"apiVersion": "example.org/v1", "kind": "XApp", "metadata": {"name": "app"}, "spec": {"size": 3, "ratio": 0.5}});
    let bucket = json!({"apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource", "metadata": {"name": "b"},
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Available", "lastTransitionTime": "2024-01-01T00:00:00Z"}]}});
    let mut request = RunFunctionRequest {
        observed: State {
            composite: Some(Resource { resource: xr.clone(), ..Default::default() }),
            resources: BTreeMap::from([("bucket".to_string(), Resource { resource: bucket.clone(), ..Default::default() })]),
        },
        desired: State {
            composite: Some(Resource { resource: json!({"apiVersion": "example.org/v1", "kind": "XApp"}), ..Default::default() }),
            resources: BTreeMap::from([(
                "bucket".to_string(),
                Resource { resource: json!({"apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource"}), ..Default::default() },
            )]),
        },
        context: Some(json!({"apiextensions.crossplane.io/environment": {"region": "eu"}})),
        ..Default::default()
    };
    request.meta.capabilities = Capability::ALL.to_vec();
    request.meta.tag = tag(&request);
    request
}

#[tokio::test]
async fn a_builtin_over_plain_grpc_answers_as_in_process() {
    let served = start(Arc::new(AutoReady), None).await;
    let remote = GrpcFunction::new("function-auto-ready", FunctionEndpoint::insecure(&served.address), Duration::from_secs(30)).unwrap();
    let expected = AutoReady.run(request()).await.unwrap();
    // Several calls share the client's one channel.
    for _ in 0..3 {
        assert_eq!(remote.run(request()).await.unwrap(), expected);
    }
    assert_eq!(expected.desired.resources["bucket"].ready, oxplane_functions::protocol::Ready::True);
}

#[tokio::test]
async fn a_builtin_over_mutual_tls_answers_and_strangers_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ca = CertificateAuthority::load_or_create(&dir.path().join("ca")).unwrap();
    let certs = dir.path().join("function-certs");
    ca.write_server_dir(&certs, &["127.0.0.1".to_string(), "localhost".to_string()]).unwrap();
    for file in ["tls.crt", "tls.key", "ca.crt"] {
        assert!(certs.join(file).is_file(), "{file} is written");
    }
    let served = start(Arc::new(PatchAndTransform), Some(ServerTls::from_dir(&certs).unwrap())).await;

    let endpoint = FunctionEndpoint { address: served.address.clone(), tls: Some(ca.client_tls(SystemTime::now()).unwrap()) };
    let remote = GrpcFunction::new("function-patch-and-transform", endpoint, Duration::from_secs(30)).unwrap();
    assert_eq!(remote.run(request()).await.unwrap(), PatchAndTransform.run(request()).await.unwrap());

    // A client whose certificate another CA signed is turned away by the function.
    let other = CertificateAuthority::load_or_create(&dir.path().join("other-ca")).unwrap();
    let mut stranger = other.client_tls(SystemTime::now()).unwrap();
    stranger.ca_pem = ca.ca_pem().to_string();
    let remote = GrpcFunction::new("fn", FunctionEndpoint { address: served.address.clone(), tls: Some(stranger) }, Duration::from_secs(30)).unwrap();
    let error = remote.run(request()).await.unwrap_err().to_string();
    assert!(error.starts_with("cannot run Function \"fn\": rpc error: code = Unknown desc = transport error: received fatal alert"), "{error}");

    // A server whose certificate another CA signed is not trusted by oxplane.
    let mut wrong = ca.client_tls(SystemTime::now()).unwrap();
    wrong.ca_pem = other.ca_pem().to_string();
    let remote = GrpcFunction::new("fn", FunctionEndpoint { address: served.address.clone(), tls: Some(wrong) }, Duration::from_secs(30)).unwrap();
    let error = remote.run(request()).await.unwrap_err().to_string();
    assert!(error.contains("UnknownIssuer") || error.contains("unknown issuer") || error.contains("invalid peer certificate"), "{error}");
}

#[test]
fn the_client_certificate_is_kept_and_rotated_before_it_expires() {
    let dir = tempfile::tempdir().unwrap();
    let ca = CertificateAuthority::load_or_create(dir.path()).unwrap();
    let now = SystemTime::now();
    let first = ca.client_tls(now).unwrap();
    assert_eq!(ca.client_tls(now + Duration::from_secs(24 * 3600)).unwrap().cert_pem, first.cert_pem, "kept while far from expiry");
    // The CA itself is kept across loads.
    let again = CertificateAuthority::load_or_create(dir.path()).unwrap();
    assert_eq!(again.ca_pem(), ca.ca_pem());
    let late = now + LEAF_VALIDITY - Duration::from_secs(10 * 24 * 3600);
    let rotated = again.client_tls(late).unwrap();
    assert_ne!(rotated.cert_pem, first.cert_pem, "rotated within the last 30 days");
    assert_eq!(again.client_tls(late).unwrap().cert_pem, rotated.cert_pem);
}

/// A function that serves only `v1beta1`, as functions built before v1 did.
struct BetaOnly;

#[tonic::async_trait]
impl v1beta1::function_runner_service_server::FunctionRunnerService for BetaOnly {
    async fn run_function(
        &self,
        request: tonic::Request<v1beta1::RunFunctionRequest>,
    ) -> Result<tonic::Response<v1beta1::RunFunctionResponse>, tonic::Status> {
        let request = request.into_inner();
        let tag = request.meta.map(|m| m.tag).unwrap_or_default();
        let results = vec![v1beta1::Result { severity: v1beta1::Severity::Normal as i32, message: "beta".into(), reason: None, target: None }];
        Ok(tonic::Response::new(v1beta1::RunFunctionResponse {
            meta: Some(v1beta1::ResponseMeta { tag, ttl: None }),
            desired: request.desired,
            results,
            ..Default::default()
        }))
    }
}

#[tokio::test]
async fn a_function_serving_only_v1beta1_is_reached_by_the_fallback() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(v1beta1::function_runner_service_server::FunctionRunnerServiceServer::new(BetaOnly))
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    let remote = GrpcFunction::new("old", FunctionEndpoint::insecure(address), Duration::from_secs(30)).unwrap();
    let sent = request();
    let response: RunFunctionResponse = remote.run(sent.clone()).await.unwrap();
    assert_eq!(response.meta.tag, sent.meta.tag);
    assert_eq!(response.desired, sent.desired);
    assert_eq!(response.results[0].message, "beta");
}

/// A function that never answers in time.
struct Slow;

#[async_trait::async_trait]
impl Function for Slow {
    async fn run(&self, request: RunFunctionRequest) -> Result<RunFunctionResponse, FunctionError> {
        tokio::time::sleep(Duration::from_secs(30)).await;
        Ok(oxplane_functions::protocol::response_to(&request, Duration::from_secs(60)))
    }
}

#[tokio::test]
async fn a_hanging_function_times_out_and_a_missing_one_is_unreachable() {
    let served = start(Arc::new(Slow), None).await;
    let remote = GrpcFunction::new("slow", FunctionEndpoint::insecure(&served.address), Duration::from_millis(500)).unwrap();
    let error = remote.run(request()).await.unwrap_err().to_string();
    assert_eq!(error, "cannot run Function \"slow\": no response within 500ms");

    // Nothing listens on a port just released.
    let port = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap().port();
    let remote = GrpcFunction::new("down", FunctionEndpoint::insecure(format!("127.0.0.1:{port}")), Duration::from_secs(30)).unwrap();
    let error = remote.run(request()).await.unwrap_err().to_string();
    assert!(error.starts_with("cannot run Function \"down\": rpc error: code = Unavailable"), "{error}");
    assert!(error.contains("Connection refused"), "{error}");
}

#[test]
fn tags_name_the_content_of_a_request() {
    let a = request();
    let mut b = request();
    assert_eq!(tag(&a), tag(&b), "equal requests share a tag");
    b.meta.tag = "anything".into();
    assert_eq!(tag(&a), tag(&b), "the tag does not hash itself");
    b.input = Some(json!({"apiVersion": "x/v1", "kind": "Input"}));
    assert_ne!(tag(&a), tag(&b));
    assert_eq!(tag(&a).len(), 64);
}

/// Counts the calls it answers; every response carries a one-minute TTL and the call's number.
struct CountingFunction(std::sync::atomic::AtomicUsize);

#[async_trait::async_trait]
impl Function for CountingFunction {
    async fn run(&self, request: RunFunctionRequest) -> Result<RunFunctionResponse, FunctionError> {
        let call = self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        let mut response = oxplane_functions::protocol::response_to(&request, Duration::from_secs(60));
        response.context = Some(json!({"call": call}));
        Ok(response)
    }
}

#[tokio::test]
async fn the_response_cache_answers_an_identical_request_without_calling_the_function_again() {
    let counting = Arc::new(CountingFunction(Default::default()));
    let served = start(counting.clone(), None).await;
    let remote: Arc<dyn Function> =
        Arc::new(GrpcFunction::new("function-counting", FunctionEndpoint::insecure(&served.address), Duration::from_secs(30)).unwrap());
    let dir = tempfile::tempdir().unwrap();
    let cache = oxplane_functions::cache::ResponseCache::new(dir.path().join("xfn"), oxplane_functions::cache::DEFAULT_MAX_TTL, 1024 * 1024);
    let cached = cache.wrap("function-counting", remote);
    let first = cached.run(request()).await.unwrap();
    assert_eq!(first.context, Some(json!({"call": 1})));
    assert_eq!(first.meta.ttl, Some(Duration::from_secs(60)));
    for _ in 0..3 {
        assert_eq!(cached.run(request()).await.unwrap(), first);
    }
    assert_eq!(counting.0.load(std::sync::atomic::Ordering::SeqCst), 1);
    let mut other = request();
    other.input = Some(json!({"apiVersion": "x/v1", "kind": "Other"}));
    other.meta.tag = tag(&other);
    assert_eq!(cached.run(other).await.unwrap().context, Some(json!({"call": 2})));
    assert!(dir.path().join("xfn/function-counting").join(request().meta.tag).is_file());
}
