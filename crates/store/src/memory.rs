//! An in-memory backend with the full semantics of the store, for unit tests of the layers
//! above. Nothing survives the process.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use async_trait::async_trait;
use bytes::Bytes;

use crate::compaction::RevisionClock;
use crate::watch::{self, History, Hub};
use crate::{
    CompactionPolicy, Event, GetResponse, KeyValue, RangeRequest, RangeResponse, Revision, Store,
    StoreError, StoreResult, Watcher, Write, WriteResult, continuation,
};

/// The in-memory store. Cloning shares the same data.
#[derive(Clone)]
pub struct MemoryStore {
    inner: Arc<Inner>,
    hub: Arc<Hub>,
}

struct Inner {
    state: Mutex<State>,
}

/// One version of a key in the log.
struct Row {
    key: String,
    /// `None` marks a deletion.
    value: Option<Bytes>,
    create_revision: Revision,
    prev_revision: Revision,
}

struct State {
    log: BTreeMap<Revision, Row>,
    /// Every retained revision of each key, oldest first.
    versions: BTreeMap<String, Vec<Revision>>,
    current: Revision,
    compacted: Revision,
    clock: RevisionClock,
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore::new(CompactionPolicy::disabled())
    }
}

impl MemoryStore {
    /// An empty store with the given automatic compaction policy.
    pub fn new(policy: CompactionPolicy) -> Self {
        let state = State {
            log: BTreeMap::new(),
            versions: BTreeMap::new(),
            current: 0,
            compacted: 0,
            clock: RevisionClock::new(policy, Instant::now(), 0),
        };
        MemoryStore { inner: Arc::new(Inner { state: Mutex::new(state) }), hub: Arc::new(Hub::new(0)) }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.inner.state()
    }
}

impl Inner {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl State {
    fn kv_at(&self, revision: Revision) -> Option<KeyValue> {
        let row = self.log.get(&revision)?;
        Some(KeyValue {
            key: row.key.clone(),
            value: row.value.clone()?,
            create_revision: row.create_revision,
            mod_revision: revision,
        })
    }

    /// The key's value as of `revision`.
    fn value_at(&self, key: &str, revision: Revision) -> Option<KeyValue> {
        let versions = self.versions.get(key)?;
        let idx = versions.partition_point(|&r| r <= revision);
        self.kv_at(*versions.get(idx.checked_sub(1)?)?)
    }

    fn append(&mut self, key: &str, value: Option<Bytes>, create: Revision, prev: Revision) -> Revision {
        self.current += 1;
        let revision = self.current;
        let create_revision = if create == 0 { revision } else { create };
        self.log.insert(revision, Row { key: key.to_string(), value, create_revision, prev_revision: prev });
        self.versions.entry(key.to_string()).or_default().push(revision);
        revision
    }

    fn apply(&mut self, write: Write) -> WriteResult {
        let current = self.value_at(write.key(), self.current);
        match write {
            Write::Create { key, value } => {
                if current.is_some() {
                    return WriteResult::Rejected { current };
                }
                let revision = self.append(&key, Some(value), 0, 0);
                let kv = self.kv_at(revision);
                WriteResult::Committed(Event::Put { kv: kv.unwrap_or_else(|| unreachable_kv(&key)), prev: None })
            }
            Write::Update { key, value, expected } => match current {
                Some(prev) if prev.mod_revision == expected => {
                    let revision = self.append(&key, Some(value), prev.create_revision, prev.mod_revision);
                    let kv = self.kv_at(revision).unwrap_or_else(|| unreachable_kv(&key));
                    WriteResult::Committed(Event::Put { kv, prev: Some(prev) })
                }
                current => WriteResult::Rejected { current },
            },
            Write::Delete { key, expected } => match current {
                Some(prev) if prev.mod_revision == expected => {
                    let revision = self.append(&key, None, prev.create_revision, prev.mod_revision);
                    WriteResult::Committed(Event::Delete { revision, prev })
                }
                current => WriteResult::Rejected { current },
            },
        }
    }

    fn compact(&mut self, target: Revision) -> StoreResult<()> {
        if target <= self.compacted {
            return Ok(());
        }
        if target > self.current {
            return Err(StoreError::FutureRevision { requested: target, current: self.current });
        }
        let mut freed = Vec::new();
        self.versions.retain(|_, versions| {
            // Keep the newest version at or before the target (the value at `target`) and all
            // later ones; drop that one too if it is a deletion.
            let keep_from = versions.partition_point(|&r| r <= target).saturating_sub(1);
            freed.extend(versions.drain(..keep_from));
            !versions.is_empty()
        });
        for revision in freed {
            self.log.remove(&revision);
        }
        let tombstones: Vec<Revision> = self
            .versions
            .values()
            .filter_map(|v| v.first().copied())
            .filter(|r| *r <= target && self.log.get(r).is_some_and(|row| row.value.is_none()))
            .collect();
        for revision in tombstones {
            if let Some(row) = self.log.remove(&revision)
                && let Some(versions) = self.versions.get_mut(&row.key)
            {
                versions.retain(|r| *r != revision);
                if versions.is_empty() {
                    self.versions.remove(&row.key);
                }
            }
        }
        self.compacted = target;
        Ok(())
    }

