//! MySQL and MariaDB: a `mysql_async` pool per ProviderConfig (with the config's `tls`), the
//! errors the server gives worded for conditions, and the managed kinds (one file each).

pub mod database;
pub mod grant;
pub mod user;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{ClientIdentity, Conn, OptsBuilder, Pool, PoolConstraints, PoolOpts, SslOpts};
use oxplane_runtime::client::Kube;
use oxplane_runtime::managed::connection;
use oxplane_runtime::managed::{ConnectContext, ExternalClient, ExternalConnector, ExternalError, Managed};
use serde_json::Value;

use super::quote::{self, QuoteError};
use super::server::Server;

/// The port a connection Secret without one means.
pub const DEFAULT_PORT: u16 = 3306;
/// Connections per pool when the ProviderConfig's `connectionPool` does not say.
const POOL_SIZE: usize = 8;
/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The MySQL managed kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MyKind {
    /// `Database`.
    Database,
    /// `User`.
    User,
    /// `Grant`.
    Grant,
}

/// How a ProviderConfig asks for TLS (`spec.tls`, `spec.tlsConfig`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Tls {
    /// `spec.tls`: empty (none), `true`, `skip-verify`, `preferred` or `custom`.
    pub mode: String,
    /// `tlsConfig.caCert` (PEM), for `custom`.
    pub ca: Option<Vec<u8>>,
    /// `tlsConfig.clientCert` and `clientKey` (PEM), for `custom`.
    pub client: Option<(Vec<u8>, Vec<u8>)>,
    /// `tlsConfig.insecureSkipVerify`.
    pub insecure_skip_verify: bool,
}

/// What a MySQL ProviderConfig resolves to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MyServer {
    /// Address and credentials.
    pub server: Server,
    /// TLS.
    pub tls: Tls,
    /// `spec.connectionPool.maxOpenConnections`.
    pub pool_size: usize,
}

/// Reads a `{secretRef: {namespace, name, key}}` of `tlsConfig`. A namespaced ProviderConfig's
/// Secrets are in its own namespace; a cluster-scoped one's name theirs (`default` if not).
async fn tls_secret(kube: &Kube, config: &Value, label: &str, tls_config: &Value, field: &str) -> Result<Option<Vec<u8>>, ExternalError> {
    let Some(reference) = tls_config.pointer(&format!("/{field}/secretRef")).filter(|r| r.get("name").is_some()) else { return Ok(None) };
    let name = reference.get("name").and_then(Value::as_str).unwrap_or_default();
    let namespace = oxplane_runtime::object::namespace(config)
        .or_else(|| reference.get("namespace").and_then(Value::as_str).filter(|n| !n.is_empty()))
        .unwrap_or("default");
    let key = reference.get("key").and_then(Value::as_str).unwrap_or_default();
    let data = connection::read_secret(kube, namespace, name)
        .await
        .map_err(|e| ExternalError::definite(format!("{label}: cannot read tlsConfig.{field} secret {namespace}/{name}: {e}")))?
        .ok_or_else(|| ExternalError::definite(format!("{label}: tlsConfig.{field}: secret {namespace}/{name} not found")))?;
    data.get(key).cloned().map(Some).ok_or_else(|| ExternalError::definite(format!("{label}: tlsConfig.{field}: secret {namespace}/{name} has no key {key:?}")))
}

/// The certificates of the host's trust store, DER-encoded: what `tls: "true"` verifies a
/// server against (as upstream's Go driver uses the system's pool), beside the driver's
/// built-in roots. A store that cannot be read adds nothing, and a certificate rustls cannot
/// use as a root is left out (the driver would refuse every connection over one).
fn system_roots() -> Vec<Vec<u8>> {
    rustls_native_certs::load_native_certs()
        .certs
        .into_iter()
        .filter(|c| rustls::RootCertStore::empty().add(c.clone()).is_ok())
        .map(|c| c.as_ref().to_vec())
        .collect()
}

