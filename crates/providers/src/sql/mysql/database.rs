//! `Database`: a MySQL database (schema) named by its external name, read from
//! `information_schema.SCHEMATA`.

use oxplane_runtime::managed::fault;
use oxplane_runtime::managed::{ExternalClient, ExternalCreation, ExternalDelete, ExternalError, ExternalObservation, ExternalUpdate, Managed};
use serde_json::{Value, json};

use super::{My, binlog_prefix, ident, literal};
use crate::sql::pg::{found, late_init, string};

/// Talks to MySQL about one Database.
pub struct DatabaseClient {
    /// Server, pools, API client.
    pub my: My,
}

fn name(managed: &Managed) -> Result<String, ExternalError> {
    managed.external_name().map(str::to_string).ok_or_else(|| ExternalError::definite("no external name"))
}

/// ` CHARACTER SET 'x' COLLATE 'y'` for the options the spec sets.
fn options(desired: &Value) -> Result<String, ExternalError> {
    let mut sql = String::new();
    if let Some(charset) = string(desired, "defaultCharacterSet") {
        sql.push_str(&format!(" CHARACTER SET {}", literal("defaultCharacterSet", charset)?));
    }
    if let Some(collation) = string(desired, "defaultCollation") {
        sql.push_str(&format!(" COLLATE {}", literal("defaultCollation", collation)?));
    }
    Ok(sql)
}

#[async_trait::async_trait]
impl ExternalClient for DatabaseClient {
    async fn observe(&mut self, managed: &mut Managed) -> Result<ExternalObservation, ExternalError> {
        let name = name(managed)?;
        let rows = self
            .my
            .query(
                "cannot read database",
                "SELECT DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?",
                (name.as_str(),),
            )
            .await?;
        let Some(row) = rows.into_iter().next() else { return Ok(ExternalObservation::default()) };
        let (charset, collation): (String, String) = mysql_async::from_row_opt(row).map_err(|e| ExternalError::definite(format!("cannot read database {name}: {e}")))?;
        let desired = managed.for_provider();
        let mut drifted = Vec::new();
        if string(&desired, "defaultCharacterSet").is_some_and(|c| !c.eq_ignore_ascii_case(&charset)) {
            drifted.push("defaultCharacterSet");
        }
        if string(&desired, "defaultCollation").is_some_and(|c| !c.eq_ignore_ascii_case(&collation)) {
            drifted.push("defaultCollation");
        }
        let mut late = late_init(managed, "defaultCharacterSet", json!(charset));
        late |= late_init(managed, "defaultCollation", json!(collation));
        Ok(found(managed, &drifted, late))
    }

    async fn create(&mut self, managed: &mut Managed) -> Result<ExternalCreation, ExternalError> {
        let name = name(managed)?;
        let desired = managed.desired_for_create();
        let mut statements = binlog_prefix(&desired);
        statements.push(format!("CREATE DATABASE {}{}", ident("database name", &name)?, options(&desired)?));
        self.my.execute("cannot create database", &statements, &[]).await?;
        // A crash point: the database exists, and the reconciler has not heard so.
        fault::point(fault::CREATE_RESPONSE_UNREAD, managed.uid());
        Ok(ExternalCreation::default())
    }

    async fn update(&mut self, managed: &mut Managed) -> Result<ExternalUpdate, ExternalError> {
        let name = name(managed)?;
        let desired = managed.for_provider();
        let options = options(&desired)?;
        if !options.is_empty() {
            let mut statements = binlog_prefix(&desired);
            statements.push(format!("ALTER DATABASE {}{options}", ident("database name", &name)?));
            self.my.execute("cannot update database", &statements, &[]).await?;
        }
        Ok(ExternalUpdate::default())
    }

    async fn delete(&mut self, managed: &mut Managed) -> Result<ExternalDelete, ExternalError> {
        let name = name(managed)?;
        let mut statements = binlog_prefix(&managed.for_provider());
        statements.push(format!("DROP DATABASE IF EXISTS {}", ident("database name", &name)?));
        self.my.execute("cannot drop database", &statements, &[]).await?;
        Ok(ExternalDelete {})
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn options_quote_their_values() {
        assert_eq!(options(&json!({"defaultCharacterSet": "utf8mb4", "defaultCollation": "utf8mb4_bin"})).unwrap(), " CHARACTER SET 'utf8mb4' COLLATE 'utf8mb4_bin'");
        assert_eq!(options(&json!({"defaultCollation": "x'; DROP DATABASE y; --"})).unwrap(), " COLLATE 'x''; DROP DATABASE y; --'");
        assert_eq!(options(&json!({})).unwrap(), "");
    }
}
