//! Events expire: kube-apiserver stores each Event with an etcd lease of `--event-ttl` (one
//! hour by default), renewed by every update, so Events vanish an hour after they last
//! happened. The store has no leases; this controller gives the same result by deleting, at a
//! fraction of the TTL, every Event whose last occurrence is older than the TTL. It follows the
//! watch cache like the other in-server controllers and keeps every Event's last occurrence in
//! an index by time, so a sweep touches only the Events that expired, never the others. A
//! deletion compares the revision the index was fed, so it loses to a concurrent update: an
//! Event that just happened again is kept (the update re-indexes it).

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use jiff::Timestamp;
use oxplane_store::{Revision, Write, WriteResult};
use serde_json::Value;

use super::runner::{Queue, Reconciler};
use crate::cache::{CacheEvent, EventType};
use crate::state::AppState;
use crate::status::ApiError;

/// Where core and `events.k8s.io` Events are stored (one storage for both).
const EVENTS: &str = "/registry/core/events/";

/// How often to sweep for a TTL: a tenth of it, between one second and one minute.
pub fn sweep_interval(ttl: Duration) -> Duration {
    (ttl / 10).clamp(Duration::from_secs(1), Duration::from_secs(60))
}

/// When an Event last happened: the latest of the times it carries (`lastTimestamp`,
/// `series.lastObservedTime`, `eventTime`, the deprecated ones), else its creation.
pub fn last_seen(event: &Value) -> Option<Timestamp> {
    let fields = [
        &event["lastTimestamp"],
        &event["series"]["lastObservedTime"],
        &event["eventTime"],
        &event["deprecatedLastTimestamp"],
        &event["firstTimestamp"],
        &event["metadata"]["creationTimestamp"],
    ];
    fields.iter().filter_map(|v| v.as_str()).filter_map(|t| t.parse::<Timestamp>().ok()).max()
}

/// The one work item: a sweep, queued again after each one.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Sweep;

/// The Events' last occurrences, by key and by time. An Event without any time is not indexed:
/// it never expires.
#[derive(Default)]
pub(crate) struct EventTtl {
    ttl: Duration,
    /// Each indexed Event's key → when it last happened and the revision that said so.
    events: HashMap<String, (Timestamp, Revision)>,
    /// The same, oldest first.
    by_time: BTreeSet<(Timestamp, String)>,
    /// Whether a sweep is queued.
    scheduled: bool,
}

impl EventTtl {
    /// A controller expiring Events `ttl` after they last happened.
    pub(crate) fn new(ttl: Duration) -> Self {
        EventTtl { ttl, ..EventTtl::default() }
    }

    fn forget(&mut self, key: &str) {
        if let Some((seen, _)) = self.events.remove(key) {
            self.by_time.remove(&(seen, key.to_string()));
        }
    }

    /// The Events last seen before `cutoff`, oldest first, with the revision to delete them at.
    fn expired(&self, cutoff: Timestamp) -> Vec<(String, Revision)> {
        self.by_time
            .iter()
            .take_while(|(seen, _)| *seen < cutoff)
            .filter_map(|(_, key)| self.events.get(key).map(|(_, revision)| (key.clone(), *revision)))
            .collect()
    }

    /// How many Events are indexed.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.events.len()
    }
}

impl Reconciler for EventTtl {
    type Item = Sweep;

