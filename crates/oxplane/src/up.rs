//! `oxplane up`: the API server on its store, with Crossplane's core and the built-in
//! providers and functions running beside it on an in-process client. On a shared store (etcd)
//! any number of servers serve the API, while the controllers run on one of them at a time:
//! the holder of the `kube-system/oxplane-controllers` Lease, elected with Kubernetes' timing.
//! A server that loses the lease (to another server, or because the store is unreachable and it
//! cannot renew) stops its controllers at once and campaigns again; it keeps serving the API
//! (see [`crate::leadership`]).

use std::time::Duration;

use anyhow::Context;
use oxplane_apiserver::server::{Server, ServerConfig, StoreBackend};
use oxplane_apiserver::authn::UserInfo;
use oxplane_apiserver::server::LocalServices;
use oxplane_composition::core::{Core, CoreOptions, Identities};
use oxplane_runtime::Runtime;
use oxplane_runtime::client::Kube;
use oxplane_runtime::identity::{Clients, Identity, SYSTEM_NAMESPACE};

/// What `oxplane up` runs with.
pub struct UpOptions {
    /// The API server's configuration.
    pub server: ServerConfig,
    /// Providers to install at start.
    pub providers: Vec<String>,
    /// The default ManagedResourceActivationPolicy's entries (none: no default policy).
    pub default_activations: Vec<String>,
    /// How long idle watches are kept.
    pub watch_grace: Duration,
    /// How often XR controllers re-assert their watches.
    pub reassert: Duration,
    /// Each composite's watch circuit breaker.
    pub circuit: oxplane_runtime::circuit::CircuitConfig,
    /// How built-in functions are configured.
    pub functions: oxplane_functions::builtin::BuiltinOptions,
    /// Whether the controllers run here (false: the API only).
    pub controllers: bool,
    /// Serve Operations (`--enable-operations`), with schedules on this clock.
    pub operations: Option<oxplane_composition::ops::Clock>,
    /// The function response cache (`--enable-function-response-cache`).
    pub function_response_cache: Option<std::sync::Arc<oxplane_functions::cache::ResponseCache>>,
    /// Whether the dependency resolver may change installed dependencies' versions.
    pub dependency_versions: oxplane_composition::packages::lock::VersionChanges,
    /// Package references pulled even when they name a built-in (`--pull-package`).
    pub package_sources: oxplane_composition::packages::PackageSources,
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
        let package_cache_dir = options.server.data_dir.join("cache/xpkg");
        let package_runtime_dir = options.server.data_dir.join("runtimes/functions");
        let provider_runtime_dir = options.server.data_dir.join("runtimes/providers");
        let shared = matches!(options.server.store, StoreBackend::Etcd(_));
        let mut server = Server::start(options.server).await?;
        let summary = server.summary();
        // Where pulled providers' processes reach this server (over TCP: they are other programs).
        let api_access = oxplane_composition::packages::ApiAccess { url: server.url(), ca_pem: server.ca_pem() };
        progress(&format!(
            "store opened: {}, at revision {} ({} objects replayed into the watch cache)",
            summary.store, summary.revision, summary.objects
        ));
        progress(&format!("serving {} CustomResourceDefinitions ({} API resources in all)", summary.crds, summary.resources));
        // Before any controller runs (the garbage collector included): an API-only replica
        // beside replicas that run them must refuse what they protect, too. Where `oxplane
        // controllers` registered its webhook, the hook leaves the decision to it.
        server.state().admission.register(std::sync::Arc::new(crate::usage_protection::UsageProtection));
        server.state().admission.register(std::sync::Arc::new(crate::xrd_validation::XrdValidation));
        // The core acts as Crossplane's ServiceAccount: what it may read and write is what the
        // API server's RBAC grants `crossplane-system/crossplane` (the chart's roles, the
        // RBAC manager's, and what users aggregate into the ClusterRole `crossplane`).
        let clients: std::sync::Arc<dyn Clients> = std::sync::Arc::new(InProcessClients(server.local_services()));
        let core_identity = Identity::service_account(SYSTEM_NAMESPACE, oxplane_composition::rbac::CORE_SERVICE_ACCOUNT);
        let core_client = clients.client_as(&core_identity);
        let identities = Identities { installer: Kube::new(kube::Client::new(server.local_service(), "default")), clients };
        if options.controllers && !shared {
            // The chart's identities, and the in-server controllers that aggregate the core's
            // role, before anything acts as the core: its watches start with the runtime.
            server.start_controllers();
            oxplane_composition::rbac::install_chart_roles(&identities.installer).await.context("installing Crossplane's RBAC roles")?;
            oxplane_composition::core::wait_for_core_role(&Kube::new(core_client.clone())).await?;
        }
        let controllers = Runtime::new(core_client, options.watch_grace);
        {
            let metrics = controllers.metrics.clone();
            server.state().extensions.add_metrics(move || metrics.render());
            let watches = controllers.watches.clone();
            server.state().extensions.add_debug_page("watches", move || watches.debug());
        }
        let planner = crate::plan_action::Planner::register(&server.state().extensions, controllers.clone());
        // Kept for as long as the server runs: the API server calls it to convert built-in
        // providers' kinds between versions. Alone on its store, the server points the CRDs at
        // it before serving (it is there whenever its API is; `oxplane controllers` started
        // later points them at its own). On a shared store only the controllers' leader does,
        // as it takes over: a follower or API-only replica may go while the leader stays.
        let (_conversion_server, conversion) = crate::webhooks::serve_conversion_on_loopback().await?;
        if !shared {
            crate::webhooks::point_crds(&identities.installer, &conversion).await;
        }
        let catalog_options = oxplane_providers::CatalogOptions { conversion: Some(conversion.clone()) };
        let installer = identities.installer.clone();
        let core_options = move || CoreOptions {
            providers: oxplane_providers::catalog_with(&catalog_options),
            functions: oxplane_functions::builtin::catalog(&options.functions),
            function_tls_dir: Some(function_tls_dir.clone()),
            function_response_cache: options.function_response_cache.clone(),
            install: options.providers.clone(),
            default_activations: options.default_activations.clone(),
            reassert: options.reassert,
            circuit: options.circuit,
            operations: options.operations.clone(),
            package_cache_dir: Some(package_cache_dir.clone()),
            package_runtime_dir: Some(package_runtime_dir.clone()),
            dependency_versions: options.dependency_versions,
            package_sources: options.package_sources.clone(),
            provider_runtime: Some((provider_runtime_dir.clone(), api_access.clone())),
            identities: Some(identities.clone()),
        };
        if !options.controllers {
            progress("controllers: not run here (API only)");
            server.serve(shutdown).await?;
            return anyhow::Ok(());
        }
        if !shared {
            progress("starting Crossplane's core: its CRDs, the package, composition and built-in provider controllers");
            let core = Core::start(&controllers, core_options()).await.context("starting Crossplane's core")?;
            progress(&format!("controllers running: {}", controllers.metrics.running_controllers().len()));
            planner.set(Some(core.functions.clone()));
            server.serve(shutdown).await?;
            core.stop();
            return anyhow::Ok(());
        }
        let identity = format!("{}_{}", server.url(), std::process::id());
        progress("controllers: campaigning for the Lease kube-system/oxplane-controllers (they run on its holder)");
        let leading = crate::leadership::campaign(kube::Client::new(server.local_service(), "default"), identity.clone());
        // The in-server controllers (garbage collector, namespaces, ...) follow the same lease.
        server.controllers_while(leading.clone());
        let leader = tokio::spawn(lead(leading, identity, controllers, core_options, planner, (installer, conversion)));
        let served = server.serve(shutdown).await;
        leader.abort();
        served?;
        anyhow::Ok(())
    })
}

