//! `oxplane bench compose`: composition at scale. Against `oxplane up --provider
//! provider-nop`, 1,000 XRs each composing 3 NopResources (Ready at once) through
//! patch-and-transform and auto-ready are created through HTTPS; measured: the time until every
//! XR is Ready, the XR reconciles per second meanwhile, the server's peak RSS, and how long a
//! change of a composed resource takes to show in its XR's status (p50/p99). The baseline, in
//! the same run, is creating the same XRs and their 3,000 NopResources through the API with no
//! controller at all. Then, on a fresh server, the same XRs composed by a function-go-templating
//! Composition of the same shape (three NopResources, the size copied in, the marker copied
//! back): `xr_1000_ready_gotemplating_s`, beside its ratio to the patch-and-transform run.
//! Last, on a fresh server, the patch-and-transform run again with patch-and-transform served
//! by `oxplane function serve` as its own process and called over gRPC with mutual TLS:
//! `xr_1000_ready_external_s` and its ratio to the in-process run, and the latency of one
//! function call (`function_call_p50_ms`/`p99_ms`, from the server's call histogram) beside
//! the in-process calls' of the first run (`function_call_in_process_p50_ms`/`p99_ms`).

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};

use super::process::ServerProcess;
use super::{Latencies, Report};

/// Flags of `oxplane bench compose`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// XRs created.
    #[arg(long, default_value_t = 1_000)]
    xrs: usize,
    /// Concurrent creating clients.
    #[arg(long, default_value_t = 32)]
    clients: usize,
    /// Composed-change latency samples.
    #[arg(long, default_value_t = 100)]
    samples: usize,
    /// Where to put the benchmark's data. Defaults to the system's temporary directory.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Extra arguments of the measured `oxplane up` (repeatable), e.g. `--server-arg=--watch-cache-window=10000`.
    #[arg(long = "server-arg", allow_hyphen_values = true)]
    server_args: Vec<String>,
}

const SETUP: &str = r#"
apiVersion: pkg.crossplane.io/v1
kind: Function
metadata: {name: function-patch-and-transform}
spec: {package: xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform:v0.8.2}
---
apiVersion: pkg.crossplane.io/v1
kind: Function
metadata: {name: function-auto-ready}
spec: {package: xpkg.crossplane.io/crossplane-contrib/function-auto-ready:v0.5.0}
---
apiVersion: pkg.crossplane.io/v1
kind: Function
metadata: {name: function-go-templating}
spec: {package: xpkg.crossplane.io/crossplane-contrib/function-go-templating:v0.9.2}
---
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata: {name: xbenches.bench.oxplane.io}
spec:
  group: bench.oxplane.io
  names: {kind: XBench, plural: xbenches}
  versions:
  - name: v1
    served: true
    referenceable: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {size: {type: string}}}
          status: {type: object, properties: {marker: {type: string}}}
"#;

const COMPOSITION: &str = r#"
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata: {name: xbenches}
spec:
  compositeTypeRef: {apiVersion: bench.oxplane.io/v1, kind: XBench}
  mode: Pipeline
  pipeline:
  - step: compose
    functionRef: {name: function-patch-and-transform}
    input:
      apiVersion: pt.fn.crossplane.io/v1beta1
      kind: Resources
      resources:
      - name: a
        base: &nop
          apiVersion: nop.crossplane.io/v1alpha1
          kind: NopResource
          spec: {forProvider: {conditionAfter: [{time: 0s, conditionType: Ready, conditionStatus: "True"}]}}
        patches:
        - {fromFieldPath: spec.size, toFieldPath: spec.forProvider.fields.size}
        - {type: ToCompositeFieldPath, fromFieldPath: spec.forProvider.fields.marker, toFieldPath: status.marker}
      - {name: b, base: *nop}
      - {name: c, base: *nop}
  - step: ready
    functionRef: {name: function-auto-ready}
"#;

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

async fn create_yaml(client: &kube::Client, yaml: &str) -> anyhow::Result<()> {
    for document in serde_saphyr::from_multiple::<Value>(yaml)? {
        let gvk = document["apiVersion"].as_str().unwrap_or_default().to_string();
        let (group, version) = gvk.split_once('/').context("apiVersion")?;
        let kind = document["kind"].as_str().unwrap_or_default();
        let (ar, _) = kube::discovery::pinned_kind(client, &GroupVersionKind::gvk(group, version, kind)).await?;
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
        api.create(&PostParams::default(), &serde_json::from_value(document)?).await?;
    }
    Ok(())
}

