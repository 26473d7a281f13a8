//! The conformance suite: the behaviour every backend must show, as async checks that panic on
//! a violation. A backend's tests instantiate all of them with [`crate::conformance_suite!`],
//! giving a function that makes a fresh, empty store.

// Test code: a failed unwrap is a failed check.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;

use crate::{Event, KeyValue, RangeRequest, Revision, Store, StoreError, Write, WriteResult};

/// Generates one `#[tokio::test]` per conformance check, each on a fresh store from `$make`:
/// an expression giving a [`Store`], or a `(store, guard)` pair whose guard (a temporary
/// directory, a server process) lives until the check ends.
#[macro_export]
macro_rules! conformance_suite {
    ($make:expr) => {
        $crate::conformance_suite!(@tests $make;
            empty_store, create_and_get, update_compares_mod_revision, delete_compares_mod_revision,
            revisions_are_gap_free, range_is_by_prefix_in_key_order, range_pages_are_one_snapshot,
            range_at_past_revision, invalid_continue_token, watch_replays_then_follows,
            watch_filters_by_prefix, watch_from_future_revision, compaction_frees_history,
            concurrent_writers, compare_and_swap_contention, slow_watcher_misses_nothing);
    };
    (@tests $make:expr; $($name:ident),*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $name() {
                let (store, _guard) = $crate::conformance::Fixture::into_parts($make);
                $crate::conformance::$name(store).await;
            }
        )*
    };
}

/// What a conformance test's factory may return: a store, or a store with a guard.
pub trait Fixture {
    /// The store to test and whatever must outlive it.
    fn into_parts(self) -> (Arc<dyn Store>, Box<dyn std::any::Any + Send>);
}

impl<S: Store> Fixture for S {
    fn into_parts(self) -> (Arc<dyn Store>, Box<dyn std::any::Any + Send>) {
        (Arc::new(self), Box::new(()))
    }
}

impl<S: Store, G: Send + 'static> Fixture for (S, G) {
    fn into_parts(self) -> (Arc<dyn Store>, Box<dyn std::any::Any + Send>) {
        (Arc::new(self.0), Box::new(self.1))
    }
}

fn val(s: &str) -> Bytes {
    Bytes::from(s.to_string())
}

async fn create(store: &dyn Store, key: &str, value: &str) -> KeyValue {
    match store.write(Write::Create { key: key.into(), value: val(value) }).await {
        Ok(WriteResult::Committed(Event::Put { kv, prev: None })) => kv,
        other => panic!("create {key}: {other:?}"),
    }
}

async fn update(store: &dyn Store, key: &str, value: &str, expected: Revision) -> KeyValue {
    match store.write(Write::Update { key: key.into(), value: val(value), expected }).await {
        Ok(WriteResult::Committed(Event::Put { kv, prev: Some(_) })) => kv,
        other => panic!("update {key}: {other:?}"),
    }
}

async fn delete(store: &dyn Store, key: &str, expected: Revision) -> Revision {
    match store.write(Write::Delete { key: key.into(), expected }).await {
        Ok(WriteResult::Committed(Event::Delete { revision, .. })) => revision,
        other => panic!("delete {key}: {other:?}"),
    }
}

async fn keys(store: &dyn Store, prefix: &str, revision: Option<Revision>) -> Vec<(String, String)> {
    let response = store
        .range(RangeRequest { prefix: prefix.into(), revision, ..Default::default() })
        .await
        .expect("range");
    response
        .kvs
        .into_iter()
        .map(|kv| (kv.key, String::from_utf8_lossy(&kv.value).into_owned()))
        .collect()
}

async fn collect(watcher: &mut crate::Watcher, n: usize) -> Vec<Event> {
    let mut events = Vec::with_capacity(n);
    while events.len() < n {
        let next = tokio::time::timeout(std::time::Duration::from_secs(30), watcher.next())
            .await
            .expect("watch event within 30 s");
        events.push(next.expect("watch still open").expect("watch event"));
    }
    events
}

