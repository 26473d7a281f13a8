//! `DefaultPrivileges`: what `role` is granted on objects `targetRole` creates later (in
//! `schema`, or anywhere), read from `pg_default_acl`.

use std::collections::BTreeSet;

use oxplane_runtime::managed::{ExternalClient, ExternalCreation, ExternalDelete, ExternalError, ExternalObservation, ExternalUpdate, Managed};
use serde_json::Value;

use super::{Pg, ident, string, strings};
use crate::sql::refs::{self, Reference};

/// `role`, `database` and `schema` may be given as references.
pub const REFERENCES: &[Reference] = &[
    Reference { field: "role", kind: "Role", plural: "roles" },
    Reference { field: "database", kind: "Database", plural: "databases" },
    Reference { field: "schema", kind: "Schema", plural: "schemas" },
];

/// Talks to PostgreSQL about one DefaultPrivileges.
pub struct DefaultPrivilegesClient {
    /// Server, pools, API client.
    pub pg: Pg,
}

/// What the statements need.
struct Plan {
    target_role: String,
    role: String,
    schema: Option<String>,
    /// `pg_default_acl.defaclobjtype`.
    catalog_type: &'static str,
    /// `ON <this>`.
    objects: &'static str,
    privileges: Vec<String>,
    /// What `ALL` means for the object type.
    all: &'static [&'static str],
    grant_option: bool,
    database: Option<String>,
}

fn plan(desired: &Value) -> Result<Plan, ExternalError> {
    let object_type = string(desired, "objectType").unwrap_or_default();
    let (catalog_type, objects, all): (&str, &str, &[&str]) = match object_type {
        "table" => ("r", "TABLES", &["SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER"]),
        "sequence" => ("S", "SEQUENCES", &["USAGE", "SELECT", "UPDATE"]),
        "function" => ("f", "FUNCTIONS", &["EXECUTE"]),
        "type" => ("T", "TYPES", &["USAGE"]),
        "schema" => ("n", "SCHEMAS", &["USAGE", "CREATE"]),
        other => return Err(ExternalError::definite(format!("objectType {other:?} is not one of table, sequence, function, schema, type"))),
    };
    let privileges = strings(desired, "privileges");
    if privileges.is_empty() {
        return Err(ExternalError::definite("privileges not passed"));
    }
    if let Some(bad) = privileges.iter().find(|p| p.is_empty() || !p.split(' ').all(|w| !w.is_empty() && w.chars().all(|c| c.is_ascii_uppercase()))) {
        return Err(ExternalError::definite(format!("invalid privilege {bad:?}")));
    }
    Ok(Plan {
        target_role: string(desired, "targetRole").ok_or_else(|| ExternalError::definite("targetRole is required"))?.to_string(),
        role: string(desired, "role").ok_or_else(|| ExternalError::definite("role not set (set role, roleRef or roleSelector)"))?.to_string(),
        schema: string(desired, "schema").map(str::to_string),
        catalog_type,
        objects,
        privileges,
        all,
        grant_option: string(desired, "withOption") == Some("GRANT"),
        database: string(desired, "database").map(str::to_string),
    })
}

impl Plan {
    fn prefix(&self) -> Result<String, ExternalError> {
        let mut prefix = format!("ALTER DEFAULT PRIVILEGES FOR ROLE {}", ident("targetRole", &self.target_role)?);
        if let Some(schema) = &self.schema {
            prefix.push_str(&format!(" IN SCHEMA {}", ident("schema", schema)?));
        }
        Ok(prefix)
    }

    fn grant(&self) -> Result<String, ExternalError> {
        let prefix = self.prefix()?;
        let role = ident("role", &self.role)?;
        let with = if self.grant_option { " WITH GRANT OPTION" } else { "" };
        Ok(format!(
            "{prefix} REVOKE ALL ON {objects} FROM {role}; {prefix} GRANT {} ON {objects} TO {role}{with}",
            self.privileges.join(", "),
            objects = self.objects
        ))
    }

