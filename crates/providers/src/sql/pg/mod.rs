//! PostgreSQL: a connection pool per ProviderConfig and database, the errors the server gives
//! worded for conditions, and the managed kinds (one file each).

pub mod database;
pub mod default_privileges;
pub mod extension;
pub mod grant;
pub mod role;
pub mod schema;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use oxplane_runtime::client::Kube;
use oxplane_runtime::managed::{ConnectContext, ExternalClient, ExternalConnector, ExternalError, Managed};
use tokio_postgres::NoTls;

use super::quote::{self, QuoteError};
use super::server::Server;

/// The port a connection Secret without one means.
pub const DEFAULT_PORT: u16 = 5432;
/// The database a ProviderConfig without `defaultDatabase` connects to.
pub const DEFAULT_DATABASE: &str = "postgres";
/// Connections per pool (per ProviderConfig and database).
const POOL_SIZE: usize = 8;

/// The PostgreSQL managed kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PgKind {
    /// `Database`.
    Database,
    /// `Role`.
    Role,
    /// `Grant`.
    Grant,
    /// `Extension`.
    Extension,
    /// `Schema`.
    Schema,
    /// `DefaultPrivileges`.
    DefaultPrivileges,
}

/// Open pools, by server and database. A pool whose credentials changed is replaced.
#[derive(Default)]
pub struct Pools {
    pools: Mutex<HashMap<(String, String), (Server, Pool)>>,
}

impl Pools {
    /// The pool of `database` on `server`.
    fn pool(&self, server: &Server, database: &str) -> Result<Pool, ExternalError> {
        let mut pools = self.pools.lock().unwrap_or_else(|p| p.into_inner());
        let key = (server.config.clone(), database.to_string());
        if let Some((known, pool)) = pools.get(&key)
            && known == server
        {
            return Ok(pool.clone());
        }
        let mut config = tokio_postgres::Config::new();
        config
            .host(&server.endpoint)
            .port(server.port)
            .user(&server.username)
            .password(&server.password)
            .dbname(database)
            .application_name("oxplane-provider-sql")
            .connect_timeout(Duration::from_secs(10))
            .ssl_mode(ssl_mode(server)?);
        let manager = Manager::from_config(config, NoTls, ManagerConfig { recycling_method: RecyclingMethod::Fast });
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(Runtime::Tokio1)
            .create_timeout(Some(Duration::from_secs(15)))
            .wait_timeout(Some(Duration::from_secs(30)))
            .build()
            .map_err(|e| ExternalError::definite(format!("cannot make a connection pool for {}: {e}", server.describe())))?;
        pools.insert(key, (server.clone(), pool.clone()));
        Ok(pool)
    }

    /// Closes the pools of `database` on every server (before the database is dropped: an
    /// open connection would make the drop fail).
    pub fn close_database(&self, server: &Server, database: &str) {
        let mut pools = self.pools.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, pool)) = pools.remove(&(server.config.clone(), database.to_string())) {
            pool.close();
        }
    }
}

/// `spec.sslMode` as the driver knows it. The driver speaks TLS only through a TLS
/// connector, which this provider does not have: modes that require TLS are refused with a
/// clear message rather than silently connecting without it.
fn ssl_mode(server: &Server) -> Result<tokio_postgres::config::SslMode, ExternalError> {
    match server.tls.as_str() {
        "disable" => Ok(tokio_postgres::config::SslMode::Disable),
        "prefer" | "allow" => Ok(tokio_postgres::config::SslMode::Prefer),
        "" | "require" | "verify-ca" | "verify-full" => Err(ExternalError::definite(format!(
            "{}: sslMode {:?} needs TLS, which oxplane's provider-sql does not speak yet; set spec.sslMode to disable (or prefer)",
            server.config,
            if server.tls.is_empty() { "verify-full (the default)" } else { server.tls.as_str() }
        ))),
        other => Err(ExternalError::definite(format!("{}: unknown sslMode {other:?}", server.config))),
    }
}

/// Builds clients of one PostgreSQL kind.
pub struct PgConnector {
    /// The kind.
    pub kind: PgKind,
    /// Pools shared by every kind of the provider.
    pub pools: Arc<Pools>,
}

#[async_trait::async_trait]
impl ExternalConnector for PgConnector {
    async fn connect(&self, context: &ConnectContext<'_>, _managed: &Managed) -> Result<Box<dyn ExternalClient>, ExternalError> {
        let config = context.provider_config.ok_or_else(|| ExternalError::definite("no ProviderConfig"))?;
        let server = Server::from_config(context.kube, config, DEFAULT_PORT, DEFAULT_DATABASE).await?;
        let pg = Pg { kube: context.kube.clone(), server, pools: self.pools.clone() };
        Ok(match self.kind {
            PgKind::Database => Box::new(database::DatabaseClient { pg }),
            PgKind::Role => Box::new(role::RoleClient { pg }),
            PgKind::Grant => Box::new(grant::GrantClient { pg }),
            PgKind::Extension => Box::new(extension::ExtensionClient { pg }),
            PgKind::Schema => Box::new(schema::SchemaClient { pg }),
            PgKind::DefaultPrivileges => Box::new(default_privileges::DefaultPrivilegesClient { pg }),
        })
    }
}

