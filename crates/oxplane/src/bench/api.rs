//! `oxplane bench api`: the API server measured from outside, through HTTPS with kube-rs, beside
//! the raw store in the same run: creates per second (1 and 32 clients; with 32 also as a user
//! RBAC decides for, by client certificate and by ServiceAccount token, beside the admin whom
//! RBAC lets through unchecked; and what authenticating one token costs, in process: see
//! `api_tokens`), LIST of 10,000
//! objects, watch fan-out latency (one write, 100 watchers), and CRD scale (1,000 CRDs with
//! 50-property schemas: server RSS, time to establish, cold `kubectl api-resources`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use oxplane_apiserver::server::{kubeconfig, tls};
use oxplane_store::sqlite::{SqliteOptions, SqliteStore};
use oxplane_store::CompactionPolicy;
use serde_json::json;

use super::process::ServerProcess;
use super::{Latencies, Report};

/// Flags of `oxplane bench api`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// How long each create phase runs, in seconds.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Objects in the LIST measurement.
    #[arg(long, default_value_t = 10_000)]
    list_objects: usize,
    /// CRDs in the CRD-scale measurement.
    #[arg(long, default_value_t = 1_000)]
    crds: usize,
    /// Watchers in the fan-out measurement.
    #[arg(long, default_value_t = 100)]
    watchers: usize,
    /// Where to put the benchmark's data (a temporary directory inside it is removed
    /// afterwards). Defaults to the system's temporary directory.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The server's store: sqlite (beside the raw store), or etcd (beside the same server on
    /// SQLite and raw etcd).
    #[arg(long, value_enum, default_value = "sqlite")]
    store: crate::server_flags::StoreKind,
    /// etcd client URLs for `--store etcd`; without them a private 3-member cluster is started.
    #[arg(long, value_name = "URL[,URL...]", value_delimiter = ',')]
    etcd: Vec<String>,
}

fn config_map(name: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.to_string());
    cm.data = Some([("payload".to_string(), "x".repeat(1024))].into());
    cm
}