/// A new store is empty at revision 0.
pub async fn empty_store(store: Arc<dyn Store>) {
    assert_eq!(store.current_revision().await.unwrap(), 0);
    assert_eq!(store.compacted_revision().await.unwrap(), 0);
    let got = store.get("/a").await.unwrap();
    assert_eq!((got.kv, got.revision), (None, 0));
    let range = store.range(RangeRequest::default()).await.unwrap();
    assert!(range.kvs.is_empty());
    assert_eq!(range.revision, 0);
    assert_eq!(range.continue_token, None);
}

/// Create-if-absent, and get returns what was created.
pub async fn create_and_get(store: Arc<dyn Store>) {
    let kv = create(&*store, "/a", "one").await;
    assert_eq!(kv, KeyValue { key: "/a".into(), value: val("one"), create_revision: 1, mod_revision: 1 });
    let got = store.get("/a").await.unwrap();
    assert_eq!(got.kv, Some(kv.clone()));
    assert_eq!(got.revision, 1);
    match store.write(Write::Create { key: "/a".into(), value: val("two") }).await.unwrap() {
        WriteResult::Rejected { current } => assert_eq!(current, Some(kv)),
        other => panic!("second create must be rejected: {other:?}"),
    }
    assert_eq!(store.current_revision().await.unwrap(), 1, "a rejected write takes no revision");
}

/// Update applies only at the expected mod revision and keeps the create revision.
pub async fn update_compares_mod_revision(store: Arc<dyn Store>) {
    let first = create(&*store, "/a", "one").await;
    let second = update(&*store, "/a", "two", first.mod_revision).await;
    assert_eq!((second.create_revision, second.mod_revision), (1, 2));
    let stale = store.write(Write::Update { key: "/a".into(), value: val("x"), expected: 1 }).await.unwrap();
    assert_eq!(stale, WriteResult::Rejected { current: Some(second.clone()) });
    let missing = store.write(Write::Update { key: "/b".into(), value: val("x"), expected: 1 }).await.unwrap();
    assert_eq!(missing, WriteResult::Rejected { current: None });
    assert_eq!(store.get("/a").await.unwrap().kv, Some(second));
}

/// Delete applies only at the expected mod revision; a re-created key starts a new life.
pub async fn delete_compares_mod_revision(store: Arc<dyn Store>) {
    let kv = create(&*store, "/a", "one").await;
    let stale = store.write(Write::Delete { key: "/a".into(), expected: 99 }).await.unwrap();
    assert_eq!(stale, WriteResult::Rejected { current: Some(kv.clone()) });
    match store.write(Write::Delete { key: "/a".into(), expected: 1 }).await.unwrap() {
        WriteResult::Committed(Event::Delete { revision, prev }) => {
            assert_eq!(revision, 2);
            assert_eq!(prev, kv);
        }
        other => panic!("delete: {other:?}"),
    }
    assert_eq!(store.get("/a").await.unwrap().kv, None);
    let missing = store.write(Write::Delete { key: "/a".into(), expected: 2 }).await.unwrap();
    assert_eq!(missing, WriteResult::Rejected { current: None });
    let again = create(&*store, "/a", "again").await;
    assert_eq!((again.create_revision, again.mod_revision), (3, 3));
}

/// Every committed write takes exactly the next revision.
pub async fn revisions_are_gap_free(store: Arc<dyn Store>) {
    let mut expected = 0;
    for i in 0..20 {
        let key = format!("/k{}", i % 4);
        let current = store.get(&key).await.unwrap().kv;
        let write = match (&current, i % 3) {
            (None, _) => Write::Create { key, value: val("v") },
            (Some(kv), 0) => Write::Delete { key, expected: kv.mod_revision },
            (Some(kv), _) => Write::Update { key, value: val(&i.to_string()), expected: kv.mod_revision },
        };
        // A rejected write in between must not consume a revision.
        let _ = store.write(Write::Update { key: "/none".into(), value: val("x"), expected: 7 }).await.unwrap();
        match store.write(write).await.unwrap() {
            WriteResult::Committed(event) => {
                expected += 1;
                assert_eq!(event.revision(), expected);
            }
            other => panic!("write {i}: {other:?}"),
        }
        assert_eq!(store.current_revision().await.unwrap(), expected);
    }
}

