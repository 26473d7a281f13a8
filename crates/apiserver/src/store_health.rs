//! Whether the store answers. An embedded store always does; an etcd cluster can be lost while
//! the server runs. Then `/readyz` fails, writes are answered 503 with a retry hint (the store's
//! `Unavailable` error), and reads keep being served from the watch cache with a `Warning`
//! saying they may be stale. A probe notices when the store answers again; the watch cache
//! resumes its watch by itself, so nothing needs a restart.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;

use crate::state::AppState;

/// How often the store is probed.
const PROBE_INTERVAL: Duration = Duration::from_secs(1);
/// How long a probe may take before the store counts as lost.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// The store's reachability as last seen.
#[derive(Debug)]
pub struct StoreHealth {
    reachable: AtomicBool,
    cause: Mutex<String>,
}

impl Default for StoreHealth {
    fn default() -> Self {
        StoreHealth { reachable: AtomicBool::new(true), cause: Mutex::new(String::new()) }
    }
}

impl StoreHealth {
    /// Whether the store answered last time it was asked.
    pub fn is_reachable(&self) -> bool {
        self.reachable.load(Ordering::SeqCst)
    }

    /// Why the store is unreachable (empty while it is reachable).
    pub fn cause(&self) -> String {
        self.cause.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Records that the store did not answer.
    pub fn lost(&self, cause: &str) {
        *self.cause.lock().unwrap_or_else(|p| p.into_inner()) = cause.to_string();
        if self.reachable.swap(false, Ordering::SeqCst) {
            tracing::error!(cause, "the store is unreachable: writes are refused (503), reads are served from the cache");
        }
    }

    /// Records that the store answered.
    pub fn recovered(&self) {
        if !self.reachable.swap(true, Ordering::SeqCst) {
            tracing::info!("the store is reachable again");
        }
        self.cause.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}

/// Probes the store every second while the state lives.
pub fn spawn_probe(state: &Arc<AppState>) {
    let state: Weak<AppState> = Arc::downgrade(state);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(PROBE_INTERVAL).await;
            let Some(state) = state.upgrade() else { return };
            match tokio::time::timeout(PROBE_TIMEOUT, state.store.current_revision()).await {
                Ok(Ok(_)) => state.store_health.recovered(),
                Ok(Err(error)) => state.store_health.lost(&error.to_string()),
                Err(_) => state.store_health.lost(&format!("no answer within {PROBE_TIMEOUT:?}")),
            }
        }
    });
}

/// Adds a `Warning` to reads answered while the store is unreachable: they come from the
/// watch cache, which may miss writes made through other servers meanwhile. A `404` is such an
/// answer too (the object may have been created where this server could not see it).
pub async fn warn_stale_reads(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let read = request.method() == Method::GET;
    let response = next.run(request).await;
    let from_cache = response.status().is_success() || response.status() == axum::http::StatusCode::NOT_FOUND;
    if !read || state.store_health.is_reachable() || !from_cache {
        return response;
    }
    let warning = format!(
        "the store is unreachable ({}); served from the watch cache at resourceVersion {}, which may be stale",
        state.store_health.cause(),
        state.cache.revision()
    );
    crate::http::validation::with_warnings(response, &[warning])
}
