//! `oxplane controllers --kubeconfig FILE`: Crossplane's controllers with the built-in
//! providers and functions, run against any Kubernetes API server (a real cluster, another
//! oxplane) through its API alone. Crossplane's CRDs are applied there at start, as `oxplane
//! up` applies them to its own server. Functions run in this process; only plain-text
//! function endpoints can be called (no oxplane CA for mutual TLS here).

use std::time::Duration;

use anyhow::Context;
use oxplane_composition::core::{Core, CoreOptions};
use oxplane_runtime::Runtime;

use super::kube::{Kube, KubeArgs};

/// Flags of `oxplane controllers`.
#[derive(Debug, clap::Args)]
pub struct ControllersArgs {
    /// Which API server.
    #[command(flatten)]
    kube: KubeArgs,
    /// A built-in provider to install at start (e.g. provider-nop), or a package reference
    /// naming one; repeatable.
    #[arg(long = "provider", value_name = "NAME")]
    providers: Vec<String>,
    /// How long a watch on a kind nothing depends on any more is kept before it stops.
    #[arg(long, value_name = "SECONDS", default_value_t = 10)]
    watch_grace_period: u64,
}

/// Runs the controllers until SIGTERM or Ctrl-C.
pub fn run(args: ControllersArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let kube = Kube::connect(&args.kube).await?;
        kube.client.apiserver_version().await.context("the API server does not answer")?;
        let controllers = Runtime::new(kube.client.clone(), Duration::from_secs(args.watch_grace_period));
        let core = Core::start(
            &controllers,
            CoreOptions {
                providers: oxplane_providers::catalog(),
                functions: oxplane_functions::builtin::catalog(&Default::default()),
                function_tls_dir: None,
                function_response_cache: None,
                install: args.providers,
                reassert: Duration::from_secs(30),
                circuit: Default::default(),
                operations: None,
                package_cache_dir: None,
            },
        )
        .await
        .context("starting Crossplane's core against the API server")?;
        eprintln!("oxplane controllers are running");
        tokio::select! {
            _ = terminate.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        core.stop();
        anyhow::Ok(())
    })
}
