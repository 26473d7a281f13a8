//! Realtime `spec.watch` (alpha upstream, honoured only when the provider runs with
//! `--enable-watches`, as upstream gates it): an Object that asks for it is reconciled the
//! moment its object on the target changes, or an object its `references` name in the control
//! plane, rather than at its next poll.
//!
//! The subscriptions go through the runtime's counted watch registry (`Watches`): the
//! control plane's own for `InjectedIdentity` targets and for references (the registry
//! composition's watches count in), one per target cluster otherwise. Objects watching one
//! kind on one cluster share its informer. Each Object holds its own subscriptions, replaced
//! when what it watches changes and dropped when it stops asking or is gone (its kind's
//! `Deleted` event), so nothing outlives the Objects that want it: a reconcile still running
//! when its Object goes cannot subscribe for it afterwards (the uid is remembered as gone).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use oxplane_runtime::controller::Controller;
use oxplane_runtime::kinds::Gvk;
use oxplane_runtime::object::{self, ObjectKey};
use oxplane_runtime::queue::WorkQueue;
use oxplane_runtime::watches::{WatchEvent, WatchHandle, Watches};

/// One object an Object watches: a kind, namespace and name on one cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Watched {
    /// The cluster ([`super::target::Target::id`]).
    pub cluster: u64,
    /// The object's kind.
    pub gvk: Gvk,
    /// Its namespace (none: cluster-scoped).
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
}

struct Subscribed {
    watched: Vec<Watched>,
    _handles: Vec<WatchHandle>,
}

/// How long a deleted Object's uid is remembered, so that a reconcile that was running when it
/// went cannot subscribe for it afterwards: far longer than a reconcile runs (its calls time
/// out), short enough that the uids of deleted Objects do not pile up.
const GONE_KEPT: Duration = Duration::from_secs(600);

/// Subscriptions by Object uid, and the uids of Objects gone (with when they went).
#[derive(Default)]
struct State {
    subscribed: HashMap<String, Subscribed>,
    gone: HashMap<String, Instant>,
}

/// The realtime watches of one Object kind's controller.
pub struct RealtimeWatches {
    /// Whether the provider runs with `--enable-watches`.
    pub enabled: bool,
    /// The controller's queue and name (subscriptions are listed by it), once attached.
    attached: OnceLock<(Weak<WorkQueue<ObjectKey>>, String)>,
    /// By Object uid.
    subscribed: Mutex<State>,
}

