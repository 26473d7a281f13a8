//! Configurations (`pkg.crossplane.io/v1`) pulled from OCI registries: the package manager
//! fetches the image `spec.package` names (its tag resolved to a digest at every reconcile,
//! the image read from the content-addressed cache when `packagePullPolicy` allows, pull
//! secrets from `packagePullSecrets`), names the revision after the digest as Crossplane does,
//! parses `package.yaml`, resolves `dependsOn` against the installed packages, and installs
//! the XRDs, Compositions (and MRAPs and Operations) it holds, owned by the revision.
//! Conditions and reasons are Crossplane's: on the Configuration `Installed`
//! (`ActivePackageRevision`, `InactivePackageRevision`, `UnpackingPackage`) and `Healthy`
//! (`HealthyPackageRevision`, `UnhealthyPackageRevision`); on the revision `RevisionHealthy`.
//! A newer revision deactivates the older ones (which release their objects to it);
//! `revisionHistoryLimit` inactive revisions are kept.
//!
//! - `establish.rs`: installing and releasing a revision's objects.
//! - `dependencies.rs`: `dependsOn` entries and version constraints.
//!
//! An active revision writes itself into the Lock (`super::lock`) with its dependencies, so
//! the resolver installs those missing; the package `spec.crossplane.version` constrains is
//! checked against [`CROSSPLANE_VERSION`] unless `ignoreCrossplaneConstraints` is set.

pub mod dependencies;
mod establish;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use oxplane_runtime::Runtime;
use oxplane_runtime::client::Kube;
use oxplane_runtime::conditions::{self, Condition};
use oxplane_runtime::controller::{Action, Controller, ControllerConfig, ReconcileError, Reconciler, spec_or_metadata_changed};
use oxplane_runtime::events::EventRecorder;
use oxplane_runtime::kinds::Kind;
use oxplane_runtime::object::{self, ObjectKey};
use oxplane_xpkg::fetch::{Cache, Fetched, PullPolicy, fetch_with_progress};
use oxplane_xpkg::registry::Progress;
use oxplane_xpkg::meta::PackageType;
use serde_json::{Value, json};

use super::{CROSSPLANE_VERSION, LABEL_PACKAGE, image_configs, lock};
use super::reconciler::{collect_revision_garbage, copied_spec_patch, create_revision, package_of_revision, write_status_if_changed};

pub use super::image_configs::PACKAGE_NAMESPACE;

/// `Configuration`.
pub fn configuration_kind() -> Kind {
    Kind::new("pkg.crossplane.io", "v1", "Configuration", "configurations", false)
}

/// `ConfigurationRevision`.
pub fn configuration_revision_kind() -> Kind {
    Kind::new("pkg.crossplane.io", "v1", "ConfigurationRevision", "configurationrevisions", false)
}

/// `status.<key>` set to a non-empty array, or removed when `value` is empty.
fn set_or_remove_status_field(object: &mut Value, key: &str, value: Value) {
    if value.as_array().is_some_and(|a| !a.is_empty()) {
        object::set_status_field(object, key, value);
    } else if let Some(status) = object.get_mut("status").and_then(Value::as_object_mut) {
        status.remove(key);
    }
}

/// Reconciles Configurations.
pub struct ConfigurationReconciler {
    kube: Kube,
    cache: Cache,
    recorder: EventRecorder,
    waiting: dependencies::Waiters,
    /// Every Configuration reconciled, for the ImageConfig watch to wake them all.
    known: Arc<Mutex<BTreeSet<String>>>,
}

/// Why a revision is not healthy: its `RevisionHealthy` message, and the reason of the Warning
/// event Crossplane records with it (`ValidatePackage`, `ResolveDependencies`, ...).
struct Unhealthy {
    event: &'static str,
    message: String,
}

impl Unhealthy {
    fn new(event: &'static str, message: impl Into<String>) -> Unhealthy {
        Unhealthy { event, message: message.into() }
    }

    /// A failure to install or release objects (`SyncPackage`).
    fn sync(message: impl Into<String>) -> Unhealthy {
        Unhealthy::new("SyncPackage", message)
    }
}

