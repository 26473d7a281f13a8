//! `Grant`: privileges of a role on a database, schema, tables, columns, sequences, routines,
//! foreign data wrappers or foreign servers, or a role's membership in another role. The
//! grant type follows from which fields are set. Observe reads the ACLs (`aclexplode`) and
//! `pg_auth_members`; create and update revoke the listed privileges and grant them again in
//! one transaction (so the grant option is exactly as asked). Like upstream, a Grant owns
//! only the privileges it lists: several Grants may give one role different privileges on
//! one object (with and without the grant option, say) without undoing each other.

use std::collections::{BTreeMap, BTreeSet};

use oxplane_runtime::managed::{ExternalClient, ExternalCreation, ExternalDelete, ExternalError, ExternalObservation, ExternalUpdate, Managed};
use serde_json::Value;

use super::{Pg, ident, string, strings};
use crate::sql::refs::{self, Reference};

/// `role`, `database`, `schema` and `memberOf` may be given as references.
pub const REFERENCES: &[Reference] = &[
    Reference { field: "role", kind: "Role", plural: "roles" },
    Reference { field: "database", kind: "Database", plural: "databases" },
    Reference { field: "schema", kind: "Schema", plural: "schemas" },
    Reference { field: "memberOf", kind: "Role", plural: "roles" },
];

/// What a Grant grants on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GrantType {
    /// Membership of `role` in `memberOf`.
    RoleMember,
    /// On `database`.
    RoleDatabase,
    /// On `schema` in `database`.
    RoleSchema,
    /// On `tables`.
    RoleTable,
    /// On `columns` of `tables`.
    RoleColumn,
    /// On `sequences`.
    RoleSequence,
    /// On `routines`.
    RoleRoutine,
    /// On `foreignServers`.
    RoleForeignServer,
    /// On `foreignDataWrappers`.
    RoleForeignDataWrapper,
}

/// The grant type the set fields make, as provider-sql infers it.
pub fn identify(desired: &Value) -> Result<GrantType, ExternalError> {
    let has = |field: &str| match desired.get(field) {
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(items)) => !items.is_empty(),
        _ => false,
    };
    let fields: BTreeSet<&str> =
        ["memberOf", "database", "schema", "tables", "columns", "sequences", "routines", "foreignServers", "foreignDataWrappers"]
            .into_iter()
            .filter(|f| has(f))
            .collect();
    let is = |want: &[&str]| fields.len() == want.len() && want.iter().all(|w| fields.contains(w));
    let grant_type = if is(&["memberOf"]) {
        GrantType::RoleMember
    } else if is(&["database"]) {
        GrantType::RoleDatabase
    } else if is(&["database", "schema"]) {
        GrantType::RoleSchema
    } else if is(&["database", "schema", "tables"]) {
        GrantType::RoleTable
    } else if is(&["database", "schema", "tables", "columns"]) {
        GrantType::RoleColumn
    } else if is(&["database", "schema", "sequences"]) {
        GrantType::RoleSequence
    } else if is(&["database", "schema", "routines"]) {
        GrantType::RoleRoutine
    } else if is(&["database", "foreignServers"]) {
        GrantType::RoleForeignServer
    } else if is(&["database", "foreignDataWrappers"]) {
        GrantType::RoleForeignDataWrapper
    } else {
        return Err(ExternalError::definite("cannot identify grant type based on passed params"));
    };
    let privileges = strings(desired, "privileges");
    if grant_type == GrantType::RoleMember && !privileges.is_empty() {
        return Err(ExternalError::definite("cannot set privileges in the same grant as memberOf"));
    }
    if grant_type != GrantType::RoleMember && privileges.is_empty() {
        return Err(ExternalError::definite("privileges not passed"));
    }
    if string(desired, "role").is_none() {
        return Err(ExternalError::definite("role not set (set role, roleRef or roleSelector)"));
    }
    Ok(grant_type)
}