impl RealtimeWatches {
    /// Watches, honoured when `enabled`; they do nothing until [`RealtimeWatches::attach`]ed.
    pub fn new(enabled: bool) -> Arc<RealtimeWatches> {
        Arc::new(RealtimeWatches { enabled, attached: OnceLock::new(), subscribed: Mutex::default() })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.subscribed.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Feeds `controller`'s queue, and drops an Object's subscriptions once the Object is gone
    /// (a subscription on `object_gvk` in `watches` that the controller keeps).
    pub fn attach(self: &Arc<Self>, controller: &Controller, watches: &Watches, object_gvk: &Gvk) {
        let _ = self.attached.set((Arc::downgrade(controller.queue()), controller.name().to_string()));
        let weak = Arc::downgrade(self);
        let handle = controller.subscribe_mapped(watches, object_gvk, move |event| {
            if let WatchEvent::Deleted(gone) = event
                && let Some(uid) = object::uid(gone)
                && let Some(this) = weak.upgrade()
            {
                // Dropping a handle takes the registry's lock, which this handler (running on an
                // informer) must not: the subscriptions are dropped on a task of their own.
                let uid = uid.to_string();
                tokio::spawn(async move { this.gone(&uid) });
            }
            Vec::new()
        });
        controller.keep(handle);
    }

    /// Makes the Object `key` (uid `uid`) watch exactly `wanted`, each in its registry: nothing
    /// changes when it already does.
    pub fn ensure(&self, key: &ObjectKey, uid: &str, wanted: Vec<(Watches, Watched)>) {
        let watched: Vec<Watched> = wanted.iter().map(|(_, w)| w.clone()).collect();
        if self.lock().subscribed.get(uid).is_some_and(|s| s.watched == watched) {
            return;
        }
        let Some((queue, controller)) = self.attached.get() else { return };
        let handles = wanted
            .into_iter()
            .map(|(watches, target)| {
                let (queue, key) = (queue.clone(), key.clone());
                let (namespace, name) = (target.namespace.clone(), target.name.clone());
                watches.subscribe(
                    controller,
                    &target.gvk,
                    Arc::new(move |event: &WatchEvent| {
                        let changed = match event {
                            WatchEvent::Applied { new, .. } => new,
                            WatchEvent::Deleted(old) => old,
                            WatchEvent::State(_) => return,
                        };
                        if object::name(changed) == Some(name.as_str())
                            && object::namespace(changed) == namespace.as_deref()
                            && let Some(queue) = queue.upgrade()
                        {
                            queue.add(key.clone());
                        }
                    }),
                )
            })
            .collect();
        // The old subscriptions go after the new ones are made: a kind watched before and after
        // keeps its informer.
        let old = self.install(uid, Subscribed { watched, _handles: handles });
        drop(old);
    }

    /// Records `subscribed` as the Object `uid`'s; what it replaces (or refuses) is returned, to
    /// be dropped outside the lock. Refused for an Object already gone: its reconcile was
    /// running when it was deleted, and what it subscribes would otherwise stay for good.
    fn install(&self, uid: &str, subscribed: Subscribed) -> Option<Subscribed> {
        let mut state = self.lock();
        if state.gone.contains_key(uid) {
            return Some(subscribed);
        }
        state.subscribed.insert(uid.to_string(), subscribed)
    }

    /// Drops the subscriptions of the Object with uid `uid`, which no longer asks for them.
    pub fn forget(&self, uid: &str) {
        let dropped = self.lock().subscribed.remove(uid);
        drop(dropped);
    }

    /// Drops the subscriptions of the Object with uid `uid`, which is gone: nothing is
    /// subscribed for it any more, also by a reconcile still running.
    pub fn gone(&self, uid: &str) {
        let dropped = {
            let mut state = self.lock();
            let now = Instant::now();
            state.gone.retain(|_, went| now.duration_since(*went) < GONE_KEPT);
            state.gone.insert(uid.to_string(), now);
            state.subscribed.remove(uid)
        };
        drop(dropped);
    }

    /// How many Objects have subscriptions.
    pub fn watching(&self) -> usize {
        self.lock().subscribed.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watched(name: &str) -> Vec<Watched> {
        vec![Watched { cluster: 1, gvk: Gvk::new("", "v1", "ConfigMap"), namespace: Some("default".into()), name: name.into() }]
    }

    #[test]
    fn a_reconcile_finishing_after_its_object_is_gone_subscribes_nothing() {
        let watches = RealtimeWatches::new(true);
        // The Object is deleted while its reconcile runs: its subscriptions are dropped first...
        watches.gone("uid-1");
        // ...then the reconcile ends by subscribing: refused.
        let refused = watches.install("uid-1", Subscribed { watched: watched("a"), _handles: Vec::new() });
        drop(refused);
        assert_eq!(watches.watching(), 0);
        // Other Objects still subscribe, and replace their own subscriptions.
        assert!(watches.install("uid-2", Subscribed { watched: watched("a"), _handles: Vec::new() }).is_none());
        assert!(watches.install("uid-2", Subscribed { watched: watched("b"), _handles: Vec::new() }).is_some());
        assert_eq!(watches.watching(), 1);
        // An Object that stops asking may ask again.
        watches.forget("uid-2");
        assert_eq!(watches.watching(), 0);
        assert!(watches.install("uid-2", Subscribed { watched: watched("a"), _handles: Vec::new() }).is_none());
        assert_eq!(watches.watching(), 1);
        watches.gone("uid-2");
        assert_eq!(watches.watching(), 0);
    }
}
