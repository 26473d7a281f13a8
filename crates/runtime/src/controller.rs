//! A controller: a work queue of object keys, a bounded number of workers calling a
//! [`Reconciler`], and the watches that feed the queue. Every watch the controller starts is
//! owned by it; [`Controller::stop`] is local, total and bounded — it shuts the queue, aborts
//! the workers and drops the watch handles, with no I/O.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use crate::kinds::Gvk;
use crate::metrics::Metrics;
use crate::object::ObjectKey;
use crate::queue::{Backoff, WorkQueue};
use crate::watches::{WatchEvent, WatchHandle, Watches};

/// What to do after a reconcile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Nothing until the next watch event.
    Done,
    /// Reconcile again after this long (±10% jitter).
    RequeueAfter(Duration),
    /// Reconcile again after the key's backoff (progress is expected soon, e.g. after a create).
    Requeue,
}

/// A reconcile that failed.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ReconcileError {
    /// What went wrong.
    pub message: String,
    /// Expected and harmless (a conflict): retried without a log line.
    pub quiet: bool,
}

impl ReconcileError {
    /// A failure worth logging.
    pub fn new(message: impl Into<String>) -> Self {
        ReconcileError { message: message.into(), quiet: false }
    }

    /// A failure that is retried silently (an optimistic-concurrency conflict).
    pub fn quiet(message: impl Into<String>) -> Self {
        ReconcileError { message: message.into(), quiet: true }
    }
}

impl From<crate::client::ApiError> for ReconcileError {
    fn from(error: crate::client::ApiError) -> Self {
        if error.is_conflict() { ReconcileError::quiet(error.message) } else { ReconcileError::new(error.message) }
    }
}

/// What a controller does with one key.
#[async_trait::async_trait]
pub trait Reconciler: Send + Sync + 'static {
    /// Brings the object named by `key` towards its desired state.
    async fn reconcile(&self, key: &ObjectKey) -> Result<Action, ReconcileError>;
}

/// How a controller runs.
#[derive(Clone, Debug)]
pub struct ControllerConfig {
    /// The controller's name (in logs, metrics and watch listings).
    pub name: String,
    /// Reconciles running at once.
    pub concurrency: usize,
    /// Backoff of failing keys.
    pub backoff: Backoff,
}

impl ControllerConfig {
    /// A controller named `name` with default concurrency and backoff.
    pub fn new(name: impl Into<String>) -> Self {
        ControllerConfig { name: name.into(), concurrency: default_concurrency(), backoff: Backoff::default() }
    }
}

/// Reconciles at once by default: bounded by the cores, with room for reconciles waiting on
/// I/O (the API server, an external system).
pub fn default_concurrency() -> usize {
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
    (cores * 8).clamp(8, 64)
}

/// A running controller.
pub struct Controller {
    name: String,
    queue: Arc<WorkQueue<ObjectKey>>,
    workers: Mutex<Vec<JoinHandle<()>>>,
    watches: Mutex<Vec<WatchHandle>>,
    metrics: Arc<Metrics>,
}

impl Controller {
    /// Starts the workers; the controller does nothing until keys are queued (by watches or
    /// by hand).
    pub fn start(config: ControllerConfig, reconciler: Arc<dyn Reconciler>, metrics: Arc<Metrics>) -> Arc<Controller> {
        let queue = Arc::new(WorkQueue::<ObjectKey>::new(config.backoff));
        let mut workers = Vec::new();
        for _ in 0..config.concurrency.max(1) {
            let (queue, reconciler, metrics, name) = (queue.clone(), reconciler.clone(), metrics.clone(), config.name.clone());
            workers.push(tokio::spawn(async move {
                while let Some((key, waited)) = queue.next_timed().await {
                    oxplane_metrics::global().queue_wait(&name, waited);
                    let started = Instant::now();
                    // Every log line of a reconcile carries the controller and the object.
                    let span = tracing::info_span!(
                        "reconcile",
                        controller = %name,
                        resource = name.split_once('/').map_or(name.as_str(), |(_, resource)| resource),
                        namespace = key.namespace.as_deref().unwrap_or_default(),
                        object_name = %key.name,
                    );
                    let result = tracing::Instrument::instrument(reconciler.reconcile(&key), span).await;
                    let took = started.elapsed();
                    match result {
                        Ok(Action::Done) => {
                            queue.forget(&key);
                            metrics.reconciled(&name, "success", took);
                        }
                        Ok(Action::RequeueAfter(after)) => {
                            queue.forget(&key);
                            queue.add_after(key.clone(), crate::queue::jitter(after));
                            metrics.reconciled(&name, "success", took);
                        }
                        Ok(Action::Requeue) => {
                            queue.add_rate_limited(key.clone());
                            metrics.reconciled(&name, "requeue", took);
                        }
                        Err(error) => {
                            if error.quiet {
                                tracing::debug!(controller = %name, %key, %error, "reconcile conflict; retrying");
                            } else {
                                tracing::info!(controller = %name, %key, %error, "reconcile failed; retrying");
                            }
                            queue.add_rate_limited(key.clone());
                            metrics.reconciled(&name, "error", took);
                        }
                    }
                    queue.done(&key);
                }
            }));
        }
        metrics.controller_started(&config.name, &queue);
        Arc::new(Controller { name: config.name, queue, workers: Mutex::new(workers), watches: Mutex::new(Vec::new()), metrics })
    }

