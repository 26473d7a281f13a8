//! `oxplane controllers --kubeconfig FILE`: Crossplane's controllers with the built-in
//! providers and functions, run against any Kubernetes API server (a real cluster, another
//! oxplane) through its API alone. Crossplane's CRDs are applied there at start, as `oxplane
//! up` applies them to its own server. Functions run in this process; only plain-text
//! function endpoints can be called (no oxplane CA for mutual TLS here). Usage deletion
//! protection is served as Crossplane's validating webhook (`crossplane-no-usages`) from an
//! HTTPS server of this process, registered with the API server at start; the same server
//! serves the built-in providers' CRD conversion webhooks, which their CRDs point at.

use std::time::Duration;

use anyhow::Context;
use oxplane_composition::core::{Core, CoreOptions};
use oxplane_runtime::Runtime;

use super::kube::{Kube, KubeArgs};
use crate::usage_protection::webhook::{self as usage_webhook, CONFIGURATION, PATH};
use crate::webhooks::{ControllerWebhooks, Placement};

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
    /// The entries (names or globs, comma-separated) of the ManagedResourceActivationPolicy
    /// `crossplane-default-activation-policy`, created at start unless it exists, as
    /// Crossplane's chart value `provider.defaultActivations`; '' creates none.
    #[arg(long, value_name = "PATTERNS", value_delimiter = ',', default_value = "*")]
    default_activations: Vec<String>,
    /// How long a watch on a kind nothing depends on any more is kept before it stops.
    #[arg(long, value_name = "SECONDS", default_value_t = 10)]
    watch_grace_period: u64,
    /// Serve Usage deletion protection as the validating webhook `crossplane-no-usages` and
    /// register it with the API server, and the providers' CRD conversion webhooks; with
    /// false, deletions are not checked against Usages and the versions that need converting
    /// (provider-http's and provider-kubernetes' v1alpha1) are not converted.
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    webhook_enabled: bool,
    /// Where the webhook server listens, as IP:PORT (port 0: a free one).
    #[arg(long, value_name = "IP:PORT", default_value = "127.0.0.1:0")]
    webhook_address: String,
    /// The host name or IP address the API server reaches the webhook server at (in the
    /// configuration's URL and the serving certificate) [default: the --webhook-address IP].
    #[arg(long, value_name = "HOST")]
    webhook_host: Option<String>,
}

/// Runs the controllers until SIGTERM or Ctrl-C.
pub fn run(args: ControllersArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let kube = Kube::connect(&args.kube).await?;
        let controllers = Runtime::new(kube.client.clone(), Duration::from_secs(args.watch_grace_period));
        // Serving before the configuration points the API server here, so no deletion finds
        // it unreachable; kept registered when this process stops (failurePolicy Fail, as
        // Crossplane's: protected objects stay protected while nothing can check them).
        // Started before the API server is asked anything, so a bad address is told first.
        let webhook = if args.webhook_enabled {
            let placement = Placement { listen: args.webhook_address, host: args.webhook_host };
            Some(ControllerWebhooks::start(controllers.kube.clone(), &placement).await?)
        } else {
            None
        };
        kube.client.apiserver_version().await.context("the API server does not answer")?;
        let conversion = webhook.as_ref().map(ControllerWebhooks::conversion);
        // CRDs a previous run installed call that run's server until pointed here.
        if let Some(conversion) = &conversion {
            crate::webhooks::point_crds(&controllers.kube, conversion).await;
        }
        let core = Core::start(
            &controllers,
            CoreOptions {
                providers: oxplane_providers::catalog_with(&oxplane_providers::CatalogOptions { conversion }),
                functions: oxplane_functions::builtin::catalog(&Default::default()),
                function_tls_dir: None,
                function_response_cache: None,
                install: args.providers,
                default_activations: args.default_activations,
                reassert: Duration::from_secs(30),
                circuit: Default::default(),
                operations: None,
                package_cache_dir: None,
                package_runtime_dir: None,
                dependency_versions: Default::default(),
                package_sources: Default::default(),
                provider_runtime: None,
                identities: None,
            },
        )
        .await
        .context("starting Crossplane's core against the API server")?;
        if let Some(webhook) = &webhook {
            usage_webhook::register(&controllers.kube, &webhook.url(PATH), &webhook.ca_bundle())
                .await
                .with_context(|| format!("registering the ValidatingWebhookConfiguration {CONFIGURATION}"))?;
            eprintln!("serving the Usage webhook at {}", webhook.url(PATH));
        }
        eprintln!("oxplane controllers are running");
        tokio::select! {
            _ = terminate.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        core.stop();
        drop(webhook);
        anyhow::Ok(())
    })
}
