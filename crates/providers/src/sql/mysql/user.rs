//! `User`: a MySQL account named by its external name, `user@host` (host `%` when not
//! given), read from `mysql.user`. Its password comes from `passwordSecretRef`, or is
//! generated at create and published in the connection Secret; `authPlugin` picks the
//! authentication plugin (`usePassword: false` for plugins that take none).

use oxplane_runtime::conditions::Condition;
use oxplane_runtime::managed::fault;
use oxplane_runtime::managed::{ExternalClient, ExternalCreation, ExternalDelete, ExternalError, ExternalObservation, ExternalUpdate, Managed};
use serde_json::{Value, json};

use super::{My, account, binlog_prefix, literal, split_user_host};
use crate::sql::password;
use crate::sql::pg::string;

/// Talks to MySQL about one User.
pub struct UserClient {
    /// Server, pools, API client.
    pub my: My,
}

/// `resourceOptions`: field, clause, `mysql.user` column.
pub const RESOURCE_OPTIONS: &[(&str, &str, &str)] = &[
    ("maxQueriesPerHour", "MAX_QUERIES_PER_HOUR", "max_questions"),
    ("maxUpdatesPerHour", "MAX_UPDATES_PER_HOUR", "max_updates"),
    ("maxConnectionsPerHour", "MAX_CONNECTIONS_PER_HOUR", "max_connections"),
    ("maxUserConnections", "MAX_USER_CONNECTIONS", "max_user_connections"),
];

fn name(managed: &Managed) -> Result<String, ExternalError> {
    managed.external_name().map(str::to_string).ok_or_else(|| ExternalError::definite("no external name"))
}

/// ` WITH MAX_QUERIES_PER_HOUR n ...` for the options the spec sets.
fn resource_clauses(desired: &Value) -> String {
    let clauses: Vec<String> = RESOURCE_OPTIONS
        .iter()
        .filter_map(|(field, clause, _)| desired.pointer(&format!("/resourceOptions/{field}")).and_then(Value::as_i64).map(|n| format!("{clause} {n}")))
        .collect();
    if clauses.is_empty() { String::new() } else { format!(" WITH {}", clauses.join(" ")) }
}

/// `authPlugin`, checked against upstream's pattern (`^([a-z]+_)+[a-z]+$`): it goes into
/// the statement as a bare word.
fn auth_plugin(desired: &Value) -> Result<Option<&str>, ExternalError> {
    let Some(plugin) = string(desired, "authPlugin") else { return Ok(None) };
    let words: Vec<&str> = plugin.split('_').collect();
    if words.len() < 2 || words.iter().any(|w| w.is_empty() || !w.bytes().all(|b| b.is_ascii_lowercase())) {
        return Err(ExternalError::definite(format!("invalid authPlugin {plugin:?}: must match ^([a-z]+_)+[a-z]+$")));
    }
    Ok(Some(plugin))
}

fn uses_password(desired: &Value) -> bool {
    desired.get("usePassword").and_then(Value::as_bool).unwrap_or(true)
}

/// ` IDENTIFIED ...`: by the password, with the plugin when one is named (MariaDB and MySQL
/// spell a plugin with a password differently).
fn identified(plugin: Option<&str>, password: Option<&str>, mariadb: bool) -> Result<String, ExternalError> {
    Ok(match (plugin, password) {
        (None, Some(password)) => format!(" IDENTIFIED BY {}", literal("password", password)?),
        (None, None) => String::new(),
        (Some(plugin), None) => format!(" IDENTIFIED WITH {plugin}"),
        (Some(plugin), Some(password)) if mariadb => format!(" IDENTIFIED VIA {plugin} USING PASSWORD({})", literal("password", password)?),
        (Some(plugin), Some(password)) => format!(" IDENTIFIED WITH {plugin} BY {}", literal("password", password)?),
    })
}

impl UserClient {
    async fn is_mariadb(&self) -> Result<bool, ExternalError> {
        let rows = self.my.query_text("cannot read the server version", "SELECT VERSION()").await?;
        Ok(rows.into_iter().next().and_then(|row| mysql_async::from_row_opt::<(String,)>(row).ok()).is_some_and(|(v,)| v.contains("MariaDB")))
    }
}

#[async_trait::async_trait]
impl ExternalClient for UserClient {
    async fn observe(&mut self, managed: &mut Managed) -> Result<ExternalObservation, ExternalError> {
        let name = name(managed)?;
        let (user, host) = split_user_host(&name);
        let rows = self
            .my
            .query(
                "cannot read user",
                "SELECT max_questions, max_updates, max_connections, max_user_connections, plugin FROM mysql.user WHERE User = ? AND Host = ?",
                (user, host),
            )
            .await?;
        let Some(row) = rows.into_iter().next() else { return Ok(ExternalObservation::default()) };
        let (queries, updates, connections, user_connections, plugin): (i64, i64, i64, i64, String) =
            mysql_async::from_row_opt(row).map_err(|e| ExternalError::definite(format!("cannot read user {name}: {e}")))?;
        let observed = [queries, updates, connections, user_connections];
        let desired = managed.for_provider();
        let mut drifted = Vec::new();
        for (i, (field, _, _)) in RESOURCE_OPTIONS.iter().enumerate() {
            if desired.pointer(&format!("/resourceOptions/{field}")).and_then(Value::as_i64).is_some_and(|n| n != observed[i]) {
                drifted.push(format!("resourceOptions.{field}"));
            }
        }
        if auth_plugin(&desired)?.is_some_and(|p| p != plugin) {
            drifted.push("authPlugin".into());
        }
        if uses_password(&desired)
            && let Some(reason) = password::due(&self.my.kube, managed).await?
        {
            drifted.push(reason.into());
        }
        let clauses: Vec<String> = RESOURCE_OPTIONS.iter().enumerate().map(|(i, (_, clause, _))| format!("{clause} {}", observed[i])).collect();
        let mut at_provider = managed.object.pointer("/status/atProvider").cloned().unwrap_or_else(|| json!({}));
        at_provider["resourceOptionsAsClauses"] = json!(clauses);
        at_provider["authPlugin"] = json!(plugin);
        managed.set_at_provider(at_provider);
        managed.set_condition(Condition::available());
        Ok(ExternalObservation {
            resource_exists: true,
            resource_up_to_date: drifted.is_empty(),
            // No password here: the published one is what tells whether it must be set again.
            connection_details: self.my.server.server.connection_details(user, None),
            diff: drifted.join(", "),
            ..Default::default()
        })
    }

