//! The `oxplane` binary: a Crossplane-compatible control plane in one program.
//!
//! This crate is the edge: it parses the command line, sets up logging, and calls into the
//! library crates. Errors are reported with `anyhow` and a non-zero exit status.

mod bench;
mod cli;
mod commands;
mod server_flags;
mod up;
mod usage_protection;
mod xrd_validation;

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = cli::Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("OXPLANE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    match cli::run(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