/// A privilege as written in the spec: upper-case words (`SELECT`, `ALL PRIVILEGES`). Only
/// such words are put into statements.
fn valid_privilege(privilege: &str) -> bool {
    !privilege.is_empty() && privilege.split(' ').all(|word| !word.is_empty() && word.chars().all(|c| c.is_ascii_uppercase()))
}

/// The privileges the server reports for the spec's list: `ALL` and `TEMP` expanded as the
/// server expands them (`MAINTAIN` only from PostgreSQL 17).
pub fn expand(grant_type: GrantType, privileges: &[String], server_version: i32) -> BTreeSet<String> {
    let all: &[&str] = match grant_type {
        GrantType::RoleDatabase => &["CREATE", "TEMPORARY", "CONNECT"],
        GrantType::RoleSchema => &["CREATE", "USAGE"],
        GrantType::RoleTable if server_version >= 170000 => &["SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER", "MAINTAIN"],
        GrantType::RoleTable => &["SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER"],
        GrantType::RoleColumn => &["SELECT", "INSERT", "UPDATE", "REFERENCES"],
        GrantType::RoleSequence => &["USAGE", "SELECT", "UPDATE"],
        GrantType::RoleRoutine => &["EXECUTE"],
        GrantType::RoleForeignDataWrapper | GrantType::RoleForeignServer => &["USAGE"],
        GrantType::RoleMember => &[],
    };
    let mut expanded = BTreeSet::new();
    for privilege in privileges {
        match privilege.as_str() {
            "ALL" | "ALL PRIVILEGES" => expanded.extend(all.iter().map(|p| p.to_string())),
            "TEMP" if grant_type == GrantType::RoleDatabase => {
                expanded.insert("TEMPORARY".to_string());
            }
            other => {
                expanded.insert(other.to_string());
            }
        }
    }
    expanded
}

/// A Grant resolved into what the statements need.
struct Plan {
    grant_type: GrantType,
    role: String,
    /// The database to connect to (object grants live in their database).
    database: Option<String>,
    privileges: Vec<String>,
    grant_option: bool,
    admin_option: bool,
    /// The objects' keys as Observe reads them back, and their quoted names.
    objects: Vec<(String, String)>,
    /// `ON <this>` (`DATABASE`, `TABLE`, ...); for columns, the column list goes with the
    /// privileges.
    on: &'static str,
    columns: Vec<String>,
    member_of: String,
    revoke_public_on_db: bool,
    schema: String,
}

/// A routine argument type: a name, optionally schema-qualified (what provider-sql accepts).
fn valid_type_name(name: &str) -> bool {
    let part = |p: &str| {
        let mut chars = p.chars();
        chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_') && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
    };
    match name.split_once('.') {
        Some((schema, type_)) => part(schema) && part(type_),
        None => part(name),
    }
}