/// Runs the benchmark.
pub fn run(args: Args) -> anyhow::Result<()> {
    let base = args.dir.clone().unwrap_or_else(std::env::temp_dir);
    let tmp = tempfile::Builder::new().prefix("oxplane-bench-api-").tempdir_in(&base)?;
    let phase = Duration::from_secs_f64(args.seconds);
    let mut report = Report::new("api");
    match args.store {
        crate::server_flags::StoreKind::Sqlite => {}
        crate::server_flags::StoreKind::Etcd => {
            let sizes = super::api_etcd::Sizes { phase, list_objects: args.list_objects, watchers: args.watchers };
            super::api_etcd::run(&mut report, args.etcd, tmp.path(), sizes)?;
            return report.print(args.json);
        }
        crate::server_flags::StoreKind::Memory => anyhow::bail!("bench api measures sqlite or etcd"),
    }
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let store_rate = raw_store_writes(&tmp.path().join("raw"), 32, phase).await?;

        let token_file = tmp.path().join("tokens.csv");
        std::fs::write(&token_file, format!("{},{LONG_TOKEN_USER},{LONG_TOKEN_USER},\n", long_token()?))?;
        let token_flag = token_file.to_string_lossy().into_owned();
        let server = ServerProcess::start_with(&tmp.path().join("server"), &["--token-auth-file", &token_flag])?;
        let client = server.client().await?;
        let c1 = http_creates(&client, "c1", 1, phase).await?;
        let (c32, cpu_admin) = server_cpu(&server, phase, http_creates(&client, "c32", 32, phase)).await?;
        report.add("http_creates_per_s_c1", c1, "creates/s");
        report.add("http_creates_per_s_c32", c32, "creates/s");
        // RBAC on: the same creates by a user and a ServiceAccount bound to `edit`.
        let (user, long, robot) = rbac_clients(&server, &client, &token_file).await?;
        let (c32_user, cpu_user) = server_cpu(&server, phase, http_creates_in(&user, RBAC_NAMESPACE, "user", 32, phase)).await?;
        let (c32_long, cpu_long) = server_cpu(&server, phase, http_creates_in(&long, RBAC_NAMESPACE, "long", 32, phase)).await?;
        let (c32_robot, cpu_robot) = server_cpu(&server, phase, http_creates_in(&robot, RBAC_NAMESPACE, "robot", 32, phase)).await?;
        // The admin again, after them: the store has grown by every phase before, so the
        // baseline is the mean of the admin's phases before and after the checked ones.
        let (c32_again, cpu_again) = server_cpu(&server, phase, http_creates_in(&client, RBAC_NAMESPACE, "again", 32, phase)).await?;
        let baseline = ((c32 + c32_again) / 2.0).max(f64::MIN_POSITIVE);
        // The server's CPU time per create: what each identity costs, whatever else the
        // machine runs meanwhile (throughput on a busy machine says little).
        report.add("server_cpu_us_per_create_c32_admin", (cpu_admin + cpu_again) / 2.0, "us");
        report.add("server_cpu_us_per_create_c32_rbac_user", cpu_user, "us");
        report.add("server_cpu_us_per_create_c32_rbac_long_static_token", cpu_long, "us");
        report.add("server_cpu_us_per_create_c32_rbac_service_account", cpu_robot, "us");
        report.add("http_creates_per_s_c32_rbac_user", c32_user, "creates/s");
        report.add("http_creates_per_s_c32_rbac_long_static_token", c32_long, "creates/s");
        report.add("http_creates_per_s_c32_rbac_service_account", c32_robot, "creates/s");
        report.add("http_creates_per_s_c32_again", c32_again, "creates/s");
        report.add("rbac_cost_c32_percent", (1.0 - c32_user / baseline) * 100.0, "%");
        report.add("service_account_cost_c32_percent", (1.0 - c32_robot / baseline) * 100.0, "%");
        super::api_tokens::token_costs(&mut report).await?;
        report.add("store_writes_per_s_c32", store_rate, "writes/s");
        report.add("http_to_store_ratio_c32", c32 / store_rate.max(f64::MIN_POSITIVE), "x");

        let list_ms = list_objects(&client, args.list_objects).await?;
        report.add("list_10k_ms", list_ms, "ms");

        let (p50, p99) = watch_fanout(&client, args.watchers).await?;
        report.add("watch_fanout_p50_ms", p50, "ms");
        report.add("watch_fanout_p99_ms", p99, "ms");
        drop(client);
        drop(server);

        let crd_server = ServerProcess::start(&tmp.path().join("crds"))?;
        let crd_client = crd_server.client().await?;
        let rss_before = crd_server.rss_mb()?;
        let establish_s = create_crds(&crd_client, args.crds).await?;
        let rss_after = crd_server.rss_mb()?;
        report.add("crd_1000_establish_s", establish_s, "s");
        report.add("crd_1000_rss_mb", rss_after, "MiB");
        report.add("crd_rss_per_crd_kb", (rss_after - rss_before) * 1024.0 / args.crds.max(1) as f64, "KiB");
        report.add("discovery_cold_s", cold_discovery(&crd_server.dir)?, "s");
        anyhow::Ok(())
    })?;
    report.print(args.json)
}

/// Durable store writes per second with `writers` concurrent writers of 1 KiB values, on a
/// store of its own (the figure `bench store` reports).
pub(super) async fn raw_store_writes(dir: &Path, writers: usize, phase: Duration) -> anyhow::Result<f64> {
    let options = SqliteOptions { compaction: CompactionPolicy::disabled(), ..SqliteOptions::default() };
    let store = Arc::new(SqliteStore::open(dir, options)?);
    Ok(super::store::concurrent_writes(&store, writers, phase).await?.per_second)
}

/// The namespace the RBAC-checked clients write in.
const RBAC_NAMESPACE: &str = "bench-rbac";

async fn client_from(kubeconfig_text: &str) -> anyhow::Result<kube::Client> {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(kubeconfig_text)?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
    Ok(kube::Client::try_from(config)?)
}

/// The user of the static token as long as a ServiceAccount token: what the ServiceAccount's
/// creates are compared with, so that the token's size on the wire (parsed in every request)
/// is told apart from what verifying it costs.
const LONG_TOKEN_USER: &str = "bench-long-token";