impl MyServer {
    /// Reads what a ProviderConfig names: its connection Secret and TLS material.
    pub async fn from_config(kube: &Kube, config: &Value) -> Result<MyServer, ExternalError> {
        let server = Server::from_config(kube, config, DEFAULT_PORT, "").await?;
        let tls_config = config.pointer("/spec/tlsConfig").cloned().unwrap_or(Value::Null);
        let mut tls = Tls { mode: server.tls.clone(), ..Default::default() };
        match tls.mode.as_str() {
            "" | "true" | "skip-verify" | "preferred" => {
                if !tls_config.is_null() {
                    return Err(ExternalError::definite(format!("{}: tlsConfig is allowed only when tls is custom", server.config)));
                }
            }
            "custom" => {
                if tls_config.is_null() {
                    return Err(ExternalError::definite(format!("{}: tls custom needs a tlsConfig", server.config)));
                }
                tls.ca = tls_secret(kube, config, &server.config, &tls_config, "caCert").await?;
                let cert = tls_secret(kube, config, &server.config, &tls_config, "clientCert").await?;
                let key = tls_secret(kube, config, &server.config, &tls_config, "clientKey").await?;
                tls.client = match (cert, key) {
                    (Some(cert), Some(key)) => Some((cert, key)),
                    (None, None) => None,
                    _ => return Err(ExternalError::definite(format!("{}: tlsConfig needs both clientCert and clientKey, or neither", server.config))),
                };
                tls.insecure_skip_verify = tls_config.get("insecureSkipVerify").and_then(Value::as_bool).unwrap_or(false);
            }
            other => return Err(ExternalError::definite(format!("{}: unknown tls {other:?} (true, skip-verify, preferred or custom)", server.config))),
        }
        let pool_size = config
            .pointer("/spec/connectionPool/maxOpenConnections")
            .and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok())
            .filter(|n| *n > 0)
            .unwrap_or(POOL_SIZE);
        Ok(MyServer { server, tls, pool_size })
    }

    /// The driver's TLS options, or `None` for a plain connection. `true` verifies the
    /// server's certificate (its chain and its name or address) against the host's trust
    /// store; `skip-verify` and `preferred` verify nothing; `custom` trusts only its `caCert`
    /// (when given), presents its client certificate, and verifies nothing with
    /// `insecureSkipVerify`.
    fn ssl_opts(&self) -> Option<SslOpts> {
        let skip_verification = |opts: SslOpts| opts.with_danger_accept_invalid_certs(true).with_danger_skip_domain_validation(true);
        match self.tls.mode.as_str() {
            "true" => Some(SslOpts::default().with_root_certs(system_roots().into_iter().map(Into::into).collect())),
            "skip-verify" | "preferred" => Some(skip_verification(SslOpts::default())),
            "custom" => {
                let mut opts = SslOpts::default();
                if let Some(ca) = &self.tls.ca {
                    opts = opts.with_root_certs(vec![ca.clone().into()]).with_disable_built_in_roots(true);
                }
                if let Some((cert, key)) = &self.tls.client {
                    opts = opts.with_client_identity(Some(ClientIdentity::new(cert.clone().into(), key.clone().into())));
                }
                if self.tls.insecure_skip_verify {
                    opts = skip_verification(opts);
                }
                Some(opts)
            }
            _ => None,
        }
    }

    fn pool(&self, tls: bool) -> Pool {
        let constraints = PoolConstraints::new(0, self.pool_size).unwrap_or_default();
        let opts = OptsBuilder::default()
            .ip_or_hostname(self.server.endpoint.clone())
            .tcp_port(self.server.port)
            .user(Some(self.server.username.clone()))
            .pass(Some(self.server.password.clone()))
            // Never switch to the server's Unix socket: the ProviderConfig names a TCP endpoint.
            .prefer_socket(false)
            // Quoting assumes backslash escapes (the default); a server configured otherwise
            // is put back to it for the provider's sessions.
            .setup(vec!["SET SESSION sql_mode = REPLACE(@@SESSION.sql_mode, 'NO_BACKSLASH_ESCAPES', '')"])
            .pool_opts(PoolOpts::default().with_constraints(constraints))
            .ssl_opts(if tls { self.ssl_opts() } else { None });
        Pool::new(opts)
    }
}

