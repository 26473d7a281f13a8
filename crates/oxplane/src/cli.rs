//! The command line: subcommands and their flags.

use clap::{Parser, Subcommand};

use crate::bench;

/// A Crossplane-compatible control plane in one binary.
#[derive(Debug, Parser)]
#[command(name = "oxplane", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Measure oxplane's performance and print the figures.
    Bench {
        /// Which benchmark.
        #[command(subcommand)]
        which: bench::Which,
    },
}

/// Runs the parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Bench { which } => bench::run(which),
    }
}
