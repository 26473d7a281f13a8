//! oxplane's Prometheus metrics: one registry, built on `prometheus-client`, that every layer
//! records into (the store its commits, the API server its requests, the runtime its
//! reconciles and work queues, the composition engine its function calls) and that `/metrics`
//! encodes in Prometheus' text format, together with the process' CPU, memory and file
//! descriptors read from `/proc` at each scrape.
//!
//! The registry is process-wide ([`global`]): a metric is a fact about the process, whichever
//! component inside it records it. Names and labels are listed in the README.

mod process;
mod scrape;

pub use prometheus_client;
pub use scrape::{Labels, Scrape};

use std::sync::OnceLock;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels of an API request: what kube-apiserver's `apiserver_request_duration_seconds` has.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// `GET`, `LIST`, `WATCH`, `POST`, `PUT`, `PATCH`, `DELETE`, `DELETECOLLECTION`, or the
    /// HTTP method of a request to no resource.
    pub verb: String,
    /// API group ("" for core).
    pub group: String,
    /// Plural resource ("" for requests to no resource: discovery, health, OpenAPI).
    pub resource: String,
    /// Subresource ("" for none).
    pub subresource: String,
    /// HTTP status code.
    pub code: String,
}

/// Labels of a reconcile.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReconcileLabels {
    /// The controller's name.
    pub controller: String,
    /// `success`, `requeue` or `error`.
    pub result: String,
}

/// Labels of a work queue.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueLabels {
    /// The controller's name.
    pub controller: String,
}

/// Labels of a composition function call.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FunctionLabels {
    /// The Function's name.
    pub function: String,
    /// `success` or `error`.
    pub result: String,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// Every metric oxplane records.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// API request latency, from the request's arrival to its response's start.
    pub request_duration: HistogramFamily<RequestLabels>,
    /// Reconcile latency per controller and result.
    pub reconcile_duration: HistogramFamily<ReconcileLabels>,
    /// How long a key waited in a controller's queue before a worker took it.
    pub queue_wait: HistogramFamily<QueueLabels>,
    /// Store commit latency (one transaction and its fsync).
    pub store_commit_duration: Histogram,
    /// Writes per store commit (group commit's batch size).
    pub store_commit_batch: Histogram,
    /// Composition function call latency.
    pub function_call_duration: HistogramFamily<FunctionLabels>,
    /// Revisions the watch cache is behind the store, as of the last scrape.
    pub watch_cache_lag: Gauge,
}

/// Latency buckets from 0.5 ms to about 16 s, doubling.
fn latency() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 2.0, 16))
}

impl Metrics {
    fn new() -> Metrics {
        // Names carry their own `oxplane_` prefix: the process metrics have none, as in every
        // Prometheus client library.
        let mut registry = Registry::default();
        let request_duration = HistogramFamily::<RequestLabels>::new_with_constructor(latency as fn() -> Histogram);
        registry.register("oxplane_apiserver_request_duration_seconds", "API request latency by verb, group, resource, subresource and code", request_duration.clone());
        let reconcile_duration = HistogramFamily::<ReconcileLabels>::new_with_constructor(latency as fn() -> Histogram);
        registry.register("oxplane_reconcile_duration_seconds", "Reconcile latency by controller and result", reconcile_duration.clone());
        let queue_wait = HistogramFamily::<QueueLabels>::new_with_constructor(latency as fn() -> Histogram);
        registry.register("oxplane_workqueue_wait_seconds", "How long keys waited in a controller's work queue", queue_wait.clone());
        let store_commit_duration = latency();
        registry.register("oxplane_store_commit_duration_seconds", "Store commit latency (transaction and fsync)", store_commit_duration.clone());
        let store_commit_batch = Histogram::new(exponential_buckets(1.0, 2.0, 12));
        registry.register("oxplane_store_commit_batch_size", "Writes per store commit", store_commit_batch.clone());
        let function_call_duration = HistogramFamily::<FunctionLabels>::new_with_constructor(latency as fn() -> Histogram);
        registry.register("oxplane_function_call_duration_seconds", "Composition function call latency by function and result", function_call_duration.clone());
        let watch_cache_lag = Gauge::default();
        registry.register("oxplane_watch_cache_lag_revisions", "Revisions the watch cache is behind the store", watch_cache_lag.clone());
        registry.register_collector(Box::new(process::ProcessCollector));
        Metrics {
            registry,
            request_duration,
            reconcile_duration,
            queue_wait,
            store_commit_duration,
            store_commit_batch,
            function_call_duration,
            watch_cache_lag,
        }
    }

