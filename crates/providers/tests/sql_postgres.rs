//! provider-sql against a real PostgreSQL server (one per test binary, see
//! `support/postgres.rs`): every kind is created as declared, read back with `psql`, drift
//! made by hand is reverted at the poll interval with an event naming the fields, connection
//! Secrets log in, errors name the server and the cause and never the password, names that
//! look like SQL stay names, and deletes remove what was made.

use crate::support;

use std::time::Duration;

use oxplane_providers::sql::SqlProvider;
use oxplane_runtime::Runtime;
use oxplane_runtime::conditions;
use oxplane_runtime::kinds::Kind;
use oxplane_runtime::managed::connection;
use oxplane_runtime::provider::ProviderHandle;
use serde_json::{Value, json};
use oxplane_providers::sql::testing::{PASSWORD, Postgres};
use support::{events_of, install, start, wait_for, wait_object};

const PACKAGE: &str = "xpkg.crossplane.io/crossplane-contrib/provider-sql:v0.13.0";
const GROUP: &str = "postgresql.sql.crossplane.io";

fn kind(kind: &str, plural: &str) -> Kind {
    Kind::new(GROUP, "v1alpha1", kind, plural, false)
}

fn secret_kind() -> Kind {
    Kind::new("", "v1", "Secret", "secrets", true)
}

fn ready_and_synced(o: &Value) -> bool {
    conditions::is_true(o, "Ready") && conditions::is_true(o, "Synced")
}

/// The provider (polling every second) and a ProviderConfig `name` for the shared server,
/// logging in with `password` at `port`.
async fn provider(runtime: &Runtime) -> ProviderHandle {
    install(runtime, &SqlProvider { poll_interval: Duration::from_secs(1) }, PACKAGE).await
}

async fn config(runtime: &Runtime, name: &str, port: u16, password: &str) {
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": format!("{name}-conn"), "namespace": "default"},
        "stringData": {"username": "postgres", "password": password, "endpoint": "127.0.0.1", "port": port.to_string()}
    });
    runtime.kube.create(&secret_kind(), &secret).await.unwrap();
    let config = json!({
        "apiVersion": format!("{GROUP}/v1alpha1"), "kind": "ProviderConfig",
        "metadata": {"name": name},
        "spec": {
            "sslMode": "disable",
            "credentials": {"source": "PostgreSQLConnectionSecret", "connectionSecretRef": {"namespace": "default", "name": format!("{name}-conn")}}
        }
    });
    runtime.kube.create(&kind("ProviderConfig", "providerconfigs"), &config).await.unwrap();
}

async fn apply(runtime: &Runtime, object: Value) {
    let k = object.get("kind").and_then(Value::as_str).unwrap().to_string();
    let plural = match k.as_str() {
        "DefaultPrivileges" => "defaultprivileges".to_string(),
        other => format!("{}s", other.to_lowercase()),
    };
    runtime.kube.create(&kind(&k, &plural), &object).await.unwrap();
}

fn mr(kind: &str, name: &str, for_provider: Value) -> Value {
    json!({"apiVersion": format!("{GROUP}/v1alpha1"), "kind": kind, "metadata": {"name": name}, "spec": {"forProvider": for_provider}})
}

async fn ready(runtime: &Runtime, k: &str, plural: &str, name: &str) -> Value {
    wait_object(runtime, &kind(k, plural), None, name, &format!("{k} {name} Ready and Synced"), ready_and_synced).await
}

/// Polls `psql` until `sql` answers `want`.
async fn wait_sql(pg: &Postgres, database: &str, sql: &str, want: &str) {
    wait_for(&format!("{sql:?} to answer {want:?}"), async || (pg.psql(database, sql) == want).then_some(())).await;
}

async fn delete(runtime: &Runtime, k: &str, plural: &str, name: &str) {
    runtime.kube.delete(&kind(k, plural), None, name, &Default::default()).await.unwrap();
    wait_for(&format!("{k} {name} to be gone"), async || runtime.kube.get(&kind(k, plural), None, name).await.unwrap().is_none().then_some(())).await;
}

async fn secret(runtime: &Runtime, name: &str) -> std::collections::BTreeMap<String, Vec<u8>> {
    wait_for("the connection secret", async || connection::read_secret(&runtime.kube, "default", name).await.unwrap()).await
}

