//! `Grant`: privileges of a MySQL account (`user`, as `user@host`) on `database`.`table`
//! (each `*` when not given), read back with `SHOW GRANTS`. The account holds exactly the
//! listed privileges there: update grants what is missing and revokes what is extra.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use oxplane_runtime::conditions::Condition;
use oxplane_runtime::managed::{ExternalClient, ExternalCreation, ExternalDelete, ExternalError, ExternalObservation, ExternalUpdate, Managed};
use serde_json::{Value, json};

use super::{My, account, binlog_prefix, ident};
use crate::sql::pg::strings;
use crate::sql::refs::{self, Reference};

/// `user` and `database` may be given as references.
pub const REFERENCES: &[Reference] = &[Reference { field: "user", kind: "User", plural: "users" }, Reference { field: "database", kind: "Database", plural: "databases" }];

/// Upstream's pattern for a privilege: upper-case words, optionally with a column list in
/// backticks. Only such text is put into statements.
static PRIVILEGE: LazyLock<regex::Regex> =
    LazyLock::new(|| regex::Regex::new(r"^([A-Z_ ]+|[A-Z_ ]+ [(]`[^`]+`(, `[^`]+`)*[)])$").unwrap_or_else(|_| unreachable!("a valid pattern")));

/// Talks to MySQL about one Grant.
pub struct GrantClient {
    /// Server, pools, API client.
    pub my: My,
}

/// A Grant resolved into what the statements need.
#[derive(Debug)]
struct Plan {
    /// `'user'@'host'`, quoted.
    account: String,
    /// `` `db`.`table` `` as `SHOW GRANTS` prints it (`*` unquoted).
    target: String,
    /// The privileges, as written.
    privileges: Vec<String>,
}

/// A privilege in one spelling, for comparison: the privilege upper case (`ALL` as
/// `ALL PRIVILEGES`), column lists without backticks or spaces and sorted (`SHOW GRANTS`
/// orders them its own way). Column names keep their case: `REVOKE` needs them as the table
/// spells them.
fn normalize(privilege: &str) -> String {
    let privilege = privilege.trim();
    let (name, columns) = match privilege.split_once('(') {
        Some((name, columns)) => (name, Some(columns)),
        None => (privilege, None),
    };
    let name = name.split_whitespace().collect::<Vec<_>>().join(" ").to_ascii_uppercase();
    let name = if name == "ALL" { "ALL PRIVILEGES".to_string() } else { name };
    match columns {
        Some(columns) => {
            let columns: String = columns.chars().filter(|c| *c != '`' && *c != ' ' && *c != ')').collect();
            let mut columns: Vec<&str> = columns.split(',').filter(|c| !c.is_empty()).collect();
            columns.sort_unstable();
            format!("{name} ({})", columns.join(","))
        }
        None => name,
    }
}

/// A normalized privilege back as statement text, its columns quoted (a privilege read from
/// the server, to revoke it).
fn statement_text(privilege: &str) -> Result<String, ExternalError> {
    let Some((name, columns)) = privilege.split_once(" (") else { return Ok(privilege.to_string()) };
    let columns: Vec<String> = columns.trim_end_matches(')').split(',').map(|c| ident("column", c)).collect::<Result<_, _>>()?;
    Ok(format!("{name} ({})", columns.join(", ")))
}

/// Splits `SELECT, UPDATE (a, b), INSERT` at the commas outside parentheses.
fn split_privileges(text: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut current = String::new();
    for c in text.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    parts.push(current);
    parts.into_iter().map(|p| normalize(&p)).filter(|p| !p.is_empty()).collect()
}

/// The privileges `SHOW GRANTS` lines give the account on `target` (with `GRANT OPTION`
/// when granted with it), or `None` when no line is about `target`.
fn granted(lines: &[String], target: &str) -> Option<BTreeSet<String>> {
    let on = format!(" ON {target} TO ");
    let line = lines.iter().find(|l| l.starts_with("GRANT ") && l.contains(&on))?;
    let end = line.find(&on)?;
    let mut privileges: BTreeSet<String> = split_privileges(&line["GRANT ".len()..end]).into_iter().collect();
    if line.ends_with("WITH GRANT OPTION") {
        privileges.insert("GRANT OPTION".into());
    }
    // USAGE is "no privileges": every account has that line on *.*.
    privileges.remove("USAGE");
    (!privileges.is_empty()).then_some(privileges)
}

