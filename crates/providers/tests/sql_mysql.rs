//! provider-sql's MySQL side against a real MariaDB (one per test binary, see
//! `oxplane_providers::sql::testing::mariadb`): the namespaced kinds with a
//! ClusterProviderConfig, account and database names that look like SQL staying names, a
//! password rotated by `passwordRotationTrigger`, an account moved from a plugin to a
//! password, a Grant that follows its spec (privileges added and taken away), errors as
//! conditions that name the cause, and deletes that take everything back.

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

    // passwordRotationTrigger later than lastPasswordChange rotates the generated password:
    // the connection Secret gets the new one, which logs in, and the old one is refused.
    let saved = runtime.kube.get(&kind("User"), Some("default"), "odd").await.unwrap().unwrap();
    let last = saved.pointer("/status/atProvider/lastPasswordChange").and_then(Value::as_str).expect("lastPasswordChange set at create").to_string();
    let trigger = (last.parse::<jiff::Timestamp>().unwrap() + jiff::SignedDuration::from_secs(1)).to_string();
    runtime.kube.merge_patch(&kind("User"), Some("default"), "odd", &json!({"spec": {"forProvider": {"passwordRotationTrigger": trigger}}})).await.unwrap();
    let rotated = wait_for("the password to rotate", async || {
        let details = connection::read_secret(&runtime.kube, "default", "odd-conn").await.unwrap()?;
        let new = String::from_utf8(details.get("password")?.clone()).ok()?;
        (new != password).then_some(new)
    })
    .await;
    assert_eq!(db.mysql_as(odd_user, &rotated, "SELECT 1").unwrap(), "1");
    assert!(db.mysql_as(odd_user, &password, "SELECT 1").is_err(), "the old password still works");
    // The status is written after the Secret: lastPasswordChange moves to the rotation's time.
    let trigger_time = trigger.parse::<jiff::Timestamp>().unwrap();
    wait_object(&runtime, &kind("User"), Some("default"), "odd", "lastPasswordChange to record the rotation", |o| {
        o.pointer("/status/atProvider/lastPasswordChange").and_then(Value::as_str).and_then(|t| t.parse::<jiff::Timestamp>().ok()).is_some_and(|t| t >= trigger_time)
    })
    .await;

    // An account authenticating by a plugin reports it; when the spec stops naming one, the
    // account gets a generated password, published in its Secret.
    let plugged = mr("User", "plugged", Some("plugged@127.0.0.1"), json!({"forProvider": {"authenticationPlugin": {"name": "unix_socket"}}, "writeConnectionSecretToRef": {"name": "plugged-conn"}}));
    runtime.kube.create(&kind("User"), &plugged).await.unwrap();
    let plugged = wait_object(&runtime, &kind("User"), Some("default"), "plugged", "User plugged Ready", ready_and_synced).await;
    assert_eq!(plugged.pointer("/status/atProvider/authenticationPlugin"), Some(&json!({"name": "unix_socket"})), "{plugged}");
    assert_eq!(db.mysql("SELECT plugin FROM mysql.user WHERE User = 'plugged'"), "unix_socket");
    runtime.kube.merge_patch(&kind("User"), Some("default"), "plugged", &json!({"spec": {"forProvider": {"authenticationPlugin": null}}})).await.unwrap();
    let generated = wait_for("a password for the account", async || {
        let details = connection::read_secret(&runtime.kube, "default", "plugged-conn").await.unwrap()?;
        String::from_utf8(details.get("password")?.clone()).ok().filter(|p| !p.is_empty())
    })
    .await;
    assert_eq!(db.mysql_as("plugged", &generated, "SELECT CURRENT_USER()").unwrap(), "plugged@127.0.0.1");
    let plugged = wait_object(&runtime, &kind("User"), Some("default"), "plugged", "no plugin reported", |o| o.pointer("/status/atProvider/authenticationPlugin").is_none()).await;
    assert!(plugged.pointer("/status/atProvider/lastPasswordChange").is_some(), "{plugged}");
    runtime.kube.delete(&kind("User"), Some("default"), "plugged", &Default::default()).await.unwrap();

    // A password of one's own and a plugin at once is refused when applied.
    let both = mr("User", "both", None, json!({"forProvider": {"authenticationPlugin": {"name": "unix_socket"}, "passwordSecretRef": {"name": "x", "key": "y"}}}));
    let refused = runtime.kube.create(&kind("User"), &both).await.unwrap_err().to_string();
    assert!(refused.contains("authenticationPlugin and passwordSecretRef are mutually exclusive"), "{refused}");

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

