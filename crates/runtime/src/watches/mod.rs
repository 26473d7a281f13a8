//! Dynamic watches, owned and counted.
//!
//! Controllers subscribe to kinds; one informer per kind serves every subscriber. A
//! subscription is a [`WatchHandle`]: the watch lives exactly as long as some handle for its
//! kind lives, and nothing else ever stops it — no sweep guesses which watches are unused.
//! Dropping a handle is local and total: it removes the subscription from a map, and when the
//! last one for a kind is gone (and stays gone for a grace period) the informer's task is
//! aborted. Stopping never performs I/O, never creates anything, and cannot fail.
//!
//! A kind that is not served is a state of its informer ([`InformerState::NotServed`], naming
//! the kind), reported to subscribers; the informer keeps waiting for the kind and is woken the
//! moment any CRD changes, so a reinstalled kind is watched again without a restart.
//!
//! The live subscriptions, by controller and kind, are visible as the metric
//! `oxplane_watches{controller,kind}` and as JSON from [`Watches::debug`].

mod informer;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

pub use informer::{Handler, Informer, InformerState, WatchEvent};

use crate::client::Kube;
use crate::kinds::{Gvk, KindResolver};

/// The kind of CustomResourceDefinitions: watched for as long as the registry lives, so
/// informers of kinds that are not served wake up when a CRD appears.
fn crd_gvk() -> Gvk {
    Gvk::new("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
}

struct Slot {
    informer: Arc<Informer>,
    task: JoinHandle<()>,
    /// Bumped each time the slot becomes idle, so a stale idle timer does nothing.
    idle_generation: u64,
}

struct Inner {
    kube: Kube,
    kinds: Arc<KindResolver>,
    slots: Mutex<HashMap<Gvk, Slot>>,
    next_id: AtomicU64,
    grace: Duration,
    kinds_changed: Arc<Notify>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        for slot in self.slots.get_mut().unwrap_or_else(|p| p.into_inner()).values() {
            slot.task.abort();
        }
    }
}

/// The registry of informers and their subscriptions.
#[derive(Clone)]
pub struct Watches {
    inner: Arc<Inner>,
    _crds: Arc<Mutex<Option<WatchHandle>>>,
}

/// A subscription to a kind. Dropping it (or [`WatchHandle::stop`]) ends the subscription.
pub struct WatchHandle {
    registry: Weak<Inner>,
    gvk: Gvk,
    id: u64,
    informer: Arc<Informer>,
}

impl WatchHandle {
    /// The informer behind the subscription (its objects and state).
    pub fn informer(&self) -> &Arc<Informer> {
        &self.informer
    }

    /// The kind.
    pub fn gvk(&self) -> &Gvk {
        &self.gvk
    }

    /// Ends the subscription (the same as dropping the handle).
    pub fn stop(self) {}
}

impl Drop for WatchHandle {
    fn drop(&mut self) {
        if let Some(inner) = self.registry.upgrade() {
            unsubscribe(&inner, &self.gvk, self.id);
        }
    }
}

fn lock_slots(inner: &Inner) -> std::sync::MutexGuard<'_, HashMap<Gvk, Slot>> {
    inner.slots.lock().unwrap_or_else(|p| p.into_inner())
}

