//! Managed resources: the reconciler providers plug their external clients into.
//!
//! - `external.rs`: the provider contract (connector, client, observations, error kinds).
//! - `policy.rs`: management policies and the delete decision (pure).
//! - `annotations.rs`: Crossplane's annotations and the critical-annotations write.
//! - `reconciler.rs`: the reconcile loop.
//! - `connection.rs`: connection Secrets.
//! - `crd.rs`: CRDs of managed kinds and provider config kinds, with Crossplane's shared fields.
//! - `usage.rs`: ProviderConfig usage tracking and the ProviderConfig controller.
//! - `fault.rs`: crash points for fault-injection tests.

pub mod annotations;
pub mod connection;
pub mod crd;
pub mod external;
pub mod fault;
pub mod policy;
pub mod reconciler;
pub mod usage;

use std::sync::Arc;

pub use external::{
    ConnectContext, ConnectionDetails, ErrorKind, ExternalClient, ExternalConnector, ExternalCreation, ExternalDelete, ExternalError,
    ExternalNaming, ExternalObservation, ExternalUpdate, Managed,
};
pub use reconciler::{FINALIZER, ManagedReconciler, ManagedSettings};

use crate::Runtime;
use crate::controller::{Controller, ControllerConfig, spec_or_metadata_changed};
use usage::{ProviderConfigKinds, ProviderConfigReconciler};

/// Starts the controller of one managed kind: it watches the kind and reconciles each
/// resource. Stopping the returned controller stops its watch.
pub fn start_controller(runtime: &Runtime, settings: ManagedSettings) -> Arc<Controller> {
    let name = settings.controller_name();
    let kind = settings.kind.clone();
    let reconciler = Arc::new(ManagedReconciler::new(runtime.kube.clone(), settings).with_watches(runtime.watches.clone()).with_metrics(runtime.metrics.clone()));
    let controller = Controller::start(ControllerConfig::new(name), reconciler, runtime.metrics.clone());
    runtime.watches.kinds().insert(kind.clone());
    controller.watch_own(&runtime.watches, &kind.gvk, spec_or_metadata_changed);
    controller
}

/// Starts the controllers of a provider's config kinds (ProviderConfig, and
/// ClusterProviderConfig where there is one), named `providerconfig/<kind lowercase>.<group>`.
pub fn start_config_controllers(runtime: &Runtime, kinds: &ProviderConfigKinds) -> Vec<Arc<Controller>> {
    let mut controllers = Vec::new();
    for config in std::iter::once(&kinds.config).chain(kinds.cluster_config.iter()) {
        let name = format!("providerconfig/{}.{}", config.gvk.kind.to_lowercase(), config.gvk.group);
        let reconciler = Arc::new(ProviderConfigReconciler {
            kube: runtime.kube.clone(),
            config: config.clone(),
            usage: kinds.usage.clone(),
            recorder: crate::events::EventRecorder::new(runtime.kube.clone(), &name),
        });
        let controller = Controller::start(ControllerConfig::new(name), reconciler, runtime.metrics.clone());
        runtime.watches.kinds().insert(config.clone());
        runtime.watches.kinds().insert(kinds.usage.clone());
        controller.watch_own(&runtime.watches, &config.gvk, spec_or_metadata_changed);
        controller.watch_mapped(&runtime.watches, &kinds.usage.gvk, ProviderConfigReconciler::usage_to_config(config));
        controllers.push(controller);
    }
    controllers
}
