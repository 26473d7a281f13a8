//! Request metrics, exported on `/metrics` in Prometheus text format beside the store's.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::{Arc, Mutex};
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

/// Counters the HTTP layer keeps.
#[derive(Default)]
pub struct Metrics {
    /// Requests by method and status code, with their total duration in seconds.
    requests: Mutex<BTreeMap<(String, u16), (u64, f64)>>,
    /// Watch streams currently open.
    pub watchers: Arc<AtomicI64>,
}

impl Metrics {
    /// Records one finished request.
    pub fn record(&self, method: &str, code: u16, took: Duration) {
        let mut requests = self.requests.lock().unwrap_or_else(|p| p.into_inner());
        let entry = requests.entry((method.to_string(), code)).or_default();
        entry.0 += 1;
        entry.1 += took.as_secs_f64();
    }

    /// The metrics in Prometheus text format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let requests = self.requests.lock().unwrap_or_else(|p| p.into_inner());
        out.push_str("# HELP oxplane_apiserver_requests_total API requests by method and response code.\n# TYPE oxplane_apiserver_requests_total counter\n");
        for ((method, code), (count, _)) in requests.iter() {
            let _ = writeln!(out, "oxplane_apiserver_requests_total{{method=\"{method}\",code=\"{code}\"}} {count}");
        }
        out.push_str("# HELP oxplane_apiserver_request_seconds_total Time spent answering API requests (watches count until they end).\n# TYPE oxplane_apiserver_request_seconds_total counter\n");
        for ((method, code), (_, seconds)) in requests.iter() {
            let _ = writeln!(out, "oxplane_apiserver_request_seconds_total{{method=\"{method}\",code=\"{code}\"}} {seconds:.6}");
        }
        let _ = writeln!(
            out,
            "# HELP oxplane_apiserver_watchers Watch streams currently open.\n# TYPE oxplane_apiserver_watchers gauge\noxplane_apiserver_watchers {}",
            self.watchers.load(Ordering::Relaxed)
        );
        out
    }
}

/// Counts one open watch stream for as long as it lives.
pub struct WatchGuard(Arc<AtomicI64>);

impl WatchGuard {
    /// Counts a stream that just opened.
    pub fn open(gauge: &Arc<AtomicI64>) -> Self {
        gauge.fetch_add(1, Ordering::Relaxed);
        WatchGuard(gauge.clone())
    }
}

impl Drop for WatchGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}
