//! Model-based property tests: random operation sequences run against each backend and against
//! a plain in-memory model of the semantics; every read, revision and watch event must agree.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use oxplane_store::etcd::EtcdStore;
use oxplane_store::etcd::testing::{self, EtcdCluster};
use oxplane_store::memory::MemoryStore;
use oxplane_store::sqlite::{SqliteOptions, SqliteStore};
use oxplane_store::{
    CompactionPolicy, Event, KeyValue, RangeRequest, Revision, Store, StoreError, Write, WriteResult,
};
use proptest::prelude::*;

const KEYS: [&str; 6] = ["/m/a", "/m/b", "/m/c", "/m/d", "/n/a", "/m0"];
const PREFIXES: [&str; 4] = ["/m/", "/n/", "/", ""];

#[derive(Clone, Debug)]
enum Op {
    Create(usize, u8),
    /// Update with the right mod revision, or a stale one.
    Update(usize, u8, bool),
    Delete(usize, bool),
    Get(usize),
    /// Range at a revision chosen as a fraction of the history, paged by the limit.
    Range(usize, u8, usize),
    Compact(u8),
    /// Watch from a fraction of the history; collected at the end.
    Watch(usize, u8),
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0..KEYS.len();
    prop_oneof![
        4 => (key.clone(), any::<u8>()).prop_map(|(k, v)| Op::Create(k, v)),
        4 => (key.clone(), any::<u8>(), prop::bool::weighted(0.8)).prop_map(|(k, v, ok)| Op::Update(k, v, ok)),
        2 => (key.clone(), prop::bool::weighted(0.8)).prop_map(|(k, ok)| Op::Delete(k, ok)),
        2 => key.prop_map(Op::Get),
        2 => (0..PREFIXES.len(), any::<u8>(), 0usize..4).prop_map(|(p, at, l)| Op::Range(p, at, l)),
        1 => any::<u8>().prop_map(Op::Compact),
        1 => (0..PREFIXES.len(), any::<u8>()).prop_map(|(p, at)| Op::Watch(p, at)),
    ]
}

/// The specification, written as plainly as possible.
#[derive(Default)]
struct Model {
    /// (revision, key, value or None for a deletion, create revision)
    log: Vec<(Revision, String, Option<Bytes>, Revision)>,
    compacted: Revision,
}

impl Model {
    fn current(&self) -> Revision {
        self.log.len() as Revision
    }

    fn state_at(&self, revision: Revision) -> BTreeMap<String, KeyValue> {
        let mut state = BTreeMap::new();
        for (rev, key, value, create) in self.log.iter().take(revision as usize) {
            match value {
                Some(value) => {
                    state.insert(
                        key.clone(),
                        KeyValue { key: key.clone(), value: value.clone(), create_revision: *create, mod_revision: *rev },
                    );
                }
                None => {
                    state.remove(key);
                }
            }
        }
        state
    }

    fn get(&self, key: &str) -> Option<KeyValue> {
        self.state_at(self.current()).remove(key)
    }

    fn events_after(&self, prefix: &str, after: Revision) -> Vec<Event> {
        let mut events = Vec::new();
        for (rev, key, value, create) in &self.log {
            if *rev <= after || !key.starts_with(prefix) {
                continue;
            }
            let prev = self.state_at(rev - 1).remove(key);
            events.push(match (value, prev) {
                (Some(value), prev) => Event::Put {
                    kv: KeyValue { key: key.clone(), value: value.clone(), create_revision: *create, mod_revision: *rev },
                    prev,
                },
                (None, Some(prev)) => Event::Delete { revision: *rev, prev },
                (None, None) => unreachable!("the model never deletes a missing key"),
            });
        }
        events
    }

