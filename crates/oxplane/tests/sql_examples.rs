//! provider-sql's PostgreSQL examples (`examples/provider-sql/postgresql/`, the shapes of the
//! upstream provider's examples) applied with the real `kubectl` to the real `oxplane`
//! against a real PostgreSQL: every object exists as declared (asserted with `psql`),
//! connection Secrets log in, changes by hand are reverted with an event naming the fields,
//! the database's errors name the server and the cause (never a password), and deleting each
//! resource removes it from the server (Orphan ones stay).

use crate::support;

use std::process::{Command, Stdio};
use std::time::Duration;

use oxplane_providers::sql::testing::{PASSWORD, Postgres};
use serde_json::Value;
use support::{Server, within};

const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/provider-sql/postgresql");

fn example(file: &str) -> String {
    std::fs::read_to_string(format!("{EXAMPLES}/{file}")).unwrap()
}

/// The example's ProviderConfig and Secret, pointed at the test server.
fn config(pg: &Postgres) -> String {
    example("config.yaml").replace("password: change-me", &format!("password: {PASSWORD}")).replace("port: \"5432\"", &format!("port: \"{}\"", pg.port))
}

/// `kind.postgresql.sql.crossplane.io/name`.
fn mr(kind: &str, name: &str) -> String {
    format!("{}.postgresql.sql.crossplane.io/{name}", kind.to_lowercase())
}

/// The names of the objects of one kind in a YAML stream.
fn names(yaml: &str, kind: &str) -> Vec<String> {
    yaml.split("\n---")
        .filter(|doc| doc.lines().any(|l| l == format!("kind: {kind}")))
        .filter_map(|doc| doc.lines().skip_while(|l| *l != "metadata:").find_map(|l| l.strip_prefix("  name: ")).map(str::to_string))
        .collect()
}

fn get(server: &Server, what: &str) -> Option<Value> {
    server.get(&[what])
}

fn wait_ready(server: &Server, kind: &str, names: &[String]) {
    for name in names {
        support::wait_ready_and_synced(server, &mr(kind, name));
    }
}

fn secret(server: &Server, name: &str, key: &str) -> String {
    support::secret_value(server, name, key)
}

/// Waits until `sql` in `database` answers `want`.
fn wait_sql(pg: &Postgres, database: &str, sql: &str, want: &str) {
    within(Duration::from_secs(60), &format!("{sql:?} to answer {want:?}"), || pg.psql(database, sql) == want);
}

/// Asks for a reconcile now (Crossplane's annotation), rather than waiting for the poll.
fn nudge(server: &Server, what: &str, token: &str) {
    server.kubectl(&["annotate", "--overwrite", what, &format!("crossplane.io/reconcile-requested-at={token}")]);
}

fn events_of(server: &Server, name: &str) -> Vec<Value> {
    let events: Value = serde_json::from_str(&server.kubectl(&["get", "events", "-A", "-o", "json"])).unwrap();
    events["items"].as_array().unwrap().iter().filter(|e| e["involvedObject"]["name"] == name).cloned().collect()
}

/// The Synced=False message of an object, once it has one.

fn apply_file(server: &Server, yaml: &str) {
    server.apply(yaml);
}

fn delete_file(server: &Server, file: &str) {
    server.kubectl_stdin(&["delete", "-f", "-", "--timeout=120s"], &example(file));
}

