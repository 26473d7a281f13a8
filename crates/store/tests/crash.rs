//! Crash durability: a child process writes with many concurrent writers and reports every
//! acknowledged write; the parent kills it with SIGKILL at random moments, over and over, then
//! proves that every acknowledged write is stored, revisions have no gap, and a watch from
//! revision 0 replays exactly the committed history.
//!
//! The child is this same test binary, re-run with only the ignored `crash_child` test.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write as _};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use oxplane_store::sqlite::{SqliteOptions, SqliteStore};
use oxplane_store::{CompactionPolicy, Event, KeyValue, RangeRequest, Store, Write, WriteResult};
use rand::Rng;

const DIR_VAR: &str = "OXPLANE_CRASH_TEST_DIR";
const WRITERS: usize = 32;
const KEYS_PER_WRITER: usize = 4;
const KILLS: usize = 24;

fn options() -> SqliteOptions {
    // Durable commits (the default) and no compaction, so the whole history stays replayable.
    SqliteOptions { compaction: CompactionPolicy::disabled(), ..SqliteOptions::default() }
}

/// One acknowledged write as the child reported it.
#[derive(Debug, Clone, PartialEq)]
struct Ack {
    revision: u64,
    key: String,
    /// `None` for a deletion.
    value: Option<String>,
}

fn parse_ack(line: &str) -> Option<Ack> {
    let mut parts = line.strip_prefix("ACK ")?.splitn(3, ' ');
    let revision = parts.next()?.parse().ok()?;
    let key = parts.next()?.to_string();
    let value = match parts.next()? {
        "-" => None,
        v => Some(v.to_string()),
    };
    Some(Ack { revision, key, value })
}

#[test]
#[ignore = "runs only as the child of `acknowledged_writes_survive_sigkill`"]
fn crash_child() {
    let Ok(dir) = std::env::var(DIR_VAR) else { return };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async move {
        let store = Arc::new(SqliteStore::open(Path::new(&dir), options()).unwrap());
        let stdout = Arc::new(std::sync::Mutex::new(std::io::stdout()));
        let mut tasks = Vec::new();
        for w in 0..WRITERS {
            let store = store.clone();
            let stdout = stdout.clone();
            tasks.push(tokio::spawn(async move {
                let mut n: u64 = 0;
                #[allow(clippy::infinite_loop)]
                loop {
                    n += 1;
                    let key = format!("/crash/{w}/{}", n as usize % KEYS_PER_WRITER);
                    let current = store.get(&key).await.unwrap().kv;
                    let value = format!("{w}-{n}-{}", std::process::id());
                    let write = match (&current, n % 5) {
                        (None, _) => Write::Create { key: key.clone(), value: Bytes::from(value.clone()) },
                        (Some(kv), 0) => Write::Delete { key: key.clone(), expected: kv.mod_revision },
                        (Some(kv), _) => Write::Update {
                            key: key.clone(),
                            value: Bytes::from(value.clone()),
                            expected: kv.mod_revision,
                        },
                    };
                    let deleting = matches!(write, Write::Delete { .. });
                    match store.write(write).await.unwrap() {
                        WriteResult::Committed(event) => {
                            let shown = if deleting { "-".to_string() } else { value };
                            let mut out = stdout.lock().unwrap();
                            writeln!(out, "ACK {} {key} {shown}", event.revision()).unwrap();
                            out.flush().unwrap();
                        }
                        WriteResult::Rejected { .. } => panic!("each writer owns its keys"),
                    }
                }
            }));
        }
        // Writers run until the parent kills this process; a failing writer panics loudly.
        join_all(tasks).await;
    });
}

/// Waits on every task, surfacing the first panic.
async fn join_all(tasks: Vec<tokio::task::JoinHandle<()>>) {
    for task in tasks {
        if let Err(e) = task.await {
            panic!("writer failed: {e}");
        }
    }
}

/// Runs the child until it has acknowledged some writes plus a random while, then SIGKILLs it.
fn run_and_kill(dir: &Path, rng: &mut impl Rng) -> Vec<Ack> {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["crash::crash_child", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env(DIR_VAR, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (first_ack, writing) = std::sync::mpsc::channel::<()>();
    let reader = std::thread::spawn(move || {
        let mut acks = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(ack) = parse_ack(&line) {
                if acks.is_empty() {
                    let _ = first_ack.send(());
                }
                acks.push(ack);
            }
        }
        acks
    });
    // Kill at a random moment once the child is writing (however slow its start-up was).
    let _ = writing.recv_timeout(Duration::from_secs(60));
    std::thread::sleep(Duration::from_millis(rng.random_range(5..300)));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    reader.join().unwrap()
}

#[test]
fn acknowledged_writes_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rand::rng();
    let mut acked: Vec<Ack> = Vec::new();
    let started = Instant::now();
    for _ in 0..KILLS {
        acked.extend(run_and_kill(dir.path(), &mut rng));
    }
    assert!(acked.len() > 100, "the child acknowledged only {} writes", acked.len());

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let store = SqliteStore::open(dir.path(), options()).unwrap();
        let current = store.current_revision().await.unwrap();

        // Replay the whole history with a watch from revision 0.
        let mut watcher = store.watch("", 0).await.unwrap();
        let mut history: Vec<Event> = Vec::new();
        while history.len() < current as usize {
            let event = tokio::time::timeout(Duration::from_secs(30), watcher.next()).await.unwrap();
            history.push(event.unwrap().unwrap());
        }

        // Revisions are exactly 1..=current: no gap, no duplicate, in order.
        let revisions: Vec<u64> = history.iter().map(Event::revision).collect();
        assert_eq!(revisions, (1..=current).collect::<Vec<_>>());

        // The history is self-consistent: every event's previous value is the state before it,
        // and folding it gives the state a range reads now.
        let mut state: BTreeMap<String, KeyValue> = BTreeMap::new();
        for event in &history {
            assert_eq!(event.prev(), state.get(event.key()), "prev of revision {}", event.revision());
            match event {
                Event::Put { kv, .. } => {
                    state.insert(kv.key.clone(), kv.clone());
                }
                Event::Delete { prev, .. } => {
                    state.remove(&prev.key);
                }
            }
        }
        let now = store.range(RangeRequest::default()).await.unwrap();
        assert_eq!(now.kvs, state.into_values().collect::<Vec<_>>());

        // Every acknowledged write is in the history, at its revision, as acknowledged.
        for ack in &acked {
            let event = &history[ack.revision as usize - 1];
            assert_eq!(event.key(), ack.key, "revision {}", ack.revision);
            let stored = match event {
                Event::Put { kv, .. } => Some(String::from_utf8_lossy(&kv.value).into_owned()),
                Event::Delete { .. } => None,
            };
            assert_eq!(stored, ack.value, "revision {}", ack.revision);
        }
        eprintln!(
            "{KILLS} kills in {:?}: {} acknowledged writes, {} committed revisions, all present",
            started.elapsed(),
            acked.len(),
            current
        );
    });
}