fn plan(desired: &Value) -> Result<Plan, ExternalError> {
    let user = desired.get("user").and_then(Value::as_str).filter(|u| !u.is_empty()).ok_or_else(|| ExternalError::definite("user not set (set user, userRef or userSelector)"))?;
    let database = desired.get("database").and_then(Value::as_str).filter(|d| !d.is_empty()).unwrap_or("*");
    let table = desired.get("table").and_then(Value::as_str).filter(|t| !t.is_empty()).unwrap_or("*");
    if database == "*" && table != "*" {
        return Err(ExternalError::definite(format!("table {table:?} needs a database")));
    }
    let part = |field: &str, name: &str| if name == "*" { Ok("*".to_string()) } else { ident(field, name) };
    let privileges = strings(desired, "privileges");
    if privileges.is_empty() {
        return Err(ExternalError::definite("privileges not passed"));
    }
    if let Some(bad) = privileges.iter().find(|p| !PRIVILEGE.is_match(p)) {
        return Err(ExternalError::definite(format!("invalid privilege {bad:?}: privileges are upper-case words, optionally with columns in backticks")));
    }
    Ok(Plan { account: account("user", user)?, target: format!("{}.{}", part("database", database)?, part("table", table)?), privileges })
}

impl Plan {
    fn wanted(&self) -> BTreeSet<String> {
        self.privileges.iter().map(|p| normalize(p)).collect()
    }

    fn grant(&self, privileges: &[String]) -> String {
        format!("GRANT {} ON {} TO {}", privileges.join(", "), self.target, self.account)
    }

    fn revoke(&self, privileges: &[String]) -> String {
        format!("REVOKE {} ON {} FROM {}", privileges.join(", "), self.target, self.account)
    }
}

/// Whether an error means the account or grant is not there: no such grant (1141, 1147), or
/// no such user (1133).
fn is_missing(error: &ExternalError) -> bool {
    ["(error 1141,", "(error 1147,", "(error 1133,"].iter().any(|code| error.message.contains(code))
}

