//! provider-sql's MySQL examples (`examples/provider-sql/mysql/`, the shapes of the upstream
//! provider's examples) applied with the real `kubectl` to the real `oxplane` against a real
//! MariaDB (one per test process, see `oxplane_providers::sql::testing::mariadb`): every
//! object exists as declared (asserted with the `mariadb` client), connection Secrets log in,
//! changes by hand are reverted with an event naming the fields, errors name the server and
//! the cause (never a password), names that look like SQL stay names, and deleting each
//! resource removes it from the server.

use crate::support;

use std::time::Duration;

use oxplane_providers::sql::testing::mariadb::{MariaDb, PASSWORD};
use serde_json::Value;
use support::{Server, within};

const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/provider-sql/mysql");

fn example(file: &str) -> String {
    std::fs::read_to_string(format!("{EXAMPLES}/{file}")).unwrap()
}

/// `kind.mysql.sql.crossplane.io/name`.
fn mr(kind: &str, name: &str) -> String {
    format!("{}.mysql.sql.crossplane.io/{name}", kind.to_lowercase())
}

fn get(server: &Server, what: &str) -> Option<Value> {
    server.get(&[what])
}

fn wait_ready(server: &Server, kind: &str, names: &[&str]) {
    for name in names {
        support::wait_ready_and_synced(server, &mr(kind, name));
    }
}

fn secret(server: &Server, name: &str, key: &str) -> String {
    support::secret_value(server, name, key)
}

fn wait_sql(db: &MariaDb, sql: &str, want: &str) {
    within(Duration::from_secs(60), &format!("{sql:?} to answer {want:?}"), || db.mysql(sql) == want);
}

fn nudge(server: &Server, what: &str, token: &str) {
    server.kubectl(&["annotate", "--overwrite", what, &format!("crossplane.io/reconcile-requested-at={token}")]);
}


