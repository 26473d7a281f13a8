//! Events expire: kube-apiserver stores each Event with an etcd lease of `--event-ttl` (one
//! hour by default), renewed by every update, so Events vanish an hour after they last
//! happened. The store has no leases; this sweeper gives the same result by deleting, at a
//! fraction of the TTL, every Event whose last occurrence is older than the TTL. A deletion
//! loses to a concurrent update (compare-and-swap on the revision read), so an Event that just
//! happened again is kept.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use oxplane_store::{RangeRequest, Write};
use serde_json::Value;

use crate::objects;
use crate::state::AppState;

/// Where core and `events.k8s.io` Events are stored (one storage for both).
const EVENTS: &str = "/registry/core/events/";
/// Events read per store range.
const PAGE: usize = 500;

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

/// Deletes every Event last seen more than `ttl` before `now`; returns how many went.
pub async fn sweep(state: &AppState, ttl: Duration, now: Timestamp) -> Result<usize, oxplane_store::StoreError> {
    let cutoff = jiff::SignedDuration::try_from(ttl).ok().and_then(|ttl| now.checked_sub(ttl).ok());
    let Some(cutoff) = cutoff else { return Ok(0) };
    let mut deleted = 0;
    let mut continue_token = None;
    loop {
        let page = state
            .store
            .range(RangeRequest { prefix: EVENTS.to_string(), limit: PAGE, continue_token: continue_token.take(), revision: None })
            .await?;
        for kv in &page.kvs {
            let Ok(event) = objects::from_store(kv) else { continue };
            if last_seen(&event).is_some_and(|seen| seen < cutoff) {
                let write = Write::Delete { key: kv.key.clone(), expected: kv.mod_revision };
                if let oxplane_store::WriteResult::Committed(_) = state.store.write(write).await? {
                    deleted += 1;
                }
            }
        }
        match page.continue_token {
            Some(token) => continue_token = Some(token),
            None => return Ok(deleted),
        }
    }
}

/// Sweeps expired Events every [`sweep_interval`] until the task is aborted.
pub async fn run(state: Arc<AppState>) {
    let ttl = state.event_ttl;
    let mut ticker = tokio::time::interval(sweep_interval(ttl));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        match sweep(&state, ttl, Timestamp::now()).await {
            Ok(0) => {}
            Ok(deleted) => tracing::debug!(deleted, "expired events deleted"),
            Err(error) => tracing::warn!(%error, "sweeping expired events failed; retrying at the next interval"),
        }
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

    #[test]
    fn sweeps_run_at_a_tenth_of_the_ttl_within_bounds() {
        assert_eq!(sweep_interval(Duration::from_secs(3600)), Duration::from_secs(60));
        assert_eq!(sweep_interval(Duration::from_secs(100)), Duration::from_secs(10));
        assert_eq!(sweep_interval(Duration::from_secs(2)), Duration::from_secs(1));
    }
}
