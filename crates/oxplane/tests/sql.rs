//! provider-sql end to end: the real `oxplane` with the built-in provider-sql against a real
//! PostgreSQL and a real MariaDB (one each per test process, see
//! `oxplane_providers::sql::testing`), driven with the real `kubectl`.
//!
//! - Crash suite: the process is killed with SIGKILL at each fault point of a PostgreSQL
//!   Role's and Database's create, and of a MySQL Database's and User's (before and after the
//!   create intent, after the server committed the create but before the reconciler heard of
//!   it, after the create returned, after its outcome was saved, before Ready is written) and
//!   started again: each ends with exactly one object, Ready and Synced, the login's
//!   connection Secret logs in, and nothing fails after one more restart.

use crate::support;

use std::time::{Duration, Instant};

use oxplane_providers::sql::testing::mariadb::{MariaDb, PASSWORD as MARIA_PASSWORD};
use oxplane_providers::sql::testing::{PASSWORD, Postgres};
use oxplane_runtime::managed::fault;
use serde_json::Value;
use support::{Server, is_true};

/// The Secret and ProviderConfig pointing at the shared server.
fn provider_config(port: u16) -> String {
    format!(
        r#"apiVersion: v1
kind: Secret
metadata:
  name: db-conn
  namespace: default
stringData:
  username: postgres
  password: {PASSWORD}
  endpoint: 127.0.0.1
  port: "{port}"
---
apiVersion: postgresql.sql.crossplane.io/v1alpha1
kind: ProviderConfig
metadata:
  name: default
spec:
  sslMode: disable
  credentials:
    source: PostgreSQLConnectionSecret
    connectionSecretRef:
      namespace: default
      name: db-conn
"#
    )
}

/// Runs `check` until it holds, starting the server again whenever it died.
fn eventually_restarting(server: &mut Server, what: &str, limit: Duration, check: impl Fn(&Server) -> bool) {
    let deadline = Instant::now() + limit;
    loop {
        if server.exited() {
            server.spawn();
        }
        if check(server) {
            return;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what} ({} starts)", server.starts());
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn get(server: &Server, what: &str) -> Option<Value> {
    let out = server.kubectl_try(&["get", what, "-o", "json", "--ignore-not-found", "--request-timeout=5s"], "").ok()?;
    (!out.trim().is_empty()).then(|| serde_json::from_str(&out).ok()).flatten()
}

fn ready_and_synced(server: &Server, what: &str) -> bool {
    get(server, what).is_some_and(|o| is_true(&o, "Ready") && is_true(&o, "Synced"))
}

/// The data of a Secret in `default`, decoded.
fn secret_value(server: &Server, name: &str, key: &str) -> Option<String> {
    let secret = get(server, &format!("secret/{name}"))?;
    String::from_utf8(oxplane_runtime::managed::connection::decode_data(&secret).remove(key)?).ok()
}

/// What one crash run creates and checks: the ProviderConfig (with its Secret), two
/// resources created one after the other (YAML, and `kind.group/name`), whether the login's
/// connection Secret logs in yet, and the checks that each object exists exactly once.
struct CrashRun<'a> {
    config: String,
    resources: [(String, String); 2],
    logs_in: &'a dyn Fn(&Server) -> bool,
    check: &'a dyn Fn(&Server),
}

/// Kills the process at each of `points` once for each of the run's two resources, and
/// checks what is left.
fn crash_at_each_with(points: &[&str], run: CrashRun<'_>) {
    let state = tempfile::tempdir().unwrap();
    let mut server = Server::new(&["--provider", "provider-sql"]);
    server.env_always(fault::FAULT_KILL_AT, &points.join(","));
    server.env_always(fault::FAULT_STATE_DIR, state.path().to_str().unwrap());
    server.spawn();
    eventually_restarting(&mut server, "provider-sql to be healthy", Duration::from_secs(90), |s| {
        get(s, "providers.pkg.crossplane.io/provider-sql").is_some_and(|p| is_true(&p, "Healthy"))
    });
    eventually_restarting(&mut server, "the ProviderConfig to be applied", Duration::from_secs(60), |s| s.kubectl_try(&["apply", "-f", "-"], &run.config).is_ok());
    for (yaml, what) in &run.resources {
        eventually_restarting(&mut server, "the create to be accepted", Duration::from_secs(60), |s| s.kubectl_try(&["apply", "-f", "-"], yaml).is_ok());
        eventually_restarting(&mut server, &format!("{what} to be Ready"), Duration::from_secs(180), |s| ready_and_synced(s, what));
    }
    assert_eq!(std::fs::read_dir(state.path()).unwrap().count(), 2 * points.len(), "each fault point fired once per resource");
    eventually_restarting(&mut server, "the connection secret to log in", Duration::from_secs(60), |s| (run.logs_in)(s));
    (run.check)(&server);

    // Nothing more happens after one more (clean) restart: no second create, no error loop.
    server.kill_and_restart();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !run.resources.iter().all(|(_, what)| ready_and_synced(&server, what)) {
        assert!(Instant::now() < deadline, "not Ready and Synced after a clean restart");
        std::thread::sleep(Duration::from_millis(300));
    }
    (run.check)(&server);
    let events = server.kubectl(&["get", "events", "-A", "-o", "json"]);
    let events: Value = serde_json::from_str(&events).unwrap();
    let failures: Vec<&Value> = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["reason"] == "CannotCreateExternalResource" || e["reason"] == "CannotObserveExternalResource")
        .collect();
    assert!(failures.is_empty(), "{failures:?}");
}

