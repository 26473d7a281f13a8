//! Health, readiness, version and metrics endpoints.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::AppState;

/// The Kubernetes version reported: kubectl picks its own version from this, so it must stay 1.32.
pub const KUBERNETES_MINOR: &str = "32";

pub(super) async fn healthz() -> &'static str {
    "ok"
}

pub(super) async fn livez() -> &'static str {
    "ok"
}

pub(super) async fn readyz(State(state): State<Arc<AppState>>) -> (StatusCode, &'static str) {
    if !state.ready.load(Ordering::SeqCst) {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready")
    } else if !state.store_health.is_reachable() {
        (StatusCode::SERVICE_UNAVAILABLE, "store unreachable")
    } else {
        (StatusCode::OK, "ok")
    }
}

pub(super) async fn version() -> Json<Value> {
    Json(json!({
        "major": "1",
        "minor": KUBERNETES_MINOR,
        "gitVersion": format!("v1.{KUBERNETES_MINOR}.0-oxplane.{}", env!("CARGO_PKG_VERSION")),
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "",
        "goVersion": "",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
    }))
}

pub(super) async fn metrics(State(state): State<Arc<AppState>>) -> String {
    let revision = state.store.current_revision().await.unwrap_or(0);
    let compacted = state.store.compacted_revision().await.unwrap_or(0);
    let lag = i64::try_from(revision.saturating_sub(state.cache.revision())).unwrap_or(i64::MAX);
    oxplane_metrics::global().watch_cache_lag.set(lag);
    let as_gauge = |revision: u64| i64::try_from(revision).unwrap_or(i64::MAX);
    let mut scrape = oxplane_metrics::Scrape::new();
    scrape
        .gauge("oxplane_store_revision", "The store's current revision", [(vec![], as_gauge(revision))])
        .gauge("oxplane_store_compacted_revision", "The oldest revision still readable", [(vec![], as_gauge(compacted))])
        .gauge("oxplane_watch_cache_revision", "The revision the watch cache has applied", [(vec![], as_gauge(state.cache.revision()))]);
    scrape.render() + &state.metrics.render() + &state.extensions.render_metrics() + &oxplane_metrics::global().render()
}
