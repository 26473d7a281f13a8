//! oxplane's controller toolkit, on kube-rs: what every controller of the control plane is
//! built from, and the managed-resource reconciler providers plug their external clients into.
//!
//! - [`client`]: API requests for any kind, objects as JSON, errors with codes and reasons.
//! - [`kinds`]: kinds and their discovery; "not served" is an answer, not a timeout.
//! - [`watches`]: shared informers with counted subscriptions and local, I/O-free teardown.
//! - [`queue`], [`controller`]: deduplicating work queues with per-key backoff; controllers
//!   that own their watches and stop locally.
//! - [`circuit`]: a per-object watch circuit breaker whose held-back events are never lost.
//! - [`drift`]: what drifted behind a controller's back and who changed it.
//! - [`conditions`], [`events`], [`object`]: Crossplane's conditions, events on objects,
//!   metadata helpers.
//! - [`managed`]: the managed-resource reconciler (management policies, critical annotations,
//!   connection secrets, ProviderConfig usage).
//! - [`provider`]: what a built-in provider supplies to be installed at runtime.
//! - [`identity`]: acting as Crossplane's ServiceAccounts (the core, the RBAC manager, providers).
//! - [`metrics`]: Prometheus text for controllers and watches.
//!
//! Nothing here knows which API server it talks to: in `oxplane up` the client runs
//! in-process on the embedded server; against a real cluster it dials it.

pub mod circuit;
pub mod client;
pub mod conditions;
pub mod controller;
pub mod drift;
pub mod events;
pub mod identity;
pub mod kinds;
pub mod managed;
pub mod metrics;
pub mod object;
pub mod provider;
pub mod queue;
pub mod watches;

use std::sync::Arc;
use std::time::Duration;

/// What every controller shares: the client, the watch registry, the metrics.
#[derive(Clone)]
pub struct Runtime {
    /// The API client.
    pub kube: client::Kube,
    /// Informers and subscriptions.
    pub watches: watches::Watches,
    /// Controller and watch metrics.
    pub metrics: Arc<metrics::Metrics>,
}

impl Runtime {
    /// A runtime over a kube-rs client; idle informers stop after `watch_grace`.
    pub fn new(client: kube::Client, watch_grace: Duration) -> Self {
        let kube = client::Kube::new(client);
        let kinds = Arc::new(kinds::KindResolver::new(kube.clone()));
        let watches = watches::Watches::new(kube.clone(), kinds, watch_grace);
        let metrics = metrics::Metrics::new();
        metrics.set_watches(watches.clone());
        Runtime { kube, watches, metrics }
    }
}
