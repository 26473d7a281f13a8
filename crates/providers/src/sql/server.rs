//! Where a ProviderConfig points: the server's address and credentials, read from the
//! connection Secret its `spec.credentials.connectionSecretRef` names (keys renamed by
//! `secretKeyMapping`), and how errors from that server are worded.

use oxplane_runtime::client::Kube;
use oxplane_runtime::managed::ExternalError;
use oxplane_runtime::managed::connection;
use serde_json::Value;

/// What a ProviderConfig resolves to.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Server {
    /// Which config this came from (`ProviderConfig/ns/name`), for messages and pool keys.
    pub config: String,
    /// Host name or address.
    pub endpoint: String,
    /// TCP port.
    pub port: u16,
    /// User to log in as.
    pub username: String,
    /// Its password (never printed: see [`Server::redact`]).
    pub password: String,
    /// `spec.defaultDatabase` (PostgreSQL).
    pub default_database: String,
    /// `spec.sslMode` (PostgreSQL) or `spec.tls` (MySQL).
    pub tls: String,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.describe())
    }
}

impl Server {
    /// `host:port`, as errors name the server.
    pub fn describe(&self) -> String {
        if self.endpoint.contains(':') { format!("[{}]:{}", self.endpoint, self.port) } else { format!("{}:{}", self.endpoint, self.port) }
    }

    /// `message` with every occurrence of a secret replaced: errors a database returns may
    /// quote a statement, and a statement may hold a password.
    pub fn redact(&self, message: &str, more: &[&str]) -> String {
        let mut text = message.to_string();
        for secret in std::iter::once(self.password.as_str()).chain(more.iter().copied()) {
            if secret.len() >= 4 {
                text = text.replace(secret, "********");
            }
        }
        text
    }

    /// Reads the server a ProviderConfig names. `default_port` applies when the Secret has no
    /// port.
    pub async fn from_config(kube: &Kube, config: &Value, default_port: u16, default_database: &str) -> Result<Server, ExternalError> {
        let kind = config.get("kind").and_then(Value::as_str).unwrap_or("ProviderConfig");
        let name = oxplane_runtime::object::name(config).unwrap_or_default();
        let config_namespace = oxplane_runtime::object::namespace(config);
        let label = match config_namespace {
            Some(ns) => format!("{kind} {ns}/{name}"),
            None => format!("{kind} {name}"),
        };
        let credentials = config.pointer("/spec/credentials").cloned().unwrap_or(Value::Null);
        let reference = credentials
            .get("connectionSecretRef")
            .ok_or_else(|| ExternalError::definite(format!("{label} has no spec.credentials.connectionSecretRef")))?;
        let secret_name = reference.get("name").and_then(Value::as_str).filter(|n| !n.is_empty());
        let secret_namespace = config_namespace.or_else(|| reference.get("namespace").and_then(Value::as_str).filter(|n| !n.is_empty()));
        let (Some(secret_name), Some(secret_namespace)) = (secret_name, secret_namespace) else {
            return Err(ExternalError::definite(format!("{label}: connectionSecretRef needs a name and a namespace")));
        };
        let data = connection::read_secret(kube, secret_namespace, secret_name)
            .await
            .map_err(|e| ExternalError::definite(format!("{label}: cannot read connection secret {secret_namespace}/{secret_name}: {e}")))?
            .ok_or_else(|| ExternalError::definite(format!("{label}: connection secret {secret_namespace}/{secret_name} not found")))?;
        let mapping = credentials.get("secretKeyMapping");
        let key = |standard: &str| mapping.and_then(|m| m.get(standard)).and_then(Value::as_str).filter(|k| !k.is_empty()).unwrap_or(standard).to_string();
        let value = |standard: &str| data.get(&key(standard)).map(|v| String::from_utf8_lossy(v).into_owned());
        let required = |standard: &str| {
            value(standard).filter(|v| !v.is_empty()).ok_or_else(|| {
                ExternalError::definite(format!("{label}: connection secret {secret_namespace}/{secret_name} has no key {:?}", key(standard)))
            })
        };
        let endpoint = required("endpoint")?;
        let username = required("username")?;
        let password = value("password").unwrap_or_default();
        let port = match value("port").filter(|p| !p.is_empty()) {
            None => default_port,
            Some(port) => port
                .trim()
                .parse()
                .map_err(|_| ExternalError::definite(format!("{label}: port {port:?} in secret {secret_namespace}/{secret_name} is not a port number")))?,
        };
        let spec = config.get("spec").cloned().unwrap_or(Value::Null);
        Ok(Server {
            config: label,
            endpoint,
            port,
            username,
            password,
            default_database: spec.get("defaultDatabase").and_then(Value::as_str).filter(|d| !d.is_empty()).unwrap_or(default_database).to_string(),
            tls: spec
                .get("sslMode")
                .or_else(|| spec.get("tls"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        })
    }

    /// The standard connection details of a login on this server.
    pub fn connection_details(&self, username: &str, password: Option<&str>) -> oxplane_runtime::managed::ConnectionDetails {
        let mut details = oxplane_runtime::managed::ConnectionDetails::new();
        details.insert("username".into(), username.as_bytes().to_vec());
        if let Some(password) = password {
            details.insert("password".into(), password.as_bytes().to_vec());
        }
        details.insert("endpoint".into(), self.endpoint.as_bytes().to_vec());
        details.insert("port".into(), self.port.to_string().into_bytes());
        details
    }
}

/// A random password: 32 letters and digits.
pub fn generate_password() -> String {
    use rand::Rng;
    use rand::distr::Alphanumeric;
    rand::rng().sample_iter(&Alphanumeric).take(32).map(char::from).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_from_messages() {
        let server = Server {
            config: "ProviderConfig default".into(),
            endpoint: "127.0.0.1".into(),
            port: 5432,
            username: "postgres".into(),
            password: "s3cret-pw".into(),
            default_database: "postgres".into(),
            tls: "disable".into(),
        };
        assert_eq!(server.redact("syntax error at or near \"s3cret-pw\" and 'role-pw'", &["role-pw"]), "syntax error at or near \"********\" and '********'");
        assert_eq!(format!("{server:?}"), "127.0.0.1:5432");
        assert_eq!(generate_password().len(), 32);
    }
}