#[tokio::test]
async fn databases_roles_and_grants_are_made_kept_and_removed() {
    let pg = Postgres::shared();
    let (_server, runtime) = start().await;
    let _provider = provider(&runtime).await;
    config(&runtime, "default", pg.port, PASSWORD).await;

    apply(&runtime, mr("Role", "l-owner", json!({"privileges": {"login": true, "createDb": true}}))).await;
    let mut app = mr("Role", "l-app", json!({
        "connectionLimit": 5,
        "privileges": {"login": true},
        "configurationParameters": [{"name": "statement_timeout", "value": "123"}, {"name": "search_path", "value": "\"$user\",public"}]
    }));
    app["spec"]["writeConnectionSecretToRef"] = json!({"name": "l-app-conn", "namespace": "default"});
    apply(&runtime, app).await;
    apply(&runtime, mr("Database", "l-db", json!({"ownerRef": {"name": "l-owner"}, "connectionLimit": 20}))).await;
    apply(&runtime, mr("Grant", "l-grant", json!({
        "privileges": ["CONNECT", "TEMPORARY"], "withOption": "GRANT",
        "roleRef": {"name": "l-app"}, "databaseRef": {"name": "l-db"}
    })))
    .await;

    let role = ready(&runtime, "Role", "roles", "l-app").await;
    assert_eq!(role.pointer("/status/atProvider/privilegesAsClauses/3"), Some(&json!("LOGIN")), "{role}");
    let database = ready(&runtime, "Database", "databases", "l-db").await;
    assert_eq!(database.pointer("/spec/forProvider/owner"), Some(&json!("l-owner")), "the reference resolves to the Role's external name");
    ready(&runtime, "Grant", "grants", "l-grant").await;

    assert_eq!(pg.psql("postgres", "SELECT rolcanlogin, rolconnlimit FROM pg_roles WHERE rolname = 'l-app'"), "t|5");
    let config = pg.psql("postgres", "SELECT array_to_string(rolconfig, ' ') FROM pg_roles WHERE rolname = 'l-app'");
    assert!(config.contains("statement_timeout=123") && config.contains("search_path="), "{config}");
    assert_eq!(pg.psql("postgres", "SELECT pg_get_userbyid(datdba), datconnlimit FROM pg_database WHERE datname = 'l-db'"), "l-owner|20");
    assert_eq!(
        pg.psql("postgres", "SELECT has_database_privilege('l-app', 'l-db', 'CONNECT WITH GRANT OPTION'), has_database_privilege('l-app', 'l-db', 'CREATE')"),
        "t|f"
    );

    // The connection Secret logs in.
    let details = secret(&runtime, "l-app-conn").await;
    let password = String::from_utf8(details["password"].clone()).unwrap();
    assert_eq!(String::from_utf8(details["username"].clone()).unwrap(), "l-app");
    assert_eq!(String::from_utf8(details["port"].clone()).unwrap(), pg.port.to_string());
    assert_eq!(pg.psql_as("l-app", &password, "l-db", "SELECT current_user").unwrap(), "l-app");

    // Drift by hand is reverted, with an event naming what drifted.
    pg.psql("postgres", "ALTER ROLE \"l-app\" CONNECTION LIMIT 99 NOLOGIN");
    wait_sql(pg, "postgres", "SELECT rolcanlogin, rolconnlimit FROM pg_roles WHERE rolname = 'l-app'", "t|5").await;
    let role = runtime.kube.get(&kind("Role", "roles"), None, "l-app").await.unwrap().unwrap();
    wait_for("a drift event", async || {
        events_of(&runtime, &role)
            .await
            .into_iter()
            .find(|(_, reason, message)| reason == "ExternalResourceDrifted" && message.contains("connectionLimit") && message.contains("privileges.login"))
    })
    .await;
    pg.psql("postgres", "REVOKE TEMPORARY ON DATABASE \"l-db\" FROM \"l-app\"");
    wait_sql(pg, "postgres", "SELECT has_database_privilege('l-app', 'l-db', 'TEMPORARY WITH GRANT OPTION')", "t").await;
    pg.psql("postgres", "ALTER DATABASE \"l-db\" CONNECTION LIMIT 3");
    wait_sql(pg, "postgres", "SELECT datconnlimit FROM pg_database WHERE datname = 'l-db'", "20").await;
    // Nothing is logged with the password.
    for (_, _, message) in events_of(&runtime, &role).await {
        assert!(!message.contains(&password), "{message}");
    }

    // Deletes remove what was made.
    delete(&runtime, "Grant", "grants", "l-grant").await;
    assert_eq!(pg.psql("postgres", "SELECT has_database_privilege('l-app', 'l-db', 'TEMPORARY WITH GRANT OPTION')"), "f");
    delete(&runtime, "Database", "databases", "l-db").await;
    assert_eq!(pg.psql("postgres", "SELECT count(*) FROM pg_database WHERE datname = 'l-db'"), "0");
    delete(&runtime, "Role", "roles", "l-app").await;
    delete(&runtime, "Role", "roles", "l-owner").await;
    assert_eq!(pg.psql("postgres", "SELECT count(*) FROM pg_roles WHERE rolname IN ('l-app', 'l-owner')"), "0");
}

