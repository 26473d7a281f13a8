//! A package's `spec.dependsOn`: each dependency found among the installed packages of its
//! kind by source (the repository without tag or digest), and its installed version checked
//! against the constraint (a `sha256:` digest must match exactly, anything else is a semver
//! constraint in the Masterminds syntax Crossplane uses: `>=v1.2.0`, `>= 1.2, < 2`,
//! `^1.2 || ~2.1`, a bare version meaning exactly it).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use oxplane_runtime::Runtime;
use oxplane_runtime::client::Kube;
use oxplane_runtime::controller::Controller;
use oxplane_runtime::object::ObjectKey;
use oxplane_runtime::watches::WatchEvent;
use oxplane_runtime::conditions;
use oxplane_runtime::kinds::Kind;
use oxplane_xpkg::names::source;
use serde_json::Value;

/// Packages of one kind waiting on dependencies, by the dependency's source: a change of a
/// package of that source (installed, upgraded, become healthy) wakes them, so their
/// revisions' counts and health follow at once rather than at the next periodic reconcile.
#[derive(Clone, Default)]
pub struct Waiters(Arc<Mutex<HashMap<String, BTreeSet<String>>>>);

impl Waiters {
    /// The package `name` now depends on `wanted` (nothing: it waits for nothing).
    pub fn set(&self, name: &str, wanted: &[Dependency]) {
        let mut waiting = self.0.lock().unwrap_or_else(|p| p.into_inner());
        for (source, waiters) in waiting.iter_mut() {
            if !wanted.iter().any(|d| &d.source == source) {
                waiters.remove(name);
            }
        }
        for dependency in wanted {
            waiting.entry(dependency.source.clone()).or_default().insert(name.to_string());
        }
        waiting.retain(|_, waiters| !waiters.is_empty());
    }

    /// Wakes the waiters in `controller` whenever a Provider, Function or Configuration
    /// changes.
    pub fn watch(&self, runtime: &Runtime, controller: &Controller) {
        for dependency_kind in [super::super::provider_kind(), super::super::function_kind(), super::configuration_kind()] {
            let waiters = self.clone();
            runtime.watches.kinds().insert(dependency_kind.clone());
            controller.watch_mapped(&runtime.watches, &dependency_kind.gvk, move |event| {
                let package = match event {
                    WatchEvent::Applied { new, .. } => new,
                    WatchEvent::Deleted(old) => old,
                    WatchEvent::State(_) => return Vec::new(),
                };
                let Some(reference) = package.pointer("/spec/package").and_then(Value::as_str) else { return Vec::new() };
                let waiting = waiters.0.lock().unwrap_or_else(|p| p.into_inner());
                waiting.get(source(reference)).into_iter().flatten().map(|name| ObjectKey::new(None, name)).collect()
            });
        }
    }
}

/// How a package's dependencies stand among the installed packages.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resolution {
    /// Dependencies found installed (`status.foundDependencies`).
    pub found: usize,
    /// Of those, the ones healthy (`status.installedDependencies`).
    pub installed: usize,
    /// `"SOURCE" (CONSTRAINT)` of each dependency not installed.
    pub missing: Vec<String>,
    /// Why each installed dependency's version is refused.
    pub invalid: Vec<String>,
}

impl Resolution {
    /// Crossplane's message for dependencies that keep the revision from installing, if any.
    pub fn error(&self) -> Option<String> {
        if !self.missing.is_empty() {
            let shown: Vec<&str> = self.missing.iter().take(3).map(String::as_str).collect();
            return Some(format!("cannot resolve package dependencies: missing dependencies: {}", shown.join(", ")));
        }
        (!self.invalid.is_empty()).then(|| format!("cannot resolve package dependencies: incompatible dependencies: {}", self.invalid.join("; ")))
    }
}

/// Finds each of `wanted` among the installed packages of its kind (by source) and checks its
/// installed version against the constraint.
pub async fn check(kube: &Kube, wanted: &[Dependency]) -> Result<Resolution, String> {
    let mut resolution = Resolution::default();
    // Each kind is listed once, however many dependencies are of it.
    let mut listed: HashMap<&str, Vec<Value>> = HashMap::new();
    for dependency in wanted {
        if !listed.contains_key(dependency.kind.as_str()) {
            let kind = Kind::new("pkg.crossplane.io", "v1", &dependency.kind, &format!("{}s", dependency.kind.to_lowercase()), false);
            let packages = kube.list(&kind, None, None).await.map_err(|e| format!("cannot resolve package dependencies: cannot list {}s: {e}", dependency.kind))?;
            listed.insert(&dependency.kind, packages);
        }
        let packages = listed.get(dependency.kind.as_str()).map(Vec::as_slice).unwrap_or_default();
        let found = packages.iter().find_map(|p| {
            let reference = p.pointer("/spec/package").and_then(Value::as_str)?;
            (source(reference) == dependency.source).then_some((p, reference))
        });
        match found {
            None => resolution.missing.push(format!("{:?} ({})", dependency.source, if dependency.constraint.is_empty() { "any version" } else { &dependency.constraint })),
            Some((found, reference)) => {
                resolution.found += 1;
                let version = installed_version(reference);
                if !satisfies(version, &dependency.constraint) {
                    resolution.invalid.push(format!("existing package {}@{version} is incompatible with constraint {}", dependency.source, dependency.constraint));
                } else if conditions::is_true(found, "Healthy") {
                    resolution.installed += 1;
                }
            }
        }
    }
    Ok(resolution)
}

