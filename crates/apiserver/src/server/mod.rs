//! `oxplane up`: opens the store, makes sure certificates and the admin token exist, listens on
//! HTTPS, writes the kubeconfig, then reports ready and serves until told to stop.

pub mod auth;
pub mod client_cert;
mod files;
pub use files::write_private;
pub mod kubeconfig;
pub mod shared;
pub mod tls;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use oxplane_store::etcd::{EtcdOptions, EtcdStore};
use oxplane_store::memory::MemoryStore;
use oxplane_store::sqlite::{SqliteOptions, SqliteStore};
use oxplane_store::{DirLock, Store};
use tokio::net::TcpListener;

use crate::ServeError;
use crate::authn::UserInfo;
use crate::cache::WatchCache;
use crate::encryption::{EncryptedStore, Encryption};
use crate::http::{self, AppState};
use crate::registry::Registry;

/// How `oxplane up` runs.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Where the store, certificates, token and kubeconfig live.
    pub data_dir: PathBuf,
    /// `HOST:PORT` to listen on; port 0 picks a free port.
    pub listen: String,
    /// Events the watch cache keeps for watches resuming from a revision; older ones get 410.
    pub watch_cache_window: usize,
    /// Live events a watcher may fall behind before it is ended with an in-stream 410.
    pub watch_live_queue: usize,
    /// How often watchers that allow bookmarks get one.
    pub watch_bookmark_interval: std::time::Duration,
    /// Read-only requests in flight before 429 (0 = unlimited).
    pub max_requests_inflight: usize,
    /// Mutating requests in flight before 429 (0 = unlimited).
    pub max_mutating_requests_inflight: usize,
    /// A static token file (kube-apiserver's `--token-auth-file` CSV format).
    pub token_auth_file: Option<PathBuf>,
    /// An `EncryptionConfiguration` file (kube-apiserver's `--encryption-provider-config`);
    /// `None` uses the one generated in the data directory on first start.
    pub encryption_provider_config: Option<PathBuf>,
    /// How long Events are kept after they last happened.
    pub event_ttl: std::time::Duration,
    /// The audit log (`--audit-log-path` and its companions); `None` logs nothing.
    pub audit: Option<crate::audit::AuditConfig>,
    /// Where objects are stored.
    pub store: StoreBackend,
    /// The issuer (`iss`) of ServiceAccount tokens, and the audience API requests' tokens must
    /// carry (kube-apiserver's `--service-account-issuer`).
    pub service_account_issuer: String,
}

/// The store `oxplane up` keeps objects in.
#[derive(Clone, Debug, Default)]
pub enum StoreBackend {
    /// The embedded SQLite file in the data directory (the default).
    #[default]
    Sqlite,
    /// Memory only: everything is lost when the process ends (demos and tests).
    Memory,
    /// An etcd cluster, which several servers can share.
    Etcd(EtcdOptions),
}

impl ServerConfig {
    /// A configuration with the default watch cache window, watch queue, bookmark interval and
    /// in-flight limits.
    pub fn new(data_dir: PathBuf, listen: impl Into<String>) -> Self {
        ServerConfig {
            data_dir,
            listen: listen.into(),
            watch_cache_window: crate::cache::DEFAULT_WINDOW,
            watch_live_queue: crate::cache::DEFAULT_LIVE_QUEUE,
            watch_bookmark_interval: http::watch::DEFAULT_BOOKMARK_INTERVAL,
            max_requests_inflight: http::inflight::DEFAULT_READONLY,
            max_mutating_requests_inflight: http::inflight::DEFAULT_MUTATING,
            token_auth_file: None,
            encryption_provider_config: None,
            event_ttl: crate::state::DEFAULT_EVENT_TTL,
            audit: None,
            store: StoreBackend::Sqlite,
            service_account_issuer: crate::authn::service_accounts::DEFAULT_ISSUER.to_string(),
        }
    }
}

/// Runs the server until `shutdown` completes, then stops accepting, lets in-flight requests
/// finish briefly, and closes the store.
pub async fn run(config: ServerConfig, shutdown: impl std::future::Future<Output = ()>) -> Result<(), ServeError> {
    Server::start(config).await?.serve(shutdown).await
}

/// A server that has opened its store and bound its address but does not answer yet: what
/// runs beside it (the controllers) can be wired to it before [`Server::serve`].
pub struct Server {
    dir: PathBuf,
    store: Arc<dyn Store>,
    state: Arc<AppState>,
    listener: TcpListener,
    local: SocketAddr,
    certs: tls::Certificates,
    token: String,
    /// The data directory's lock when the store does not hold it (memory, etcd).
    _lock: Option<DirLock>,
    /// When set, the in-server controllers run only while it holds `true` (see
    /// [`Server::controllers_while`]).
    leading: Option<tokio::sync::watch::Receiver<bool>>,
    /// The in-server controllers, once started (see [`Server::start_controllers`]).
    controllers: Option<crate::controllers::Gated>,
    /// Which store it opened, in words.
    store_description: String,
}

