//! provider-sql's MySQL side against a real MariaDB (one per test binary, see
//! `oxplane_providers::sql::testing::mariadb`): the namespaced kinds with a
//! ClusterProviderConfig, account and database names that look like SQL staying names, a
//! Grant that follows its spec (privileges added and taken away), errors as conditions
//! that name the cause, and deletes that take everything back.

use crate::support;

use std::time::Duration;

use oxplane_providers::sql::SqlProvider;
use oxplane_providers::sql::testing::mariadb::{MariaDb, PASSWORD};
use oxplane_runtime::conditions;
use oxplane_runtime::kinds::Kind;
use oxplane_runtime::managed::connection;
use serde_json::{Value, json};
use support::{install, start, wait_for, wait_object};

const PACKAGE: &str = "xpkg.crossplane.io/crossplane-contrib/provider-sql:v0.13.0";
const GROUP: &str = "mysql.sql.m.crossplane.io";

fn kind(kind: &str) -> Kind {
    let plural = format!("{}s", kind.to_lowercase());
    Kind::new(GROUP, "v1alpha1", kind, &plural, !kind.starts_with("Cluster"))
}

fn mr(kind: &str, name: &str, external_name: Option<&str>, spec: Value) -> Value {
    let mut object = json!({"apiVersion": format!("{GROUP}/v1alpha1"), "kind": kind, "metadata": {"name": name, "namespace": "default"}, "spec": spec});
    if let Some(external_name) = external_name {
        object["metadata"]["annotations"] = json!({"crossplane.io/external-name": external_name});
    }
    object
}

fn ready_and_synced(o: &Value) -> bool {
    conditions::is_true(o, "Ready") && conditions::is_true(o, "Synced")
}

fn quoted(value: &str) -> String {
    format!("'{}'", value.replace('\\', "\\\\").replace('\'', "''"))
}

