//! The package Lock (`pkg.crossplane.io/v1beta1` `Lock`, the one object named `lock`) and its
//! resolver, as Crossplane's package manager keeps them.
//!
//! Every active package revision writes an entry for itself into the Lock: its name (the
//! revision's), the package kind, `source` (the repository without tag or digest), `version`
//! (the tag or digest installed) and the `dependencies` its meta object declares. The resolver
//! (`packages/lock.pkg.crossplane.io`) reads the Lock and installs every dependency no entry
//! provides, by creating a package object as Crossplane's resolver does: named after the
//! repository path (`ToDNSLabel`), `spec.package` the source with the highest tag that
//! satisfies the constraint (or the digest a constraint names), no labels and no owner (a
//! dependency outlives the packages that needed it). A dependency on a built-in package
//! (a Provider or Function oxplane runs itself) asks no registry: it is installed at the
//! version its constraint names. The Lock's `Resolved` condition says whether every dependency
//! could be installed (`DependencyResolutionSucceeded`, `DependencyResolutionFailed`).
//! Entries of revisions that are gone or inactive are pruned by the resolver. With
//! [`VersionChanges`] (Crossplane's alpha dependency version upgrades) an installed dependency
//! whose version no longer satisfies every constraint its dependents put on it is moved to the
//! lowest version at or above it that does (or, with downgrades, the highest lower one).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use oxplane_runtime::Runtime;
use oxplane_runtime::client::Kube;
use oxplane_runtime::conditions::{self, Condition};
use oxplane_runtime::controller::{Action, Controller, ControllerConfig, ReconcileError, Reconciler, any_change};
use oxplane_runtime::kinds::Kind;
use oxplane_runtime::object::{self, ObjectKey};
use oxplane_xpkg::names::{source, to_dns_label};
use serde_json::{Value, json};

use super::configurations::dependencies::{self, Dependency};
use super::configurations::{configuration_kind, configuration_revision_kind};
use super::{function_kind, function_revision_kind, image_configs, provider_kind, provider_revision_kind};

/// The name of the one Lock.
pub const LOCK_NAME: &str = "lock";
/// The finalizer the Lock keeps while it lists packages.
pub const FINALIZER: &str = "lock.pkg.crossplane.io";
const API_VERSION: &str = "pkg.crossplane.io/v1";

/// `Lock`.
pub fn lock_kind() -> Kind {
    Kind::new("pkg.crossplane.io", "v1beta1", "Lock", "locks", false)
}

/// The package kind of a package kind name (`Provider`, `Function`, `Configuration`).
pub fn package_kind(kind: &str) -> Option<Kind> {
    match kind {
        "Provider" => Some(provider_kind()),
        "Function" => Some(function_kind()),
        "Configuration" => Some(configuration_kind()),
        _ => None,
    }
}

fn revision_kind(kind: &str) -> Option<Kind> {
    match kind {
        "Provider" => Some(provider_revision_kind()),
        "Function" => Some(function_revision_kind()),
        "Configuration" => Some(configuration_revision_kind()),
        _ => None,
    }
}

/// The Lock entry of a package revision: `reference` is the package's `spec.package`.
pub fn entry(revision: &str, kind: &str, reference: &str, dependencies: &[Dependency]) -> Value {
    json!({
        "name": revision,
        "apiVersion": API_VERSION,
        "kind": kind,
        "type": kind,
        "source": source(reference),
        "version": dependencies::installed_version(reference),
        "dependencies": dependencies.iter().map(|d| json!({
            "apiVersion": API_VERSION,
            "kind": d.kind,
            "type": d.kind,
            "package": d.source,
            "constraints": d.constraint,
        })).collect::<Vec<_>>(),
    })
}

fn entries(lock: &Value) -> Vec<Value> {
    lock.get("packages").and_then(Value::as_array).cloned().unwrap_or_default()
}

fn text<'a>(value: &'a Value, field: &str) -> &'a str {
    value.get(field).and_then(Value::as_str).unwrap_or_default()
}

/// The kind of an entry or dependency: `kind`, else the legacy `type`.
fn kind_of(value: &Value) -> &str {
    value.get("kind").and_then(Value::as_str).filter(|k| !k.is_empty()).unwrap_or_else(|| text(value, "type"))
}

