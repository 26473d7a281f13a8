//! The lifecycle of a package object, shared by Providers and Functions: a revision per
//! package reference (created inactive under `revisionActivationPolicy: Manual` until the
//! user activates it), install through an [`Installer`], Crossplane's `Installed` and
//! `Healthy` conditions, and an uninstall that waits — saying for what — until nothing
//! depends on the package.

use std::sync::Arc;
use std::time::Duration;

use oxplane_runtime::Runtime;
use oxplane_runtime::client::{DeleteOptions, Kube};
use oxplane_runtime::conditions::{self, Condition};
use oxplane_runtime::controller::{Action, Controller, ControllerConfig, ReconcileError, Reconciler, spec_or_metadata_changed};
use oxplane_runtime::events::EventRecorder;
use oxplane_runtime::kinds::Kind;
use oxplane_runtime::object::{self, ObjectKey};
use oxplane_runtime::provider::package_name;
use oxplane_runtime::watches::WatchEvent;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use oxplane_xpkg::registry::ProgressSender;

use super::{FINALIZER_UNINSTALL, LABEL_PACKAGE};

/// How far installing a package got.
#[derive(Clone, Debug, PartialEq)]
pub enum Progress {
    /// Installed and healthy.
    Installed,
    /// Still installing: what it waits for.
    Waiting(String),
    /// Everything of it is installed but its runtime (its process) is down, for this reason:
    /// the revision is healthy and only `RuntimeHealthy` is False.
    RuntimeDown(String),
}

impl From<Option<String>> for Progress {
    /// `None`: installed; `Some(what)`: waiting for `what`.
    fn from(waiting: Option<String>) -> Self {
        waiting.map_or(Progress::Installed, Progress::Waiting)
    }
}

/// What installing one kind of package means.
#[async_trait::async_trait]
pub trait Installer: Send + Sync + 'static {
    /// The package kind (`Provider`, `Function`).
    fn package_kind(&self) -> Kind;
    /// Its revision kind.
    fn revision_kind(&self) -> Kind;
    /// `provider` or `function`, for messages.
    fn noun(&self) -> &'static str;
    /// The built-in package names.
    fn builtin_names(&self) -> Vec<&'static str>;
    /// Whether this installer pulls packages that are not built in and runs them.
    fn pulls(&self) -> bool {
        false
    }
    /// Whether this package can be installed: by default, when it names a built-in package.
    fn accepts(&self, _package: &Value, reference: &str) -> bool {
        self.builtin_names().contains(&package_name(reference))
    }
    /// Installs the package (idempotent): how far it got, or why it cannot. A pull of the
    /// package's image sends its progress to `pull`.
    async fn install(&self, package: &Value, reference: &str, pull: &ProgressSender) -> Result<Progress, String>;
    /// What keeps the package from being uninstalled (`Kind/name` of objects that need it).
    async fn uninstall_blockers(&self, package: &Value) -> Result<Vec<String>, String>;
    /// Uninstalls: `Ok(None)` once done, `Ok(Some(what))` while waiting.
    async fn uninstall(&self, package: &Value) -> Result<Option<String>, String>;
    /// Stops the package's runtime while no revision of it is active, keeping what it
    /// installed (an inactive revision runs nothing, as Crossplane's runs no Deployment).
    async fn deactivate(&self, package: &Value);
    /// What the installed package's meta object declares in `dependsOn` (built-ins: nothing),
    /// for its Lock entry: the resolver installs what no entry provides.
    fn dependencies(&self, _package: &Value) -> Vec<super::configurations::dependencies::Dependency> {
        Vec::new()
    }
    /// Extra status fields of the revision (e.g. `objectRefs`, `endpoint`).
    fn revision_status(&self, package: &Value) -> Map<String, Value>;
}

/// Reconciles package objects of one kind.
pub struct PackageReconciler {
    kube: Kube,
    installer: Arc<dyn Installer>,
    recorder: EventRecorder,
    sources: super::PackageSources,
    /// Packages waiting on their dependencies, woken when one changes.
    waiters: super::configurations::dependencies::Waiters,
}

/// The revision name of a package reference: `<package>-<12 hex of its sha256>`.
pub fn revision_name(package: &str, reference: &str) -> String {
    let digest = Sha256::digest(reference.as_bytes());
    let hex: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    format!("{package}-{hex}")
}