    /// The controller's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The work queue (to queue keys by hand).
    pub fn queue(&self) -> &Arc<WorkQueue<ObjectKey>> {
        &self.queue
    }

    /// Watches the controller's own kind: every change that passes `relevant` queues the
    /// object's key; deletions always do.
    pub fn watch_own(&self, watches: &Watches, gvk: &Gvk, relevant: fn(Option<&serde_json::Value>, &serde_json::Value) -> bool) {
        let queue = Arc::downgrade(&self.queue);
        let handle = watches.subscribe(
            &self.name,
            gvk,
            Arc::new(move |event: &WatchEvent| {
                let Some(queue) = queue.upgrade() else { return };
                match event {
                    WatchEvent::Applied { old, new } => {
                        if relevant(old.as_deref(), new)
                            && let Some(key) = ObjectKey::of(new)
                        {
                            queue.add(key);
                        }
                    }
                    WatchEvent::Deleted(old) => {
                        if let Some(key) = ObjectKey::of(old) {
                            queue.add(key);
                        }
                    }
                    WatchEvent::State(_) => {}
                }
            }),
        );
        self.keep(handle);
    }

    /// Watches another kind, queueing whatever keys `map` derives from each event.
    pub fn watch_mapped(&self, watches: &Watches, gvk: &Gvk, map: impl Fn(&WatchEvent) -> Vec<ObjectKey> + Send + Sync + 'static) {
        let handle = self.subscribe_mapped(watches, gvk, map);
        self.keep(handle);
    }

    /// Like [`Controller::watch_mapped`], but the caller owns the returned handle (a watch whose
    /// life is shorter than the controller's, such as one on a composed kind).
    pub fn subscribe_mapped(
        &self,
        watches: &Watches,
        gvk: &Gvk,
        map: impl Fn(&WatchEvent) -> Vec<ObjectKey> + Send + Sync + 'static,
    ) -> WatchHandle {
        let queue = Arc::downgrade(&self.queue);
        watches.subscribe(
            &self.name,
            gvk,
            Arc::new(move |event: &WatchEvent| {
                let Some(queue) = queue.upgrade() else { return };
                for key in map(event) {
                    queue.add(key);
                }
            }),
        )
    }

    /// Keeps a watch handle for the controller's lifetime.
    pub fn keep(&self, handle: WatchHandle) {
        self.watches.lock().unwrap_or_else(|p| p.into_inner()).push(handle);
    }

    /// Stops the controller: no more keys are handed out, workers are aborted and every watch
    /// it owns is released. Local, bounded, cannot fail.
    pub fn stop(&self) {
        self.queue.shut_down();
        for worker in self.workers.lock().unwrap_or_else(|p| p.into_inner()).drain(..) {
            worker.abort();
        }
        self.watches.lock().unwrap_or_else(|p| p.into_inner()).clear();
        self.metrics.controller_stopped(&self.name);
    }

    /// Whether [`Controller::stop`] was called.
    pub fn is_stopped(&self) -> bool {
        self.queue.is_shut_down()
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A relevance filter for a controller's own kind: a change matters unless only the status
/// (or nothing we care about) changed — our own status writes do not wake us up again.
pub fn spec_or_metadata_changed(old: Option<&serde_json::Value>, new: &serde_json::Value) -> bool {
    let Some(old) = old else { return true };
    let meta = |o: &serde_json::Value, f: &str| o.get("metadata").and_then(|m| m.get(f)).cloned();
    old.get("spec") != new.get("spec")
        || meta(old, "generation") != meta(new, "generation")
        || meta(old, "labels") != meta(new, "labels")
        || meta(old, "annotations") != meta(new, "annotations")
        || meta(old, "deletionTimestamp") != meta(new, "deletionTimestamp")
        || meta(old, "finalizers") != meta(new, "finalizers")
        || meta(old, "uid") != meta(new, "uid")
        || old.get("data") != new.get("data")
}

/// A relevance filter that lets every change through.
pub fn any_change(_old: Option<&serde_json::Value>, _new: &serde_json::Value) -> bool {
    true
}