impl ConfigurationReconciler {
    /// A reconciler keeping pulled packages in `cache_dir`.
    pub fn new(kube: Kube, cache_dir: PathBuf) -> Self {
        let recorder = EventRecorder::new(kube.clone(), "packages/configuration.pkg.crossplane.io");
        ConfigurationReconciler { kube, cache: Cache::new(cache_dir), recorder, waiting: dependencies::Waiters::default(), known: Arc::default() }
    }

    async fn revisions(&self, name: &str) -> Result<Vec<Value>, ReconcileError> {
        Ok(self.kube.list(&configuration_revision_kind(), None, Some(&format!("{LABEL_PACKAGE}={name}"))).await?)
    }

    async fn run(&self, package: &mut Value) -> Result<Action, ReconcileError> {
        if object::is_deleting(package) {
            // Revisions and what they installed go with the package (owner references).
            return Ok(Action::Done);
        }
        let name = object::name(package).unwrap_or_default().to_string();
        let reference = package.pointer("/spec/package").and_then(Value::as_str).unwrap_or_default().to_string();
        let policy = PullPolicy::parse(package.pointer("/spec/packagePullPolicy").and_then(Value::as_str));
        self.known.lock().unwrap_or_else(|p| p.into_inner()).insert(name.clone());
        let applied = match image_configs::list(&self.kube).await {
            Ok(configs) => Ok(image_configs::apply(&configs, &reference)),
            Err(error) => Err(error),
        };
        let image = applied.as_ref().map_or_else(|_| reference.clone(), |a| a.image.clone());
        let credentials = match (&policy, &applied) {
            (Err(error), _) => Err(error.to_string()),
            (_, Err(error)) => Err(error.clone()),
            (Ok(policy), Ok(applied)) => {
                image_configs::pull_credentials(&self.kube, &image_configs::pull_secret_names(package, applied), &image).await.map(|c| (*policy, c))
            }
        };
        let fetched = match credentials {
            Err(error) => Err(error),
            Ok((policy, credentials)) => self.fetch_reporting(package, &image, &credentials, policy).await,
        };
        let applied_refs = applied.as_ref().map(image_configs::Applied::refs_json).unwrap_or_else(|_| json!([]));
        set_or_remove_status_field(package, "appliedImageConfigRefs", applied_refs.clone());
        object::set_status_field(package, "resolvedPackage", json!(image));
        // Fetched and parsed as Crossplane's package manager does before it makes a revision:
        // a stream that cannot be read is the package's `UnpackingPackage`, no revision is made.
        let unpacked = fetched.and_then(|fetched| {
            let text = fetched.image.package_yaml().map_err(|e| format!("cannot extract package content from {image}: {e}"))?;
            let stream = oxplane_xpkg::meta::read(&text).map_err(|e| format!("cannot parse package {image}: {e}"))?;
            Ok((fetched, stream))
        });
        let (fetched, stream) = match unpacked {
            Ok(unpacked) => unpacked,
            Err(error) => {
                let message = format!("cannot unpack package: {error}");
                conditions::set(package, Condition::new("Installed", "False", "UnpackingPackage").with_message(&message));
                conditions::set(package, Condition::new("Healthy", "False", "UnhealthyPackageRevision").with_message(&message));
                self.recorder.warning(package, "UnpackPackage", &message);
                return Err(ReconcileError::new(message));
            }
        };
        if !fetched.cached {
            tracing::info!(configuration = %name, reference = %reference, digest = %fetched.digest, layers = fetched.image.layers.len(),
                bytes = fetched.image.layers.iter().map(Vec::len).sum::<usize>(), "pulled package");
        }
        let revision_name = oxplane_xpkg::names::revision_name(&name, &fetched.digest);
        object::set_status_field(package, "currentRevision", json!(revision_name));
        object::set_status_field(package, "currentIdentifier", json!(reference));

        let automatic = package.pointer("/spec/revisionActivationPolicy").and_then(Value::as_str) != Some("Manual");
        let revisions = self.revisions(&name).await?;
        let sibling_names: Vec<String> = revisions.iter().filter_map(|r| object::name(r).map(str::to_string)).filter(|n| *n != revision_name).collect();
        // Every other revision becomes inactive and lets go of its objects first.
        for old in revisions.iter().filter(|r| object::name(r) != Some(revision_name.as_str())) {
            if old.pointer("/spec/desiredState").and_then(Value::as_str) == Some("Active") {
                let old_name = object::name(old).unwrap_or_default();
                self.kube.merge_patch(&configuration_revision_kind(), None, old_name, &json!({"spec": {"desiredState": "Inactive"}})).await?;
            }
            establish::release(&self.kube, old).await.map_err(ReconcileError::new)?;
        }
        let mut revision = self.ensure_revision(package, &revision_name, &reference, &revisions, automatic).await?;
        let old: Vec<&Value> = revisions.iter().filter(|r| object::name(r) != Some(revision_name.as_str())).collect();
        collect_revision_garbage(&self.kube, &configuration_revision_kind(), package, old).await?;

        let active = revision.pointer("/spec/desiredState").and_then(Value::as_str) == Some("Active");
        let before = conditions::status_of(&revision);
        object::set_status_field(&mut revision, "resolvedPackage", json!(image));
        set_or_remove_status_field(&mut revision, "appliedImageConfigRefs", applied_refs);
        let outcome = self.install(package, &mut revision, &sibling_names, stream, active).await;
        match &outcome {
            Ok(()) => {
                conditions::set(&mut revision, Condition::new("RevisionHealthy", "True", "HealthyPackageRevision"));
            }
            Err(Unhealthy { event, message }) => {
                conditions::set(&mut revision, Condition::new("RevisionHealthy", "False", "UnhealthyPackageRevision").with_message(message));
                self.recorder.warning(&revision, event, message);
            }
        }
        write_status_if_changed(&self.kube, &configuration_revision_kind(), &revision, &before).await?;

        if active {
            conditions::set(package, Condition::new("Installed", "True", "ActivePackageRevision"));
        } else {
            conditions::set(package, Condition::new("Installed", "False", "InactivePackageRevision").with_message("Package is inactive"));
        }
        match &outcome {
            Ok(()) => {
                let was_healthy = conditions::is_true(package, "Healthy");
                conditions::set(package, Condition::new("Healthy", "True", "HealthyPackageRevision"));
                if !was_healthy {
                    self.recorder.normal(package, "InstallPackageRevision", "Successfully installed package revision");
                }
            }
            Err(Unhealthy { message, .. }) => {
                let message = format!("Package revision health is \"False\" with message: {message}");
                conditions::set(package, Condition::new("Healthy", "False", "UnhealthyPackageRevision").with_message(message));
            }
        }
        Ok(match (&outcome, &policy) {
            (Err(_), _) => Action::Requeue,
            // A moved tag is noticed within a minute, as Crossplane polls for it.
            (Ok(()), Ok(PullPolicy::Always)) => Action::RequeueAfter(Duration::from_secs(60)),
            (Ok(()), _) => Action::Done,
        })
    }

