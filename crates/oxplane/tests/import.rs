//! `oxplane import`: existing external resources adopted into managed resources. A PostgreSQL
//! role and database made with psql (the shared PostgreSQL of the test process) are observed,
//! their observed spec printed, and taken over once confirmed (and only then: answering no
//! leaves the resource observe-only, untouched); a missing one leaves nothing behind; a
//! ConfigMap made with kubectl is adopted by a provider-kubernetes Object. What is taken over is
//! managed: a change made by hand is reverted.

use crate::support;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use oxplane_providers::sql::testing::{PASSWORD, Postgres};
use serde_json::Value;
use support::{Server, within};

/// Runs `oxplane import ARGS` against `server` with `stdin`: (success, stdout, stderr).
fn import(server: &Server, args: &[&str], stdin: &str) -> (bool, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_oxplane"))
        .arg("import")
        .args(args)
        .arg("--kubeconfig")
        .arg(server.kubeconfig())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn policies(object: &Value) -> Vec<String> {
    object["spec"]["managementPolicies"].as_array().unwrap().iter().map(|p| p.as_str().unwrap().to_string()).collect()
}

fn nudge(server: &Server, what: &str, token: &str) {
    server.kubectl(&["annotate", "--overwrite", what, &format!("crossplane.io/reconcile-requested-at={token}")]);
}

#[test]
fn postgresql_roles_and_databases_made_by_hand_are_observed_then_taken_over_once_confirmed() {
    let pg = Postgres::shared();
    pg.psql("postgres", "CREATE ROLE \"imp-owner\" NOLOGIN CONNECTION LIMIT 7");
    pg.psql("postgres", "CREATE DATABASE \"imp-db\" OWNER \"imp-owner\" CONNECTION LIMIT 12");
    let server = Server::start_with(&["--provider", "provider-sql"]);
    server.kubectl(&["wait", "--for=condition=Healthy", "provider/provider-sql", "--timeout=90s"]);
    server.apply(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db-conn\n  namespace: default\nstringData:\n  username: postgres\n  password: {PASSWORD}\n  endpoint: 127.0.0.1\n  port: \"{}\"\n\
---\napiVersion: postgresql.sql.crossplane.io/v1alpha1\nkind: ProviderConfig\nmetadata:\n  name: default\nspec:\n  sslMode: disable\n  credentials:\n    source: PostgreSQLConnectionSecret\n    connectionSecretRef:\n      namespace: default\n      name: db-conn\n",
        pg.port
    ));

    // The database: observed and shown, but the answer is no: it stays observe-only.
    let (ok, out, err) = import(&server, &["database.postgresql.sql.crossplane.io", "imp-db"], "n\n");
    assert!(ok, "{err}");
    assert!(out.starts_with("spec:\n"), "{out}");
    for line in ["    connectionLimit: 12\n", "    owner: imp-owner\n", "  managementPolicies:\n  - '*'\n"] {
        assert!(out.contains(line), "{line:?} in {out}");
    }
    assert!(err.contains("Take over \"imp-db\" with this spec? [y/N]") && err.contains("stays observe-only"), "{err}");
    let database = server.get(&["database.postgresql.sql.crossplane.io/imp-db"]).unwrap();
    assert_eq!(policies(&database), ["Observe", "LateInitialize"]);
    assert_eq!(database["metadata"]["annotations"]["crossplane.io/external-name"], "imp-db");

    // Asked again with --yes, it is taken over with the observed spec, and managed: a change
    // by hand is reverted.
    let (ok, _, err) = import(&server, &["database.postgresql.sql.crossplane.io", "imp-db", "--yes"], "");
    assert!(ok, "{err}");
    assert!(err.contains("Database/imp-db manages \"imp-db\" now"), "{err}");
    let database = server.get(&["database.postgresql.sql.crossplane.io/imp-db"]).unwrap();
    assert_eq!(policies(&database), ["*"]);
    assert_eq!(database["spec"]["forProvider"]["connectionLimit"], 12);
    assert_eq!(database["spec"]["forProvider"]["owner"], "imp-owner");
    assert_eq!(pg.psql("postgres", "SELECT pg_get_userbyid(datdba), datconnlimit FROM pg_database WHERE datname = 'imp-db'"), "imp-owner|12");
    pg.psql("postgres", "ALTER DATABASE \"imp-db\" CONNECTION LIMIT 3");
    nudge(&server, "database.postgresql.sql.crossplane.io/imp-db", "after-import");
    within(Duration::from_secs(60), "the hand-made change to be reverted", || {
        pg.psql("postgres", "SELECT datconnlimit FROM pg_database WHERE datname = 'imp-db'") == "12"
    });

    // The role, with --yes at once, under another name.
    let (ok, out, err) = import(&server, &["role.postgresql.sql.crossplane.io", "imp-owner", "--name", "owner", "--yes"], "");
    assert!(ok, "{err}");
    assert!(out.contains("    connectionLimit: 7\n"), "{out}");
    let role = server.get(&["role.postgresql.sql.crossplane.io/owner"]).unwrap();
    assert_eq!(policies(&role), ["*"]);
    assert_eq!(role["metadata"]["annotations"]["crossplane.io/external-name"], "imp-owner");
    assert_eq!(role["spec"]["forProvider"]["privileges"]["login"], false);
    assert_eq!(pg.psql("postgres", "SELECT rolcanlogin, rolconnlimit FROM pg_roles WHERE rolname = 'imp-owner'"), "f|7");

    // A database that does not exist: an error, and nothing is left behind.
    let (ok, _, err) = import(&server, &["database.postgresql.sql.crossplane.io", "imp-missing", "--yes"], "");
    assert!(!ok);
    assert!(err.contains("external resource does not exist") && err.contains("Database/imp-missing is deleted again"), "{err}");
    within(Duration::from_secs(30), "the observing resource to be gone", || server.get(&["database.postgresql.sql.crossplane.io/imp-missing"]).is_none());
    assert_eq!(pg.psql("postgres", "SELECT count(*) FROM pg_database WHERE datname = 'imp-missing'"), "0");

    // Not a managed resource kind; a name taken by another resource.
    let (ok, _, err) = import(&server, &["configmap", "x"], "");
    assert!(!ok && err.contains("configmaps is not a managed resource kind"), "{err}");
    let (ok, _, err) = import(&server, &["database.postgresql.sql.crossplane.io", "other-db", "--name", "imp-db", "--yes"], "");
    assert!(!ok && err.contains("Database/imp-db exists already"), "{err}");

    // Deleting the imported resources deletes what they manage now.
    server.kubectl(&["delete", "database.postgresql.sql.crossplane.io/imp-db", "role.postgresql.sql.crossplane.io/owner", "--timeout=60s"]);
    assert_eq!(pg.psql("postgres", "SELECT count(*) FROM pg_database WHERE datname = 'imp-db'"), "0");
}

