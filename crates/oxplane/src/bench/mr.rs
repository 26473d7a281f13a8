//! `oxplane bench mr`: how fast managed resources become Ready. 5,000 NopResources whose
//! `conditionAfter` is 0s are created through HTTPS against `oxplane up --provider
//! provider-nop`, and the time until every one is Ready is measured, with the reconciles per
//! second the controller did meanwhile; the baseline, in the same run, is the same creates
//! against a server that serves the kind but runs no controller (the API alone).

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};
use oxplane_runtime::provider::BuiltinProvider;
use serde_json::json;

use super::process::ServerProcess;
use super::Report;

/// Flags of `oxplane bench mr`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// NopResources created.
    #[arg(long, default_value_t = 5_000)]
    resources: usize,
    /// Concurrent creating clients.
    #[arg(long, default_value_t = 32)]
    clients: usize,
    /// Where to put the benchmark's data (a temporary directory inside it is removed
    /// afterwards). Defaults to the system's temporary directory.
    #[arg(long)]
    dir: Option<PathBuf>,
}

const PACKAGE: &str = "xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0";

fn nops(client: &kube::Client) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("nop.crossplane.io", "v1alpha1", "NopResource"), "nopresources");
    Api::all_with(client.clone(), &resource)
}

fn nop(name: &str) -> anyhow::Result<DynamicObject> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource",
        "metadata": {"name": name},
        "spec": {"forProvider": {"conditionAfter": [{"time": "0s", "conditionType": "Ready", "conditionStatus": "True"}]}}
    }))?)
}

/// Creates `count` NopResources with `clients` concurrent requests; returns the seconds taken.
async fn create_all(api: &Api<DynamicObject>, count: usize, clients: usize) -> anyhow::Result<f64> {
    let started = Instant::now();
    futures::stream::iter(0..count)
        .map(|i| {
            let api = api.clone();
            async move { api.create(&PostParams::default(), &nop(&format!("nop-{i}"))?).await.map(|_| ()).context("create") }
        })
        .buffer_unordered(clients)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(started.elapsed().as_secs_f64())
}

fn is_ready(object: &DynamicObject) -> bool {
    object.data["status"]["conditions"]
        .as_array()
        .is_some_and(|c| c.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
}

/// Total reconciles of the NopResource controller, from `/metrics`.
async fn reconciles(client: &kube::Client) -> anyhow::Result<f64> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    let text = client.request_text(request).await?;
    Ok(text
        .lines()
        .filter(|l| l.starts_with("oxplane_reconciles_total{controller=\"managed/nopresource.nop.crossplane.io\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum())
}

/// Runs the benchmark.
pub fn run(args: Args) -> anyhow::Result<()> {
    let base = args.dir.clone().unwrap_or_else(std::env::temp_dir);
    let tmp = tempfile::Builder::new().prefix("oxplane-bench-mr-").tempdir_in(&base)?;
    let runtime = tokio::runtime::Runtime::new()?;
    let mut report = Report::new("mr");
    runtime.block_on(async {
        // Baseline: the kind served, no controller.
        let plain = ServerProcess::start(&tmp.path().join("api-only"))?;
        let client = plain.client().await?;
        let crds: Api<DynamicObject> = Api::all_with(
            client.clone(),
            &ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"), "customresourcedefinitions"),
        );
        for crd in oxplane_providers::nop::NopProvider.crds(PACKAGE) {
            crds.create(&PostParams::default(), &serde_json::from_value(crd)?).await?;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let api_only = create_all(&nops(&client), args.resources, args.clients).await?;
        report.add("api_only_5000_create_s", api_only, "s");
        drop(client);
        drop(plain);

        // With provider-nop's controller.
        let server = ServerProcess::start_with(&tmp.path().join("controller"), &["--provider", "provider-nop"])?;
        let client = server.client().await?;
        let api = nops(&client);
        let deadline = Instant::now() + Duration::from_secs(60);
        while api.list(&Default::default()).await.is_err() {
            if Instant::now() > deadline {
                bail!("provider-nop was not installed");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let before = reconciles(&client).await?;
        let watch_api = api.clone();
        let total = args.resources;
        let readiness = tokio::spawn(async move {
            let mut ready = HashSet::new();
            let mut stream = watcher(watch_api, watcher::Config::default()).applied_objects().boxed();
            while ready.len() < total {
                match stream.try_next().await {
                    Ok(Some(object)) if is_ready(&object) => {
                        if let Some(name) = object.metadata.name {
                            ready.insert(name);
                        }
                    }
                    Ok(Some(_)) => {}
                    Ok(None) => break,
                    Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            }
            Instant::now()
        });
        let started = Instant::now();
        let create_s = create_all(&api, args.resources, args.clients).await?;
        let all_ready = tokio::time::timeout(Duration::from_secs(600), readiness).await.context("resources did not become Ready in 10 minutes")??;
        let ready_s = all_ready.duration_since(started).as_secs_f64();
        let done = reconciles(&client).await? - before;
        report.add("mr_5000_ready_s", ready_s, "s");
        report.add("mr_create_s", create_s, "s");
        report.add("mr_reconciles", done, "reconciles");
        report.add("mr_reconciles_per_s", done / ready_s.max(f64::MIN_POSITIVE), "reconciles/s");
        report.add("ready_to_api_only_ratio", ready_s / api_only.max(f64::MIN_POSITIVE), "x");
        report.add("server_rss_mb", server.rss_mb()?, "MiB");
        anyhow::Ok(())
    })?;
    report.print(args.json)
}
