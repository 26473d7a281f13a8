//! Crossplane's Operations (`ops.crossplane.io/v1alpha1`, alpha, served with
//! `--enable-operations`): an `Operation` runs a function pipeline once until it succeeds or
//! reaches its retry limit; a `CronOperation` creates Operations on a cron schedule; a
//! `WatchOperation` creates one for each change of the resources it watches.
//!
//! - `operation.rs`: the Operation reconciler (capability check, pipeline, outputs, applies).
//! - `cron.rs`: CronOperations (schedule, concurrency policy).
//! - `watch.rs`: WatchOperations (a watch per WatchOperation, one Operation per change).
//! - `history.rs`: what both share: Operations made from a template, running and finished
//!   ones, history limits, `lastSuccessfulTime`.

mod cron;
mod history;
mod operation;
mod watch;

use std::sync::Arc;
use std::time::{Duration, Instant};

use oxplane_runtime::Runtime;
use oxplane_runtime::controller::Controller;
use oxplane_runtime::kinds::Kind;

use crate::packages::FunctionRegistry;

pub use operation::{FIELD_OWNER_PREFIX, OperationReconciler};

/// `Operation`.
pub fn operation_kind() -> Kind {
    Kind::new("ops.crossplane.io", "v1alpha1", "Operation", "operations", false)
}

/// `CronOperation`.
pub fn cron_operation_kind() -> Kind {
    Kind::new("ops.crossplane.io", "v1alpha1", "CronOperation", "cronoperations", false)
}

/// `WatchOperation`.
pub fn watch_operation_kind() -> Kind {
    Kind::new("ops.crossplane.io", "v1alpha1", "WatchOperation", "watchoperations", false)
}

/// `ops.crossplane.io/cronoperation`: the CronOperation that created an Operation.
pub const LABEL_CRON_OPERATION: &str = "ops.crossplane.io/cronoperation";
/// `ops.crossplane.io/watchoperation`: the WatchOperation that created an Operation.
pub const LABEL_WATCH_OPERATION: &str = "ops.crossplane.io/watchoperation";
/// The watched-resource annotations on Operations a WatchOperation created.
pub const ANNOTATION_WATCHED_API_VERSION: &str = "ops.crossplane.io/watched-resource-apiversion";
/// See [`ANNOTATION_WATCHED_API_VERSION`].
pub const ANNOTATION_WATCHED_KIND: &str = "ops.crossplane.io/watched-resource-kind";
/// See [`ANNOTATION_WATCHED_API_VERSION`].
pub const ANNOTATION_WATCHED_NAME: &str = "ops.crossplane.io/watched-resource-name";
/// See [`ANNOTATION_WATCHED_API_VERSION`].
pub const ANNOTATION_WATCHED_NAMESPACE: &str = "ops.crossplane.io/watched-resource-namespace";
/// See [`ANNOTATION_WATCHED_API_VERSION`].
pub const ANNOTATION_WATCHED_RESOURCE_VERSION: &str = "ops.crossplane.io/watched-resource-resourceversion";
/// The required-resource key under which each step of a watch-triggered Operation gets the
/// watched resource.
pub const REQUIREMENT_WATCHED_RESOURCE: &str = "ops.crossplane.io/watched-resource";
/// `watchoperation.ops.crossplane.io`, the WatchOperation finalizer.
pub const FINALIZER_WATCH_OPERATION: &str = "watchoperation.ops.crossplane.io";

/// The time schedules run on. The system clock in production; tests of cron schedules run
/// it faster (`rate` virtual seconds per real second) so a `*/1 * * * *` schedule fires every
/// second instead of every minute, with the same scheduling logic.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    rate: u32,
    started_real: Instant,
    started_at: jiff::Timestamp,
}

impl Clock {
    /// The system clock.
    pub fn system() -> Clock {
        Clock::with_rate(1)
    }

    /// A clock that starts now and runs `rate` times faster than real time (at least 1).
    pub fn with_rate(rate: u32) -> Clock {
        Clock { rate: rate.max(1), started_real: Instant::now(), started_at: jiff::Timestamp::now() }
    }

    /// Now, on this clock.
    pub fn now(&self) -> jiff::Timestamp {
        if self.rate == 1 {
            return jiff::Timestamp::now();
        }
        let elapsed = self.started_real.elapsed().saturating_mul(self.rate);
        let span = jiff::SignedDuration::try_from(elapsed).unwrap_or(jiff::SignedDuration::MAX);
        self.started_at.checked_add(span).unwrap_or(jiff::Timestamp::MAX)
    }

    /// How long to wait in real time for `d` to pass on this clock.
    pub fn real(&self, d: Duration) -> Duration {
        d / self.rate
    }
}

/// The running Operation controllers.
pub struct Operations {
    controllers: Vec<Arc<Controller>>,
}

impl Operations {
    /// Starts the Operation, CronOperation and WatchOperation controllers (their CRDs must be
    /// installed).
    pub fn start(runtime: &Runtime, functions: Arc<FunctionRegistry>, clock: Clock) -> Operations {
        for kind in [operation_kind(), cron_operation_kind(), watch_operation_kind()] {
            runtime.watches.kinds().insert(kind);
        }
        let controllers = vec![
            operation::start_controller(runtime, functions),
            cron::start_controller(runtime, clock),
            watch::start_controller(runtime, clock),
        ];
        Operations { controllers }
    }

    /// Stops the controllers.
    pub fn stop(&self) {
        for controller in &self.controllers {
            controller.stop();
        }
    }
}

impl Drop for Operations {
    fn drop(&mut self) {
        self.stop();
    }
}