    fn name(&self) -> &'static str {
        "event-ttl"
    }

    fn reset(&mut self) {
        *self = EventTtl::new(self.ttl);
    }

    fn observe(&mut self, event: &CacheEvent, queue: &mut Queue<Sweep>) {
        if !self.scheduled {
            queue.add_after(Sweep, sweep_interval(self.ttl));
            self.scheduled = true;
        }
        if !event.key.starts_with(EVENTS) {
            return;
        }
        self.forget(&event.key);
        if event.kind == EventType::Deleted {
            return;
        }
        if let Some(seen) = last_seen(&event.object) {
            self.events.insert(event.key.clone(), (seen, event.revision));
            self.by_time.insert((seen, event.key.clone()));
        }
    }

    async fn reconcile(&mut self, state: &AppState, _: Sweep, queue: &mut Queue<Sweep>) -> Result<(), ApiError> {
        queue.add_after(Sweep, sweep_interval(self.ttl));
        let now = Timestamp::now();
        let Some(cutoff) = jiff::SignedDuration::try_from(self.ttl).ok().and_then(|ttl| now.checked_sub(ttl).ok()) else { return Ok(()) };
        let mut deleted = 0;
        for (key, revision) in self.expired(cutoff) {
            let write = Write::Delete { key: key.clone(), expected: revision };
            match state.store.write(write).await {
                Ok(WriteResult::Committed(_)) => {
                    self.forget(&key);
                    deleted += 1;
                }
                // Updated (its event re-indexes it) or already gone (its event forgets it).
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(%error, "sweeping expired events failed; retrying at the next interval");
                    break;
                }
            }
        }
        if deleted > 0 {
            tracing::debug!(deleted, "expired events deleted");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_event_was_last_seen_at_its_latest_time() {
        let event = json!({"metadata": {"creationTimestamp": "2024-01-01T00:00:00Z"},
            "firstTimestamp": "2024-01-01T00:00:00Z", "lastTimestamp": "2024-01-01T02:00:00Z",
            "series": {"lastObservedTime": "2024-01-01T03:00:00.123456Z"}});
        assert_eq!(last_seen(&event), "2024-01-01T03:00:00.123456Z".parse().ok());
        assert_eq!(last_seen(&json!({"metadata": {"creationTimestamp": "2024-01-01T00:00:00Z"}})), "2024-01-01T00:00:00Z".parse().ok());
        assert_eq!(last_seen(&json!({"metadata": {}})), None);
    }

    fn event(key: &str, kind: EventType, revision: Revision, last: &str) -> CacheEvent {
        let object = json!({"metadata": {"name": key, "creationTimestamp": "2024-01-01T00:00:00Z"}, "lastTimestamp": last});
        CacheEvent::new(revision, format!("{EVENTS}default/{key}"), kind, std::sync::Arc::new(object), None)
    }

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    #[test]
    fn a_sweep_finds_only_the_events_that_expired() {
        let mut ttl = EventTtl::new(Duration::from_secs(3600));
        let mut queue = Queue::default();
        ttl.observe(&event("old", EventType::Added, 10, "2024-01-01T01:00:00Z"), &mut queue);
        ttl.observe(&event("again", EventType::Added, 11, "2024-01-01T01:30:00Z"), &mut queue);
        ttl.observe(&event("new", EventType::Added, 12, "2024-01-01T05:00:00Z"), &mut queue);
        ttl.observe(&event("gone", EventType::Added, 13, "2024-01-01T00:30:00Z"), &mut queue);
        // Another kind's object is not an Event, whatever its fields.
        let other = json!({"metadata": {"name": "x"}, "lastTimestamp": "2000-01-01T00:00:00Z"});
        ttl.observe(&CacheEvent::new(14, "/registry/core/configmaps/default/x".into(), EventType::Added, std::sync::Arc::new(other), None), &mut queue);
        // Happening again moves an Event on; a deleted one is forgotten.
        ttl.observe(&event("again", EventType::Modified, 15, "2024-01-01T04:00:00Z"), &mut queue);
        ttl.observe(&event("gone", EventType::Deleted, 16, "2024-01-01T00:30:00Z"), &mut queue);
        assert_eq!(ttl.len(), 3);

        assert_eq!(ttl.expired(at("2024-01-01T01:00:00Z")), []);
        assert_eq!(ttl.expired(at("2024-01-01T02:00:00Z")), [(format!("{EVENTS}default/old"), 10)]);
        assert_eq!(ttl.expired(at("2024-01-01T04:30:00Z")), [(format!("{EVENTS}default/old"), 10), (format!("{EVENTS}default/again"), 15)]);
        ttl.forget(&format!("{EVENTS}default/old"));
        assert_eq!(ttl.expired(at("2024-01-01T04:30:00Z")), [(format!("{EVENTS}default/again"), 15)]);

        // An Event carrying no time at all never expires.
        let timeless = CacheEvent::new(17, format!("{EVENTS}default/timeless"), EventType::Added, std::sync::Arc::new(json!({"metadata": {}})), None);
        ttl.observe(&timeless, &mut queue);
        assert_eq!(ttl.expired(at("2100-01-01T00:00:00Z")).len(), 2);
    }

    #[test]
    fn sweeps_run_at_a_tenth_of_the_ttl_within_bounds() {
        assert_eq!(sweep_interval(Duration::from_secs(3600)), Duration::from_secs(60));
        assert_eq!(sweep_interval(Duration::from_secs(100)), Duration::from_secs(10));
        assert_eq!(sweep_interval(Duration::from_secs(2)), Duration::from_secs(1));
    }
}
