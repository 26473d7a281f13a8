//! `Extension`: an extension (`spec.forProvider.extension`) installed in a database
//! (`database`), read from `pg_extension`.

use oxplane_runtime::managed::{ExternalClient, ExternalCreation, ExternalDelete, ExternalError, ExternalObservation, ExternalUpdate, Managed};
use serde_json::Value;

use super::{Pg, ident, literal, string};
use crate::sql::refs::{self, Reference};

/// `database` may be given as a reference.
pub const REFERENCES: &[Reference] = &[Reference { field: "database", kind: "Database", plural: "databases" }];

/// Talks to PostgreSQL about one Extension.
pub struct ExtensionClient {
    /// Server, pools, API client.
    pub pg: Pg,
}

fn extension(desired: &Value) -> Result<String, ExternalError> {
    string(desired, "extension").map(str::to_string).ok_or_else(|| ExternalError::definite("spec.forProvider.extension is required"))
}

#[async_trait::async_trait]
impl ExternalClient for ExtensionClient {
    async fn observe(&mut self, managed: &mut Managed) -> Result<ExternalObservation, ExternalError> {
        let (desired, resolved) = refs::resolved_for_provider(&self.pg.kube, managed, REFERENCES).await?;
        let name = extension(&desired)?;
        let rows = self.pg.query(string(&desired, "database"), "cannot read extension", "SELECT extversion FROM pg_extension WHERE extname = $1", &[&name]).await?;
        let Some(row) = rows.first() else { return Ok(ExternalObservation::default()) };
        let version: String = row.get(0);
        let drifted: &[&str] = if string(&desired, "version").is_some_and(|v| v != version) { &["version"] } else { &[] };
        let late = refs::record_resolved(managed, &desired, &resolved);
        Ok(super::found(managed, drifted, late))
    }

    async fn create(&mut self, managed: &mut Managed) -> Result<ExternalCreation, ExternalError> {
        let (desired, _) = refs::resolved_for_provider(&self.pg.kube, managed, REFERENCES).await?;
        let mut sql = format!("CREATE EXTENSION IF NOT EXISTS {}", ident("extension", &extension(&desired)?)?);
        if let Some(schema) = string(&desired, "schema") {
            sql.push_str(&format!(" SCHEMA {}", ident("schema", schema)?));
        }
        if let Some(version) = string(&desired, "version") {
            sql.push_str(&format!(" VERSION {}", literal("version", version)?));
        }
        self.pg.execute(string(&desired, "database"), "cannot create extension", &sql, &[]).await?;
        Ok(ExternalCreation::default())
    }

    async fn update(&mut self, managed: &mut Managed) -> Result<ExternalUpdate, ExternalError> {
        let (desired, _) = refs::resolved_for_provider(&self.pg.kube, managed, REFERENCES).await?;
        if let Some(version) = string(&desired, "version") {
            let sql = format!("ALTER EXTENSION {} UPDATE TO {}", ident("extension", &extension(&desired)?)?, literal("version", version)?);
            self.pg.execute(string(&desired, "database"), "cannot update extension", &sql, &[]).await?;
        }
        Ok(ExternalUpdate::default())
    }

    async fn delete(&mut self, managed: &mut Managed) -> Result<ExternalDelete, ExternalError> {
        let (desired, _) = refs::resolved_for_provider(&self.pg.kube, managed, REFERENCES).await?;
        let sql = format!("DROP EXTENSION IF EXISTS {}", ident("extension", &extension(&desired)?)?);
        self.pg.execute(string(&desired, "database"), "cannot drop extension", &sql, &[]).await?;
        Ok(ExternalDelete {})
    }
}
