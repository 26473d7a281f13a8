//! A small REST service for provider-http's tests, served on 127.0.0.1: users with
//! server-assigned identifiers, found by id or by name.
//!
//! API (JSON): `POST /api/users` `{username, ...}` → 201 `{id, username, ...}` (409 when the
//! username is taken); `GET /api/users/{id}`; `GET /api/users/by-name/{username}`;
//! `PUT /api/users/{id}` (replaces the fields given); `DELETE /api/users/{id}` → 204;
//! `GET /api/health` → `{"status": "ok"}`; `POST /api/notify` echoes its body.
//!
//! It can be stopped and started again on the same port (its data survives, as a real
//! service's would), made to answer the next requests with 500, or to answer slowly. It
//! records every POST and the `Authorization` headers it saw.
//!
//! [`RestServer::start_tls`] serves it over HTTPS instead, under a certificate for
//! `127.0.0.1` and `localhost` from a CA of its own (rcgen, through the function CA's
//! issuer), optionally requiring a client certificate from the same CA.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

#[derive(Debug, Default)]
struct Data {
    users: BTreeMap<u64, Value>,
    next_id: u64,
    posts: u64,
    fail_next: u32,
    delay: Duration,
    authorizations: Vec<String>,
}

type Shared = Arc<Mutex<Data>>;

fn lock(data: &Shared) -> std::sync::MutexGuard<'_, Data> {
    data.lock().unwrap_or_else(|p| p.into_inner())
}

/// Applies the test knobs (delay, forced failures) and records the request.
async fn gate(data: &Shared, headers: &HeaderMap) -> Option<Response> {
    let (delay, fail) = {
        let mut d = lock(data);
        if let Some(auth) = headers.get("authorization").and_then(|v| v.to_str().ok()) {
            d.authorizations.push(auth.to_string());
        }
        let fail = d.fail_next > 0;
        if fail {
            d.fail_next -= 1;
        }
        (d.delay, fail)
    };
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    fail.then(|| (StatusCode::INTERNAL_SERVER_ERROR, axum::Json(json!({"error": "internal error"}))).into_response())
}

async fn create(State(data): State<Shared>, headers: HeaderMap, body: String) -> Response {
    if let Some(failure) = gate(&data, &headers).await {
        return failure;
    }
    let Ok(Value::Object(mut user)) = serde_json::from_str::<Value>(&body) else {
        return (StatusCode::BAD_REQUEST, axum::Json(json!({"error": "body must be a JSON object"}))).into_response();
    };
    let mut d = lock(&data);
    d.posts += 1;
    let name = user.get("username").cloned();
    if name.is_some() && d.users.values().any(|u| u.get("username") == name.as_ref()) {
        return (StatusCode::CONFLICT, axum::Json(json!({"error": "username taken"}))).into_response();
    }
    d.next_id += 1;
    let id = d.next_id;
    user.insert("id".into(), json!(id));
    d.users.insert(id, Value::Object(user.clone()));
    (StatusCode::CREATED, axum::Json(Value::Object(user))).into_response()
}

async fn read(State(data): State<Shared>, headers: HeaderMap, Path(id): Path<u64>) -> Response {
    if let Some(failure) = gate(&data, &headers).await {
        return failure;
    }
    match lock(&data).users.get(&id) {
        Some(user) => axum::Json(user.clone()).into_response(),
        None => (StatusCode::NOT_FOUND, axum::Json(json!({"error": "not found"}))).into_response(),
    }
}

async fn by_name(State(data): State<Shared>, headers: HeaderMap, Path(name): Path<String>) -> Response {
    if let Some(failure) = gate(&data, &headers).await {
        return failure;
    }
    match lock(&data).users.values().find(|u| u.get("username").and_then(Value::as_str) == Some(&name)) {
        Some(user) => axum::Json(user.clone()).into_response(),
        None => (StatusCode::NOT_FOUND, axum::Json(json!({"error": "not found"}))).into_response(),
    }
}

