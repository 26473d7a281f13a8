//! Controller metrics: reconciles by controller and result, time spent reconciling and circuit
//! breaker events, counted in this runtime's own `prometheus-client` registry (two runtimes in
//! one process count apart), and running controllers, their queue depths and (through the
//! watch registry) the live watches, read at scrape time.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use oxplane_metrics::prometheus_client::metrics::counter::Counter;
use oxplane_metrics::prometheus_client::metrics::family::Family;
use oxplane_metrics::prometheus_client::registry::Registry;
use oxplane_metrics::{Labels, Scrape};

use crate::object::ObjectKey;
use crate::queue::WorkQueue;
use crate::watches::Watches;

/// The results a reconcile is counted under.
const RESULTS: [&str; 3] = ["success", "requeue", "error"];

/// The runtime's metrics.
pub struct Metrics {
    registry: Registry,
    reconciles: Family<Labels, Counter>,
    reconcile_seconds: Family<Labels, Counter<f64, AtomicU64>>,
    /// Watch circuit breakers: events by controller and result, openings and closings.
    circuit_events: Family<Labels, Counter>,
    circuit_opens: Family<Labels, Counter>,
    circuit_closes: Family<Labels, Counter>,
    /// Drift reverted, by the group and kind of the object that drifted.
    drift_corrected: Family<Labels, Counter>,
    queues: Mutex<BTreeMap<String, Weak<WorkQueue<ObjectKey>>>>,
    watches: Mutex<Option<Watches>>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let mut family = |name: &str, help: &str| {
            let family = Family::<Labels, Counter>::default();
            registry.register(name, help, family.clone());
            family
        };
        let reconciles = family("oxplane_reconciles", "Reconciles by controller and result");
        let circuit_events = family("oxplane_circuit_breaker_events", "Watch events that reached a controller's circuit breaker, by result");
        let circuit_opens = family("oxplane_circuit_breaker_opens", "Circuits that opened, by controller");
        let circuit_closes = family("oxplane_circuit_breaker_closes", "Circuits that closed again, by controller");
        let drift_corrected = family(
            "oxplane_drift_corrected",
            "Changes made behind the control plane's back and reverted, by the group and kind of the object (or the managed resource of the external resource) that drifted",
        );
        let reconcile_seconds = Family::<Labels, Counter<f64, AtomicU64>>::default();
        registry.register("oxplane_reconcile_seconds", "Time spent reconciling, by controller", reconcile_seconds.clone());
        Metrics {
            registry,
            reconciles,
            reconcile_seconds,
            circuit_events,
            circuit_opens,
            circuit_closes,
            drift_corrected,
            queues: Mutex::default(),
            watches: Mutex::default(),
        }
    }
}

fn controller(controller: &str) -> Labels {
    vec![("controller", controller.to_string())]
}

fn group_kind(group: &str, kind: &str) -> Labels {
    vec![("group", group.to_string()), ("kind", kind.to_string())]
}

fn controller_result(controller: &str, result: &str) -> Labels {
    vec![("controller", controller.to_string()), ("result", result.to_string())]
}

impl Metrics {
    /// Empty metrics.
    pub fn new() -> Arc<Self> {
        Arc::new(Metrics::default())
    }

    fn queues(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Weak<WorkQueue<ObjectKey>>>> {
        self.queues.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Includes a watch registry's metrics.
    pub fn set_watches(&self, watches: Watches) {
        *self.watches.lock().unwrap_or_else(|p| p.into_inner()) = Some(watches);
    }

    /// Counts one reconcile of `controller` with its result (`success`, `requeue`, `error`).
    pub fn reconciled(&self, name: &str, result: &'static str, took: Duration) {
        oxplane_metrics::global().reconcile(name, result, took);
        self.reconciles.get_or_create(&controller_result(name, result)).inc();
        self.reconcile_seconds.get_or_create(&controller(name)).inc_by(took.as_secs_f64());
    }

    /// Counts one watch event through a controller's circuit breaker (`allowed`, `dropped`,
    /// `halfopen_allowed`).
    pub fn circuit_event(&self, name: &str, result: &'static str) {
        self.circuit_events.get_or_create(&controller_result(name, result)).inc();
    }

    /// Counts a circuit that opened.
    pub fn circuit_opened(&self, name: &str) {
        self.circuit_opens.get_or_create(&controller(name)).inc();
    }

    /// Counts a circuit that closed again.
    pub fn circuit_closed(&self, name: &str) {
        self.circuit_closes.get_or_create(&controller(name)).inc();
    }

    /// Counts drift of an object of `group` and `kind` that was reverted.
    pub fn drift_corrected(&self, group: &str, kind: &str) {
        self.drift_corrected.get_or_create(&group_kind(group, kind)).inc();
    }

    /// Drift of `group` and `kind` reverted so far.
    pub fn drift_count(&self, group: &str, kind: &str) -> u64 {
        self.drift_corrected.get(&group_kind(group, kind)).map_or(0, |c| c.get())
    }

    /// Total reconciles of a controller so far (every result).
    pub fn reconcile_count(&self, name: &str) -> u64 {
        RESULTS.iter().filter_map(|result| self.reconciles.get(&controller_result(name, result)).map(|c| c.get())).sum()
    }

    /// Registers a running controller's queue.
    pub fn controller_started(&self, controller: &str, queue: &Arc<WorkQueue<ObjectKey>>) {
        self.queues().insert(controller.to_string(), Arc::downgrade(queue));
    }

    /// Forgets a stopped controller.
    pub fn controller_stopped(&self, controller: &str) {
        self.queues().remove(controller);
    }

    /// Names of running controllers.
    pub fn running_controllers(&self) -> Vec<String> {
        self.queues().iter().filter(|(_, q)| q.upgrade().is_some_and(|q| !q.is_shut_down())).map(|(n, _)| n.clone()).collect()
    }

    /// Everything in Prometheus text format.
    pub fn render(&self) -> String {
        let running: Vec<(String, usize)> = self
            .queues()
            .iter()
            .filter_map(|(name, queue)| queue.upgrade().filter(|q| !q.is_shut_down()).map(|q| (name.clone(), q.depth())))
            .collect();
        let mut scrape = Scrape::new();
        scrape.gauge("oxplane_controllers_running", "Controllers running (1) by name", running.iter().map(|(name, _)| (controller(name), 1)));
        scrape.gauge(
            "oxplane_workqueue_depth",
            "Keys waiting in a controller's queue",
            running.iter().map(|(name, depth)| (controller(name), i64::try_from(*depth).unwrap_or(i64::MAX))),
        );
        if let Some(watches) = self.watches.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            watches.scrape_metrics(&mut scrape);
        }
        oxplane_metrics::encode(&self.registry) + &scrape.render()
    }
}