impl GrantClient {
    /// The privileges the account holds on the plan's target.
    async fn read(&self, plan: &Plan) -> Result<Option<BTreeSet<String>>, ExternalError> {
        let rows = match self.my.query_text("cannot read grants", &format!("SHOW GRANTS FOR {}", plan.account)).await {
            Ok(rows) => rows,
            Err(e) if is_missing(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        let lines: Vec<String> = rows.into_iter().filter_map(|row| mysql_async::from_row_opt::<(String,)>(row).ok().map(|(l,)| l)).collect();
        Ok(granted(&lines, &plan.target))
    }
}

#[async_trait::async_trait]
impl ExternalClient for GrantClient {
    async fn observe(&mut self, managed: &mut Managed) -> Result<ExternalObservation, ExternalError> {
        let (desired, resolved) = refs::resolved_for_provider(&self.my.kube, managed, REFERENCES).await?;
        let plan = plan(&desired)?;
        let Some(have) = self.read(&plan).await? else { return Ok(ExternalObservation::default()) };
        let late = refs::record_resolved(managed, &desired, &resolved);
        let mut at_provider = managed.object.pointer("/status/atProvider").cloned().unwrap_or_else(|| json!({}));
        at_provider["privileges"] = json!(have.iter().collect::<Vec<_>>());
        managed.set_at_provider(at_provider);
        managed.set_condition(Condition::available());
        let up_to_date = have == plan.wanted();
        Ok(ExternalObservation {
            resource_exists: true,
            resource_up_to_date: up_to_date,
            resource_late_initialized: late,
            diff: if up_to_date { String::new() } else { "privileges".into() },
            ..Default::default()
        })
    }

    async fn create(&mut self, managed: &mut Managed) -> Result<ExternalCreation, ExternalError> {
        let (desired, _) = refs::resolved_for_provider(&self.my.kube, managed, REFERENCES).await?;
        let plan = plan(&desired)?;
        let mut statements = binlog_prefix(&desired);
        statements.push(plan.grant(&plan.privileges));
        self.my.execute("cannot grant", &statements, &[]).await?;
        Ok(ExternalCreation::default())
    }

    async fn update(&mut self, managed: &mut Managed) -> Result<ExternalUpdate, ExternalError> {
        let (desired, _) = refs::resolved_for_provider(&self.my.kube, managed, REFERENCES).await?;
        let plan = plan(&desired)?;
        let have = self.read(&plan).await?.unwrap_or_default();
        let wanted = plan.wanted();
        let extra: Vec<String> = have.difference(&wanted).map(|p| statement_text(p)).collect::<Result<_, _>>()?;
        let missing: Vec<String> = plan.privileges.iter().filter(|p| !have.contains(&normalize(p))).cloned().collect();
        let mut statements = binlog_prefix(&desired);
        if !extra.is_empty() {
            statements.push(plan.revoke(&extra));
        }
        if !missing.is_empty() {
            statements.push(plan.grant(&missing));
        }
        self.my.execute("cannot update grant", &statements, &[]).await?;
        Ok(ExternalUpdate::default())
    }

    async fn delete(&mut self, managed: &mut Managed) -> Result<ExternalDelete, ExternalError> {
        let (desired, _) = refs::resolved_for_provider(&self.my.kube, managed, REFERENCES).await?;
        let plan = plan(&desired)?;
        let mut statements = binlog_prefix(&desired);
        statements.push(plan.revoke(&plan.privileges));
        match self.my.execute("cannot revoke", &statements, &[]).await {
            Err(e) if !is_missing(&e) => Err(e),
            _ => Ok(ExternalDelete {}),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn show_grants_lines_are_read_for_the_target() {
        let lines = vec![
            "GRANT USAGE ON *.* TO `app`@`%` IDENTIFIED BY PASSWORD '*0000'".to_string(),
            "GRANT SELECT, INSERT, UPDATE (`updated_at`, `status`) ON `shop`.`orders` TO `app`@`%` WITH GRANT OPTION".to_string(),
            "GRANT ALL PRIVILEGES ON `shop`.* TO `app`@`%`".to_string(),
        ];
        let table = granted(&lines, "`shop`.`orders`").unwrap();
        assert_eq!(table.into_iter().collect::<Vec<_>>(), ["GRANT OPTION", "INSERT", "SELECT", "UPDATE (status,updated_at)"]);
        assert_eq!(granted(&lines, "`shop`.*").unwrap().into_iter().collect::<Vec<_>>(), ["ALL PRIVILEGES"]);
        assert!(granted(&lines, "`other`.*").is_none());
        assert!(granted(&lines, "*.*").is_none(), "USAGE alone is no grant");
        assert_eq!(normalize("UPDATE (`status`, `updated_at`)"), "UPDATE (status,updated_at)");
        assert_eq!(normalize("ALL"), "ALL PRIVILEGES");
        assert_eq!(statement_text("UPDATE (status,updated_at)").unwrap(), "UPDATE (`status`, `updated_at`)");
        assert_eq!(statement_text("GRANT OPTION").unwrap(), "GRANT OPTION");
    }

    #[test]
    fn plans_quote_and_check_what_goes_into_statements() {
        let spec = json!({"user": "a'pp@%", "database": "sh`op", "table": "orders", "privileges": ["SELECT", "UPDATE (`status`, `updated_at`)"]});
        let plan = plan(&spec).unwrap();
        assert_eq!(plan.grant(&plan.privileges), "GRANT SELECT, UPDATE (`status`, `updated_at`) ON `sh``op`.`orders` TO 'a''pp'@'%'");
        let all = super::plan(&json!({"user": "app", "privileges": ["ALL"]})).unwrap();
        assert_eq!(all.target, "*.*");
        for bad in ["SELECT; DROP DATABASE x", "select", "UPDATE (status)", "UPDATE (`a`); DROP"] {
            assert!(super::plan(&json!({"user": "app", "privileges": [bad]})).is_err(), "{bad}");
        }
        assert!(super::plan(&json!({"user": "app", "table": "t", "privileges": ["SELECT"]})).is_err());
        assert!(super::plan(&json!({"privileges": ["SELECT"]})).is_err());
    }
}