/// One dependency of a package.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dependency {
    /// `Provider`, `Function` or `Configuration`.
    pub kind: String,
    /// The repository (`registry/org/name`), without tag or digest.
    pub source: String,
    /// The version constraint (empty: any).
    pub constraint: String,
}

/// The dependencies of a meta object; an entry naming no package is an error, as in
/// Crossplane.
pub fn dependencies(meta: &Value) -> Result<Vec<Dependency>, String> {
    let mut out = Vec::new();
    for entry in meta.pointer("/spec/dependsOn").and_then(Value::as_array).into_iter().flatten() {
        let text = |f: &str| entry.get(f).and_then(Value::as_str).filter(|s| !s.is_empty());
        let (kind, package) = match (text("kind"), text("package"), text("provider"), text("configuration"), text("function")) {
            (Some(kind), Some(package), ..) if text("apiVersion").is_some() => (kind.to_string(), package),
            (_, _, Some(provider), _, _) => ("Provider".to_string(), provider),
            (_, _, _, Some(configuration), _) => ("Configuration".to_string(), configuration),
            (_, _, _, _, Some(function)) => ("Function".to_string(), function),
            _ => return Err(format!("encountered an invalid dependency: package dependencies must specify either a valid type, or an explicit apiVersion, kind, and package: {entry}")),
        };
        if !matches!(kind.as_str(), "Provider" | "Function" | "Configuration") {
            return Err(format!("encountered an invalid dependency: unknown package kind {kind:?} of {package:?}"));
        }
        out.push(Dependency { kind, source: source(package).to_string(), constraint: text("version").unwrap_or_default().to_string() });
    }
    Ok(out)
}

/// The version an installed package reference carries: its digest if it has one, else its tag.
pub fn installed_version(reference: &str) -> &str {
    if let Some((_, digest)) = reference.split_once('@') {
        return digest;
    }
    let src = source(reference);
    reference.get(src.len()..).map(|rest| rest.trim_start_matches(':')).unwrap_or_default()
}

/// Masterminds' constraint syntax as a `semver` requirement: `v` prefixes dropped, spaces
/// between comparators made commas, a bare version exact.
fn requirement(constraint: &str) -> Option<semver::VersionReq> {
    let mut comparators = Vec::new();
    let mut pending_operator = String::new();
    for token in constraint.replace(',', " ").split_whitespace() {
        let operator: String = token.chars().take_while(|c| matches!(c, '<' | '>' | '=' | '^' | '~' | '!')).collect();
        let version = token[operator.len()..].trim_start_matches('v');
        if version.is_empty() {
            pending_operator.push_str(&operator);
            continue;
        }
        let operator = if pending_operator.is_empty() { operator } else { std::mem::take(&mut pending_operator) + &operator };
        let operator = if operator.is_empty() && !version.contains(['x', 'X', '*']) { "=".to_string() } else { operator };
        comparators.push(format!("{operator}{version}"));
    }
    semver::VersionReq::parse(&comparators.join(", ")).ok()
}

/// Whether an installed `version` (a tag or a digest) satisfies `constraint`.
pub fn satisfies(version: &str, constraint: &str) -> bool {
    let constraint = constraint.trim();
    if constraint.is_empty() {
        return true;
    }
    if constraint.starts_with("sha256:") {
        return version == constraint;
    }
    let Ok(version) = semver::Version::parse(version.trim_start_matches('v')) else {
        return false;
    };
    constraint.split("||").any(|alternative| requirement(alternative).is_some_and(|req| req.matches(&version)))
}

/// Whether `constraint` reads as a version constraint (or a digest), as Crossplane's validator
/// requires of `spec.crossplane.version` and of `dependsOn[].version`.
pub fn valid_constraint(constraint: &str) -> bool {
    constraint_error(constraint).is_none()
}