/// Range returns live keys under the prefix only, in byte order of the keys.
pub async fn range_is_by_prefix_in_key_order(store: Arc<dyn Store>) {
    for key in ["/r/b", "/r/a", "/r0", "/r/c/d", "/q/a", "/r/", "/r/é"] {
        create(&*store, key, key).await;
    }
    let kv = store.get("/r/b").await.unwrap().kv.unwrap();
    delete(&*store, "/r/b", kv.mod_revision).await;
    let found: Vec<String> = keys(&*store, "/r/", None).await.into_iter().map(|(k, _)| k).collect();
    assert_eq!(found, ["/r/", "/r/a", "/r/c/d", "/r/é"]);
    let all = keys(&*store, "", None).await;
    assert_eq!(all.len(), 6);
    assert!(keys(&*store, "/nothing/", None).await.is_empty());
}

/// Pages of a limited range all come from the first page's snapshot.
pub async fn range_pages_are_one_snapshot(store: Arc<dyn Store>) {
    for i in 0..7 {
        create(&*store, &format!("/p/{i}"), "v").await;
    }
    let snapshot = store.current_revision().await.unwrap();
    let mut request = RangeRequest { prefix: "/p/".into(), limit: 3, ..Default::default() };
    let mut seen = Vec::new();
    let mut pages = 0;
    loop {
        let page = store.range(request.clone()).await.unwrap();
        assert_eq!(page.revision, snapshot);
        assert!(page.kvs.len() <= 3);
        seen.extend(page.kvs.into_iter().map(|kv| kv.key));
        pages += 1;
        if pages == 1 {
            // Changes after the first page must not show in later pages.
            let kv = store.get("/p/5").await.unwrap().kv.unwrap();
            delete(&*store, "/p/5", kv.mod_revision).await;
            create(&*store, "/p/55", "new").await;
        }
        match page.continue_token {
            Some(token) => request.continue_token = Some(token),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, ["/p/0", "/p/1", "/p/2", "/p/3", "/p/4", "/p/5", "/p/6"]);
    // An exact multiple of the limit ends without an empty trailing page.
    let exact = store
        .range(RangeRequest { prefix: "/p/".into(), limit: 7, ..Default::default() })
        .await
        .unwrap();
    assert_eq!(exact.kvs.len(), 7);
    assert_eq!(exact.continue_token, None);
}

/// Reads at a past revision see the state as it was.
pub async fn range_at_past_revision(store: Arc<dyn Store>) {
    let a = create(&*store, "/h/a", "a1").await;
    let a2 = update(&*store, "/h/a", "a2", a.mod_revision).await;
    create(&*store, "/h/b", "b1").await;
    delete(&*store, "/h/a", a2.mod_revision).await;
    assert_eq!(keys(&*store, "/h/", Some(1)).await, [("/h/a".to_string(), "a1".to_string())]);
    assert_eq!(keys(&*store, "/h/", Some(2)).await, [("/h/a".to_string(), "a2".to_string())]);
    assert_eq!(keys(&*store, "/h/", Some(3)).await.len(), 2);
    assert_eq!(keys(&*store, "/h/", Some(4)).await, [("/h/b".to_string(), "b1".to_string())]);
    assert!(keys(&*store, "/h/", Some(0)).await.is_empty());
    let future = store.range(RangeRequest { prefix: "/h/".into(), revision: Some(5), ..Default::default() }).await;
    assert!(matches!(future, Err(StoreError::FutureRevision { requested: 5, current: 4 })), "{future:?}");
}

/// A continue token that is garbage or from another prefix is refused.
pub async fn invalid_continue_token(store: Arc<dyn Store>) {
    for i in 0..3 {
        create(&*store, &format!("/c/{i}"), "v").await;
    }
    let page = store.range(RangeRequest { prefix: "/c/".into(), limit: 1, ..Default::default() }).await.unwrap();
    let token = page.continue_token.unwrap();
    let other = store
        .range(RangeRequest { prefix: "/d/".into(), continue_token: Some(token), ..Default::default() })
        .await;
    assert!(matches!(other, Err(StoreError::InvalidContinue(_))), "{other:?}");
    let garbage = store
        .range(RangeRequest { prefix: "/c/".into(), continue_token: Some("!!".into()), ..Default::default() })
        .await;
    assert!(matches!(garbage, Err(StoreError::InvalidContinue(_))), "{garbage:?}");
}

/// A watch replays history after its start revision, then follows new writes, with previous
/// values on updates and deletes.
pub async fn watch_replays_then_follows(store: Arc<dyn Store>) {
    let a = create(&*store, "/w/a", "1").await;
    let a2 = update(&*store, "/w/a", "2", a.mod_revision).await;
    let mut from_zero = store.watch("/w/", 0).await.unwrap();
    let mut from_one = store.watch("/w/", 1).await.unwrap();
    delete(&*store, "/w/a", a2.mod_revision).await;
    create(&*store, "/w/b", "3").await;

    let events = collect(&mut from_zero, 4).await;
    let revisions: Vec<Revision> = events.iter().map(Event::revision).collect();
    assert_eq!(revisions, [1, 2, 3, 4]);
    assert_eq!(events[0], Event::Put { kv: a.clone(), prev: None });
    assert_eq!(events[1], Event::Put { kv: a2.clone(), prev: Some(a.clone()) });
    assert_eq!(events[2], Event::Delete { revision: 3, prev: a2.clone() });
    assert!(matches!(&events[3], Event::Put { kv, prev: None } if kv.key == "/w/b"));

    let events = collect(&mut from_one, 3).await;
    assert_eq!(events.iter().map(Event::revision).collect::<Vec<_>>(), [2, 3, 4]);
}

/// A watch only sees keys under its prefix.
pub async fn watch_filters_by_prefix(store: Arc<dyn Store>) {
    let mut watcher = store.watch("/x/", 0).await.unwrap();
    create(&*store, "/y/1", "v").await;
    create(&*store, "/x0", "v").await;
    create(&*store, "/x/1", "v").await;
    let events = collect(&mut watcher, 1).await;
    assert_eq!(events[0].key(), "/x/1");
    assert_eq!(events[0].revision(), 3);
}

/// A watch from a revision not yet written waits for it.
pub async fn watch_from_future_revision(store: Arc<dyn Store>) {
    create(&*store, "/f/1", "v").await;
    let mut watcher = store.watch("/f/", 2).await.unwrap();
    create(&*store, "/f/2", "v").await;
    create(&*store, "/f/3", "v").await;
    let events = collect(&mut watcher, 1).await;
    assert_eq!(events[0].revision(), 3);
}

/// Compaction refuses older reads and watches with a distinct error, and keeps the state.
pub async fn compaction_frees_history(store: Arc<dyn Store>) {
    let a = create(&*store, "/k/a", "1").await;
    let a2 = update(&*store, "/k/a", "2", a.mod_revision).await;
    let b = create(&*store, "/k/b", "b").await;
    delete(&*store, "/k/b", b.mod_revision).await;
    let c = create(&*store, "/k/c", "c").await;
    let a3 = update(&*store, "/k/a", "3", a2.mod_revision).await;
    // revisions: 1 a, 2 a, 3 b, 4 b deleted, 5 c, 6 a
    store.compact(5).await.unwrap();
    assert_eq!(store.compacted_revision().await.unwrap(), 5);
    assert_eq!(store.current_revision().await.unwrap(), 6);
    match store.watch("/k/", 4).await {
        Err(StoreError::Compacted { compacted: 5, .. }) => {}
        other => panic!("watch before the compacted revision: {other:?}"),
    }
    match store.range(RangeRequest { prefix: "/k/".into(), revision: Some(4), ..Default::default() }).await {
        Err(StoreError::Compacted { requested: 4, compacted: 5 }) => {}
        other => panic!("range before the compacted revision: {other:?}"),
    }
    // The state at the compacted revision is still readable.
    assert_eq!(
        keys(&*store, "/k/", Some(5)).await,
        [("/k/a".to_string(), "2".to_string()), ("/k/c".to_string(), "c".to_string())]
    );
    assert_eq!(keys(&*store, "/k/", None).await.len(), 2);
    // A watch from the compacted revision replays what came after, with previous values.
    let mut watcher = store.watch("/k/", 5).await.unwrap();
    let events = collect(&mut watcher, 1).await;
    assert_eq!(events[0], Event::Put { kv: a3.clone(), prev: Some(a2) });
    // Compacting again to an older revision is a no-op; to a future one is an error.
    store.compact(2).await.unwrap();
    assert_eq!(store.compacted_revision().await.unwrap(), 5);
    assert!(matches!(store.compact(7).await, Err(StoreError::FutureRevision { .. })));
    store.compact(6).await.unwrap();
    assert_eq!(store.compacted_revision().await.unwrap(), 6);
    assert_eq!(keys(&*store, "/k/", None).await.len(), 2);
    assert_eq!(store.get("/k/a").await.unwrap().kv, Some(a3));
    assert_eq!(store.get("/k/c").await.unwrap().kv, Some(c));
    // New writes continue the sequence.
    assert_eq!(create(&*store, "/k/d", "d").await.mod_revision, 7);
}

/// Many concurrent writers each get distinct revisions covering a contiguous range.
pub async fn concurrent_writers(store: Arc<dyn Store>) {
    let mut tasks = Vec::new();
    for w in 0..16 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut revisions = Vec::new();
            for i in 0..25 {
                let kv = create(&*store, &format!("/cw/{w}/{i}"), "v").await;
                revisions.push(kv.mod_revision);
            }
            revisions
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    all.sort_unstable();
    assert_eq!(all, (1..=400).collect::<Vec<Revision>>());
    assert_eq!(keys(&*store, "/cw/", None).await.len(), 400);
}

/// Compare-and-swap under contention: every increment that committed is counted exactly once.
pub async fn compare_and_swap_contention(store: Arc<dyn Store>) {
    create(&*store, "/counter", "0").await;
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut done = 0;
            while done < 20 {
                let kv = store.get("/counter").await.unwrap().kv.unwrap();
                let n: u64 = String::from_utf8_lossy(&kv.value).parse().unwrap();
                let write = Write::Update { key: "/counter".into(), value: val(&(n + 1).to_string()), expected: kv.mod_revision };
                if let WriteResult::Committed(_) = store.write(write).await.unwrap() {
                    done += 1;
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let kv = store.get("/counter").await.unwrap().kv.unwrap();
    assert_eq!(kv.value, val("160"));
    assert_eq!(kv.mod_revision, 161);
}

/// A watcher that does not read while thousands of writes happen still gets every event, in
/// order, once.
pub async fn slow_watcher_misses_nothing(store: Arc<dyn Store>) {
    let mut watcher = store.watch("/s/", 0).await.unwrap();
    let mut tasks = Vec::new();
    // Two writers make small commit batches, more than the live broadcast buffers, so the
    // watcher must fall behind and catch up from history.
    for w in 0..2 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..2500 {
                create(&*store, &format!("/s/{w}/{i}"), "v").await;
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let events = collect(&mut watcher, 5000).await;
    let revisions: Vec<Revision> = events.iter().map(Event::revision).collect();
    assert_eq!(revisions, (1..=5000).collect::<Vec<_>>());
    let mut seen = BTreeMap::new();
    for event in &events {
        assert!(seen.insert(event.key().to_string(), ()).is_none(), "duplicate {}", event.key());
    }
}
