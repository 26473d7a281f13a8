//! A pulled Provider or Function package as something to run: fetched through ImageConfigs,
//! pull secrets and the package cache, its `package.yaml` parsed and checked to be of the
//! expected type, its layers unpacked once per digest under `DIR/rootfs/<digest>`, and the
//! entrypoint, arguments and environment of its image config read.

use std::path::{Path, PathBuf};

use oxplane_runtime::client::Kube;
use oxplane_xpkg::fetch::{Cache, PullPolicy, fetch_with_progress};
use oxplane_xpkg::registry::ProgressSender;
use oxplane_xpkg::meta::{Package, PackageType};
use serde_json::Value;

use super::configurations::dependencies::{Dependency, Resolution, check, dependencies};
use super::image_configs;
use super::process::program_in;

/// A package image ready to run.
pub(super) struct RuntimeImage {
    /// What `package.yaml` holds.
    pub parsed: Package,
    /// The unpacked root filesystem.
    pub root: PathBuf,
    /// The image config's `Entrypoint`.
    pub entrypoint: Vec<String>,
    /// The image config's `Cmd`.
    pub cmd: Vec<String>,
    /// The image config's `Env` (`KEY=VALUE`).
    pub env: Vec<String>,
    /// What the meta object's `dependsOn` declares (the resolver installs what is missing).
    pub depends_on: Vec<Dependency>,
}

/// What a pulled package depends on, and how that stands.
#[derive(Clone, Debug, Default)]
pub(super) struct Dependencies {
    /// Its `dependsOn` (none when the package skips dependency resolution).
    pub wanted: Vec<Dependency>,
    /// How they stand among the installed packages.
    pub resolution: Resolution,
}

impl Dependencies {
    /// `status.foundDependencies` and `installedDependencies` of the revision, as Crossplane
    /// counts them.
    pub fn write_status(&self, status: &mut serde_json::Map<String, Value>) {
        status.insert("foundDependencies".into(), Value::from(self.resolution.found));
        status.insert("installedDependencies".into(), Value::from(self.resolution.installed));
    }
}

impl RuntimeImage {
    /// Pulls `reference` for `package` (a Provider or Function object), its progress sent to
    /// `progress`, and unpacks it under `dir`; errors are worded as Crossplane's package
    /// manager words them.
    pub async fn pull(kube: &Kube, cache: &Cache, dir: &Path, package: &Value, reference: &str, expected: PackageType, progress: &ProgressSender) -> Result<RuntimeImage, String> {
        let configs = image_configs::list(kube).await.map_err(|e| format!("cannot unpack package: {e}"))?;
        let applied = image_configs::apply(&configs, reference);
        let credentials = image_configs::pull_credentials(kube, &image_configs::pull_secret_names(package, &applied), &applied.image).await?;
        let policy = PullPolicy::parse(package.pointer("/spec/packagePullPolicy").and_then(Value::as_str)).map_err(|e| e.to_string())?;
        let fetched = fetch_with_progress(&applied.image, &credentials, policy, cache, Some(progress)).await.map_err(|e| format!("cannot unpack package: {e}"))?;
        let stream = fetched.image.package_yaml().map_err(|e| format!("cannot get package: {e}"))?;
        let parsed = oxplane_xpkg::meta::read(&stream)
            .map_err(|e| format!("cannot parse package: {e}"))?
            .validate(expected)
            .map_err(|e| format!("validating package contents failed: {e}"))?;
        let depends_on = dependencies(&parsed.meta).map_err(|e| format!("cannot resolve package dependencies: {e}"))?;
        let root = dir.join("rootfs").join(fetched.digest.trim_start_matches("sha256:"));
        if !root.exists() {
            oxplane_xpkg::rootfs::unpack(&fetched.image, &root).map_err(|e| format!("cannot unpack the image of {reference}: {e}"))?;
        }
        let config: Value = serde_json::from_slice(&fetched.image.config).map_err(|e| format!("the image config of {reference} is not JSON: {e}"))?;
        let strings = |pointer: &str| -> Vec<String> {
            config.pointer(pointer).and_then(Value::as_array).into_iter().flatten().filter_map(|v| v.as_str().map(str::to_string)).collect()
        };
        Ok(RuntimeImage { parsed, root, entrypoint: strings("/config/Entrypoint"), cmd: strings("/config/Cmd"), env: strings("/config/Env"), depends_on })
    }

    /// What `package` (installing this image) depends on, checked against the installed
    /// packages: nothing of the package is to be installed while one is missing or refused
    /// (`Resolution::error`), as Crossplane's revisions wait for their dependencies.
    pub async fn dependencies(&self, kube: &Kube, package: &Value) -> Result<Dependencies, String> {
        let skip = package.pointer("/spec/skipDependencyResolution").and_then(Value::as_bool) == Some(true);
        let wanted = if skip { Vec::new() } else { self.depends_on.clone() };
        let resolution = check(kube, &wanted).await?;
        Ok(Dependencies { wanted, resolution })
    }

    /// The program and its arguments, as Kubernetes runs a container: the image's `Entrypoint`
    /// followed by `args` when the runtime config gives any, else by the image's `Cmd`.
    pub fn argv(&self, reference: &str, args: &[String]) -> Result<(PathBuf, Vec<String>), String> {
        let mut argv = self.entrypoint.clone();
        argv.extend(if args.is_empty() { self.cmd.clone() } else { args.to_vec() });
        let Some(first) = argv.first().cloned() else {
            return Err(format!("the image of {reference} names no entrypoint to run"));
        };
        let program = program_in(&self.root, &first, &self.env).ok_or_else(|| format!("the entrypoint {first:?} of {reference} is not in its image"))?;
        Ok((program, argv[1..].to_vec()))
    }

    /// The image's environment as pairs, with a default `PATH` when it sets none.
    pub fn env_pairs(&self) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = self.env.iter().filter_map(|e| e.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect();
        if !env.iter().any(|(k, _)| k == "PATH") {
            env.push(("PATH".into(), "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into()));
        }
        env
    }
}