fn plan(desired: &Value) -> Result<Plan, ExternalError> {
    let grant_type = identify(desired)?;
    let privileges = strings(desired, "privileges");
    if let Some(bad) = privileges.iter().find(|p| !valid_privilege(p)) {
        return Err(ExternalError::definite(format!("invalid privilege {bad:?}: privileges are upper-case words such as SELECT or ALL PRIVILEGES")));
    }
    let role = string(desired, "role").unwrap_or_default().to_string();
    let database = string(desired, "database").map(str::to_string);
    let schema = string(desired, "schema").unwrap_or_default().to_string();
    let qualified = |name: &str| -> Result<String, ExternalError> { Ok(format!("{}.{}", ident("schema", &schema)?, ident("object name", name)?)) };
    let mut columns = Vec::new();
    let (on, objects): (&'static str, Vec<(String, String)>) = match grant_type {
        GrantType::RoleMember => ("", Vec::new()),
        GrantType::RoleDatabase => {
            let db = database.clone().unwrap_or_default();
            ("DATABASE", vec![(db.clone(), ident("database", &db)?)])
        }
        GrantType::RoleSchema => ("SCHEMA", vec![(schema.clone(), ident("schema", &schema)?)]),
        GrantType::RoleTable => ("TABLE", strings(desired, "tables").iter().map(|t| Ok((t.clone(), qualified(t)?))).collect::<Result<_, ExternalError>>()?),
        GrantType::RoleSequence => ("SEQUENCE", strings(desired, "sequences").iter().map(|t| Ok((t.clone(), qualified(t)?))).collect::<Result<_, ExternalError>>()?),
        GrantType::RoleColumn => {
            columns = strings(desired, "columns");
            ("TABLE", strings(desired, "tables").iter().map(|t| Ok((t.clone(), qualified(t)?))).collect::<Result<_, ExternalError>>()?)
        }
        GrantType::RoleRoutine => {
            let mut routines = Vec::new();
            for routine in desired.get("routines").and_then(Value::as_array).into_iter().flatten() {
                let name = routine.get("name").and_then(Value::as_str).unwrap_or_default();
                let args = strings(routine, "args");
                if let Some(bad) = args.iter().find(|a| !valid_type_name(a)) {
                    return Err(ExternalError::definite(format!("invalid argument type {bad:?} of routine {name:?}")));
                }
                let signature = format!("{}({})", qualified(name)?, args.join(", "));
                routines.push((signature.clone(), signature));
            }
            ("ROUTINE", routines)
        }
        GrantType::RoleForeignDataWrapper => (
            "FOREIGN DATA WRAPPER",
            strings(desired, "foreignDataWrappers").iter().map(|n| Ok((n.clone(), ident("foreign data wrapper", n)?))).collect::<Result<_, ExternalError>>()?,
        ),
        GrantType::RoleForeignServer => (
            "FOREIGN SERVER",
            strings(desired, "foreignServers").iter().map(|n| Ok((n.clone(), ident("foreign server", n)?))).collect::<Result<_, ExternalError>>()?,
        ),
    };
    let option = string(desired, "withOption");
    Ok(Plan {
        grant_type,
        role,
        database: if grant_type == GrantType::RoleDatabase { None } else { database },
        privileges,
        grant_option: option == Some("GRANT"),
        admin_option: option == Some("ADMIN"),
        objects,
        on,
        columns,
        member_of: string(desired, "memberOf").unwrap_or_default().to_string(),
        revoke_public_on_db: desired.get("revokePublicOnDb").and_then(Value::as_bool).unwrap_or(false),
        schema,
    })
}

/// The statements Create runs for a Grant whose references are resolved (`bench sql` runs
/// the same ones with no control plane, as its floor).
pub fn create_statements(desired: &Value) -> Result<Vec<String>, ExternalError> {
    plan(desired)?.grant_statements(desired)
}

impl Plan {
    /// The statements that make the role hold exactly the planned privileges.
    fn grant_statements(&self, desired: &Value) -> Result<Vec<String>, ExternalError> {
        let role = ident("role", &self.role)?;
        if self.grant_type == GrantType::RoleMember {
            let mut options = Vec::new();
            if self.admin_option {
                options.push("ADMIN OPTION".to_string());
            }
            if let Some(inherit) = desired.get("withInherit").and_then(Value::as_bool) {
                options.push(format!("INHERIT {}", if inherit { "TRUE" } else { "FALSE" }));
            }
            let with = if options.is_empty() { String::new() } else { format!(" WITH {}", options.join(", ")) };
            return Ok(vec![format!("GRANT {} TO {role}{with}", ident("memberOf", &self.member_of)?)]);
        }
        let with = if self.grant_option { " WITH GRANT OPTION" } else { "" };
        let mut statements = Vec::new();
        if self.grant_type == GrantType::RoleColumn {
            let columns = self.columns.iter().map(|c| ident("column", c)).collect::<Result<Vec<_>, _>>()?.join(", ");
            let privileges = self.privileges.iter().map(|p| format!("{p} ({columns})")).collect::<Vec<_>>().join(", ");
            for (_, table) in &self.objects {
                statements.push(format!("REVOKE {privileges} ON TABLE {table} FROM {role}"));
                statements.push(format!("GRANT {privileges} ON TABLE {table} TO {role}{with}"));
            }
            return Ok(statements);
        }
        let objects = self.objects.iter().map(|(_, quoted)| quoted.as_str()).collect::<Vec<_>>().join(", ");
        statements.push(format!("REVOKE {} ON {} {objects} FROM {role}", self.privileges.join(", "), self.on));
        statements.push(format!("GRANT {} ON {} {objects} TO {role}{with}", self.privileges.join(", "), self.on));
        if self.grant_type == GrantType::RoleDatabase && self.revoke_public_on_db {
            statements.push(format!("REVOKE ALL ON DATABASE {objects} FROM PUBLIC"));
        }
        Ok(statements)
    }