    /// Fetches the package, its progress reported while the pull is slow (`pull_progress`).
    async fn fetch_reporting(&self, package: &mut Value, image: &str, credentials: &oxplane_xpkg::registry::Credentials, policy: PullPolicy) -> Result<Fetched, String> {
        let (sender, receiver) = tokio::sync::watch::channel(Progress::default());
        let pull = fetch_with_progress(image, credentials, policy, &self.cache, Some(&sender));
        super::pull_progress::reporting(&self.kube, &configuration_kind(), package, image, receiver, pull).await?.map_err(|e| e.to_string())
    }

    /// The revision for this digest, created when missing (numbered after the highest).
    async fn ensure_revision(&self, package: &Value, revision_name: &str, reference: &str, revisions: &[Value], automatic: bool) -> Result<Value, ReconcileError> {
        let kind = configuration_revision_kind();
        let highest = revisions.iter().filter_map(|r| r.pointer("/spec/revision").and_then(Value::as_i64)).max().unwrap_or(0);
        if let Some(existing) = revisions.iter().find(|r| object::name(r) == Some(revision_name)) {
            let number = existing.pointer("/spec/revision").and_then(Value::as_i64).unwrap_or(0);
            let mut patch = json!({"spec": copied_spec_patch(package, existing)});
            if number < highest {
                patch["spec"]["revision"] = json!(highest + 1);
            }
            if automatic && existing.pointer("/spec/desiredState").and_then(Value::as_str) != Some("Active") {
                patch["spec"]["desiredState"] = json!("Active");
            }
            if patch["spec"].as_object().is_some_and(|s| s.is_empty()) {
                return Ok(existing.clone());
            }
            return Ok(self.kube.merge_patch(&kind, None, revision_name, &patch).await?);
        }
        create_revision(&self.kube, &kind, package, revision_name, reference, highest + 1, if automatic { "Active" } else { "Inactive" }).await
    }