    /// Records one API request.
    pub fn request(&self, labels: RequestLabels, took: Duration) {
        self.request_duration.get_or_create(&labels).observe(took.as_secs_f64());
    }

    /// Records one reconcile.
    pub fn reconcile(&self, controller: &str, result: &str, took: Duration) {
        let labels = ReconcileLabels { controller: controller.to_string(), result: result.to_string() };
        self.reconcile_duration.get_or_create(&labels).observe(took.as_secs_f64());
    }

    /// Records how long a key waited in a controller's queue.
    pub fn queue_wait(&self, controller: &str, waited: Duration) {
        self.queue_wait.get_or_create(&QueueLabels { controller: controller.to_string() }).observe(waited.as_secs_f64());
    }

    /// Records one store commit of `writes` writes.
    pub fn store_commit(&self, writes: usize, took: Duration) {
        self.store_commit_duration.observe(took.as_secs_f64());
        #[allow(clippy::cast_precision_loss)]
        self.store_commit_batch.observe(writes as f64);
    }

    /// Records one function call.
    pub fn function_call(&self, function: &str, ok: bool, took: Duration) {
        let labels = FunctionLabels { function: function.to_string(), result: if ok { "success" } else { "error" }.to_string() };
        self.function_call_duration.get_or_create(&labels).observe(took.as_secs_f64());
    }

    /// Every metric in Prometheus' text format (0.0.4).
    pub fn render(&self) -> String {
        encode(&self.registry)
    }
}

/// A registry's metrics in Prometheus' text format (0.0.4), the format `/metrics` serves:
/// components that keep metrics of their own (one per API server or controller runtime, so
/// that two in one process do not add up) encode their registry with it.
pub fn encode(registry: &Registry) -> String {
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::prometheus_text::encode(&mut out, registry);
    out
}

/// The process' metrics.
pub fn global() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(Metrics::new)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_values_show_up_as_histograms_with_their_labels() {
        let metrics = Metrics::new();
        metrics.reconcile("managed/nopresources.nop.crossplane.io", "success", Duration::from_millis(3));
        metrics.store_commit(7, Duration::from_micros(800));
        metrics.function_call("function-patch-and-transform", false, Duration::from_millis(40));
        metrics.request(
            RequestLabels { verb: "LIST".into(), group: "".into(), resource: "configmaps".into(), subresource: "".into(), code: "200".into() },
            Duration::from_millis(2),
        );
        let text = metrics.render();
        for expected in [
            "# TYPE oxplane_reconcile_duration_seconds histogram",
            "oxplane_reconcile_duration_seconds_count{controller=\"managed/nopresources.nop.crossplane.io\",result=\"success\"} 1",
            "oxplane_store_commit_batch_size_sum 7",
            "oxplane_function_call_duration_seconds_count{function=\"function-patch-and-transform\",result=\"error\"} 1",
            "oxplane_apiserver_request_duration_seconds_bucket{verb=\"LIST\",group=\"\",resource=\"configmaps\",subresource=\"\",code=\"200\",le=\"0.004\"} 1",
            "# TYPE process_open_fds gauge",
            "# TYPE process_cpu_seconds_total counter",
        ] {
            assert!(text.contains(expected), "{expected} in\n{text}");
        }
    }
}
