//! Packages. Configurations are pulled from OCI registries (`configurations/`).
//! `pkg.crossplane.io/v1` `Provider` and `Function` objects whose `spec.package`
//! names a package built into oxplane (the last path segment of the reference, any registry
//! and tag). Installing a Provider installs its CRDs and starts its controllers; installing a
//! Function makes it callable from composition pipelines. Each package gets one revision
//! (`ProviderRevision` / `FunctionRevision`) as Crossplane shows them.
//!
//! Uninstalling never deletes anyone's external resources behind their back: while managed
//! resources of a provider still exist, the Provider stays (with a condition naming them) and
//! its controllers keep running, so those resources can still be deleted properly.
//!
//! - `reconciler.rs`: the package and revision lifecycle shared by both kinds.
//! - `providers.rs`: what installing a provider means.
//! - `functions.rs`: what installing a function means, and the registry pipelines call.
//! - `function_runtime.rs`: Function packages pulled from registries, run as local processes.
//! - `provider_runtime.rs`: Provider packages pulled from registries, their CRDs installed and
//!   their process run with the provider's own identity.
//! - `runtime_image.rs`: a pulled package's image as something to run.
//! - `process.rs`: supervising a pulled package's process (restarts, logs, never orphaned).
//! - `configurations/`: Configurations pulled from OCI registries and what they install.
//! - `image_configs.rs`: ImageConfigs (pull secrets and rewritten references by prefix) and
//!   the credentials pull secrets hold.
//! - `lock.rs`: the Lock every active revision writes itself into, and the resolver that
//!   installs the dependencies nobody installed.

pub mod configurations;
mod function_runtime;
mod functions;
pub mod image_configs;
mod process;
mod pull_progress;
mod sandbox;
mod provider_runtime;
mod runtime_image;
mod webhooks;
pub mod lock;
pub(crate) mod providers;
pub(crate) mod reconciler;

pub use function_runtime::FunctionRuntimes;
pub use functions::{FunctionInstaller, FunctionRegistry, Placement, placement};
pub use provider_runtime::{ApiAccess, ProviderRuntimes};
pub use providers::ProviderInstaller;
pub use reconciler::{Installer, PackageReconciler, start_controller};

use oxplane_runtime::kinds::Kind;
use oxplane_runtime::provider::package_name;

/// Which package references oxplane serves with a built-in package. A Provider or Function
/// reference names a built-in by its last path segment (any registry, any tag), unless it
/// starts with one of the prefixes `oxplane up --pull-package` lists: those are always pulled
/// from their registry and run as the package's own image (and a dependency on one is
/// resolved from its registry's tags), so a built-in can be turned off for chosen packages.
/// A flag rather than an annotation on the package object: the same Crossplane YAML then
/// works unchanged, and it also decides for the dependencies the resolver installs, which
/// nobody annotates.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PackageSources {
    pulled: Vec<String>,
}

impl PackageSources {
    /// References starting with any of `pulled` are pulled, whatever they are named.
    pub fn new(pulled: Vec<String>) -> Self {
        PackageSources { pulled: pulled.into_iter().filter(|p| !p.is_empty()).collect() }
    }

    /// The `--pull-package` prefix `reference` starts with, if any.
    pub fn pulled_by(&self, reference: &str) -> Option<&str> {
        self.pulled.iter().find(|prefix| reference.starts_with(prefix.as_str())).map(String::as_str)
    }

    /// Whether `reference` names one of the built-in packages `names` and is not to be pulled.
    pub fn is_builtin(&self, names: &[&str], reference: &str) -> bool {
        self.pulled_by(reference).is_none() && names.contains(&package_name(reference))
    }
}

/// The Crossplane version oxplane answers to, which packages' `spec.crossplane.version`
/// constraints are checked against (a release version: a pre-release would fail constraints
/// such as `>=v1.14.0`, as Masterminds' semver skips pre-releases).
pub const CROSSPLANE_VERSION: &str = "v2.3.0";

/// `pkg.crossplane.io/package`: on revisions (and on the CRDs a provider installs), the name
/// of the package object.
pub const LABEL_PACKAGE: &str = "pkg.crossplane.io/package";
/// The finalizer a package keeps until it is uninstalled.
pub const FINALIZER_UNINSTALL: &str = "pkg.oxplane.io/uninstall";

/// `Provider`.
pub fn provider_kind() -> Kind {
    Kind::new("pkg.crossplane.io", "v1", "Provider", "providers", false)
}

/// `ProviderRevision`.
pub fn provider_revision_kind() -> Kind {
    Kind::new("pkg.crossplane.io", "v1", "ProviderRevision", "providerrevisions", false)
}

/// `Function`.
pub fn function_kind() -> Kind {
    Kind::new("pkg.crossplane.io", "v1", "Function", "functions", false)
}

/// `FunctionRevision`.
pub fn function_revision_kind() -> Kind {
    Kind::new("pkg.crossplane.io", "v1", "FunctionRevision", "functionrevisions", false)
}

/// `CustomResourceDefinition`.
pub fn crd_kind() -> Kind {
    Kind::new("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pulled_prefixes_turn_built_ins_off() {
        let sources = PackageSources::new(vec!["127.0.0.1:5000/real/".into(), String::new()]);
        let names = ["function-patch-and-transform"];
        assert!(sources.is_builtin(&names, "xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform:v0.9.0"));
        assert!(!sources.is_builtin(&names, "127.0.0.1:5000/real/function-patch-and-transform:v0.1.0"));
        assert_eq!(sources.pulled_by("127.0.0.1:5000/real/function-patch-and-transform:v0.1.0"), Some("127.0.0.1:5000/real/"));
        assert!(!sources.is_builtin(&names, "xpkg.crossplane.io/org/function-other:v1.0.0"), "not a built-in's name");
        assert!(PackageSources::default().is_builtin(&names, "127.0.0.1:5000/real/function-patch-and-transform:v0.1.0"), "an empty prefix turns nothing off");
    }
}
