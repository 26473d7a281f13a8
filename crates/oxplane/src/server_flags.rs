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
}

impl SecurityFlags {
    /// Puts the flags into the server's configuration.
    pub fn apply(self, config: &mut ServerConfig) {
        config.encryption_provider_config = self.encryption_provider_config;
    }
}