    fn apply(&mut self, write: &Write) -> WriteResult {
        let current = self.get(write.key());
        let next = self.current() + 1;
        let (value, create, prev) = match (write, &current) {
            (Write::Create { value, .. }, None) => (Some(value.clone()), next, None),
            (Write::Update { value, expected, .. }, Some(kv)) if kv.mod_revision == *expected => {
                (Some(value.clone()), kv.create_revision, current.clone())
            }
            (Write::Delete { expected, .. }, Some(kv)) if kv.mod_revision == *expected => {
                self.log.push((next, write.key().to_string(), None, kv.create_revision));
                return WriteResult::Committed(Event::Delete { revision: next, prev: kv.clone() });
            }
            _ => return WriteResult::Rejected { current },
        };
        self.log.push((next, write.key().to_string(), value.clone(), create));
        let kv = KeyValue {
            key: write.key().to_string(),
            value: value.unwrap_or_default(),
            create_revision: create,
            mod_revision: next,
        };
        WriteResult::Committed(Event::Put { kv, prev })
    }
}

fn at(model: &Model, fraction: u8) -> Revision {
    model.compacted + (model.current() - model.compacted) * fraction as u64 / 255
}

/// How a backend may differ from the model where the store's contract lets it.
#[derive(Clone, Copy, PartialEq)]
enum Compaction {
    /// Compacts to exactly the revision asked for; started watches are never ended by it.
    Exact,
    /// etcd: ends a watch that has not caught up with its history when compaction passes it
    /// (with `Compacted`, never skipping), and never compacts onto a delete, so it stops at
    /// the newest revision before the one asked for that is not one.
    Etcd,
}

/// Whether the model's write at `revision` is a deletion.
fn is_delete(model: &Model, revision: Revision) -> bool {
    revision > 0 && model.log.get(revision as usize - 1).is_some_and(|(_, _, value, _)| value.is_none())
}

