//! One informer: a list-then-watch loop over one kind that keeps every object in memory and
//! tells its subscribers about each change, in order.
//!
//! Written by hand rather than with kube-runtime's `watcher` because it must keep raw JSON
//! (kinds are defined at runtime), report "kind not served" as a state of its own instead of an
//! error to retry blindly, and be woken the moment a CRD appears so a kind that comes back is
//! watched again at once.
//!
//! Objects are kept without `metadata.managedFields` (no controller reads them, and they are
//! often the largest part of an object), and CRDs without their versions' schemas (the
//! runtime watches CRDs only to learn that kinds come and go): a control plane with a
//! thousand CRDs keeps a few MiB of them here rather than tens.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::StreamExt;
use kube::core::WatchEvent as ApiWatchEvent;
use serde_json::Value;
use tokio::sync::Notify;

use crate::client::Kube;
use crate::kinds::{Gvk, KindError, KindResolver};
use crate::object::{self, ObjectKey};

/// A change an informer reports.
#[derive(Clone, Debug)]
pub enum WatchEvent {
    /// An object was added or changed (`old` is the previous version, if the informer had one).
    Applied {
        /// The previous version.
        old: Option<Arc<Value>>,
        /// The current version.
        new: Arc<Value>,
    },
    /// An object was deleted (its last known version).
    Deleted(Arc<Value>),
    /// The informer's state changed.
    State(InformerState),
}

/// How an informer is doing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InformerState {
    /// Not listed yet.
    Starting,
    /// Listed, and watching.
    Synced,
    /// The kind is not served (its CRD is missing); the message names the kind.
    NotServed(String),
    /// Listing or watching fails for another reason (retried with backoff).
    Failing(String),
}

impl InformerState {
    /// A short label for metrics.
    pub fn label(&self) -> &'static str {
        match self {
            InformerState::Starting => "starting",
            InformerState::Synced => "synced",
            InformerState::NotServed(_) => "not_served",
            InformerState::Failing(_) => "failing",
        }
    }
}

/// A subscriber's callback. It runs on the informer's task (or, replaying, inside
/// [`super::Watches::subscribe`]), never under a lock of the registry or the informer, so it
/// may subscribe or drop subscriptions itself; it should not block, as the kind's other
/// subscribers wait for it: it queues keys.
pub type Handler = Arc<dyn Fn(&WatchEvent) + Send + Sync>;

/// A subscription to an informer.
pub(crate) struct Subscriber {
    pub(crate) controller: String,
    handler: Handler,
    /// While the subscriber is being replayed the informer's objects, the events dispatched
    /// meanwhile, delivered after the replay in order; `None` once it is live.
    pending: Mutex<Option<Vec<WatchEvent>>>,
    /// Set when the subscription ends: an event being dispatched then is not delivered.
    gone: AtomicBool,
}

impl Subscriber {
    /// A subscriber still to be replayed the informer's objects ([`Subscriber::replay`]).
    pub(crate) fn new(controller: &str, handler: Handler) -> Arc<Self> {
        Arc::new(Subscriber { controller: controller.to_string(), handler, pending: Mutex::new(Some(Vec::new())), gone: AtomicBool::new(false) })
    }

    /// Ends the subscription.
    pub(crate) fn end(&self) {
        self.gone.store(true, Ordering::Release);
    }

    fn deliver(&self, event: &WatchEvent) {
        if self.gone.load(Ordering::Acquire) {
            return;
        }
        if let Some(pending) = self.pending.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            pending.push(event.clone());
            return;
        }
        (self.handler)(event);
    }

    /// Gives the subscriber, already listed among the informer's subscribers, every object
    /// the informer knows (as `Applied`) and its state if it is not serving, then the events
    /// dispatched meanwhile, and makes it live. No lock is held while the handler runs.
    pub(crate) fn replay(&self, informer: &Informer) {
        for object in informer.list() {
            if self.gone.load(Ordering::Acquire) {
                return;
            }
            (self.handler)(&WatchEvent::Applied { old: None, new: object });
        }
        if let state @ (InformerState::NotServed(_) | InformerState::Failing(_)) = informer.state() {
            (self.handler)(&WatchEvent::State(state));
        }
        loop {
            let batch = {
                let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
                match pending.as_mut() {
                    Some(events) if !events.is_empty() => std::mem::take(events),
                    _ => {
                        *pending = None;
                        return;
                    }
                }
            };
            for event in &batch {
                if self.gone.load(Ordering::Acquire) {
                    return;
                }
                (self.handler)(event);
            }
        }
    }
}

/// What an informer knows; shared by its task, the registry and readers.
pub struct Informer {
    gvk: Gvk,
    objects: RwLock<HashMap<ObjectKey, Arc<Value>>>,
    state: Mutex<InformerState>,
    pub(crate) subscribers: RwLock<BTreeMap<u64, Arc<Subscriber>>>,
    synced: tokio::sync::watch::Sender<bool>,
}