    fn check_readable(&self, revision: Revision) -> StoreResult<()> {
        if revision < self.compacted {
            return Err(StoreError::Compacted { requested: revision, compacted: self.compacted });
        }
        if revision > self.current {
            return Err(StoreError::FutureRevision { requested: revision, current: self.current });
        }
        Ok(())
    }
}

/// The key was just appended, so it is present; this only satisfies the type checker.
fn unreachable_kv(key: &str) -> KeyValue {
    KeyValue { key: key.to_string(), value: Bytes::new(), create_revision: 0, mod_revision: 0 }
}

impl History for Inner {
    fn events(&self, prefix: &str, after: Revision, up_to: Revision, limit: usize) -> StoreResult<Vec<Event>> {
        let state = self.state();
        if after < state.compacted {
            return Err(StoreError::Compacted { requested: after, compacted: state.compacted });
        }
        let mut events = Vec::new();
        if up_to <= after {
            return Ok(events);
        }
        for (&revision, row) in state.log.range(after + 1..=up_to) {
            if !row.key.starts_with(prefix) {
                continue;
            }
            let prev = (row.prev_revision != 0).then(|| state.kv_at(row.prev_revision)).flatten();
            let event = match (&row.value, prev) {
                (Some(value), prev) => Event::Put {
                    kv: KeyValue {
                        key: row.key.clone(),
                        value: value.clone(),
                        create_revision: row.create_revision,
                        mod_revision: revision,
                    },
                    prev,
                },
                (None, Some(prev)) => Event::Delete { revision, prev },
                (None, None) => {
                    return Err(StoreError::Backend(format!("deletion at {revision} lost its previous value")));
                }
            };
            events.push(event);
            if events.len() >= limit {
                break;
            }
        }
        Ok(events)
    }
}

#[async_trait]
impl Store for MemoryStore {
    async fn get(&self, key: &str) -> StoreResult<GetResponse> {
        let state = self.state();
        Ok(GetResponse { kv: state.value_at(key, state.current), revision: state.current })
    }

    async fn range(&self, request: RangeRequest) -> StoreResult<RangeResponse> {
        let state = self.state();
        let (revision, after) = match &request.continue_token {
            Some(token) => {
                let c = continuation::decode(token, &request.prefix)?;
                (c.revision, Some(c.last_key))
            }
            None => (request.revision.unwrap_or(state.current), None),
        };
        state.check_readable(revision)?;
        let start = after.clone().unwrap_or_else(|| request.prefix.clone());
        let mut kvs = Vec::new();
        let mut continue_token = None;
        for key in state.versions.range(start..).map(|(k, _)| k) {
            if !key.starts_with(&request.prefix) {
                break;
            }
            if after.as_deref() == Some(key.as_str()) {
                continue;
            }
            let Some(kv) = state.value_at(key, revision) else { continue };
            if request.limit > 0 && kvs.len() == request.limit {
                let last: &KeyValue = &kvs[kvs.len() - 1];
                continue_token = Some(continuation::encode(revision, &request.prefix, &last.key));
                break;
            }
            kvs.push(kv);
        }
        Ok(RangeResponse { kvs, revision, continue_token })
    }

    async fn write(&self, write: Write) -> StoreResult<WriteResult> {
        let mut state = self.state();
        let result = state.apply(write);
        if let WriteResult::Committed(event) = &result {
            // Published under the state lock, so batches reach the hub in revision order.
            self.hub.publish(vec![event.clone()]);
        }
        let now = Instant::now();
        if state.clock.due(now) {
            let (current, compacted) = (state.current, state.compacted);
            if let Some(target) = state.clock.check(now, current, compacted) {
                state.compact(target)?;
            }
        }
        Ok(result)
    }

    async fn watch(&self, prefix: &str, after: Revision) -> StoreResult<Watcher> {
        watch::start(&self.hub, self.inner.clone(), prefix, after).await
    }

    async fn compact(&self, revision: Revision) -> StoreResult<()> {
        self.state().compact(revision)
    }

    async fn current_revision(&self) -> StoreResult<Revision> {
        Ok(self.state().current)
    }

    async fn compacted_revision(&self) -> StoreResult<Revision> {
        Ok(self.state().compacted)
    }
}