    async fn create(&mut self, managed: &mut Managed) -> Result<ExternalCreation, ExternalError> {
        let name = name(managed)?;
        let desired = managed.desired_for_create();
        let plugin = auth_plugin(&desired)?;
        let password = if uses_password(&desired) { Some(password::next(&self.my.kube, managed).await?) } else { None };
        let mariadb = plugin.is_some() && password.is_some() && self.is_mariadb().await?;
        let mut statements = binlog_prefix(&desired);
        statements.push(format!("CREATE USER {}{}{}", account("user name", &name)?, identified(plugin, password.as_deref(), mariadb)?, resource_clauses(&desired)));
        let secrets: Vec<&str> = password.iter().map(String::as_str).collect();
        self.my.execute("cannot create user", &statements, &secrets).await?;
        // A crash point: the user exists, and the reconciler has not heard so.
        fault::point(fault::CREATE_RESPONSE_UNREAD, managed.uid());
        let (user, _) = split_user_host(&name);
        Ok(ExternalCreation { connection_details: self.my.server.server.connection_details(user, Some(password.as_deref().unwrap_or_default())), ..Default::default() })
    }

    async fn update(&mut self, managed: &mut Managed) -> Result<ExternalUpdate, ExternalError> {
        let name = name(managed)?;
        let desired = managed.for_provider();
        let quoted = account("user name", &name)?;
        let plugin = auth_plugin(&desired)?;
        let mut statements = binlog_prefix(&desired);
        let options = resource_clauses(&desired);
        if !options.is_empty() {
            statements.push(format!("ALTER USER {quoted}{options}"));
        }
        let new_password = if uses_password(&desired) && password::due(&self.my.kube, managed).await?.is_some() {
            Some(password::next(&self.my.kube, managed).await?)
        } else {
            None
        };
        // The plugin is set again with the password (a plugin change needs one, if it uses one).
        let plugin_drifted = plugin.is_some() && managed.object.pointer("/status/atProvider/authPlugin").and_then(Value::as_str) != plugin;
        if new_password.is_some() || plugin_drifted {
            let password = match &new_password {
                Some(password) => Some(password.clone()),
                None if uses_password(&desired) => Some(password::next(&self.my.kube, managed).await?),
                None => None,
            };
            let mariadb = plugin.is_some() && password.is_some() && self.is_mariadb().await?;
            statements.push(format!("ALTER USER {quoted}{}", identified(plugin, password.as_deref(), mariadb)?));
        }
        let secrets: Vec<&str> = new_password.iter().map(String::as_str).collect();
        if statements.iter().any(|s| s.starts_with("ALTER")) {
            self.my.execute("cannot update user", &statements, &secrets).await?;
        }
        let mut update = ExternalUpdate::default();
        if let Some(password) = new_password {
            let (user, _) = split_user_host(&name);
            update.connection_details = self.my.server.server.connection_details(user, Some(&password));
        }
        Ok(update)
    }

    async fn delete(&mut self, managed: &mut Managed) -> Result<ExternalDelete, ExternalError> {
        let name = name(managed)?;
        let mut statements = binlog_prefix(&managed.for_provider());
        statements.push(format!("DROP USER IF EXISTS {}", account("user name", &name)?));
        self.my.execute("cannot drop user", &statements, &[]).await?;
        Ok(ExternalDelete {})
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn statements_quote_names_and_passwords_and_check_plugins() {
        assert_eq!(resource_clauses(&json!({"resourceOptions": {"maxQueriesPerHour": 10, "maxUserConnections": 2}})), " WITH MAX_QUERIES_PER_HOUR 10 MAX_USER_CONNECTIONS 2");
        assert_eq!(resource_clauses(&json!({})), "");
        assert_eq!(identified(None, Some("p'w"), true).unwrap(), " IDENTIFIED BY 'p''w'");
        assert_eq!(identified(Some("mysql_native_password"), Some("pw"), true).unwrap(), " IDENTIFIED VIA mysql_native_password USING PASSWORD('pw')");
        assert_eq!(identified(Some("caching_sha2_password"), Some("pw"), false).unwrap(), " IDENTIFIED WITH caching_sha2_password BY 'pw'");
        assert_eq!(identified(Some("unix_socket"), None, true).unwrap(), " IDENTIFIED WITH unix_socket");
        assert_eq!(auth_plugin(&json!({"authPlugin": "mysql_native_password"})).unwrap(), Some("mysql_native_password"));
        for bad in ["ed25519", "x; DROP USER root", "a__b", "Upper_case"] {
            assert!(auth_plugin(&json!({"authPlugin": bad})).is_err(), "{bad}");
        }
    }
}
