//! `oxplane bench api --store etcd`: the API server on a real etcd cluster, measured from
//! outside as `bench api` measures it, beside two baselines of the same run: the same server on
//! its embedded SQLite store, and raw etcd (compare-and-create transactions sent straight to
//! etcd by 32 writers, what the store sends for each create, with no server in between).
//! Without `--etcd`, a private 3-member cluster is started with its data in the benchmark's
//! directory (the disk SQLite uses).

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use etcd_client::Client;

use super::Report;
use super::api::{http_creates, list_objects, watch_fanout};
use super::process::ServerProcess;
use super::store_etcd::{cluster_or, raw_etcd_writes};

/// How much each measurement does.
pub(super) struct Sizes {
    /// How long each create phase runs.
    pub phase: Duration,
    /// Objects in the LIST measurement.
    pub list_objects: usize,
    /// Watchers in the fan-out measurement.
    pub watchers: usize,
}

/// Runs the etcd part of the API benchmark into `report`.
pub(super) fn run(report: &mut Report, endpoints: Vec<String>, dir: &Path, sizes: Sizes) -> anyhow::Result<()> {
    // Kept alive until the end: dropping it stops the private cluster.
    let (cluster, endpoints) = cluster_or(endpoints, dir);
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let etcd = Client::connect(endpoints.clone(), None).await.context("connecting to etcd")?;
        let prefix = format!("/oxplane-bench-api-{}", std::process::id());
        let raw = raw_etcd_writes(&etcd, &format!("{prefix}-raw"), 32, sizes.phase).await?;

        let joined = endpoints.join(",");
        let server = ServerProcess::start_with(&dir.join("etcd-server"), &["--etcd", &joined, "--etcd-prefix", &prefix])?;
        let client = server.client().await?;
        let c1 = http_creates(&client, "c1", 1, sizes.phase).await?;
        let c32 = http_creates(&client, "c32", 32, sizes.phase).await?;
        let list_ms = list_objects(&client, sizes.list_objects).await?;
        let (p50, p99) = watch_fanout(&client, sizes.watchers).await?;
        drop(client);
        drop(server);

        let sqlite_server = ServerProcess::start(&dir.join("sqlite-server"))?;
        let sqlite_client = sqlite_server.client().await?;
        let sqlite_c32 = http_creates(&sqlite_client, "c32", 32, sizes.phase).await?;
        drop(sqlite_client);
        drop(sqlite_server);

        report.add("raw_etcd_writes_per_s_c32", raw.per_second, "writes/s");
        report.add("etcd_http_creates_per_s_c1", c1, "creates/s");
        report.add("etcd_http_creates_per_s_c32", c32, "creates/s");
        report.add("sqlite_http_creates_per_s_c32", sqlite_c32, "creates/s");
        // Below 1 the server on etcd creates slower than raw etcd takes writes, by that factor.
        report.add("etcd_http_to_raw_etcd_ratio_c32", c32 / raw.per_second.max(f64::MIN_POSITIVE), "x");
        report.add("sqlite_http_over_etcd_http_c32", sqlite_c32 / c32.max(f64::MIN_POSITIVE), "x");
        report.add("etcd_list_10k_ms", list_ms, "ms");
        report.add("etcd_watch_fanout_p50_ms", p50, "ms");
        report.add("etcd_watch_fanout_p99_ms", p99, "ms");
        anyhow::Ok(())
    })?;
    drop(runtime);
    drop(cluster);
    Ok(())
}