/// `a, b, c and N more`.
fn list_some(items: &[String]) -> String {
    const SHOWN: usize = 5;
    if items.len() <= SHOWN {
        return items.join(", ");
    }
    format!("{}, and {} more", items[..SHOWN].join(", "), items.len() - SHOWN)
}

impl PackageReconciler {
    /// A reconciler for the installer's package kind.
    pub fn new(kube: Kube, installer: Arc<dyn Installer>) -> Self {
        let recorder = EventRecorder::new(kube.clone(), &format!("packages/{}.pkg.crossplane.io", installer.noun()));
        PackageReconciler { kube, installer, recorder, sources: super::PackageSources::default(), waiters: Default::default() }
    }

    /// Refuses references `sources` says are pulled when the installer pulls no packages.
    pub fn with_sources(mut self, sources: super::PackageSources) -> Self {
        self.sources = sources;
        self
    }

    async fn update(&self, package: &mut Value) -> Result<(), ReconcileError> {
        let saved = self.kube.replace(&self.installer.package_kind(), package).await?;
        if let Some(metadata) = saved.get("metadata") {
            package["metadata"] = metadata.clone();
        }
        Ok(())
    }

    async fn revisions(&self, name: &str) -> Result<Vec<Value>, ReconcileError> {
        Ok(self.kube.list(&self.installer.revision_kind(), None, Some(&format!("{LABEL_PACKAGE}={name}"))).await?)
    }