    fn revoke(&self) -> Result<String, ExternalError> {
        Ok(format!("{} REVOKE ALL ON {} FROM {}", self.prefix()?, self.objects, ident("role", &self.role)?))
    }

    fn wanted(&self) -> BTreeSet<String> {
        let mut wanted = BTreeSet::new();
        for privilege in &self.privileges {
            if privilege == "ALL" || privilege == "ALL PRIVILEGES" {
                wanted.extend(self.all.iter().map(|p| p.to_string()));
            } else {
                wanted.insert(privilege.clone());
            }
        }
        wanted
    }
}

impl DefaultPrivilegesClient {
    async fn plan(&self, managed: &Managed) -> Result<(Plan, Value, Vec<&'static str>), ExternalError> {
        let (desired, resolved) = refs::resolved_for_provider(&self.pg.kube, managed, REFERENCES).await?;
        Ok((plan(&desired)?, desired, resolved))
    }
}

#[async_trait::async_trait]
impl ExternalClient for DefaultPrivilegesClient {
    async fn observe(&mut self, managed: &mut Managed) -> Result<ExternalObservation, ExternalError> {
        let (plan, desired, resolved) = self.plan(managed).await?;
        let rows = self
            .pg
            .query(
                plan.database.as_deref(),
                "cannot read default privileges",
                "SELECT array_agg(DISTINCT a.privilege_type::text), bool_and(a.is_grantable), bool_or(a.is_grantable) \
                 FROM pg_default_acl d CROSS JOIN LATERAL aclexplode(d.defaclacl) a \
                 WHERE d.defaclrole = (SELECT oid FROM pg_roles WHERE rolname = $1) \
                 AND d.defaclnamespace = CASE WHEN $2::text IS NULL THEN 0 ELSE coalesce((SELECT oid FROM pg_namespace WHERE nspname = $2), -1) END \
                 AND d.defaclobjtype::text = $3 AND a.grantee = (SELECT oid FROM pg_roles WHERE rolname = $4)",
                &[&plan.target_role, &plan.schema, &plan.catalog_type, &plan.role],
            )
            .await?;
        let have: Option<Vec<String>> = rows.first().and_then(|r| r.get(0));
        let Some(have) = have else { return Ok(ExternalObservation::default()) };
        let all_grantable: bool = rows.first().and_then(|r| r.get::<_, Option<bool>>(1)).unwrap_or(false);
        let any_grantable: bool = rows.first().and_then(|r| r.get::<_, Option<bool>>(2)).unwrap_or(false);
        let mut drifted = Vec::new();
        if have.into_iter().collect::<BTreeSet<_>>() != plan.wanted() {
            drifted.push("privileges");
        }
        if (plan.grant_option && !all_grantable) || (!plan.grant_option && any_grantable) {
            drifted.push("withOption");
        }
        let late = refs::record_resolved(managed, &desired, &resolved);
        Ok(super::found(managed, &drifted, late))
    }

    async fn create(&mut self, managed: &mut Managed) -> Result<ExternalCreation, ExternalError> {
        let (plan, _, _) = self.plan(managed).await?;
        self.pg.execute(plan.database.as_deref(), "cannot alter default privileges", &plan.grant()?, &[]).await?;
        Ok(ExternalCreation::default())
    }

    async fn update(&mut self, managed: &mut Managed) -> Result<ExternalUpdate, ExternalError> {
        let (plan, _, _) = self.plan(managed).await?;
        self.pg.execute(plan.database.as_deref(), "cannot alter default privileges", &plan.grant()?, &[]).await?;
        Ok(ExternalUpdate::default())
    }

    async fn delete(&mut self, managed: &mut Managed) -> Result<ExternalDelete, ExternalError> {
        let (plan, _, _) = self.plan(managed).await?;
        self.pg.execute(plan.database.as_deref(), "cannot alter default privileges", &plan.revoke()?, &[]).await?;
        Ok(ExternalDelete {})
    }
}
