//! Installing a built-in provider: apply its CRDs (labelled with the package name) as
//! ManagedResourceDefinitions (see [`crate::mrd`]), wait for the active ones to be
//! established, start its controllers (a kind activated later is served to them once its CRD
//! appears). Uninstalling deletes the CRDs once no managed resource of the provider is left,
//! then stops the controllers. A provider that is not built in is pulled and run as a local
//! process (`provider_runtime.rs`), where oxplane runs one.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use oxplane_runtime::Runtime;
use oxplane_runtime::client::DeleteOptions;
use oxplane_runtime::kinds::Kind;
use oxplane_runtime::object;
use oxplane_runtime::provider::{BuiltinProvider, ProviderHandle, package_name};
use serde_json::{Map, Value, json};

use oxplane_runtime::identity::SYSTEM_NAMESPACE;

use super::reconciler::{Installer, Progress, revision_name};
use super::{LABEL_PACKAGE, crd_kind, provider_kind, provider_revision_kind};

/// The field manager the package manager applies what packages install with.
pub const FIELD_MANAGER: &str = "pkg.crossplane.io/package-manager";

/// Installs built-in providers.
pub struct ProviderInstaller {
    runtime: Runtime,
    catalog: BTreeMap<&'static str, Arc<dyn BuiltinProvider>>,
    running: Mutex<HashMap<String, (Started, ProviderHandle)>>,
    /// Where providers act as their revisions' ServiceAccounts; none: as the runtime's client.
    identities: Option<crate::core::Identities>,
    /// The processes of pulled Provider packages (none: only built-ins).
    pulled: Option<Arc<super::provider_runtime::ProviderRuntimes>>,
    /// Which references naming a built-in are pulled instead (`--pull-package`).
    sources: super::PackageSources,
}

/// What a running provider was started with: its package reference and runtime arguments.
type Started = (String, Vec<String>);

/// The kind of DeploymentRuntimeConfigs.
pub fn runtime_config_kind() -> Kind {
    Kind::new("pkg.crossplane.io", "v1beta1", "DeploymentRuntimeConfig", "deploymentruntimeconfigs", false)
}

/// The DeploymentRuntimeConfig a package names (`spec.runtimeConfigRef.name`, `default` when
/// unset, as Crossplane defaults it).
pub fn runtime_config_name(package: &Value) -> &str {
    package.pointer("/spec/runtimeConfigRef/name").and_then(Value::as_str).filter(|n| !n.is_empty()).unwrap_or("default")
}

