//! The command line: subcommands and their flags.

use std::path::PathBuf;

use anyhow::Context;
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
    /// Serve the Kubernetes-compatible API on the embedded store, until SIGTERM or Ctrl-C.
    Up {
        /// Where the store, certificates, admin token and kubeconfig live
        /// [default: $OXPLANE_HOME, else ~/.oxplane].
        #[arg(long, value_name = "DIR")]
        data_dir: Option<PathBuf>,
        /// Address to listen on; port 0 picks a free port.
        #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:6443")]
        listen: String,
        /// Recent events kept in memory for watches that resume from a resourceVersion; a watch
        /// from an older one gets 410 Expired and relists.
        #[arg(long, value_name = "EVENTS", default_value_t = oxplane_apiserver::cache::DEFAULT_WINDOW)]
        watch_cache_window: usize,
        /// Read-only requests in flight before the server answers 429 (0 = unlimited).
        #[arg(long, value_name = "N", default_value_t = oxplane_apiserver::http::inflight::DEFAULT_READONLY)]
        max_requests_inflight: usize,
        /// Mutating requests in flight before the server answers 429 (0 = unlimited).
        #[arg(long, value_name = "N", default_value_t = oxplane_apiserver::http::inflight::DEFAULT_MUTATING)]
        max_mutating_requests_inflight: usize,
        /// A built-in provider to install at start (e.g. provider-nop), or a package reference
        /// naming one; repeatable.
        #[arg(long = "provider", value_name = "NAME")]
        providers: Vec<String>,
        /// How long a watch on a kind nothing depends on any more is kept before it stops.
        #[arg(long, value_name = "SECONDS", default_value_t = 10)]
        watch_grace_period: u64,
        /// How often composite resource controllers rebuild the watches of the kinds they
        /// compose from the composites' stored references.
        #[arg(long, value_name = "SECONDS", default_value_t = 30)]
        watch_reassert_interval: u64,
    },
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
        Command::Up {
            data_dir,
            listen,
            watch_cache_window,
            max_requests_inflight,
            max_mutating_requests_inflight,
            providers,
            watch_grace_period,
            watch_reassert_interval,
        } => {
            let mut config = oxplane_apiserver::server::ServerConfig::new(self::data_dir(data_dir)?, listen);
            config.watch_cache_window = watch_cache_window;
            config.max_requests_inflight = max_requests_inflight;
            config.max_mutating_requests_inflight = max_mutating_requests_inflight;
            crate::up::run(crate::up::UpOptions { server: config, providers, watch_grace: std::time::Duration::from_secs(watch_grace_period),
                reassert: std::time::Duration::from_secs(watch_reassert_interval.max(1)),
            })
        }
        Command::Bench { which } => bench::run(which),
    }
}

/// The data directory: the flag, else `$OXPLANE_HOME`, else `~/.oxplane`.
fn data_dir(flag: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    if let Some(dir) = flag {
        return Ok(dir);
    }
    if let Some(home) = std::env::var_os("OXPLANE_HOME").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(home));
    }
    let home = std::env::var_os("HOME").context("neither --data-dir, OXPLANE_HOME nor HOME is set")?;
    Ok(PathBuf::from(home).join(".oxplane"))
}