/// Runs the core while `leading` says this server holds the controllers' Lease. On losing the lease
/// (to another server, or by not renewing it in time) the core stops before anything else, so
/// it does not go on beside the new leader's, and the campaign goes on.
/// `conversion`: the client installing the providers' CRDs and this server's conversion
/// webhooks, which the CRDs are pointed at on taking over.
async fn lead(
    mut leading: tokio::sync::watch::Receiver<bool>,
    identity: String,
    controllers: Runtime,
    options: impl Fn() -> CoreOptions,
    planner: crate::plan_action::Planner,
    conversion: (Kube, oxplane_providers::conversion::ConversionWebhook),
) {
    loop {
        while !*leading.borrow_and_update() {
            if leading.changed().await.is_err() {
                fail("the controllers' lease campaign ended");
            }
        }
        tracing::info!(%identity, "leading: starting the controllers");
        // The previous leader's conversion webhooks may be gone with it.
        crate::webhooks::point_crds(&conversion.0, &conversion.1).await;
        let started = tokio::select! {
            started = Core::start(&controllers, options()) => started,
            _ = leading.wait_for(|leads| !*leads) => {
                tracing::warn!("lost the controllers' lease while starting them");
                continue;
            }
        };
        let core = match started {
            Ok(core) => core,
            Err(error) => {
                // The store may be briefly unreachable: try again while still leading.
                tracing::error!(%error, "starting Crossplane's core failed; retrying");
                tokio::time::sleep(Duration::from_secs(2)).await;
                continue;
            }
        };
        planner.set(Some(core.functions.clone()));
        progress(&format!("controllers running: {} (this server holds the controllers' Lease)", controllers.metrics.running_controllers().len()));
        if leading.wait_for(|leads| !*leads).await.is_err() {
            core.stop();
            fail("the controllers' lease campaign ended");
        }
        planner.set(None);
        core.stop();
        drop(core);
        tracing::warn!(%identity, "lost the controllers' lease: controllers stopped, campaigning again");
    }
}

/// Clients on the embedded server's in-process service, acting as a given identity.
struct InProcessClients(LocalServices);

impl Clients for InProcessClients {
    fn client_as(&self, identity: &Identity) -> kube::Client {
        kube::Client::new(self.0.acting_as(UserInfo::new(identity.username.clone(), identity.groups.clone())), "default")
    }
}

/// One start-up step, as a line on standard error (whatever the log level) and in the log.
fn progress(line: &str) {
    tracing::info!("{line}");
    eprintln!("oxplane: {line}");
}

fn fail(message: &str) -> ! {
    tracing::error!("{message}");
    eprintln!("error: {message}");
    std::process::exit(1);
}
