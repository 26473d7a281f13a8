//! The `oxplane` binary: a Crossplane-compatible control plane in one program.
//!
//! This crate is the edge: it parses the command line, sets up logging, and calls into the
//! library crates. Errors are reported with `anyhow` and a non-zero exit status.

mod bench;
mod cli;
mod commands;
mod leadership;
mod plan_action;
mod server_flags;
mod up;
mod usage_protection;
mod webhooks;
mod xrd_validation;

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = cli::Cli::parse();
    let filter = || {
        tracing_subscriber::EnvFilter::try_from_env("OXPLANE_LOG").unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"))
    };
    match cli.log_format {
        cli::LogFormat::Text => tracing_subscriber::fmt().with_env_filter(filter()).with_writer(std::io::stderr).init(),
        cli::LogFormat::Json => tracing_subscriber::fmt()
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .with_env_filter(filter())
            .with_writer(std::io::stderr)
            .init(),
    }
    match cli::run(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