    /// The revision's work, in Crossplane's order: validate the package (a failure installs
    /// nothing), lint it (a kind a Configuration may not hold is a `LintPackage` warning and is
    /// skipped), check the Crossplane version, resolve its dependencies, install its objects
    /// (an inactive revision only adds itself as an owner of what exists), record `objectRefs`.
    async fn install(&self, package: &Value, revision: &mut Value, siblings: &[String], stream: oxplane_xpkg::meta::Stream, active: bool) -> Result<(), Unhealthy> {
        let invalid = |error: String| Unhealthy::new("ValidatePackage", format!("validating package contents failed: {error}"));
        let parsed = stream.validate(PackageType::Configuration).map_err(|e| invalid(e.to_string()))?;
        let crossplane = parsed.meta.pointer("/spec/crossplane/version").and_then(Value::as_str).unwrap_or_default();
        if let Some(error) = dependencies::constraint_error(crossplane) {
            return Err(invalid(format!("package version constraints are poorly formatted: {error}")));
        }
        if let Err(lint) = parsed.lint() {
            self.recorder.warning(revision, "LintPackage", format!("linting package contents failed: {lint}"));
        }
        self.copy_meta_metadata(revision, &parsed.meta).await.map_err(|e| Unhealthy::sync(format!("cannot update package revision object metadata: {e}")))?;
        if revision.pointer("/spec/ignoreCrossplaneConstraints").and_then(Value::as_bool) != Some(true) && !dependencies::satisfies(CROSSPLANE_VERSION, crossplane) {
            return Err(Unhealthy::new("LintPackage", format!("incompatible Crossplane version: package is not compatible with Crossplane version ({CROSSPLANE_VERSION})")));
        }
        let revision_name = object::name(revision).unwrap_or_default().to_string();
        if !active {
            lock::remove(&self.kube, &revision_name).await.map_err(|e| Unhealthy::new("DeactivateRevision", e))?;
        }
        if revision.pointer("/spec/skipDependencyResolution").and_then(Value::as_bool) != Some(true) {
            let unresolved = |e: String| Unhealthy::new("ResolveDependencies", format!("cannot resolve package dependencies: {e}"));
            let wanted = dependencies::dependencies(&parsed.meta).map_err(unresolved)?;
            if active {
                let reference = revision.pointer("/spec/image").and_then(Value::as_str).unwrap_or_default().to_string();
                lock::upsert(&self.kube, lock::entry(&revision_name, "Configuration", &reference, &wanted)).await.map_err(unresolved)?;
            }
            self.resolve_dependencies(object::name(package).unwrap_or_default(), revision, &wanted).await?;
        }
        if !active {
            establish::release(&self.kube, revision).await.map_err(|e| Unhealthy::new("DeactivateRevision", e))?;
        }
        let mut refs = Vec::new();
        for desired in parsed.installable() {
            if let Some(reference) = establish::establish(&self.kube, package, revision, siblings, desired, active).await.map_err(Unhealthy::sync)? {
                refs.push(reference);
            }
        }
        establish::sort_refs(&mut refs);
        object::set_status_field(revision, "objectRefs", Value::Array(refs));
        Ok(())
    }

