//! `oxplane up`'s flags for encryption at rest and the audit log, named as kube-apiserver names
//! them.

use std::path::PathBuf;

use oxplane_apiserver::server::ServerConfig;

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
}

impl SecurityFlags {
    /// Puts the flags into the server's configuration.
    pub fn apply(self, config: &mut ServerConfig) {
        config.encryption_provider_config = self.encryption_provider_config;
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
