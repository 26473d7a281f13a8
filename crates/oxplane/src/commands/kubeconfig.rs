//! `oxplane kubeconfig`: a kubeconfig for someone other than the admin: a new client
//! certificate signed by the server's CA (common name = user, organizations = groups, as the
//! server reads them), beside the server's URL and CA taken from the admin's kubeconfig in the
//! data directory. What the user may do is then up to RBAC (RoleBindings naming the user or a
//! group).

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use oxplane_apiserver::server::{kubeconfig, tls};

/// Flags of `oxplane kubeconfig`.
#[derive(Debug, Args)]
pub struct KubeconfigArgs {
    /// The user's name (the certificate's common name).
    #[arg(long, value_name = "NAME")]
    pub user: String,
    /// A group the user is in (an organization of the certificate); repeatable.
    #[arg(long = "group", value_name = "GROUP")]
    pub groups: Vec<String>,
    /// How long the certificate is valid (a Go duration).
    #[arg(long, value_name = "DURATION", default_value = "8760h")]
    pub expiration: String,
    /// Write the kubeconfig to this file (readable by its owner only) rather than to standard
    /// output.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// The server's URL [default: the one in the data directory's kubeconfig].
    #[arg(long, value_name = "URL")]
    pub server: Option<String>,
    /// The server's data directory, whose CA signs the certificate
    /// [default: $OXPLANE_HOME, else ~/.oxplane].
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
}

/// Runs `oxplane kubeconfig`; `data_dir` resolves the data directory flag.
pub fn run(args: KubeconfigArgs, data_dir: impl Fn(Option<PathBuf>) -> anyhow::Result<PathBuf>) -> anyhow::Result<()> {
    let dir = data_dir(args.data_dir)?;
    anyhow::ensure!(!args.user.trim().is_empty(), "--user must name a user");
    anyhow::ensure!(args.groups.iter().all(|g| !g.trim().is_empty()), "--group must not be empty");
    let validity = oxplane_machinery::golang::duration::parse(&args.expiration)
        .map_err(|e| anyhow::anyhow!("--expiration {:?}: {e}", args.expiration))?;
    anyhow::ensure!(!validity.is_zero(), "--expiration must be more than zero");
    let ca_path = dir.join("pki").join("ca.crt");
    let ca = std::fs::read_to_string(&ca_path)
        .with_context(|| format!("reading the server's CA {} (is {} the data directory of `oxplane up`?)", ca_path.display(), dir.display()))?;
    let server = match args.server {
        Some(server) => server,
        None => admin_server_url(&dir)?,
    };
    let (cert, key) = tls::issue_client_certificate_for(&dir, &args.user, &args.groups, validity)?;
    let text = kubeconfig::render_with_certificate(&server, &ca, &args.user, &cert, &key);
    match args.output {
        Some(path) => {
            oxplane_apiserver::server::write_private(&path, text.as_bytes(), true)?;
            eprintln!("wrote a kubeconfig for {} to {}", args.user, path.display());
        }
        None => print!("{text}"),
    }
    Ok(())
}

/// The server URL of the admin's kubeconfig in `dir` (written by `oxplane up`, as JSON).
fn admin_server_url(dir: &std::path::Path) -> anyhow::Result<String> {
    let path = dir.join(kubeconfig::KUBECONFIG_FILE);
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("reading {} for the server's URL (start `oxplane up` first, or pass --server)", path.display()))?;
    let config: serde_json::Value = serde_json::from_str(&text).with_context(|| format!("{} is not the kubeconfig oxplane writes", path.display()))?;
    config["clusters"][0]["cluster"]["server"]
        .as_str()
        .map(str::to_string)
        .with_context(|| format!("{} names no server; pass --server", path.display()))
}