fn drift_events(server: &Server, name: &str) -> String {
    let events: Value = serde_json::from_str(&server.kubectl(&["get", "events", "-A", "-o", "json"])).unwrap();
    events["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["involvedObject"]["name"] == name && e["reason"] == "ExternalResourceDrifted")
        .filter_map(|e| e["message"].as_str().map(str::to_string))
        .collect()
}

fn privileges(db: &MariaDb, table: &str, grantee: &str, more: &str) -> String {
    db.mysql(&format!("SELECT IFNULL(GROUP_CONCAT(PRIVILEGE_TYPE ORDER BY PRIVILEGE_TYPE), '') FROM information_schema.{table} WHERE GRANTEE = \"{grantee}\"{more}"))
}

#[test]
fn sql_upstream_mysql_examples_are_made_kept_reported_and_removed() {
    let db = MariaDb::shared();
    let server = Server::start_with(&["--provider", "provider-sql"]);
    within(Duration::from_secs(90), "provider-sql Healthy", || {
        get(&server, "providers.pkg.crossplane.io/provider-sql").is_some_and(|p| support::is_true(&p, "Healthy"))
    });
    let config = example("config.yaml").replace("password: change-me", &format!("password: {PASSWORD}")).replace("port: \"3306\"", &format!("port: \"{}\"", db.port));
    server.apply(&config);
    let app_password = "Shop-App-Pw-451";
    server.kubectl(&["create", "secret", "generic", "shop-app-password", "-n", "default", &format!("--from-literal=password={app_password}")]);

    // A database, and accounts with a password of their own, a plugin, and a generated one.
    server.apply(&example("database.yaml"));
    server.apply(&example("user.yaml"));
    // The example's authString is the hash of `change-me`: here, of the app's password.
    let hash = db.mysql(&format!("SELECT PASSWORD('{app_password}')"));
    let plugin_users = example("user_with_auth_plugin.yaml").replace("*6D8E7CA2D13CBEBC74BE7EF3A2976000952DCE92", &hash);
    assert_ne!(plugin_users, example("user_with_auth_plugin.yaml"));
    server.apply(&plugin_users);
    // A name that looks like SQL stays a name.
    let evil = "we`ird'; DROP DATABASE shop; --";
    server.apply(&format!(
        "apiVersion: mysql.sql.crossplane.io/v1alpha1\nkind: Database\nmetadata:\n  name: odd-name\n  annotations:\n    crossplane.io/external-name: \"{}\"\nspec:\n  forProvider: {{}}\n",
        evil.replace('\\', "\\\\").replace('"', "\\\"")
    ));
    wait_ready(&server, "Database", &["shop", "odd-name"]);
    wait_ready(&server, "User", &["shop-app", "shop-ops", "shop-report", "shop-batch"]);
    assert_eq!(db.mysql("SELECT DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'shop'"), "utf8mb4\tutf8mb4_bin");
    assert_eq!(db.mysql(&format!("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = '{}'", evil.replace('\'', "''"))), "1");
    assert_eq!(db.mysql("SELECT max_questions, max_updates, max_connections, max_user_connections FROM mysql.user WHERE User = 'shop-app' AND Host = '%'"), "2000\t500\t120\t12");
    assert_eq!(db.mysql("SELECT plugin FROM mysql.user WHERE User = 'shop-ops' AND Host = '%'"), "unix_socket");
    assert_eq!(db.mysql("SELECT plugin FROM mysql.user WHERE User = 'shop-report' AND Host = '%'"), "mysql_native_password");
    assert_eq!(db.mysql("SELECT COUNT(*) FROM mysql.user WHERE User = 'shop-batch' AND Host = '127.0.0.1'"), "1");
    let report = get(&server, &mr("User", "shop-report")).unwrap();
    assert_eq!(report.pointer("/status/atProvider/authenticationPlugin/name"), Some(&Value::from("mysql_native_password")), "{report}");
    assert_eq!(report.pointer("/status/atProvider/authenticationPlugin/authString"), Some(&Value::from(hash.as_str())), "{report}");
    let app = get(&server, &mr("User", "shop-app")).unwrap();
    assert!(app.pointer("/status/atProvider/authenticationPlugin").is_none(), "an account with a password reports no plugin: {app}");
    let user = get(&server, &mr("User", "shop-app")).unwrap();
    assert_eq!(user.pointer("/status/atProvider/resourceOptionsAsClauses/3"), Some(&Value::from("MAX_USER_CONNECTIONS 12")), "{user}");

    // Connection Secrets log in.
    assert_eq!(secret(&server, "shop-app-conn", "username"), "shop-app");
    assert_eq!(secret(&server, "shop-app-conn", "port"), db.port.to_string());
    assert_eq!(db.mysql_as("shop-app", &secret(&server, "shop-app-conn", "password"), "SELECT CURRENT_USER()").unwrap(), "shop-app@%");
    assert_eq!(db.mysql_as("shop-report", app_password, "SELECT CURRENT_USER()").unwrap(), "shop-report@%");
    let batch = secret(&server, "shop-batch-conn", "password");
    assert_eq!(batch.len(), 32, "a generated password");
    assert_eq!(db.mysql_as("shop-batch", &batch, "SELECT CURRENT_USER()").unwrap(), "shop-batch@127.0.0.1");

    // Grants on a database, a table (with columns) and everything.
    db.mysql("CREATE TABLE shop.orders (id int, status text, updated_at datetime)");
    for file in ["grant_database.yaml", "grant_table.yaml", "grant_all_databases.yaml"] {
        server.apply(&example(file));
    }
    wait_ready(&server, "Grant", &["shop-app-on-shop", "shop-report-on-orders", "shop-batch-everywhere"]);
    assert_eq!(privileges(db, "SCHEMA_PRIVILEGES", "'shop-app'@'%'", " AND TABLE_SCHEMA = 'shop'"), "CREATE ROUTINE,DROP,EVENT");
    assert_eq!(privileges(db, "TABLE_PRIVILEGES", "'shop-report'@'%'", " AND TABLE_SCHEMA = 'shop' AND TABLE_NAME = 'orders'"), "INSERT,SELECT");
    assert_eq!(
        db.mysql("SELECT GROUP_CONCAT(COLUMN_NAME, ':', PRIVILEGE_TYPE ORDER BY COLUMN_NAME) FROM information_schema.COLUMN_PRIVILEGES WHERE GRANTEE = \"'shop-report'@'%'\""),
        "status:UPDATE,updated_at:UPDATE"
    );
    assert_eq!(privileges(db, "USER_PRIVILEGES", "'shop-batch'@'127.0.0.1'", ""), "PROCESS,SELECT");
    assert_eq!(db.mysql_as("shop-report", app_password, "SELECT COUNT(*) FROM shop.orders").unwrap(), "0");
    let grant = get(&server, &mr("Grant", "shop-report-on-orders")).unwrap();
    assert!(grant.pointer("/status/atProvider/privileges").and_then(Value::as_array).is_some_and(|p| p.len() == 3), "{grant}");

    // Changes by hand are reverted, and an event names what drifted.
    db.mysql(
        "REVOKE EVENT ON shop.* FROM 'shop-app'@'%'; GRANT DELETE ON shop.* TO 'shop-app'@'%'; ALTER USER 'shop-app'@'%' WITH MAX_USER_CONNECTIONS 99; \
         ALTER USER 'shop-report'@'%' IDENTIFIED BY 'Changed-By-Hand-1'",
    );
    assert!(db.mysql_as("shop-report", app_password, "SELECT 1").is_err());
    nudge(&server, &mr("Grant", "shop-app-on-shop"), "drift-1");
    nudge(&server, &mr("User", "shop-app"), "drift-1");
    nudge(&server, &mr("User", "shop-report"), "drift-1");
    within(Duration::from_secs(60), "shop-report's authentication string to be put back", || db.mysql_as("shop-report", app_password, "SELECT 1").is_ok());
    assert!(drift_events(&server, "shop-report").contains("authenticationPlugin"));
    wait_sql(db, "SELECT max_user_connections FROM mysql.user WHERE User = 'shop-app' AND Host = '%'", "12");
    within(Duration::from_secs(60), "the grant to be put back", || {
        privileges(db, "SCHEMA_PRIVILEGES", "'shop-app'@'%'", " AND TABLE_SCHEMA = 'shop'") == "CREATE ROUTINE,DROP,EVENT"
    });
    assert!(drift_events(&server, "shop-app").contains("resourceOptions.maxUserConnections"));
    assert!(drift_events(&server, "shop-app-on-shop").contains("privileges"));

    // The server's errors, on objects of their own: each names the server and the cause.
    let closed_port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let wrong_password = "Not-Maria-Password-8";
    let secret_yaml = |name: &str, user: &str, password: &str, port: u16| {
        format!("---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\n  namespace: default\nstringData:\n  username: {user}\n  password: {password}\n  endpoint: 127.0.0.1\n  port: \"{port}\"\n")
    };
    let mut broken = secret_yaml("my-unreachable", "root", PASSWORD, closed_port) + &secret_yaml("my-wrong-password", "root", wrong_password, db.port);
    for (config, secret) in [("my-unreachable", "my-unreachable"), ("my-wrong-password", "my-wrong-password"), ("my-as-app", "shop-app-conn")] {
        broken.push_str(&format!(
            "---\napiVersion: mysql.sql.crossplane.io/v1alpha1\nkind: ProviderConfig\nmetadata:\n  name: {config}\nspec:\n  credentials:\n    source: MySQLConnectionSecret\n    connectionSecretRef:\n      namespace: default\n      name: {secret}\n\
             ---\napiVersion: mysql.sql.crossplane.io/v1alpha1\nkind: Database\nmetadata:\n  name: err-{config}\nspec:\n  providerConfigRef:\n    name: {config}\n  forProvider: {{}}\n"
        ));
    }
    server.apply(&broken);
    let unreachable = support::sync_error(&server, &mr("Database", "err-my-unreachable"));
    assert!(unreachable.contains(&format!("127.0.0.1:{closed_port}")) && unreachable.to_lowercase().contains("refused"), "{unreachable}");
    let auth = support::sync_error(&server, &mr("Database", "err-my-wrong-password"));
    assert!(auth.contains(&format!("127.0.0.1:{}", db.port)) && auth.contains("Access denied"), "{auth}");
    let denied = support::sync_error(&server, &mr("Database", "err-my-as-app"));
    assert!(denied.contains(&format!("127.0.0.1:{}", db.port)) && denied.contains("Access denied"), "{denied}");
    server.kubectl(&["delete", &mr("Database", "err-my-unreachable"), &mr("Database", "err-my-wrong-password"), &mr("Database", "err-my-as-app"), "--wait=false"]);

    // Deleting each resource removes it from the server.
    for file in ["grant_database.yaml", "grant_table.yaml", "grant_all_databases.yaml"] {
        server.kubectl_stdin(&["delete", "-f", "-", "--timeout=120s"], &example(file));
    }
    assert_eq!(privileges(db, "SCHEMA_PRIVILEGES", "'shop-app'@'%'", ""), "");
    assert_eq!(privileges(db, "TABLE_PRIVILEGES", "'shop-report'@'%'", ""), "");
    assert_eq!(db.mysql("SELECT COUNT(*) FROM information_schema.COLUMN_PRIVILEGES WHERE GRANTEE = \"'shop-report'@'%'\""), "0");
    assert_eq!(privileges(db, "USER_PRIVILEGES", "'shop-batch'@'127.0.0.1'", ""), "USAGE");
    for file in ["user.yaml", "user_with_auth_plugin.yaml"] {
        server.kubectl_stdin(&["delete", "-f", "-", "--timeout=120s"], &example(file));
    }
    assert_eq!(db.mysql("SELECT COUNT(*) FROM mysql.user WHERE User LIKE 'shop-%'"), "0");
    server.kubectl_stdin(&["delete", "-f", "-", "--timeout=120s"], &example("database.yaml"));
    server.kubectl(&["delete", &mr("Database", "odd-name"), "--timeout=120s"]);
    assert_eq!(db.mysql(&format!("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME IN ('shop', '{}')", evil.replace('\'', "''"))), "0");

    // No password in any condition, event or log line.
    let events = server.kubectl(&["get", "events", "-A", "-o", "json"]);
    let log = server.log();
    for secret in [PASSWORD, wrong_password, app_password, batch.as_str()] {
        assert!(!events.contains(secret), "a password is in an event");
        assert!(!log.contains(secret), "a password is in the log");
        for message in [&unreachable, &auth, &denied] {
            assert!(!message.contains(secret), "a password is in a condition: {message}");
        }
    }
}
