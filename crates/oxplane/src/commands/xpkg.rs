//! `oxplane xpkg ...`: make Crossplane packages without Docker. `build` turns a folder
//! (`crossplane.yaml` and the package's CRDs, XRDs, Compositions, ...) into a package image
//! file (an OCI image layout tarball, `.xpkg`); `push` sends such a file to a registry;
//! `pull` fetches a package from a registry into such a file and `extract` prints the
//! `package.yaml` of a package file or a registry's package, for inspection. Every blob read
//! from a registry or a file is checked against its digest.

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
    /// Pull a package from a registry into a package file, every digest verified.
    Pull(PullArgs),
    /// Print the package.yaml of a package in a registry or in a package file.
    Extract(ExtractArgs),
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
    /// A Provider's or Function's runtime: the folder that becomes the image's root file
    /// system (`bin/function` in it is `/bin/function` in the image).
    #[arg(long, value_name = "DIR", requires = "entrypoint")]
    pub runtime_root: Option<PathBuf>,
    /// The runtime's entrypoint, one argument per flag: the program (a path in the runtime
    /// root) first, then its arguments.
    #[arg(long, value_name = "ARG", requires = "runtime_root", allow_hyphen_values = true)]
    pub entrypoint: Vec<String>,
    /// The runtime's environment (KEY=VALUE); repeatable.
    #[arg(long, value_name = "KEY=VALUE", requires = "runtime_root")]
    pub env: Vec<String>,
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
    /// Registry credentials.
    #[command(flatten)]
    pub credentials: CredentialArgs,
}

/// Credentials for a registry (HTTP basic authentication); none means anonymous.
#[derive(Debug, Args)]
pub struct CredentialArgs {
    /// User name for the registry (HTTP basic authentication).
    #[arg(long, value_name = "NAME", requires = "password")]
    pub username: Option<String>,
    /// Password for the registry.
    #[arg(long, value_name = "PASSWORD", env = "OXPLANE_REGISTRY_PASSWORD", requires = "username")]
    pub password: Option<String>,
}

impl CredentialArgs {
    fn credentials(self) -> Credentials {
        match (self.username, self.password) {
            (Some(username), Some(password)) => Credentials::Basic { username, password },
            _ => Credentials::Anonymous,
        }
    }
}

/// Flags of `oxplane xpkg pull`.
#[derive(Debug, Args)]
pub struct PullArgs {
    /// What to pull: registry/repository:tag or registry/repository@sha256:... (an image index
    /// resolves to its linux/amd64 child, as Crossplane reads packages).
    pub reference: String,
    /// Where to write the package file.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: PathBuf,
    /// Registry credentials.
    #[command(flatten)]
    pub credentials: CredentialArgs,
}

/// Flags of `oxplane xpkg extract`.
#[derive(Debug, Args)]
pub struct ExtractArgs {
    /// The package in a registry (registry/repository:tag or @sha256:...).
    #[arg(required_unless_present = "from_xpkg", conflicts_with = "from_xpkg")]
    pub reference: Option<String>,
    /// Read the package from this package file instead of a registry.
    #[arg(long, value_name = "FILE")]
    pub from_xpkg: Option<PathBuf>,
    /// Where to write package.yaml [default: standard output].
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Registry credentials.
    #[command(flatten)]
    pub credentials: CredentialArgs,
}

fn pull(reference: &str, credentials: &Credentials) -> anyhow::Result<oxplane_xpkg::registry::Pulled> {
    let runtime = tokio::runtime::Runtime::new()?;
    Ok(runtime.block_on(oxplane_xpkg::registry::pull(reference, credentials))?)
}

/// Runs `oxplane xpkg ...`.
pub fn run(command: XpkgCommand) -> anyhow::Result<()> {
    match command {
        XpkgCommand::Build(args) => {
            let package = oxplane_xpkg::build::read_folder(&args.package_root)
                .with_context(|| format!("cannot build a package from {}", args.package_root.display()))?;
            let image = match args.runtime_root {
                None => oxplane_xpkg::build::image(&package)?,
                Some(root) => {
                    let runtime = oxplane_xpkg::build::Runtime { root, entrypoint: args.entrypoint, env: args.env };
                    oxplane_xpkg::build::image_with_runtime(&package, &runtime)?
                }
            };
            let out = args.package_file.unwrap_or_else(|| args.package_root.join(format!("{}.xpkg", package.name())));
            oxplane_xpkg::layout::write(&image, &out)?;
            println!("built {} {} ({} objects) as {} to {}", package.package_type.kind(), package.name(), package.objects.len(), image.digest(), out.display());
            Ok(())
        }
        XpkgCommand::Push(args) => {
            let image = oxplane_xpkg::layout::read(&args.package_file).with_context(|| format!("cannot read package {}", args.package_file.display()))?;
            let credentials = args.credentials.credentials();
            let runtime = tokio::runtime::Runtime::new()?;
            let digest = runtime.block_on(oxplane_xpkg::registry::push(&image, &args.reference, &credentials))?;
            println!("pushed {} as {digest}", args.reference);
            Ok(())
        }
        XpkgCommand::Pull(args) => {
            let pulled = pull(&args.reference, &args.credentials.credentials())?;
            let package = oxplane_xpkg::meta::parse(&pulled.image.package_yaml()?).with_context(|| format!("{} is not a Crossplane package", args.reference))?;
            oxplane_xpkg::layout::write(&pulled.image, &args.output)?;
            println!(
                "pulled {} {} ({} objects) from {} as {} to {}",
                package.package_type.kind(),
                package.name(),
                package.objects.len(),
                args.reference,
                pulled.digest,
                args.output.display()
            );
            Ok(())
        }
        XpkgCommand::Extract(args) => {
            let image = match (&args.reference, &args.from_xpkg) {
                (_, Some(file)) => oxplane_xpkg::layout::read(file).with_context(|| format!("cannot read package {}", file.display()))?,
                (Some(reference), None) => pull(reference, &args.credentials.credentials())?.image,
                (None, None) => anyhow::bail!("name a package reference or --from-xpkg FILE"),
            };
            let stream = image.package_yaml()?;
            match args.output {
                Some(path) => std::fs::write(&path, stream).with_context(|| format!("cannot write {}", path.display()))?,
                None => print!("{stream}"),
            }
            Ok(())
        }
    }
}
