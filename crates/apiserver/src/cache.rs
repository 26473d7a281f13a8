//! The watch cache: every API object in memory, fed by one watch on the store, so GET, LIST
//! and WATCH never touch the disk.
//!
//! The cache applies store events in revision order and keeps a bounded window of recent
//! events. A watch from revision N replays the window after N and then follows live events;
//! if N is older than the window, the watch is answered with `410 Expired` and the client
//! relists. Each event's JSON is rendered once and shared by every watcher. A watcher that
//! falls too far behind the live stream is ended (it too gets `410 Expired`) instead of
//! slowing the others down.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use bytes::Bytes;
use oxplane_store::{Event, RangeRequest, Revision, Store, StoreError};
use serde_json::Value;
use tokio::sync::{broadcast, watch};

use crate::objects;

/// The store prefix every API object lives under.
pub const ROOT: &str = "/registry/";
/// How many recent events the cache keeps, by default, for watches that resume from a revision.
pub const DEFAULT_WINDOW: usize = 10_000;
/// How many live events a watcher may fall behind, by default, before it is ended with 410.
pub const DEFAULT_LIVE_QUEUE: usize = 10_000;

/// What happened to an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// Created.
    Added,
    /// Updated.
    Modified,
    /// Deleted.
    Deleted,
}

impl EventType {
    /// The watch event `type`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change, shared by every watcher.
#[derive(Debug)]
pub struct CacheEvent {
    /// The revision of the change.
    pub revision: Revision,
    /// The store key.
    pub key: String,
    /// What happened.
    pub kind: EventType,
    /// The object after the change (for a deletion: as it was, stamped with the deletion's
    /// revision, as Kubernetes does).
    pub object: Arc<Value>,
    /// The object before the change, if any.
    pub prev: Option<Arc<Value>>,
    json: OnceLock<Bytes>,
}

impl CacheEvent {
    /// An event whose JSON is rendered on first use.
    pub fn new(revision: Revision, key: String, kind: EventType, object: Arc<Value>, prev: Option<Arc<Value>>) -> Self {
        CacheEvent { revision, key, kind, object, prev, json: OnceLock::new() }
    }