/// What a ProviderConfig against the TLS-only server should come to.
enum Outcome {
    /// Its Database becomes Ready.
    Ready,
    /// Its Database is Synced=False with a message holding this.
    Refused(&'static str),
}

#[tokio::test]
async fn mysql_tls_modes_against_a_server_that_requires_tls() {
    use oxplane_functions::grpc::tls::CertificateAuthority;
    let db = MariaDb::shared_tls();
    let tls = db.tls.as_ref().unwrap();
    let (_server, runtime) = start().await;
    let _provider = install(&runtime, &SqlProvider { poll_interval: Duration::from_secs(1) }, PACKAGE).await;
    // An account that must also present a client certificate of the server's CA.
    db.mysql(&format!("CREATE USER 'certified'@'127.0.0.1' IDENTIFIED BY '{PASSWORD}' REQUIRE X509; GRANT ALL PRIVILEGES ON *.* TO 'certified'@'127.0.0.1'"));
    let other_dir = tempfile::tempdir().unwrap();
    let other_ca = CertificateAuthority::load_or_create(other_dir.path()).unwrap();
    let secret_kind = Kind::new("", "v1", "Secret", "secrets", true);
    let login = |name: &str, user: &str| {
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "default"},
               "stringData": {"username": user, "password": PASSWORD, "endpoint": "127.0.0.1", "port": db.port.to_string()}})
    };
    runtime.kube.create(&secret_kind, &login("tls-root", "root")).await.unwrap();
    runtime.kube.create(&secret_kind, &login("tls-certified", "certified")).await.unwrap();
    let pki = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tls-pki", "namespace": "default"}, "stringData": {
        "ca.crt": tls.ca_pem, "other-ca.crt": other_ca.ca_pem(), "tls.crt": tls.client_cert_pem, "tls.key": tls.client_key_pem
    }});
    runtime.kube.create(&secret_kind, &pki).await.unwrap();
    let key = |key: &str| json!({"secretRef": {"namespace": "default", "name": "tls-pki", "key": key}});

    let cases: Vec<(&str, &str, Option<&str>, Option<Value>, Outcome)> = vec![
        // MariaDB refuses a plain connection under --require-secure-transport as a failed login.
        ("plain", "tls-root", None, None, Outcome::Refused("Access denied")),
        // Verifying against the host's trust store, which does not hold the server's CA.
        ("verify", "tls-root", Some("true"), None, Outcome::Refused("invalid peer certificate: UnknownIssuer")),
        ("skip-verify", "tls-root", Some("skip-verify"), None, Outcome::Ready),
        ("preferred", "tls-root", Some("preferred"), None, Outcome::Ready),
        ("custom-ca", "tls-root", Some("custom"), Some(json!({"caCert": key("ca.crt")})), Outcome::Ready),
        ("custom-other-ca", "tls-root", Some("custom"), Some(json!({"caCert": key("other-ca.crt")})), Outcome::Refused("invalid peer certificate")),
        ("custom-insecure", "tls-root", Some("custom"), Some(json!({"caCert": key("other-ca.crt"), "insecureSkipVerify": true})), Outcome::Ready),
        (
            "custom-client",
            "tls-certified",
            Some("custom"),
            Some(json!({"caCert": key("ca.crt"), "clientCert": key("tls.crt"), "clientKey": key("tls.key")})),
            Outcome::Ready,
        ),
        ("custom-no-client", "tls-certified", Some("custom"), Some(json!({"caCert": key("ca.crt")})), Outcome::Refused("Access denied")),
        ("config-not-custom", "tls-root", Some("true"), Some(json!({"caCert": key("ca.crt")})), Outcome::Refused("tlsConfig is allowed only when tls is custom")),
    ];
    let config_kind = Kind::new("mysql.sql.crossplane.io", "v1alpha1", "ProviderConfig", "providerconfigs", false);
    let database_kind = Kind::new("mysql.sql.crossplane.io", "v1alpha1", "Database", "databases", false);
    for (name, secret, mode, tls_config, _) in &cases {
        let mut config = json!({
            "apiVersion": "mysql.sql.crossplane.io/v1alpha1", "kind": "ProviderConfig", "metadata": {"name": format!("tls-{name}")},
            "spec": {"credentials": {"source": "MySQLConnectionSecret", "connectionSecretRef": {"namespace": "default", "name": secret}}}
        });
        if let Some(mode) = mode {
            config["spec"]["tls"] = json!(mode);
        }
        if let Some(tls_config) = tls_config {
            config["spec"]["tlsConfig"] = tls_config.clone();
        }
        runtime.kube.create(&config_kind, &config).await.unwrap();
        let database = json!({
            "apiVersion": "mysql.sql.crossplane.io/v1alpha1", "kind": "Database",
            "metadata": {"name": format!("tls-{name}"), "annotations": {"crossplane.io/external-name": format!("tls_{}", name.replace('-', "_"))}},
            "spec": {"providerConfigRef": {"name": format!("tls-{name}")}, "forProvider": {}}
        });
        runtime.kube.create(&database_kind, &database).await.unwrap();
    }
    // A namespaced ProviderConfig reads its connection and TLS Secrets in its own namespace.
    let namespaced_config = json!({
        "apiVersion": format!("{GROUP}/v1alpha1"), "kind": "ProviderConfig", "metadata": {"name": "tls-custom", "namespace": "default"},
        "spec": {"credentials": {"source": "MySQLConnectionSecret", "connectionSecretRef": {"name": "tls-certified"}}, "tls": "custom",
                 "tlsConfig": {"caCert": key("ca.crt"), "clientCert": key("tls.crt"), "clientKey": key("tls.key")}}
    });
    runtime.kube.create(&kind("ProviderConfig"), &namespaced_config).await.unwrap();
    let namespaced_database = mr("Database", "tls-namespaced", Some("tls_namespaced"), json!({"providerConfigRef": {"kind": "ProviderConfig", "name": "tls-custom"}, "forProvider": {}}));
    runtime.kube.create(&kind("Database"), &namespaced_database).await.unwrap();
    wait_object(&runtime, &kind("Database"), Some("default"), "tls-namespaced", "the namespaced Database Ready over TLS", ready_and_synced).await;
    assert_eq!(db.mysql("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'tls_namespaced'"), "1");

    let server = format!("127.0.0.1:{}", db.port);
    let mut wrong = Vec::new();
    for (name, _, _, _, outcome) in &cases {
        let what = format!("tls-{name}");
        let settled = wait_object(&runtime, &database_kind, None, &what, &format!("{what} to settle"), |o| {
            ready_and_synced(o) || conditions::get(o, "Synced").is_some_and(|c| c.status == "False")
        })
        .await;
        let message = conditions::get(&settled, "Synced").map(|c| c.message).unwrap_or_default();
        match outcome {
            Outcome::Ready => {
                let external = format!("tls_{}", name.replace('-', "_"));
                let made = db.mysql(&format!("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = '{external}'"));
                if !ready_and_synced(&settled) || made != "1" {
                    wrong.push(format!("{what}: not made ({message})"));
                }
            }
            Outcome::Refused(cause) => {
                let names_server = name.starts_with("config-") || message.contains(&server);
                if conditions::is_true(&settled, "Ready") || !message.contains(cause) || !names_server || message.contains(PASSWORD) {
                    wrong.push(format!("{what}: wanted a refusal naming {server} and {cause:?}, got: {message}"));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