/// Changes the Lock's entries with `change` (creating the Lock when missing), retried when
/// another writer got there first.
async fn edit(kube: &Kube, change: impl Fn(&mut Vec<Value>) -> bool) -> Result<(), String> {
    let kind = lock_kind();
    for _ in 0..8 {
        let current = kube.get(&kind, None, LOCK_NAME).await.map_err(|e| format!("cannot get package lock: {e}"))?;
        let Some(mut lock) = current else {
            let mut packages = Vec::new();
            if !change(&mut packages) {
                return Ok(());
            }
            let lock = json!({"apiVersion": kind.api_version(), "kind": "Lock", "metadata": {"name": LOCK_NAME}, "packages": packages});
            match kube.create(&kind, &lock).await {
                Ok(_) => return Ok(()),
                Err(error) if error.is_already_exists() => continue,
                Err(error) => return Err(format!("cannot create package lock: {error}")),
            }
        };
        let mut packages = entries(&lock);
        if !change(&mut packages) {
            return Ok(());
        }
        lock["packages"] = Value::Array(packages);
        match kube.replace(&kind, &lock).await {
            Ok(_) => return Ok(()),
            Err(error) if error.is_conflict() => continue,
            Err(error) => return Err(format!("cannot update package lock: {error}")),
        }
    }
    Err("cannot update package lock: it kept changing".into())
}

/// Adds or replaces the entry of `entry`'s revision; an entry of another revision of the same
/// package (same kind and source) is dropped, as only one revision of a package is active.
pub async fn upsert(kube: &Kube, entry: Value) -> Result<(), String> {
    edit(kube, |packages| {
        let same_package = |p: &Value| kind_of(p) == kind_of(&entry) && text(p, "source") == text(&entry, "source");
        if packages.iter().filter(|p| same_package(p)).count() == 1 && packages.iter().any(|p| p == &entry) {
            return false;
        }
        packages.retain(|p| text(p, "name") != text(&entry, "name") && !same_package(p));
        packages.push(entry.clone());
        true
    })
    .await
}

/// Removes a revision's entry, if the Lock has one.
pub async fn remove(kube: &Kube, revision: &str) -> Result<(), String> {
    edit(kube, |packages| {
        let before = packages.len();
        packages.retain(|p| text(p, "name") != revision);
        packages.len() != before
    })
    .await
}

/// The built-in packages of each kind (`Provider`, `Function`), by name.
pub type Builtins = BTreeMap<&'static str, Vec<&'static str>>;

/// Whether the resolver may change the version of an installed dependency that no longer
/// satisfies every constraint on it (Crossplane's alpha `--enable-dependency-version-upgrades`
/// and `--enable-dependency-version-downgrades`); without, the dependent revision reports the
/// incompatible dependency and nothing changes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VersionChanges {
    /// Move it to the lowest version at or above the installed one that satisfies them all.
    pub upgrades: bool,
    /// Failing that, to the highest lower version that does (needs `upgrades`).
    pub downgrades: bool,
}

/// Go's `%v` of a list of strings (`[a b]`), as Crossplane's messages print constraints.
fn go_list(items: &[String]) -> String {
    format!("[{}]", items.join(" "))
}

/// Reconciles the Lock: prunes entries of revisions that are gone or inactive, and installs
/// missing dependencies.
pub struct Resolver {
    kube: Kube,
    builtins: Builtins,
    changes: VersionChanges,
    sources: super::PackageSources,
}

impl Resolver {
    /// A resolver that knows which packages are built in, changing installed dependencies'
    /// versions as `changes` allows.
    pub fn new(kube: Kube, builtins: Builtins, changes: VersionChanges, sources: super::PackageSources) -> Self {
        Resolver { kube, builtins, changes, sources }
    }

    /// Whether an entry's revision exists and is active.
    async fn live(&self, entry: &Value) -> Result<bool, ReconcileError> {
        let Some(kind) = revision_kind(kind_of(entry)) else { return Ok(false) };
        let revision = self.kube.get(&kind, None, text(entry, "name")).await?;
        Ok(revision.is_some_and(|r| r.pointer("/spec/desiredState").and_then(Value::as_str) == Some("Active")))
    }

    fn is_builtin(&self, kind: &str, package: &str) -> bool {
        self.builtins.get(kind).is_some_and(|names| self.sources.is_builtin(names, package))
    }

