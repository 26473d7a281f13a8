//! Controller metrics in Prometheus text format: reconciles by controller and result, time
//! spent reconciling, running controllers and their queue depths, and (through the watch
//! registry) the live watches.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crate::object::ObjectKey;
use crate::queue::WorkQueue;
use crate::watches::{Watches, escape};

#[derive(Default)]
struct Counters {
    reconciles: BTreeMap<(String, &'static str), u64>,
    seconds: BTreeMap<String, f64>,
    queues: BTreeMap<String, Weak<WorkQueue<ObjectKey>>>,
    /// Watch circuit breakers: events by controller and result, openings and closings.
    circuit_events: BTreeMap<(String, &'static str), u64>,
    circuit_opens: BTreeMap<String, u64>,
    circuit_closes: BTreeMap<String, u64>,
}

/// The runtime's metrics.
#[derive(Default)]
pub struct Metrics {
    counters: Mutex<Counters>,
    watches: Mutex<Option<Watches>>,
}

impl Metrics {
    /// Empty metrics.
    pub fn new() -> Arc<Self> {
        Arc::new(Metrics::default())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Counters> {
        self.counters.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Includes a watch registry's metrics.
    pub fn set_watches(&self, watches: Watches) {
        *self.watches.lock().unwrap_or_else(|p| p.into_inner()) = Some(watches);
    }

    /// Counts one reconcile of `controller` with its result (`success`, `requeue`, `error`).
    pub fn reconciled(&self, controller: &str, result: &'static str, took: Duration) {
        oxplane_metrics::global().reconcile(controller, result, took);
        let mut counters = self.lock();
        *counters.reconciles.entry((controller.to_string(), result)).or_insert(0) += 1;
        *counters.seconds.entry(controller.to_string()).or_insert(0.0) += took.as_secs_f64();
    }

    /// Counts one watch event through a controller's circuit breaker (`allowed`, `dropped`,
    /// `halfopen_allowed`).
    pub fn circuit_event(&self, controller: &str, result: &'static str) {
        *self.lock().circuit_events.entry((controller.to_string(), result)).or_insert(0) += 1;
    }

    /// Counts a circuit that opened.
    pub fn circuit_opened(&self, controller: &str) {
        *self.lock().circuit_opens.entry(controller.to_string()).or_insert(0) += 1;
    }

    /// Counts a circuit that closed again.
    pub fn circuit_closed(&self, controller: &str) {
        *self.lock().circuit_closes.entry(controller.to_string()).or_insert(0) += 1;
    }

    /// Total reconciles of a controller so far (every result).
    pub fn reconcile_count(&self, controller: &str) -> u64 {
        self.lock().reconciles.iter().filter(|((c, _), _)| c == controller).map(|(_, n)| n).sum()
    }

    /// Registers a running controller's queue.
    pub fn controller_started(&self, controller: &str, queue: &Arc<WorkQueue<ObjectKey>>) {
        self.lock().queues.insert(controller.to_string(), Arc::downgrade(queue));
    }

    /// Forgets a stopped controller.
    pub fn controller_stopped(&self, controller: &str) {
        self.lock().queues.remove(controller);
    }

    /// Names of running controllers.
    pub fn running_controllers(&self) -> Vec<String> {
        self.lock().queues.iter().filter(|(_, q)| q.upgrade().is_some_and(|q| !q.is_shut_down())).map(|(n, _)| n.clone()).collect()
    }

    /// Everything in Prometheus text format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        {
            let counters = self.lock();
            out.push_str("# HELP oxplane_reconciles_total Reconciles by controller and result.\n# TYPE oxplane_reconciles_total counter\n");
            for ((controller, result), count) in &counters.reconciles {
                let _ = writeln!(out, "oxplane_reconciles_total{{controller=\"{}\",result=\"{result}\"}} {count}", escape(controller));
            }
            out.push_str("# HELP oxplane_reconcile_seconds_total Time spent reconciling, by controller.\n# TYPE oxplane_reconcile_seconds_total counter\n");
            for (controller, seconds) in &counters.seconds {
                let _ = writeln!(out, "oxplane_reconcile_seconds_total{{controller=\"{}\"}} {seconds:.6}", escape(controller));
            }
            out.push_str("# HELP oxplane_controllers_running Controllers running (1) by name.\n# TYPE oxplane_controllers_running gauge\n");
            out.push_str("# HELP oxplane_workqueue_depth Keys waiting in a controller's queue.\n# TYPE oxplane_workqueue_depth gauge\n");
            for (controller, queue) in &counters.queues {
                let Some(queue) = queue.upgrade().filter(|q| !q.is_shut_down()) else { continue };
                let _ = writeln!(out, "oxplane_controllers_running{{controller=\"{}\"}} 1", escape(controller));
                let _ = writeln!(out, "oxplane_workqueue_depth{{controller=\"{}\"}} {}", escape(controller), queue.depth());
            }
            out.push_str("# HELP oxplane_circuit_breaker_events_total Watch events that reached a controller's circuit breaker, by result.\n# TYPE oxplane_circuit_breaker_events_total counter\n");
            for ((controller, result), count) in &counters.circuit_events {
                let _ = writeln!(out, "oxplane_circuit_breaker_events_total{{controller=\"{}\",result=\"{result}\"}} {count}", escape(controller));
            }
            for (name, help, counts) in [
                ("oxplane_circuit_breaker_opens_total", "Circuits that opened, by controller.", &counters.circuit_opens),
                ("oxplane_circuit_breaker_closes_total", "Circuits that closed again, by controller.", &counters.circuit_closes),
            ] {
                let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
                for (controller, count) in counts {
                    let _ = writeln!(out, "{name}{{controller=\"{}\"}} {count}", escape(controller));
                }
            }
        }
        if let Some(watches) = self.watches.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            watches.render_metrics(&mut out);
        }
        out
    }
}