#[tokio::test]
async fn errors_name_the_server_and_the_cause_but_never_the_password() {
    let pg = Postgres::shared();
    let (_server, runtime) = start().await;
    let _provider = provider(&runtime).await;
    let wrong = "Wrong-Password-123";
    config(&runtime, "wrong", pg.port, wrong).await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    config(&runtime, "down", closed, PASSWORD).await;
    for (name, config) in [("e-auth", "wrong"), ("e-down", "down")] {
        let mut role = mr("Role", name, json!({"privileges": {"login": true}}));
        role["spec"]["providerConfigRef"] = json!({"name": config});
        apply(&runtime, role).await;
    }
    let auth = wait_object(&runtime, &kind("Role", "roles"), None, "e-auth", "Synced=False", |o| {
        conditions::get(o, "Synced").is_some_and(|c| c.status == "False")
    })
    .await;
    let message = conditions::get(&auth, "Synced").unwrap().message;
    assert!(message.contains(&format!("127.0.0.1:{}", pg.port)) && message.contains("password authentication failed"), "{message}");
    assert!(!message.contains(wrong), "{message}");
    let down = wait_object(&runtime, &kind("Role", "roles"), None, "e-down", "Synced=False", |o| {
        conditions::get(o, "Synced").is_some_and(|c| c.status == "False")
    })
    .await;
    let message = conditions::get(&down, "Synced").unwrap().message;
    assert!(message.contains(&format!("cannot connect to PostgreSQL at 127.0.0.1:{closed}")), "{message}");
    for object in [&auth, &down] {
        for (_, _, message) in events_of(&runtime, object).await {
            assert!(!message.contains(wrong) && !message.contains(PASSWORD), "{message}");
        }
    }

    // A database in use cannot be dropped: the reason is said, and the drop happens once it
    // is no longer in use.
    config(&runtime, "default", pg.port, PASSWORD).await;
    apply(&runtime, mr("Database", "e-busy", json!({}))).await;
    ready(&runtime, "Database", "databases", "e-busy").await;
    let mut holder = std::process::Command::new("psql")
        .args(["-Xq", "-h", "127.0.0.1", "-p", &pg.port.to_string(), "-U", "postgres", "-d", "e-busy", "-c", "SELECT pg_sleep(600)"])
        .env("PGPASSWORD", PASSWORD)
        .spawn()
        .unwrap();
    wait_sql(pg, "postgres", "SELECT count(*) FROM pg_stat_activity WHERE datname = 'e-busy' AND query LIKE '%pg_sleep%'", "1").await;
    runtime.kube.delete(&kind("Database", "databases"), None, "e-busy", &Default::default()).await.unwrap();
    let busy = wait_object(&runtime, &kind("Database", "databases"), None, "e-busy", "Synced=False while in use", |o| {
        conditions::get(o, "Synced").is_some_and(|c| c.status == "False")
    })
    .await;
    let message = conditions::get(&busy, "Synced").unwrap().message;
    assert!(message.contains("is being accessed by other users"), "{message}");
    holder.kill().unwrap();
    let _ = holder.wait();
    pg.psql("postgres", "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'e-busy'");
    wait_for("the database to be dropped", async || runtime.kube.get(&kind("Database", "databases"), None, "e-busy").await.unwrap().is_none().then_some(())).await;
    assert_eq!(pg.psql("postgres", "SELECT count(*) FROM pg_database WHERE datname = 'e-busy'"), "0");
}

