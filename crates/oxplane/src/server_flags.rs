//! `oxplane up`'s flags for the store, encryption at rest, the audit log and ServiceAccount tokens, named as
//! kube-apiserver names them; and for the package manager, named as Crossplane's core names them.

use std::path::PathBuf;

use anyhow::Context;
use oxplane_apiserver::server::{ServerConfig, StoreBackend};
use oxplane_store::etcd::{EtcdOptions, EtcdTls};

/// Encryption at rest and audit flags of `oxplane up`.
#[derive(Debug, clap::Args)]
pub struct SecurityFlags {
    /// An `EncryptionConfiguration` (apiserver.config.k8s.io/v1) naming the keys Secrets (or
    /// other resources) are encrypted with; without it, the one generated in the data
    /// directory (`encryption-config.yaml`, a random AES-GCM key) is used.
    #[arg(long, value_name = "FILE")]
    encryption_provider_config: Option<PathBuf>,
    /// Write the audit log (audit.k8s.io/v1 Event JSON lines) to this file; `-` for standard
    /// output. Without it nothing is audited.
    #[arg(long, value_name = "FILE")]
    audit_log_path: Option<PathBuf>,
    /// An audit Policy (audit.k8s.io/v1) deciding each request's level; without it every
    /// request is logged at Metadata.
    #[arg(long, value_name = "FILE", requires = "audit_log_path")]
    audit_policy_file: Option<PathBuf>,
    /// Rotate the audit log past this many megabytes (0: never).
    #[arg(long, value_name = "MB", default_value_t = 0)]
    audit_log_maxsize: u64,
    /// Rotated audit logs kept (0: all).
    #[arg(long, value_name = "N", default_value_t = 0)]
    audit_log_maxbackup: usize,
    /// Days rotated audit logs are kept (0: forever).
    #[arg(long, value_name = "DAYS", default_value_t = 0)]
    audit_log_maxage: u64,
    /// The issuer (`iss`) of ServiceAccount tokens, and the audience tokens sent to this API
    /// must carry; published at /.well-known/openid-configuration.
    #[arg(long, value_name = "URL", default_value = oxplane_apiserver::authn::service_accounts::DEFAULT_ISSUER)]
    service_account_issuer: String,
}

impl SecurityFlags {
    /// Puts the flags into the server's configuration.
    pub fn apply(self, config: &mut ServerConfig) {
        config.encryption_provider_config = self.encryption_provider_config;
        config.service_account_issuer = self.service_account_issuer;
        config.audit = self.audit_log_path.map(|path| oxplane_apiserver::audit::AuditConfig {
            file: oxplane_apiserver::audit::FileOptions {
                path,
                max_bytes: self.audit_log_maxsize * 1024 * 1024,
                max_backups: self.audit_log_maxbackup,
                max_age_days: self.audit_log_maxage,
            },
            policy_file: self.audit_policy_file,
        });
    }
}

/// Where `oxplane up` keeps its objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum StoreKind {
    /// The embedded SQLite file in the data directory.
    Sqlite,
    /// Memory only: lost when the process ends (demos and tests).
    Memory,
    /// An etcd v3 cluster (`--etcd`), which several servers can share.
    Etcd,
}

/// The store flags of `oxplane up`; the etcd ones are named as kube-apiserver's.
#[derive(Debug, clap::Args)]
pub struct StoreFlags {
    /// The store [default: etcd when --etcd is given, else sqlite].
    #[arg(long, value_enum, value_name = "KIND")]
    store: Option<StoreKind>,
    /// etcd client URLs, comma-separated (`http://` or `https://`).
    #[arg(long, alias = "etcd-servers", value_name = "URL[,URL...]", value_delimiter = ',')]
    etcd: Vec<String>,
    /// Every key oxplane writes to etcd lives under this prefix.
    #[arg(long, value_name = "PREFIX", default_value = oxplane_store::etcd::DEFAULT_PREFIX)]
    etcd_prefix: String,
    /// The CA that signed etcd's serving certificates (PEM).
    #[arg(long, value_name = "FILE")]
    etcd_cafile: Option<PathBuf>,
    /// A client certificate for etcd (PEM), with --etcd-keyfile.
    #[arg(long, value_name = "FILE", requires = "etcd_keyfile")]
    etcd_certfile: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "etcd_certfile")]
    etcd_keyfile: Option<PathBuf>,
}

