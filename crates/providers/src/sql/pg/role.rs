//! `Role`: a PostgreSQL role named by its external name, read from `pg_roles`. Its password
//! comes from `passwordSecretRef`, or is generated at create and published in the connection
//! Secret (and generated again when that Secret lost it, or when `passwordRotationTrigger`
//! asks for a rotation). Passwords never reach a condition, an event or a log.

use oxplane_runtime::conditions::Condition;
use oxplane_runtime::managed::fault;
use oxplane_runtime::managed::{ExternalClient, ExternalCreation, ExternalDelete, ExternalError, ExternalObservation, ExternalUpdate, Managed};
use serde_json::{Value, json};

use super::{Pg, ident, late_init, literal};
use crate::sql::password;

/// Talks to PostgreSQL about one Role.
pub struct RoleClient {
    /// Server, pools, API client.
    pub pg: Pg,
}

/// The privileges: field name, clause when true, clause when false.
pub const PRIVILEGES: &[(&str, &str, &str)] = &[
    ("superUser", "SUPERUSER", "NOSUPERUSER"),
    ("createDb", "CREATEDB", "NOCREATEDB"),
    ("createRole", "CREATEROLE", "NOCREATEROLE"),
    ("login", "LOGIN", "NOLOGIN"),
    ("inherit", "INHERIT", "NOINHERIT"),
    ("replication", "REPLICATION", "NOREPLICATION"),
    ("bypassRls", "BYPASSRLS", "NOBYPASSRLS"),
];

/// What `pg_roles` says about a role.
#[derive(Debug, PartialEq)]
struct Observed {
    /// Privilege flags, in the order of [`PRIVILEGES`].
    privileges: [bool; 7],
    connection_limit: i32,
    /// `rolconfig`: `name=value` entries.
    config: Vec<String>,
}

fn name(managed: &Managed) -> Result<String, ExternalError> {
    managed.external_name().map(str::to_string).ok_or_else(|| ExternalError::definite("no external name"))
}

/// The privilege clauses the spec asks for (only privileges it sets).
pub fn privilege_clauses(desired: &Value) -> Vec<&'static str> {
    PRIVILEGES
        .iter()
        .filter_map(|(field, yes, no)| desired.pointer(&format!("/privileges/{field}")).and_then(Value::as_bool).map(|v| if v { *yes } else { *no }))
        .collect()
}

/// The configuration parameters the spec asks for, as `rolconfig` writes them (`name=value`),
/// or `None` when the spec leaves them alone.
fn desired_config(desired: &Value) -> Option<Vec<String>> {
    let parameters = desired.get("configurationParameters")?.as_array()?;
    Some(
        parameters
            .iter()
            .map(|p| format!("{}={}", p.get("name").and_then(Value::as_str).unwrap_or_default(), p.get("value").and_then(Value::as_str).unwrap_or_default()))
            .collect(),
    )
}

/// Whether `rolconfig` holds exactly the wanted `name=value` entries. A list-valued setting
/// (such as `search_path`) given as one string is stored as one double-quoted element, so
/// that form matches too.
fn config_matches(wanted: &[String], have: &[String]) -> bool {
    let matches = |want: &String, entry: &String| {
        if want == entry {
            return true;
        }
        let (name, value) = want.split_once('=').unwrap_or((want, ""));
        *entry == format!("{name}=\"{}\"", value.replace('"', "\"\""))
    };
    wanted.len() == have.len() && wanted.iter().all(|w| have.iter().any(|h| matches(w, h))) && have.iter().all(|h| wanted.iter().any(|w| matches(w, h)))
}

/// `ALTER ROLE ... SET` statements for the parameters (after a `RESET ALL`).
fn config_statements(quoted: &str, desired: &Value) -> Result<Vec<String>, ExternalError> {
    let mut statements = vec![format!("ALTER ROLE {quoted} RESET ALL")];
    for parameter in desired.get("configurationParameters").and_then(Value::as_array).into_iter().flatten() {
        let name = parameter.get("name").and_then(Value::as_str).unwrap_or_default();
        let value = parameter.get("value").and_then(Value::as_str).unwrap_or_default();
        statements.push(format!("ALTER ROLE {quoted} SET {} = {}", ident("configurationParameters.name", name)?, literal("configurationParameters.value", value)?));
    }
    Ok(statements)
}