    async fn run(&self, package: &mut Value) -> Result<Action, ReconcileError> {
        let name = object::name(package).unwrap_or_default().to_string();
        let reference = package.pointer("/spec/package").and_then(Value::as_str).unwrap_or_default().to_string();
        if object::is_deleting(package) {
            return self.uninstall(package, &name).await;
        }
        if object::add_finalizer(package, FINALIZER_UNINSTALL) {
            self.update(package).await?;
        }
        let wanted = package_name(&reference);
        if let Some(prefix) = self.sources.pulled_by(&reference).filter(|_| !self.installer.pulls()) {
            let message = format!(
                "cannot unpack package: {reference:?} is to be pulled from its registry (oxplane up --pull-package {prefix}), and this oxplane runs no pulled {noun} packages",
                noun = self.installer.noun(),
            );
            conditions::set(package, Condition::new("Installed", "False", "UnpackingPackage").with_message(&message));
            conditions::set(package, Condition::new("Healthy", "False", "UnhealthyPackageRevision").with_message(&message));
            self.recorder.warning(package, "UnpackPackage", message);
            return Ok(Action::Done);
        }
        if reference.is_empty() || !self.installer.accepts(package, &reference) {
            let message = format!(
                "cannot unpack package: cannot install package {reference:?}: oxplane installs only its built-in {noun}s, and {wanted:?} is not one of them; built-in {noun}s: {}",
                self.installer.builtin_names().join(", "),
                noun = self.installer.noun(),
            );
            // As Crossplane reports a package it cannot fetch: both conditions, both False.
            conditions::set(package, Condition::new("Installed", "False", "UnpackingPackage").with_message(&message));
            conditions::set(package, Condition::new("Healthy", "False", "UnhealthyPackageRevision").with_message(&message));
            self.recorder.warning(package, "UnpackPackage", message);
            return Ok(Action::Done);
        }

        let automatic = package.pointer("/spec/revisionActivationPolicy").and_then(Value::as_str) != Some("Manual");
        let revision = self.ensure_revision(package, &name, &reference, automatic).await?;
        let revision_name = object::name(&revision).unwrap_or_default().to_string();
        if let Some(status) = package.as_object_mut().map(|o| o.entry("status").or_insert_with(|| json!({}))) {
            status["currentRevision"] = json!(revision_name);
            status["currentIdentifier"] = json!(reference);
            status["resolvedPackage"] = json!(reference);
        }
        if revision.pointer("/spec/desiredState").and_then(Value::as_str) != Some("Active") {
            return self.stay_inactive(package, &name, revision).await;
        }
        // A slow pull (of a package that is not built in) says how far it got meanwhile.
        let (pull, pulled) = tokio::sync::watch::channel(oxplane_xpkg::registry::Progress::default());
        let snapshot = package.clone();
        let installing = self.installer.install(&snapshot, &reference, &pull);
        let outcome = super::pull_progress::reporting(&self.kube, &self.installer.package_kind(), package, &reference, pulled, installing)
            .await
            .map_err(ReconcileError::new)?;
        // Only the runtime is down: the revision is healthy, its runtime not, and the package
        // says which, as Crossplane's package manager words it.
        let (healthy, revision_healthy) = match &outcome {
            Ok(Progress::Installed) => (Condition::new("Healthy", "True", "HealthyPackageRevision"), None),
            Ok(Progress::Waiting(waiting)) => (Condition::new("Healthy", "Unknown", "UnknownPackageRevisionHealth").with_message(waiting), None),
            Ok(Progress::RuntimeDown(why)) => (
                Condition::new("Healthy", "False", "UnhealthyPackageRevision").with_message(format!("Package runtime health is \"False\" with message: {why}")),
                Some(Condition::new("Healthy", "True", "HealthyPackageRevision")),
            ),
            Err(error) => (Condition::new("Healthy", "False", "UnhealthyPackageRevision").with_message(error), None),
        };
        let revision_healthy = revision_healthy.unwrap_or_else(|| healthy.clone());
        if let Err(why) | Ok(Progress::RuntimeDown(why)) = &outcome {
            self.recorder.warning(package, "InstallPackage", why);
        }
        match &outcome {
            // A package that could not be pulled is not installed, as Crossplane reports it.
            Err(error) if error.starts_with("cannot unpack package: ") => {
                conditions::set(package, Condition::new("Installed", "False", "UnpackingPackage").with_message(error));
            }
            _ => {
                conditions::set(package, Condition::new("Installed", "True", "ActivePackageRevision"));
            }
        }
        conditions::set(package, healthy.clone());
        let runtime_healthy = match &outcome {
            Ok(Progress::RuntimeDown(why)) => Condition::new("RuntimeHealthy", "False", "UnhealthyPackageRevision").with_message(why),
            _ => Condition::new("RuntimeHealthy", &revision_healthy.status, &revision_healthy.reason).with_message(revision_healthy.message.clone()),
        };
        self.write_revision_status(revision, revision_healthy, runtime_healthy, package).await?;
        if outcome == Ok(Progress::Installed) {
            self.retire_old_revisions(package, &name, &revision_name).await?;
        }
        // The entry lets the resolver see the package installed and other packages'
        // constraints be checked against its version; a pulled package's dependencies are in
        // it as soon as they are read, installed or not, so the resolver installs what it waits
        // for (as Crossplane's revision adds itself to the Lock before resolving).
        let dependencies = self.installer.dependencies(package);
        self.waiters.set(&name, &dependencies);
        if outcome == Ok(Progress::Installed) || !dependencies.is_empty() {
            let entry = super::lock::entry(&revision_name, &self.installer.package_kind().gvk.kind, &reference, &dependencies);
            super::lock::upsert(&self.kube, entry).await.map_err(ReconcileError::new)?;
        }
        Ok(match outcome {
            Ok(Progress::Installed) => Action::RequeueAfter(Duration::from_secs(60)),
            Ok(Progress::Waiting(_)) => Action::RequeueAfter(Duration::from_millis(250)),
            Ok(Progress::RuntimeDown(_)) | Err(_) => Action::Requeue,
        })
    }

    /// Once the current revision is healthy, every other one becomes `Inactive`, and beyond
    /// `spec.revisionHistoryLimit` inactive ones (default 1; 0 keeps them all) the lowest
    /// numbered are deleted, as Crossplane's package manager does.
    async fn retire_old_revisions(&self, package: &Value, name: &str, current: &str) -> Result<(), ReconcileError> {
        let kind = self.installer.revision_kind();
        let old: Vec<Value> = self.revisions(name).await?.into_iter().filter(|r| object::name(r) != Some(current)).collect();
        for revision in &old {
            if revision.pointer("/spec/desiredState").and_then(Value::as_str) != Some("Inactive")
                && let Some(old_name) = object::name(revision)
            {
                let patch = json!({"spec": {"desiredState": "Inactive"}});
                match self.kube.merge_patch(&kind, None, old_name, &patch).await {
                    Ok(_) => {}
                    Err(error) if error.is_not_found() => {}
                    Err(error) => return Err(error.into()),
                }
            }
        }
        collect_revision_garbage(&self.kube, &kind, package, old.iter().collect()).await
    }