#[test]
fn sql_upstream_postgresql_examples_are_made_kept_reported_and_removed() {
    let pg = Postgres::shared();
    // Made by hand: the database the Observe-only example watches.
    pg.psql("postgres", "CREATE DATABASE \"legacy-db\"");
    let server = Server::start_with(&["--provider", "provider-sql"]);
    within(Duration::from_secs(90), "provider-sql Healthy", || {
        get(&server, "providers.pkg.crossplane.io/provider-sql").is_some_and(|p| support::is_true(&p, "Healthy"))
    });
    apply_file(&server, &config(pg));
    let byo_password = "Byo-Example-Pw-77";
    server.kubectl(&["create", "secret", "generic", "app-byo-password", "-n", "default", &format!("--from-literal=password={byo_password}")]);

    // Roles and databases.
    let roles = example("role.yaml");
    let databases = example("database.yaml");
    apply_file(&server, &roles);
    apply_file(&server, &databases);
    wait_ready(&server, "Role", &names(&roles, "Role"));
    wait_ready(&server, "Database", &names(&databases, "Database"));
    assert_eq!(pg.psql("postgres", "SELECT rolcanlogin, rolconnlimit, 'statement_timeout=2500' = ANY(rolconfig), array_length(rolconfig, 1) FROM pg_roles WHERE rolname = 'team-lead'"), "t|8|t|2");
    assert_eq!(pg.psql("postgres", "SELECT rolcanlogin, rolcreatedb FROM pg_roles WHERE rolname = 'app-dev'"), "f|t");
    assert_eq!(
        pg.psql("postgres", "SELECT rolcanlogin, rolcreatedb, rolcreaterole, rolinherit, rolsuper FROM pg_roles WHERE rolname = 'db-owner'"),
        "t|t|t|t|f"
    );
    assert_eq!(pg.psql("postgres", "SELECT count(*) FROM pg_roles WHERE rolname IN ('app-reader', 'app-rotating', 'app-byo') AND rolcanlogin"), "3");
    assert_eq!(pg.psql("postgres", "SELECT pg_get_userbyid(datdba), datallowconn FROM pg_database WHERE datname = 'owned-db'"), "db-owner|t");
    assert_eq!(pg.psql("postgres", "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = 'appdb'"), "postgres");
    let rotating = get(&server, &mr("Role", "app-rotating")).unwrap();
    assert!(rotating.pointer("/status/atProvider/lastPasswordChange").is_some_and(Value::is_string), "{rotating}");

    // Connection Secrets log in (the role's own settings apply to its sessions).
    let lead = secret(&server, "team-lead-conn", "password");
    assert_eq!(secret(&server, "team-lead-conn", "username"), "team-lead");
    assert_eq!(secret(&server, "team-lead-conn", "port"), pg.port.to_string());
    assert_eq!(pg.psql_as("team-lead", &lead, "postgres", "SHOW statement_timeout").unwrap(), "2500ms");
    let reader = secret(&server, "app-reader-conn", "password");
    assert_eq!(pg.psql_as("app-reader", &reader, "postgres", "SELECT current_user").unwrap(), "app-reader");
    let rotating_pw = secret(&server, "app-rotating-conn", "password");
    assert_eq!(pg.psql_as("app-rotating", &rotating_pw, "postgres", "SELECT current_user").unwrap(), "app-rotating");
    assert_eq!(secret(&server, "app-byo-conn", "password"), byo_password);
    assert_eq!(pg.psql_as("app-byo", byo_password, "postgres", "SELECT current_user").unwrap(), "app-byo");

    // The objects the grants name, made by hand in owned-db.
    pg.psql(
        "owned-db",
        "CREATE TABLE orders (id serial, total numeric); CREATE TABLE order_notes (id int, note text); CREATE SEQUENCE invoice_seq; \
         CREATE PROCEDURE refresh_totals(text) LANGUAGE sql AS 'SELECT 1'; CREATE FOREIGN DATA WRAPPER files_fdw; \
         CREATE SERVER files_server FOREIGN DATA WRAPPER files_fdw",
    );
    let schemas = example("schema.yaml");
    let extensions = example("extension.yaml");
    let grants = example("grant.yaml");
    let defaults = example("defaultprivileges.yaml");
    for yaml in [&schemas, &extensions, &grants, &defaults] {
        apply_file(&server, yaml);
    }
    wait_ready(&server, "Schema", &names(&schemas, "Schema"));
    wait_ready(&server, "Extension", &names(&extensions, "Extension"));
    wait_ready(&server, "Grant", &names(&grants, "Grant"));
    wait_ready(&server, "DefaultPrivileges", &names(&defaults, "DefaultPrivileges"));

    assert_eq!(pg.psql("appdb", "SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = 'app-schema'"), "app-dev");
    assert_eq!(
        pg.psql("owned-db", "SELECT pg_get_userbyid(nspowner), has_schema_privilege('app-reader', 'public', 'USAGE') FROM pg_namespace WHERE nspname = 'public'"),
        "db-owner|f"
    );
    assert_eq!(pg.psql("appdb", "SELECT string_agg(extname || ' ' || extversion, ',' ORDER BY extname) FROM pg_extension WHERE extname IN ('hstore', 'ltree')"), "hstore 1.4,ltree 1.1");
    let privileges = [
        ("postgres", "SELECT has_database_privilege('app-dev', 'appdb', 'CREATE WITH GRANT OPTION')"),
        ("postgres", "SELECT has_database_privilege('app-dev', 'appdb', 'CONNECT') AND has_database_privilege('app-dev', 'appdb', 'TEMPORARY')"),
        ("postgres", "SELECT pg_has_role('app-dev', 'team-lead', 'USAGE WITH ADMIN OPTION')"),
        ("postgres", "SELECT pg_has_role('postgres', 'db-owner', 'MEMBER') AND EXISTS (SELECT 1 FROM pg_auth_members WHERE roleid = 'db-owner'::regrole AND member = 'postgres'::regrole)"),
        ("postgres", "SELECT has_database_privilege('db-owner', 'owned-db', 'CONNECT WITH GRANT OPTION')"),
        ("postgres", "SELECT NOT EXISTS (SELECT 1 FROM pg_database d, aclexplode(d.datacl) a WHERE d.datname = 'owned-db' AND a.grantee = 0 AND a.privilege_type = 'CONNECT')"),
        ("appdb", "SELECT has_schema_privilege('app-reader', 'app-schema', 'USAGE WITH GRANT OPTION') AND has_schema_privilege('app-reader', 'app-schema', 'CREATE WITH GRANT OPTION')"),
        ("owned-db", "SELECT has_table_privilege('app-reader', 'orders', 'SELECT') AND has_table_privilege('app-reader', 'orders', 'INSERT') AND NOT has_table_privilege('app-reader', 'orders', 'DELETE')"),
        ("owned-db", "SELECT has_sequence_privilege('app-reader', 'orders_id_seq', 'USAGE') AND has_sequence_privilege('app-reader', 'invoice_seq', 'UPDATE')"),
        ("owned-db", "SELECT has_function_privilege('app-reader', 'refresh_totals(text)', 'EXECUTE')"),
        ("owned-db", "SELECT has_column_privilege('app-reader', 'order_notes', 'note', 'UPDATE') AND NOT has_column_privilege('app-reader', 'order_notes', 'id', 'UPDATE')"),
        ("owned-db", "SELECT has_foreign_data_wrapper_privilege('app-reader', 'files_fdw', 'USAGE')"),
        ("owned-db", "SELECT has_server_privilege('app-reader', 'files_server', 'USAGE')"),
        ("owned-db", "SELECT has_table_privilege('app-dev', 'orders', 'DELETE') AND has_table_privilege('app-dev', 'orders', 'TRUNCATE')"),
    ];
    for (database, check) in privileges {
        assert_eq!(pg.psql(database, check), "t", "{check}");
    }
    let default_acl = "SELECT string_agg(x, ',' ORDER BY x) FROM (SELECT d.defaclobjtype::text || ':' || pg_get_userbyid(a.grantee) || ':' || a.privilege_type AS x \
        FROM pg_default_acl d, aclexplode(d.defaclacl) a WHERE d.defaclrole = 'db-owner'::regrole AND d.defaclnamespace = 'public'::regnamespace) s";
    assert_eq!(
        pg.psql("appdb", default_acl),
        "f:app-dev:EXECUTE,f:app-reader:EXECUTE,r:app-dev:DELETE,r:app-dev:INSERT,r:app-dev:SELECT,r:app-dev:TRUNCATE,r:app-dev:UPDATE,r:app-reader:SELECT"
    );

    // Changes by hand are reverted, and an event names what drifted.
    pg.psql("postgres", "ALTER ROLE \"team-lead\" CONNECTION LIMIT 99 NOLOGIN");
    pg.psql("owned-db", "REVOKE INSERT ON orders FROM \"app-reader\"");
    nudge(&server, &mr("Role", "team-lead"), "drift-1");
    nudge(&server, &mr("Grant", "app-reader-on-orders"), "drift-1");
    wait_sql(pg, "postgres", "SELECT rolcanlogin, rolconnlimit FROM pg_roles WHERE rolname = 'team-lead'", "t|8");
    wait_sql(pg, "owned-db", "SELECT has_table_privilege('app-reader', 'orders', 'INSERT')", "t");
    let drifted = |name: &str| -> String {
        events_of(&server, name).iter().filter(|e| e["reason"] == "ExternalResourceDrifted").filter_map(|e| e["message"].as_str().map(str::to_string)).collect()
    };
    let role_drift = drifted("team-lead");
    assert!(role_drift.contains("connectionLimit") && role_drift.contains("login"), "{role_drift}");
    assert!(!drifted("app-reader-on-orders").is_empty(), "the grant's drift is reported");
    assert_eq!(pg.psql_as("team-lead", &lead, "postgres", "SELECT 1").unwrap(), "1", "the password is unchanged by the revert");

    // The database's errors, on objects of their own: each names the server and the cause.
    let closed_port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let wrong_password = "Not-The-Password-31";
    let broken = format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: pg-unreachable\n  namespace: default\nstringData:\n  username: postgres\n  password: {PASSWORD}\n  endpoint: 127.0.0.1\n  port: \"{closed_port}\"\n\
---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: pg-wrong-password\n  namespace: default\nstringData:\n  username: postgres\n  password: {wrong_password}\n  endpoint: 127.0.0.1\n  port: \"{port}\"\n{configs}{roles}",
        port = pg.port,
        // A ProviderConfig logging in as app-reader (its connection Secret has the standard
        // keys), which may not create roles.
        configs = [("unreachable", "pg-unreachable"), ("wrong-password", "pg-wrong-password"), ("as-reader", "app-reader-conn")]
            .iter()
            .map(|(name, secret)| format!("---\napiVersion: postgresql.sql.crossplane.io/v1alpha1\nkind: ProviderConfig\nmetadata:\n  name: {name}\nspec:\n  sslMode: disable\n  credentials:\n    source: PostgreSQLConnectionSecret\n    connectionSecretRef:\n      namespace: default\n      name: {secret}\n"))
            .collect::<String>(),
        roles = ["unreachable", "wrong-password", "as-reader"]
            .iter()
            .map(|config| format!("---\napiVersion: postgresql.sql.crossplane.io/v1alpha1\nkind: Role\nmetadata:\n  name: err-{config}\nspec:\n  providerConfigRef:\n    name: {config}\n  forProvider:\n    privileges:\n      login: true\n"))
            .collect::<String>(),
    );
    apply_file(&server, &broken);
    let unreachable = support::sync_error(&server, &mr("Role", "err-unreachable"));
    assert!(unreachable.contains(&format!("127.0.0.1:{closed_port}")) && unreachable.to_lowercase().contains("refused"), "{unreachable}");
    let auth = support::sync_error(&server, &mr("Role", "err-wrong-password"));
    assert!(auth.contains(&format!("127.0.0.1:{}", pg.port)) && auth.contains("password authentication failed"), "{auth}");
    let denied = support::sync_error(&server, &mr("Role", "err-as-reader"));
    assert!(denied.contains(&format!("127.0.0.1:{}", pg.port)) && denied.contains("permission denied"), "{denied}");
    server.kubectl(&["delete", &mr("Role", "err-unreachable"), &mr("Role", "err-wrong-password"), &mr("Role", "err-as-reader"), "--wait=false"]);

    // Deleting each resource removes it from the server; Orphan ones stay.
    delete_file(&server, "defaultprivileges.yaml");
    assert_eq!(pg.psql("appdb", default_acl), "");
    delete_file(&server, "grant.yaml");
    // What the deleted Grants gave is gone (PUBLIC's defaults aside); the Orphan ones stay.
    let acl = |grantee: &str, acls: &str| format!("SELECT count(*) FROM ({acls}) x, aclexplode(x.acl) a WHERE a.grantee = '{grantee}'::regrole");
    assert_eq!(pg.psql("postgres", &acl("app-dev", "SELECT datacl AS acl FROM pg_database WHERE datname = 'appdb'")), "0");
    assert_eq!(pg.psql("postgres", "SELECT count(*) FROM pg_auth_members WHERE member = 'app-dev'::regrole"), "0");
    assert_eq!(pg.psql("appdb", &acl("app-reader", "SELECT nspacl AS acl FROM pg_namespace WHERE nspname = 'app-schema'")), "0");
    for grantee in ["app-reader", "app-dev"] {
        let objects = "SELECT relacl AS acl FROM pg_class WHERE relname IN ('orders', 'orders_id_seq', 'invoice_seq') \
            UNION ALL SELECT attacl FROM pg_attribute WHERE attrelid = 'order_notes'::regclass \
            UNION ALL SELECT proacl FROM pg_proc WHERE proname = 'refresh_totals' \
            UNION ALL SELECT fdwacl FROM pg_foreign_data_wrapper UNION ALL SELECT srvacl FROM pg_foreign_server";
        assert_eq!(pg.psql("owned-db", &acl(grantee, objects)), "0", "{grantee}");
    }
    for (database, check) in &privileges[3..6] {
        assert_eq!(pg.psql(database, check), "t", "Orphan grants stay: {check}");
    }
    delete_file(&server, "extension.yaml");
    assert_eq!(pg.psql("appdb", "SELECT count(*) FROM pg_extension WHERE extname IN ('hstore', 'ltree')"), "0");
    // owned-db's public schema still holds the tables: dropping it fails, and says why.
    server.kubectl_stdin(&["delete", "-f", "-", "--wait=false"], &schemas);
    let schema_in_use = support::sync_error(&server, &mr("Schema", "public"));
    assert!(schema_in_use.contains(&format!("127.0.0.1:{}", pg.port)) && schema_in_use.contains("other objects depend on it"), "{schema_in_use}");
    within(Duration::from_secs(60), "app-schema to be gone", || get(&server, &mr("Schema", "app-schema")).is_none());
    assert_eq!(pg.psql("appdb", "SELECT count(*) FROM pg_namespace WHERE nspname = 'app-schema'"), "0");
    pg.psql("owned-db", "DROP TABLE orders, order_notes; DROP SEQUENCE invoice_seq; DROP PROCEDURE refresh_totals(text); DROP SERVER files_server; DROP FOREIGN DATA WRAPPER files_fdw");
    nudge(&server, &mr("Schema", "public"), "emptied");
    within(Duration::from_secs(90), "the public Schema to be gone", || get(&server, &mr("Schema", "public")).is_none());
    assert_eq!(pg.psql("owned-db", "SELECT count(*) FROM pg_namespace WHERE nspname = 'public'"), "0");

    // A database in use cannot be dropped: Synced=False says so, until the session ends.
    let mut holder = Command::new("psql")
        .args(["-XAtq", "-h", "127.0.0.1", "-p", &pg.port.to_string(), "-U", "postgres", "-d", "appdb", "-c", "SELECT pg_sleep(600)"])
        .env("PGPASSWORD", PASSWORD)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    within(Duration::from_secs(30), "the session on appdb", || pg.psql("postgres", "SELECT count(*) FROM pg_stat_activity WHERE datname = 'appdb' AND query LIKE '%pg_sleep%'") == "1");
    server.kubectl(&["delete", &mr("Database", "appdb"), "--wait=false"]);
    let in_use = support::sync_error(&server, &mr("Database", "appdb"));
    assert!(in_use.contains(&format!("127.0.0.1:{}", pg.port)) && in_use.contains("is being accessed by other users"), "{in_use}");
    let _ = holder.kill();
    let _ = holder.wait();
    pg.psql("postgres", "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'appdb' AND pid <> pg_backend_pid()");
    delete_file(&server, "database.yaml");
    assert_eq!(pg.psql("postgres", "SELECT string_agg(datname, ',' ORDER BY datname) FROM pg_database WHERE datname IN ('appdb', 'owned-db', 'legacy-db')"), "legacy-db,owned-db");
    delete_file(&server, "role.yaml");
    assert_eq!(
        pg.psql("postgres", "SELECT string_agg(rolname, ',' ORDER BY rolname) FROM pg_roles WHERE rolname IN ('team-lead', 'app-dev', 'db-owner', 'app-reader', 'app-rotating', 'app-byo')"),
        "db-owner"
    );

    // No password in any condition, event or log line.
    let mut secrets = vec![PASSWORD.to_string(), wrong_password.to_string(), byo_password.to_string(), lead, reader, rotating_pw];
    secrets.retain(|s| s.len() >= 8);
    let events = server.kubectl(&["get", "events", "-A", "-o", "json"]);
    let log = server.log();
    for secret in &secrets {
        assert!(!events.contains(secret.as_str()), "a password is in an event");
        assert!(!log.contains(secret.as_str()), "a password is in the log");
        for message in [&unreachable, &auth, &denied, &in_use, &schema_in_use] {
            assert!(!message.contains(secret.as_str()), "a password is in a condition: {message}");
        }
    }
    pg.psql("postgres", "DROP DATABASE \"owned-db\" WITH (FORCE)");
    pg.psql("postgres", "DROP DATABASE \"legacy-db\"");
    pg.psql("postgres", "DROP ROLE \"db-owner\"");
}