/// Kills the process at each of `points` once for a PostgreSQL Role and once for a Database
/// it owns.
fn crash_at_each(run: &str, points: &[&str]) {
    let pg = Postgres::shared();
    let role = format!("{run}-role");
    let database = format!("{run}-db");
    let role_yaml = format!(
        "apiVersion: postgresql.sql.crossplane.io/v1alpha1\nkind: Role\nmetadata:\n  name: {role}\nspec:\n  forProvider:\n    privileges:\n      login: true\n  writeConnectionSecretToRef:\n    name: {role}-conn\n    namespace: default\n"
    );
    let database_yaml = format!("apiVersion: postgresql.sql.crossplane.io/v1alpha1\nkind: Database\nmetadata:\n  name: {database}\nspec:\n  forProvider:\n    owner: {role}\n");
    let logs_in = |s: &Server| secret_value(s, &format!("{role}-conn"), "password").is_some_and(|p| pg.psql_as(&role, &p, &database, "SELECT 1").is_ok());
    let check = |server: &Server| {
        assert_eq!(pg.psql("postgres", &format!("SELECT count(*) FROM pg_roles WHERE rolname = '{role}'")), "1");
        assert_eq!(pg.psql("postgres", &format!("SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = '{database}'")), role);
        let password = secret_value(server, &format!("{role}-conn"), "password").expect("the connection secret holds a password");
        assert_eq!(pg.psql_as(&role, &password, &database, "SELECT current_user").unwrap(), role, "the connection secret logs in");
    };
    crash_at_each_with(
        points,
        CrashRun {
            config: provider_config(pg.port),
            resources: [
                (role_yaml, format!("role.postgresql.sql.crossplane.io/{role}")),
                (database_yaml, format!("database.postgresql.sql.crossplane.io/{database}")),
            ],
            logs_in: &logs_in,
            check: &check,
        },
    );
}

/// Kills the process at each of `points` once for a MySQL Database and once for a User with
/// a generated password (MariaDB).
fn crash_at_each_mysql(run: &str, points: &[&str]) {
    let db = MariaDb::shared();
    let user = format!("{run}-user");
    let database = format!("{run}-db");
    let config = format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: maria-conn\n  namespace: default\nstringData:\n  username: root\n  password: {MARIA_PASSWORD}\n  endpoint: 127.0.0.1\n  port: \"{}\"\n\
         ---\napiVersion: mysql.sql.crossplane.io/v1alpha1\nkind: ProviderConfig\nmetadata:\n  name: default\nspec:\n  credentials:\n    source: MySQLConnectionSecret\n    connectionSecretRef:\n      namespace: default\n      name: maria-conn\n",
        db.port
    );
    let database_yaml = format!("apiVersion: mysql.sql.crossplane.io/v1alpha1\nkind: Database\nmetadata:\n  name: {database}\nspec:\n  forProvider: {{}}\n");
    let user_yaml = format!(
        "apiVersion: mysql.sql.crossplane.io/v1alpha1\nkind: User\nmetadata:\n  name: {user}\nspec:\n  forProvider:\n    resourceOptions:\n      maxUserConnections: 4\n  writeConnectionSecretToRef:\n    name: {user}-conn\n    namespace: default\n"
    );
    let logs_in = |s: &Server| secret_value(s, &format!("{user}-conn"), "password").is_some_and(|p| db.mysql_as(&user, &p, "SELECT 1").is_ok());
    let check = |server: &Server| {
        assert_eq!(db.mysql(&format!("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = '{database}'")), "1");
        assert_eq!(db.mysql(&format!("SELECT COUNT(*), MAX(max_user_connections) FROM mysql.user WHERE User = '{user}'")), "1\t4");
        let password = secret_value(server, &format!("{user}-conn"), "password").expect("the connection secret holds a password");
        assert_eq!(db.mysql_as(&user, &password, "SELECT CURRENT_USER()").unwrap(), format!("{user}@%"), "the connection secret logs in");
    };
    crash_at_each_with(
        points,
        CrashRun {
            config,
            resources: [
                (database_yaml, format!("database.mysql.sql.crossplane.io/{database}")),
                (user_yaml, format!("user.mysql.sql.crossplane.io/{user}")),
            ],
            logs_in: &logs_in,
            check: &check,
        },
    );
}

#[test]
fn sql_creates_survive_a_kill_before_and_after_the_intent_before_the_answer_and_before_ready() {
    crash_at_each("k1", &[fault::BEFORE_CREATE_INTENT, fault::AFTER_CREATE_INTENT, fault::CREATE_RESPONSE_UNREAD, fault::BEFORE_READY_WRITE]);
}

#[test]
fn sql_creates_survive_a_kill_after_the_create_returned() {
    crash_at_each("k2", &[fault::AFTER_EXTERNAL_CREATE]);
}

#[test]
fn sql_creates_survive_a_kill_after_the_outcome_is_saved() {
    crash_at_each("k3", &[fault::AFTER_CREATE_SAVED]);
}

#[test]
fn sql_mysql_creates_survive_a_kill_before_and_after_the_intent_before_the_answer_and_before_ready() {
    crash_at_each_mysql("m1", &[fault::BEFORE_CREATE_INTENT, fault::AFTER_CREATE_INTENT, fault::CREATE_RESPONSE_UNREAD, fault::BEFORE_READY_WRITE]);
}

// Each in a run of its own: after either, the object is found, so the other is never reached.
#[test]
fn sql_mysql_creates_survive_a_kill_after_the_create_returned() {
    crash_at_each_mysql("m2", &[fault::AFTER_EXTERNAL_CREATE]);
}

#[test]
fn sql_mysql_creates_survive_a_kill_after_the_outcome_is_saved() {
    crash_at_each_mysql("m3", &[fault::AFTER_CREATE_SAVED]);
}