    /// The current revision under `revisionActivationPolicy: Manual`, not yet activated: as
    /// Crossplane's package manager, every other revision is made inactive whatever the
    /// policy, so nothing of the package runs until the user sets this one's
    /// `spec.desiredState: Active`; what the package installed stays.
    async fn stay_inactive(&self, package: &mut Value, name: &str, revision: Value) -> Result<Action, ReconcileError> {
        let current = object::name(&revision).unwrap_or_default().to_string();
        self.retire_old_revisions(package, name, &current).await?;
        self.installer.deactivate(package).await;
        conditions::set(package, Condition::new("Installed", "False", "InactivePackageRevision").with_message("Package is inactive"));
        let healthy = Condition::new("Healthy", "True", "HealthyPackageRevision");
        conditions::set(package, healthy.clone());
        let mut revision = revision;
        let before = conditions::status_of(&revision);
        conditions::set(&mut revision, Condition::new("RevisionHealthy", &healthy.status, &healthy.reason));
        write_status_if_changed(&self.kube, &self.installer.revision_kind(), &revision, &before).await?;
        // The revision's watch wakes the package when the user activates it.
        Ok(Action::Done)
    }

    /// The revision of the package reference: created (numbered after the highest) `Active`,
    /// or `Inactive` under the `Manual` policy; an existing one is activated under the
    /// `Automatic` policy and renumbered when it is not the highest, as Crossplane does.
    async fn ensure_revision(&self, package: &Value, name: &str, reference: &str, automatic: bool) -> Result<Value, ReconcileError> {
        let revision_name = revision_name(name, reference);
        let kind = self.installer.revision_kind();
        let revisions = self.revisions(name).await?;
        let highest = revisions.iter().filter_map(|r| r.pointer("/spec/revision").and_then(Value::as_i64)).max().unwrap_or(0);
        let Some(existing) = revisions.iter().find(|r| object::name(r) == Some(revision_name.as_str())) else {
            let state = if automatic { "Active" } else { "Inactive" };
            return create_revision(&self.kube, &kind, package, &revision_name, reference, highest + 1, state).await;
        };
        let mut patch = json!({"spec": {}});
        if existing.pointer("/spec/revision").and_then(Value::as_i64).unwrap_or(0) < highest {
            patch["spec"]["revision"] = json!(highest + 1);
        }
        if automatic && existing.pointer("/spec/desiredState").and_then(Value::as_str) != Some("Active") {
            patch["spec"]["desiredState"] = json!("Active");
        }
        if patch["spec"].as_object().is_some_and(|s| s.is_empty()) {
            return Ok(existing.clone());
        }
        Ok(self.kube.merge_patch(&kind, None, &revision_name, &patch).await?)
    }

    async fn write_revision_status(&self, mut revision: Value, healthy: Condition, runtime_healthy: Condition, package: &Value) -> Result<(), ReconcileError> {
        let before = conditions::status_of(&revision);
        let revision_healthy = Condition::new("RevisionHealthy", &healthy.status, &healthy.reason).with_message(healthy.message.clone());
        conditions::set(&mut revision, revision_healthy);
        conditions::set(&mut revision, runtime_healthy);
        if let Some(status) = revision.as_object_mut().map(|o| o.entry("status").or_insert_with(|| json!({})))
            && let Some(status) = status.as_object_mut()
        {
            for (key, value) in self.installer.revision_status(package) {
                status.insert(key, value);
            }
        }
        write_status_if_changed(&self.kube, &self.installer.revision_kind(), &revision, &before).await?;
        Ok(())
    }