/// Why `constraint` is no version constraint, in Masterminds' words (`improper constraint:
/// >=banana`, naming the `||` alternative at fault); none when it is one (or a digest).
pub fn constraint_error(constraint: &str) -> Option<String> {
    let trimmed = constraint.trim();
    if trimmed.is_empty() || trimmed.starts_with("sha256:") {
        return None;
    }
    constraint.split("||").find(|alternative| requirement(alternative).is_none()).map(|alternative| format!("improper constraint: {alternative}"))
}

/// A complete semantic version of a tag (`v1.2.3`, `1.2.3-rc.1`); `v1` or `latest` are none,
/// as the resolver skips tags that are not complete versions.
fn version_of(tag: &str) -> Option<semver::Version> {
    semver::Version::parse(tag.trim_start_matches('v')).ok()
}

/// The highest of `tags` that satisfies `constraint`, as Crossplane's resolver picks the
/// version of a dependency it installs.
pub fn highest_satisfying<'a>(tags: impl IntoIterator<Item = &'a str>, constraint: &str) -> Option<&'a str> {
    tags.into_iter().filter(|tag| version_of(tag).is_some() && satisfies(tag, constraint)).max_by_key(|tag| version_of(tag))
}

/// The versions a constraint names (`>=v0.5.0` names v0.5.0, `^1.2` names v1.2.0, wildcards
/// name none), completed to three numbers.
fn named_versions(constraint: &str) -> Vec<String> {
    let mut named = Vec::new();
    for token in constraint.replace([',', '|'], " ").split_whitespace() {
        let version = token.trim_start_matches(['<', '>', '=', '^', '~', '!']).trim_start_matches('v');
        let mut parts: Vec<&str> = version.split('.').take_while(|p| !p.is_empty() && !p.contains(['x', 'X', '*'])).collect();
        if parts.is_empty() {
            continue;
        }
        while parts.len() < 3 {
            parts.push("0");
        }
        named.push(format!("v{}", parts.join(".")));
    }
    named
}

/// The versions a built-in package is available at for these constraints. Built-ins are not
/// pulled (they answer to every tag of their repository), so no registry is asked for tags: the
/// candidates are the versions the constraints themselves name.
pub fn builtin_versions(constraints: &[String]) -> Vec<String> {
    constraints.iter().flat_map(|c| named_versions(c)).collect()
}

/// The version a dependency on a built-in package is installed at: the highest of the
/// versions its constraint names that satisfies the whole constraint. An empty constraint is
/// `latest`; a constraint that names no satisfying version has none.
pub fn builtin_version(constraint: &str) -> Option<String> {
    let constraint = constraint.trim();
    if constraint.is_empty() {
        return Some("latest".to_string());
    }
    let candidates = named_versions(constraint);
    highest_satisfying(candidates.iter().map(String::as_str), constraint).map(str::to_string)
}