/// What every PostgreSQL client holds: the API client, the server, the pools.
pub struct Pg {
    /// The API client (for secrets and references).
    pub kube: Kube,
    /// The server.
    pub server: Server,
    /// The pools.
    pub pools: Arc<Pools>,
}

impl Pg {
    /// A connection to `database` (the config's default database when `None`).
    pub async fn connect(&self, database: Option<&str>) -> Result<Object, ExternalError> {
        let database = database.filter(|d| !d.is_empty()).unwrap_or(&self.server.default_database);
        let pool = self.pools.pool(&self.server, database)?;
        pool.get().await.map_err(|e| {
            let cause = match &e {
                deadpool_postgres::PoolError::Backend(error) => describe(error),
                other => other.to_string(),
            };
            ExternalError::definite(self.server.redact(&format!("cannot connect to PostgreSQL at {} (database {database:?}): {cause}", self.server.describe()), &[]))
        })
    }

    /// A failed statement as an external error: the server and its cause, secrets redacted.
    /// Duplicates are `AlreadyExists`; a lost connection is ambiguous (the statement may have
    /// run).
    pub fn error(&self, what: &str, error: &tokio_postgres::Error, secrets: &[&str]) -> ExternalError {
        let message = self.server.redact(&format!("{what} on PostgreSQL at {}: {}", self.server.describe(), describe(error)), secrets);
        match error.code() {
            Some(code) if *code == tokio_postgres::error::SqlState::DUPLICATE_DATABASE || *code == tokio_postgres::error::SqlState::DUPLICATE_OBJECT || *code == tokio_postgres::error::SqlState::DUPLICATE_SCHEMA => {
                ExternalError::already_exists(message)
            }
            Some(_) => ExternalError::definite(message),
            None => ExternalError::ambiguous(message),
        }
    }

    /// Runs statements (simple-query protocol, in one implicit transaction when several).
    pub async fn execute(&self, database: Option<&str>, what: &str, sql: &str, secrets: &[&str]) -> Result<(), ExternalError> {
        let client = self.connect(database).await?;
        client.batch_execute(sql).await.map_err(|e| self.error(what, &e, secrets))
    }

    /// Runs a query with parameters.
    pub async fn query(
        &self,
        database: Option<&str>,
        what: &str,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<tokio_postgres::Row>, ExternalError> {
        let client = self.connect(database).await?;
        client.query(sql, params).await.map_err(|e| self.error(what, &e, &[]))
    }
}

/// The cause of a driver error: the server's message (with detail and hint) or the
/// connection failure.
fn describe(error: &tokio_postgres::Error) -> String {
    if let Some(db) = error.as_db_error() {
        let mut text = format!("{} (SQLSTATE {})", db.message(), db.code().code());
        if let Some(detail) = db.detail() {
            text.push_str(&format!(": {detail}"));
        }
        if let Some(hint) = db.hint() {
            text.push_str(&format!(" (hint: {hint})"));
        }
        return text;
    }
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

/// A quoted identifier, or a definite error naming the field.
pub fn ident(field: &str, name: &str) -> Result<String, ExternalError> {
    quote::pg_ident(name).map_err(|e| invalid(field, e))
}

/// A quoted literal, or a definite error naming the field.
pub fn literal(field: &str, value: &str) -> Result<String, ExternalError> {
    quote::pg_literal(value).map_err(|e| invalid(field, e))
}

fn invalid(field: &str, error: QuoteError) -> ExternalError {
    ExternalError::definite(format!("invalid {field}: {error}"))
}

/// A string field of `spec.forProvider`.
pub fn string<'a>(for_provider: &'a serde_json::Value, field: &str) -> Option<&'a str> {
    for_provider.get(field).and_then(serde_json::Value::as_str).filter(|s| !s.is_empty())
}

/// The string items of an array field.
pub fn strings(for_provider: &serde_json::Value, field: &str) -> Vec<String> {
    for_provider.get(field).and_then(serde_json::Value::as_array).into_iter().flatten().filter_map(|v| v.as_str().map(str::to_string)).collect()
}

/// Sets a spec field Observe learned from the server when the user left it unset; whether
/// it did.
pub fn late_init(managed: &mut Managed, field: &str, value: serde_json::Value) -> bool {
    let Some(spec) = managed.object.get_mut("spec").and_then(serde_json::Value::as_object_mut) else { return false };
    let for_provider = spec.entry("forProvider").or_insert_with(|| serde_json::Value::Object(Default::default()));
    if for_provider.get(field).is_some_and(|v| !v.is_null()) || value.is_null() {
        return false;
    }
    for_provider[field] = value;
    true
}

/// What Observe reports about a resource it found: `Ready=True`, up to date unless fields
/// drifted (named in the diff, so the drift event says which).
pub fn found<S: AsRef<str>>(managed: &mut Managed, drifted: &[S], late_initialized: bool) -> oxplane_runtime::managed::ExternalObservation {
    managed.set_condition(oxplane_runtime::conditions::Condition::available());
    oxplane_runtime::managed::ExternalObservation {
        resource_exists: true,
        resource_up_to_date: drifted.is_empty(),
        resource_late_initialized: late_initialized,
        diff: drifted.iter().map(AsRef::as_ref).collect::<Vec<_>>().join(", "),
        ..Default::default()
    }
}
