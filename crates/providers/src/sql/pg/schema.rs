//! `Schema`: a schema in a database (`database`), named by its external name and owned by
//! `role`, read from `pg_namespace`.

use oxplane_runtime::managed::{ExternalClient, ExternalCreation, ExternalDelete, ExternalError, ExternalObservation, ExternalUpdate, Managed};
use serde_json::{Value, json};

use super::{Pg, ident, late_init, string};
use crate::sql::refs::{self, Reference};

/// `role` and `database` may be given as references.
pub const REFERENCES: &[Reference] =
    &[Reference { field: "role", kind: "Role", plural: "roles" }, Reference { field: "database", kind: "Database", plural: "databases" }];

/// Talks to PostgreSQL about one Schema.
pub struct SchemaClient {
    /// Server, pools, API client.
    pub pg: Pg,
}

fn name(managed: &Managed) -> Result<String, ExternalError> {
    managed.external_name().map(str::to_string).ok_or_else(|| ExternalError::definite("no external name"))
}

fn revoke_public(quoted: &str) -> String {
    format!("REVOKE ALL ON SCHEMA {quoted} FROM PUBLIC")
}

impl SchemaClient {
    fn statements(&self, name: &str, desired: &Value, create: bool) -> Result<Vec<String>, ExternalError> {
        let quoted = ident("schema name", name)?;
        let mut statements = Vec::new();
        let owner = string(desired, "role").map(|r| ident("role", r)).transpose()?;
        if create {
            let authorization = owner.as_ref().map(|o| format!(" AUTHORIZATION {o}")).unwrap_or_default();
            statements.push(format!("CREATE SCHEMA IF NOT EXISTS {quoted}{authorization}"));
        } else if let Some(owner) = &owner {
            statements.push(format!("ALTER SCHEMA {quoted} OWNER TO {owner}"));
        }
        if desired.get("revokePublicOnSchema").and_then(Value::as_bool) == Some(true) {
            statements.push(revoke_public(&quoted));
        }
        Ok(statements)
    }
}

#[async_trait::async_trait]
impl ExternalClient for SchemaClient {
    async fn observe(&mut self, managed: &mut Managed) -> Result<ExternalObservation, ExternalError> {
        let name = name(managed)?;
        let (desired, resolved) = refs::resolved_for_provider(&self.pg.kube, managed, REFERENCES).await?;
        let rows = self
            .pg
            .query(
                string(&desired, "database"),
                "cannot read schema",
                "SELECT pg_get_userbyid(n.nspowner), EXISTS (SELECT 1 FROM aclexplode(coalesce(n.nspacl, acldefault('n', n.nspowner))) a WHERE a.grantee = 0) \
                 FROM pg_namespace n WHERE n.nspname = $1",
                &[&name],
            )
            .await?;
        let Some(row) = rows.first() else { return Ok(ExternalObservation::default()) };
        let owner: String = row.get(0);
        let public: bool = row.get(1);
        let mut drifted = Vec::new();
        if string(&desired, "role").is_some_and(|r| r != owner) {
            drifted.push("role");
        }
        if desired.get("revokePublicOnSchema").and_then(Value::as_bool) == Some(true) && public {
            drifted.push("revokePublicOnSchema");
        }
        let mut late = refs::record_resolved(managed, &desired, &resolved);
        late |= late_init(managed, "role", json!(owner));
        Ok(super::found(managed, &drifted, late))
    }

    async fn create(&mut self, managed: &mut Managed) -> Result<ExternalCreation, ExternalError> {
        let name = name(managed)?;
        let (desired, _) = refs::resolved_for_provider(&self.pg.kube, managed, REFERENCES).await?;
        let sql = self.statements(&name, &desired, true)?.join("; ");
        self.pg.execute(string(&desired, "database"), "cannot create schema", &sql, &[]).await?;
        Ok(ExternalCreation::default())
    }

    async fn update(&mut self, managed: &mut Managed) -> Result<ExternalUpdate, ExternalError> {
        let name = name(managed)?;
        let (desired, _) = refs::resolved_for_provider(&self.pg.kube, managed, REFERENCES).await?;
        let statements = self.statements(&name, &desired, false)?;
        if !statements.is_empty() {
            self.pg.execute(string(&desired, "database"), "cannot update schema", &statements.join("; "), &[]).await?;
        }
        Ok(ExternalUpdate::default())
    }

    async fn delete(&mut self, managed: &mut Managed) -> Result<ExternalDelete, ExternalError> {
        let name = name(managed)?;
        let (desired, _) = refs::resolved_for_provider(&self.pg.kube, managed, REFERENCES).await?;
        let behavior = if string(&desired, "dropBehavior") == Some("CASCADE") { "CASCADE" } else { "RESTRICT" };
        let sql = format!("DROP SCHEMA IF EXISTS {} {behavior}", ident("schema name", &name)?);
        self.pg.execute(string(&desired, "database"), "cannot drop schema", &sql, &[]).await?;
        Ok(ExternalDelete {})
    }
}