async fn wait_served(client: &kube::Client, group: &str, version: &str, kind: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while kube::discovery::pinned_kind(client, &GroupVersionKind::gvk(group, version, kind)).await.is_err() {
        if Instant::now() > deadline {
            bail!("{kind} was not served");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

fn ready(object: &DynamicObject) -> bool {
    object.data["status"]["conditions"].as_array().is_some_and(|c| c.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
}

async fn create_many(api: &Api<DynamicObject>, objects: Vec<DynamicObject>, clients: usize) -> anyhow::Result<()> {
    futures::stream::iter(objects)
        .map(|object| {
            let api = api.clone();
            async move { api.create(&PostParams::default(), &object).await.map(|_| ()).context("create") }
        })
        .buffer_unordered(clients)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

fn xr(i: usize) -> anyhow::Result<DynamicObject> {
    Ok(serde_json::from_value(json!({"apiVersion": "bench.oxplane.io/v1", "kind": "XBench", "metadata": {"name": format!("x{i}")}, "spec": {"size": "m"}}))?)
}

/// Reconciles of the XR controller so far, from `/metrics`.
async fn reconciles(client: &kube::Client) -> anyhow::Result<f64> {
    let text = client.request_text(http::Request::get("/metrics").body(Vec::new())?).await?;
    Ok(text
        .lines()
        .filter(|l| l.starts_with("oxplane_reconciles_total{controller=\"composite/xbenches.bench.oxplane.io\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum())
}

/// The same shape as [`COMPOSITION`], written as a Go template.
const GO_TEMPLATING_COMPOSITION: &str = r#"
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata: {name: xbenches}
spec:
  compositeTypeRef: {apiVersion: bench.oxplane.io/v1, kind: XBench}
  mode: Pipeline
  pipeline:
  - step: compose
    functionRef: {name: function-go-templating}
    input:
      apiVersion: gotemplating.fn.crossplane.io/v1beta1
      kind: GoTemplate
      source: Inline
      inline:
        template: |
          {{- $xr := .observed.composite.resource }}
          {{- range $name := list "a" "b" "c" }}
          ---
          apiVersion: nop.crossplane.io/v1alpha1
          kind: NopResource
          metadata:
            annotations:
              {{ setResourceNameAnnotation $name }}
          spec:
            forProvider:
              conditionAfter: [{time: 0s, conditionType: Ready, conditionStatus: "True"}]
              {{- if eq $name "a" }}
              fields:
                size: {{ $xr.spec.size }}
              {{- end }}
          {{- end }}
          {{- with getComposedResource . "a" }}{{ with .spec.forProvider.fields.marker }}
          ---
          apiVersion: bench.oxplane.io/v1
          kind: XBench
          status:
            marker: {{ . }}
          {{- end }}{{ end }}
  - step: ready
    functionRef: {name: function-auto-ready}
"#;

/// Creates `total` XRs on a server set up with `composition` and returns the seconds until
/// every one is Ready.
async fn xrs_ready(client: &kube::Client, composition: &str, total: usize, clients: usize) -> anyhow::Result<f64> {
    wait_served(client, "nop.crossplane.io", "v1alpha1", "NopResource").await?;
    create_yaml(client, SETUP).await?;
    wait_served(client, "bench.oxplane.io", "v1", "XBench").await?;
    create_yaml(client, composition).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let xr_api: Api<DynamicObject> = Api::all_with(client.clone(), &resource("bench.oxplane.io", "v1", "XBench", "xbenches"));
    let watch_api = xr_api.clone();
    let readiness = tokio::spawn(async move {
        let mut seen = HashSet::new();
        let mut stream = watcher(watch_api, watcher::Config::default()).applied_objects().boxed();
        while seen.len() < total {
            match stream.try_next().await {
                Ok(Some(object)) if ready(&object) => {
                    seen.insert(object.metadata.name.unwrap_or_default());
                }
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
        Instant::now()
    });
    let started = Instant::now();
    let xrs: Vec<DynamicObject> = (0..total).map(xr).collect::<anyhow::Result<_>>()?;
    create_many(&xr_api, xrs, clients).await?;
    let done = tokio::time::timeout(Duration::from_secs(600), readiness).await.context("XRs did not become Ready in 10 minutes")??;
    Ok(done.duration_since(started).as_secs_f64())
}

/// The Function that names patch-and-transform served as its own process.
const EXTERNAL: &str = "function-patch-and-transform-external";

/// `oxplane function serve function-patch-and-transform` as a child process with a server
/// certificate from the server's CA, killed when dropped.
struct ExternalFunction {
    child: std::process::Child,
    address: String,
}

impl ExternalFunction {
    fn start(server_dir: &std::path::Path, dir: &std::path::Path) -> anyhow::Result<ExternalFunction> {
        let exe = std::env::current_exe()?;
        let certs = dir.join("certs");
        // Its report goes nowhere: the benchmark's standard output is its JSON alone.
        let written = std::process::Command::new(&exe).args(["function", "certs", "--out"]).arg(&certs).arg("--data-dir").arg(server_dir).output()?;
        anyhow::ensure!(written.status.success(), "oxplane function certs failed: {}", String::from_utf8_lossy(&written.stderr));
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let address = format!("127.0.0.1:{port}");
        let child = std::process::Command::new(&exe)
            .args(["function", "serve", "function-patch-and-transform", "--address", &address, "--tls-certs-dir"])
            .arg(&certs)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .context("starting oxplane function serve")?;
        let function = ExternalFunction { child, address };
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(&function.address).is_err() {
            if Instant::now() > deadline {
                bail!("oxplane function serve did not listen on {}", function.address);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(function)
    }
}

impl Drop for ExternalFunction {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until the Function `name` is Healthy (its endpoint answers).
async fn wait_healthy(client: &kube::Client, name: &str) -> anyhow::Result<()> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource("pkg.crossplane.io", "v1", "Function", "functions"));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let healthy = api.get_opt(name).await?.is_some_and(|f| {
            f.data["status"]["conditions"].as_array().is_some_and(|c| c.iter().any(|c| c["type"] == "Healthy" && c["status"] == "True"))
        });
        if healthy {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("Function {name} did not become Healthy");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The successful calls of one function in the server's call-latency histogram: cumulative
/// counts by upper bound, in seconds.
struct CallHistogram {
    buckets: Vec<(f64, f64)>,
}

impl CallHistogram {
    /// The `q` quantile, interpolated linearly within its bucket as Prometheus'
    /// `histogram_quantile` does (the histogram's buckets double, so this is an estimate
    /// within a factor of two of the bucket's bounds).
    fn quantile(&self, q: f64) -> f64 {
        let Some(&(_, total)) = self.buckets.last() else { return f64::NAN };
        if total <= 0.0 {
            return f64::NAN;
        }
        let rank = q * total;
        let mut lower = (0.0, 0.0);
        for &(bound, count) in &self.buckets {
            if count >= rank {
                if bound.is_infinite() {
                    return lower.0;
                }
                let within = (count - lower.1).max(f64::MIN_POSITIVE);
                return lower.0 + (bound - lower.0) * (rank - lower.1) / within;
            }
            lower = (bound, count);
        }
        lower.0
    }
}

/// The call histogram of `function` from the server's `/metrics`.
async fn function_calls(client: &kube::Client, function: &str) -> anyhow::Result<CallHistogram> {
    let text = client.request_text(http::Request::get("/metrics").body(Vec::new())?).await?;
    let wanted = format!("function=\"{function}\",result=\"success\"");
    let mut buckets: Vec<(f64, f64)> = text
        .lines()
        .filter(|l| l.starts_with("oxplane_function_call_duration_seconds_bucket{") && l.contains(&wanted))
        .filter_map(|l| {
            let bound = l.split("le=\"").nth(1)?.split('"').next()?;
            let bound = if bound == "+Inf" { f64::INFINITY } else { bound.parse().ok()? };
            Some((bound, l.rsplit(' ').next()?.parse().ok()?))
        })
        .collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    anyhow::ensure!(!buckets.is_empty(), "no calls of {function} in /metrics");
    Ok(CallHistogram { buckets })
}

/// The peak resident memory of a process, in MiB.
fn peak_rss_mb(pid: u32) -> anyhow::Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kb: f64 = status.lines().find_map(|l| l.strip_prefix("VmHWM:")).and_then(|v| v.split_whitespace().next()).and_then(|v| v.parse().ok()).context("VmHWM")?;
    Ok(kb / 1024.0)
}

/// Runs the benchmark.
pub fn run(args: Args) -> anyhow::Result<()> {
    let base = args.dir.clone().unwrap_or_else(std::env::temp_dir);
    let tmp = tempfile::Builder::new().prefix("oxplane-bench-compose-").tempdir_in(&base)?;
    let runtime = tokio::runtime::Runtime::new()?;
    let mut report = Report::new("compose");
    runtime.block_on(async {
        // Baseline: the same objects through the API alone (the NopResource and XR kinds
        // served, no controller).
        let plain = ServerProcess::start(&tmp.path().join("api-only"))?;
        let client = plain.client().await?;
        let crds: Api<DynamicObject> = Api::all_with(client.clone(), &resource("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions"));
        use oxplane_runtime::provider::BuiltinProvider;
        for crd in oxplane_providers::nop::NopProvider.crds("provider-nop:v0.4.0") {
            crds.create(&PostParams::default(), &serde_json::from_value(crd)?).await.context("creating the NopResource CRD")?;
        }
        let xrd: Value = serde_saphyr::from_multiple::<Value>(SETUP)?.pop().context("xrd")?;
        // Without its XRD here, the CRD must not point at it (the garbage collector would
        // delete a CRD whose owner does not exist).
        let mut xr_crd = oxplane_composition::xrd::render::xr_crd(&xrd)?;
        xr_crd["metadata"].as_object_mut().context("metadata")?.remove("ownerReferences");
        crds.create(&PostParams::default(), &serde_json::from_value(xr_crd)?).await.context("creating the XR CRD")?;
        wait_served(&client, "bench.oxplane.io", "v1", "XBench").await?;
        let started = Instant::now();
        let xrs: Vec<DynamicObject> = (0..args.xrs).map(xr).collect::<anyhow::Result<_>>()?;
        create_many(&Api::all_with(client.clone(), &resource("bench.oxplane.io", "v1", "XBench", "xbenches")), xrs, args.clients).await.context("creating XRs")?;
        let nops: Vec<DynamicObject> = (0..args.xrs * 3)
            .map(|i| serde_json::from_value(json!({"apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource", "metadata": {"name": format!("n{i}")}, "spec": {"forProvider": {}}})))
            .collect::<Result<_, _>>()?;
        create_many(&Api::all_with(client.clone(), &resource("nop.crossplane.io", "v1alpha1", "NopResource", "nopresources")), nops, args.clients).await?;
        report.add("api_only_create_s", started.elapsed().as_secs_f64(), "s");
        drop(client);
        drop(plain);

        let mut server_args = vec!["--provider", "provider-nop"];
        server_args.extend(args.server_args.iter().map(String::as_str));
        let server = ServerProcess::start_with(&tmp.path().join("compose"), &server_args)?;
        let client = server.client().await?;
        let before = reconciles(&client).await?;
        let ready_s = xrs_ready(&client, COMPOSITION, args.xrs, args.clients).await?;
        let xr_api: Api<DynamicObject> = Api::all_with(client.clone(), &resource("bench.oxplane.io", "v1", "XBench", "xbenches"));
        let reconciled = reconciles(&client).await? - before;
        report.add("xr_1000_ready_s", ready_s, "s");
        report.add("xr_reconciles", reconciled, "reconciles");
        report.add("xr_reconciles_per_s", reconciled / ready_s.max(f64::MIN_POSITIVE), "reconciles/s");
        report.add("ready_to_api_only_ratio", ready_s / report.figures[0].value.max(f64::MIN_POSITIVE), "x");

        // A composed resource changes; how long until its XR's status says so.
        let nop_api: Api<DynamicObject> = Api::all_with(client.clone(), &resource("nop.crossplane.io", "v1alpha1", "NopResource", "nopresources"));
        let mut samples = Vec::new();
        for i in 0..args.samples.min(args.xrs) {
            let name = format!("x{i}");
            let composed = nop_api.list(&Default::default()).await?.items.into_iter().find(|n| {
                n.metadata.owner_references.as_ref().is_some_and(|o| o.iter().any(|o| o.name == name))
                    && n.metadata.annotations.as_ref().and_then(|a| a.get("crossplane.io/composition-resource-name")).map(String::as_str) == Some("a")
            });
            let Some(composed) = composed.and_then(|c| c.metadata.name) else { bail!("no composed resource of {name}") };
            let marker = format!("m{i}");
            let mut stream = watcher(xr_api.clone(), watcher::Config::default().fields(&format!("metadata.name={name}"))).applied_objects().boxed();
            // Wait for the watch's initial list before changing anything.
            stream.try_next().await?;
            let changed = Instant::now();
            nop_api
                .patch(&composed, &PatchParams::default(), &Patch::Merge(json!({"spec": {"forProvider": {"fields": {"marker": marker}}}})))
                .await?;
            loop {
                let object = tokio::time::timeout(Duration::from_secs(30), stream.try_next()).await.context("no status change in 30 s")??.context("watch ended")?;
                if object.data["status"]["marker"] == marker {
                    samples.push(changed.elapsed());
                    break;
                }
            }
        }
        let latencies = Latencies::new(samples);
        report.add("composed_change_p50_ms", latencies.percentile_ms(50.0), "ms");
        report.add("composed_change_p99_ms", latencies.percentile_ms(99.0), "ms");
        report.add("peak_rss_mb", peak_rss_mb(server.pid())?, "MiB");
        let in_process = function_calls(&client, "function-patch-and-transform").await?;
        drop(client);
        drop(server);

        // The same composition written for function-go-templating, on a fresh server.
        let server = ServerProcess::start_with(&tmp.path().join("compose-gotemplating"), &server_args)?;
        let client = server.client().await?;
        let gt_s = xrs_ready(&client, GO_TEMPLATING_COMPOSITION, args.xrs, args.clients).await?;
        report.add("xr_1000_ready_gotemplating_s", gt_s, "s");
        report.add("gotemplating_to_pt_ratio", gt_s / ready_s.max(f64::MIN_POSITIVE), "x");
        drop(client);
        drop(server);

        // patch-and-transform as its own process, over gRPC with mutual TLS.
        let server = ServerProcess::start_with(&tmp.path().join("compose-external"), &server_args)?;
        let function = ExternalFunction::start(&server.dir, &tmp.path().join("function"))?;
        let client = server.client().await?;
        create_yaml(&client, &format!(
            "apiVersion: pkg.crossplane.io/v1\nkind: Function\nmetadata:\n  name: {EXTERNAL}\n  annotations: {{oxplane.io/function-endpoint: \"{}\"}}\nspec: {{package: xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform:v0.8.2}}\n",
            function.address
        ))
        .await?;
        wait_healthy(&client, EXTERNAL).await?;
        let composition = COMPOSITION.replace("functionRef: {name: function-patch-and-transform}", &format!("functionRef: {{name: {EXTERNAL}}}"));
        let external_s = xrs_ready(&client, &composition, args.xrs, args.clients).await?;
        report.add("xr_1000_ready_external_s", external_s, "s");
        report.add("external_to_in_process_ratio", external_s / ready_s.max(f64::MIN_POSITIVE), "x");
        let histogram = function_calls(&client, EXTERNAL).await?;
        report.add("function_call_p50_ms", histogram.quantile(0.50) * 1000.0, "ms");
        report.add("function_call_p99_ms", histogram.quantile(0.99) * 1000.0, "ms");
        report.add("function_call_in_process_p50_ms", in_process.quantile(0.50) * 1000.0, "ms");
        report.add("function_call_in_process_p99_ms", in_process.quantile(0.99) * 1000.0, "ms");
        drop(function);
        anyhow::Ok(())
    })?;
    report.print(args.json)
}

#[cfg(test)]
mod tests {
    use super::CallHistogram;

    #[test]
    fn quantiles_interpolate_within_the_bucket() {
        let histogram = CallHistogram { buckets: vec![(0.001, 0.0), (0.002, 50.0), (0.004, 90.0), (0.008, 100.0), (f64::INFINITY, 100.0)] };
        assert!((histogram.quantile(0.5) - 0.002).abs() < 1e-12);
        assert!((histogram.quantile(0.25) - 0.0015).abs() < 1e-12);
        assert!((histogram.quantile(0.99) - 0.0076).abs() < 1e-12);
        assert!(CallHistogram { buckets: vec![] }.quantile(0.5).is_nan());
    }
}
