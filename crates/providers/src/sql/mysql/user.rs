//! `User`: a MySQL account named by its external name, `user@host` (host `%` when not
//! given), read from `mysql.user`. It authenticates by a password (from `passwordSecretRef`,
//! or generated at create and published in the connection Secret, and generated again when
//! `passwordRotationTrigger` asks for it) or, instead, by an `authenticationPlugin` (`name`,
//! and an optional `authString`).

use oxplane_runtime::conditions::Condition;
use oxplane_runtime::managed::fault;
use oxplane_runtime::managed::{ExternalClient, ExternalCreation, ExternalDelete, ExternalError, ExternalObservation, ExternalUpdate, Managed};
use serde_json::{Value, json};

use super::{My, account, binlog_prefix, ident, literal, split_user_host};
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

/// Plugins an account gets from `IDENTIFIED BY 'password'`: a user with one of these and no
/// `authenticationPlugin` in its spec authenticates by its password, as asked.
const PASSWORD_PLUGINS: &[&str] = &["mysql_native_password", "caching_sha2_password", "sha256_password"];

/// `authenticationPlugin`: the plugin's name and its `authString`, if any. Refused together
/// with `passwordSecretRef`: an account authenticates by one or the other.
fn auth_plugin(desired: &Value) -> Result<Option<(&str, Option<&str>)>, ExternalError> {
    let Some(plugin) = desired.get("authenticationPlugin").filter(|p| !p.is_null()) else { return Ok(None) };
    let name = string(plugin, "name").ok_or_else(|| ExternalError::definite("authenticationPlugin needs a name"))?;
    if desired.get("passwordSecretRef").is_some_and(|r| !r.is_null()) {
        return Err(ExternalError::definite("authenticationPlugin and passwordSecretRef are mutually exclusive: an account authenticates by one or the other"));
    }
    Ok(Some((name, string(plugin, "authString"))))
}

/// ` IDENTIFIED ...`: by the plugin (with its authentication string, if any), else by the
/// password. MariaDB and MySQL both read `IDENTIFIED WITH plugin AS 'string'`, the plugin's
/// name as an identifier (quoted in backticks, so any name stays a name).
fn identified(plugin: Option<(&str, Option<&str>)>, password: Option<&str>) -> Result<String, ExternalError> {
    Ok(match (plugin, password) {
        (Some((plugin, None)), _) => format!(" IDENTIFIED WITH {}", ident("authenticationPlugin.name", plugin)?),
        (Some((plugin, Some(auth))), _) => {
            format!(" IDENTIFIED WITH {} AS {}", ident("authenticationPlugin.name", plugin)?, literal("authenticationPlugin.authString", auth)?)
        }
        (None, Some(password)) => format!(" IDENTIFIED BY {}", literal("password", password)?),
        (None, None) => String::new(),
    })
}

/// `status.atProvider.authenticationPlugin`, as upstream reports it: the account's plugin
/// (and its authentication string, if any) when the spec names a plugin or the account uses
/// one that is not a password plugin; `None` for an account that authenticates by password.
fn observed_plugin(spec_names_one: bool, plugin: &str, auth_string: &str) -> Option<Value> {
    if plugin.is_empty() || (!spec_names_one && PASSWORD_PLUGINS.contains(&plugin)) {
        return None;
    }
    let mut observed = json!({"name": plugin});
    if !auth_string.is_empty() {
        observed["authString"] = json!(auth_string);
    }
    Some(observed)
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
        let observed_plugin = observed_plugin(wanted_plugin.is_some(), &plugin, &auth_string);
        match wanted_plugin {
            Some((wanted, auth)) if wanted != plugin || auth.is_some_and(|a| a != auth_string) => drifted.push("authenticationPlugin".into()),
            Some(_) => {}
            // An account that should authenticate by its password but has a plugin of another
            // kind (set by hand, or the spec stopped naming one) is given a password again.
            None if observed_plugin.is_some() => drifted.push("authenticationPlugin".into()),
            None => {
                if let Some(reason) = password::due(&self.my.kube, managed).await? {
                    drifted.push(reason.into());
                }
            }
        }
        let clauses: Vec<String> = RESOURCE_OPTIONS.iter().enumerate().map(|(i, (_, clause, _))| format!("{clause} {}", observed[i])).collect();
        let mut at_provider = managed.object.pointer("/status/atProvider").cloned().unwrap_or_else(|| json!({}));
        at_provider["resourceOptionsAsClauses"] = json!(clauses);
        match observed_plugin {
            Some(observed) => at_provider["authenticationPlugin"] = observed,
            None => {
                if let Some(fields) = at_provider.as_object_mut() {
                    fields.remove("authenticationPlugin");
                }
            }
        }
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
        if password.is_some() {
            password::record_change(managed);
        }
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
        // Observe left the account's plugin in the status when it is not a password one.
        let observed_plugin = managed.object.pointer("/status/atProvider/authenticationPlugin/name").and_then(Value::as_str).map(str::to_string);
        let new_password = if plugin.is_none() && (observed_plugin.is_some() || password::due(&self.my.kube, managed).await?.is_some()) {
            Some(password::next(&self.my.kube, managed).await?)
        } else {
            None
        };
        if new_password.is_some() {
            statements.push(format!("ALTER USER {quoted}{}", identified(None, new_password.as_deref())?));
        } else if let Some((wanted, auth)) = plugin
            && (auth.is_some() || observed_plugin.as_deref() != Some(wanted))
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
            password::record_change(managed);
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
        assert_eq!(identified(Some(("mysql_native_password", Some("*AB'C"))), None).unwrap(), " IDENTIFIED WITH `mysql_native_password` AS '*AB''C'");
        assert_eq!(identified(Some(("unix_socket", None)), None).unwrap(), " IDENTIFIED WITH `unix_socket`");
        assert_eq!(identified(Some(("x`; DROP USER root; --", None)), None).unwrap(), " IDENTIFIED WITH `x``; DROP USER root; --`");
        let plugin = json!({"authenticationPlugin": {"name": "mysql_native_password", "authString": "*00"}});
        assert_eq!(auth_plugin(&plugin).unwrap(), Some(("mysql_native_password", Some("*00"))));
        assert_eq!(auth_plugin(&json!({"authenticationPlugin": {"name": "AWSAuthenticationPlugin", "authString": "RDS"}})).unwrap(), Some(("AWSAuthenticationPlugin", Some("RDS"))));
        assert_eq!(auth_plugin(&json!({})).unwrap(), None);
        assert!(auth_plugin(&json!({"authenticationPlugin": {"name": ""}})).is_err());
        assert_eq!(observed_plugin(false, "mysql_native_password", "*AB"), None, "a password account reports no plugin");
        assert_eq!(observed_plugin(true, "mysql_native_password", "*AB"), Some(json!({"name": "mysql_native_password", "authString": "*AB"})));
        assert_eq!(observed_plugin(false, "unix_socket", ""), Some(json!({"name": "unix_socket"})));
        let both = json!({"authenticationPlugin": {"name": "unix_socket"}, "passwordSecretRef": {"name": "s", "key": "k"}});
        assert!(auth_plugin(&both).unwrap_err().message.contains("mutually exclusive"));
    }
}
