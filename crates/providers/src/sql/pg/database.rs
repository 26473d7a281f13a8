//! `Database`: a PostgreSQL database named by its external name, read from `pg_database`.

use oxplane_runtime::managed::fault;
use oxplane_runtime::managed::{ExternalClient, ExternalCreation, ExternalDelete, ExternalError, ExternalObservation, ExternalUpdate, Managed};
use serde_json::{Value, json};

use super::{Pg, ident, late_init, literal, string};
use crate::sql::refs::{self, Reference};

/// `owner` may be given as `ownerRef` / `ownerSelector` (a Role).
pub const REFERENCES: &[Reference] = &[Reference { field: "owner", kind: "Role", plural: "roles" }];

/// Talks to PostgreSQL about one Database.
pub struct DatabaseClient {
    /// Server, pools, API client.
    pub pg: Pg,
}

/// What `pg_database` says about a database.
#[derive(Debug, PartialEq)]
struct Observed {
    owner: String,
    encoding: String,
    collate: String,
    ctype: String,
    allow_connections: bool,
    connection_limit: i32,
    is_template: bool,
    tablespace: String,
}

fn name(managed: &Managed) -> Result<String, ExternalError> {
    managed.external_name().map(str::to_string).ok_or_else(|| ExternalError::definite("no external name"))
}

impl DatabaseClient {
    async fn read(&self, name: &str) -> Result<Option<Observed>, ExternalError> {
        let rows = self
            .pg
            .query(
                None,
                "cannot read database",
                "SELECT pg_get_userbyid(d.datdba), pg_encoding_to_char(d.encoding)::text, d.datcollate::text, d.datctype::text, \
                 d.datallowconn, d.datconnlimit, d.datistemplate, t.spcname::text \
                 FROM pg_database d JOIN pg_tablespace t ON t.oid = d.dattablespace WHERE d.datname = $1",
                &[&name],
            )
            .await?;
        Ok(rows.first().map(|row| Observed {
            owner: row.get(0),
            encoding: row.get(1),
            collate: row.get(2),
            ctype: row.get(3),
            allow_connections: row.get(4),
            connection_limit: row.get(5),
            is_template: row.get(6),
            tablespace: row.get(7),
        }))
    }
}

/// The fields that differ between the desired `spec.forProvider` and what is there (only
/// fields that can be changed after create, and only those the user set).
fn drift(desired: &Value, observed: &Observed) -> Vec<&'static str> {
    let mut fields = Vec::new();
    if string(desired, "owner").is_some_and(|o| o != observed.owner) {
        fields.push("owner");
    }
    if desired.get("allowConnections").and_then(Value::as_bool).is_some_and(|a| a != observed.allow_connections) {
        fields.push("allowConnections");
    }
    if desired.get("connectionLimit").and_then(Value::as_i64).is_some_and(|l| l != i64::from(observed.connection_limit)) {
        fields.push("connectionLimit");
    }
    if desired.get("isTemplate").and_then(Value::as_bool).is_some_and(|t| t != observed.is_template) {
        fields.push("isTemplate");
    }
    fields
}

/// `CREATE DATABASE` with every option the spec sets.
pub fn create_statement(name: &str, desired: &Value) -> Result<String, ExternalError> {
    let mut sql = format!("CREATE DATABASE {}", ident("database name", name)?);
    if let Some(owner) = string(desired, "owner") {
        sql.push_str(&format!(" OWNER {}", ident("owner", owner)?));
    }
    if let Some(template) = string(desired, "template") {
        sql.push_str(&format!(" TEMPLATE {}", ident("template", template)?));
    }
    if let Some(strategy) = string(desired, "strategy") {
        sql.push_str(&format!(" STRATEGY {}", literal("strategy", strategy)?));
    }
    if let Some(encoding) = string(desired, "encoding") {
        sql.push_str(&format!(" ENCODING {}", literal("encoding", encoding)?));
    }
    if let Some(collate) = string(desired, "lcCollate") {
        sql.push_str(&format!(" LC_COLLATE {}", literal("lcCollate", collate)?));
    }
    if let Some(ctype) = string(desired, "lcCType") {
        sql.push_str(&format!(" LC_CTYPE {}", literal("lcCType", ctype)?));
    }
    if let Some(tablespace) = string(desired, "tablespace") {
        sql.push_str(&format!(" TABLESPACE {}", ident("tablespace", tablespace)?));
    }
    if let Some(allow) = desired.get("allowConnections").and_then(Value::as_bool) {
        sql.push_str(&format!(" ALLOW_CONNECTIONS {allow}"));
    }
    if let Some(limit) = desired.get("connectionLimit").and_then(Value::as_i64) {
        sql.push_str(&format!(" CONNECTION LIMIT {limit}"));
    }
    if let Some(template) = desired.get("isTemplate").and_then(Value::as_bool) {
        sql.push_str(&format!(" IS_TEMPLATE {template}"));
    }
    Ok(sql)
}