impl RoleClient {
    async fn read(&self, name: &str) -> Result<Option<Observed>, ExternalError> {
        let rows = self
            .pg
            .query(
                None,
                "cannot read role",
                "SELECT rolsuper, rolcreatedb, rolcreaterole, rolcanlogin, rolinherit, rolreplication, rolbypassrls, rolconnlimit, \
                 coalesce(rolconfig, '{}')::text[] FROM pg_roles WHERE rolname = $1",
                &[&name],
            )
            .await?;
        Ok(rows.first().map(|row| Observed {
            privileges: [row.get(0), row.get(1), row.get(2), row.get(3), row.get(4), row.get(5), row.get(6)],
            connection_limit: row.get(7),
            config: row.get(8),
        }))
    }
}

#[async_trait::async_trait]
impl ExternalClient for RoleClient {
    async fn observe(&mut self, managed: &mut Managed) -> Result<ExternalObservation, ExternalError> {
        let name = name(managed)?;
        let Some(observed) = self.read(&name).await? else { return Ok(ExternalObservation::default()) };
        let desired = managed.for_provider();
        let mut drifted = Vec::new();
        let mut late = false;
        for (i, (field, _, _)) in PRIVILEGES.iter().enumerate() {
            match desired.pointer(&format!("/privileges/{field}")).and_then(Value::as_bool) {
                Some(want) if want != observed.privileges[i] => drifted.push(format!("privileges.{field}")),
                Some(_) => {}
                None => {
                    if let Some(spec) = managed.object.get_mut("spec").and_then(Value::as_object_mut) {
                        let for_provider = spec.entry("forProvider").or_insert_with(|| json!({}));
                        if !for_provider.get("privileges").is_some_and(Value::is_object) {
                            for_provider["privileges"] = json!({});
                        }
                        for_provider["privileges"][*field] = json!(observed.privileges[i]);
                        late = true;
                    }
                }
            }
        }
        match desired.get("connectionLimit").and_then(Value::as_i64) {
            Some(limit) if limit != i64::from(observed.connection_limit) => drifted.push("connectionLimit".into()),
            Some(_) => {}
            None => late |= late_init(managed, "connectionLimit", json!(observed.connection_limit)),
        }
        if let Some(wanted) = desired_config(&desired)
            && !config_matches(&wanted, &observed.config)
        {
            drifted.push("configurationParameters".into());
        }
        if let Some(reason) = password::due(&self.pg.kube, managed).await? {
            drifted.push(reason.into());
        }
        let clauses: Vec<&str> = PRIVILEGES.iter().enumerate().map(|(i, (_, yes, no))| if observed.privileges[i] { *yes } else { *no }).collect();
        let parameters: Vec<Value> = observed
            .config
            .iter()
            .map(|entry| {
                let (name, value) = entry.split_once('=').unwrap_or((entry, ""));
                json!({"name": name, "value": value})
            })
            .collect();
        let mut at_provider = managed.object.pointer("/status/atProvider").cloned().unwrap_or_else(|| json!({}));
        at_provider["privilegesAsClauses"] = json!(clauses);
        at_provider["configurationParameters"] = json!(parameters);
        managed.set_at_provider(at_provider);
        managed.set_condition(Condition::available());
        Ok(ExternalObservation {
            resource_exists: true,
            resource_up_to_date: drifted.is_empty(),
            resource_late_initialized: late,
            // No password here: the published one is what tells whether it must be set again
            // (create and update publish it once set).
            connection_details: self.pg.server.connection_details(&name, None),
            diff: drifted.join(", "),
            ..Default::default()
        })
    }