    /// The tags of a dependency's repository, listed where ImageConfigs send the package, with
    /// the pull secret they set.
    async fn tags(&self, package: &str) -> Result<Vec<String>, String> {
        let configs = image_configs::list(&self.kube).await?;
        let applied = image_configs::apply(&configs, package);
        let credentials = image_configs::pull_credentials(&self.kube, &applied.pull_secret.into_iter().collect::<Vec<_>>(), &applied.image)
            .await
            .map_err(|e| format!("cannot get image pull secret from config: {e}"))?;
        oxplane_xpkg::registry::tags(&applied.image, &credentials).await.map_err(|e| format!("cannot fetch dependency package tags: {e}"))
    }

    /// The version to install a dependency at: a digest as given, a built-in's from its
    /// constraint, else the highest tag of its repository the constraint allows.
    async fn version_to_install(&self, dependency: &Value) -> Result<String, String> {
        let (package, constraint) = (text(dependency, "package"), text(dependency, "constraints"));
        if constraint.starts_with("sha256:") {
            return Ok(constraint.to_string());
        }
        if !dependencies::valid_constraint(constraint) {
            return Err(format!("cannot find dependency version to install: version constraint on dependency is invalid: {constraint:?}"));
        }
        let no_version = || {
            format!("dependency ({package}) does not have a valid version to upgrade that satisfies all constraints. If there is a valid version that requires downgrade, manual intervention is required. Constraints: {constraint}")
        };
        if self.is_builtin(kind_of(dependency), package) {
            return dependencies::builtin_version(constraint).ok_or_else(no_version);
        }
        let tags = self.tags(package).await.map_err(|e| format!("cannot find dependency version to install: {e}"))?;
        dependencies::highest_satisfying(tags.iter().map(String::as_str), constraint).map(str::to_string).ok_or_else(no_version)
    }

    /// The version to move an installed dependency of `installed` to, so that it satisfies
    /// every constraint on it, as Crossplane's resolver picks it: a digest all constraints
    /// name alike, else a version from its repository's tags (a built-in's: the versions the
    /// constraints name).
    async fn version_to_update(&self, kind: &str, package: &str, installed: &str, constraints: &[String]) -> Result<String, String> {
        let digests: Vec<&String> = constraints.iter().filter(|c| c.starts_with("sha256:")).collect();
        if let Some(first) = digests.first() {
            if digests.len() != constraints.len() {
                return Err(format!("a dependency package has different types of parent constraints ({})", go_list(constraints)));
            }
            if digests.iter().any(|d| d != first) {
                return Err(format!("a dependency package has different digests in parent constraints ({})", go_list(constraints)));
            }
            return Ok(first.to_string());
        }
        if let Some(error) = constraints.iter().find_map(|c| dependencies::constraint_error(c)) {
            return Err(format!("version constraint on dependency is invalid: {error}"));
        }
        let available = if self.is_builtin(kind, package) { dependencies::builtin_versions(constraints) } else { self.tags(package).await? };
        dependencies::version_to_update(available.iter().map(String::as_str), installed, constraints, self.changes.downgrades).map(str::to_string).ok_or_else(|| {
            format!(
                "dependency ({package}) does not have a valid version to upgrade that satisfies all constraints. If there is a valid version that requires downgrade, manual intervention is required. Constraints: {}",
                go_list(constraints)
            )
        })
    }

    /// Moves an installed dependency whose version does not satisfy every constraint on it to
    /// one that does (its package's `spec.package` changed, as Crossplane's resolver updates it).
    async fn update(&self, kind_name: &str, package: &str, constraints: &[String]) -> Result<(), String> {
        let Some(kind) = package_kind(kind_name) else { return Ok(()) };
        let existing = self.kube.list(&kind, None, None).await.map_err(|e| format!("cannot get dependency package: {e}"))?;
        let Some((object, reference)) = existing.iter().find_map(|p| {
            let reference = p.pointer("/spec/package").and_then(Value::as_str)?;
            (source(reference) == package).then_some((p, reference))
        }) else {
            return Ok(());
        };
        let installed = dependencies::installed_version(reference);
        if constraints.iter().all(|c| dependencies::satisfies(installed, c)) {
            return Ok(());
        }
        let version = self.version_to_update(kind_name, package, installed, constraints).await.map_err(|e| format!("cannot find dependency version to upgrade: {e}"))?;
        let separator = if version.starts_with("sha256:") { "@" } else { ":" };
        let wanted = format!("{package}{separator}{version}");
        if wanted == reference {
            return Ok(());
        }
        let name = object::name(object).unwrap_or_default();
        self.kube.merge_patch(&kind, None, name, &json!({"spec": {"package": wanted}})).await.map_err(|e| format!("cannot update dependency package: {e}"))?;
        tracing::info!(package = %package, from = %installed, to = %version, kind = %kind_name, "moved an installed dependency to a version every dependent allows");
        Ok(())
    }