#[async_trait::async_trait]
impl ExternalClient for DatabaseClient {
    async fn observe(&mut self, managed: &mut Managed) -> Result<ExternalObservation, ExternalError> {
        let name = name(managed)?;
        let Some(observed) = self.read(&name).await? else { return Ok(ExternalObservation::default()) };
        let (desired, resolved) = refs::resolved_for_provider(&self.pg.kube, managed, REFERENCES).await?;
        let mut late = refs::record_resolved(managed, &desired, &resolved);
        late |= late_init(managed, "owner", json!(observed.owner));
        late |= late_init(managed, "encoding", json!(observed.encoding));
        late |= late_init(managed, "lcCollate", json!(observed.collate));
        late |= late_init(managed, "lcCType", json!(observed.ctype));
        late |= late_init(managed, "allowConnections", json!(observed.allow_connections));
        late |= late_init(managed, "connectionLimit", json!(observed.connection_limit));
        late |= late_init(managed, "isTemplate", json!(observed.is_template));
        late |= late_init(managed, "tablespace", json!(observed.tablespace));
        let drifted = drift(&desired, &observed);
        Ok(super::found(managed, &drifted, late))
    }

    async fn create(&mut self, managed: &mut Managed) -> Result<ExternalCreation, ExternalError> {
        let name = name(managed)?;
        let (desired, _) = refs::resolved_for_provider(&self.pg.kube, managed, REFERENCES).await?;
        let mut desired_for_create = managed.desired_for_create();
        if let (Some(target), Some(source)) = (desired_for_create.as_object_mut(), desired.as_object()) {
            for (key, value) in source {
                target.insert(key.clone(), value.clone());
            }
        }
        let sql = create_statement(&name, &desired_for_create)?;
        self.pg.execute(None, "cannot create database", &sql, &[]).await?;
        // A crash point: the database exists, and the reconciler has not heard so.
        fault::point(fault::CREATE_RESPONSE_UNREAD, managed.uid());
        Ok(ExternalCreation::default())
    }

    async fn update(&mut self, managed: &mut Managed) -> Result<ExternalUpdate, ExternalError> {
        let name = name(managed)?;
        let (desired, _) = refs::resolved_for_provider(&self.pg.kube, managed, REFERENCES).await?;
        let quoted = ident("database name", &name)?;
        let mut statements = Vec::new();
        if let Some(owner) = string(&desired, "owner") {
            statements.push(format!("ALTER DATABASE {quoted} OWNER TO {}", ident("owner", owner)?));
        }
        let mut options = Vec::new();
        if let Some(allow) = desired.get("allowConnections").and_then(Value::as_bool) {
            options.push(format!("ALLOW_CONNECTIONS {allow}"));
        }
        if let Some(limit) = desired.get("connectionLimit").and_then(Value::as_i64) {
            options.push(format!("CONNECTION LIMIT {limit}"));
        }
        if let Some(template) = desired.get("isTemplate").and_then(Value::as_bool) {
            options.push(format!("IS_TEMPLATE {template}"));
        }
        if !options.is_empty() {
            statements.push(format!("ALTER DATABASE {quoted} WITH {}", options.join(" ")));
        }
        if !statements.is_empty() {
            self.pg.execute(None, "cannot update database", &statements.join("; "), &[]).await?;
        }
        Ok(ExternalUpdate::default())
    }

    async fn delete(&mut self, managed: &mut Managed) -> Result<ExternalDelete, ExternalError> {
        let name = name(managed)?;
        // Our own idle connections to the database would keep it "in use".
        self.pg.pools.close_database(&self.pg.server, &name);
        let sql = format!("DROP DATABASE IF EXISTS {}", ident("database name", &name)?);
        self.pg.execute(None, "cannot drop database", &sql, &[]).await?;
        Ok(ExternalDelete {})
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn create_quotes_every_name_and_value() {
        let sql = create_statement("a\"b", &json!({"owner": "o'x", "encoding": "UTF8", "connectionLimit": 5, "allowConnections": false})).unwrap();
        assert_eq!(sql, "CREATE DATABASE \"a\"\"b\" OWNER \"o'x\" ENCODING 'UTF8' ALLOW_CONNECTIONS false CONNECTION LIMIT 5");
        assert!(create_statement("", &json!({})).is_err());
    }

    #[test]
    fn drift_names_only_set_fields_that_differ() {
        let observed = Observed {
            owner: "postgres".into(),
            encoding: "UTF8".into(),
            collate: "C".into(),
            ctype: "C".into(),
            allow_connections: true,
            connection_limit: -1,
            is_template: false,
            tablespace: "pg_default".into(),
        };
        assert!(drift(&json!({}), &observed).is_empty());
        assert_eq!(drift(&json!({"owner": "app", "connectionLimit": 3, "allowConnections": true}), &observed), ["owner", "connectionLimit"]);
    }
}