    /// The statements that take the grant back.
    fn revoke_statements(&self) -> Result<Vec<String>, ExternalError> {
        let role = ident("role", &self.role)?;
        if self.grant_type == GrantType::RoleMember {
            return Ok(vec![format!("REVOKE {} FROM {role}", ident("memberOf", &self.member_of)?)]);
        }
        if self.grant_type == GrantType::RoleColumn {
            let columns = self.columns.iter().map(|c| ident("column", c)).collect::<Result<Vec<_>, _>>()?.join(", ");
            let privileges = self.privileges.iter().map(|p| format!("{p} ({columns})")).collect::<Vec<_>>().join(", ");
            return Ok(self.objects.iter().map(|(_, table)| format!("REVOKE {privileges} ON TABLE {table} FROM {role}")).collect());
        }
        let objects = self.objects.iter().map(|(_, quoted)| quoted.as_str()).collect::<Vec<_>>().join(", ");
        Ok(vec![format!("REVOKE {} ON {} {objects} FROM {role}", self.privileges.join(", "), self.on)])
    }

    /// The catalogue query reading the role's privileges on the objects: rows of (object
    /// key, privileges, whether they are grantable). `$1` is the role.
    fn acl_query(&self) -> &'static str {
        match self.grant_type {
            GrantType::RoleDatabase => {
                "SELECT d.datname::text, array_agg(DISTINCT a.privilege_type::text), a.is_grantable \
                 FROM pg_database d CROSS JOIN LATERAL aclexplode(d.datacl) a \
                 WHERE d.datname = ANY($2) AND a.grantee = (SELECT oid FROM pg_roles WHERE rolname = $1) GROUP BY 1, 3"
            }
            GrantType::RoleSchema => {
                "SELECT n.nspname::text, array_agg(DISTINCT a.privilege_type::text), a.is_grantable \
                 FROM pg_namespace n CROSS JOIN LATERAL aclexplode(n.nspacl) a \
                 WHERE n.nspname = ANY($2) AND a.grantee = (SELECT oid FROM pg_roles WHERE rolname = $1) GROUP BY 1, 3"
            }
            GrantType::RoleTable => {
                "SELECT c.relname::text, array_agg(DISTINCT a.privilege_type::text), a.is_grantable \
                 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace CROSS JOIN LATERAL aclexplode(c.relacl) a \
                 WHERE n.nspname = $3 AND c.relname = ANY($2) AND c.relkind IN ('r', 'v', 'm', 'f', 'p') \
                 AND a.grantee = (SELECT oid FROM pg_roles WHERE rolname = $1) GROUP BY 1, 3"
            }
            GrantType::RoleSequence => {
                "SELECT c.relname::text, array_agg(DISTINCT a.privilege_type::text), a.is_grantable \
                 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace CROSS JOIN LATERAL aclexplode(c.relacl) a \
                 WHERE n.nspname = $3 AND c.relname = ANY($2) AND c.relkind = 'S' \
                 AND a.grantee = (SELECT oid FROM pg_roles WHERE rolname = $1) GROUP BY 1, 3"
            }
            GrantType::RoleColumn => {
                "SELECT c.relname::text || '.' || at.attname::text, array_agg(DISTINCT a.privilege_type::text), a.is_grantable \
                 FROM pg_attribute at JOIN pg_class c ON c.oid = at.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace \
                 CROSS JOIN LATERAL aclexplode(at.attacl) a \
                 WHERE n.nspname = $3 AND c.relname = ANY($2) AND at.attname = ANY($4) \
                 AND a.grantee = (SELECT oid FROM pg_roles WHERE rolname = $1) GROUP BY 1, 3"
            }
            GrantType::RoleRoutine => {
                "SELECT s.sig, array_agg(DISTINCT a.privilege_type::text), a.is_grantable \
                 FROM unnest($2::text[]) s(sig) JOIN pg_proc p ON p.oid = to_regprocedure(s.sig) CROSS JOIN LATERAL aclexplode(p.proacl) a \
                 WHERE a.grantee = (SELECT oid FROM pg_roles WHERE rolname = $1) GROUP BY 1, 3"
            }
            GrantType::RoleForeignDataWrapper => {
                "SELECT f.fdwname::text, array_agg(DISTINCT a.privilege_type::text), a.is_grantable \
                 FROM pg_foreign_data_wrapper f CROSS JOIN LATERAL aclexplode(f.fdwacl) a \
                 WHERE f.fdwname = ANY($2) AND a.grantee = (SELECT oid FROM pg_roles WHERE rolname = $1) GROUP BY 1, 3"
            }
            GrantType::RoleForeignServer => {
                "SELECT s.srvname::text, array_agg(DISTINCT a.privilege_type::text), a.is_grantable \
                 FROM pg_foreign_server s CROSS JOIN LATERAL aclexplode(s.srvacl) a \
                 WHERE s.srvname = ANY($2) AND a.grantee = (SELECT oid FROM pg_roles WHERE rolname = $1) GROUP BY 1, 3"
            }
            GrantType::RoleMember => "",
        }
    }

    /// The keys Observe must find, one per object (per table and column for column grants).
    fn expected_keys(&self) -> Vec<String> {
        if self.grant_type == GrantType::RoleColumn {
            return self.objects.iter().flat_map(|(table, _)| self.columns.iter().map(move |c| format!("{table}.{c}"))).collect();
        }
        self.objects.iter().map(|(key, _)| key.clone()).collect()
    }
}