/// Open pools, by ProviderConfig. A pool whose server, credentials or TLS changed is replaced.
#[derive(Default)]
pub struct Pools {
    pools: Mutex<HashMap<String, (MyServer, Pool)>>,
}

impl Pools {
    fn get(&self, server: &MyServer) -> Option<Pool> {
        let pools = self.pools.lock().unwrap_or_else(|p| p.into_inner());
        pools.get(&server.server.config).filter(|(known, _)| known == server).map(|(_, pool)| pool.clone())
    }

    fn put(&self, server: &MyServer, pool: Pool) {
        let mut pools = self.pools.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, old)) = pools.insert(server.server.config.clone(), (server.clone(), pool)) {
            tokio::spawn(async move {
                let _ = old.disconnect().await;
            });
        }
    }
}

/// Builds clients of one MySQL kind.
pub struct MyConnector {
    /// The kind.
    pub kind: MyKind,
    /// Pools shared by every kind of the provider.
    pub pools: Arc<Pools>,
}

#[async_trait::async_trait]
impl ExternalConnector for MyConnector {
    async fn connect(&self, context: &ConnectContext<'_>, _managed: &Managed) -> Result<Box<dyn ExternalClient>, ExternalError> {
        let config = context.provider_config.ok_or_else(|| ExternalError::definite("no ProviderConfig"))?;
        let server = MyServer::from_config(context.kube, config).await?;
        let my = My { kube: context.kube.clone(), server, pools: self.pools.clone() };
        Ok(match self.kind {
            MyKind::Database => Box::new(database::DatabaseClient { my }),
            MyKind::User => Box::new(user::UserClient { my }),
            MyKind::Grant => Box::new(grant::GrantClient { my }),
        })
    }
}

/// What every MySQL client holds: the API client, the server, the pools.
pub struct My {
    /// The API client (for secrets and references).
    pub kube: Kube,
    /// The server.
    pub server: MyServer,
    /// The pools.
    pub pools: Arc<Pools>,
}

impl My {
    async fn connect_with(&self, pool: &Pool) -> Result<Conn, mysql_async::Error> {
        match tokio::time::timeout(CONNECT_TIMEOUT, pool.get_conn()).await {
            Ok(result) => result,
            Err(_) => Err(mysql_async::Error::Io(mysql_async::IoError::Io(std::io::Error::new(std::io::ErrorKind::TimedOut, "timed out connecting")))),
        }
    }

    /// A connection from the config's pool. With `tls: preferred`, a server that does not
    /// offer TLS is spoken to in plain text (as upstream's driver does).
    pub async fn connect(&self) -> Result<Conn, ExternalError> {
        let pool = match self.pools.get(&self.server) {
            Some(pool) => pool,
            None => {
                let pool = self.server.pool(true);
                self.pools.put(&self.server, pool.clone());
                pool
            }
        };
        match self.connect_with(&pool).await {
            Ok(conn) => Ok(conn),
            Err(mysql_async::Error::Driver(mysql_async::DriverError::NoClientSslFlagFromServer)) if self.server.tls.mode == "preferred" => {
                let plain = self.server.pool(false);
                self.pools.put(&self.server, plain.clone());
                self.connect_with(&plain).await.map_err(|e| self.connect_error(&e))
            }
            Err(e) => Err(self.connect_error(&e)),
        }
    }

    fn connect_error(&self, error: &mysql_async::Error) -> ExternalError {
        ExternalError::definite(self.server.server.redact(&format!("cannot connect to MySQL at {}: {}", self.server.server.describe(), describe(error)), &[]))
    }

