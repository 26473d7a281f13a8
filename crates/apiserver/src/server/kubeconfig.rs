//! The kubeconfig written to the data directory: the CA, the server URL with the real port, and
//! the admin token, so `kubectl --kubeconfig DIR/kubeconfig` works at once.

use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use crate::ServeError;

/// The kubeconfig file's name in the data directory.
pub const KUBECONFIG_FILE: &str = "kubeconfig";

/// Renders a kubeconfig for `server_url` with the admin token.
pub fn render(server_url: &str, ca_pem: &str, token: &str) -> String {
    render_user(server_url, ca_pem, "oxplane-admin", serde_json::json!({"token": token}))
}

/// Renders a kubeconfig for `server_url` whose user `name` presents a client certificate.
pub fn render_with_certificate(server_url: &str, ca_pem: &str, name: &str, cert_pem: &str, key_pem: &str) -> String {
    let user = serde_json::json!({
        "client-certificate-data": STANDARD.encode(cert_pem),
        "client-key-data": STANDARD.encode(key_pem),
    });
    render_user(server_url, ca_pem, name, user)
}

fn render_user(server_url: &str, ca_pem: &str, name: &str, user: serde_json::Value) -> String {
    let ca = STANDARD.encode(ca_pem);
    // JSON is valid YAML, and serde_json gets every escape right.
    let config = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "oxplane", "cluster": {"server": server_url, "certificate-authority-data": ca}}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": "oxplane", "context": {"cluster": "oxplane", "user": name, "namespace": "default"}}],
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