    async fn uninstall(&self, package: &mut Value, name: &str) -> Result<Action, ReconcileError> {
        if !object::has_finalizer(package, FINALIZER_UNINSTALL) {
            return Ok(Action::Done);
        }
        let blockers = self.installer.uninstall_blockers(package).await.map_err(ReconcileError::new)?;
        if !blockers.is_empty() {
            let message = format!(
                "cannot uninstall while {} managed resource{} still exist{}: {}; delete them first",
                blockers.len(),
                if blockers.len() == 1 { "" } else { "s" },
                if blockers.len() == 1 { "s" } else { "" },
                list_some(&blockers)
            );
            conditions::set(package, Condition::new("Healthy", "False", "UninstallBlocked").with_message(&message));
            self.recorder.warning(package, "UninstallPackage", message);
            return Ok(Action::RequeueAfter(Duration::from_secs(5)));
        }
        match self.installer.uninstall(package).await {
            Ok(Some(waiting)) => {
                conditions::set(package, Condition::new("Healthy", "False", "Uninstalling").with_message(waiting));
                Ok(Action::RequeueAfter(Duration::from_millis(250)))
            }
            Ok(None) => {
                for revision in self.revisions(name).await? {
                    if let Some(revision_name) = object::name(&revision) {
                        self.kube.delete(&self.installer.revision_kind(), None, revision_name, &DeleteOptions::default()).await?;
                    }
                }
                object::remove_finalizer(package, FINALIZER_UNINSTALL);
                self.update(package).await?;
                Ok(Action::Done)
            }
            Err(error) => {
                conditions::set(package, Condition::new("Healthy", "False", "Uninstalling").with_message(&error));
                Err(ReconcileError::new(error))
            }
        }
    }
}

/// The fields of a package's spec its revisions carry too.
pub(super) const COPIED_SPEC_FIELDS: [&str; 7] =
    ["packagePullPolicy", "packagePullSecrets", "ignoreCrossplaneConstraints", "skipDependencyResolution", "commonLabels", "commonAnnotations", "runtimeConfigRef"];

/// A merge patch bringing `revision`'s copies of the package's spec fields up to date (empty
/// when they are): the package manager applies them to its revision at every reconcile.
pub(super) fn copied_spec_patch(package: &Value, revision: &Value) -> Map<String, Value> {
    let mut patch = Map::new();
    for field in COPIED_SPEC_FIELDS {
        let wanted = package.pointer(&format!("/spec/{field}"));
        if revision.pointer(&format!("/spec/{field}")) != wanted {
            patch.insert(field.to_string(), wanted.cloned().unwrap_or(Value::Null));
        }
    }
    patch
}

/// Creates a package's revision (or reads it, when it exists already): labelled with the
/// package, controlled by it, with the package's pull and install settings copied into its spec.
pub(super) async fn create_revision(
    kube: &Kube,
    kind: &Kind,
    package: &Value,
    revision_name: &str,
    reference: &str,
    number: i64,
    desired_state: &str,
) -> Result<Value, ReconcileError> {
    let spec = package.get("spec").cloned().unwrap_or_else(|| json!({}));
    let mut revision_spec = json!({"desiredState": desired_state, "image": reference, "revision": number});
    for field in COPIED_SPEC_FIELDS {
        if let Some(value) = spec.get(field) {
            revision_spec[field] = value.clone();
        }
    }
    let revision = json!({
        "apiVersion": kind.api_version(),
        "kind": kind.gvk.kind,
        "metadata": {
            "name": revision_name,
            "labels": {LABEL_PACKAGE: object::name(package).unwrap_or_default()},
            "ownerReferences": [object::owner_reference(package, true, true)],
        },
        "spec": revision_spec,
    });
    match kube.create(kind, &revision).await {
        Ok(created) => Ok(created),
        Err(error) if error.is_already_exists() => Ok(kube.get(kind, None, revision_name).await?.ok_or_else(|| ReconcileError::quiet("revision vanished"))?),
        Err(error) => Err(error.into()),
    }
}

/// Writes `object`'s status when it differs from `before` (the status it was read with);
/// `false` when the object is gone.
pub(crate) async fn write_status_if_changed(kube: &Kube, kind: &Kind, object: &Value, before: &Value) -> Result<bool, ReconcileError> {
    if &conditions::status_of(object) == before {
        return Ok(true);
    }
    match kube.replace_status(kind, object).await {
        Ok(_) => Ok(true),
        Err(error) if error.is_not_found() => Ok(false),
        Err(error) => Err(error.into()),
    }
}

