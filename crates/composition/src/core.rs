//! Starting Crossplane's core on a runtime: its own CRDs first (so users can apply their
//! Crossplane YAML at once), then its controllers, then the providers asked for at start.

use std::sync::Arc;
use std::time::Duration;

use oxplane_functions::Function;
use oxplane_runtime::Runtime;
use oxplane_runtime::client::{ApiError, Kube};
use oxplane_runtime::identity::{Clients, Identity, SYSTEM_NAMESPACE};
use oxplane_runtime::conditions;
use oxplane_runtime::controller::Controller;
use oxplane_runtime::object;
use oxplane_runtime::provider::{BuiltinProvider, package_name};
use serde_json::json;

use crate::packages::{self, FunctionInstaller, FunctionRegistry, Installer, ProviderInstaller, crd_kind, provider_kind};

/// The field manager oxplane applies its own CRDs with.
pub const FIELD_MANAGER: &str = "oxplane";

/// Why the core could not start.
#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    /// A core CRD is malformed (a bug in oxplane).
    #[error("cannot load core CRDs: {0}")]
    Crds(String),
    /// The API refused a core CRD.
    #[error("cannot apply CustomResourceDefinition {name}: {error}")]
    Apply {
        /// The CRD.
        name: String,
        /// Why.
        error: ApiError,
    },
    /// A core CRD did not become established.
    #[error("CustomResourceDefinition {0} did not become established")]
    NotEstablished(String),
    /// Crossplane's RBAC roles could not be applied.
    #[error("cannot apply Crossplane's RBAC roles: {0}")]
    Rbac(ApiError),
    /// The core's identity did not get the access its role grants in time.
    #[error("{0}")]
    Identity(String),
    /// The `default` DeploymentRuntimeConfig could not be created.
    #[error("cannot create the default DeploymentRuntimeConfig: {0}")]
    RuntimeConfig(ApiError),
    /// The default ManagedResourceActivationPolicy could not be created.
    #[error("cannot create the default ManagedResourceActivationPolicy: {0}")]
    ActivationPolicy(ApiError),
    /// A Provider asked for at start could not be created.
    #[error("cannot create Provider {name}: {error}")]
    Provider {
        /// The Provider.
        name: String,
        /// Why.
        error: ApiError,
    },
}

