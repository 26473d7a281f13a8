//! Controllers that run inside the server, as kube-controller-manager's do beside
//! kube-apiserver: the garbage collector, namespace deletion, CRD cleanup, and ClusterRole
//! aggregation.
//!
//! Each one follows the whole watch cache (every object of every kind), keeps what it needs
//! in memory, and acts through [`crate::ops`] like any client would, so its writes obey every
//! rule and admission hook (except the Event TTL, which deletes expired Events straight from
//! the store, as kube-apiserver's lease expiry does). Nothing it needs lives only in memory: after a restart the first
//! listing brings back every pending piece of work (a deletion half done finishes).
//!
//! Files: `runner.rs` (the feed, the work queue with retries), `gc.rs`, `namespaces.rs`,
//! `crd_cleanup.rs`, `aggregation.rs`, `events.rs` (Events the controllers record), `event_ttl.rs`
//! (Events expire `--event-ttl` after they last happened), `tokens.rs` (legacy ServiceAccount
//! token Secrets).

pub(crate) mod aggregation;
mod crd_cleanup;
mod event_ttl;
mod events;
mod gc;
mod namespaces;
mod runner;
mod tokens;

use std::sync::Arc;

use crate::state::AppState;

/// The running controllers; dropping this stops them.
pub struct Controllers {
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Controllers {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// The in-server controllers for as long as the server serves; dropping this stops them.
pub enum Gated {
    /// Running from start to end.
    Always(Controllers),
    /// Started each time leadership is gained and stopped each time it is lost, by this task.
    WhileLeading(tokio::task::JoinHandle<()>),
}

impl Gated {
    /// Runs the controllers only while `leading` holds `true`; they stop when it closes.
    pub fn spawn(state: Arc<AppState>, mut leading: tokio::sync::watch::Receiver<bool>) -> Gated {
        Gated::WhileLeading(tokio::spawn(async move {
            loop {
                if leading.wait_for(|leads| *leads).await.is_err() {
                    return;
                }
                let running = start(&state);
                tracing::info!("leading: in-server controllers started");
                let closed = leading.wait_for(|leads| !*leads).await.is_err();
                drop(running);
                tracing::info!("not leading: in-server controllers stopped");
                if closed {
                    return;
                }
            }
        }))
    }
}

impl Drop for Gated {
    fn drop(&mut self) {
        if let Gated::WhileLeading(task) = self {
            // Aborting the task drops the controllers it holds, which stops them.
            task.abort();
        }
    }
}

/// Starts every in-server controller on the runtime.
pub fn start(state: &Arc<AppState>) -> Controllers {
    Controllers {
        tasks: vec![
            tokio::spawn(runner::run(state.clone(), gc::GarbageCollector::default())),
            tokio::spawn(runner::run(state.clone(), namespaces::NamespaceController::default())),
            tokio::spawn(runner::run(state.clone(), crd_cleanup::CrdCleanup::default())),
            tokio::spawn(runner::run(state.clone(), aggregation::Aggregation::default())),
            tokio::spawn(runner::run(state.clone(), tokens::TokensController::default())),
            tokio::spawn(runner::run(state.clone(), event_ttl::EventTtl::new(state.event_ttl))),
        ],
    }
}