    /// Installs a dependency nothing provides yet: `Ok(false)` when a package object of its
    /// kind already names its source (installed, not yet in the Lock).
    async fn install(&self, dependency: &Value) -> Result<bool, String> {
        let kind_name = kind_of(dependency);
        let Some(kind) = package_kind(kind_name) else {
            return Err(format!("encountered an invalid dependency: unknown package kind {kind_name:?}"));
        };
        let package = text(dependency, "package");
        let existing = self.kube.list(&kind, None, None).await.map_err(|e| format!("cannot get dependency package: {e}"))?;
        if existing.iter().any(|p| p.pointer("/spec/package").and_then(Value::as_str).is_some_and(|r| source(r) == package)) {
            return Ok(false);
        }
        let version = self.version_to_install(dependency).await?;
        let separator = if version.starts_with("sha256:") { "@" } else { ":" };
        let repository = package.split_once('/').map_or(package, |(_, path)| path);
        let object = json!({
            "apiVersion": kind.api_version(),
            "kind": kind_name,
            "metadata": {"name": to_dns_label(repository)},
            "spec": {"package": format!("{package}{separator}{version}")},
        });
        match self.kube.create(&kind, &object).await {
            Ok(_) => {
                tracing::info!(package = %package, version = %version, kind = %kind_name, "installed a missing dependency");
                Ok(true)
            }
            Err(error) if error.is_already_exists() => Ok(false),
            Err(error) => Err(format!("cannot create dependency package: {error}")),
        }
    }

    async fn run(&self, lock: &mut Value) -> Result<Action, ReconcileError> {
        let mut kept = Vec::new();
        let all = entries(lock);
        for entry in &all {
            if self.live(entry).await? {
                kept.push(entry.clone());
            }
        }
        if kept.len() != all.len() {
            lock["packages"] = Value::Array(kept.clone());
        }
        let finalizer_changed = if kept.is_empty() { object::remove_finalizer(lock, FINALIZER) } else { object::add_finalizer(lock, FINALIZER) };
        if kept.len() != all.len() || finalizer_changed {
            let saved = self.kube.replace(&lock_kind(), lock).await?;
            object::adopt_saved(lock, saved);
        }
        if kept.is_empty() {
            conditions::remove(lock, "Resolved");
            return Ok(Action::Done);
        }
        if let Some(cycle) = cycle(&kept) {
            let message = format!("Error occurred during dependency resolution cannot sort DAG: dependency cycle: {}", cycle.join(" -> "));
            conditions::set(lock, Condition::new("Resolved", "False", "DependencyResolutionFailed").with_message(message));
            return Ok(Action::Done);
        }
        let provided: BTreeSet<(&str, &str)> = kept.iter().map(|e| (kind_of(e), text(e, "source"))).collect();
        let mut implied: Vec<&Value> = Vec::new();
        for dependency in kept.iter().flat_map(|e| e.get("dependencies").and_then(Value::as_array).into_iter().flatten()) {
            let key = (kind_of(dependency), text(dependency, "package"));
            if !provided.contains(&key) && !implied.iter().any(|d| (kind_of(d), text(d, "package")) == key) {
                implied.push(dependency);
            }
        }
        let mut failures = Vec::new();
        for dependency in implied {
            if let Err(error) = self.install(dependency).await {
                failures.push(error);
            }
        }
        if self.changes.upgrades {
            // Every constraint on each installed dependency, in the Lock's order.
            let mut constraints: Vec<((&str, &str), Vec<String>)> = Vec::new();
            for dependency in kept.iter().flat_map(|e| e.get("dependencies").and_then(Value::as_array).into_iter().flatten()) {
                let key = (kind_of(dependency), text(dependency, "package"));
                if !provided.contains(&key) {
                    continue;
                }
                let constraint = text(dependency, "constraints").to_string();
                match constraints.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, list)) => list.push(constraint),
                    None => constraints.push((key, vec![constraint])),
                }
            }
            for ((kind, package), list) in &constraints {
                if let Err(error) = self.update(kind, package, list).await {
                    failures.push(error);
                }
            }
        }
        match failures.first() {
            None => {
                conditions::set(lock, Condition::new("Resolved", "True", "DependencyResolutionSucceeded"));
                Ok(Action::Done)
            }
            Some(first) => {
                let message = format!("Error occurred during dependency resolution {first}");
                conditions::set(lock, Condition::new("Resolved", "False", "DependencyResolutionFailed").with_message(message));
                Ok(Action::Requeue)
            }
        }
    }
}

