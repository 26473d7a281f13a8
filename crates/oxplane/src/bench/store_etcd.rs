//! `oxplane bench store --store etcd`: the store's writes on a real etcd cluster beside the
//! same load sent straight to etcd (the raw-etcd baseline: one compare-and-create transaction
//! per write, exactly what the store sends, without the store's layer), and the embedded
//! SQLite store at 64 writers beside both. Without `--etcd`, a private 3-member cluster is
//! started on 127.0.0.1 with its data in the benchmark's directory (the same disk SQLite uses).

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use etcd_client::{Client, Compare, CompareOp, Txn, TxnOp};
use oxplane_store::etcd::EtcdStore;
use oxplane_store::etcd::testing::EtcdCluster;
use oxplane_store::sqlite::{SqliteOptions, SqliteStore};
use oxplane_store::{CompactionPolicy, RangeRequest, Store};

use super::Report;
use super::store::{RANGE_KEYS, Throughput, VALUE_SIZE, concurrent_writes, fill_range, timed_writers};

/// Runs the etcd part of the store benchmark into `report`.
pub(super) fn run(report: &mut Report, endpoints: Vec<String>, dir: &std::path::Path, phase: Duration) -> anyhow::Result<()> {
    // Kept alive until the end: dropping it stops the private cluster.
    let (cluster, endpoints) = cluster_or(endpoints, dir);
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let client = Client::connect(endpoints.clone(), None).await.context("connecting to etcd")?;
        let prefix = format!("/oxplane-bench-{}", std::process::id());
        let mut options = oxplane_store::etcd::EtcdOptions::new(endpoints.clone());
        options.prefix = prefix.clone();
        options.compaction = CompactionPolicy::disabled();
        let store = Arc::new(EtcdStore::open(options).await?);
        let sqlite = Arc::new(SqliteStore::open(
            &dir.join("sqlite"),
            SqliteOptions { compaction: CompactionPolicy::disabled(), ..SqliteOptions::default() },
        )?);
        for writers in [1, 16, 64] {
            let raw = raw_etcd_writes(&client, &format!("{prefix}-raw/w{writers}"), writers, phase).await?;
            let ours = concurrent_writes(&store, writers, phase).await?;
            report.add(format!("raw_etcd_writes_per_s_w{writers}"), raw.per_second, "writes/s");
            report.add(format!("raw_etcd_p50_ms_w{writers}"), raw.latencies.percentile_ms(50.0), "ms");
            report.add(format!("etcd_store_writes_per_s_w{writers}"), ours.per_second, "writes/s");
            report.add(format!("etcd_store_p50_ms_w{writers}"), ours.latencies.percentile_ms(50.0), "ms");
            report.add(format!("etcd_store_p99_ms_w{writers}"), ours.latencies.percentile_ms(99.0), "ms");
            // Above 1 the store is slower than raw etcd by that factor.
            report.add(format!("raw_etcd_over_store_w{writers}"), raw.per_second / ours.per_second.max(f64::MIN_POSITIVE), "x");
            if writers == 64 {
                let embedded = concurrent_writes(&sqlite, writers, phase).await?;
                report.add("sqlite_writes_per_s_w64", embedded.per_second, "writes/s");
                report.add("sqlite_over_raw_etcd_w64", embedded.per_second / raw.per_second.max(f64::MIN_POSITIVE), "x");
            }
        }
        // Range: 10,000 keys through the store beside the same range read straight from etcd.
        fill_range(&store).await?;
        let store_ms = super::median_of_five_ms(|| async {
            let response = store.range(RangeRequest { prefix: "/bench/range/".into(), ..Default::default() }).await?;
            anyhow::ensure!(response.kvs.len() == RANGE_KEYS, "range returned {} keys", response.kvs.len());
            Ok(())
        })
        .await?;
        let raw_key = format!("{prefix}/data/bench/range/");
        let raw_ms = super::median_of_five_ms(|| async {
            let mut kv = client.kv_client().max_decoding_message_size(oxplane_store::etcd::MAX_MESSAGE_BYTES);
            let response = kv.get(raw_key.as_str(), Some(etcd_client::GetOptions::new().with_prefix())).await?;
            anyhow::ensure!(response.kvs().len() == RANGE_KEYS, "raw range returned {} keys", response.kvs().len());
            Ok(())
        })
        .await?;
        report.add("etcd_store_range_10k_ms", store_ms, "ms");
        report.add("raw_etcd_range_10k_ms", raw_ms, "ms");
        anyhow::Ok(())
    })?;
    drop(runtime);
    drop(cluster);
    Ok(())
}

/// The given etcd endpoints, or a private 3-member cluster's with its data in `dir` (stopped
/// when the returned cluster is dropped).
pub(super) fn cluster_or(endpoints: Vec<String>, dir: &std::path::Path) -> (Option<EtcdCluster>, Vec<String>) {
    if endpoints.is_empty() {
        let cluster = EtcdCluster::start_in(dir, 3);
        let endpoints = cluster.endpoints();
        (Some(cluster), endpoints)
    } else {
        (None, endpoints)
    }
}

/// `writers` concurrent writers each sending compare-and-create transactions of 1 KiB values
/// straight to etcd for `phase`.
pub(super) async fn raw_etcd_writes(client: &Client, prefix: &str, writers: usize, phase: Duration) -> anyhow::Result<Throughput> {
    let value = vec![b'x'; VALUE_SIZE];
    let (client, prefix) = (client.clone(), prefix.to_string());
    timed_writers(writers, phase, move |w, i| {
        let (mut kv, value) = (client.kv_client(), value.clone());
        let key = format!("{prefix}/{w}/{i}");
        async move {
            let txn = Txn::new()
                .when([Compare::create_revision(key.as_str(), CompareOp::Equal, 0)])
                .and_then([TxnOp::put(key.as_str(), value, None)])
                .or_else([TxnOp::get(key.as_str(), None)]);
            let response = kv.txn(txn).await?;
            anyhow::ensure!(response.succeeded(), "benchmark keys are unique");
            Ok(())
        }
    })
    .await
}