/// Talks to PostgreSQL about one Grant.
pub struct GrantClient {
    /// Server, pools, API client.
    pub pg: Pg,
}

/// What Observe found: whether anything of the grant is there, and what differs.
struct Found {
    exists: bool,
    drifted: Vec<String>,
}

impl GrantClient {
    async fn desired(&self, managed: &Managed) -> Result<(Value, Vec<&'static str>), ExternalError> {
        refs::resolved_for_provider(&self.pg.kube, managed, REFERENCES).await
    }

    async fn find(&self, plan: &Plan) -> Result<Found, ExternalError> {
        if plan.grant_type == GrantType::RoleMember {
            let rows = self
                .pg
                .query(
                    None,
                    "cannot read role membership",
                    "SELECT m.admin_option FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid JOIN pg_roles u ON u.oid = m.member \
                     WHERE g.rolname = $2 AND u.rolname = $1",
                    &[&plan.role, &plan.member_of],
                )
                .await?;
            let Some(row) = rows.first() else { return Ok(Found { exists: false, drifted: Vec::new() }) };
            let admin: bool = row.get(0);
            let drifted = if admin != plan.admin_option { vec!["withOption".to_string()] } else { Vec::new() };
            return Ok(Found { exists: true, drifted });
        }
        let version: i32 = if plan.grant_type == GrantType::RoleTable {
            let rows = self.pg.query(plan.database.as_deref(), "cannot read server version", "SELECT current_setting('server_version_num')::int", &[]).await?;
            rows.first().map(|r| r.get(0)).unwrap_or(0)
        } else {
            0
        };
        let wanted = expand(plan.grant_type, &plan.privileges, version);
        let names: Vec<String> = plan.objects.iter().map(|(key, _)| key.clone()).collect();
        let rows = match plan.grant_type {
            GrantType::RoleTable | GrantType::RoleSequence => {
                self.pg.query(plan.database.as_deref(), "cannot read privileges", plan.acl_query(), &[&plan.role, &names, &plan.schema]).await?
            }
            GrantType::RoleColumn => {
                self.pg
                    .query(plan.database.as_deref(), "cannot read privileges", plan.acl_query(), &[&plan.role, &names, &plan.schema, &plan.columns])
                    .await?
            }
            _ => self.pg.query(plan.database.as_deref(), "cannot read privileges", plan.acl_query(), &[&plan.role, &names]).await?,
        };
        // Privileges by object and grant option.
        let mut found: BTreeMap<(String, bool), BTreeSet<String>> = BTreeMap::new();
        for row in rows {
            let key: String = row.get(0);
            let privileges: Vec<String> = row.get(1);
            found.insert((key, row.get(2)), privileges.into_iter().collect());
        }
        let mut drifted = BTreeSet::new();
        let empty = BTreeSet::new();
        // It exists while any of its privileges is held: other Grants' privileges on the same
        // objects are not this one's (its delete must end once its own are gone).
        let mut exists = false;
        for key in plan.expected_keys() {
            let with_option = found.get(&(key.clone(), plan.grant_option)).unwrap_or(&empty);
            let without = found.get(&(key, !plan.grant_option)).unwrap_or(&empty);
            exists |= !wanted.is_disjoint(with_option) || !wanted.is_disjoint(without);
            if !wanted.is_subset(with_option) {
                // Held, but with the other grant option: the option drifted; else missing.
                drifted.insert(if wanted.is_subset(&with_option.union(without).cloned().collect()) { "withOption" } else { "privileges" }.to_string());
            }
        }
        if plan.grant_type == GrantType::RoleDatabase && plan.revoke_public_on_db {
            let rows = self
                .pg
                .query(
                    None,
                    "cannot read database privileges",
                    "SELECT count(*) FROM pg_database d CROSS JOIN LATERAL aclexplode(coalesce(d.datacl, acldefault('d', d.datdba))) a \
                     WHERE d.datname = $1 AND a.grantee = 0",
                    &[&plan.objects.first().map(|o| o.0.clone()).unwrap_or_default()],
                )
                .await?;
            let public: i64 = rows.first().map(|r| r.get(0)).unwrap_or(0);
            if public > 0 {
                drifted.insert("revokePublicOnDb".to_string());
            }
        }
        Ok(Found { exists, drifted: drifted.into_iter().collect() })
    }
}