    /// The meta object's labels and annotations go onto the revision, as Crossplane copies
    /// them (e.g. `meta.crossplane.io/maintainer`).
    async fn copy_meta_metadata(&self, revision: &mut Value, meta: &Value) -> Result<(), oxplane_runtime::client::ApiError> {
        let mut patch = json!({});
        for field in ["labels", "annotations"] {
            for (key, value) in meta.pointer(&format!("/metadata/{field}")).and_then(Value::as_object).into_iter().flatten() {
                if revision.pointer(&format!("/metadata/{field}")).and_then(|m| m.get(key)) != Some(value) {
                    patch["metadata"][field][key] = value.clone();
                }
            }
        }
        if patch.get("metadata").is_none() {
            return Ok(());
        }
        let saved = self.kube.merge_patch(&configuration_revision_kind(), None, object::name(revision).unwrap_or_default(), &patch).await?;
        if let Some(metadata) = saved.get("metadata") {
            revision["metadata"] = metadata.clone();
        }
        Ok(())
    }

    /// Every `dependsOn` entry must be installed in a version its constraint allows; counts go
    /// to `status.foundDependencies` and `installedDependencies`.
    async fn resolve_dependencies(&self, name: &str, revision: &mut Value, wanted: &[dependencies::Dependency]) -> Result<(), Unhealthy> {
        self.waiting.set(name, wanted);
        let resolution = dependencies::check(&self.kube, wanted).await.map_err(|e| Unhealthy::new("ResolveDependencies", e))?;
        object::set_status_field(revision, "foundDependencies", json!(resolution.found));
        object::set_status_field(revision, "installedDependencies", json!(resolution.installed));
        if let Some(error) = resolution.error() {
            return Err(Unhealthy::new("ResolveDependencies", error));
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl Reconciler for ConfigurationReconciler {
    async fn reconcile(&self, key: &ObjectKey) -> Result<Action, ReconcileError> {
        let kind = configuration_kind();
        let Some(mut package) = self.kube.get(&kind, None, &key.name).await? else {
            return Ok(Action::Done);
        };
        let before = conditions::status_of(&package);
        let result = self.run(&mut package).await;
        if !write_status_if_changed(&self.kube, &kind, &package, &before).await? {
            return Ok(Action::Done);
        }
        result
    }
}

/// Starts the Configuration controller (`packages/configuration.pkg.crossplane.io`), keeping
/// pulled packages in `cache_dir`.
pub fn start_controller(runtime: &Runtime, cache_dir: PathBuf) -> Arc<Controller> {
    let reconciler = Arc::new(ConfigurationReconciler::new(runtime.kube.clone(), cache_dir));
    let (waiting, known) = (reconciler.waiting.clone(), reconciler.known.clone());
    let controller = Controller::start(ControllerConfig::new("packages/configuration.pkg.crossplane.io"), reconciler, runtime.metrics.clone());
    let (package_kind, revision_kind) = (configuration_kind(), configuration_revision_kind());
    runtime.watches.kinds().insert(package_kind.clone());
    runtime.watches.kinds().insert(revision_kind.clone());
    controller.watch_own(&runtime.watches, &package_kind.gvk, spec_or_metadata_changed);
    controller.watch_mapped(&runtime.watches, &revision_kind.gvk, package_of_revision);
    // An ImageConfig may change where any package is pulled from and with which credentials.
    let image_config_kind = image_configs::image_config_kind();
    runtime.watches.kinds().insert(image_config_kind.clone());
    controller.watch_mapped(&runtime.watches, &image_config_kind.gvk, move |_| {
        known.lock().unwrap_or_else(|p| p.into_inner()).iter().map(|name| ObjectKey::new(None, name)).collect()
    });
    // A dependency installed, upgraded or become healthy wakes the Configurations that need it.
    waiting.watch(runtime, &controller);
    controller
}