#[tokio::test]
async fn every_grant_type_schemas_extensions_and_default_privileges() {
    let pg = Postgres::shared();
    let (_server, runtime) = start().await;
    let _provider = provider(&runtime).await;
    config(&runtime, "default", pg.port, PASSWORD).await;
    pg.psql("postgres", "CREATE DATABASE \"g-db\"");
    pg.psql(
        "g-db",
        "CREATE TABLE t (c int); CREATE TABLE t2 (c int); CREATE SEQUENCE q; \
         CREATE FUNCTION f(text) RETURNS int LANGUAGE sql AS 'SELECT 1'; \
         CREATE FOREIGN DATA WRAPPER w; CREATE SERVER s FOREIGN DATA WRAPPER w",
    );
    apply(&runtime, mr("Role", "g-r", json!({"privileges": {"login": true}}))).await;
    apply(&runtime, mr("Role", "g-parent", json!({}))).await;
    apply(&runtime, mr("Schema", "g-s", json!({"database": "g-db", "roleRef": {"name": "g-parent"}, "revokePublicOnSchema": true}))).await;
    apply(&runtime, mr("Extension", "g-hstore", json!({"extension": "hstore", "database": "g-db"}))).await;
    apply(&runtime, mr("DefaultPrivileges", "g-default", json!({
        "privileges": ["SELECT"], "targetRole": "postgres", "objectType": "table", "roleRef": {"name": "g-r"}, "database": "g-db", "schemaRef": {"name": "g-s"}
    })))
    .await;
    let on = |extra: Value| {
        let mut spec = json!({"roleRef": {"name": "g-r"}, "database": "g-db"});
        for (k, v) in extra.as_object().unwrap() {
            spec[k] = v.clone();
        }
        spec
    };
    let grants = [
        ("g-member", json!({"roleRef": {"name": "g-r"}, "memberOfRef": {"name": "g-parent"}, "withOption": "ADMIN"})),
        ("g-database", on(json!({"privileges": ["CONNECT", "TEMP"]}))),
        ("g-schema", on(json!({"schemaRef": {"name": "g-s"}, "privileges": ["ALL"]}))),
        ("g-table", on(json!({"schema": "public", "tables": ["t"], "privileges": ["SELECT", "INSERT"]}))),
        ("g-column", on(json!({"schema": "public", "tables": ["t2"], "columns": ["c"], "privileges": ["UPDATE"]}))),
        ("g-sequence", on(json!({"schema": "public", "sequences": ["q"], "privileges": ["ALL"]}))),
        ("g-routine", on(json!({"schema": "public", "routines": [{"name": "f", "args": ["TEXT"]}], "privileges": ["ALL"]}))),
        ("g-fdw", on(json!({"foreignDataWrappers": ["w"], "privileges": ["USAGE"]}))),
        ("g-server", on(json!({"foreignServers": ["s"], "privileges": ["USAGE"]}))),
    ];
    for (name, spec) in &grants {
        apply(&runtime, mr("Grant", name, spec.clone())).await;
    }
    ready(&runtime, "Schema", "schemas", "g-s").await;
    ready(&runtime, "Extension", "extensions", "g-hstore").await;
    ready(&runtime, "DefaultPrivileges", "defaultprivileges", "g-default").await;
    for (name, _) in &grants {
        ready(&runtime, "Grant", "grants", name).await;
    }

    assert_eq!(pg.psql("g-db", "SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = 'g-s'"), "g-parent");
    assert_eq!(pg.psql("g-db", "SELECT has_schema_privilege('public', 'g-s', 'USAGE')"), "f", "revokePublicOnSchema");
    assert_eq!(pg.psql("g-db", "SELECT count(*) FROM pg_extension WHERE extname = 'hstore'"), "1");
    let checks = [
        "SELECT admin_option FROM pg_auth_members WHERE roleid = 'g-parent'::regrole AND member = 'g-r'::regrole",
        "SELECT has_database_privilege('g-r', 'g-db', 'CONNECT') AND has_database_privilege('g-r', 'g-db', 'TEMPORARY') AND NOT has_database_privilege('g-r', 'g-db', 'CREATE')",
        "SELECT has_schema_privilege('g-r', 'g-s', 'CREATE') AND has_schema_privilege('g-r', 'g-s', 'USAGE')",
        "SELECT has_table_privilege('g-r', 'public.t', 'INSERT') AND NOT has_table_privilege('g-r', 'public.t', 'DELETE')",
        "SELECT has_column_privilege('g-r', 'public.t2', 'c', 'UPDATE') AND NOT has_table_privilege('g-r', 'public.t2', 'UPDATE')",
        "SELECT has_sequence_privilege('g-r', 'public.q', 'USAGE') AND has_sequence_privilege('g-r', 'public.q', 'UPDATE')",
        "SELECT count(*) = 1 FROM pg_proc p, aclexplode(p.proacl) a WHERE p.proname = 'f' AND a.grantee = 'g-r'::regrole",
        "SELECT has_foreign_data_wrapper_privilege('g-r', 'w', 'USAGE') AND has_server_privilege('g-r', 's', 'USAGE')",
    ];
    for check in checks {
        assert_eq!(pg.psql("g-db", check), "t", "{check}");
    }
    // Default privileges apply to tables made later.
    pg.psql("g-db", "CREATE TABLE \"g-s\".later (c int)");
    assert_eq!(pg.psql("g-db", "SELECT has_table_privilege('g-r', '\"g-s\".later', 'SELECT')"), "t");

    // A REVOKE by hand is reverted; so is a changed owner.
    pg.psql("g-db", "REVOKE INSERT ON public.t FROM \"g-r\"; ALTER SCHEMA \"g-s\" OWNER TO postgres");
    wait_sql(pg, "g-db", "SELECT has_table_privilege('g-r', 'public.t', 'INSERT')", "t").await;
    wait_sql(pg, "g-db", "SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = 'g-s'", "g-parent").await;

    // Deletes take everything back.
    for (name, _) in &grants {
        delete(&runtime, "Grant", "grants", name).await;
    }
    delete(&runtime, "DefaultPrivileges", "defaultprivileges", "g-default").await;
    for check in &checks[2..] {
        assert_eq!(pg.psql("g-db", check), "f", "{check}");
    }
    // PUBLIC keeps CONNECT and TEMPORARY on databases: look at the role's own entries.
    assert_eq!(pg.psql("g-db", "SELECT count(*) FROM pg_database d, aclexplode(d.datacl) a WHERE d.datname = 'g-db' AND a.grantee = 'g-r'::regrole"), "0");
    assert_eq!(pg.psql("g-db", checks[0]), "");
    assert_eq!(pg.psql("g-db", "SELECT count(*) FROM pg_default_acl WHERE defaclrole = 'postgres'::regrole AND defaclnamespace = 'g-s'::regnamespace"), "0");
    delete(&runtime, "Extension", "extensions", "g-hstore").await;
    assert_eq!(pg.psql("g-db", "SELECT count(*) FROM pg_extension WHERE extname = 'hstore'"), "0");
    pg.psql("g-db", "DROP TABLE \"g-s\".later");
    delete(&runtime, "Schema", "schemas", "g-s").await;
    assert_eq!(pg.psql("g-db", "SELECT count(*) FROM pg_namespace WHERE nspname = 'g-s'"), "0");
}

