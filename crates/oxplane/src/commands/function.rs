//! `oxplane function ...`: serve a built-in function over gRPC as a standalone function server
//! (the function SDKs' flags, so real Crossplane and `crossplane render` can call it), and
//! write a function's server certificate directory from oxplane's CA.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use clap::{Args, Subcommand};
use oxplane_functions::builtin::{BuiltinOptions, builtin_names, catalog};
use oxplane_functions::grpc::tls::CertificateAuthority;
use oxplane_functions::grpc::{ServerTls, serve};

/// Where oxplane keeps its certificate authority for function calls, in its data directory.
pub fn ca_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("pki").join("functions")
}

/// `oxplane function ...`.
#[derive(Debug, Subcommand)]
pub enum FunctionCommand {
    /// Serve a built-in function as a gRPC function server until SIGTERM or Ctrl-C.
    Serve(ServeArgs),
    /// Write a function's server certificate directory (`tls.crt`, `tls.key`, `ca.crt`), signed
    /// by oxplane's CA, for a function oxplane calls with mutual TLS
    /// (`oxplane.io/function-endpoint`); point the function's `TLS_SERVER_CERTS_DIR` at it.
    Certs(CertsArgs),
}

/// Flags of `oxplane function serve`, as the function SDKs name them.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The built-in function's package name (e.g. function-patch-and-transform).
    pub name: String,
    /// Address to listen on.
    #[arg(long, value_name = "HOST:PORT", default_value = "0.0.0.0:9443")]
    pub address: String,
    /// Directory with the server's `tls.crt`, `tls.key` and `ca.crt` (client certificates
    /// must chain to `ca.crt`).
    #[arg(long, value_name = "DIR", env = "TLS_SERVER_CERTS_DIR")]
    pub tls_certs_dir: Option<PathBuf>,
    /// Serve plain-text gRPC (local development only).
    #[arg(long)]
    pub insecure: bool,
    /// function-go-templating's FileSystem root, as `oxplane up --go-templating-dir`.
    #[arg(long, value_name = "DIR")]
    pub go_templating_dir: Option<PathBuf>,
}

/// Flags of `oxplane function certs`.
#[derive(Debug, Args)]
pub struct CertsArgs {
    /// Where to write `tls.crt`, `tls.key` and `ca.crt`.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// A host name or IP address oxplane reaches the function by; repeatable.
    #[arg(long = "name", value_name = "HOST", default_values_t = ["localhost".to_string(), "127.0.0.1".to_string()])]
    pub names: Vec<String>,
    /// oxplane's data directory [default: $OXPLANE_HOME, else ~/.oxplane].
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
}

/// Runs `oxplane function ...`; `data_dir` resolves the data directory flag.
pub fn run(command: FunctionCommand, data_dir: impl Fn(Option<PathBuf>) -> anyhow::Result<PathBuf>) -> anyhow::Result<()> {
    match command {
        FunctionCommand::Serve(args) => serve_builtin(args),
        FunctionCommand::Certs(args) => {
            let ca = CertificateAuthority::load_or_create(&ca_dir(&data_dir(args.data_dir)?))?;
            ca.write_server_dir(&args.out, &args.names)?;
            println!("wrote tls.crt, tls.key and ca.crt for {} to {}", args.names.join(", "), args.out.display());
            Ok(())
        }
    }
}

fn serve_builtin(args: ServeArgs) -> anyhow::Result<()> {
    let options = BuiltinOptions { go_templating_dir: args.go_templating_dir.clone() };
    let function = catalog(&options)
        .into_iter()
        .find(|(name, _)| *name == args.name)
        .map(|(_, function)| function)
        .with_context(|| format!("{:?} is not a built-in function; built-in functions: {}", args.name, builtin_names().join(", ")))?;
    let tls = match (&args.tls_certs_dir, args.insecure) {
        (_, true) => None,
        (Some(dir), false) => Some(ServerTls::from_dir(dir).map_err(anyhow::Error::msg)?),
        (None, false) => anyhow::bail!("serving with TLS needs --tls-certs-dir (or TLS_SERVER_CERTS_DIR); use --insecure for plain text"),
    };
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(&args.address).await.with_context(|| format!("cannot listen on {}", args.address))?;
        let address = listener.local_addr()?;
        eprintln!("serving {} on {address} ({})", args.name, if tls.is_some() { "mutual TLS" } else { "insecure" });
        let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let shutdown = async move {
            tokio::select! {
                _ = terminate.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        };
        serve(Arc::clone(&function), listener, tls, shutdown).await.map_err(anyhow::Error::msg)
    })
}