#[tokio::test]
async fn namespaced_mysql_kinds_keep_odd_names_and_follow_their_grants() {
    let db = MariaDb::shared();
    let (_server, runtime) = start().await;
    let _provider = install(&runtime, &SqlProvider { poll_interval: Duration::from_secs(1) }, PACKAGE).await;
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "maria-admin", "namespace": "default"},
        "stringData": {"user": "root", "pw": PASSWORD, "endpoint": "127.0.0.1", "port": db.port.to_string()}
    });
    runtime.kube.create(&Kind::new("", "v1", "Secret", "secrets", true), &secret).await.unwrap();
    // Keys renamed by secretKeyMapping; the namespaced kinds use the ClusterProviderConfig
    // named default.
    let config = json!({
        "apiVersion": format!("{GROUP}/v1alpha1"), "kind": "ClusterProviderConfig", "metadata": {"name": "default"},
        "spec": {"credentials": {"source": "MySQLConnectionSecret", "connectionSecretRef": {"namespace": "default", "name": "maria-admin"},
                 "secretKeyMapping": {"username": "user", "password": "pw"}}}
    });
    runtime.kube.create(&kind("ClusterProviderConfig"), &config).await.unwrap();

    let odd_db = "od`d'; DROP DATABASE mysql; --";
    let odd_user = "ap`p'\\x";
    let user_at_host = format!("{odd_user}@127.0.0.1");
    runtime.kube.create(&kind("Database"), &mr("Database", "odd", Some(odd_db), json!({"forProvider": {"defaultCharacterSet": "latin1"}}))).await.unwrap();
    let user = mr("User", "odd", Some(&user_at_host), json!({"forProvider": {"resourceOptions": {"maxUserConnections": 3}}, "writeConnectionSecretToRef": {"name": "odd-conn"}}));
    runtime.kube.create(&kind("User"), &user).await.unwrap();
    let grant = mr("Grant", "odd", None, json!({"forProvider": {"userRef": {"name": "odd"}, "databaseRef": {"name": "odd"}, "privileges": ["SELECT", "INSERT"]}}));
    runtime.kube.create(&kind("Grant"), &grant).await.unwrap();
    for k in ["Database", "User", "Grant"] {
        wait_object(&runtime, &kind(k), Some("default"), "odd", &format!("{k} odd Ready and Synced"), ready_and_synced).await;
    }
    assert_eq!(db.mysql(&format!("SELECT DEFAULT_CHARACTER_SET_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = {}", quoted(odd_db))), "latin1");
    assert_eq!(db.mysql("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'mysql'"), "1");
    assert_eq!(db.mysql(&format!("SELECT max_user_connections FROM mysql.user WHERE User = {} AND Host = '127.0.0.1'", quoted(odd_user))), "3");
    // information_schema spells a grantee 'user'@'host' with nothing inside escaped.
    let grantee = format!("'{odd_user}'@'127.0.0.1'");
    let privileges = || db.mysql(&format!("SELECT IFNULL(GROUP_CONCAT(PRIVILEGE_TYPE ORDER BY PRIVILEGE_TYPE), '') FROM information_schema.SCHEMA_PRIVILEGES WHERE GRANTEE = {}", quoted(&grantee)));
    assert_eq!(privileges(), "INSERT,SELECT");
    // The grant's references resolved to the external names, saved in the spec.
    let saved = runtime.kube.get(&kind("Grant"), Some("default"), "odd").await.unwrap().unwrap();
    assert_eq!(saved.pointer("/spec/forProvider/user").and_then(Value::as_str), Some(user_at_host.as_str()));
    assert_eq!(saved.pointer("/spec/forProvider/database").and_then(Value::as_str), Some(odd_db));

    // The connection Secret logs in.
    let details = wait_for("the connection secret", async || connection::read_secret(&runtime.kube, "default", "odd-conn").await.unwrap()).await;
    let password = String::from_utf8(details["password"].clone()).unwrap();
    assert_eq!(String::from_utf8(details["username"].clone()).unwrap(), odd_user);
    assert_eq!(db.mysql_as(odd_user, &password, "SELECT COUNT(*) FROM information_schema.SCHEMATA").unwrap(), "2", "information_schema and its own database");

    // The spec changes: a privilege is taken away and another given.
    runtime.kube.merge_patch(&kind("Grant"), Some("default"), "odd", &json!({"spec": {"forProvider": {"privileges": ["SELECT", "UPDATE"]}}})).await.unwrap();
    wait_for("the grant to follow its spec", async || (privileges() == "SELECT,UPDATE").then_some(())).await;

    // A privilege that is not upper-case words is refused with a condition naming it.
    let bad = mr("Grant", "bad", None, json!({"forProvider": {"user": user_at_host, "privileges": ["SELECT; DROP TABLE x"]}}));
    runtime.kube.create(&kind("Grant"), &bad).await.unwrap();
    let bad = wait_object(&runtime, &kind("Grant"), Some("default"), "bad", "Grant bad Synced=False", |o| {
        conditions::get(o, "Synced").is_some_and(|c| c.status == "False")
    })
    .await;
    let message = conditions::get(&bad, "Synced").unwrap().message;
    assert!(message.contains("invalid privilege \"SELECT; DROP TABLE x\""), "{message}");
    runtime.kube.delete(&kind("Grant"), Some("default"), "bad", &Default::default()).await.unwrap();

    // Deletes take everything back.
    for k in ["Grant", "User", "Database"] {
        runtime.kube.delete(&kind(k), Some("default"), "odd", &Default::default()).await.unwrap();
        wait_for(&format!("{k} odd to be gone"), async || runtime.kube.get(&kind(k), Some("default"), "odd").await.unwrap().is_none().then_some(())).await;
    }
    assert_eq!(db.mysql(&format!("SELECT COUNT(*) FROM mysql.user WHERE User = {}", quoted(odd_user))), "0");
    assert_eq!(db.mysql(&format!("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = {}", quoted(odd_db))), "0");
}