#[async_trait::async_trait]
impl ExternalClient for GrantClient {
    async fn observe(&mut self, managed: &mut Managed) -> Result<ExternalObservation, ExternalError> {
        let (desired, resolved) = self.desired(managed).await?;
        let plan = plan(&desired)?;
        let found = self.find(&plan).await?;
        if !found.exists {
            return Ok(ExternalObservation::default());
        }
        let late = refs::record_resolved(managed, &desired, &resolved);
        Ok(super::found(managed, &found.drifted, late))
    }

    async fn create(&mut self, managed: &mut Managed) -> Result<ExternalCreation, ExternalError> {
        let (desired, _) = self.desired(managed).await?;
        let plan = plan(&desired)?;
        let sql = plan.grant_statements(&desired)?.join("; ");
        self.pg.execute(plan.database.as_deref(), "cannot grant", &sql, &[]).await?;
        Ok(ExternalCreation::default())
    }

    async fn update(&mut self, managed: &mut Managed) -> Result<ExternalUpdate, ExternalError> {
        let (desired, _) = self.desired(managed).await?;
        let plan = plan(&desired)?;
        let sql = plan.grant_statements(&desired)?.join("; ");
        self.pg.execute(plan.database.as_deref(), "cannot grant", &sql, &[]).await?;
        Ok(ExternalUpdate::default())
    }

