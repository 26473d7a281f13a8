//! Where etcd may compact without losing a watch event.
//!
//! etcd before 3.4.33 and 3.5.15 (etcd-io/etcd#18089) drops a delete at exactly the
//! compaction revision from its history, and a watch that starts at that revision and has not
//! caught up yet is neither told `Compacted` nor sent the delete: it skips it. The Debian etcd
//! the project tests against is such a version. So the store never compacts onto a revision
//! holding a delete (anyone's: the keyspace is shared): it compacts to the newest revision at
//! or before the one asked for that holds none, keeping a little more history.

use std::collections::BTreeSet;

use etcd_client::{Client, EventType, WatchOptions};

use super::watch::{self, Probed};
use crate::StoreResult;

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
    // etcd sends every event of one revision in one response, in revision order.
    let options = WatchOptions::new().with_all_keys().with_start_revision(from);
    let mut deletes = BTreeSet::new();
    let scanned = watch::probe(client, vec![0u8], options, endpoints, |response| {
        if response.compact_revision() > 0 {
            // Compacted meanwhile (by another replica): nothing older is left to protect.
            return Probed::Answer(false);
        }
        let mut reached = false;
        for event in response.events() {
            let revision = event.kv().map(|kv| kv.mod_revision()).unwrap_or_default();
            reached |= revision >= target;
            if event.event_type() == EventType::Delete {
                deletes.insert(revision);
            }
        }
        if reached { Probed::Answer(true) } else { Probed::ReadOn }
    })
    .await?;
    Ok(scanned.then(|| (from..=target).rev().find(|revision| !deletes.contains(revision))).flatten())
}
