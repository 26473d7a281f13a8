//! Credentials shared by every server on one store: the CA (certificate and key) and the
//! admin token live in the store as the Secret `kube-system/oxplane-credentials` (encrypted at
//! rest like every Secret), so a kubeconfig written by one server works against all of them.
//! The first server to start publishes its own (a create, so two first servers agree on one);
//! every later one adopts them into its data directory before it issues its serving
//! certificate.

use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use oxplane_store::{Store, StoreError, Write, WriteResult};
use serde_json::{Value, json};

use crate::ServeError;

/// The store key of the shared credentials.
pub const KEY: &str = "/registry/core/secrets/kube-system/oxplane-credentials";

/// Makes this server's CA and admin token those of the store, publishing its own if the
/// store has none yet.
pub async fn adopt(store: &dyn Store, dir: &Path) -> Result<(), ServeError> {
    loop {
        let found = store.get(KEY).await.map_err(unreadable)?;
        if let Some(kv) = found.kv {
            let secret: Value = serde_json::from_slice(&kv.value)
                .map_err(|e| ServeError::Startup(format!("the shared credentials in {KEY} are not a Secret: {e}")))?;
            let field = |name: &str| -> Result<String, ServeError> {
                let encoded = secret["data"][name].as_str().unwrap_or_default();
                let bytes = STANDARD.decode(encoded).unwrap_or_default();
                String::from_utf8(bytes)
                    .ok()
                    .filter(|s| !s.is_empty())
                    .ok_or_else(|| ServeError::Startup(format!("the shared credentials in {KEY} lack {name}")))
            };
            super::tls::install_ca(dir, &field("ca.crt")?, &field("ca.key")?)?;
            super::auth::install_token(dir, &field("token")?)?;
            return Ok(());
        }
        let (ca_cert, ca_key) = super::tls::ensure_ca(dir)?;
        let token = super::auth::ensure_token(dir)?;
        let secret = json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": "oxplane-credentials",
                "namespace": "kube-system",
                "uid": uuid::Uuid::new_v4().to_string(),
                "creationTimestamp": crate::objects::now_rfc3339(),
            },
            "type": "Opaque",
            "data": {
                "ca.crt": STANDARD.encode(&ca_cert),
                "ca.key": STANDARD.encode(&ca_key),
                "token": STANDARD.encode(&token),
            },
        });
        let write = Write::Create { key: KEY.into(), value: Bytes::from(secret.to_string()) };
        match store.write(write).await? {
            WriteResult::Committed(_) => {
                tracing::info!("published this server's CA and admin token for the other servers on the store");
                return Ok(());
            }
            // Another server published first: adopt theirs.
            WriteResult::Rejected { .. } => continue,
        }
    }
}

fn unreadable(error: StoreError) -> ServeError {
    match error {
        StoreError::Backend(message) if message.contains("encryption at rest") => ServeError::Startup(format!(
            "cannot read the credentials shared by the other servers ({message}); start every server on this \
             store with the same --encryption-provider-config"
        )),
        other => other.into(),
    }
}
