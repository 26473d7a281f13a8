//! `oxplane bench store`: durable writes per second and latency for 1, 16 and 64 concurrent
//! writers (1 KiB values), range and watch throughput, and the baseline: plain SQLite on the
//! same disk with one fsync'd transaction per write.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use oxplane_store::sqlite::{SqliteOptions, SqliteStore};
use oxplane_store::{CompactionPolicy, RangeRequest, Store, Write, WriteResult};

use super::{Latencies, Report};

/// Flags of `oxplane bench store`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// How long each write phase runs, in seconds.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Where to put the benchmark's databases (a temporary directory inside it is removed
    /// afterwards). Defaults to the system's temporary directory.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The store to measure: sqlite (beside plain SQLite), or etcd (beside raw etcd).
    #[arg(long, value_enum, default_value = "sqlite")]
    store: crate::server_flags::StoreKind,
    /// etcd client URLs for `--store etcd`; without them a private 3-member cluster is started.
    #[arg(long, value_name = "URL[,URL...]", value_delimiter = ',')]
    etcd: Vec<String>,
}

pub(super) const VALUE_SIZE: usize = 1024;
pub(super) const RANGE_KEYS: usize = 10_000;

/// Runs the benchmark.
pub fn run(args: Args) -> anyhow::Result<()> {
    let base = args.dir.clone().unwrap_or_else(std::env::temp_dir);
    let tmp = tempfile::Builder::new().prefix("oxplane-bench-").tempdir_in(&base)?;
    let phase = Duration::from_secs_f64(args.seconds);
    let mut report = Report::new("store");
    match args.store {
        crate::server_flags::StoreKind::Sqlite => {}
        crate::server_flags::StoreKind::Etcd => {
            super::store_etcd::run(&mut report, args.etcd, tmp.path(), phase)?;
            return report.print(args.json);
        }
        crate::server_flags::StoreKind::Memory => anyhow::bail!("bench store measures sqlite or etcd"),
    }
    let runtime = tokio::runtime::Runtime::new()?;

    report.add("disk_fsync_p50_ms", raw_fsync_p50_ms(&tmp.path().join("fsync-probe"))?, "ms");
    let baseline = plain_sqlite_baseline(&tmp.path().join("baseline.db"), phase)?;
    report.add("baseline_writes_per_s", baseline.per_second, "writes/s");
    report.add("baseline_p50_ms", baseline.latencies.percentile_ms(50.0), "ms");

    let store_dir = tmp.path().join("store");
    let options = SqliteOptions { compaction: CompactionPolicy::disabled(), ..SqliteOptions::default() };
    let store = Arc::new(SqliteStore::open(&store_dir, options)?);
    runtime.block_on(async {
        let mut w64 = 0.0;
        for writers in [1, 16, 64] {
            let result = concurrent_writes(&store, writers, phase).await?;
            report.add(format!("writes_per_s_w{writers}"), result.per_second, "writes/s");
            report.add(format!("p50_ms_w{writers}"), result.latencies.percentile_ms(50.0), "ms");
            report.add(format!("p99_ms_w{writers}"), result.latencies.percentile_ms(99.0), "ms");
            if writers == 64 {
                w64 = result.per_second;
            }
        }
        report.add("group_commit_speedup_w64", w64 / baseline.per_second.max(f64::MIN_POSITIVE), "x");

        let (range_ms, replay_per_s) = range_and_replay(&store).await?;
        report.add("range_10k_ms", range_ms, "ms");
        report.add("range_keys_per_s", RANGE_KEYS as f64 / (range_ms / 1000.0), "keys/s");
        report.add("watch_replay_events_per_s", replay_per_s, "events/s");

        let live = live_watch(&store, phase).await?;
        report.add("watch_live_events_per_s", live, "events/s");
        anyhow::Ok(())
    })?;
    drop(store);
    report.print(args.json)
}

/// Operations per second and their latencies.
pub(super) struct Throughput {
    /// Operations per second.
    pub per_second: f64,
    /// Each operation's latency.
    pub latencies: Latencies,
}

/// The disk's own cost of making a small write durable (4 KiB write + fdatasync), which bounds
/// what group commit can gain: the cheaper the fsync, the closer the baseline is to CPU-bound.
fn raw_fsync_p50_ms(path: &std::path::Path) -> anyhow::Result<f64> {
    use std::io::Write as _;
    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    let block = vec![b'x'; 4096];
    let mut times = Vec::new();
    for _ in 0..200 {
        let t = Instant::now();
        file.write_all(&block)?;
        file.sync_data()?;
        times.push(t.elapsed());
    }
    Ok(Latencies::new(times).percentile_ms(50.0))
}

