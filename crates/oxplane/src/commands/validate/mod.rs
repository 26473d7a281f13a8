//! `oxplane validate EXTENSIONS RESOURCES` (also `oxplane resource validate`): resources checked
//! offline against the schemas of CRDs, XRDs and built-in providers, with the lines and exit
//! status of Crossplane's `crossplane beta validate`. The output of `oxplane render` can be
//! piped in (`-`).
//!
//! - `extensions.rs`: which CRDs the extensions give.
//! - `check.rs`: defaulting, schema, unknown-field and CEL checks, and the output lines (pure).

mod check;
mod extensions;

use std::path::PathBuf;

use anyhow::bail;

use crate::commands::load;

/// The flags and arguments of `validate`, as Crossplane's CLI names them.
#[derive(Debug, Clone, clap::Args)]
pub struct ValidateArgs {
    /// Extensions source which can be a file, directory, or '-' for standard input
    /// (comma-separated for several).
    #[arg(value_name = "EXTENSIONS")]
    pub extensions: String,
    /// Resources source which can be a file, directory, or '-' for standard input
    /// (comma-separated for several).
    #[arg(value_name = "RESOURCES")]
    pub resources: String,
    /// Accepted for compatibility: oxplane downloads no package schemas, so there is nothing
    /// to cache.
    #[arg(long, value_name = "DIR", default_value = "~/.crossplane/cache")]
    pub cache_dir: PathBuf,
    /// Accepted for compatibility (nothing is cached).
    #[arg(long)]
    pub clean_cache: bool,
    /// Accepted for compatibility: Crossplane's own kinds are always validated, against the
    /// schemas oxplane serves.
    #[arg(long, value_name = "IMAGE")]
    pub crossplane_image: Option<String>,
    /// Return non zero exit code if not all schemas are provided.
    #[arg(long)]
    pub error_on_missing_schemas: bool,
    /// Skip printing success results.
    #[arg(long)]
    pub skip_success_results: bool,
}

/// Runs `validate`: prints the lines, and fails when a resource failed (or, with
/// `--error-on-missing-schemas`, had no schema).
pub fn run(args: ValidateArgs) -> anyhow::Result<()> {
    if args.extensions == "-" && args.resources == "-" {
        bail!("cannot use stdin for both extensions and resources");
    }
    let extensions = load::sources(&args.extensions).map_err(|e| anyhow::anyhow!("cannot load extensions from {:?}: {e:#}", args.extensions))?;
    let mut resources = load::sources(&args.resources).map_err(|e| anyhow::anyhow!("cannot load resources from {:?}: {e:#}", args.resources))?;
    let (crds, notes) = extensions::crds(&extensions)?;
    for note in notes {
        eprintln!("warning: {note}");
    }
    let schemas = check::Schemas::compile(&crds).map_err(|e| anyhow::anyhow!("cannot validate resources: {e}"))?;
    let report = check::validate(&mut resources, &schemas, args.skip_success_results);
    for line in &report.lines {
        println!("{line}");
    }
    if report.failures > 0 {
        bail!("cannot validate resources: could not validate all resources");
    }
    if args.error_on_missing_schemas && report.missing > 0 {
        bail!("cannot validate resources: could not validate all resources, schema(s) missing");
    }
    Ok(())
}