#[test]
fn a_config_map_made_with_kubectl_is_adopted_by_a_kubernetes_object() {
    let server = Server::start_with(&["--provider", "provider-kubernetes"]);
    server.kubectl(&["wait", "--for=condition=Healthy", "provider/provider-kubernetes", "--timeout=90s"]);
    server.apply("apiVersion: kubernetes.crossplane.io/v1alpha1\nkind: ProviderConfig\nmetadata:\n  name: local\nspec:\n  credentials:\n    source: InjectedIdentity\n");
    server.kubectl(&["create", "configmap", "settings", "-n", "default", "--from-literal=colour=blue"]);
    let args = [
        "object.kubernetes.crossplane.io",
        "settings",
        "--provider-config",
        "local",
        "--set",
        "manifest.apiVersion=v1",
        "--set",
        "manifest.kind=ConfigMap",
        "--set",
        "manifest.metadata.namespace=default",
        "--yes",
    ];
    let (ok, out, err) = import(&server, &args, "");
    assert!(ok, "{err}");
    assert!(out.contains("      data:\n        colour: blue\n"), "{out}");
    assert!(!out.contains("resourceVersion") && !out.contains("uid:") && !out.contains("managedFields"), "{out}");
    let object = server.get(&["object.kubernetes.crossplane.io/settings"]).unwrap();
    assert_eq!(policies(&object), ["*"]);
    assert_eq!(object["spec"]["forProvider"]["manifest"]["data"]["colour"], "blue");
    // Managed now: a change made with kubectl is reverted.
    server.kubectl(&["patch", "configmap", "settings", "-n", "default", "--type=merge", "-p", r#"{"data":{"colour":"red"}}"#]);
    nudge(&server, "object.kubernetes.crossplane.io/settings", "after-import");
    within(Duration::from_secs(60), "the ConfigMap to be reverted", || {
        server.get(&["configmap", "settings", "-n", "default"]).is_some_and(|c| c["data"]["colour"] == "blue")
    });
}