fn unsubscribe(inner: &Arc<Inner>, gvk: &Gvk, id: u64) {
    let mut slots = lock_slots(inner);
    let Some(slot) = slots.get_mut(gvk) else { return };
    let now_empty = {
        let mut subscribers = slot.informer.subscribers.write().unwrap_or_else(|p| p.into_inner());
        if let Some(subscriber) = subscribers.remove(&id) {
            subscriber.end();
        }
        subscribers.is_empty()
    };
    if !now_empty {
        return;
    }
    // A kind that is not served has nothing to keep warm: stop at once, so nothing keeps
    // asking the server about a kind that is gone.
    if inner.grace.is_zero() || matches!(slot.informer.state(), InformerState::NotServed(_)) {
        if let Some(slot) = slots.remove(gvk) {
            slot.task.abort();
        }
        return;
    }
    slot.idle_generation += 1;
    let generation = slot.idle_generation;
    let weak = Arc::downgrade(inner);
    let gvk = gvk.clone();
    let grace = inner.grace;
    // A kind whose last subscriber left is kept warm for a grace period: a controller that
    // moves from one subscription to another does not pay a relist. The check below runs
    // under the same lock that subscribing takes, so it can never stop a watch in use.
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(async move {
            tokio::time::sleep(grace).await;
            let Some(inner) = weak.upgrade() else { return };
            let mut slots = lock_slots(&inner);
            let idle = slots.get(&gvk).is_some_and(|slot| {
                slot.idle_generation == generation && slot.informer.subscribers.read().unwrap_or_else(|p| p.into_inner()).is_empty()
            });
            if idle && let Some(slot) = slots.remove(&gvk) {
                slot.task.abort();
                tracing::debug!(kind = %gvk, "stopped watching");
            }
        });
    } else if let Some(slot) = slots.remove(&gvk) {
        slot.task.abort();
    }
}

impl Watches {
    /// A registry over a client; informers whose last subscriber left stop after `grace`.
    /// It watches CRDs for as long as it lives.
    pub fn new(kube: Kube, kinds: Arc<KindResolver>, grace: Duration) -> Self {
        let inner = Arc::new(Inner {
            kube,
            kinds,
            slots: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            grace,
            kinds_changed: Arc::new(Notify::new()),
        });
        let watches = Watches { inner, _crds: Arc::new(Mutex::new(None)) };
        let weak = Arc::downgrade(&watches.inner);
        let handle = watches.subscribe(
            "oxplane/kinds",
            &crd_gvk(),
            Arc::new(move |event: &WatchEvent| {
                let Some(inner) = weak.upgrade() else { return };
                let crd = match event {
                    WatchEvent::Applied { new, .. } => new.clone(),
                    WatchEvent::Deleted(old) => old.clone(),
                    WatchEvent::State(_) => return,
                };
                // Whatever the change (created, established, deleted, re-created with another
                // scope), forget what discovery said about its group and wake waiting informers.
                if let Some(group) = crd.pointer("/spec/group").and_then(Value::as_str) {
                    inner.kinds.forget_group(group);
                }
                inner.kinds_changed.notify_waiters();
            }),
        );
        if let Ok(mut slot) = watches._crds.lock() {
            *slot = Some(handle);
        }
        watches
    }

    /// The kind resolver the informers use.
    pub fn kinds(&self) -> &Arc<KindResolver> {
        &self.inner.kinds
    }

    /// Subscribes `controller` to changes of `gvk`. The handler first receives every object
    /// already known (as `Applied`, before this returns), then each change, in order. It is
    /// called under no lock of the registry, so it may itself subscribe or drop handles.
    pub fn subscribe(&self, controller: &str, gvk: &Gvk, handler: Handler) -> WatchHandle {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let subscriber = informer::Subscriber::new(controller, handler);
        let mut slots = lock_slots(&self.inner);
        let slot = slots.entry(gvk.clone()).or_insert_with(|| {
            let informer = Informer::new(gvk.clone());
            let task = tokio::spawn(informer::run(
                informer.clone(),
                self.inner.kube.clone(),
                self.inner.kinds.clone(),
                self.inner.kinds_changed.clone(),
            ));
            Slot { informer, task, idle_generation: 0 }
        });
        slot.idle_generation += 1;
        let informer = slot.informer.clone();
        // Listed before the replay, under the registry's lock (so an idle timer cannot stop the
        // informer meanwhile); events dispatched from now on wait in the subscriber until the
        // replay, run after the lock is released, has delivered the objects.
        informer.subscribers.write().unwrap_or_else(|p| p.into_inner()).insert(id, subscriber.clone());
        drop(slots);
        let handle = WatchHandle { registry: Arc::downgrade(&self.inner), gvk: gvk.clone(), id, informer };
        subscriber.replay(&handle.informer);
        handle
    }