async fn update(State(data): State<Shared>, headers: HeaderMap, Path(id): Path<u64>, body: String) -> Response {
    if let Some(failure) = gate(&data, &headers).await {
        return failure;
    }
    let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(&body) else {
        return (StatusCode::BAD_REQUEST, axum::Json(json!({"error": "body must be a JSON object"}))).into_response();
    };
    let mut d = lock(&data);
    match d.users.get_mut(&id).and_then(Value::as_object_mut) {
        Some(user) => {
            user.extend(fields);
            user.insert("id".into(), json!(id));
            axum::Json(Value::Object(user.clone())).into_response()
        }
        None => (StatusCode::NOT_FOUND, axum::Json(json!({"error": "not found"}))).into_response(),
    }
}

async fn remove(State(data): State<Shared>, headers: HeaderMap, Path(id): Path<u64>) -> Response {
    if let Some(failure) = gate(&data, &headers).await {
        return failure;
    }
    match lock(&data).users.remove(&id) {
        Some(_) => StatusCode::NO_CONTENT.into_response(),
        None => (StatusCode::NOT_FOUND, axum::Json(json!({"error": "not found"}))).into_response(),
    }
}

async fn health(State(data): State<Shared>, headers: HeaderMap) -> Response {
    if let Some(failure) = gate(&data, &headers).await {
        return failure;
    }
    axum::Json(json!({"status": "ok"})).into_response()
}

async fn notify(State(data): State<Shared>, headers: HeaderMap, body: String) -> Response {
    if let Some(failure) = gate(&data, &headers).await {
        return failure;
    }
    lock(&data).posts += 1;
    (StatusCode::OK, axum::Json(json!({"received": body, "job_status": "success"}))).into_response()
}

/// The HTTPS side of a [`RestServer`]: its rustls configuration and the PEMs a client needs.
struct Https {
    config: Arc<rustls::ServerConfig>,
    ca_pem: String,
    client_cert_pem: String,
    client_key_pem: String,
    _dir: tempfile::TempDir,
}

/// Why an HTTPS service could not be set up.
fn tls_error(error: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(format!("TLS: {error}"))
}

impl Https {
    fn new(require_client_certificate: bool) -> std::io::Result<Https> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let dir = tempfile::tempdir()?;
        let ca = oxplane_functions::grpc::tls::CertificateAuthority::load_or_create(dir.path()).map_err(tls_error)?;
        let server = ca.issue_server(&["127.0.0.1".to_string(), "localhost".to_string()]).map_err(tls_error)?;
        let client = ca.client_tls(std::time::SystemTime::now()).map_err(tls_error)?;
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(server.cert_pem.as_bytes()).collect::<Result<_, _>>().map_err(tls_error)?;
        let key = PrivateKeyDer::from_pem_slice(server.key_pem.as_bytes()).map_err(tls_error)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone()).with_safe_default_protocol_versions().map_err(tls_error)?;
        let builder = if require_client_certificate {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(ca.ca_pem().as_bytes()) {
                roots.add(cert.map_err(tls_error)?).map_err(tls_error)?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider).build().map_err(tls_error)?;
            builder.with_client_cert_verifier(verifier)
        } else {
            builder.with_no_client_auth()
        };
        let mut config = builder.with_single_cert(chain, key).map_err(tls_error)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Https { config: Arc::new(config), ca_pem: ca.ca_pem().to_string(), client_cert_pem: client.cert_pem, client_key_pem: client.key_pem, _dir: dir })
    }
}

/// The service.
pub struct RestServer {
    data: Shared,
    address: SocketAddr,
    task: Option<tokio::task::JoinHandle<()>>,
    https: Option<Https>,
}

