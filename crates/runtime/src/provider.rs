//! What a built-in provider supplies so that a `Provider` package object can install it at
//! runtime: its name, its CRDs, and a way to start (and stop) its controllers.

use std::sync::Arc;

use serde_json::Value;

use crate::Runtime;
use crate::controller::Controller;

/// A provider compiled into oxplane.
pub trait BuiltinProvider: Send + Sync + 'static {
    /// The package name it answers to: the last path segment of a package reference without
    /// its tag (`xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0` → `provider-nop`).
    fn name(&self) -> &'static str;

    /// The CRDs it installs for a package reference (the tag may select an API layout), as
    /// JSON objects.
    fn crds(&self, package: &str) -> Vec<Value>;

    /// Starts its controllers for a package reference. The CRDs are established when this is
    /// called.
    fn start(&self, runtime: &Runtime, package: &str) -> ProviderHandle;

    /// Starts its controllers with the arguments a package runtime would get: those of the
    /// `package-runtime` container in the Provider's DeploymentRuntimeConfig (upstream's
    /// feature flags such as `--enable-watches`, `--poll=5s`). By default they are ignored.
    fn start_with_args(&self, runtime: &Runtime, package: &str, _args: &[String]) -> ProviderHandle {
        self.start(runtime, package)
    }
}

/// The value of a `--name=value` or `--name value` argument, the last one given winning.
pub fn flag_value<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    let mut found = None;
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let Some(rest) = arg.strip_prefix("--").and_then(|a| a.strip_prefix(name)) else { continue };
        if let Some(value) = rest.strip_prefix('=') {
            found = Some(value);
        } else if rest.is_empty() {
            found = iter.next().map(String::as_str);
        }
    }
    found
}

/// Whether a boolean `--name` flag is on (`--name`, `--name=true`; `--name=false` turns it off).
pub fn flag_enabled(args: &[String], name: &str) -> bool {
    let mut enabled = false;
    for arg in args {
        let Some(rest) = arg.strip_prefix("--").and_then(|a| a.strip_prefix(name)) else { continue };
        match rest {
            "" | "=true" => enabled = true,
            "=false" => enabled = false,
            _ => {}
        }
    }
    enabled
}

/// The running controllers of a provider; stopping (or dropping) the handle stops them all,
/// locally and at once.
#[derive(Default)]
pub struct ProviderHandle {
    controllers: Vec<Arc<Controller>>,
}

impl ProviderHandle {
    /// A handle over controllers.
    pub fn new(controllers: Vec<Arc<Controller>>) -> Self {
        ProviderHandle { controllers }
    }

    /// The controllers' names.
    pub fn controller_names(&self) -> Vec<String> {
        self.controllers.iter().map(|c| c.name().to_string()).collect()
    }

    /// Stops every controller.
    pub fn stop(&self) {
        for controller in &self.controllers {
            controller.stop();
        }
    }
}

impl Drop for ProviderHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The package name of a package reference: its last path segment, without tag or digest.
pub fn package_name(reference: &str) -> &str {
    let without_digest = reference.split('@').next().unwrap_or(reference);
    let last = without_digest.rsplit('/').next().unwrap_or(without_digest);
    last.split(':').next().unwrap_or(last)
}

/// The tag of a package reference (`v0.4.0`), if it has one.
pub fn package_tag(reference: &str) -> Option<&str> {
    let without_digest = reference.split('@').next().unwrap_or(reference);
    let last = without_digest.rsplit('/').next().unwrap_or(without_digest);
    last.split_once(':').map(|(_, tag)| tag).filter(|t| !t.is_empty())
}

/// A `vMAJOR.MINOR.PATCH` tag as numbers (pre-release suffixes ignored).
pub fn semver(tag: &str) -> Option<(u64, u64, u64)> {
    let core = tag.strip_prefix('v').unwrap_or(tag).split(['-', '+']).next()?;
    let mut parts = core.split('.').map(|p| p.parse::<u64>().ok());
    let major = parts.next()??;
    let minor = parts.next().flatten().unwrap_or(0);
    let patch = parts.next().flatten().unwrap_or(0);
    Some((major, minor, patch))
}

#[cfg(test)]
mod tests {
    use super::{flag_enabled, flag_value, package_name, package_tag, semver};

    #[test]
    fn flags_as_kingpin_reads_them() {
        let args: Vec<String> = ["--debug", "--enable-watches", "--poll=5s", "--poll", "7s"].iter().map(|s| s.to_string()).collect();
        assert!(flag_enabled(&args, "enable-watches"));
        assert!(!flag_enabled(&args, "enable-management"), "a prefix of a flag is not the flag");
        assert_eq!(flag_value(&args, "poll"), Some("7s"));
        assert_eq!(flag_value(&args, "poll-jitter"), None);
        let off: Vec<String> = ["--enable-watches", "--enable-watches=false"].iter().map(|s| s.to_string()).collect();
        assert!(!flag_enabled(&off, "enable-watches"));
    }

    #[test]
    fn tags_and_versions() {
        assert_eq!(package_tag("xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0"), Some("v0.4.0"));
        assert_eq!(package_tag("registry.example.com:5000/team/provider-nop"), None);
        assert_eq!(semver("v0.4.0"), Some((0, 4, 0)));
        assert_eq!(semver("v1.2"), Some((1, 2, 0)));
        assert_eq!(semver("v0.5.0-rc.1"), Some((0, 5, 0)));
        assert_eq!(semver("latest"), None);
    }

    #[test]
    fn package_names_come_from_the_last_path_segment() {
        assert_eq!(package_name("xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0"), "provider-nop");
        assert_eq!(package_name("registry.example.com:5000/team/provider-nop:latest"), "provider-nop");
        assert_eq!(package_name("provider-nop"), "provider-nop");
        assert_eq!(package_name("xpkg.upbound.io/a/function-auto-ready@sha256:abc"), "function-auto-ready");
    }
}
