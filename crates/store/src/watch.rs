//! Watches, shared by every backend: replay history from the backend, then follow live commits.
//!
//! A watch subscribes to the live broadcast and notes the last revision published before it
//! subscribed, atomically. Everything up to that revision is read from the backend's history,
//! everything after it arrives on the broadcast, so there is no gap and no duplicate. A watcher
//! that falls behind the broadcast does not lose events: it goes back to reading history from
//! the last revision it delivered, unless compaction has overtaken it, in which case it ends
//! with [`StoreError::Compacted`].

use std::sync::{Arc, Mutex};

use tokio::sync::{broadcast, mpsc};

use crate::{Event, Revision, StoreError, StoreResult};

/// How many committed batches the live broadcast buffers before a slow watcher must catch up
/// from history.
const BROADCAST_CAPACITY: usize = 1024;
/// How many events one history read returns.
const HISTORY_PAGE: usize = 1000;
/// How many batches a watcher's consumer may have pending before the watch waits for it.
pub(crate) const CONSUMER_QUEUE: usize = 64;

/// A backend's committed history, read in revision order.
pub(crate) trait History: Send + Sync + 'static {
    /// Events under `prefix` with revisions in `(after, up_to]`, oldest first, at most `limit`.
    /// Fails with [`StoreError::Compacted`] if `after` is older than the compacted revision.
    fn events(&self, prefix: &str, after: Revision, up_to: Revision, limit: usize)
    -> StoreResult<Vec<Event>>;
}

/// The live side of watches: each committed batch is published once and shared by every watch.
pub(crate) struct Hub {
    state: Mutex<HubState>,
}

struct HubState {
    published: Revision,
    /// `None` once the store has closed: receivers then see the channel end.
    tx: Option<broadcast::Sender<Arc<[Event]>>>,
}

impl Hub {
    /// A hub whose history ends at `current`.
    pub(crate) fn new(current: Revision) -> Self {
        let (tx, _) = broadcast::channel(BROADCAST_CAPACITY);
        Hub { state: Mutex::new(HubState { published: current, tx: Some(tx) }) }
    }

    /// Publishes a committed batch. Batches must be published in revision order, after they are
    /// readable from history.
    pub(crate) fn publish(&self, batch: Vec<Event>) {
        let Some(last) = batch.last().map(Event::revision) else { return };
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.published = last;
        if let Some(tx) = &state.tx {
            // No receivers is fine: nobody is watching.
            let _ = tx.send(batch.into());
        }
    }

    /// Ends every watch: called when the store closes.
    pub(crate) fn close(&self) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).tx = None;
    }

    /// Subscribes, returning the last revision published before the subscription.
    fn subscribe(&self) -> StoreResult<(Revision, broadcast::Receiver<Arc<[Event]>>)> {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let tx = state.tx.as_ref().ok_or(StoreError::Closed)?;
        Ok((state.published, tx.subscribe()))
    }
}

/// A function applied to every event a watcher delivers (see [`Watcher::with_transform`]).
pub type EventTransform = Arc<dyn Fn(Event) -> StoreResult<Event> + Send + Sync>;

/// A stream of changes under a prefix. Dropping it ends the watch.
pub struct Watcher {
    rx: mpsc::Receiver<StoreResult<Vec<Event>>>,
    pending: std::vec::IntoIter<Event>,
    transform: Option<EventTransform>,
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watcher").field("pending", &self.pending.len()).finish_non_exhaustive()
    }
}

impl Watcher {
    /// A watch fed by a backend's own task through `rx` (the etcd backend's watches).
    pub(crate) fn from_channel(rx: mpsc::Receiver<StoreResult<Vec<Event>>>) -> Watcher {
        Watcher { rx, pending: Vec::new().into_iter(), transform: None }
    }

    /// The same watch with `transform` applied to every event it delivers, in the consumer's
    /// task (no extra hop): a store wrapper that changes values on the way out (decryption)
    /// uses it. A transform's error ends the watch like any other error.
    pub fn with_transform(mut self, transform: EventTransform) -> Watcher {
        self.transform = Some(match self.transform.take() {
            None => transform,
            Some(first) => Arc::new(move |event| transform(first(event)?)),
        });
        self
    }

    /// The next change, or `None` when the store has closed. An error ends the watch.
    pub async fn next(&mut self) -> Option<StoreResult<Event>> {
        loop {
            if let Some(event) = self.pending.next() {
                return Some(self.apply(event));
            }
            match self.rx.recv().await? {
                Ok(batch) => self.pending = batch.into_iter(),
                Err(e) => return Some(Err(e)),
            }
        }
    }