/// One writer, one fsync'd SQLite transaction per insert: what a store without group commit
/// can do on this disk.
fn plain_sqlite_baseline(path: &std::path::Path, phase: Duration) -> anyhow::Result<Throughput> {
    let conn = rusqlite::Connection::open(path)?;
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;
         CREATE TABLE kv (key TEXT PRIMARY KEY, value BLOB NOT NULL);",
    )?;
    let value = vec![b'x'; VALUE_SIZE];
    let mut stmt = conn.prepare("INSERT INTO kv (key, value) VALUES (?1, ?2)")?;
    let mut latencies = Vec::new();
    let start = Instant::now();
    let mut i = 0u64;
    while start.elapsed() < phase {
        let t = Instant::now();
        stmt.execute(rusqlite::params![format!("/baseline/{i}"), value])?;
        latencies.push(t.elapsed());
        i += 1;
    }
    Ok(Throughput { per_second: i as f64 / start.elapsed().as_secs_f64(), latencies: Latencies::new(latencies) })
}

/// Durable creates of 1 KiB values by `writers` concurrent writers for `phase`.
pub(super) async fn concurrent_writes<S: Store>(store: &Arc<S>, writers: usize, phase: Duration) -> anyhow::Result<Throughput> {
    let value = Bytes::from(vec![b'x'; VALUE_SIZE]);
    let store = store.clone();
    timed_writers(writers, phase, move |w, i| {
        let (store, value) = (store.clone(), value.clone());
        async move {
            match store.write(Write::Create { key: format!("/bench/w{writers}/{w}/{i}"), value }).await? {
                WriteResult::Committed(_) => Ok(()),
                WriteResult::Rejected { .. } => anyhow::bail!("benchmark keys are unique"),
            }
        }
    })
    .await
}

/// Runs `writers` concurrent writers for `phase`, each calling `write(writer, n)` for its n-th
/// write, timing every one.
pub(super) async fn timed_writers<F, Fut>(writers: usize, phase: Duration, write: F) -> anyhow::Result<Throughput>
where
    F: Fn(usize, u64) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = anyhow::Result<()>> + Send,
{
    let start = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..writers {
        let write = write.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut i = 0u64;
            while start.elapsed() < phase {
                let t = Instant::now();
                write(w, i).await?;
                latencies.push(t.elapsed());
                i += 1;
            }
            anyhow::Ok(latencies)
        }));
    }
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.context("writer task")??);
    }
    let per_second = latencies.len() as f64 / start.elapsed().as_secs_f64();
    Ok(Throughput { per_second, latencies: Latencies::new(latencies) })
}

/// Writes 10,000 keys, then times full ranges over them and a watch replaying their creation.
async fn range_and_replay(store: &Arc<SqliteStore>) -> anyhow::Result<(f64, f64)> {
    let before = store.current_revision().await?;
    fill_range(store).await?;
    let range_ms = super::median_of_five_ms(|| async {
        let response = store.range(RangeRequest { prefix: "/bench/range/".into(), ..Default::default() }).await?;
        anyhow::ensure!(response.kvs.len() == RANGE_KEYS, "range returned {} keys", response.kvs.len());
        Ok(())
    })
    .await?;

    let t = Instant::now();
    let mut watcher = store.watch("/bench/range/", before).await?;
    let mut seen = 0;
    while seen < RANGE_KEYS {
        seen += watcher.next_batch().await?.len();
    }
    let replay_per_s = seen as f64 / t.elapsed().as_secs_f64();
    Ok((range_ms, replay_per_s))
}

/// Writes the 10,000 keys the range figures read, from 64 writers.
pub(super) async fn fill_range<S: Store>(store: &Arc<S>) -> anyhow::Result<()> {
    let value = Bytes::from(vec![b'x'; VALUE_SIZE]);
    let mut tasks = Vec::new();
    for w in 0..64 {
        let store = store.clone();
        let value = value.clone();
        tasks.push(tokio::spawn(async move {
            for i in (w..RANGE_KEYS).step_by(64) {
                store.write(Write::Create { key: format!("/bench/range/{i:05}"), value: value.clone() }).await?;
            }
            anyhow::Ok(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok(())
}

/// Events per second delivered to a live watcher while 64 writers write.
async fn live_watch(store: &Arc<SqliteStore>, phase: Duration) -> anyhow::Result<f64> {
    let from = store.current_revision().await?;
    let mut watcher = store.watch("/bench/w64-live/", from).await?;
    let value = Bytes::from(vec![b'x'; VALUE_SIZE]);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..64 {
        let store = store.clone();
        let value = value.clone();
        tasks.push(tokio::spawn(async move {
            let mut n = 0usize;
            while start.elapsed() < phase {
                store.write(Write::Create { key: format!("/bench/w64-live/{w}/{n}"), value: value.clone() }).await?;
                n += 1;
            }
            anyhow::Ok(n)
        }));
    }
    let mut written = 0;
    for task in tasks {
        written += task.await??;
    }
    let mut seen = 0;
    while seen < written {
        seen += watcher.next_batch().await?.len();
    }
    Ok(seen as f64 / start.elapsed().as_secs_f64())
}
