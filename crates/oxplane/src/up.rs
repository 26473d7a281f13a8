//! `oxplane up`: the API server on the embedded store, with Crossplane's core and the
//! built-in providers and functions running beside it on an in-process client.

use std::time::Duration;

use anyhow::Context;
use oxplane_apiserver::server::{Server, ServerConfig};
use oxplane_composition::core::{Core, CoreOptions};
use oxplane_runtime::Runtime;

/// What `oxplane up` runs with.
pub struct UpOptions {
    /// The API server's configuration.
    pub server: ServerConfig,
    /// Providers to install at start.
    pub providers: Vec<String>,
    /// How long idle watches are kept.
    pub watch_grace: Duration,
    /// How often XR controllers re-assert their watches.
    pub reassert: Duration,
    /// Each composite's watch circuit breaker.
    pub circuit: oxplane_runtime::circuit::CircuitConfig,
    /// How built-in functions are configured.
    pub functions: oxplane_functions::builtin::BuiltinOptions,
    /// Serve Operations (`--enable-operations`), with schedules on this clock.
    pub operations: Option<oxplane_composition::ops::Clock>,
}

/// Runs until SIGTERM or Ctrl-C.
pub fn run(options: UpOptions) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let shutdown = async move {
            tokio::select! {
                _ = terminate.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        };
        let function_tls_dir = crate::commands::function::ca_dir(&options.server.data_dir);
        let server = Server::start(options.server).await?;
        let controllers = Runtime::new(kube::Client::new(server.local_service(), "default"), options.watch_grace);
        {
            let metrics = controllers.metrics.clone();
            server.state().extensions.add_metrics(move || metrics.render());
            let watches = controllers.watches.clone();
            server.state().extensions.add_debug_page("watches", move || watches.debug());
            server.state().admission.register(std::sync::Arc::new(crate::usage_protection::UsageProtection));
            server.state().admission.register(std::sync::Arc::new(crate::xrd_validation::XrdValidation));
        }
        let core = Core::start(
            &controllers,
            CoreOptions {
                providers: oxplane_providers::catalog(),
                functions: oxplane_functions::builtin::catalog(&options.functions),
                function_tls_dir: Some(function_tls_dir),
                install: options.providers,
                reassert: options.reassert,
                circuit: options.circuit,
                operations: options.operations,
            },
        )
        .await
        .context("starting Crossplane's core")?;
        server.serve(shutdown).await?;
        core.stop();
        anyhow::Ok(())
    })
}