/// A random token of 1,000 characters (a bound ServiceAccount token's size).
fn long_token() -> anyhow::Result<String> {
    use base64::Engine;
    use std::io::Read;
    let mut bytes = [0u8; 750];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

/// Clients RBAC decides for, each bound to `edit` in [`RBAC_NAMESPACE`]: a user with a client
/// certificate, the user of the long static token in `token_file`, and a ServiceAccount with a
/// token from the `token` subresource.
async fn rbac_clients(server: &ServerProcess, admin: &kube::Client, token_file: &Path) -> anyhow::Result<(kube::Client, kube::Client, kube::Client)> {
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(admin.clone());
    namespaces.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": RBAC_NAMESPACE}}))?).await?;
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> = Api::namespaced(admin.clone(), RBAC_NAMESPACE);
    accounts.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "bench-robot"}}))?).await?;
    let bindings: Api<k8s_openapi::api::rbac::v1::RoleBinding> = Api::namespaced(admin.clone(), RBAC_NAMESPACE);
    let binding = json!({
        "metadata": {"name": "bench-edit"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [
            {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "bench-user"},
            {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": LONG_TOKEN_USER},
            {"kind": "ServiceAccount", "name": "bench-robot", "namespace": RBAC_NAMESPACE},
        ],
    });
    bindings.create(&PostParams::default(), &serde_json::from_value(binding)?).await?;

    let admin_config: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(server.dir.join(kubeconfig::KUBECONFIG_FILE))?)?;
    let url = admin_config["clusters"][0]["cluster"]["server"].as_str().context("the kubeconfig names no server")?;
    let ca = std::fs::read_to_string(server.dir.join("pki").join("ca.crt"))?;
    let (cert, key) = tls::issue_client_certificate(&server.dir, "bench-user", &[])?;
    let user = client_from(&kubeconfig::render_with_certificate(url, &ca, "bench-user", &cert, &key)).await?;

    let body = serde_json::to_vec(&json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}))?;
    let request = http::Request::post(format!("/api/v1/namespaces/{RBAC_NAMESPACE}/serviceaccounts/bench-robot/token"))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(body)?;
    let answer: serde_json::Value = admin.request(request).await?;
    let token = answer["status"]["token"].as_str().context("the TokenRequest was answered without a token")?;
    let robot = client_from(&kubeconfig::render(url, &ca, token)).await?;
    let long_token = std::fs::read_to_string(token_file)?.split(',').next().unwrap_or_default().to_string();
    let long = client_from(&kubeconfig::render(url, &ca, &long_token)).await?;
    Ok((user, long, robot))
}

/// The rate `creates` measures over `phase`, and the server's CPU microseconds per create
/// meanwhile.
async fn server_cpu(server: &ServerProcess, phase: Duration, creates: impl std::future::Future<Output = anyhow::Result<f64>>) -> anyhow::Result<(f64, f64)> {
    let before = server.cpu_seconds()?;
    let rate = creates.await?;
    let used = server.cpu_seconds()? - before;
    Ok((rate, used * 1e6 / (rate * phase.as_secs_f64()).max(1.0)))
}

/// ConfigMap creates per second in `default` through HTTPS with `clients` concurrent clients.
pub(super) async fn http_creates(client: &kube::Client, tag: &str, clients: usize, phase: Duration) -> anyhow::Result<f64> {
    http_creates_in(client, "default", tag, clients, phase).await
}

/// [`http_creates`] in `namespace`.
async fn http_creates_in(client: &kube::Client, namespace: &str, tag: &str, clients: usize, phase: Duration) -> anyhow::Result<f64> {
    // Each client sends the create and reads the whole answer, but does not decode it: on a
    // machine the client shares with the server, decoding would take CPU from the server
    // being measured (the raw-store baseline has no client at all).
    let start = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let client = client.clone();
        let tag = tag.to_string();
        let path = format!("/api/v1/namespaces/{namespace}/configmaps");
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while start.elapsed() < phase {
                let body = serde_json::to_vec(&config_map(&format!("create-{tag}-{c}-{n}")))?;
                let request = http::Request::post(path.as_str())
                    .header(http::header::CONTENT_TYPE, "application/json")
                    .body(kube::client::Body::from(body))?;
                let response = client.send(request).await?;
                let status = response.status();
                let answer = http_body_util::BodyExt::collect(response.into_body()).await?.to_bytes();
                anyhow::ensure!(status == http::StatusCode::CREATED, "create answered {status}: {}", String::from_utf8_lossy(&answer));
                n += 1;
            }
            anyhow::Ok(n)
        }));
    }
    let mut total = 0;
    for task in tasks {
        total += task.await??;
    }
    Ok(total as f64 / start.elapsed().as_secs_f64())
}

