//! The command line: subcommands and their flags.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};

use crate::bench;

/// A Crossplane-compatible control plane in one binary.
#[derive(Debug, Parser)]
#[command(name = "oxplane", version, about, long_about = None)]
pub struct Cli {
    /// How log lines are written to standard error: `text` for people, `json` (one object per
    /// line: timestamp, level, target, message, fields, and the span of the controller and
    /// object being reconciled) for log collectors. Levels come from `OXPLANE_LOG`
    /// (default `warn`; e.g. `OXPLANE_LOG=info`).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The forms of log lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the Kubernetes-compatible API on the embedded store (or etcd), until SIGTERM or Ctrl-C.
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
        /// Bearer tokens and their users, one CSV line each: token,user,uid,"group1,group2"
        /// (kube-apiserver's --token-auth-file format).
        #[arg(long, value_name = "FILE")]
        token_auth_file: Option<PathBuf>,
        /// A built-in provider to install at start (e.g. provider-nop), or a package reference
        /// naming one; repeatable.
        #[arg(long = "provider", value_name = "NAME")]
        providers: Vec<String>,
        /// The entries (names or globs, comma-separated) of the ManagedResourceActivationPolicy
        /// `crossplane-default-activation-policy`, created at start unless it exists, as
        /// Crossplane's chart value `provider.defaultActivations`; '' creates none.
        #[arg(long, value_name = "PATTERNS", value_delimiter = ',', default_value = "*")]
        default_activations: Vec<String>,
        /// How long a watch on a kind nothing depends on any more is kept before it stops.
        #[arg(long, value_name = "SECONDS", default_value_t = 10)]
        watch_grace_period: u64,
        /// How often composite resource controllers rebuild the watches of the kinds they
        /// compose from the composites' stored references.
        #[arg(long, value_name = "SECONDS", default_value_t = 30)]
        watch_reassert_interval: u64,
        /// Watch events a composite resource may receive in a burst before its circuit
        /// breaker opens (`Responsive=False`).
        #[arg(long, value_name = "EVENTS", default_value_t = 100.0)]
        circuit_breaker_burst: f64,
        /// Watch events per second a composite resource may receive, sustained.
        #[arg(long, value_name = "PER_SECOND", default_value_t = 1.0)]
        circuit_breaker_refill_rate: f64,
        /// How long an open circuit stays open.
        #[arg(long, value_name = "SECONDS", default_value_t = 300)]
        circuit_breaker_cooldown: u64,
        /// While a circuit is open, how often the composite is woken for the events held back.
        #[arg(long, value_name = "SECONDS", default_value_t = 30)]
        circuit_breaker_probe_interval: u64,
        /// The directory function-go-templating's `source: FileSystem` templates are read
        /// from: a `fileSystem.dirPath` names a folder under it (`/templates` is
        /// DIR/templates). Without it, FileSystem sources are refused.
        #[arg(long, value_name = "DIR")]
        go_templating_dir: Option<PathBuf>,
        /// How long an Event is kept after it last happened (a Go duration, as kube-apiserver's
        /// `--event-ttl`).
        #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = parse_event_ttl)]
        event_ttl: std::time::Duration,
        /// Serve Crossplane's Operations (ops.crossplane.io/v1alpha1 Operation, CronOperation,
        /// WatchOperation), an alpha feature Crossplane also leaves off by default.
        #[arg(long)]
        enable_operations: bool,
        /// Runs the clock of CronOperation schedules this many times faster than real time
        /// (tests of schedules; 1 in production).
        #[arg(long, value_name = "RATE", default_value_t = 1, hide = true)]
        operations_clock_rate: u32,
        /// Keep the responses of functions reached over gRPC in the data directory
        /// (`cache/xfn`) and answer an identical request from there until the response's TTL
        /// passes (Crossplane's alpha feature of the same name).
        #[arg(long)]
        enable_function_response_cache: bool,
        /// The longest a cached function response is kept, whatever its TTL (a Go duration).
        #[arg(long, value_name = "DURATION", default_value = "24h", value_parser = parse_positive_duration)]
        xfn_cache_max_ttl: std::time::Duration,
        /// The package manager.
        #[command(flatten)]
        packages: crate::server_flags::PackageFlags,
        /// Encryption at rest and the audit log.
        #[command(flatten)]
        security: crate::server_flags::SecurityFlags,
        /// The store.
        #[command(flatten)]
        store: crate::server_flags::StoreFlags,
        /// Run Crossplane's controllers, providers and functions beside the API server; with
        /// false, serve only the API (for `oxplane controllers` elsewhere).
        #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
        controllers: bool,
    },
    /// Run Crossplane's controllers, built-in providers and functions against any Kubernetes
    /// API server (a real cluster, or another oxplane), through its API alone.
    Controllers(crate::commands::controllers::ControllersArgs),
    /// Trace a claim, composite, managed resource or package: its tree of objects and why
    /// they are or are not ready.
    Trace(crate::commands::trace::TraceArgs),
    /// Validate resources offline against the schemas of CRDs, XRDs and providers.
    Validate(crate::commands::validate::ValidateArgs),
    /// Show what applying composite resources or claims would change: the composed resources
    /// that would be created, changed (field by field) and deleted, with nothing written.
    Diff(crate::commands::diff::DiffArgs),
    /// Adopt an external resource that exists already into a managed resource: observe it
    /// first, show the spec it would be managed with, then take it over once confirmed.
    Import(crate::commands::import::ImportArgs),
    /// Commands on resources (`resource trace`, `resource validate`).
    Resource {
        /// Which.
        #[command(subcommand)]
        which: ResourceCommand,
    },
    /// Render a composite resource through a Composition's function pipeline, offline.
    Render(crate::commands::render::RenderArgs),
    /// Commands on compositions (`composition render`).
    Composition {
        /// Which.
        #[command(subcommand)]
        which: CompositionCommand,
    },
    /// Serve a built-in function over gRPC, or write a function's certificates.
    Function {
        /// Which.
        #[command(subcommand)]
        which: crate::commands::function::FunctionCommand,
    },
    /// Build, push, pull and inspect Crossplane packages (xpkg), without Docker.
    Xpkg {
        /// Which.
        #[command(subcommand)]
        which: crate::commands::xpkg::XpkgCommand,
    },
    /// Print the output of a pulled Provider's or Function's process (its active revision's
    /// log in the data directory); with -f, follow it.
    Logs(crate::commands::logs::LogsArgs),
    /// Write a kubeconfig for a user with a new client certificate signed by the server's CA
    /// (common name = the user, organizations = the groups).
    Kubeconfig(crate::commands::kubeconfig::KubeconfigArgs),
    /// Measure oxplane's performance and print the figures.
    Bench {
        /// Which benchmark.
        #[command(subcommand)]
        which: bench::Which,
    },
}

