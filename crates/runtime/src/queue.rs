//! The work queue behind every controller: keys, not events, are queued, so a burst of changes
//! to one object is one reconcile. A key is never handed to two workers at once: a key added
//! while it is being reconciled is marked dirty and handed out again when that reconcile ends.
//! Failures back off per key (exponential, with jitter) so one broken object never slows the
//! others, and there is no global rate cap.
//!
//! Written by hand because the queue must be shared by watches of many kinds that start and
//! stop at runtime, which kube-runtime's controller does not allow.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;

use rand::Rng;
use tokio::sync::Notify;
use tokio::time::Instant;

/// Per-key exponential backoff of failed reconciles.
#[derive(Clone, Copy, Debug)]
pub struct Backoff {
    /// The delay after the first failure.
    pub base: Duration,
    /// The longest delay.
    pub max: Duration,
}

impl Backoff {
    /// The delay after `failures` consecutive failures (1 for the first), with ±10% jitter.
    pub fn delay(&self, failures: u32) -> Duration {
        let exponent = failures.saturating_sub(1).min(30);
        let raw = self.base.saturating_mul(1u32 << exponent.min(31)).min(self.max);
        jitter(raw)
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff { base: Duration::from_secs(1), max: Duration::from_secs(60) }
    }
}

/// `duration` ±10%, so requeues of many objects spread out.
pub fn jitter(duration: Duration) -> Duration {
    let factor = rand::rng().random_range(0.9..=1.1);
    duration.mul_f64(factor)
}

struct Inner<K> {
    ready: VecDeque<K>,
    queued: HashSet<K>,
    processing: HashSet<K>,
    dirty: HashSet<K>,
    delayed: BTreeMap<(Instant, u64), K>,
    delayed_at: HashMap<K, (Instant, u64)>,
    failures: HashMap<K, u32>,
    /// When each ready key became ready (for the queue-wait metric).
    ready_since: HashMap<K, Instant>,
    sequence: u64,
    shut_down: bool,
}

/// A deduplicating, delaying work queue of keys.
pub struct WorkQueue<K> {
    inner: Mutex<Inner<K>>,
    notify: Notify,
    backoff: Backoff,
}