impl RestServer {
    /// Starts on a free port.
    pub async fn start() -> std::io::Result<RestServer> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let mut server = RestServer { data: Shared::default(), address, task: None, https: None };
        server.serve(listener);
        Ok(server)
    }

    /// Starts on a free port over HTTPS, requiring a client certificate (from
    /// [`RestServer::client_certificate`]) if asked to.
    pub async fn start_tls(require_client_certificate: bool) -> std::io::Result<RestServer> {
        let https = Https::new(require_client_certificate)?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let mut server = RestServer { data: Shared::default(), address, task: None, https: Some(https) };
        server.serve(listener);
        Ok(server)
    }

    /// PEM of the CA the HTTPS certificate chains to.
    pub fn ca_pem(&self) -> Option<&str> {
        self.https.as_ref().map(|h| h.ca_pem.as_str())
    }

    /// PEM of a client certificate and its key that the HTTPS service accepts.
    pub fn client_certificate(&self) -> Option<(&str, &str)> {
        self.https.as_ref().map(|h| (h.client_cert_pem.as_str(), h.client_key_pem.as_str()))
    }

    fn serve(&mut self, listener: tokio::net::TcpListener) {
        let app = Router::new()
            .route("/api/users", post(create))
            .route("/api/users/{id}", get(read).put(update).delete(remove))
            .route("/api/users/by-name/{name}", get(by_name))
            .route("/api/health", get(health))
            .route("/api/notify", post(notify))
            .with_state(self.data.clone());
        let Some(https) = &self.https else {
            self.task = Some(tokio::spawn(async move {
                let _ = axum::serve(listener, app).await;
            }));
            return;
        };
        // axum::serve speaks plain HTTP only: over TLS each connection is accepted by
        // tokio-rustls and served by hyper with the same router.
        let acceptor = tokio_rustls::TlsAcceptor::from(https.config.clone());
        self.task = Some(tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else { continue };
                let (acceptor, app) = (acceptor.clone(), app.clone());
                tokio::spawn(async move {
                    let Ok(stream) = acceptor.accept(tcp).await else { return };
                    let service = hyper_util::service::TowerToHyperService::new(app);
                    let builder = hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
                    let _ = builder.serve_connection(hyper_util::rt::TokioIo::new(stream), service).await;
                });
            }
        }));
    }

    /// `http://127.0.0.1:PORT/api` (`https://` when started with [`RestServer::start_tls`]).
    pub fn base_url(&self) -> String {
        let scheme = if self.https.is_some() { "https" } else { "http" };
        format!("{scheme}://{}/api", self.address)
    }

    /// Stops serving (connections are refused) until [`RestServer::restart`].
    pub fn stop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }

    /// Serves again on the same port, with the same data.
    pub async fn restart(&mut self) -> std::io::Result<()> {
        self.stop();
        // The aborted listener may take a moment to release the port.
        let mut attempts = 0;
        let listener = loop {
            match tokio::net::TcpListener::bind(self.address).await {
                Ok(listener) => break listener,
                Err(error) if attempts < 50 => {
                    attempts += 1;
                    let _ = error;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(error) => return Err(error),
            }
        };
        self.serve(listener);
        Ok(())
    }

    /// Answers the next `count` requests with 500.
    pub fn fail_next(&self, count: u32) {
        lock(&self.data).fail_next = count;
    }

    /// Waits this long before answering each request.
    pub fn set_delay(&self, delay: Duration) {
        lock(&self.data).delay = delay;
    }

    /// The users held.
    pub fn users(&self) -> Vec<Value> {
        lock(&self.data).users.values().cloned().collect()
    }

    /// Changes a user behind the provider's back.
    pub fn set_user_field(&self, id: u64, field: &str, value: Value) {
        if let Some(user) = lock(&self.data).users.get_mut(&id).and_then(Value::as_object_mut) {
            user.insert(field.into(), value);
        }
    }

    /// How many POSTs it served.
    pub fn posts(&self) -> u64 {
        lock(&self.data).posts
    }

    /// The `Authorization` headers it saw.
    pub fn authorizations(&self) -> Vec<String> {
        lock(&self.data).authorizations.clone()
    }
}

impl Drop for RestServer {
    fn drop(&mut self) {
        self.stop();
    }
}