const WATCH_TIMEOUT_SECONDS: u32 = 290;
const MAX_BACKOFF: Duration = Duration::from_secs(30);

impl Informer {
    pub(crate) fn new(gvk: Gvk) -> Arc<Self> {
        Arc::new(Informer {
            gvk,
            objects: RwLock::new(HashMap::new()),
            state: Mutex::new(InformerState::Starting),
            subscribers: RwLock::new(BTreeMap::new()),
            synced: tokio::sync::watch::channel(false).0,
        })
    }

    /// The kind watched.
    pub fn gvk(&self) -> &Gvk {
        &self.gvk
    }

    /// The current state.
    pub fn state(&self) -> InformerState {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// An object from memory.
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<Value>> {
        self.read().get(key).cloned()
    }

    /// Every object in memory.
    pub fn list(&self) -> Vec<Arc<Value>> {
        self.read().values().cloned().collect()
    }

    /// How many objects are in memory.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether no object is in memory.
    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    /// Waits until the first list completed (or `timeout` passes); whether it did.
    pub async fn wait_synced(&self, timeout: Duration) -> bool {
        let mut rx = self.synced.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|synced| *synced)).await.is_ok_and(|r| r.is_ok())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<ObjectKey, Arc<Value>>> {
        self.objects.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<ObjectKey, Arc<Value>>> {
        self.objects.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Tells every subscriber about `event`, outside the subscriber list's lock: a handler may
    /// subscribe or unsubscribe.
    fn dispatch(&self, event: &WatchEvent) {
        let subscribers: Vec<Arc<Subscriber>> = self.subscribers.read().unwrap_or_else(|p| p.into_inner()).values().cloned().collect();
        for subscriber in subscribers {
            subscriber.deliver(event);
        }
    }

    fn set_state(&self, state: InformerState) {
        let changed = {
            let mut current = self.state.lock().unwrap_or_else(|p| p.into_inner());
            let changed = *current != state;
            *current = state.clone();
            changed
        };
        if changed {
            match &state {
                InformerState::NotServed(message) => tracing::info!(kind = %self.gvk, %message, "kind not served"),
                InformerState::Failing(message) => tracing::debug!(kind = %self.gvk, %message, "watch failing"),
                _ => {}
            }
            self.dispatch(&WatchEvent::State(state));
        }
    }

    /// What is kept of an object: all but its managed fields (and a CRD's schemas).
    fn slim(&self, mut object: Value) -> Value {
        object::strip_managed_fields(&mut object);
        if self.gvk.group == "apiextensions.k8s.io" && self.gvk.kind == "CustomResourceDefinition" {
            for version in object.pointer_mut("/spec/versions").and_then(Value::as_array_mut).into_iter().flatten() {
                if let Some(version) = version.as_object_mut() {
                    version.remove("schema");
                }
            }
        }
        object
    }

    /// Replaces everything in memory with a fresh list, telling subscribers what changed.
    fn replace(&self, items: Vec<Value>) {
        let mut fresh: HashMap<ObjectKey, Arc<Value>> = HashMap::with_capacity(items.len());
        for item in items {
            if let Some(key) = ObjectKey::of(&item) {
                fresh.insert(key, Arc::new(self.slim(item)));
            }
        }
        let old = std::mem::replace(&mut *self.write(), fresh.clone());
        for (key, new) in &fresh {
            let previous = old.get(key);
            if previous.is_none_or(|p| object::resource_version(p) != object::resource_version(new)) {
                self.dispatch(&WatchEvent::Applied { old: previous.cloned(), new: new.clone() });
            }
        }
        for (key, gone) in old {
            if !fresh.contains_key(&key) {
                self.dispatch(&WatchEvent::Deleted(gone));
            }
        }
    }

    fn apply(&self, object: Value) {
        let Some(key) = ObjectKey::of(&object) else { return };
        let new = Arc::new(self.slim(object));
        let old = self.write().insert(key, new.clone());
        self.dispatch(&WatchEvent::Applied { old, new });
    }

    fn delete(&self, object: Value) {
        let Some(key) = ObjectKey::of(&object) else { return };
        let removed = self.write().remove(&key);
        self.dispatch(&WatchEvent::Deleted(removed.unwrap_or_else(|| Arc::new(object))));
    }

    /// Forgets every object (the kind is gone), reporting each as deleted.
    fn clear(&self) {
        let old = std::mem::take(&mut *self.write());
        for gone in old.into_values() {
            self.dispatch(&WatchEvent::Deleted(gone));
        }
    }
}

/// The informer's loop; runs until its task is aborted.
pub(crate) async fn run(informer: Arc<Informer>, kube: Kube, kinds: Arc<KindResolver>, kinds_changed: Arc<Notify>) {
    let mut backoff = Duration::from_millis(500);
    loop {
        let kind = match kinds.resolve(&informer.gvk).await {
            Ok(kind) => kind,
            Err(error) => {
                if matches!(error, KindError::NotServed { .. }) {
                    informer.clear();
                    informer.set_state(InformerState::NotServed(error.to_string()));
                } else {
                    informer.set_state(InformerState::Failing(error.to_string()));
                }
                wait(&kinds_changed, &mut backoff).await;
                continue;
            }
        };
        let (items, mut resource_version) = match list(&kube, &kind).await {
            Ok(listed) => listed,
            Err(error) if error.is_not_found() => {
                kinds.forget(&informer.gvk);
                continue;
            }
            Err(error) => {
                informer.set_state(InformerState::Failing(format!("cannot list {}: {error}", informer.gvk)));
                wait(&kinds_changed, &mut backoff).await;
                continue;
            }
        };
        informer.replace(items);
        informer.set_state(InformerState::Synced);
        informer.synced.send_replace(true);
        backoff = Duration::from_millis(500);

        // Watch from the list's revision until the server tells us to relist.
        loop {
            let stream = match kube.watch(&kind, &resource_version, WATCH_TIMEOUT_SECONDS).await {
                Ok(stream) => stream,
                Err(error) => {
                    if error.is_not_found() {
                        kinds.forget(&informer.gvk);
                    } else {
                        informer.set_state(InformerState::Failing(format!("cannot watch {}: {error}", informer.gvk)));
                        wait(&kinds_changed, &mut backoff).await;
                    }
                    break;
                }
            };
            tokio::pin!(stream);
            let mut relist = false;
            let mut events = 0usize;
            while let Some(event) = stream.next().await {
                events += 1;
                match event {
                    Ok(ApiWatchEvent::Added(object) | ApiWatchEvent::Modified(object)) => {
                        if let Some(rv) = object::resource_version(&object) {
                            resource_version = rv.to_string();
                        }
                        informer.apply(object);
                    }
                    Ok(ApiWatchEvent::Deleted(object)) => {
                        if let Some(rv) = object::resource_version(&object) {
                            resource_version = rv.to_string();
                        }
                        informer.delete(object);
                    }
                    Ok(ApiWatchEvent::Bookmark(bookmark)) => resource_version = bookmark.metadata.resource_version,
                    Ok(ApiWatchEvent::Error(status)) => {
                        if status.code != 410 {
                            tracing::debug!(kind = %informer.gvk, message = %status.message, "watch error; relisting");
                        }
                        relist = true;
                        break;
                    }
                    Err(error) => {
                        tracing::debug!(kind = %informer.gvk, %error, "watch stream failed; relisting");
                        relist = true;
                        break;
                    }
                }
            }
            if relist {
                break;
            }
            if events == 0 {
                // A watch that ends at once may mean the kind just went: check with a list.
                break;
            }
        }
    }
}

async fn list(kube: &Kube, kind: &crate::kinds::Kind) -> Result<(Vec<Value>, String), crate::client::ApiError> {
    let mut items = Vec::new();
    let mut continue_token: Option<String> = None;
    loop {
        let page = kube.list_page(kind, None, None, continue_token.as_deref()).await?;
        items.extend(page.items);
        match page.continue_token {
            Some(token) => continue_token = Some(token),
            None => return Ok((items, page.resource_version)),
        }
    }
}

/// Waits for the backoff, or less if a kind appears; doubles the backoff up to a cap.
async fn wait(kinds_changed: &Notify, backoff: &mut Duration) {
    tokio::select! {
        () = kinds_changed.notified() => {}
        () = tokio::time::sleep(crate::queue::jitter(*backoff)) => {}
    }
    *backoff = (*backoff * 2).min(MAX_BACKOFF);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn informers_keep_objects_without_managed_fields_and_crds_without_schemas() {
        let managed = json!([{"manager": "kubectl", "operation": "Apply", "fieldsV1": {"f:spec": {}}}]);
        let crds = Informer::new(Gvk::new("apiextensions.k8s.io", "v1", "CustomResourceDefinition"));
        let crd = json!({
            "metadata": {"name": "things.example.org", "managedFields": managed, "ownerReferences": [{"uid": "u"}]},
            "spec": {"group": "example.org", "versions": [{"name": "v1", "served": true, "schema": {"openAPIV3Schema": {"type": "object"}}}]},
            "status": {"conditions": [{"type": "Established", "status": "True"}]}
        });
        let kept = crds.slim(crd);
        assert_eq!(
            kept,
            json!({
                "metadata": {"name": "things.example.org", "ownerReferences": [{"uid": "u"}]},
                "spec": {"group": "example.org", "versions": [{"name": "v1", "served": true}]},
                "status": {"conditions": [{"type": "Established", "status": "True"}]}
            })
        );
        // Other kinds keep their spec whole, schema-like fields included.
        let widgets = Informer::new(Gvk::new("example.org", "v1", "Widget"));
        let widget = json!({"metadata": {"name": "w", "managedFields": managed}, "spec": {"versions": [{"schema": 1}]}});
        assert_eq!(widgets.slim(widget), json!({"metadata": {"name": "w"}, "spec": {"versions": [{"schema": 1}]}}));
    }
}
