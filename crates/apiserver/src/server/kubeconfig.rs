//! The kubeconfig written to the data directory: the CA, the server URL with the real port, and
//! the admin token, so `kubectl --kubeconfig DIR/kubeconfig` works at once.

use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use crate::ServeError;

/// The kubeconfig file's name in the data directory.
pub const KUBECONFIG_FILE: &str = "kubeconfig";

/// Renders a kubeconfig for `server_url`.
pub fn render(server_url: &str, ca_pem: &str, token: &str) -> String {
    let ca = STANDARD.encode(ca_pem);
    // JSON is valid YAML, and serde_json gets every escape right.
    let config = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "oxplane", "cluster": {"server": server_url, "certificate-authority-data": ca}}],
        "users": [{"name": "oxplane-admin", "user": {"token": token}}],
        "contexts": [{"name": "oxplane", "context": {"cluster": "oxplane", "user": "oxplane-admin", "namespace": "default"}}],
        "current-context": "oxplane",
        "preferences": {}
    });
    let mut text = serde_json::to_string_pretty(&config).unwrap_or_default();
    text.push('\n');
    text
}

/// Writes the kubeconfig to `dir`, readable by the owner only (it holds the admin token).
pub fn write(dir: &Path, server_url: &str, ca_pem: &str, token: &str) -> Result<(), ServeError> {
    super::files::write_private(&dir.join(KUBECONFIG_FILE), render(server_url, ca_pem, token).as_bytes(), true)
}
