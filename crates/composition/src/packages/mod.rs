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
//! - `configurations/`: Configurations pulled from OCI registries and what they install.
//! - `image_configs.rs`: ImageConfigs (pull secrets and rewritten references by prefix) and
//!   the credentials pull secrets hold.
//! - `lock.rs`: the Lock every active revision writes itself into, and the resolver that
//!   installs the dependencies nobody installed.

pub mod configurations;
mod function_runtime;
mod functions;
pub mod image_configs;
pub mod lock;
pub(crate) mod providers;
mod reconciler;

pub use function_runtime::FunctionRuntimes;
pub use functions::{FunctionInstaller, FunctionRegistry, Placement, placement};
pub use providers::ProviderInstaller;
pub use reconciler::{Installer, PackageReconciler, start_controller};

use oxplane_runtime::kinds::Kind;

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