/// A dependency cycle among the entries (by source), if there is one.
fn cycle(entries: &[Value]) -> Option<Vec<String>> {
    let edges: BTreeMap<&str, Vec<&str>> = entries
        .iter()
        .map(|e| (text(e, "source"), e.get("dependencies").and_then(Value::as_array).into_iter().flatten().map(|d| text(d, "package")).collect()))
        .collect();
    fn visit<'a>(node: &'a str, edges: &BTreeMap<&'a str, Vec<&'a str>>, path: &mut Vec<&'a str>, done: &mut BTreeSet<&'a str>) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|n| *n == node) {
            let mut cycle: Vec<String> = path[start..].iter().map(|s| s.to_string()).collect();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if !done.insert(node) {
            return None;
        }
        path.push(node);
        for next in edges.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, edges, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    edges.keys().find_map(|node| visit(node, &edges, &mut Vec::new(), &mut done))
}

#[async_trait::async_trait]
impl Reconciler for Resolver {
    async fn reconcile(&self, key: &ObjectKey) -> Result<Action, ReconcileError> {
        let Some(mut lock) = self.kube.get(&lock_kind(), None, &key.name).await? else {
            return Ok(Action::Done);
        };
        let before = conditions::status_of(&lock);
        let result = self.run(&mut lock).await;
        super::reconciler::write_status_if_changed(&self.kube, &lock_kind(), &lock, &before).await?;
        result
    }
}

/// Starts the resolver (`packages/lock.pkg.crossplane.io`): it runs when the Lock changes and
/// when any package or revision does (a revision gone or deactivated leaves a stale entry).
pub fn start_controller(runtime: &Runtime, builtins: Builtins, changes: VersionChanges, sources: super::PackageSources) -> Arc<Controller> {
    let reconciler = Arc::new(Resolver::new(runtime.kube.clone(), builtins, changes, sources));
    let controller = Controller::start(ControllerConfig::new("packages/lock.pkg.crossplane.io"), reconciler, runtime.metrics.clone());
    let kind = lock_kind();
    runtime.watches.kinds().insert(kind.clone());
    controller.watch_own(&runtime.watches, &kind.gvk, any_change);
    for watched in [provider_revision_kind(), function_revision_kind(), configuration_revision_kind(), provider_kind(), function_kind(), configuration_kind()] {
        runtime.watches.kinds().insert(watched.clone());
        controller.watch_mapped(&runtime.watches, &watched.gvk, |_| vec![ObjectKey::new(None, LOCK_NAME)]);
    }
    controller
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn entries_carry_what_crossplane_writes() {
        let dependency = Dependency { kind: "Provider".into(), source: "xpkg.example.org/org/provider-nop".into(), constraint: ">=v0.5.0".into() };
        let written = entry("platform-0123456789ab", "Configuration", "127.0.0.1:5000/org/platform:v0.1.0", &[dependency]);
        assert_eq!(written["source"], "127.0.0.1:5000/org/platform");
        assert_eq!(written["version"], "v0.1.0");
        assert_eq!((written["kind"].as_str(), written["type"].as_str()), (Some("Configuration"), Some("Configuration")));
        assert_eq!(written["dependencies"][0], json!({"apiVersion": "pkg.crossplane.io/v1", "kind": "Provider", "type": "Provider", "package": "xpkg.example.org/org/provider-nop", "constraints": ">=v0.5.0"}));
        assert_eq!(entry("p-1", "Provider", "r.example.org/p@sha256:00", &[])["version"], "sha256:00");
    }

    #[test]
    fn cycles_are_found() {
        let node = |source: &str, deps: &[&str]| json!({"source": source, "dependencies": deps.iter().map(|d| json!({"package": d})).collect::<Vec<_>>()});
        assert_eq!(cycle(&[node("a", &["b"]), node("b", &["c"]), node("c", &[])]), None);
        assert_eq!(cycle(&[node("a", &["b"]), node("b", &["a"])]).unwrap(), ["a", "b", "a"]);
    }
}
