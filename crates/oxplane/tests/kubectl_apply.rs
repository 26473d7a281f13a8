//! The real `kubectl` writing with server-side apply (twice, conflicting, forced), migrating
//! from client-side apply, and sending protobuf bodies (`kubectl create configmap|secret|...`).

use crate::support;

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

#[test]
fn kubectl_create_configmap_really_posts_protobuf() {
    let server = Server::start();
    let out = server.kubectl_command(&["create", "configmap", "x", "--from-literal=a=b", "-v=8"]).output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "configmap/x created\n");
    // The POST's request headers run from its line to the response status.
    let (_, post) = log.split_once("POST https://").unwrap_or_else(|| panic!("no POST in the log: {log}"));
    let (request, response) = post.split_once("Response Status:").unwrap();
    assert!(request.starts_with("127.0.0.1:") && request.contains("/api/v1/namespaces/default/configmaps?"), "{request}");
    assert!(request.lines().any(|l| l.trim_end().ends_with("Content-Type: application/vnd.kubernetes.protobuf")), "{request}");
    assert!(response.trim_start().starts_with("201 Created"), "{response}");
    // The body logged before the request is the protobuf envelope: "k8s\0", then a v1 ConfigMap.
    let (before, _) = log.split_once("POST https://").unwrap();
    let body = before.rsplit_once("\"Request Body\"").map(|(_, b)| b).unwrap_or_else(|| panic!("no request body: {log}"));
    assert!(body.contains("6b 38 73 00") && body.contains("|k8s..."), "{body}");
    let got = server.get(&["configmap", "x"]).unwrap();
    assert_eq!(got["data"], serde_json::json!({"a": "b"}));
    assert_eq!(managers(&server, "x").trim(), "kubectl-create/Update");
}