    /// Every change already delivered and not yet taken, plus the next batch if none is
    /// pending (waits for it). Returns an empty vector when the watch has ended.
    pub async fn next_batch(&mut self) -> StoreResult<Vec<Event>> {
        let pending: Vec<Event> = self.pending.by_ref().collect();
        let batch = if !pending.is_empty() {
            pending
        } else {
            match self.rx.recv().await {
                Some(batch) => batch?,
                None => return Ok(Vec::new()),
            }
        };
        match &self.transform {
            None => Ok(batch),
            Some(transform) => batch.into_iter().map(|event| transform(event)).collect(),
        }
    }

    fn apply(&self, event: Event) -> StoreResult<Event> {
        match &self.transform {
            None => Ok(event),
            Some(transform) => transform(event),
        }
    }
}

/// Starts a watch of `prefix` after revision `after`, reading history from `history`.
pub(crate) async fn start(
    hub: &Arc<Hub>,
    history: Arc<dyn History>,
    prefix: &str,
    after: Revision,
) -> StoreResult<Watcher> {
    let (published, live) = hub.subscribe()?;
    // Fail at once (and distinctly) when the start is already compacted.
    let first = read_history(&history, prefix, after, published.max(after)).await?;
    let (tx, rx) = mpsc::channel(CONSUMER_QUEUE);
    let task = WatchTask {
        hub: hub.clone(),
        history,
        prefix: prefix.to_string(),
        delivered: after,
        tx,
    };
    tokio::spawn(task.run(published, live, first));
    Ok(Watcher::from_channel(rx))
}

struct WatchTask {
    hub: Arc<Hub>,
    history: Arc<dyn History>,
    prefix: String,
    /// The revision of the last event handed to the consumer (or the watch start).
    delivered: Revision,
    tx: mpsc::Sender<StoreResult<Vec<Event>>>,
}

impl WatchTask {
    async fn run(
        mut self,
        mut published: Revision,
        mut live: broadcast::Receiver<Arc<[Event]>>,
        first: Vec<Event>,
    ) {
        let mut first = Some(first);
        loop {
            // Catch up from history to the revision the live subscription starts after.
            if let Err(e) = self.replay(published, first.take()).await {
                let _ = self.tx.send(Err(e)).await;
                return;
            }
            // Follow live commits until the consumer leaves or we fall behind.
            loop {
                let received = tokio::select! {
                    received = live.recv() => received,
                    () = self.tx.closed() => return,
                };
                match received {
                    Ok(batch) => {
                        let events: Vec<Event> = batch
                            .iter()
                            .filter(|e| e.revision() > self.delivered && e.key().starts_with(&self.prefix))
                            .cloned()
                            .collect();
                        if let Some(last) = batch.last() {
                            self.delivered = self.delivered.max(last.revision());
                        }
                        if !events.is_empty() && self.tx.send(Ok(events)).await.is_err() {
                            return;
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => break,
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
            // Fell behind: resubscribe and catch up from history again.
            match self.hub.subscribe() {
                Ok(subscription) => (published, live) = subscription,
                Err(_) => return,
            }
        }
    }

    /// Delivers history up to `up_to`, starting with an already-read first page if given.
    async fn replay(&mut self, up_to: Revision, mut page: Option<Vec<Event>>) -> StoreResult<()> {
        while self.delivered < up_to {
            let events = match page.take() {
                Some(events) => events,
                None => read_history(&self.history, &self.prefix, self.delivered, up_to).await?,
            };
            if events.len() < HISTORY_PAGE {
                // The read covered everything up to `up_to`.
                self.delivered = up_to;
            } else if let Some(last) = events.last() {
                self.delivered = last.revision();
            }
            if !events.is_empty() && self.tx.send(Ok(events)).await.is_err() {
                return Err(StoreError::Closed);
            }
        }
        Ok(())
    }
}

/// Reads one page of history on the blocking pool (backends may do disk I/O).
async fn read_history(
    history: &Arc<dyn History>,
    prefix: &str,
    after: Revision,
    up_to: Revision,
) -> StoreResult<Vec<Event>> {
    let history = history.clone();
    let prefix = prefix.to_string();
    tokio::task::spawn_blocking(move || history.events(&prefix, after, up_to, HISTORY_PAGE))
        .await
        .map_err(|e| StoreError::Backend(format!("history reader failed: {e}")))?
}