/// `oxplane resource ...`: the names Crossplane's CLI uses from v2.4.
#[derive(Debug, Subcommand)]
pub enum ResourceCommand {
    /// Trace a claim, composite, managed resource or package (same as `oxplane trace`).
    Trace(crate::commands::trace::TraceArgs),
    /// Validate resources offline against the schemas of CRDs, XRDs and providers (same as
    /// `oxplane validate`).
    Validate(crate::commands::validate::ValidateArgs),
}

/// `oxplane composition ...`: the names Crossplane's CLI uses from v2.4.
#[derive(Debug, Subcommand)]
pub enum CompositionCommand {
    /// Render a composite resource through a Composition's function pipeline, offline (same as
    /// `oxplane render`).
    Render(crate::commands::render::RenderArgs),
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
            token_auth_file,
            providers,
            default_activations,
            watch_grace_period,
            watch_reassert_interval,
            circuit_breaker_burst,
            circuit_breaker_refill_rate,
            circuit_breaker_cooldown,
            circuit_breaker_probe_interval,
            go_templating_dir,
            event_ttl,
            enable_operations,
            operations_clock_rate,
            enable_function_response_cache,
            xfn_cache_max_ttl,
            packages,
            security,
            store,
            controllers,
        } => {
            anyhow::ensure!(
                circuit_breaker_burst.is_finite() && circuit_breaker_burst >= 1.0,
                "--circuit-breaker-burst must be a number of at least 1 (got {circuit_breaker_burst})"
            );
            anyhow::ensure!(
                circuit_breaker_refill_rate.is_finite() && circuit_breaker_refill_rate > 0.0,
                "--circuit-breaker-refill-rate must be a positive number of events per second (got {circuit_breaker_refill_rate})"
            );
            let circuit = oxplane_runtime::circuit::CircuitConfig {
                burst: circuit_breaker_burst,
                refill_per_second: circuit_breaker_refill_rate,
                cooldown: std::time::Duration::from_secs(circuit_breaker_cooldown),
                probe_interval: std::time::Duration::from_secs(circuit_breaker_probe_interval.max(1)),
            };
            let mut config = oxplane_apiserver::server::ServerConfig::new(self::data_dir(data_dir)?, listen);
            config.watch_cache_window = watch_cache_window;
            config.max_requests_inflight = max_requests_inflight;
            config.max_mutating_requests_inflight = max_mutating_requests_inflight;
            config.token_auth_file = token_auth_file;
            config.event_ttl = event_ttl;
            security.apply(&mut config);
            config.store = store.backend()?;
            let function_response_cache = enable_function_response_cache.then(|| {
                oxplane_functions::cache::ResponseCache::new(config.data_dir.join("cache/xfn"), xfn_cache_max_ttl, oxplane_functions::cache::DEFAULT_MAX_BYTES)
            });
            crate::up::run(crate::up::UpOptions { server: config, providers, default_activations, watch_grace: std::time::Duration::from_secs(watch_grace_period),
                reassert: std::time::Duration::from_secs(watch_reassert_interval.max(1)),
                circuit,
                functions: oxplane_functions::builtin::BuiltinOptions { go_templating_dir },
                controllers,
                operations: enable_operations.then(|| oxplane_composition::ops::Clock::with_rate(operations_clock_rate)),
                function_response_cache,
                dependency_versions: packages.dependency_versions(),
                package_sources: packages.package_sources(),
            })
        }
        Command::Bench { which } => bench::run(which),
        Command::Controllers(args) => crate::commands::controllers::run(args),
        Command::Kubeconfig(args) => crate::commands::kubeconfig::run(args, data_dir),
        Command::Logs(args) => crate::commands::logs::run(args, data_dir),
        Command::Function { which } => crate::commands::function::run(which, data_dir),
        Command::Xpkg { which } => crate::commands::xpkg::run(which),
        Command::Render(args) | Command::Composition { which: CompositionCommand::Render(args) } => crate::commands::render::run(args, data_dir),
        Command::Diff(args) => crate::commands::diff::run(args),
        Command::Import(args) => crate::commands::import::run(args),
        Command::Trace(args) | Command::Resource { which: ResourceCommand::Trace(args) } => crate::commands::trace::run(args),
        Command::Validate(args) | Command::Resource { which: ResourceCommand::Validate(args) } => crate::commands::validate::run(args),
    }
}

/// `--event-ttl`: a positive Go duration.
fn parse_event_ttl(text: &str) -> Result<std::time::Duration, String> {
    parse_positive_duration(text).map_err(|e| e.replace("the duration", "the event TTL"))
}

/// A Go duration of more than zero.
pub fn parse_positive_duration(text: &str) -> Result<std::time::Duration, String> {
    match oxplane_machinery::golang::duration::parse(text) {
        Ok(duration) if duration.is_zero() => Err("the duration must be more than zero".to_string()),
        Ok(duration) => Ok(duration),
        Err(error) => Err(error.to_string()),
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

