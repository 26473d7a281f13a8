//! `oxplane up`: opens the store, makes sure certificates and the admin token exist, listens on
//! HTTPS, writes the kubeconfig, then reports ready and serves until told to stop.

pub mod auth;
mod files;
pub mod kubeconfig;
pub mod tls;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use oxplane_store::sqlite::{SqliteOptions, SqliteStore};
use oxplane_store::Store;
use tokio::net::TcpListener;

use crate::ServeError;
use crate::cache::WatchCache;
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
}

impl ServerConfig {
    /// A configuration with the default watch cache window.
    pub fn new(data_dir: PathBuf, listen: impl Into<String>) -> Self {
        ServerConfig { data_dir, listen: listen.into(), watch_cache_window: crate::cache::DEFAULT_WINDOW }
    }
}

/// Runs the server until `shutdown` completes, then stops accepting, lets in-flight requests
/// finish briefly, and closes the store.
pub async fn run(config: ServerConfig, shutdown: impl std::future::Future<Output = ()>) -> Result<(), ServeError> {
    let dir = config.data_dir.clone();
    std::fs::create_dir_all(&dir).map_err(|e| ServeError::io(format!("creating {}", dir.display()), e))?;
    let store_dir = dir.clone();
    let store = tokio::task::spawn_blocking(move || SqliteStore::open(&store_dir, SqliteOptions::default()))
        .await
        .map_err(|e| ServeError::Startup(format!("store open task failed: {e}")))??;
    let store: Arc<dyn Store> = Arc::new(store);

    let listener = TcpListener::bind(&config.listen)
        .await
        .map_err(|source| ServeError::Bind { address: config.listen.clone(), source })?;
    let local = listener.local_addr().map_err(|e| ServeError::io("reading the listen address", e))?;
    let certs = tls::ensure(&dir, &certificate_names(local))?;
    let tls_config = tls::server_config(&certs)?;
    let token = auth::ensure_token(&dir)?;

    let cache = WatchCache::start(store.clone(), config.watch_cache_window).await?;
    let state = Arc::new(AppState::new(store.clone(), cache, Arc::new(Registry::with_builtins()), token.clone()));
    http::seed::namespaces(&state).await.map_err(|e| ServeError::Startup(format!("seeding namespaces: {e}")))?;
    http::crds::establish_all(&state).await.map_err(|e| ServeError::Startup(format!("serving stored CRDs: {e}")))?;
    let _controllers = crate::controllers::start(&state);
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
                let acceptor = acceptor.clone();
                let service = TowerToHyperService::new(router.clone());
                let watcher = graceful.watcher();
                tokio::spawn(async move {
                    let tls = match acceptor.accept(tcp).await {
                        Ok(tls) => tls,
                        Err(error) => {
                            tracing::debug!(%error, %peer, "TLS handshake failed");
                            return;
                        }
                    };
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