/// The `package-runtime` container of a DeploymentRuntimeConfig's Deployment template.
pub fn runtime_container(config: &Value) -> Option<&Value> {
    config
        .pointer("/spec/deploymentTemplate/spec/template/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|c| c.get("name").and_then(Value::as_str) == Some("package-runtime"))
}

/// The arguments of the `package-runtime` container of a DeploymentRuntimeConfig: what
/// Crossplane passes to the provider's process, and what a built-in provider reads its
/// feature flags from.
pub fn runtime_args(config: &Value) -> Vec<String> {
    runtime_container(config)
        .and_then(|c| c.get("args"))
        .and_then(Value::as_array)
        .map(|args| args.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default()
}

impl ProviderInstaller {
    /// An installer of the given providers.
    pub fn new(runtime: Runtime, providers: Vec<Arc<dyn BuiltinProvider>>) -> Self {
        ProviderInstaller {
            runtime,
            catalog: providers.into_iter().map(|p| (p.name(), p)).collect(),
            running: Mutex::new(HashMap::new()),
            identities: None,
            pulled: None,
            sources: super::PackageSources::default(),
        }
    }

    /// Serves with a built-in provider only the references `sources` leaves built in (the
    /// others are pulled).
    pub fn with_sources(mut self, sources: super::PackageSources) -> Self {
        self.sources = sources;
        self
    }

    /// The built-in provider serving `reference`, if one does.
    fn builtin(&self, reference: &str) -> Option<&Arc<dyn BuiltinProvider>> {
        self.sources.pulled_by(reference).is_none().then(|| self.catalog.get(package_name(reference))).flatten()
    }

    /// Pulls Provider packages that are not built in and runs them with `runtimes`.
    pub fn with_runtimes(mut self, runtimes: Option<Arc<super::provider_runtime::ProviderRuntimes>>) -> Self {
        self.pulled = runtimes;
        self
    }

    /// Providers run as their revisions' ServiceAccounts (`crossplane-system/<revision>`).
    pub fn with_identities(mut self, identities: Option<crate::core::Identities>) -> Self {
        self.identities = identities;
        self
    }

    /// The runtime a provider revision's controllers run on: acting as its ServiceAccount once
    /// the RBAC manager let it (and the core) use the kinds it installs; `Err(what)` while
    /// waiting for that.
    async fn runtime_for(&self, revision: &str, crds: &[Value]) -> Result<Runtime, String> {
        let Some(identities) = &self.identities else { return Ok(self.runtime.clone()) };
        let account = crate::rbac::provider::service_account_name(revision);
        let runtime = identities.runtime_as(&self.runtime, &account);
        for crd in crds.iter().filter(|crd| is_managed(crd)) {
            let Some(kind) = Kind::of_crd(crd) else { continue };
            for (who, kube) in [(format!("ServiceAccount {SYSTEM_NAMESPACE}/{account}"), &runtime.kube), ("Crossplane".to_string(), &self.runtime.kube)] {
                let allowed = kube.can_i("create", &kind.gvk.group, &kind.plural, None).await.map_err(|e| format!("cannot review access to {}: {e}", kind.plural))?;
                if !allowed {
                    return Err(format!("waiting for the RBAC manager to let {who} use {}.{}", kind.plural, kind.gvk.group));
                }
            }
        }
        Ok(runtime)
    }

    /// Names of providers whose controllers run now (by package object name).
    pub fn running(&self) -> Vec<String> {
        let mut names: Vec<String> = self.lock().keys().cloned().collect();
        names.sort();
        names
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Started, ProviderHandle)>> {
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn installed_crds(&self, package: &str) -> Result<Vec<Value>, String> {
        self.runtime
            .kube
            .list(&crd_kind(), None, Some(&format!("{LABEL_PACKAGE}={package}")))
            .await
            .map_err(|e| format!("cannot list the provider's CRDs: {e}"))
    }
}


impl ProviderInstaller {
    /// The owners of the CRDs a package installs, as Crossplane's establisher sets them: the
    /// active revision as controller, the package itself, and every older revision released
    /// to a plain owner (so a CRD outlives neither the package nor a revision still kept).
    async fn owners(&self, package: &Value, reference: &str) -> Result<Vec<Value>, String> {
        let name = object::name(package).unwrap_or_default();
        let active_name = revision_name(name, reference);
        let revisions = self
            .runtime
            .kube
            .list(&provider_revision_kind(), None, Some(&format!("{LABEL_PACKAGE}={name}")))
            .await
            .map_err(|e| format!("cannot list the provider's revisions: {e}"))?;
        let active = revisions
            .iter()
            .find(|r| object::name(r) == Some(active_name.as_str()))
            .ok_or_else(|| format!("cannot find the active ProviderRevision {active_name}"))?;
        let mut owners = vec![object::owner_reference(active, true, true), object::owner_reference(package, false, false)];
        owners.extend(revisions.iter().filter(|r| object::name(r) != Some(active_name.as_str())).map(|r| object::owner_reference(r, false, false)));
        Ok(owners)
    }
}

/// `pkg.oxplane.io/capabilities` on a Provider: the capabilities its built-in package declares
/// (comma-separated, e.g. `safe-start`). A built-in has no package metadata to read them from;
/// it declares none unless this says so.
pub const ANNOTATION_CAPABILITIES: &str = "pkg.oxplane.io/capabilities";

/// The capabilities a built-in provider package declares.
fn capabilities(package: &Value) -> impl Iterator<Item = &str> {
    object::annotation(package, ANNOTATION_CAPABILITIES).unwrap_or_default().split(',').map(str::trim).filter(|c| !c.is_empty())
}

fn is_managed(crd: &Value) -> bool {
    crd.pointer("/spec/names/categories").and_then(Value::as_array).is_some_and(|c| c.iter().any(|c| c.as_str() == Some("managed")))
}

#[async_trait::async_trait]
impl Installer for ProviderInstaller {
    fn package_kind(&self) -> Kind {
        provider_kind()
    }

    fn revision_kind(&self) -> Kind {
        provider_revision_kind()
    }

    fn noun(&self) -> &'static str {
        "provider"
    }

    fn builtin_names(&self) -> Vec<&'static str> {
        self.catalog.keys().copied().collect()
    }

    fn pulls(&self) -> bool {
        self.pulled.is_some()
    }

    fn accepts(&self, _package: &Value, reference: &str) -> bool {
        self.builtin(reference).is_some() || self.pulled.is_some()
    }

    async fn install(&self, package: &Value, reference: &str, pull: &oxplane_xpkg::registry::ProgressSender) -> Result<Progress, String> {
        let name = object::name(package).unwrap_or_default();
        let Some(provider) = self.builtin(reference) else {
            if let Some(pulled) = &self.pulled {
                let owners = self.owners(package, reference).await?;
                // A package that cannot be pulled may have been meant as a built-in one.
                return pulled.ensure(package, reference, &revision_name(name, reference), owners, pull).await.map_err(|error| {
                    if error.starts_with("cannot unpack package: ") && self.sources.pulled_by(reference).is_none() { format!("{error}; built-in providers: {}", self.builtin_names().join(", ")) } else { error }
                });
            }
            return Err(format!("{reference:?} is not a built-in provider"));
        };
        if let Some(pulled) = &self.pulled {
            pulled.stop(name);
        }
        let owners = self.owners(package, reference).await?;
        // Its managed kinds become MRDs, whose CRDs the MRD controller creates once active.
        let installed = crate::mrd::install_provider_crds(&self.runtime.kube, package, provider.crds(reference), &owners, crate::mrd::is_safe_start(capabilities(package)))
            .await?;
        if !installed.waiting.is_empty() {
            return Ok(Progress::Waiting(format!("waiting for CustomResourceDefinitions to be established: {}", installed.waiting.join(", "))));
        }
        // A missing DeploymentRuntimeConfig means no arguments, as an empty one does.
        let config_name = runtime_config_name(package);
        let args = match self.runtime.kube.get(&runtime_config_kind(), None, config_name).await {
            Ok(config) => config.as_ref().map(runtime_args).unwrap_or_default(),
            Err(error) => return Err(format!("cannot get DeploymentRuntimeConfig {config_name}: {error}")),
        };
        let started: Started = (reference.to_string(), args);
        if self.lock().get(name).is_some_and(|(running, _)| *running == started) {
            return Ok(Progress::Installed);
        }
        let crds = self.installed_crds(name).await?;
        let runtime = match self.runtime_for(&revision_name(name, reference), &crds).await {
            Ok(runtime) => runtime,
            Err(waiting) => return Ok(Progress::Waiting(waiting)),
        };
        // Started again when the reference or its runtime arguments change (checked above; a
        // package's reconciles do not overlap).
        let mut running = self.lock();
        if let Some((_, old)) = running.remove(name) {
            old.stop();
        }
        let handle = provider.start_with_args(&runtime, reference, &started.1);
        tracing::info!(provider = name, package = reference, args = ?started.1, controllers = ?handle.controller_names(), "provider started");
        running.insert(name.to_string(), (started, handle));
        Ok(Progress::Installed)
    }

    async fn uninstall_blockers(&self, package: &Value) -> Result<Vec<String>, String> {
        let name = object::name(package).unwrap_or_default();
        let mut blockers = Vec::new();
        for crd in self.installed_crds(name).await? {
            if !is_managed(&crd) {
                continue;
            }
            let Some(kind) = Kind::of_crd(&crd) else { continue };
            let items = match self.runtime.kube.list(&kind, None, None).await {
                Ok(items) => items,
                Err(error) if error.is_not_found() => continue,
                Err(error) => return Err(format!("cannot list {}: {error}", kind.gvk)),
            };
            for item in items {
                let key = object::ObjectKey::of(&item).map(|k| k.to_string()).unwrap_or_default();
                blockers.push(format!("{}/{key}", kind.gvk.kind));
            }
        }
        blockers.sort();
        Ok(blockers)
    }

    async fn uninstall(&self, package: &Value) -> Result<Option<String>, String> {
        let name = object::name(package).unwrap_or_default();
        // The MRDs first: an active one would create its CRD again.
        let definitions = self
            .runtime
            .kube
            .list(&crate::mrd::mrd_kind(), None, Some(&format!("{LABEL_PACKAGE}={name}")))
            .await
            .map_err(|e| format!("cannot list the provider's ManagedResourceDefinitions: {e}"))?;
        for mrd in definitions.iter().filter(|mrd| !object::is_deleting(mrd)) {
            let mrd_name = object::name(mrd).unwrap_or_default();
            self.runtime
                .kube
                .delete(&crate::mrd::mrd_kind(), None, mrd_name, &DeleteOptions::default())
                .await
                .map_err(|e| format!("cannot delete ManagedResourceDefinition {mrd_name}: {e}"))?;
        }
        let remaining = self.installed_crds(name).await?;
        if !remaining.is_empty() {
            let mut names = Vec::new();
            for crd in &remaining {
                let crd_name = object::name(crd).unwrap_or_default();
                names.push(crd_name.to_string());
                if !object::is_deleting(crd) {
                    self.runtime
                        .kube
                        .delete(&crd_kind(), None, crd_name, &DeleteOptions::default())
                        .await
                        .map_err(|e| format!("cannot delete CustomResourceDefinition {crd_name}: {e}"))?;
                }
            }
            return Ok(Some(format!("waiting for CustomResourceDefinitions to be deleted: {}", names.join(", "))));
        }
        // The provider's kinds are gone: its controllers have nothing left to do.
        if let Some(pulled) = &self.pulled {
            pulled.stop(name);
        }
        if let Some((_, handle)) = self.lock().remove(name) {
            handle.stop();
            tracing::info!(provider = name, "provider stopped");
        }
        Ok(None)
    }

    async fn deactivate(&self, package: &Value) {
        let name = object::name(package).unwrap_or_default();
        if let Some(pulled) = &self.pulled {
            pulled.stop(name);
        }
        if let Some((_, handle)) = self.lock().remove(name) {
            handle.stop();
            tracing::info!(provider = name, "provider stopped: no active revision");
        }
    }

    fn dependencies(&self, package: &Value) -> Vec<super::configurations::dependencies::Dependency> {
        let reference = package.pointer("/spec/package").and_then(Value::as_str).unwrap_or_default();
        match &self.pulled {
            Some(pulled) if self.builtin(reference).is_none() => pulled.dependencies(object::name(package).unwrap_or_default()),
            _ => Vec::new(),
        }
    }

    fn revision_status(&self, package: &Value) -> Map<String, Value> {
        let reference = package.pointer("/spec/package").and_then(Value::as_str).unwrap_or_default();
        if self.builtin(reference).is_none()
            && let Some(status) = self.pulled.as_ref().and_then(|p| p.revision_status(object::name(package).unwrap_or_default()))
        {
            return status;
        }
        let refs: Vec<Value> = self
            .builtin(reference)
            .map(|p| p.crds(reference))
            .unwrap_or_default()
            .iter()
            .map(crate::mrd::object_ref)
            .collect();
        let mut status = Map::new();
        status.insert("objectRefs".into(), Value::Array(refs));
        let capabilities: Vec<Value> = capabilities(package).map(|c| json!(c)).collect();
        if !capabilities.is_empty() {
            status.insert("capabilities".into(), Value::Array(capabilities));
        }
        status
    }
}
