//! SQLite-backend behaviour that only a real file shows: reopening, the data-directory lock,
//! refusing foreign or damaged files untouched, compaction freeing rows, and the file being
//! readable with the `sqlite3` tool.

use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use oxplane_store::sqlite::{SqliteOptions, SqliteStore, schema};
use oxplane_store::{CompactionPolicy, Event, RangeRequest, Store, StoreError, Write, WriteResult};

fn options() -> SqliteOptions {
    SqliteOptions { compaction: CompactionPolicy::disabled(), ..SqliteOptions::default() }
}

async fn put(store: &SqliteStore, key: &str, value: &str) -> u64 {
    let current = store.get(key).await.unwrap().kv;
    let value = Bytes::from(value.to_string());
    let write = match current {
        Some(kv) => Write::Update { key: key.into(), value, expected: kv.mod_revision },
        None => Write::Create { key: key.into(), value },
    };
    match store.write(write).await.unwrap() {
        WriteResult::Committed(event) => event.revision(),
        other => panic!("{other:?}"),
    }
}

fn rows(dir: &Path) -> i64 {
    let conn = rusqlite::Connection::open(dir.join(schema::DB_FILE)).unwrap();
    conn.query_row("SELECT count(*) FROM kv_log", [], |r| r.get(0)).unwrap()
}

#[tokio::test]
async fn reopening_keeps_every_write_and_the_history() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = SqliteStore::open(dir.path(), options()).unwrap();
        for i in 0..10 {
            put(&store, &format!("/a/{}", i % 3), &i.to_string()).await;
        }
    }
    let store = SqliteStore::open(dir.path(), options()).unwrap();
    assert_eq!(store.current_revision().await.unwrap(), 10);
    let kvs = store.range(RangeRequest { prefix: "/a/".into(), ..Default::default() }).await.unwrap().kvs;
    let values: Vec<_> = kvs.iter().map(|kv| String::from_utf8_lossy(&kv.value).into_owned()).collect();
    assert_eq!(values, ["9", "7", "8"]);
    let mut watcher = store.watch("/", 0).await.unwrap();
    for expected in 1..=10 {
        assert_eq!(watcher.next().await.unwrap().unwrap().revision(), expected);
    }
    assert_eq!(put(&store, "/a/new", "x").await, 11);
}

#[tokio::test]
async fn a_second_opener_is_refused_with_the_holders_pid() {
    let dir = tempfile::tempdir().unwrap();
    let _first = SqliteStore::open(dir.path(), options()).unwrap();
    match SqliteStore::open(dir.path(), options()) {
        Err(e @ StoreError::Locked { .. }) => {
            let message = e.to_string();
            assert!(message.contains("in use by another oxplane process"), "{message}");
            assert!(message.contains(&format!("pid {}", std::process::id())), "{message}");
        }
        Err(other) => panic!("expected Locked, got {other}"),
        Ok(_) => panic!("a second open of the same data directory must be refused"),
    }
}

#[tokio::test]
async fn the_lock_is_released_on_close() {
    let dir = tempfile::tempdir().unwrap();
    drop(SqliteStore::open(dir.path(), options()).unwrap());
    SqliteStore::open(dir.path(), options()).unwrap();
}

#[test]
fn a_file_that_is_not_sqlite_is_refused_and_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(schema::DB_FILE);
    std::fs::write(&path, b"this is somebody's notes, not a database\n").unwrap();
    let before = std::fs::read(&path).unwrap();
    let err = SqliteStore::open(dir.path(), options()).err().expect("must refuse");
    assert!(matches!(err, StoreError::Foreign { .. }), "{err}");
    assert!(err.to_string().contains("not a SQLite database"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert!(!dir.path().join("oxplane.db-wal").exists());
}

#[test]
fn another_applications_sqlite_database_is_refused_and_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(schema::DB_FILE);
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL); INSERT INTO invoices VALUES (1, 9.5);")
            .unwrap();
    }
    let before = std::fs::read(&path).unwrap();
    let err = SqliteStore::open(dir.path(), options()).err().expect("must refuse");
    assert!(matches!(err, StoreError::Foreign { .. }), "{err}");
    assert!(err.to_string().contains("not an oxplane store"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[tokio::test]
async fn a_damaged_store_is_refused_and_untouched() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = SqliteStore::open(dir.path(), options()).unwrap();
        for i in 0..300 {
            put(&store, &format!("/d/{i}"), &"x".repeat(500)).await;
        }
    }
    // Fold the WAL into the main file so the damage below hits live pages.
    {
        let conn = rusqlite::Connection::open(dir.path().join(schema::DB_FILE)).unwrap();
        conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode = DELETE;").unwrap();
    }
    let path = dir.path().join(schema::DB_FILE);
    let mut bytes = std::fs::read(&path).unwrap();
    assert!(bytes.len() > 8 * 4096, "the store should span several pages");
    // Overwrite the middle of the file (b-tree pages) with garbage.
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid..mid + 3000] {
        *b = 0xA5;
    }
    std::fs::write(&path, &bytes).unwrap();
    let err = SqliteStore::open(dir.path(), options()).err().expect("must refuse");
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("corrupt"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
}

