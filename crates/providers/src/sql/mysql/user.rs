//! `User`: a MySQL account named by its external name, `user@host` (host `%` when not
//! given), read from `mysql.user`. It authenticates by a password (from `passwordSecretRef`,
//! or generated at create and published in the connection Secret) or, instead, by an
//! `authenticationPlugin` (`name`, and an optional `authString`).

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

/// `authenticationPlugin`: the plugin's name, checked to be a plain word of lower-case
/// letters, digits and underscores (it goes into the statement as a bare word: servers take
/// no quoted plugin names), and its `authString`.
fn auth_plugin(desired: &Value) -> Result<Option<(&str, Option<&str>)>, ExternalError> {
    let Some(plugin) = desired.get("authenticationPlugin").filter(|p| !p.is_null()) else { return Ok(None) };
    let name = string(plugin, "name").ok_or_else(|| ExternalError::definite("authenticationPlugin needs a name"))?;
    let mut bytes = name.bytes();
    if !bytes.next().is_some_and(|b| b.is_ascii_lowercase()) || !bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_') {
        return Err(ExternalError::definite(format!("invalid authenticationPlugin.name {name:?}: a plugin name is lower-case letters, digits and underscores")));
    }
    if desired.get("passwordSecretRef").is_some_and(|r| !r.is_null()) {
        return Err(ExternalError::definite("authenticationPlugin and passwordSecretRef are mutually exclusive: an account authenticates by one or the other"));
    }
    Ok(Some((name, string(plugin, "authString"))))
}

/// ` IDENTIFIED ...`: by the plugin (with its authentication string, if any), else by the
/// password. MariaDB and MySQL both read `IDENTIFIED WITH plugin AS 'string'`.
fn identified(plugin: Option<(&str, Option<&str>)>, password: Option<&str>) -> Result<String, ExternalError> {
    Ok(match (plugin, password) {
        (Some((plugin, None)), _) => format!(" IDENTIFIED WITH {plugin}"),
        (Some((plugin, Some(auth))), _) => format!(" IDENTIFIED WITH {plugin} AS {}", literal("authenticationPlugin.authString", auth)?),
        (None, Some(password)) => format!(" IDENTIFIED BY {}", literal("password", password)?),
        (None, None) => String::new(),
    })
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
                "SELECT CAST(max_questions AS SIGNED), CAST(max_updates AS SIGNED), CAST(max_connections AS SIGNED), CAST(max_user_connections AS SIGNED), \
                 plugin, authentication_string FROM mysql.user WHERE User = ? AND Host = ?",
                (user, host),
            )
            .await?;
        let Some(row) = rows.into_iter().next() else { return Ok(ExternalObservation::default()) };
        let (queries, updates, connections, user_connections, plugin, auth_string): (i64, i64, i64, i64, String, String) =
            mysql_async::from_row_opt(row).map_err(|e| ExternalError::definite(format!("cannot read user {name}: {e}")))?;
        let observed = [queries, updates, connections, user_connections];
        let desired = managed.for_provider();
        let mut drifted = Vec::new();
        for (i, (field, _, _)) in RESOURCE_OPTIONS.iter().enumerate() {
            if desired.pointer(&format!("/resourceOptions/{field}")).and_then(Value::as_i64).is_some_and(|n| n != observed[i]) {
                drifted.push(format!("resourceOptions.{field}"));
            }
        }
        let wanted_plugin = auth_plugin(&desired)?;
        if let Some((wanted, auth)) = wanted_plugin
            && (wanted != plugin || auth.is_some_and(|a| a != auth_string))
        {
            drifted.push("authenticationPlugin".into());
        }
        if wanted_plugin.is_none()
            && let Some(reason) = password::due(&self.my.kube, managed).await?
        {
            drifted.push(reason.into());
        }
        let clauses: Vec<String> = RESOURCE_OPTIONS.iter().enumerate().map(|(i, (_, clause, _))| format!("{clause} {}", observed[i])).collect();
        let mut at_provider = managed.object.pointer("/status/atProvider").cloned().unwrap_or_else(|| json!({}));
        at_provider["resourceOptionsAsClauses"] = json!(clauses);
        at_provider["authenticationPlugin"] = json!(plugin);
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
        let password = if plugin.is_none() { Some(password::next(&self.my.kube, managed).await?) } else { None };
        let mut statements = binlog_prefix(&desired);
        statements.push(format!("CREATE USER {}{}{}", account("user name", &name)?, identified(plugin, password.as_deref())?, resource_clauses(&desired)));
        let secrets: Vec<&str> = password.iter().map(String::as_str).collect();
        self.my.execute("cannot create user", &statements, &secrets).await?;
        // A crash point: the user exists, and the reconciler has not heard so.
        fault::point(fault::CREATE_RESPONSE_UNREAD, managed.uid());
        let (user, _) = split_user_host(&name);
        // An account that authenticates by a plugin publishes an empty password, as upstream.
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
        let new_password = if plugin.is_none() && password::due(&self.my.kube, managed).await?.is_some() {
            Some(password::next(&self.my.kube, managed).await?)
        } else {
            None
        };
        if new_password.is_some() {
            statements.push(format!("ALTER USER {quoted}{}", identified(None, new_password.as_deref())?));
        } else if let Some((wanted, auth)) = plugin
            && (auth.is_some() || managed.object.pointer("/status/atProvider/authenticationPlugin").and_then(Value::as_str) != Some(wanted))
        {
            // With its string, setting it again is idempotent; without one, only a plugin that
            // changed is set (it would empty what the plugin keeps).
            statements.push(format!("ALTER USER {quoted}{}", identified(plugin, None)?));
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
    fn statements_quote_names_and_secrets_and_check_plugins() {
        assert_eq!(resource_clauses(&json!({"resourceOptions": {"maxQueriesPerHour": 10, "maxUserConnections": 2}})), " WITH MAX_QUERIES_PER_HOUR 10 MAX_USER_CONNECTIONS 2");
        assert_eq!(resource_clauses(&json!({})), "");
        assert_eq!(identified(None, Some("p'w")).unwrap(), " IDENTIFIED BY 'p''w'");
        assert_eq!(identified(Some(("mysql_native_password", Some("*AB'C"))), None).unwrap(), " IDENTIFIED WITH mysql_native_password AS '*AB''C'");
        assert_eq!(identified(Some(("unix_socket", None)), None).unwrap(), " IDENTIFIED WITH unix_socket");
        let plugin = json!({"authenticationPlugin": {"name": "mysql_native_password", "authString": "*00"}});
        assert_eq!(auth_plugin(&plugin).unwrap(), Some(("mysql_native_password", Some("*00"))));
        assert_eq!(auth_plugin(&json!({"authenticationPlugin": {"name": "ed25519"}})).unwrap(), Some(("ed25519", None)));
        assert_eq!(auth_plugin(&json!({})).unwrap(), None);
        for bad in ["x; DROP USER root", "Upper_case", "_x", "", "a-b"] {
            assert!(auth_plugin(&json!({"authenticationPlugin": {"name": bad}})).is_err(), "{bad}");
        }
        let both = json!({"authenticationPlugin": {"name": "unix_socket"}, "passwordSecretRef": {"name": "s", "key": "k"}});
        assert!(auth_plugin(&both).unwrap_err().message.contains("mutually exclusive"));
    }
}
