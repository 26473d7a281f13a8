//! `oxplane xpkg ...`: make Crossplane packages without Docker. `build` turns a folder
//! (`crossplane.yaml` and the package's CRDs, XRDs, Compositions, ...) into a package image
//! file (an OCI image layout tarball, `.xpkg`); `push` sends such a file to a registry.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use oxplane_xpkg::registry::Credentials;

/// `oxplane xpkg ...`.
#[derive(Debug, Subcommand)]
pub enum XpkgCommand {
    /// Build a package file from a folder holding crossplane.yaml and the package's objects.
    Build(BuildArgs),
    /// Push a package file to a registry as REF (registry/repository:tag).
    Push(PushArgs),
}

/// Flags of `oxplane xpkg build`, as `crossplane xpkg build` names them.
#[derive(Debug, Args)]
pub struct BuildArgs {
    /// The folder with crossplane.yaml and the package's YAML files (read recursively).
    #[arg(long, short = 'f', value_name = "DIR", default_value = ".")]
    pub package_root: PathBuf,
    /// Where to write the package [default: <package name>.xpkg in the package root].
    #[arg(long, short = 'o', value_name = "FILE")]
    pub package_file: Option<PathBuf>,
}

/// Flags of `oxplane xpkg push`.
#[derive(Debug, Args)]
pub struct PushArgs {
    /// Where to push: registry/repository:tag (a registry on a loopback address is spoken to
    /// in plain HTTP).
    pub reference: String,
    /// The package file `oxplane xpkg build` wrote.
    #[arg(long, short = 'f', value_name = "FILE")]
    pub package_file: PathBuf,
    /// User name for the registry (HTTP basic authentication).
    #[arg(long, value_name = "NAME", requires = "password")]
    pub username: Option<String>,
    /// Password for the registry.
    #[arg(long, value_name = "PASSWORD", env = "OXPLANE_REGISTRY_PASSWORD", requires = "username")]
    pub password: Option<String>,
}

/// Runs `oxplane xpkg ...`.
pub fn run(command: XpkgCommand) -> anyhow::Result<()> {
    match command {
        XpkgCommand::Build(args) => {
            let package = oxplane_xpkg::build::read_folder(&args.package_root)
                .with_context(|| format!("cannot build a package from {}", args.package_root.display()))?;
            let image = oxplane_xpkg::build::image(&package)?;
            let out = args.package_file.unwrap_or_else(|| args.package_root.join(format!("{}.xpkg", package.name())));
            oxplane_xpkg::layout::write(&image, &out)?;
            println!("built {} {} ({} objects) as {} to {}", package.package_type.kind(), package.name(), package.objects.len(), image.digest(), out.display());
            Ok(())
        }
        XpkgCommand::Push(args) => {
            let image = oxplane_xpkg::layout::read(&args.package_file).with_context(|| format!("cannot read package {}", args.package_file.display()))?;
            let credentials = match (args.username, args.password) {
                (Some(username), Some(password)) => Credentials::Basic { username, password },
                _ => Credentials::Anonymous,
            };
            let runtime = tokio::runtime::Runtime::new()?;
            let digest = runtime.block_on(oxplane_xpkg::registry::push(&image, &args.reference, &credentials))?;
            println!("pushed {} as {digest}", args.reference);
            Ok(())
        }
    }
}
