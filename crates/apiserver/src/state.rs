//! The server's shared state: the store, the watch cache over it, the served kinds and the
//! admission chain. HTTP handlers, the object operations of [`crate::ops`] and the in-server
//! controllers of [`crate::controllers`] all work through one [`AppState`].

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use oxplane_store::{Revision, Store, StoreError};

use crate::cache::{CacheError, WatchCache};
use crate::ops::admission::AdmissionChain;
use crate::registry::Registry;
use crate::status::{ApiError, Reason};

/// kube-apiserver's default `--event-ttl`: one hour.
pub const DEFAULT_EVENT_TTL: Duration = Duration::from_secs(3600);

/// How long a read for a resourceVersion the cache has not reached yet may wait.
const FUTURE_WAIT: Duration = Duration::from_secs(3);

/// What every handler and in-server controller shares.
pub struct AppState {
    /// The object store.
    pub store: Arc<dyn Store>,
    /// Every object in memory, for reads and watches.
    pub cache: Arc<WatchCache>,
    /// The served kinds.
    pub registry: Arc<Registry>,
    /// Hooks every write passes through.
    pub admission: AdmissionChain,
    /// The admin bearer token.
    pub token: String,
    /// Who requests are from (bearer tokens, client certificates).
    pub authenticator: crate::authn::Authenticator,
    /// What they may do (RBAC).
    pub authorizer: crate::authz::Authorizer,
    /// Set once the kubeconfig is written; `/readyz` answers `ok` from then on.
    pub ready: AtomicBool,
    /// OpenAPI documents, cached per registry generation.
    pub openapi: crate::openapi::OpenApi,
    /// Request counters for `/metrics`.
    pub metrics: crate::http::metrics::Metrics,
    /// Budgets of requests in flight (429 past them).
    pub inflight: Arc<crate::http::inflight::InflightLimits>,
    /// Metrics and debug pages added by the layers running beside the server.
    pub extensions: crate::http::extensions::Extensions,
    /// How often watchers that allow bookmarks get one.
    pub bookmark_interval: Duration,
    /// How long an Event is kept after it last happened (kube-apiserver's `--event-ttl`).
    pub event_ttl: Duration,
    /// The audit log, if one is configured.
    pub audit: Option<Arc<crate::audit::Auditor>>,
    /// Whether the store answers (an etcd cluster can be lost while the server runs).
    pub store_health: crate::store_health::StoreHealth,
}

impl AppState {
    /// State over a store and a registry, with the built-in admission hooks.
    pub fn new(store: Arc<dyn Store>, cache: Arc<WatchCache>, registry: Arc<Registry>, token: String) -> Self {
        AppState {
            authorizer: crate::authz::Authorizer::new(cache.clone()),
            store,
            cache,
            registry,
            admission: AdmissionChain::with_builtins(),
            authenticator: crate::authn::Authenticator { tokens: crate::authn::StaticTokens::admin(&token), service_accounts: None },
            token,
            ready: AtomicBool::new(false),
            openapi: Default::default(),
            metrics: Default::default(),
            inflight: Default::default(),
            extensions: Default::default(),
            bookmark_interval: crate::http::watch::DEFAULT_BOOKMARK_INTERVAL,
            event_ttl: DEFAULT_EVENT_TTL,
            audit: None,
            store_health: Default::default(),
        }
    }

    /// Brings the cache to the freshness a read asks for: unset means everything committed so
    /// far, `0` whatever the cache holds, `N` at least revision N. While the store is
    /// unreachable, "everything committed" is what the cache holds (the response says so:
    /// [`crate::store_health`]).
    pub async fn ensure_fresh(&self, resource_version: Option<&str>) -> Result<(), ApiError> {
        match resource_version {
            None if !self.store_health.is_reachable() => Ok(()),
            None => match self.cache.sync().await {
                Err(CacheError::Store(error @ StoreError::Unavailable { .. })) => {
                    self.store_health.lost(&error.to_string());
                    Ok(())
                }
                other => other.map_err(cache_error),
            },
            Some("0") => Ok(()),
            Some(rv) => self.cache.wait_for(parse_revision(rv)?, FUTURE_WAIT).await.map_err(cache_error),
        }
    }
}

/// Maps cache failures to API errors.
pub fn cache_error(error: CacheError) -> ApiError {
    match error {
        CacheError::Expired { requested, oldest } => {
            ApiError::new(Reason::Expired, format!("too old resource version: {requested} ({oldest})"))
        }
        CacheError::TooLarge { requested, current } => {
            ApiError::new(Reason::Timeout, format!("Too large resource version: {requested}, current: {current}"))
        }
        CacheError::Store(error) => store_error(error),
    }
}

/// Maps store failures to API errors.
pub fn store_error(error: StoreError) -> ApiError {
    match error {
        StoreError::Compacted { requested, compacted } => {
            ApiError::new(Reason::Expired, format!("too old resource version: {requested} ({compacted})"))
        }
        StoreError::DiskFull(_) => {
            tracing::error!(%error, "write refused: disk full");
            ApiError::new(Reason::ServiceUnavailable, error.to_string())
        }
        StoreError::Unavailable { .. } => {
            tracing::warn!(%error, "request refused: the store is unavailable");
            ApiError::new(Reason::ServiceUnavailable, format!("{error}; retry later"))
        }
        other => {
            tracing::error!(error = %other, "store failure");
            ApiError::internal(other.to_string())
        }
    }
}

/// Parses a resourceVersion parameter.
pub fn parse_revision(rv: &str) -> Result<Revision, ApiError> {
    rv.parse().map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv:?}")))
}