async fn run(store: Arc<dyn Store>, ops: Vec<Op>, compaction: Compaction) -> Result<(), TestCaseError> {
    let mut model = Model::default();
    let mut watches = Vec::new();
    for op in ops {
        match op {
            Op::Create(k, v) => {
                let write = Write::Create { key: KEYS[k].into(), value: Bytes::from(vec![v; 3]) };
                let expected = model.apply(&write);
                prop_assert_eq!(store.write(write).await.unwrap(), expected);
            }
            Op::Update(k, v, right) => {
                let current = model.get(KEYS[k]).map(|kv| kv.mod_revision).unwrap_or(1);
                let expected = if right { current } else { current + 1 };
                let write = Write::Update { key: KEYS[k].into(), value: Bytes::from(vec![v; 2]), expected };
                let expected = model.apply(&write);
                prop_assert_eq!(store.write(write).await.unwrap(), expected);
            }
            Op::Delete(k, right) => {
                let expected_rev = model.get(KEYS[k]).map(|kv| kv.mod_revision).unwrap_or(1);
                let write = Write::Delete { key: KEYS[k].into(), expected: if right { expected_rev } else { expected_rev + 7 } };
                let expected = model.apply(&write);
                prop_assert_eq!(store.write(write).await.unwrap(), expected);
            }
            Op::Get(k) => {
                let got = store.get(KEYS[k]).await.unwrap();
                prop_assert_eq!(got.kv, model.get(KEYS[k]));
                prop_assert_eq!(got.revision, model.current());
            }
            Op::Range(p, fraction, limit) => {
                let revision = at(&model, fraction);
                let prefix = PREFIXES[p];
                let expected: Vec<KeyValue> = model
                    .state_at(revision)
                    .into_values()
                    .filter(|kv| kv.key.starts_with(prefix))
                    .collect();
                let mut request = RangeRequest { prefix: prefix.into(), limit, revision: Some(revision), ..Default::default() };
                let mut got = Vec::new();
                loop {
                    let page = store.range(request.clone()).await.unwrap();
                    prop_assert_eq!(page.revision, revision);
                    got.extend(page.kvs);
                    match page.continue_token {
                        Some(token) => request.continue_token = Some(token),
                        None => break,
                    }
                }
                prop_assert_eq!(got, expected);
            }
            Op::Compact(fraction) => {
                let target = at(&model, fraction);
                store.compact(target).await.unwrap();
                let asked = model.compacted.max(target);
                let got = store.compacted_revision().await.unwrap();
                match compaction {
                    Compaction::Exact => prop_assert_eq!(got, asked),
                    Compaction::Etcd => {
                        prop_assert!(got >= model.compacted && got <= asked, "compacted to {} for {}", got, asked);
                        // As far as it may go: every revision it stopped short of is a delete,
                        // and where it stopped is not (unless it did not move).
                        prop_assert!((got + 1..=asked).all(|r| is_delete(&model, r)), "stopped at {} for {}", got, asked);
                        prop_assert!(got == model.compacted || !is_delete(&model, got), "compacted onto the delete at {}", got);
                    }
                }
                model.compacted = got;
                if model.compacted > 0 {
                    let old = store.watch("/", model.compacted - 1).await;
                    let is_compacted = matches!(old, Err(StoreError::Compacted { .. }));
                    prop_assert!(is_compacted);
                }
            }
            Op::Watch(p, fraction) => {
                let after = at(&model, fraction);
                let watcher = store.watch(PREFIXES[p], after).await.unwrap();
                watches.push((PREFIXES[p], after, watcher));
            }
        }
        prop_assert_eq!(store.current_revision().await.unwrap(), model.current());
    }
    // Every watch sees exactly the model's events after its start (compaction after a watch
    // started does not affect it: it is not lagging).
    for (prefix, after, mut watcher) in watches {
        let expected = model.events_after(prefix, after);
        let mut got = Vec::new();
        while got.len() < expected.len() {
            let event = tokio::time::timeout(std::time::Duration::from_secs(10), watcher.next()).await;
            match event {
                Ok(Some(Ok(event))) => got.push(event),
                Ok(Some(Err(StoreError::Compacted { .. }))) if compaction == Compaction::Etcd && model.compacted > after => {
                    break;
                }
                other => return Err(TestCaseError::fail(format!("watch {prefix}@{after} ended: {other:?}"))),
            }
        }
        // What was delivered is the model's history from the start, in order, with no gap.
        prop_assert_eq!(&got[..], &expected[..got.len()]);
    }
    // And a watch from the compacted revision replays the retained history.
    let mut watcher = store.watch("", model.compacted).await.unwrap();
    let expected = model.events_after("", model.compacted);
    for want in expected {
        let got = tokio::time::timeout(std::time::Duration::from_secs(10), watcher.next()).await;
        prop_assert_eq!(got.ok().flatten().map(|r| r.unwrap()), Some(want));
    }
    Ok(())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn memory_matches_model(ops in prop::collection::vec(op(), 1..80)) {
        runtime().block_on(run(Arc::new(MemoryStore::default()), ops, Compaction::Exact))?;
    }

    #[test]
    fn sqlite_matches_model(ops in prop::collection::vec(op(), 1..80)) {
        let dir = tempfile::tempdir().unwrap();
        // Durability is not what this test checks; the crash test does, with fsync on.
        let options = SqliteOptions { fsync: false, compaction: CompactionPolicy::disabled(), ..SqliteOptions::default() };
        let store = SqliteStore::open(dir.path(), options).unwrap();
        runtime().block_on(run(Arc::new(store), ops, Compaction::Exact))?;
    }
}

proptest! {
    // Every case is a fresh prefix of a real 3-member etcd cluster, so fewer cases.
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn etcd_matches_model(ops in prop::collection::vec(op(), 1..60)) {
        let cluster = EtcdCluster::shared();
        runtime().block_on(async {
            let _exclusive = testing::exclusive().await;
            let store = EtcdStore::open(cluster.options(&testing::unique_prefix("model"))).await.unwrap();
            run(Arc::new(store), ops, Compaction::Etcd).await
        })?;
    }
}
