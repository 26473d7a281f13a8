//! The real `kubectl` writing with server-side apply (twice, conflicting, forced), migrating
//! from client-side apply, and sending protobuf bodies (`kubectl create configmap|secret|...`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use support::Server;

const CM: &str = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ssa"},"data":{"color":"red","size":"1"}}"#;

fn managers(server: &Server, name: &str) -> String {
    server.kubectl(&["get", "configmap", name, "-o", "jsonpath={range .metadata.managedFields[*]}{.manager}/{.operation} {end}"])
}

#[test]
fn server_side_apply_twice_with_conflicts_and_force() {
    let server = Server::start();
    let out = server.kubectl_stdin(&["apply", "--server-side", "-f", "-"], CM);
    assert!(out.contains("serverside-applied"), "{out}");
    let out = server.kubectl_stdin(&["apply", "--server-side", "-f", "-"], CM);
    assert!(out.contains("serverside-applied"), "{out}");
    assert_eq!(managers(&server, "ssa").trim(), "kubectl/Apply");

    // Another manager changing an owned field conflicts, until forced.
    let other = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ssa"},"data":{"color":"blue"}}"#;
    let refused = server.kubectl_fails(&["apply", "--server-side", "--field-manager=other", "-f", "-"], other);
    assert!(refused.contains("conflict") && refused.contains(".data.color"), "{refused}");
    server.kubectl_stdin(&["apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f", "-"], other);
    assert_eq!(server.kubectl(&["get", "configmap", "ssa", "-o", "jsonpath={.data.color}"]), "blue");

    // kubectl's own manager dropping a field it alone owns removes it (color stays: other owns it).
    let fewer = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ssa"},"data":{"color":"blue"}}"#;
    server.kubectl_stdin(&["apply", "--server-side", "-f", "-"], fewer);
    assert_eq!(server.kubectl(&["get", "configmap", "ssa", "-o", "jsonpath={.data}"]), r#"{"color":"blue"}"#);
}

#[test]
fn client_side_apply_migrates_to_server_side() {
    let server = Server::start();
    let out = server.kubectl_stdin(&["apply", "-f", "-"], CM);
    assert!(out.contains("created"), "{out}");
    assert!(managers(&server, "ssa").contains("kubectl-client-side-apply/Update"));
    let out = server.kubectl_stdin(&["apply", "--server-side", "-f", "-"], CM);
    assert!(out.contains("serverside-applied"), "{out}");
    // After kubectl's migration the server-side manager owns what client-side apply owned.
    let after = managers(&server, "ssa");
    assert!(after.contains("kubectl/Apply"), "{after}");
    // A later client-side apply still works on the migrated object.
    server.kubectl_stdin(&["apply", "-f", "-"], &CM.replace(r#""size":"1""#, r#""size":"2""#));
    assert_eq!(server.kubectl(&["get", "configmap", "ssa", "-o", "jsonpath={.data.size}"]), "2");
}

#[test]
fn kubectl_create_sends_protobuf_bodies() {
    let server = Server::start();
    server.kubectl(&["create", "configmap", "lit", "--from-literal=a=b", "--from-literal=c=d"]);
    assert_eq!(server.kubectl(&["get", "configmap", "lit", "-o", "jsonpath={.data}"]), r#"{"a":"b","c":"d"}"#);
    server.kubectl(&["create", "secret", "generic", "sec", "--from-literal=password=hunter2"]);
    assert_eq!(server.kubectl(&["get", "secret", "sec", "-o", "jsonpath={.data.password}"]), "aHVudGVyMg==");
    server.kubectl(&["create", "namespace", "made"]);
    assert_eq!(server.kubectl(&["get", "namespace", "made", "-o", "jsonpath={.status.phase}"]), "Active");
    server.kubectl(&["create", "serviceaccount", "robot", "-n", "made"]);
    assert!(!server.kubectl(&["get", "serviceaccount", "robot", "-n", "made", "-o", "name"]).is_empty());
    let dry = server.kubectl(&["create", "configmap", "dry", "--from-literal=x=y", "--dry-run=server", "-o", "name"]);
    assert_eq!(dry.trim(), "configmap/dry");
    assert!(server.kubectl(&["get", "configmap", "dry", "--ignore-not-found", "-o", "name"]).trim().is_empty());
    assert!(managers(&server, "lit").contains("kubectl-create/Update"));
}