/// What a server found when it started: shown to the user as `oxplane up` comes up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartupSummary {
    /// Which store, in words (`SQLite in DIR`, `memory`, `etcd at URLS under PREFIX`).
    pub store: String,
    /// The store's revision: every write so far (compacted ones included), read into the
    /// watch cache up to here.
    pub revision: u64,
    /// Objects stored.
    pub objects: usize,
    /// CustomResourceDefinitions stored, each served from the start.
    pub crds: usize,
    /// Resources the API serves (built-in and custom, one per version).
    pub resources: usize,
}

impl Server {
    /// Opens the store, binds the address, makes certificates and the token, fills the watch
    /// cache, seeds namespaces, serves stored CRDs and starts the in-server controllers.
    pub async fn start(config: ServerConfig) -> Result<Server, ServeError> {
        let dir = config.data_dir.clone();
        oxplane_store::create_private_dir(&dir)?;
        let (store, lock) = open_store(&dir, &config.store).await?;
        let encryption = Encryption::load(config.encryption_provider_config.as_deref(), &dir)?;
        let store = EncryptedStore::new(store, encryption);
        let rewritten = store.rewrite_stale().await?;
        if rewritten > 0 {
            tracing::info!(rewritten, "stored values rewritten with the current encryption key");
        }
        let store: Arc<dyn Store> = Arc::new(store);
        if matches!(config.store, StoreBackend::Etcd(_)) {
            // Several servers may share this store: one CA and admin token for all.
            shared::adopt(&*store, &dir).await?;
        }

        let listener = TcpListener::bind(&config.listen)
            .await
            .map_err(|source| ServeError::Bind { address: config.listen.clone(), source })?;
        let local = listener.local_addr().map_err(|e| ServeError::io("reading the listen address", e))?;
        let certs = tls::ensure(&dir, &certificate_names(local))?;
        let token = auth::ensure_token(&dir)?;

        let cache = WatchCache::start_with(store.clone(), config.watch_cache_window, config.watch_live_queue).await?;
        let mut state = AppState::new(store.clone(), cache, Arc::new(Registry::with_builtins()), token.clone());
        state.inflight =
            Arc::new(http::inflight::InflightLimits::new(config.max_requests_inflight, config.max_mutating_requests_inflight));
        state.bookmark_interval = config.watch_bookmark_interval;
        state.event_ttl = config.event_ttl;
        if let Some(audit) = &config.audit {
            state.audit = Some(Arc::new(crate::audit::Auditor::open(audit).map_err(ServeError::Startup)?));
        }
        if let Some(file) = &config.token_auth_file {
            state.authenticator.tokens.load_file(file).map_err(ServeError::Startup)?;
        }
        let signing_key = crate::authn::service_accounts::key::load_or_create(&*store).await?;
        state.authenticator.service_accounts = Some(Arc::new(crate::authn::service_accounts::ServiceAccountTokens::new(
            config.service_account_issuer.clone(),
            format!("{}/openid/v1/jwks", server_url(local)),
            certs.ca_pem.clone(),
            signing_key,
            state.cache.clone(),
        )));
        let state = Arc::new(state);
        crate::store_health::spawn_probe(&state);
        http::seed::namespaces(&state).await.map_err(|e| ServeError::Startup(format!("seeding namespaces: {e}")))?;
        crate::authz::bootstrap::ensure(&state).await.map_err(|e| ServeError::Startup(format!("creating the bootstrap RBAC roles: {e}")))?;
        http::seed::kubernetes_service(&state, local)
            .await
            .map_err(|e| ServeError::Startup(format!("writing the kubernetes Service: {e}")))?;
        http::crds::establish_all(&state).await.map_err(|e| ServeError::Startup(format!("serving stored CRDs: {e}")))?;
        if matches!(config.store, StoreBackend::Etcd(_)) {
            http::crds::follow_other_servers(&state);
        }
        let store_description = match &config.store {
            StoreBackend::Sqlite => format!("SQLite in {}", dir.display()),
            StoreBackend::Memory => "memory (nothing is kept after the process ends)".to_string(),
            StoreBackend::Etcd(options) => format!("etcd at {} under {:?}", options.endpoints.join(","), options.prefix),
        };
        Ok(Server { dir, store, state, listener, local, certs, token, _lock: lock, leading: None, controllers: None, store_description })
    }