/// The package a revision's watch event wakes (its `pkg.crossplane.io/package` label).
pub(super) fn package_of_revision(event: &WatchEvent) -> Vec<ObjectKey> {
    let revision = match event {
        WatchEvent::Applied { new, .. } => new,
        WatchEvent::Deleted(old) => old,
        WatchEvent::State(_) => return Vec::new(),
    };
    object::label(revision, LABEL_PACKAGE).map(|p| vec![ObjectKey::new(None, p)]).unwrap_or_default()
}

/// Deletes the lowest-numbered of `old` revisions beyond `spec.revisionHistoryLimit` (default
/// 1; 0 keeps them all), as Crossplane's package manager does.
pub(super) async fn collect_revision_garbage(kube: &Kube, kind: &Kind, package: &Value, mut old: Vec<&Value>) -> Result<(), ReconcileError> {
    let limit = package.pointer("/spec/revisionHistoryLimit").and_then(Value::as_u64).unwrap_or(1) as usize;
    if limit == 0 || old.len() <= limit {
        return Ok(());
    }
    old.sort_by_key(|r| r.pointer("/spec/revision").and_then(Value::as_i64).unwrap_or(0));
    for revision in &old[..old.len() - limit] {
        if let Some(old_name) = object::name(revision) {
            kube.delete(kind, None, old_name, &DeleteOptions::default()).await?;
        }
    }
    Ok(())
}

#[async_trait::async_trait]
impl Reconciler for PackageReconciler {
    async fn reconcile(&self, key: &ObjectKey) -> Result<Action, ReconcileError> {
        let kind = self.installer.package_kind();
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

/// Starts the controller of one package kind, named `packages/<noun>.pkg.crossplane.io`.
pub fn start_controller(runtime: &Runtime, installer: Arc<dyn Installer>, sources: super::PackageSources) -> Arc<Controller> {
    let name = format!("packages/{}.pkg.crossplane.io", installer.noun());
    let (package_kind, revision_kind) = (installer.package_kind(), installer.revision_kind());
    let reconciler = Arc::new(PackageReconciler::new(runtime.kube.clone(), installer).with_sources(sources));
    let waiters = reconciler.waiters.clone();
    let controller = Controller::start(ControllerConfig::new(name), reconciler, runtime.metrics.clone());
    // A dependency installed, upgraded or become healthy wakes the packages that need it.
    waiters.watch(runtime, &controller);
    runtime.watches.kinds().insert(package_kind.clone());
    runtime.watches.kinds().insert(revision_kind.clone());
    controller.watch_own(&runtime.watches, &package_kind.gvk, spec_or_metadata_changed);
    controller.watch_mapped(&runtime.watches, &revision_kind.gvk, package_of_revision);
    // A package's runtime arguments come from its DeploymentRuntimeConfig: a change to one
    // reconciles the packages that name it.
    let config_kind = super::providers::runtime_config_kind();
    runtime.watches.kinds().insert(config_kind.clone());
    // The packages are read from their own informer (the controller's watch of them, held
    // here): a handler must not call into the registry.
    let packages = runtime.watches.informer(&package_kind.gvk);
    controller.watch_mapped(&runtime.watches, &config_kind.gvk, move |event| {
        let WatchEvent::Applied { old, new } = event else { return Vec::new() };
        if old.as_ref().is_some_and(|old| old.get("spec") == new.get("spec")) {
            return Vec::new();
        }
        let config = object::name(new).unwrap_or_default();
        let packages = packages.as_ref().map(|i| i.list()).unwrap_or_default();
        packages.iter().filter(|p| super::providers::runtime_config_name(p) == config).filter_map(|p| ObjectKey::of(p)).collect()
    });
    controller
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revision_names_are_stable_per_reference() {
        let a = revision_name("provider-nop", "xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0");
        assert_eq!(a, revision_name("provider-nop", "xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0"));
        assert_ne!(a, revision_name("provider-nop", "xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.5.0"));
        assert!(a.starts_with("provider-nop-") && a.len() == "provider-nop-".len() + 12, "{a}");
    }

    #[test]
    fn long_lists_are_cut() {
        let items: Vec<String> = (1..=7).map(|i| format!("NopResource/n{i}")).collect();
        assert_eq!(list_some(&items[..2]), "NopResource/n1, NopResource/n2");
        assert_eq!(list_some(&items), "NopResource/n1, NopResource/n2, NopResource/n3, NopResource/n4, NopResource/n5, and 2 more");
    }
}