#[tokio::test]
async fn compaction_removes_superseded_rows() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path(), options()).unwrap();
    for i in 0..100 {
        put(&store, "/c/hot", &i.to_string()).await;
    }
    let cold = put(&store, "/c/cold", "1").await;
    let kv = store.get("/c/cold").await.unwrap().kv.unwrap();
    store.write(Write::Delete { key: "/c/cold".into(), expected: kv.mod_revision }).await.unwrap();
    assert_eq!(cold, 101);
    assert_eq!(rows(dir.path()), 102);
    store.compact(50).await.unwrap();
    assert_eq!(rows(dir.path()), 53);
    store.compact(102).await.unwrap();
    // Only the hot key's latest version remains; the deleted key is gone entirely.
    assert_eq!(rows(dir.path()), 1);
    assert_eq!(store.current_revision().await.unwrap(), 102);
    drop(store);
    // The revision survives a reopen even though its row is gone.
    let store = SqliteStore::open(dir.path(), options()).unwrap();
    assert_eq!(store.current_revision().await.unwrap(), 102);
    assert_eq!(store.compacted_revision().await.unwrap(), 102);
    assert_eq!(put(&store, "/c/next", "n").await, 103);
}

#[tokio::test]
async fn automatic_compaction_keeps_the_configured_window() {
    let dir = tempfile::tempdir().unwrap();
    let policy = CompactionPolicy {
        keep_revisions: 20,
        keep_for: Duration::ZERO,
        interval: Duration::from_millis(10),
        enabled: true,
    };
    let store = SqliteStore::open(dir.path(), SqliteOptions { compaction: policy, ..options() }).unwrap();
    for i in 0..100 {
        put(&store, "/auto/k", &i.to_string()).await;
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while store.compacted_revision().await.unwrap() < 80 {
        assert!(std::time::Instant::now() < deadline, "automatic compaction did not run");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(store.compacted_revision().await.unwrap(), 80, "keeps exactly the last 20 revisions");
    assert!(matches!(store.watch("/", 79).await, Err(StoreError::Compacted { compacted: 80, .. })));
    let mut watcher = store.watch("/", 80).await.unwrap();
    match watcher.next().await.unwrap().unwrap() {
        Event::Put { kv, prev: Some(prev) } => assert_eq!((kv.mod_revision, prev.mod_revision), (81, 80)),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn the_file_is_readable_with_the_sqlite3_tool() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path(), options()).unwrap();
    put(&store, "/registry/configmaps/default/app", "{\"kind\":\"ConfigMap\"}").await;
    let output = std::process::Command::new("sqlite3")
        .arg(dir.path().join(schema::DB_FILE))
        .arg("SELECT revision, key, deleted, CAST(value AS TEXT) FROM kv_log; PRAGMA application_id;")
        .output()
        .expect("the sqlite3 tool is installed (scripts/test installs it)");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(text, format!("1|/registry/configmaps/default/app|0|{{\"kind\":\"ConfigMap\"}}\n{}\n", schema::APPLICATION_ID));
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[tokio::test]
async fn the_data_directory_database_and_wal_are_private_to_the_owner() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("data");
    let store = SqliteStore::open(&dir, options()).unwrap();
    put(&store, "/a", "secret").await;
    let db = dir.join(schema::DB_FILE);
    let wal = dir.join(format!("{}-wal", schema::DB_FILE));
    assert!(wal.exists(), "the WAL exists while the store is open");
    assert_eq!(mode(&dir), 0o700);
    for file in [&db, &wal, &dir.join(format!("{}-shm", schema::DB_FILE)), &dir.join("oxplane.lock")] {
        assert_eq!(mode(file), 0o600, "{}", file.display());
    }
    drop(store);

    // A store an older version left readable by everyone is narrowed when opened.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    let store = SqliteStore::open(&dir, options()).unwrap();
    put(&store, "/b", "secret").await;
    assert_eq!(mode(&db), 0o600);
    assert_eq!(mode(&wal), 0o600);
}