impl StoreFlags {
    /// The store the flags choose, with its files read.
    pub fn backend(self) -> anyhow::Result<StoreBackend> {
        let kind = self.store.unwrap_or(if self.etcd.is_empty() { StoreKind::Sqlite } else { StoreKind::Etcd });
        let etcd_flags = !self.etcd.is_empty()
            || self.etcd_cafile.is_some()
            || self.etcd_certfile.is_some()
            || self.etcd_prefix != oxplane_store::etcd::DEFAULT_PREFIX;
        match kind {
            StoreKind::Sqlite | StoreKind::Memory if etcd_flags => {
                anyhow::bail!("--etcd flags need --store etcd (or no --store)")
            }
            StoreKind::Sqlite => Ok(StoreBackend::Sqlite),
            StoreKind::Memory => Ok(StoreBackend::Memory),
            StoreKind::Etcd => {
                anyhow::ensure!(!self.etcd.is_empty(), "--store etcd needs --etcd URL[,URL...]");
                for url in &self.etcd {
                    anyhow::ensure!(
                        url.starts_with("http://") || url.starts_with("https://"),
                        "--etcd {url}: expected an http:// or https:// URL"
                    );
                }
                let read = |path: &Option<PathBuf>| -> anyhow::Result<Option<Vec<u8>>> {
                    path.as_ref()
                        .map(|p| std::fs::read(p).with_context(|| format!("reading {}", p.display())))
                        .transpose()
                };
                let tls = EtcdTls { ca: read(&self.etcd_cafile)?, cert: read(&self.etcd_certfile)?, key: read(&self.etcd_keyfile)? };
                let secure = self.etcd.iter().any(|u| u.starts_with("https://"));
                let mut options = EtcdOptions::new(self.etcd);
                options.prefix = self.etcd_prefix;
                options.tls = (secure || tls.ca.is_some() || tls.cert.is_some()).then_some(tls);
                Ok(StoreBackend::Etcd(options))
            }
        }
    }
}

/// The package manager's flags of `oxplane up` (Crossplane's core flags of the same names).
#[derive(Debug, clap::Args)]
pub struct PackageFlags {
    /// Let the dependency resolver upgrade an installed dependency whose version no longer
    /// satisfies every package that depends on it, to the lowest version that does (an alpha
    /// feature Crossplane also leaves off: without it the dependent package reports the
    /// incompatible dependency).
    #[arg(long)]
    enable_dependency_version_upgrades: bool,
    /// When no version at or above the installed one satisfies them all, let the resolver
    /// downgrade the dependency to the highest lower version that does.
    #[arg(long, requires = "enable_dependency_version_upgrades")]
    enable_dependency_version_downgrades: bool,
    /// Package references starting with PREFIX (e.g. `xpkg.crossplane.io/crossplane-contrib/`)
    /// are pulled from their registry and run as the package's own image even when they name a
    /// built-in provider or function, and dependencies on them are resolved from the
    /// registry's tags; repeatable. Other references naming a built-in use the built-in.
    #[arg(long = "pull-package", value_name = "PREFIX")]
    pull_packages: Vec<String>,
}

impl PackageFlags {
    /// How the resolver may change installed dependencies.
    pub fn dependency_versions(&self) -> oxplane_composition::packages::lock::VersionChanges {
        oxplane_composition::packages::lock::VersionChanges { upgrades: self.enable_dependency_version_upgrades, downgrades: self.enable_dependency_version_downgrades }
    }

    /// Which package references are pulled whatever they are named.
    pub fn package_sources(&self) -> oxplane_composition::packages::PackageSources {
        oxplane_composition::packages::PackageSources::new(self.pull_packages.clone())
    }
}