/// The version the resolver moves an installed dependency to when its version no longer
/// satisfies every constraint its dependents put on it (Crossplane's alpha dependency version
/// upgrades): the lowest available version at or above the installed one that satisfies them
/// all; with downgrades allowed, else the highest lower one that does. An installed version
/// that is no semantic version (`latest`, a digest) counts as below every version.
pub fn version_to_update<'a>(available: impl IntoIterator<Item = &'a str>, installed: &str, constraints: &[String], downgrades: bool) -> Option<&'a str> {
    let installed = version_of(installed).unwrap_or_else(|| semver::Version::new(0, 0, 0));
    let mut valid: Vec<(semver::Version, &str)> =
        available.into_iter().filter_map(|tag| Some((version_of(tag)?, tag))).filter(|(_, tag)| constraints.iter().all(|c| satisfies(tag, c))).collect();
    valid.sort();
    if let Some((_, tag)) = valid.iter().find(|(version, _)| *version >= installed) {
        return Some(tag);
    }
    if downgrades { valid.last().map(|(_, tag)| *tag) } else { None }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    #[test]
    fn constraints_read_as_crossplane_reads_them() {
        assert!(satisfies("v0.8.1", ">=v0.8.0"));
        assert!(!satisfies("v0.7.9", ">=v0.8.0"));
        assert!(satisfies("v1.4.0", ">= 1.2, < 2"));
        assert!(satisfies("v1.4.0", ">=1.2.0 <2.0.0"));
        assert!(!satisfies("v2.0.0", ">=1.2.0 <2.0.0"));
        assert!(satisfies("v2.1.5", "^1.2 || ~2.1"));
        assert!(satisfies("v0.4.0", "v0.4.0"));
        assert!(!satisfies("v0.4.1", "v0.4.0"));
        assert!(satisfies("latest", ""));
        assert!(!satisfies("latest", ">=v0.1.0"));
        assert!(satisfies("sha256:abc", "sha256:abc"));
        assert!(!satisfies("v1.0.0", "sha256:abc"));
    }

    #[test]
    fn installed_dependencies_move_as_crossplanes_resolver_moves_them() {
        let tags = ["v0.1.0", "v0.2.0", "v0.3.0", "v1.0.0", "latest"];
        let constraints = |cs: &[&str]| cs.iter().map(|c| c.to_string()).collect::<Vec<_>>();
        // The lowest version at or above the installed one that satisfies every constraint.
        assert_eq!(version_to_update(tags, "v0.1.0", &constraints(&[">=v0.1.0", ">=v0.2.0 <v1.0.0"]), false), Some("v0.2.0"));
        assert_eq!(version_to_update(tags, "v0.2.0", &constraints(&[">=v0.2.0", ">=v0.3.0"]), false), Some("v0.3.0"));
        // Nothing satisfies them all.
        assert_eq!(version_to_update(tags, "v0.1.0", &constraints(&[">=v0.1.0", ">=v5.0.0"]), true), None);
        // Only a lower version does: refused, unless downgrades are allowed (the highest of them).
        assert_eq!(version_to_update(tags, "v1.0.0", &constraints(&["<v0.3.0"]), false), None);
        assert_eq!(version_to_update(tags, "v1.0.0", &constraints(&["<v0.3.0"]), true), Some("v0.2.0"));
        // An installed version that is no version moves to the lowest satisfying one.
        assert_eq!(version_to_update(tags, "latest", &constraints(&[">=v0.2.0"]), false), Some("v0.2.0"));
    }

    #[test]
    fn dependencies_take_explicit_kinds_and_legacy_fields() {
        let meta = json!({"spec": {"dependsOn": [
            {"apiVersion": "pkg.crossplane.io/v1", "kind": "Function", "package": "xpkg.example.org/fns/function-x:v1.0.0", "version": ">=v1.0.0"},
            {"provider": "127.0.0.1:5000/providers/provider-nop", "version": "v0.4.0"},
            {"configuration": "xpkg.example.org/base"},
        ]}});
        let deps = dependencies(&meta).unwrap();
        assert_eq!(deps[0], Dependency { kind: "Function".into(), source: "xpkg.example.org/fns/function-x".into(), constraint: ">=v1.0.0".into() });
        assert_eq!((deps[1].kind.as_str(), deps[1].source.as_str()), ("Provider", "127.0.0.1:5000/providers/provider-nop"));
        assert_eq!((deps[2].kind.as_str(), deps[2].constraint.as_str()), ("Configuration", ""));
        assert!(dependencies(&json!({"spec": {"dependsOn": [{"version": "v1"}]}})).unwrap_err().starts_with("encountered an invalid dependency"));
        assert_eq!(installed_version("127.0.0.1:5000/a/b:v0.1.0"), "v0.1.0");
        assert_eq!(installed_version("127.0.0.1:5000/a/b@sha256:00"), "sha256:00");
        assert_eq!(installed_version("127.0.0.1:5000/a/b"), "");
    }

    #[test]
    fn versions_are_picked_as_the_resolver_picks_them() {
        let tags = ["v0.1.0", "v0.2.0", "v1", "latest", "v0.3.0-rc.1", "v1.0.0"];
        assert_eq!(highest_satisfying(tags, ">=v0.1.0 <v1.0.0"), Some("v0.2.0"));
        assert_eq!(highest_satisfying(tags, ">=v0.1.0"), Some("v1.0.0"));
        assert_eq!(highest_satisfying(tags, ""), Some("v1.0.0"), "v1 and latest are not complete versions");
        assert_eq!(highest_satisfying(tags, ">=v2.0.0"), None);
        assert_eq!(builtin_version(">=v0.5.0").as_deref(), Some("v0.5.0"));
        assert_eq!(builtin_version(">= 1.2, < 2").as_deref(), Some("v1.2.0"));
        assert_eq!(builtin_version("^1.2 || ~2.1").as_deref(), Some("v2.1.0"));
        assert_eq!(builtin_version("v0.4.0").as_deref(), Some("v0.4.0"));
        assert_eq!(builtin_version("").as_deref(), Some("latest"));
        assert_eq!(builtin_version("<v1.0.0"), None, "names no version it allows");
        assert_eq!(builtin_versions(&[">=v0.5.0".into(), "^1.2 || 2.x || *".into()]), ["v0.5.0", "v1.2.0", "v2.0.0"]);
        assert!(valid_constraint(">=v2.0.0") && valid_constraint("") && valid_constraint("^1.2 || ~2.1"));
        assert!(!valid_constraint(">=banana"));
        assert_eq!(constraint_error(">=banana").as_deref(), Some("improper constraint: >=banana"));
        assert_eq!(constraint_error(">=v1.0.0 ||~banana").as_deref(), Some("improper constraint: ~banana"));
        assert_eq!(constraint_error(">=v1.0.0"), None);
    }
}