    /// A failed statement as an external error: the server and its cause, secrets redacted.
    /// Duplicates are `AlreadyExists`; a lost connection is ambiguous (the statement may have
    /// run).
    pub fn error(&self, what: &str, error: &mysql_async::Error, secrets: &[&str]) -> ExternalError {
        let message = self.server.server.redact(&format!("{what} on MySQL at {}: {}", self.server.server.describe(), describe(error)), secrets);
        match error {
            // ER_DB_CREATE_EXISTS, ER_CANNOT_USER (CREATE USER of an existing account).
            mysql_async::Error::Server(e) if e.code == 1007 || e.code == 1396 => ExternalError::already_exists(message),
            mysql_async::Error::Server(_) | mysql_async::Error::Driver(_) => ExternalError::definite(message),
            _ => ExternalError::ambiguous(message),
        }
    }

    /// Runs statements one after the other on one connection.
    pub async fn execute(&self, what: &str, statements: &[String], secrets: &[&str]) -> Result<(), ExternalError> {
        let mut conn = self.connect().await?;
        for sql in statements {
            conn.query_drop(sql).await.map_err(|e| self.error(what, &e, secrets))?;
        }
        Ok(())
    }

    /// Runs a query with parameters.
    pub async fn query<P: Into<mysql_async::Params> + Send>(&self, what: &str, sql: &str, params: P) -> Result<Vec<mysql_async::Row>, ExternalError> {
        let mut conn = self.connect().await?;
        conn.exec(sql, params).await.map_err(|e| self.error(what, &e, &[]))
    }

    /// Runs a query without parameters (text protocol: `SHOW` statements).
    pub async fn query_text(&self, what: &str, sql: &str) -> Result<Vec<mysql_async::Row>, ExternalError> {
        let mut conn = self.connect().await?;
        conn.query(sql).await.map_err(|e| self.error(what, &e, &[]))
    }
}

/// `SET sql_log_bin = 0` when `binlog: false` asks that a change not reach replicas.
pub fn binlog_prefix(for_provider: &Value) -> Vec<String> {
    if for_provider.get("binlog").and_then(Value::as_bool) == Some(false) { vec!["SET sql_log_bin = 0".to_string()] } else { Vec::new() }
}

/// The cause of a driver error: the server's message with its code, or the connection
/// failure and its sources.
fn describe(error: &mysql_async::Error) -> String {
    if let mysql_async::Error::Server(e) = error {
        return format!("{} (error {}, SQLSTATE {})", e.message, e.code, e.state);
    }
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text.push_str(&format!(": {more}"));
        }
        source = cause.source();
    }
    text
}

/// A quoted identifier, or a definite error naming the field.
pub fn ident(field: &str, name: &str) -> Result<String, ExternalError> {
    quote::mysql_ident(name).map_err(|e| invalid(field, e))
}

/// A quoted literal, or a definite error naming the field.
pub fn literal(field: &str, value: &str) -> Result<String, ExternalError> {
    quote::mysql_literal(value).map_err(|e| invalid(field, e))
}

fn invalid(field: &str, error: QuoteError) -> ExternalError {
    ExternalError::definite(format!("invalid {field}: {error}"))
}

/// An account name (`user@host`, host `%` when not given) split in two.
pub fn split_user_host(name: &str) -> (&str, &str) {
    match name.rsplit_once('@') {
        Some((user, host)) => (user, host),
        None => (name, "%"),
    }
}

/// `'user'@'host'`, quoted.
pub fn account(field: &str, name: &str) -> Result<String, ExternalError> {
    let (user, host) = split_user_host(name);
    if user.is_empty() {
        return Err(ExternalError::definite(format!("invalid {field}: {name:?} has no user name")));
    }
    Ok(format!("{}@{}", literal(field, user)?, literal(field, host)?))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn accounts_are_user_at_host_with_percent_by_default() {
        assert_eq!(split_user_host("app"), ("app", "%"));
        assert_eq!(split_user_host("app@10.0.0.%"), ("app", "10.0.0.%"));
        assert_eq!(split_user_host("me@corp@localhost"), ("me@corp", "localhost"));
        assert_eq!(account("user", "o'x@h").unwrap(), "'o''x'@'h'");
        assert!(account("user", "@h").is_err());
        assert_eq!(binlog_prefix(&serde_json::json!({"binlog": false})), ["SET sql_log_bin = 0"]);
        assert!(binlog_prefix(&serde_json::json!({})).is_empty());
    }
}