/// What the core runs with.
pub struct CoreOptions {
    /// The built-in providers.
    pub providers: Vec<Arc<dyn BuiltinProvider>>,
    /// The built-in functions, by package name.
    pub functions: Vec<(&'static str, Arc<dyn Function>)>,
    /// oxplane's certificate authority for functions called with mutual TLS (a directory in
    /// the data directory); none: only plain-text function endpoints work.
    pub function_tls_dir: Option<std::path::PathBuf>,
    /// The function response cache (`--enable-function-response-cache`); none: off.
    pub function_response_cache: Option<Arc<oxplane_functions::cache::ResponseCache>>,
    /// Providers to install at start: names of built-in providers or package references.
    pub install: Vec<String>,
    /// How often XR controllers rebuild their watches from the composites' references.
    pub reassert: Duration,
    /// Each composite's watch circuit breaker.
    pub circuit: oxplane_runtime::circuit::CircuitConfig,
    /// Serve Operations (`--enable-operations`), with schedules on this clock.
    pub operations: Option<crate::ops::Clock>,
    /// Where pulled packages are cached (`DATA_DIR/cache/xpkg` in `oxplane up`); none: a
    /// directory in the system's temporary directory.
    pub package_cache_dir: Option<std::path::PathBuf>,
    /// Where pulled Function packages' root filesystems, certificates and logs are kept
    /// (`DATA_DIR/runtimes/functions` in `oxplane up`); none: only built-in functions run.
    pub package_runtime_dir: Option<std::path::PathBuf>,
    /// Whether the dependency resolver may change installed dependencies' versions
    /// (`--enable-dependency-version-upgrades`, `--enable-dependency-version-downgrades`).
    pub dependency_versions: packages::lock::VersionChanges,
    /// The entries of the default ManagedResourceActivationPolicy created at start unless it
    /// exists (`--default-activations`, as Crossplane's chart value
    /// `provider.defaultActivations`); empty: none is created.
    pub default_activations: Vec<String>,
    /// Package references served by their registry's package even when they name a built-in
    /// (`--pull-package` prefixes).
    pub package_sources: packages::PackageSources,
    /// Where pulled Provider packages' root filesystems, certificates, kubeconfigs and logs are
    /// kept (`DATA_DIR/runtimes/providers` in `oxplane up`), and where their processes reach
    /// the API server; none (or without `identities`): only built-in providers run.
    pub provider_runtime: Option<(std::path::PathBuf, packages::ApiAccess)>,
    /// The identities Crossplane's components act as, where the API server can hand out
    /// clients for them (`oxplane up`); none: everything acts as the runtime's client (against
    /// another API server, whoever the kubeconfig names, which should be Crossplane's
    /// ServiceAccount).
    pub identities: Option<Identities>,
}

/// Who installs Crossplane and who its components act as, as Crossplane's chart sets them up.
/// The runtime given to [`Core::start`] is the core's own (acting as the ServiceAccount
/// `crossplane-system/crossplane`).
#[derive(Clone)]
pub struct Identities {
    /// The installer (the chart's author: CRDs, the chart's roles and ServiceAccounts).
    pub installer: Kube,
    /// Clients acting as the RBAC manager's and the providers' ServiceAccounts.
    pub clients: Arc<dyn Clients>,
}

impl Identities {
    /// The runtime acting as the ServiceAccount `name` of `crossplane-system`.
    pub fn runtime_as(&self, runtime: &Runtime, name: &str) -> Runtime {
        runtime.acting_as(self.clients.client_as(&Identity::service_account(SYSTEM_NAMESPACE, name)))
    }
}

/// The running core.
pub struct Core {
    controllers: Vec<Arc<Controller>>,
    /// Functions pipelines can call.
    pub functions: Arc<FunctionRegistry>,
    /// The provider installer (which providers run).
    pub providers: Arc<ProviderInstaller>,
    /// The XRD reconciler (which XR controllers run).
    pub xrds: Arc<crate::xrd::controller::XrdReconciler>,
    /// The Operation controllers, when Operations are enabled.
    pub operations: Option<crate::ops::Operations>,
}

/// The package reference `--provider NAME` installs when NAME is not a reference itself.
pub fn default_package(name: &str) -> String {
    match name {
        "provider-nop" => "xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0".to_string(),
        other => format!("xpkg.crossplane.io/crossplane-contrib/{other}:latest"),
    }
}

impl Core {
    /// Applies the core CRDs, starts the core controllers, and creates the Providers asked for.
    pub async fn start(runtime: &Runtime, options: CoreOptions) -> Result<Core, CoreError> {
        let installer = options.identities.as_ref().map_or_else(|| runtime.kube.clone(), |i| i.installer.clone());
        install_core_crds(&installer).await?;
        crate::rbac::install_chart_roles(&installer).await.map_err(CoreError::Rbac)?;
        install_default_runtime_config(&installer).await?;
        crate::mrd::install_default_policy(&installer, &options.default_activations).await.map_err(CoreError::ActivationPolicy)?;
        if options.identities.is_some() {
            wait_for_core_role(&runtime.kube).await?;
        }
        let rbac_manager = match &options.identities {
            Some(identities) => identities.runtime_as(runtime, crate::rbac::RBAC_MANAGER_SERVICE_ACCOUNT),
            None => runtime.clone(),
        };
        let functions = FunctionRegistry::new();
        let provider_runtimes = match (&options.provider_runtime, &options.identities, &options.package_cache_dir, &options.function_tls_dir) {
            (Some((dir, api)), Some(identities), Some(cache), Some(ca)) => Some(Arc::new(packages::ProviderRuntimes::new(
                runtime.kube.clone(),
                identities.installer.clone(),
                cache.clone(),
                dir.clone(),
                ca.clone(),
                api.clone(),
            ))),
            _ => None,
        };
        let providers = Arc::new(
            ProviderInstaller::new(runtime.clone(), options.providers).with_identities(options.identities.clone()).with_runtimes(provider_runtimes.clone())
                .with_sources(options.package_sources.clone()),
        );
        let (xrds, xrd_reconciler) = crate::xrd::controller::start_controller(
            runtime,
            functions.clone(),
            crate::xrd::controller::XrdSettings { reassert: options.reassert, circuit: options.circuit },
        );
        let runtimes = match (&options.package_cache_dir, &options.package_runtime_dir, &options.function_tls_dir) {
            (Some(cache), Some(dir), Some(ca)) => Some(Arc::new(packages::FunctionRuntimes::new(runtime.kube.clone(), cache.clone(), dir.clone(), ca.clone()))),
            _ => None,
        };
        let function_installer = Arc::new(
            FunctionInstaller::new(functions.clone(), options.functions)
                .with_runtimes(runtimes)
                .with_tls_dir(options.function_tls_dir)
                .with_response_cache(options.function_response_cache)
                .with_sources(options.package_sources.clone()),
        );
        let builtins = [("Provider", providers.builtin_names()), ("Function", function_installer.builtin_names())].into_iter().collect();
        let provider_controller = packages::start_controller(runtime, providers.clone(), options.package_sources.clone());
        if let Some(runtimes) = &provider_runtimes {
            // A provider process that starts or exits wakes its Provider at once.
            let queue = provider_controller.queue().clone();
            runtimes.set_wake(Arc::new(move |name| queue.add(oxplane_runtime::object::ObjectKey::new(None, name))));
        }
        let controllers = vec![
            crate::mrd::start_definition_controller(runtime),
            crate::mrd::start_policy_controller(runtime),
            provider_controller,
            packages::start_controller(runtime, function_installer, options.package_sources.clone()),
            packages::lock::start_controller(runtime, builtins, options.dependency_versions, options.package_sources.clone()),
            packages::configurations::start_controller(
                runtime,
                options.package_cache_dir.clone().unwrap_or_else(|| std::env::temp_dir().join("oxplane-xpkg-cache")),
            ),
            crate::compositions::start_controller(runtime),
            xrds,
            crate::rbac::start_controller(&rbac_manager),
            crate::rbac::provider::start_controller(&rbac_manager),
        ];
        let mut controllers = controllers;
        controllers.extend(crate::usage::start(runtime));
        let operations = match options.operations {
            Some(clock) => {
                install_crds(&installer, crate::crds::operations_crds().map_err(|e| CoreError::Crds(e.to_string()))?).await?;
                Some(crate::ops::Operations::start(runtime, functions.clone(), clock))
            }
            None => None,
        };
        for wanted in &options.install {
            let (name, reference) = if wanted.contains('/') || wanted.contains(':') {
                (package_name(wanted).to_string(), wanted.clone())
            } else {
                (wanted.clone(), default_package(wanted))
            };
            let provider = json!({
                "apiVersion": "pkg.crossplane.io/v1",
                "kind": "Provider",
                "metadata": {"name": name},
                "spec": {"package": reference},
            });
            // As Crossplane's `core init` installs them: before the core's own role is aggregated.
            match installer.create(&provider_kind(), &provider).await {
                Ok(_) => {}
                Err(error) if error.is_already_exists() => {}
                Err(error) => return Err(CoreError::Provider { name, error }),
            }
        }
        Ok(Core { controllers, functions, providers, xrds: xrd_reconciler, operations })
    }