    async fn delete(&mut self, managed: &mut Managed) -> Result<ExternalDelete, ExternalError> {
        let (desired, _) = self.desired(managed).await?;
        let plan = plan(&desired)?;
        let sql = plan.revoke_statements()?.join("; ");
        self.pg.execute(plan.database.as_deref(), "cannot revoke", &sql, &[]).await?;
        Ok(ExternalDelete {})
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    #[test]
    fn the_grant_type_follows_the_fields() {
        let cases = [
            (json!({"role": "r", "memberOf": "p"}), GrantType::RoleMember),
            (json!({"role": "r", "database": "d", "privileges": ["CONNECT"]}), GrantType::RoleDatabase),
            (json!({"role": "r", "database": "d", "schema": "s", "privileges": ["ALL"]}), GrantType::RoleSchema),
            (json!({"role": "r", "database": "d", "schema": "s", "tables": ["t"], "privileges": ["SELECT"]}), GrantType::RoleTable),
            (json!({"role": "r", "database": "d", "schema": "s", "tables": ["t"], "columns": ["c"], "privileges": ["UPDATE"]}), GrantType::RoleColumn),
            (json!({"role": "r", "database": "d", "schema": "s", "sequences": ["q"], "privileges": ["ALL"]}), GrantType::RoleSequence),
            (json!({"role": "r", "database": "d", "schema": "s", "routines": [{"name": "f"}], "privileges": ["ALL"]}), GrantType::RoleRoutine),
            (json!({"role": "r", "database": "d", "foreignServers": ["x"], "privileges": ["USAGE"]}), GrantType::RoleForeignServer),
            (json!({"role": "r", "database": "d", "foreignDataWrappers": ["x"], "privileges": ["USAGE"]}), GrantType::RoleForeignDataWrapper),
        ];
        for (spec, want) in cases {
            assert_eq!(identify(&spec).unwrap(), want, "{spec}");
        }
        assert!(identify(&json!({"role": "r", "memberOf": "p", "privileges": ["ALL"]})).is_err());
        assert!(identify(&json!({"role": "r", "database": "d"})).is_err());
        assert!(identify(&json!({"role": "r", "schema": "s", "privileges": ["ALL"]})).is_err());
    }

    #[test]
    fn all_expands_as_the_server_does() {
        let all = vec!["ALL".to_string()];
        assert_eq!(expand(GrantType::RoleDatabase, &all, 150000).len(), 3);
        assert!(!expand(GrantType::RoleTable, &all, 150000).contains("MAINTAIN"));
        assert!(expand(GrantType::RoleTable, &all, 170000).contains("MAINTAIN"));
        assert_eq!(expand(GrantType::RoleDatabase, &["TEMP".to_string()], 0).into_iter().collect::<Vec<_>>(), ["TEMPORARY"]);
    }

    #[test]
    fn statements_quote_names_and_refuse_odd_privileges() {
        let spec = json!({"role": "r\"x", "database": "d", "schema": "s", "tables": ["t1", "t;2"], "privileges": ["SELECT", "INSERT"], "withOption": "GRANT"});
        let statements = plan(&spec).unwrap().grant_statements(&spec).unwrap();
        assert_eq!(statements, [
            "REVOKE SELECT, INSERT ON TABLE \"s\".\"t1\", \"s\".\"t;2\" FROM \"r\"\"x\"",
            "GRANT SELECT, INSERT ON TABLE \"s\".\"t1\", \"s\".\"t;2\" TO \"r\"\"x\" WITH GRANT OPTION",
        ]);
        let bad = json!({"role": "r", "database": "d", "privileges": ["CONNECT; DROP TABLE x"]});
        assert!(plan(&bad).is_err());
        let bad_args = json!({"role": "r", "database": "d", "schema": "s", "routines": [{"name": "f", "args": ["text); DROP"]}], "privileges": ["ALL"]});
        assert!(plan(&bad_args).is_err());
        let member = json!({"role": "r", "memberOf": "p", "withOption": "ADMIN"});
        assert_eq!(plan(&member).unwrap().grant_statements(&member).unwrap(), ["GRANT \"p\" TO \"r\" WITH ADMIN OPTION"]);
    }
}
