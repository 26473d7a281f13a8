//! The loop every in-server controller runs: list everything from the watch cache, then follow
//! its live events; a controller turns events into work items and reconciles them one at a
//! time. Failed items come back after a growing delay. When the cache resets or the controller
//! falls behind the live stream, it starts over from a fresh listing, which rebuilds its state.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast;
use tokio::time::Instant;

use crate::cache::{CacheEvent, Live};
use crate::state::AppState;
use crate::status::ApiError;

/// Every stored object lives under this prefix.
const ROOT: &str = "/registry/";
/// The first retry delay of a failed item; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// The longest retry delay.
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// Work items waiting, deduplicated, with delayed retries.
pub struct Queue<T> {
    ready: VecDeque<T>,
    queued: HashSet<T>,
    later: BTreeMap<Instant, Vec<T>>,
    failures: std::collections::HashMap<T, u32>,
}

impl<T: Clone + Eq + Hash> Default for Queue<T> {
    fn default() -> Self {
        Queue { ready: VecDeque::new(), queued: HashSet::new(), later: BTreeMap::new(), failures: Default::default() }
    }
}

impl<T: Clone + Eq + Hash> Queue<T> {
    /// Queues `item` unless it is already waiting.
    pub fn add(&mut self, item: T) {
        if self.queued.insert(item.clone()) {
            self.ready.push_back(item);
        }
    }

    /// Queues `item` again after `delay`.
    pub fn add_after(&mut self, item: T, delay: Duration) {
        self.later.entry(Instant::now() + delay).or_default().push(item);
    }

    fn pop(&mut self) -> Option<T> {
        let item = self.ready.pop_front()?;
        self.queued.remove(&item);
        Some(item)
    }

    fn promote_due(&mut self) {
        let now = Instant::now();
        let due: Vec<Instant> = self.later.range(..=now).map(|(at, _)| *at).collect();
        for at in due {
            for item in self.later.remove(&at).unwrap_or_default() {
                self.add(item);
            }
        }
    }

    fn failed(&mut self, item: T) {
        let count = self.failures.entry(item.clone()).or_insert(0);
        *count = count.saturating_add(1);
        let delay = FIRST_BACKOFF.saturating_mul(1u32 << (*count).min(7)).min(MAX_BACKOFF);
        self.add_after(item, delay);
    }

    fn succeeded(&mut self, item: &T) {
        self.failures.remove(item);
    }

    fn clear(&mut self) {
        *self = Queue { ready: VecDeque::new(), queued: HashSet::new(), later: BTreeMap::new(), failures: Default::default() };
    }
}

/// One in-server controller.
pub trait Reconciler: Send + 'static {
    /// What the queue holds.
    type Item: Clone + Eq + Hash + Send + std::fmt::Debug;

    /// A name for logs.
    fn name(&self) -> &'static str;

    /// Forgets everything: a full listing follows.
    fn reset(&mut self);

    /// Takes in one change and queues the work it causes.
    fn observe(&mut self, event: &CacheEvent, queue: &mut Queue<Self::Item>);

    /// Does the work of one item; an error brings it back later.
    fn reconcile(&mut self, state: &AppState, item: Self::Item, queue: &mut Queue<Self::Item>) -> impl Future<Output = Result<(), ApiError>> + Send;
}

/// Whether the feed must start over.
enum Feed {
    Going,
    Restart,
    Closed,
}

/// Applies every live event already waiting, so decisions see the newest state.
fn drain<R: Reconciler>(live: &mut broadcast::Receiver<Live>, reconciler: &mut R, queue: &mut Queue<R::Item>) -> Feed {
    loop {
        match live.try_recv() {
            Ok(Live::Event(event)) => reconciler.observe(&event, queue),
            Ok(Live::Reset) | Err(broadcast::error::TryRecvError::Lagged(_)) => return Feed::Restart,
            Err(broadcast::error::TryRecvError::Empty) => return Feed::Going,
            Err(broadcast::error::TryRecvError::Closed) => return Feed::Closed,
        }
    }
}

/// Runs `reconciler` until the cache closes.
pub async fn run<R: Reconciler>(state: Arc<AppState>, mut reconciler: R) {
    let mut queue = Queue::<R::Item>::default();
    loop {
        let watch = match state.cache.watch(ROOT, None) {
            Ok(watch) => watch,
            Err(error) => {
                tracing::warn!(controller = reconciler.name(), %error, "cannot follow the cache; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        reconciler.reset();
        queue.clear();
        for event in &watch.initial {
            reconciler.observe(event, &mut queue);
        }
        let mut live = watch.live;
        let mut tick = tokio::time::interval(Duration::from_millis(200));
        let feed = 'feed: loop {
            queue.promote_due();
            while let Some(item) = queue.pop() {
                // Decide on the newest state: the cache holds every acknowledged write, and
                // every event up to it is applied.
                if let Err(error) = state.cache.sync().await {
                    tracing::debug!(controller = reconciler.name(), %error, "cache not in sync");
                }
                match drain(&mut live, &mut reconciler, &mut queue) {
                    Feed::Going => {}
                    feed => break 'feed feed,
                }
                match reconciler.reconcile(&state, item.clone(), &mut queue).await {
                    Ok(()) => queue.succeeded(&item),
                    Err(error) => {
                        tracing::debug!(controller = reconciler.name(), ?item, %error, "will retry");
                        queue.failed(item);
                    }
                }
            }
            tokio::select! {
                received = live.recv() => match received {
                    Ok(Live::Event(event)) => reconciler.observe(&event, &mut queue),
                    Ok(Live::Reset) | Err(broadcast::error::RecvError::Lagged(_)) => break Feed::Restart,
                    Err(broadcast::error::RecvError::Closed) => break Feed::Closed,
                },
                _ = tick.tick() => {}
            }
        };
        if let Feed::Closed = feed {
            return;
        }
        tracing::info!(controller = reconciler.name(), "restarting from a fresh listing");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queues_deduplicate_and_back_off() {
        let mut queue = Queue::<u32>::default();
        queue.add(1);
        queue.add(1);
        queue.add(2);
        assert_eq!(queue.pop(), Some(1));
        assert_eq!(queue.pop(), Some(2));
        assert_eq!(queue.pop(), None);
        queue.failed(3);
        queue.promote_due();
        assert_eq!(queue.pop(), None, "a failed item waits before it comes back");
        queue.add_after(4, Duration::ZERO);
        queue.promote_due();
        assert_eq!(queue.pop(), Some(4));
    }
}