impl<K: Clone + Eq + Hash + Ord> WorkQueue<K> {
    /// An empty queue whose failed keys back off with `backoff`.
    pub fn new(backoff: Backoff) -> Self {
        WorkQueue {
            inner: Mutex::new(Inner {
                ready: VecDeque::new(),
                queued: HashSet::new(),
                processing: HashSet::new(),
                dirty: HashSet::new(),
                delayed: BTreeMap::new(),
                delayed_at: HashMap::new(),
                failures: HashMap::new(),
                ready_since: HashMap::new(),
                sequence: 0,
                shut_down: false,
            }),
            notify: Notify::new(),
            backoff,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<K>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues a key now (once, however often it is added before a worker takes it).
    pub fn add(&self, key: K) {
        let mut inner = self.lock();
        if Self::enqueue(&mut inner, key) {
            drop(inner);
            self.notify.notify_one();
        }
    }

    fn enqueue(inner: &mut Inner<K>, key: K) -> bool {
        if inner.shut_down {
            return false;
        }
        if let Some(at) = inner.delayed_at.remove(&key) {
            inner.delayed.remove(&at);
        }
        if inner.processing.contains(&key) {
            inner.dirty.insert(key);
            return false;
        }
        if !inner.queued.insert(key.clone()) {
            return false;
        }
        inner.ready_since.insert(key.clone(), Instant::now());
        inner.ready.push_back(key);
        true
    }

    /// Queues a key after `delay`, unless it is due sooner already.
    pub fn add_after(&self, key: K, delay: Duration) {
        if delay.is_zero() {
            return self.add(key);
        }
        let mut inner = self.lock();
        if inner.shut_down || inner.queued.contains(&key) {
            return;
        }
        let at = Instant::now() + delay;
        if let Some(existing) = inner.delayed_at.get(&key) {
            if existing.0 <= at {
                return;
            }
            let existing = *existing;
            inner.delayed.remove(&existing);
        }
        inner.sequence += 1;
        let slot = (at, inner.sequence);
        inner.delayed.insert(slot, key.clone());
        inner.delayed_at.insert(key, slot);
        drop(inner);
        // Wake a sleeping worker so it re-arms its timer for the earlier deadline.
        self.notify.notify_one();
    }

    /// Queues a key after its backoff delay, counting one more failure.
    pub fn add_rate_limited(&self, key: K) {
        let failures = {
            let mut inner = self.lock();
            let count = inner.failures.entry(key.clone()).or_insert(0);
            *count = count.saturating_add(1);
            *count
        };
        self.add_after(key, self.backoff.delay(failures));
    }

    /// Forgets a key's failures (after a successful reconcile).
    pub fn forget(&self, key: &K) {
        self.lock().failures.remove(key);
    }

    /// Consecutive failures of a key so far.
    pub fn failures(&self, key: &K) -> u32 {
        self.lock().failures.get(key).copied().unwrap_or(0)
    }

    /// The next key to reconcile, waiting for one; `None` once the queue is shut down. The
    /// caller must call [`WorkQueue::done`] with it when finished.
    pub async fn next(&self) -> Option<K> {
        self.next_timed().await.map(|(key, _)| key)
    }

    /// Like [`WorkQueue::next`], with how long the key waited ready in the queue.
    pub async fn next_timed(&self) -> Option<(K, Duration)> {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let deadline = {
                let mut inner = self.lock();
                if inner.shut_down {
                    return None;
                }
                let now = Instant::now();
                while let Some((&slot, _)) = inner.delayed.first_key_value() {
                    if slot.0 > now {
                        break;
                    }
                    if let Some(key) = inner.delayed.remove(&slot) {
                        inner.delayed_at.remove(&key);
                        Self::enqueue(&mut inner, key);
                    }
                }
                if let Some(key) = inner.ready.pop_front() {
                    inner.queued.remove(&key);
                    inner.processing.insert(key.clone());
                    let waited = inner.ready_since.remove(&key).map_or(Duration::ZERO, |since| now.saturating_duration_since(since));
                    let more = !inner.ready.is_empty();
                    drop(inner);
                    if more {
                        self.notify.notify_one();
                    }
                    return Some((key, waited));
                }
                inner.delayed.first_key_value().map(|(slot, _)| slot.0)
            };
            match deadline {
                Some(at) => {
                    tokio::select! {
                        () = &mut notified => {}
                        () = tokio::time::sleep_until(at) => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    /// Marks a key's reconcile finished; a key added meanwhile is queued again.
    pub fn done(&self, key: &K) {
        let mut inner = self.lock();
        inner.processing.remove(key);
        if inner.dirty.remove(key) && Self::enqueue(&mut inner, key.clone()) {
            drop(inner);
            self.notify.notify_one();
        }
    }

    /// Whether adding `key` now would change nothing: it is queued, or already due again once
    /// its running reconcile ends.
    pub fn is_pending(&self, key: &K) -> bool {
        let inner = self.lock();
        inner.queued.contains(key) || inner.dirty.contains(key)
    }

    /// Keys waiting now (not counting delayed ones or those being reconciled).
    pub fn depth(&self) -> usize {
        self.lock().ready.len()
    }

    /// Keys waiting for a delay.
    pub fn delayed(&self) -> usize {
        self.lock().delayed.len()
    }

    /// Stops handing out keys: every waiting [`WorkQueue::next`] returns `None`.
    pub fn shut_down(&self) {
        self.lock().shut_down = true;
        self.notify.notify_waiters();
    }

    /// Whether the queue was shut down.
    pub fn is_shut_down(&self) -> bool {
        self.lock().shut_down
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use std::sync::Arc;

    fn queue() -> Arc<WorkQueue<String>> {
        Arc::new(WorkQueue::new(Backoff { base: Duration::from_millis(10), max: Duration::from_millis(80) }))
    }

    #[tokio::test]
    async fn keys_are_deduplicated_until_taken() {
        let q = queue();
        q.add("a".into());
        q.add("a".into());
        q.add("b".into());
        assert_eq!(q.depth(), 2);
        assert_eq!(q.next().await.unwrap(), "a");
        assert_eq!(q.next().await.unwrap(), "b");
        assert_eq!(q.depth(), 0);
    }

    #[tokio::test]
    async fn a_key_added_while_processing_comes_back_after_done_never_twice_at_once() {
        let q = queue();
        q.add("a".into());
        let a = q.next().await.unwrap();
        q.add("a".into());
        q.add("a".into());
        assert_eq!(q.depth(), 0, "not handed to a second worker while the first holds it");
        q.done(&a);
        assert_eq!(q.depth(), 1);
        assert_eq!(q.next().await.unwrap(), "a");
    }

    #[tokio::test]
    async fn a_key_is_pending_while_queued_or_due_again_but_not_while_merely_running() {
        let q = queue();
        assert!(!q.is_pending(&"a".to_string()));
        q.add("a".into());
        assert!(q.is_pending(&"a".to_string()));
        let a = q.next().await.unwrap();
        assert!(!q.is_pending(&a), "running, with nothing new: another add would cost a reconcile");
        q.add("a".into());
        assert!(q.is_pending(&a), "due again once the running reconcile ends");
        q.done(&a);
        assert!(q.is_pending(&a));
        let a = q.next().await.unwrap();
        q.done(&a);
        assert!(!q.is_pending(&a));
        q.add_after("a".into(), Duration::from_secs(60));
        assert!(!q.is_pending(&a), "a delayed key is not waiting now");
    }

    #[tokio::test]
    async fn delayed_keys_come_due_and_the_earliest_deadline_wins() {
        let q = queue();
        let start = Instant::now();
        q.add_after("late".into(), Duration::from_millis(300));
        q.add_after("late".into(), Duration::from_millis(30));
        q.add_after("late".into(), Duration::from_millis(500));
        assert_eq!(q.next().await.unwrap(), "late");
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(25) && took < Duration::from_millis(250), "{took:?}");
        assert_eq!(q.delayed(), 0);
    }

    #[tokio::test]
    async fn an_immediate_add_overrides_a_pending_delay() {
        let q = queue();
        q.add_after("k".into(), Duration::from_secs(60));
        q.add("k".into());
        assert_eq!(tokio::time::timeout(Duration::from_secs(1), q.next()).await.unwrap().unwrap(), "k");
        assert_eq!(q.delayed(), 0);
    }

    #[tokio::test]
    async fn failures_back_off_per_key_and_forget_resets() {
        let q = queue();
        q.add_rate_limited("x".into());
        q.add_rate_limited("x".into());
        assert_eq!(q.failures(&"x".to_string()), 2);
        q.forget(&"x".to_string());
        assert_eq!(q.failures(&"x".to_string()), 0);
        let b = Backoff { base: Duration::from_secs(1), max: Duration::from_secs(30) };
        for (n, expected) in [(1, 1.0), (2, 2.0), (3, 4.0), (6, 30.0), (40, 30.0)] {
            let d = b.delay(n).as_secs_f64();
            assert!(d >= expected * 0.89 && d <= expected * 1.11, "failure {n}: {d}");
        }
    }

    #[tokio::test]
    async fn shut_down_releases_waiting_workers() {
        let q = queue();
        let waiter = tokio::spawn({
            let q = q.clone();
            async move { q.next().await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        q.shut_down();
        assert_eq!(tokio::time::timeout(Duration::from_secs(1), waiter).await.unwrap().unwrap(), None);
        q.add("ignored".into());
        assert_eq!(q.depth(), 0);
    }

    #[tokio::test]
    async fn many_workers_never_hold_one_key_together() {
        let q = queue();
        let holding = Arc::new(Mutex::new(HashSet::<String>::new()));
        let processed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut workers = Vec::new();
        for _ in 0..8 {
            let (q, holding, processed) = (q.clone(), holding.clone(), processed.clone());
            workers.push(tokio::spawn(async move {
                while let Some(key) = q.next().await {
                    assert!(holding.lock().unwrap().insert(key.clone()), "{key} held twice");
                    tokio::task::yield_now().await;
                    holding.lock().unwrap().remove(&key);
                    processed.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    q.done(&key);
                }
            }));
        }
        for round in 0..200 {
            q.add(format!("k{}", round % 5));
            if round % 7 == 0 {
                tokio::task::yield_now().await;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        q.shut_down();
        for w in workers {
            w.await.unwrap();
        }
        assert!(processed.load(std::sync::atomic::Ordering::SeqCst) >= 5);
    }
}