/// Creates `count` ConfigMaps in a fresh namespace, then times a LIST of all of them.
pub(super) async fn list_objects(client: &kube::Client, count: usize) -> anyhow::Result<f64> {
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let mut ns = k8s_openapi::api::core::v1::Namespace::default();
    ns.metadata.name = Some("bench-list".into());
    namespaces.create(&PostParams::default(), &ns).await?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "bench-list");
    let mut tasks = Vec::new();
    for c in 0..32 {
        let api = api.clone();
        tasks.push(tokio::spawn(async move {
            for i in (c..count).step_by(32) {
                api.create(&PostParams::default(), &config_map(&format!("item-{i:05}"))).await?;
            }
            anyhow::Ok(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    super::median_of_five_ms(|| async {
        let list = api.list(&ListParams::default()).await?;
        anyhow::ensure!(list.items.len() == count, "listed {} of {count}", list.items.len());
        Ok(())
    })
    .await
}

/// Latency from a write to its delivery on each of `watchers` watches, over 20 writes.
pub(super) async fn watch_fanout(client: &kube::Client, watchers: usize) -> anyhow::Result<(f64, f64)> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let target = "fanout";
    api.create(&PostParams::default(), &config_map(target)).await?;
    let rv = api.get(target).await?.metadata.resource_version.unwrap_or_default();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(String, Instant)>();
    let mut streams = Vec::new();
    for _ in 0..watchers {
        let api = api.clone();
        let tx = tx.clone();
        let rv = rv.clone();
        streams.push(tokio::spawn(async move {
            let params = WatchParams::default().fields(&format!("metadata.name={target}")).timeout(290);
            let mut stream = api.watch(&params, &rv).await?.boxed();
            while let Some(event) = stream.next().await {
                if let WatchEvent::Modified(cm) = event? {
                    let round = cm.metadata.annotations.and_then(|a| a.get("round").cloned()).unwrap_or_default();
                    if tx.send((round, Instant::now())).is_err() {
                        break;
                    }
                }
            }
            anyhow::Ok(())
        }));
    }
    drop(tx);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut latencies = Vec::new();
    // Round 0 warms up and is not counted: it is the first write after the list phase's
    // 10,000 creates, and pays for the store's catching up (WAL checkpoint) rather than for
    // delivering to watchers.
    for round in 0..=20 {
        let patch = json!({"metadata": {"annotations": {"round": round.to_string()}}});
        let sent = Instant::now();
        api.patch(target, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch)).await?;
        let mut delivered = 0;
        while delivered < watchers {
            let (got, at) = tokio::time::timeout(Duration::from_secs(30), rx.recv())
                .await
                .context("watch delivery timed out")?
                .context("watchers ended")?;
            if got == round.to_string() {
                if round > 0 {
                    latencies.push(at.duration_since(sent));
                }
                delivered += 1;
            }
        }
    }
    for stream in streams {
        stream.abort();
    }
    let latencies = Latencies::new(latencies);
    Ok((latencies.percentile_ms(50.0), latencies.percentile_ms(99.0)))
}

/// A CRD with a 50-property spec schema.
fn wide_crd(i: usize) -> anyhow::Result<CustomResourceDefinition> {
    let properties: serde_json::Map<String, serde_json::Value> = (0..50)
        .map(|p| (format!("field{p}"), json!({"type": "string", "description": format!("Field number {p}.")})))
        .collect();
    Ok(serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("things{i}.bench{i}.example.com")},
        "spec": {"group": format!("bench{i}.example.com"), "scope": "Cluster",
                 "names": {"plural": format!("things{i}"), "kind": format!("Thing{i}")},
                 "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                   "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                       "spec": {"type": "object", "properties": properties},
                       "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}
    }))?)
}

/// Seconds to create and establish `count` CRDs (8 clients).
async fn create_crds(client: &kube::Client, count: usize) -> anyhow::Result<f64> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let start = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..8 {
        let api = api.clone();
        tasks.push(tokio::spawn(async move {
            for i in (c..count).step_by(8) {
                let created = api.create(&PostParams::default(), &wide_crd(i)?).await?;
                let established = created
                    .status
                    .and_then(|s| s.conditions)
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Established" && c.status == "True"));
                anyhow::ensure!(established, "CRD {i} was not established");
            }
            anyhow::Ok(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok(start.elapsed().as_secs_f64())
}

/// Seconds for `kubectl api-resources` with an empty discovery cache.
fn cold_discovery(server_dir: &Path) -> anyhow::Result<f64> {
    let home = tempfile::tempdir()?;
    let start = Instant::now();
    let out = Command::new("kubectl")
        .arg("api-resources")
        .env("KUBECONFIG", server_dir.join("kubeconfig"))
        .env("HOME", home.path())
        .output()
        .context("running kubectl (needed for discovery_cold_s)")?;
    let elapsed = start.elapsed().as_secs_f64();
    anyhow::ensure!(out.status.success(), "kubectl api-resources failed: {}", String::from_utf8_lossy(&out.stderr));
    Ok(elapsed)
}