    /// The object's JSON, rendered once.
    pub fn object_json(&self) -> Bytes {
        self.json.get_or_init(|| Bytes::from(self.object.to_string())).clone()
    }
}

/// What the live broadcast carries.
#[derive(Debug, Clone)]
pub enum Live {
    /// The next change.
    Event(Arc<CacheEvent>),
    /// The cache had to reload from the store (its store watch was compacted away): history is
    /// gone, so every watcher must relist.
    Reset,
}

/// Why the cache could not answer.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// The requested revision is older than the cache's window.
    #[error("too old resource version: {requested} ({oldest})")]
    Expired {
        /// What was asked for.
        requested: Revision,
        /// The oldest revision a watch can start from.
        oldest: Revision,
    },
    /// The cache did not reach the requested revision in time.
    #[error("Too large resource version: {requested}, current: {current}")]
    TooLarge {
        /// What was asked for.
        requested: Revision,
        /// Where the cache is.
        current: Revision,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

struct State {
    revision: Revision,
    objects: BTreeMap<String, Arc<Value>>,
    history: VecDeque<Arc<CacheEvent>>,
    /// Every event after this revision is in `history`.
    history_start: Revision,
}

/// The cache. Cloning the `Arc` shares it.
pub struct WatchCache {
    state: RwLock<State>,
    window: usize,
    live: broadcast::Sender<Live>,
    revision: watch::Sender<Revision>,
    store: Arc<dyn Store>,
    /// Prefixes whose last change is tracked (see [`WatchCache::track`]).
    tracked: RwLock<Vec<(String, Arc<AtomicU64>)>>,
}

/// A watch on the cache: first the replayed events, then live ones.
pub struct CacheWatch {
    /// Events to deliver before the live ones.
    pub initial: Vec<Arc<CacheEvent>>,
    /// Live events; `Lagged` means the watcher fell too far behind.
    pub live: broadcast::Receiver<Live>,
    /// The revision the initial events bring the watcher to.
    pub revision: Revision,
}

impl WatchCache {
    /// Loads every object from the store and starts following it, keeping the last `window`
    /// events for watches that resume from a revision.
    pub async fn start(store: Arc<dyn Store>, window: usize) -> Result<Arc<WatchCache>, StoreError> {
        WatchCache::start_with(store, window, DEFAULT_LIVE_QUEUE).await
    }

    /// As [`WatchCache::start`], letting each watcher fall at most `live_queue` live events
    /// behind before it is ended with 410.
    pub async fn start_with(store: Arc<dyn Store>, window: usize, live_queue: usize) -> Result<Arc<WatchCache>, StoreError> {
        let (objects, revision) = load(&*store).await?;
        let (live, _) = broadcast::channel(live_queue.max(1));
        let (revision_tx, _) = watch::channel(revision);
        let cache = Arc::new(WatchCache {
            state: RwLock::new(State { revision, objects, history: VecDeque::new(), history_start: revision }),
            window: window.max(1),
            live,
            revision: revision_tx,
            store,
            tracked: RwLock::default(),
        });
        let follower = Arc::downgrade(&cache);
        tokio::spawn(async move { follow(follower, revision).await });
        Ok(cache)
    }

    /// A counter set to the revision of the last change under `prefix` the cache applied (a
    /// reset counts as a change). It is set under the cache's lock, after the change: whoever
    /// reads a new value and then lists sees that change. Derived state (the RBAC rules) is
    /// rebuilt only when it moves, without scanning the cache on every request.
    pub fn track(&self, prefix: &str) -> Arc<AtomicU64> {
        let counter = Arc::new(AtomicU64::new(self.revision().max(1)));
        self.tracked.write().unwrap_or_else(|p| p.into_inner()).push((prefix.to_string(), counter.clone()));
        counter
    }

    /// Marks the tracked prefixes `key` is under as changed at `revision`.
    fn touch(&self, key: &str, revision: Revision) {
        for (prefix, counter) in self.tracked.read().unwrap_or_else(|p| p.into_inner()).iter() {
            if key.starts_with(prefix.as_str()) {
                counter.store(revision, Ordering::Release);
            }
        }
    }

    /// The revision the cache has applied.
    pub fn revision(&self) -> Revision {
        *self.revision.borrow()
    }

    /// Waits until the cache has applied `revision`, for at most `limit`.
    pub async fn wait_for(&self, revision: Revision, limit: Duration) -> Result<(), CacheError> {
        let mut rx = self.revision.subscribe();
        let reached = tokio::time::timeout(limit, rx.wait_for(|r| *r >= revision)).await;
        match reached {
            Ok(Ok(_)) => Ok(()),
            _ => Err(CacheError::TooLarge { requested: revision, current: self.revision() }),
        }
    }

    /// Waits until the cache holds every write the store has acknowledged so far: the
    /// consistent read Kubernetes gives for requests without a resourceVersion.
    pub async fn sync(&self) -> Result<(), CacheError> {
        let current = self.store.current_revision().await?;
        self.wait_for(current, Duration::from_secs(10)).await
    }

    /// One object.
    pub fn get(&self, key: &str) -> (Option<Arc<Value>>, Revision) {
        let state = self.state.read().unwrap_or_else(|p| p.into_inner());
        (state.objects.get(key).cloned(), state.revision)
    }

    /// Every object under `prefix`, in key order, and the revision they are at.
    pub fn list(&self, prefix: &str) -> (Vec<Arc<Value>>, Revision) {
        let state = self.state.read().unwrap_or_else(|p| p.into_inner());
        let items = state
            .objects
            .range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(_, v)| v.clone())
            .collect();
        (items, state.revision)
    }

    /// Starts a watch of `prefix` after `after`; `None` starts with the current objects as
    /// ADDED events, as a watch without a resourceVersion does.
    pub fn watch(&self, prefix: &str, after: Option<Revision>) -> Result<CacheWatch, CacheError> {
        let state = self.state.read().unwrap_or_else(|p| p.into_inner());
        // Subscribing under the read lock: the follower publishes under the write lock, so no
        // event falls between the replay and the live stream.
        let live = self.live.subscribe();
        let initial = match after {
            None => state
                .objects
                .range(prefix.to_string()..)
                .take_while(|(k, _)| k.starts_with(prefix))
                .map(|(key, object)| {
                    Arc::new(CacheEvent::new(resource_version(object), key.clone(), EventType::Added, object.clone(), None))
                })
                .collect(),
            Some(after) => {
                if after < state.history_start {
                    return Err(CacheError::Expired { requested: after, oldest: state.history_start });
                }
                let start = state.history.partition_point(|e| e.revision <= after);
                state.history.range(start..).filter(|e| e.key.starts_with(prefix)).cloned().collect()
            }
        };
        Ok(CacheWatch { initial, live, revision: state.revision })
    }

    fn apply(&self, events: Vec<Event>) {
        let mut state = self.state.write().unwrap_or_else(|p| p.into_inner());
        let mut last = state.revision;
        for event in events {
            let revision = event.revision();
            let decoded = match &event {
                Event::Put { kv, prev } => objects::from_store(kv).map(|object| {
                    let kind = if prev.is_some() { EventType::Modified } else { EventType::Added };
                    (kind, Arc::new(object))
                }),
                Event::Delete { prev, .. } => objects::from_store(prev).map(|mut object| {
                    objects::set_resource_version(&mut object, revision);
                    (EventType::Deleted, Arc::new(object))
                }),
            };
            let (kind, object) = match decoded {
                Ok(decoded) => decoded,
                Err(error) => {
                    tracing::error!(key = event.key(), %error, "skipping an undecodable stored object");
                    continue;
                }
            };
            let key = event.key().to_string();
            self.touch(&key, revision);
            let prev = match kind {
                EventType::Deleted => state.objects.remove(&key),
                _ => state.objects.insert(key.clone(), object.clone()),
            };
            let cache_event = Arc::new(CacheEvent::new(revision, key, kind, object, prev));
            state.history.push_back(cache_event.clone());
            if state.history.len() > self.window
                && let Some(dropped) = state.history.pop_front()
            {
                state.history_start = dropped.revision;
            }
            let _ = self.live.send(Live::Event(cache_event));
            last = revision;
        }
        state.revision = last;
        drop(state);
        self.revision.send_replace(last);
    }
}

impl WatchCache {
    /// Replaces the cache's content with a fresh load from the store, dropping its history and
    /// ending every watch with 410 so clients relist.
    fn reset(&self, objects: BTreeMap<String, Arc<Value>>, revision: Revision) {
        let mut state = self.state.write().unwrap_or_else(|p| p.into_inner());
        *state = State { revision, objects, history: VecDeque::new(), history_start: revision };
        for (_, counter) in self.tracked.read().unwrap_or_else(|p| p.into_inner()).iter() {
            counter.store(revision.max(1), Ordering::Release);
        }
        let _ = self.live.send(Live::Reset);
        drop(state);
        self.revision.send_replace(revision);
    }
}

/// The object's resourceVersion as a revision (0 if missing).
pub fn resource_version(object: &Value) -> Revision {
    objects::meta_str(object, "resourceVersion").and_then(|rv| rv.parse().ok()).unwrap_or(0)
}

async fn load(store: &dyn Store) -> Result<(BTreeMap<String, Arc<Value>>, Revision), StoreError> {
    let mut objects = BTreeMap::new();
    let mut request = RangeRequest { prefix: ROOT.into(), limit: 10_000, ..Default::default() };
    loop {
        let page = store.range(request.clone()).await?;
        for kv in &page.kvs {
            match objects::from_store(kv) {
                Ok(object) => {
                    objects.insert(kv.key.clone(), Arc::new(object));
                }
                Err(error) => tracing::error!(key = %kv.key, %error, "skipping an undecodable stored object"),
            }
        }
        match page.continue_token {
            Some(token) => request.continue_token = Some(token),
            None => return Ok((objects, page.revision)),
        }
    }
}

/// Applies the store's events to the cache until the cache is dropped. If the store has
/// compacted away the revision the cache needs next, the cache reloads and resets its watchers
/// rather than stall.
async fn follow(cache: std::sync::Weak<WatchCache>, mut after: Revision) {
    loop {
        let Some(store) = cache.upgrade().map(|c| c.store.clone()) else { return };
        let mut watcher = match store.watch(ROOT, after).await {
            Ok(watcher) => watcher,
            Err(StoreError::Compacted { .. }) => {
                after = match resync(&cache, &*store).await {
                    Some(revision) => revision,
                    None => return,
                };
                continue;
            }
            Err(error) => {
                tracing::error!(%error, "the watch cache cannot follow the store; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        drop(store);
        loop {
            match watcher.next_batch().await {
                Ok(batch) if batch.is_empty() => return,
                Ok(batch) => {
                    let Some(cache) = cache.upgrade() else { return };
                    after = batch.last().map(Event::revision).unwrap_or(after);
                    cache.apply(batch);
                }
                Err(error) => {
                    tracing::warn!(%error, "the watch cache lost its store watch; resuming");
                    break;
                }
            }
        }
    }
}

/// Reloads the cache from the store; returns the revision to follow from.
async fn resync(cache: &std::sync::Weak<WatchCache>, store: &dyn Store) -> Option<Revision> {
    loop {
        match load(store).await {
            Ok((objects, revision)) => {
                tracing::warn!(revision, "the watch cache fell behind store compaction; reloaded, watchers will relist");
                cache.upgrade()?.reset(objects, revision);
                return Some(revision);
            }
            Err(error) => {
                tracing::error!(%error, "the watch cache cannot reload from the store; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use oxplane_store::memory::MemoryStore;
    use oxplane_store::{Write, WriteResult};

    async fn put(store: &MemoryStore, key: &str, value: serde_json::Value) -> Revision {
        match store.write(Write::Create { key: key.into(), value: Bytes::from(value.to_string()) }).await.unwrap() {
            WriteResult::Committed(event) => event.revision(),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn follows_the_store_and_serves_watches_from_a_revision() {
        let store = MemoryStore::default();
        put(&store, "/registry/core/configmaps/default/a", serde_json::json!({"metadata": {"name": "a"}})).await;
        let cache = WatchCache::start(Arc::new(store.clone()), DEFAULT_WINDOW).await.unwrap();
        assert_eq!(cache.revision(), 1);
        let rev = put(&store, "/registry/core/configmaps/default/b", serde_json::json!({"metadata": {"name": "b"}})).await;
        cache.sync().await.unwrap();
        let (items, revision) = cache.list("/registry/core/configmaps/");
        assert_eq!((items.len(), revision), (2, rev));
        assert_eq!(resource_version(&items[1]), 2);
        // A watch from revision 1 replays b; from before the window it is Expired.
        let watch = cache.watch("/registry/", Some(1)).unwrap();
        assert_eq!(watch.initial.len(), 1);
        assert_eq!(watch.initial[0].kind, EventType::Added);
        assert!(matches!(cache.watch("/registry/", Some(0)), Err(CacheError::Expired { oldest: 1, .. })));
        // Without a revision, a watch starts with every object as ADDED.
        assert_eq!(cache.watch("/registry/", None).unwrap().initial.len(), 2);
    }

    #[tokio::test]
    async fn a_reset_ends_live_watches_and_reloads_the_state() {
        let store = MemoryStore::default();
        put(&store, "/registry/x/a", serde_json::json!({"metadata": {"name": "a"}})).await;
        let cache = WatchCache::start(Arc::new(store.clone()), DEFAULT_WINDOW).await.unwrap();
        let mut watch = cache.watch("/registry/", Some(1)).unwrap();
        let rev = put(&store, "/registry/x/b", serde_json::json!({"metadata": {"name": "b"}})).await;
        let (objects, revision) = load(&store).await.unwrap();
        assert_eq!(revision, rev);
        cache.reset(objects, revision);
        // The watcher sees b (if it arrived before the reset) and then the reset.
        while let Live::Event(event) = watch.live.recv().await.unwrap() {
            assert_eq!(event.key, "/registry/x/b");
        }
        assert_eq!(cache.list("/registry/").0.len(), 2);
        assert!(matches!(cache.watch("/registry/", Some(1)), Err(CacheError::Expired { oldest: 2, .. })));
    }

    #[tokio::test]
    async fn a_future_revision_times_out_as_too_large() {
        let cache = WatchCache::start(Arc::new(MemoryStore::default()), DEFAULT_WINDOW).await.unwrap();
        let started = std::time::Instant::now();
        let result = cache.wait_for(50, Duration::from_millis(200)).await;
        assert!(matches!(result, Err(CacheError::TooLarge { requested: 50, current: 0 })), "{result:?}");
        assert!(started.elapsed() >= Duration::from_millis(200));
    }
}
