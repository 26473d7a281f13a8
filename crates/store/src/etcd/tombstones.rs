//! Where etcd may compact without losing a watch event.
//!
//! etcd before 3.4.33 and 3.5.15 (etcd-io/etcd#18089) drops a delete at exactly the
//! compaction revision from its history, and a watch that starts at that revision and has not
//! caught up yet is neither told `Compacted` nor sent the delete: it skips it. The Debian etcd
//! the project tests against is such a version. So the store never compacts onto a revision
//! holding a delete (anyone's: the keyspace is shared): it compacts to the newest revision at
//! or before the one asked for that holds none, keeping a little more history.

use std::collections::BTreeSet;
use std::time::Duration;

use etcd_client::{Client, EventType, WatchOptions};

use crate::{StoreError, StoreResult};

/// How far back from the revision asked for a revision without a delete is looked for; when
/// every one of them holds a delete, compaction waits for a later call.
const LOOKBACK: i64 = 256;

/// The newest etcd revision in `lowest..=target` that holds no delete, if any.
pub(crate) async fn newest_without_delete(
    client: &Client,
    lowest: i64,
    target: i64,
    endpoints: &str,
) -> StoreResult<Option<i64>> {
    let from = lowest.max(target - LOOKBACK + 1);
    if from > target {
        return Ok(None);
    }
    let unavailable = |cause: String| StoreError::Unavailable { endpoints: endpoints.to_string(), cause };
    let deletes = async {
        // etcd sends every event of one revision in one response, in revision order.
        let options = WatchOptions::new().with_all_keys().with_start_revision(from);
        let mut stream = client
            .watch_client()
            .watch(vec![0u8], Some(options))
            .await
            .map_err(|e| unavailable(e.to_string()))?;
        let mut deletes = BTreeSet::new();
        loop {
            let response = match stream.message().await {
                Ok(Some(response)) => response,
                Ok(None) => return Err(unavailable("the watch stream ended".into())),
                Err(e) => return Err(unavailable(e.to_string())),
            };
            if response.compact_revision() > 0 {
                // Compacted meanwhile (by another replica): nothing older is left to protect.
                return Ok(None);
            }
            if response.canceled() {
                return Err(unavailable(format!("etcd canceled a watch: {}", response.cancel_reason())));
            }
            let mut reached = false;
            for event in response.events() {
                let revision = event.kv().map(|kv| kv.mod_revision()).unwrap_or_default();
                reached |= revision >= target;
                if event.event_type() == EventType::Delete {
                    deletes.insert(revision);
                }
            }
            if reached {
                return Ok(Some(deletes));
            }
        }
    };
    let deletes = tokio::time::timeout(Duration::from_secs(10), deletes)
        .await
        .map_err(|_| unavailable("no answer to a watch within 10 s".into()))??;
    Ok(deletes.and_then(|deletes| (from..=target).rev().find(|revision| !deletes.contains(revision))))
}