    /// What the server found when it started: the store, its revision, what it holds and
    /// serves.
    pub fn summary(&self) -> StartupSummary {
        let (objects, revision) = self.state.cache.list("/registry/");
        let (crds, _) = self.state.cache.list("/registry/apiextensions.k8s.io/customresourcedefinitions/");
        StartupSummary {
            store: self.store_description.clone(),
            revision,
            objects: objects.len(),
            crds: crds.len(),
            resources: self.state.registry.all().len(),
        }
    }

    /// The shared server state (for in-process users such as benchmarks).
    pub fn state(&self) -> &Arc<AppState> {
        &self.state
    }

    /// The URL clients reach the server at.
    pub fn url(&self) -> String {
        server_url(self.local)
    }

    /// PEM of the CA the server's certificate chains to (what a kubeconfig trusts).
    pub fn ca_pem(&self) -> String {
        self.certs.ca_pem.clone()
    }

    /// The API as an in-process service: requests go straight to the router, as the admin
    /// ([`UserInfo::admin`]) and exempt from the in-flight limits, with no TCP or TLS in between. A
    /// kube-rs client built on it behaves exactly as one that dials the server.
    pub fn local_service(&self) -> LocalService {
        self.local_service_as(UserInfo::admin())
    }

    /// The in-process service acting as `user`: requests are authorized as that user's.
    pub fn local_service_as(&self, user: UserInfo) -> LocalService {
        self.local_services().acting_as(user)
    }

    /// In-process services acting as any user, for as long as the server's state lives.
    pub fn local_services(&self) -> LocalServices {
        LocalServices { state: self.state.clone() }
    }

    /// Runs the in-server controllers (garbage collector, namespace deletion, CRD cleanup,
    /// aggregation, Event expiry) only while `leading` holds `true`, as kube-controller-manager
    /// runs on the holder of its lease only: servers sharing a store then do each piece of work
    /// once. Without it they run as long as the server serves.
    pub fn controllers_while(&mut self, leading: tokio::sync::watch::Receiver<bool>) {
        self.leading = Some(leading);
    }

    /// Starts the in-server controllers now rather than when serving starts (they follow
    /// [`Server::controllers_while`] if it was called before): what runs before serving, such
    /// as controllers acting under identities whose roles are aggregated, needs them.
    pub fn start_controllers(&mut self) {
        if self.controllers.is_none() {
            self.controllers = Some(start_gated(&self.state, self.leading.clone()));
        }
    }

    /// Writes the kubeconfig, reports ready, and serves HTTPS until `shutdown` completes.
    pub async fn serve(self, shutdown: impl std::future::Future<Output = ()>) -> Result<(), ServeError> {
        let Server { dir, store, state, listener, local, certs, token, _lock, leading, controllers, store_description: _ } = self;
        let client_certs = crate::authn::CertificateAuthenticator::new(&certs.ca_pem).map_err(ServeError::Tls)?;
        let tls_config = tls::server_config(&certs, client_certs.tls_verifier())?;
        let _controllers = controllers.unwrap_or_else(|| start_gated(&state, leading));
        kubeconfig::write(&dir, &server_url(local), &certs.ca_pem, &token)?;
        state.ready.store(true, Ordering::SeqCst);
        tracing::info!(url = %server_url(local), kubeconfig = %dir.join(kubeconfig::KUBECONFIG_FILE).display(), "oxplane is ready");
        eprintln!("oxplane is serving on {} (kubeconfig: {})", server_url(local), dir.join(kubeconfig::KUBECONFIG_FILE).display());

        let router = http::router(state.clone());
        let acceptor = tokio_rustls::TlsAcceptor::from(tls_config);
        let graceful = hyper_util::server::graceful::GracefulShutdown::new();
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let (tcp, peer) = match accepted {
                        Ok(conn) => conn,
                        Err(error) => {
                            tracing::warn!(%error, "accept failed");
                            continue;
                        }
                    };
                    // Small writes (a watch event, a response's last TLS record) must leave at
                    // once: with Nagle's algorithm they wait for the peer's delayed ACK, ~40 ms
                    // on Linux. Go servers, kube-apiserver among them, set this on every socket.
                    if let Err(error) = tcp.set_nodelay(true) {
                        tracing::debug!(%error, %peer, "cannot set TCP_NODELAY");
                    }
                    let acceptor = acceptor.clone();
                    let router = router.clone();
                    let client_certs = client_certs.clone();
                    let watcher = graceful.watcher();
                    tokio::spawn(async move {
                        let tls = match acceptor.accept(tcp).await {
                            Ok(tls) => tls,
                            Err(error) => {
                                tracing::debug!(%error, %peer, "TLS handshake failed");
                                return;
                            }
                        };
                        // The client certificate is checked once per connection; each request
                        // carries the outcome to the authentication middleware.
                        let certificate = tls.get_ref().1.peer_certificates().map(|chain| client_certs.check(chain));
                        let service = TowerToHyperService::new(tower::ServiceBuilder::new()
                            .map_request(move |mut request: axum::http::Request<hyper::body::Incoming>| {
                                request.extensions_mut().insert(crate::audit::SourceIp(peer.ip()));
                                if let Some(certificate) = &certificate {
                                    request.extensions_mut().insert(certificate.clone());
                                }
                                request
                            })
                            .service(router));
                        let builder = auto::Builder::new(TokioExecutor::new());
                        let connection = builder.serve_connection_with_upgrades(TokioIo::new(tls), service);
                        if let Err(error) = watcher.watch(connection.into_owned()).await {
                            tracing::debug!(%error, %peer, "connection ended with an error");
                        }
                    });
                }
                () = &mut shutdown => break,
            }
        }
        tracing::info!("shutting down");
        state.ready.store(false, Ordering::SeqCst);
        drop(listener);
        // Watches are long-lived: give ordinary requests a moment, then close everything.
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), graceful.shutdown()).await;
        drop(state);
        drop(store);
        Ok(())
    }
}

