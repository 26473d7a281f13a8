//! Serving webhooks: an HTTPS server on loopback answering each POST with what a handler makes
//! of its path and body, under a certificate from a CA of its own whose PEM goes into the
//! webhook configuration's `caBundle`. The tests' webhooks run on it, and so does any webhook
//! oxplane serves itself.

use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::{BodyExt, Full, Limited};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::sync::oneshot;

use crate::ServeError;

/// What a handler answers: status code, body.
pub type Answer = (u16, Vec<u8>);

/// Makes the answer to a POST of `body` to `path`.
pub type Handler = Arc<dyn Fn(&str, &[u8]) -> Answer + Send + Sync>;

/// Makes the answer to a POST of `body` to `path` asynchronously, for a handler that calls an
/// API server itself (the Usage webhook lists Usages).
pub type AsyncHandler = Arc<dyn Fn(String, bytes::Bytes) -> futures::future::BoxFuture<'static, Answer> + Send + Sync>;

/// A running webhook server; stopped when dropped.
pub struct WebhookServer {
    /// Where it listens.
    pub address: SocketAddr,
    /// The CA that signed its certificate (PEM), for `caBundle`.
    pub ca_pem: String,
    stop: Option<oneshot::Sender<()>>,
}

impl WebhookServer {
    /// Starts a server on `listen` (`127.0.0.1:0` for a free port) whose certificate names
    /// `names` (e.g. `127.0.0.1`, `webhook.default.svc`).
    pub async fn start(listen: &str, names: &[String], handler: Handler) -> Result<WebhookServer, ServeError> {
        let handler: AsyncHandler = Arc::new(move |path: String, body: bytes::Bytes| {
            let answer = handler(&path, &body);
            Box::pin(async move { answer })
        });
        WebhookServer::start_async(listen, names, handler).await
    }

    /// [`WebhookServer::start`] with a handler that answers asynchronously.
    pub async fn start_async(listen: &str, names: &[String], handler: AsyncHandler) -> Result<WebhookServer, ServeError> {
        let certs = crate::server::tls::generate_serving(names)?;
        let tls = |e: &dyn std::fmt::Display| ServeError::Tls(e.to_string());
        let chain: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(certs.cert_pem.as_bytes()).collect::<Result<_, _>>().map_err(|e| tls(&e))?;
        let key = PrivateKeyDer::from_pem_slice(certs.key_pem.as_bytes()).map_err(|e| tls(&e))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| tls(&e))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| tls(&e))?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|source| ServeError::Bind { address: listen.to_string(), source })?;
        let address = listener.local_addr().map_err(|e| ServeError::io("reading the listen address", e))?;
        let (stop, mut stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            loop {
                let (tcp, _) = tokio::select! {
                    accepted = listener.accept() => match accepted {
                        Ok(conn) => conn,
                        Err(_) => continue,
                    },
                    _ = &mut stopped => break,
                };
                let acceptor = acceptor.clone();
                let handler = handler.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else { return };
                    let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                        let handler = handler.clone();
                        async move {
                            let path = request.uri().path().to_string();
                            let body = match Limited::new(request.into_body(), crate::http::MAX_BODY * 2).collect().await {
                                Ok(body) => body.to_bytes(),
                                Err(_) => bytes::Bytes::new(),
                            };
                            let (code, answer) = handler(path, body).await;
                            let mut response = hyper::Response::new(Full::new(bytes::Bytes::from(answer)));
                            *response.status_mut() = hyper::StatusCode::from_u16(code).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
                            response.headers_mut().insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("application/json"));
                            Ok::<_, std::convert::Infallible>(response)
                        }
                    });
                    let _ = auto::Builder::new(TokioExecutor::new()).serve_connection(TokioIo::new(tls), service).await;
                });
            }
        });
        Ok(WebhookServer { address, ca_pem: certs.ca_pem, stop: Some(stop) })
    }

    /// `caBundle`: the CA's PEM, base64.
    pub fn ca_bundle(&self) -> String {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(&self.ca_pem)
    }

    /// `https://ADDRESS` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.address)
    }
}

impl Drop for WebhookServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// The `AdmissionReview` answering `review`: allowed or not, with a status message, a JSON
/// patch and warnings; what a webhook sends back.
pub fn admission_response(review: &serde_json::Value, allowed: bool, message: Option<&str>, patch: Option<&serde_json::Value>, warnings: &[&str]) -> serde_json::Value {
    use base64::Engine;
    let mut response = serde_json::json!({"uid": review["request"]["uid"], "allowed": allowed});
    if let Some(message) = message {
        response["status"] = serde_json::json!({"message": message, "code": 403});
    }
    if let Some(patch) = patch {
        response["patchType"] = serde_json::json!("JSONPatch");
        response["patch"] = serde_json::json!(base64::engine::general_purpose::STANDARD.encode(patch.to_string()));
    }
    if !warnings.is_empty() {
        response["warnings"] = serde_json::json!(warnings);
    }
    serde_json::json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
}