#[tokio::test]
async fn names_that_look_like_sql_stay_names_and_namespaced_kinds_work() {
    let pg = Postgres::shared();
    let (_server, runtime) = start().await;
    let _provider = provider(&runtime).await;
    config(&runtime, "default", pg.port, PASSWORD).await;
    let evil_role = "q\"; DROP ROLE postgres; --'x";
    let evil_db = "d b'\"); DROP DATABASE postgres; --\\";
    let mut role = mr("Role", "n-evil", json!({"privileges": {"login": true}, "configurationParameters": [{"name": "application_name", "value": "x'; DROP ROLE postgres; --"}]}));
    role["metadata"]["annotations"] = json!({"crossplane.io/external-name": evil_role});
    apply(&runtime, role).await;
    let mut database = mr("Database", "n-evil", json!({"owner": evil_role}));
    database["metadata"]["annotations"] = json!({"crossplane.io/external-name": evil_db});
    apply(&runtime, database).await;
    ready(&runtime, "Role", "roles", "n-evil").await;
    ready(&runtime, "Database", "databases", "n-evil").await;
    let literal = |s: &str| format!("'{}'", s.replace('\'', "''"));
    assert_eq!(pg.psql("postgres", &format!("SELECT count(*) FROM pg_roles WHERE rolname = {}", literal(evil_role))), "1");
    assert_eq!(pg.psql("postgres", &format!("SELECT pg_get_userbyid(datdba) = {} FROM pg_database WHERE datname = {}", literal(evil_role), literal(evil_db))), "t");
    assert_eq!(pg.psql("postgres", "SELECT count(*) FROM pg_roles WHERE rolname = 'postgres'"), "1");
    delete(&runtime, "Database", "databases", "n-evil").await;
    delete(&runtime, "Role", "roles", "n-evil").await;
    assert_eq!(pg.psql("postgres", &format!("SELECT count(*) FROM pg_roles WHERE rolname = {}", literal(evil_role))), "0");

    // Namespaced kinds, with a ClusterProviderConfig (the default kind a namespaced resource
    // references) and a connection Secret in the resource's namespace.
    let group = "postgresql.sql.m.crossplane.io";
    let cluster_config = json!({
        "apiVersion": format!("{group}/v1alpha1"), "kind": "ClusterProviderConfig", "metadata": {"name": "default"},
        "spec": {"sslMode": "disable", "credentials": {"source": "PostgreSQLConnectionSecret", "connectionSecretRef": {"namespace": "default", "name": "default-conn"}}}
    });
    runtime.kube.create(&Kind::new(group, "v1alpha1", "ClusterProviderConfig", "clusterproviderconfigs", false), &cluster_config).await.unwrap();
    let role_kind = Kind::new(group, "v1alpha1", "Role", "roles", true);
    let role = json!({
        "apiVersion": format!("{group}/v1alpha1"), "kind": "Role", "metadata": {"name": "n-app", "namespace": "default"},
        "spec": {"forProvider": {"privileges": {"login": true}}, "writeConnectionSecretToRef": {"name": "n-app-conn"}}
    });
    runtime.kube.create(&role_kind, &role).await.unwrap();
    wait_object(&runtime, &role_kind, Some("default"), "n-app", "namespaced Role Ready", ready_and_synced).await;
    let details = secret(&runtime, "n-app-conn").await;
    let password = String::from_utf8(details["password"].clone()).unwrap();
    assert_eq!(pg.psql_as("n-app", &password, "postgres", "SELECT current_user").unwrap(), "n-app");

    // passwordRotationTrigger later than lastPasswordChange rotates the generated password once.
    let role = runtime.kube.get(&role_kind, Some("default"), "n-app").await.unwrap().unwrap();
    let last = role.pointer("/status/atProvider/lastPasswordChange").and_then(Value::as_str).expect("lastPasswordChange set at create");
    let trigger = (last.parse::<jiff::Timestamp>().unwrap() + jiff::SignedDuration::from_secs(1)).to_string();
    runtime.kube.merge_patch(&role_kind, Some("default"), "n-app", &json!({"spec": {"forProvider": {"passwordRotationTrigger": trigger}}})).await.unwrap();
    let rotated = wait_for("the password to rotate", async || {
        let details = connection::read_secret(&runtime.kube, "default", "n-app-conn").await.unwrap()?;
        let new = String::from_utf8(details.get("password")?.clone()).ok()?;
        (new != password).then_some(new)
    })
    .await;
    assert_eq!(pg.psql_as("n-app", &rotated, "postgres", "SELECT current_user").unwrap(), "n-app");
    assert!(pg.psql_as("n-app", &password, "postgres", "SELECT 1").is_err(), "the old password still works");

    // A password from passwordSecretRef is applied, and applied again when it changes.
    let own = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "n-own-pw", "namespace": "default"}, "stringData": {"pw": "First-pw-1"}});
    runtime.kube.create(&secret_kind(), &own).await.unwrap();
    let role = json!({
        "apiVersion": format!("{group}/v1alpha1"), "kind": "Role", "metadata": {"name": "n-own", "namespace": "default"},
        "spec": {"forProvider": {"privileges": {"login": true}, "passwordSecretRef": {"name": "n-own-pw", "key": "pw"}}, "writeConnectionSecretToRef": {"name": "n-own-conn"}}
    });
    runtime.kube.create(&role_kind, &role).await.unwrap();
    wait_object(&runtime, &role_kind, Some("default"), "n-own", "Role with its own password Ready", ready_and_synced).await;
    assert_eq!(pg.psql_as("n-own", "First-pw-1", "postgres", "SELECT 1").unwrap(), "1");
    runtime.kube.merge_patch(&secret_kind(), Some("default"), "n-own-pw", &json!({"stringData": {"pw": "Second-pw-2"}})).await.unwrap();
    wait_for("the new password to work", async || pg.psql_as("n-own", "Second-pw-2", "postgres", "SELECT 1").ok()).await;
    wait_for("the connection secret to hold the new password", async || {
        (secret(&runtime, "n-own-conn").await.get("password") == Some(&b"Second-pw-2".to_vec())).then_some(())
    })
    .await;
}