/// The in-server controllers, always or while `leading` holds `true`.
fn start_gated(state: &Arc<AppState>, leading: Option<tokio::sync::watch::Receiver<bool>>) -> crate::controllers::Gated {
    match leading {
        None => crate::controllers::Gated::Always(crate::controllers::start(state)),
        Some(leading) => crate::controllers::Gated::spawn(state.clone(), leading),
    }
}

/// Makes in-process services acting as a given user (see [`Server::local_services`]).
#[derive(Clone)]
pub struct LocalServices {
    state: Arc<AppState>,
}

impl LocalServices {
    /// The in-process service acting as `user`: requests are authorized as that user's.
    pub fn acting_as(&self, user: UserInfo) -> LocalService {
        LocalService { router: http::router(self.state.clone()), user: Arc::new(user) }
    }
}

/// The API as an in-process tower service (see [`Server::local_service`]).
#[derive(Clone)]
pub struct LocalService {
    router: axum::Router,
    user: Arc<UserInfo>,
}

impl<B> tower::Service<axum::http::Request<B>> for LocalService
where
    B: axum::body::HttpBody<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = axum::response::Response;
    type Error = std::convert::Infallible;
    type Future = <axum::Router as tower::Service<axum::http::Request<axum::body::Body>>>::Future;

    fn poll_ready(&mut self, _cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: axum::http::Request<B>) -> Self::Future {
        let (mut parts, body) = request.into_parts();
        // Only in-process requests can carry extensions in: the authentication middleware
        // trusts this user because `InProcess` is set.
        parts.extensions.insert(UserInfo::clone(&self.user));
        parts.extensions.insert(http::inflight::InProcess);
        let request = axum::http::Request::from_parts(parts, axum::body::Body::new(body));
        tower::Service::call(&mut self.router, request)
    }
}

/// Opens the configured store; the data directory's lock too when the store does not take it.
async fn open_store(dir: &std::path::Path, backend: &StoreBackend) -> Result<(Arc<dyn Store>, Option<DirLock>), ServeError> {
    Ok(match backend {
        StoreBackend::Sqlite => {
            let store_dir = dir.to_path_buf();
            let store = tokio::task::spawn_blocking(move || SqliteStore::open(&store_dir, SqliteOptions::default()))
                .await
                .map_err(|e| ServeError::Startup(format!("store open task failed: {e}")))??;
            (Arc::new(store), None)
        }
        StoreBackend::Memory => (Arc::new(MemoryStore::new(Default::default())), Some(DirLock::acquire(dir)?)),
        StoreBackend::Etcd(options) => {
            let lock = DirLock::acquire(dir)?;
            (Arc::new(EtcdStore::open(options.clone()).await?), Some(lock))
        }
    })
}

/// The names the serving certificate covers: loopback always, plus the listen address.
fn certificate_names(local: SocketAddr) -> Vec<String> {
    let mut names = vec!["localhost".to_string(), "127.0.0.1".to_string(), "::1".to_string()];
    let ip = local.ip();
    if !ip.is_unspecified() && !names.contains(&ip.to_string()) {
        names.push(ip.to_string());
    }
    names
}

/// The URL clients use: the listen address, or loopback when listening on all addresses.
fn server_url(local: SocketAddr) -> String {
    let ip = match local.ip() {
        ip if ip.is_unspecified() => IpAddr::from([127, 0, 0, 1]),
        ip => ip,
    };
    format!("https://{}", SocketAddr::new(ip, local.port()))
}
