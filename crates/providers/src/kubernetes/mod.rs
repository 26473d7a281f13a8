//! provider-kubernetes (`xpkg.crossplane.io/crossplane-contrib/provider-kubernetes`): an
//! `Object` holds any Kubernetes object (`spec.forProvider.manifest`) that the provider
//! server-side applies to a target cluster: another cluster through a kubeconfig Secret
//! (`credentials.source: Secret`), or the control plane itself (`InjectedIdentity`).
//!
//! Kinds, as upstream names them: `kubernetes.crossplane.io` (cluster-scoped `Object`
//! `v1alpha2`; `ProviderConfig`, `ProviderConfigUsage` `v1alpha1`) and
//! `kubernetes.m.crossplane.io/v1alpha1` (namespaced `Object`, `ProviderConfig`,
//! `ProviderConfigUsage`; cluster-scoped `ClusterProviderConfig`).
//!
//! - `schemas.rs`: the CRDs.
//! - `target.rs`: clients of target clusters, built from ProviderConfigs and kept while the
//!   kubeconfig is unchanged.
//! - `collection.rs`: `ObservedObjectCollection`, Observe-only Objects for what a selector
//!   matches on a target.
//! - `conversion.rs`: the cluster-scoped Object's v1alpha1 ↔ v1alpha2 conversion webhook.
//! - `object.rs`: the Object client (references, apply, readiness, connection details).
//! - `watch.rs`: realtime `spec.watch`, behind `--enable-watches` as upstream.
//!
//! Like upstream's process, the provider reads its flags from the `package-runtime`
//! container's arguments in its DeploymentRuntimeConfig: `--enable-watches` and `--poll`.

pub mod collection;
pub mod conversion;
pub mod object;
pub mod schemas;
pub mod target;
pub mod watch;

use std::sync::Arc;
use std::time::Duration;

use oxplane_runtime::Runtime;
use oxplane_runtime::kinds::Kind;
use oxplane_runtime::managed::usage::ProviderConfigKinds;
use oxplane_runtime::managed::{self, ExternalConnector, ManagedSettings};
use oxplane_runtime::provider::{BuiltinProvider, ProviderHandle, flag_enabled, flag_value};
use serde_json::Value;

/// The cluster-scoped group.
pub const CLUSTER_GROUP: &str = "kubernetes.crossplane.io";
/// The namespaced group.
pub const NAMESPACED_GROUP: &str = "kubernetes.m.crossplane.io";
/// The cluster-scoped Object's version.
pub const CLUSTER_VERSION: &str = "v1alpha2";
/// The cluster-scoped Object's older version, also served.
pub const OLDER_CLUSTER_VERSION: &str = "v1alpha1";
/// The namespaced Object's version.
pub const NAMESPACED_VERSION: &str = "v1alpha1";
/// The ProviderConfigs' version.
pub const CONFIG_VERSION: &str = "v1alpha1";
/// The field manager of every apply.
pub const FIELD_MANAGER: &str = "provider-kubernetes";
/// How often Objects are observed (and drift on the target corrected), by default.
pub const POLL_INTERVAL: Duration = Duration::from_secs(60);

/// provider-kubernetes.
#[derive(Clone, Debug)]
pub struct KubernetesProvider {
    /// How often Objects are observed (unless `--poll` says otherwise).
    pub poll_interval: Duration,
    /// Where the Object conversion webhook is served; without one, v1alpha1 is not served.
    pub conversion: Option<crate::conversion::ConversionWebhook>,
}

impl Default for KubernetesProvider {
    fn default() -> Self {
        KubernetesProvider { poll_interval: POLL_INTERVAL, conversion: None }
    }
}

/// The path the Object conversion webhook is served at.
pub const CONVERSION_PATH: &str = "/convert/objects.kubernetes.crossplane.io";
/// The CRD converting through it.
pub const CONVERTED_CRD: &str = "objects.kubernetes.crossplane.io";

fn config_kinds(namespaced: bool) -> ProviderConfigKinds {
    let group = if namespaced { NAMESPACED_GROUP } else { CLUSTER_GROUP };
    let kind = |kind: &str, plural: &str, namespaced: bool| Kind::new(group, CONFIG_VERSION, kind, plural, namespaced);
    ProviderConfigKinds {
        config: kind("ProviderConfig", "providerconfigs", namespaced),
        cluster_config: namespaced.then(|| kind("ClusterProviderConfig", "clusterproviderconfigs", false)),
        usage: kind("ProviderConfigUsage", "providerconfigusages", namespaced),
    }
}

impl BuiltinProvider for KubernetesProvider {
    fn name(&self) -> &'static str {
        "provider-kubernetes"
    }

    fn crds(&self, _package: &str) -> Vec<Value> {
        let mut crds = schemas::crds(self.conversion.as_ref());
        crds.extend([collection::crd(false), collection::crd(true)]);
        crds
    }

    fn start(&self, runtime: &Runtime, package: &str) -> ProviderHandle {
        self.start_with_args(runtime, package, &[])
    }

    fn start_with_args(&self, runtime: &Runtime, _package: &str, args: &[String]) -> ProviderHandle {
        let enable_watches = flag_enabled(args, "enable-watches");
        let poll_interval = flag_value(args, "poll").and_then(oxplane_runtime::managed::annotations::parse_go_duration).unwrap_or(self.poll_interval);
        let targets = Arc::new(target::Targets::default());
        let local = target::Target::local(runtime.kube.clone(), runtime.watches.clone());
        let mut controllers = Vec::new();
        for crd in schemas::object_kinds() {
            let kind = crd.kind();
            let configs = Arc::new(config_kinds(kind.namespaced));
            controllers.extend(managed::start_config_controllers(runtime, &configs));
            let realtime = watch::RealtimeWatches::new(enable_watches);
            let connector: Arc<dyn ExternalConnector> = Arc::new(object::ObjectConnector { targets: targets.clone(), local: local.clone(), realtime: realtime.clone() });
            let mut settings = ManagedSettings::new(kind.clone(), connector, poll_interval);
            settings.provider_configs = Some(configs);
            let controller = managed::start_controller(runtime, settings);
            realtime.attach(&controller, &runtime.watches, &kind.gvk);
            controllers.push(controller);
            controllers.push(collection::start(runtime, kind.namespaced, targets.clone(), local.clone(), poll_interval));
        }
        ProviderHandle::new(controllers)
    }
}