    /// Stops every core controller (providers' controllers stop with the installer).
    pub fn stop(&self) {
        for controller in &self.controllers {
            controller.stop();
        }
        if let Some(operations) = &self.operations {
            operations.stop();
        }
    }
}

/// Waits until the core's identity holds what its aggregated ClusterRole `crossplane` grants
/// (the API server's aggregation controller fills it in from the chart's base role), so the
/// controllers do not start by being refused.
pub async fn wait_for_core_role(kube: &Kube) -> Result<(), CoreError> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        match kube.can_i("create", "pkg.crossplane.io", "providers", None).await {
            Ok(true) => return Ok(()),
            Ok(false) if tokio::time::Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(50)).await,
            Ok(false) => {
                return Err(CoreError::Identity(
                    "the ClusterRole crossplane was not aggregated within 30s: the core's ServiceAccount crossplane-system/crossplane may not manage packages".into(),
                ));
            }
            Err(error) => return Err(CoreError::Identity(format!("cannot review the core's access: {error}"))),
        }
    }
}

/// Creates the empty DeploymentRuntimeConfig `default` unless it exists, as Crossplane's
/// `core init` does: every Provider's and Function's `runtimeConfigRef` defaults to it. A user's
/// own `default` is left as it is.
pub async fn install_default_runtime_config(kube: &Kube) -> Result<(), CoreError> {
    let kind = oxplane_runtime::kinds::Kind::new("pkg.crossplane.io", "v1beta1", "DeploymentRuntimeConfig", "deploymentruntimeconfigs", false);
    let config = json!({"apiVersion": "pkg.crossplane.io/v1beta1", "kind": "DeploymentRuntimeConfig", "metadata": {"name": "default"}});
    match kube.create(&kind, &config).await {
        Ok(_) => Ok(()),
        Err(error) if error.is_already_exists() => Ok(()),
        Err(error) => Err(CoreError::RuntimeConfig(error)),
    }
}

/// Applies Crossplane's CRDs and waits until each is established.
pub async fn install_core_crds(kube: &Kube) -> Result<(), CoreError> {
    install_crds(kube, crate::crds::core_crds().map_err(|e| CoreError::Crds(e.to_string()))?).await
}

/// Applies CRDs and waits until each is established.
async fn install_crds(kube: &Kube, crds: Vec<serde_json::Value>) -> Result<(), CoreError> {
    let mut pending = Vec::new();
    for crd in crds {
        let name = object::name(&crd).unwrap_or_default().to_string();
        let applied = kube
            .apply(&crd_kind(), &crd, FIELD_MANAGER, true)
            .await
            .map_err(|error| CoreError::Apply { name: name.clone(), error })?;
        if !conditions::is_true(&applied, "Established") {
            pending.push(name);
        }
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while let Some(name) = pending.last().cloned() {
        let crd = kube.get(&crd_kind(), None, &name).await.map_err(|error| CoreError::Apply { name: name.clone(), error })?;
        if crd.is_some_and(|crd| conditions::is_true(&crd, "Established")) {
            pending.pop();
            continue;
        }
        if tokio::time::Instant::now() > deadline {
            return Err(CoreError::NotEstablished(name));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

impl Drop for Core {
    fn drop(&mut self) {
        self.stop();
    }
}