    /// The informer of a kind, if anything watches it.
    pub fn informer(&self, gvk: &Gvk) -> Option<Arc<Informer>> {
        lock_slots(&self.inner).get(gvk).map(|slot| slot.informer.clone())
    }

    /// Live subscriptions: (controller, kind) → count.
    pub fn subscriptions(&self) -> BTreeMap<(String, String), usize> {
        let slots = lock_slots(&self.inner);
        let mut out = BTreeMap::new();
        for (gvk, slot) in slots.iter() {
            for subscriber in slot.informer.subscribers.read().unwrap_or_else(|p| p.into_inner()).values() {
                *out.entry((subscriber.controller.clone(), gvk.to_string())).or_insert(0) += 1;
            }
        }
        out
    }

    /// Kinds with a running informer.
    pub fn watched_kinds(&self) -> Vec<Gvk> {
        let mut kinds: Vec<Gvk> = lock_slots(&self.inner).keys().cloned().collect();
        kinds.sort();
        kinds
    }

    /// Adds the watch metrics to a scrape: live subscriptions by controller and kind, running
    /// informers by kind and state, and the objects each holds.
    pub fn scrape_metrics(&self, scrape: &mut oxplane_metrics::Scrape) {
        let subscriptions = self.subscriptions().into_iter().map(|((controller, kind), count)| {
            (vec![("controller", controller), ("kind", kind)], i64::try_from(count).unwrap_or(i64::MAX))
        });
        scrape.gauge("oxplane_watches", "Live watch subscriptions by controller and kind", subscriptions);
        let mut rows: Vec<(String, &'static str, usize)> = {
            let slots = lock_slots(&self.inner);
            slots.iter().map(|(gvk, slot)| (gvk.to_string(), slot.informer.state().label(), slot.informer.len())).collect()
        };
        rows.sort();
        scrape.gauge(
            "oxplane_informers",
            "Running informers by kind and state",
            rows.iter().map(|(kind, state, _)| (vec![("kind", kind.clone()), ("state", (*state).to_string())], 1)),
        );
        scrape.gauge(
            "oxplane_informer_objects",
            "Objects an informer holds in memory",
            rows.iter().map(|(kind, _, objects)| (vec![("kind", kind.clone())], i64::try_from(*objects).unwrap_or(i64::MAX))),
        );
    }

    /// The informers and their subscriptions, as JSON for the debug endpoint.
    pub fn debug(&self) -> Value {
        let slots = lock_slots(&self.inner);
        let mut informers: Vec<Value> = slots
            .iter()
            .map(|(gvk, slot)| {
                let mut controllers: BTreeMap<String, usize> = BTreeMap::new();
                for subscriber in slot.informer.subscribers.read().unwrap_or_else(|p| p.into_inner()).values() {
                    *controllers.entry(subscriber.controller.clone()).or_insert(0) += 1;
                }
                let state = slot.informer.state();
                let message = match &state {
                    InformerState::NotServed(m) | InformerState::Failing(m) => Some(m.clone()),
                    _ => None,
                };
                json!({
                    "kind": gvk.to_string(),
                    "state": state.label(),
                    "message": message,
                    "objects": slot.informer.len(),
                    "subscriptions": controllers,
                })
            })
            .collect();
        informers.sort_by(|a, b| a["kind"].as_str().cmp(&b["kind"].as_str()));
        json!({ "informers": informers })
    }
}


