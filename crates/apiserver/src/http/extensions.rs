//! What the layers running beside the server add to its HTTP surface without the server
//! knowing them: metrics appended to `/metrics`, and JSON pages under `/debug/oxplane/<name>`
//! (both behind the admin token).

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::AppState;
use crate::status::{ApiError, Reason};

type MetricsSource = Arc<dyn Fn() -> String + Send + Sync>;
type DebugPage = Arc<dyn Fn() -> Value + Send + Sync>;

/// Registered metric sources and debug pages.
#[derive(Default)]
pub struct Extensions {
    metrics: RwLock<Vec<MetricsSource>>,
    debug: RwLock<BTreeMap<String, DebugPage>>,
}

impl Extensions {
    /// Adds a source of Prometheus text appended to `/metrics`.
    pub fn add_metrics(&self, source: impl Fn() -> String + Send + Sync + 'static) {
        self.metrics.write().unwrap_or_else(|p| p.into_inner()).push(Arc::new(source));
    }

    /// Serves `page()` as JSON at `/debug/oxplane/<name>`.
    pub fn add_debug_page(&self, name: &str, page: impl Fn() -> Value + Send + Sync + 'static) {
        self.debug.write().unwrap_or_else(|p| p.into_inner()).insert(name.to_string(), Arc::new(page));
    }

    /// Every registered metric source's text.
    pub fn render_metrics(&self) -> String {
        let sources: Vec<MetricsSource> = self.metrics.read().unwrap_or_else(|p| p.into_inner()).clone();
        sources.iter().map(|source| source()).collect()
    }

    fn page(&self, name: &str) -> Option<DebugPage> {
        self.debug.read().unwrap_or_else(|p| p.into_inner()).get(name).cloned()
    }
}

pub(super) async fn debug_page(State(state): State<Arc<AppState>>, Path(name): Path<String>) -> Response {
    match state.extensions.page(&name) {
        Some(page) => Json(page()).into_response(),
        None => ApiError::new(Reason::NotFound, format!("no debug page {name:?}")).into_response(),
    }
}