    async fn create(&mut self, managed: &mut Managed) -> Result<ExternalCreation, ExternalError> {
        let name = name(managed)?;
        let desired = managed.desired_for_create();
        let quoted = ident("role name", &name)?;
        let password = password::next(&self.pg.kube, managed).await?;
        let mut create = format!("CREATE ROLE {quoted}");
        let clauses = privilege_clauses(&desired);
        if !clauses.is_empty() {
            create.push_str(&format!(" WITH {}", clauses.join(" ")));
        }
        if let Some(limit) = desired.get("connectionLimit").and_then(Value::as_i64) {
            create.push_str(&format!(" CONNECTION LIMIT {limit}"));
        }
        create.push_str(&format!(" PASSWORD {}", literal("password", &password)?));
        let mut statements = vec![create];
        if desired.get("configurationParameters").is_some() {
            statements.extend(config_statements(&quoted, &desired)?);
        }
        self.pg.execute(None, "cannot create role", &statements.join("; "), &[&password]).await?;
        // A crash point: the role exists, and the reconciler has not heard so.
        fault::point(fault::CREATE_RESPONSE_UNREAD, managed.uid());
        password::record_change(managed);
        Ok(ExternalCreation { connection_details: self.pg.server.connection_details(&name, Some(&password)), ..Default::default() })
    }

    async fn update(&mut self, managed: &mut Managed) -> Result<ExternalUpdate, ExternalError> {
        let name = name(managed)?;
        let desired = managed.for_provider();
        let quoted = ident("role name", &name)?;
        let mut statements = Vec::new();
        let clauses = privilege_clauses(&desired);
        let limit = desired.get("connectionLimit").and_then(Value::as_i64);
        if !clauses.is_empty() || limit.is_some() {
            let mut alter = format!("ALTER ROLE {quoted} WITH {}", clauses.join(" "));
            if let Some(limit) = limit {
                alter.push_str(&format!(" CONNECTION LIMIT {limit}"));
            }
            statements.push(alter);
        }
        if desired.get("configurationParameters").is_some() {
            statements.extend(config_statements(&quoted, &desired)?);
        }
        let new_password = match password::due(&self.pg.kube, managed).await? {
            Some(_) => Some(password::next(&self.pg.kube, managed).await?),
            None => None,
        };
        if let Some(password) = &new_password {
            statements.push(format!("ALTER ROLE {quoted} PASSWORD {}", literal("password", password)?));
        }
        let secrets: Vec<&str> = new_password.iter().map(String::as_str).collect();
        if !statements.is_empty() {
            self.pg.execute(None, "cannot update role", &statements.join("; "), &secrets).await?;
        }
        let mut update = ExternalUpdate::default();
        if let Some(password) = new_password {
            password::record_change(managed);
            update.connection_details = self.pg.server.connection_details(&name, Some(&password));
        }
        Ok(update)
    }

    async fn delete(&mut self, managed: &mut Managed) -> Result<ExternalDelete, ExternalError> {
        let name = name(managed)?;
        let sql = format!("DROP ROLE IF EXISTS {}", ident("role name", &name)?);
        self.pg.execute(None, "cannot drop role", &sql, &[]).await?;
        Ok(ExternalDelete {})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clauses_follow_the_privileges_set() {
        assert_eq!(privilege_clauses(&json!({"privileges": {"login": true, "createDb": false}})), ["NOCREATEDB", "LOGIN"]);
        assert!(privilege_clauses(&json!({})).is_empty());
        assert_eq!(desired_config(&json!({"configurationParameters": [{"name": "search_path", "value": "\"$user\",public"}]})), Some(vec!["search_path=\"$user\",public".to_string()]));
        assert_eq!(desired_config(&json!({})), None);
        let wanted = vec!["search_path=\"$user\",public".to_string(), "statement_timeout=123".to_string()];
        let stored = vec!["statement_timeout=123".to_string(), "search_path=\"\"\"$user\"\",public\"".to_string()];
        assert!(config_matches(&wanted, &stored));
        assert!(!config_matches(&wanted, &stored[..1]));
    }
}