#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use oxplane_apiserver::testing::RunningServer;
    use serde_json::json;

    use super::*;
    use crate::kinds::Kind;

    fn config_maps() -> Kind {
        Kind::new("", "v1", "ConfigMap", "configmaps", true)
    }

    /// Runs `f` on a blocking thread; a deadlock fails the test instead of hanging it.
    async fn finishes<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
        match tokio::time::timeout(Duration::from_secs(20), tokio::task::spawn_blocking(f)).await {
            Ok(done) => done.unwrap(),
            Err(_) => panic!("{what} did not finish (deadlock)"),
        }
    }

    /// Waits up to 20 s for `check`.
    async fn eventually(what: &str, check: impl Fn() -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while !check() {
            assert!(tokio::time::Instant::now() < deadline, "{what} did not happen (deadlock)");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn handlers_may_subscribe_and_unsubscribe_from_inside_their_callbacks() {
        let server = RunningServer::start().await.unwrap();
        let runtime = crate::Runtime::new(kube::Client::new(server.local_service(), "default"), Duration::from_millis(200));
        let kind = config_maps();
        let config_map = |name: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}});
        runtime.kube.create(&kind, &config_map("first")).await.unwrap();
        let watches = runtime.watches.clone();
        let first = watches.subscribe("test", &kind.gvk, Arc::new(|_: &WatchEvent| {}));
        assert!(first.informer().wait_synced(Duration::from_secs(20)).await);

        // Each applied ConfigMap makes the handler subscribe to ConfigMaps itself (that
        // subscription's replay calls its own handler); a deletion drops every one of them.
        let inner: Arc<Mutex<Vec<WatchHandle>>> = Arc::default();
        let inner_calls = Arc::new(AtomicUsize::new(0));
        let handler: Handler = {
            let (watches, inner, inner_calls, gvk) = (watches.clone(), inner.clone(), inner_calls.clone(), kind.gvk.clone());
            Arc::new(move |event: &WatchEvent| match event {
                WatchEvent::Applied { .. } => {
                    let calls = inner_calls.clone();
                    let handle = watches.subscribe("test/inner", &gvk, Arc::new(move |_: &WatchEvent| {
                        calls.fetch_add(1, Ordering::Relaxed);
                    }));
                    inner.lock().unwrap().push(handle);
                }
                WatchEvent::Deleted(_) => inner.lock().unwrap().clear(),
                WatchEvent::State(_) => {}
            })
        };

        // Replayed: "first" is known, so the handler subscribes inside `subscribe`.
        let outer = finishes("subscribing from a handler being replayed", {
            let (watches, gvk) = (watches.clone(), kind.gvk.clone());
            move || watches.subscribe("test/outer", &gvk, handler)
        })
        .await;
        let replayed = inner.lock().unwrap().len();
        assert!(replayed >= 1, "the replay subscribed");
        assert!(inner_calls.load(Ordering::Relaxed) >= 1, "the inner subscription was replayed too");

        // Live: the informer's task calls the handler, which subscribes to its own kind.
        runtime.kube.create(&kind, &config_map("second")).await.unwrap();
        eventually("subscribing from a live handler", || inner.lock().unwrap().len() > replayed).await;

        // A deletion drops the inner subscriptions from inside the callback.
        runtime.kube.delete(&kind, Some("default"), "second", &Default::default()).await.unwrap();
        eventually("unsubscribing from a live handler", || inner.lock().unwrap().is_empty()).await;
        assert!(!watches.subscriptions().keys().any(|(controller, _)| controller == "test/inner"));

        // The registry still answers, and a change still reaches every subscriber.
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = {
            let calls = calls.clone();
            watches.subscribe("test/after", &kind.gvk, Arc::new(move |_: &WatchEvent| {
                calls.fetch_add(1, Ordering::Relaxed);
            }))
        };
        let before = calls.load(Ordering::Relaxed);
        runtime.kube.create(&kind, &config_map("third")).await.unwrap();
        eventually("the next change delivered", || calls.load(Ordering::Relaxed) > before).await;
        drop((outer, counted, first));
    }
}
