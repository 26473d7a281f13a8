//! The real `kubectl` deleting things: cascades (foreground, background, orphan) through owner
//! references, finalizers holding objects, `delete --wait`, `wait --for=delete`, namespaces.

use crate::support;

use std::time::Duration;

use support::Server;

const WIDGET_CRD: &str = r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"widgets.example.com"},
 "spec":{"group":"example.com","scope":"Namespaced",
  "names":{"plural":"widgets","singular":"widget","kind":"Widget"},
  "versions":[{"name":"v1","served":true,"storage":true,
   "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}"#;

fn with_owner(name: &str) -> (Server, String) {
    let server = Server::start();
    server.kubectl_stdin(&["create", "-f", "-"], WIDGET_CRD);
    server.kubectl(&["wait", "--for=condition=Established", "crd/widgets.example.com", "--timeout=60s"]);
    server.kubectl_stdin(&["create", "-f", "-"], &format!(r#"{{"apiVersion":"example.com/v1","kind":"Widget","metadata":{{"name":"{name}"}},"spec":{{}}}}"#));
    let uid = server.kubectl(&["get", "widget", name, "-o", "jsonpath={.metadata.uid}"]);
    (server, uid)
}

fn dependent(server: &Server, name: &str, owner: &str, uid: &str, finalizer: Option<&str>) {
    let finalizers = finalizer.map(|f| format!(r#","finalizers":["{f}"]"#)).unwrap_or_default();
    server.kubectl_stdin(&["create", "-f", "-"], &format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}"{finalizers},"ownerReferences":[{{"apiVersion":"example.com/v1","kind":"Widget","name":"{owner}","uid":"{uid}","blockOwnerDeletion":true}}]}},"data":{{"k":"v"}}}}"#
    ));
}

fn exists(server: &Server, args: &[&str]) -> bool {
    let mut full = vec!["get"];
    full.extend_from_slice(args);
    full.push("--ignore-not-found");
    full.extend_from_slice(&["-o", "name"]);
    !server.kubectl(&full).trim().is_empty()
}

#[test]
fn foreground_cascade_waits_for_a_held_dependent() {
    let (server, uid) = with_owner("fg");
    dependent(&server, "fg-held", "fg", &uid, Some("example.com/hold"));
    dependent(&server, "fg-free", "fg", &uid, None);
    server.kubectl(&["delete", "widget", "fg", "--cascade=foreground", "--wait=false"]);
    server.kubectl(&["wait", "--for=delete", "configmap/fg-free", "--timeout=60s"]);
    let finalizers = server.kubectl(&["get", "widget", "fg", "-o", "jsonpath={.metadata.finalizers}"]);
    assert!(finalizers.contains("foregroundDeletion"), "{finalizers}");
    assert!(!server.kubectl(&["get", "widget", "fg", "-o", "jsonpath={.metadata.deletionTimestamp}"]).is_empty());

    server.kubectl(&["patch", "configmap", "fg-held", "--type=merge", "-p", r#"{"metadata":{"finalizers":null}}"#]);
    server.kubectl(&["wait", "--for=delete", "widget/fg", "--timeout=60s"]);
    assert!(!exists(&server, &["configmap", "fg-held"]));
}

#[test]
fn background_and_orphan_cascades() {
    let (server, uid) = with_owner("bg");
    dependent(&server, "bg-dep", "bg", &uid, None);
    // `kubectl delete` waits for the object to go by default.
    let out = server.kubectl(&["delete", "widget", "bg"]);
    assert!(out.contains("deleted"), "{out}");
    assert!(!exists(&server, &["widget", "bg"]));
    server.kubectl(&["wait", "--for=delete", "configmap/bg-dep", "--timeout=60s"]);

    server.kubectl_stdin(&["create", "-f", "-"], r#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"or"},"spec":{}}"#);
    let uid = server.kubectl(&["get", "widget", "or", "-o", "jsonpath={.metadata.uid}"]);
    dependent(&server, "or-dep", "or", &uid, None);
    server.kubectl(&["delete", "widget", "or", "--cascade=orphan"]);
    assert!(!exists(&server, &["widget", "or"]));
    assert!(exists(&server, &["configmap", "or-dep"]));
    let owners = server.kubectl(&["get", "configmap", "or-dep", "-o", "jsonpath={.metadata.ownerReferences}"]);
    assert!(owners.trim().is_empty(), "owner reference stripped: {owners}");
}

#[test]
fn deleting_a_namespace_waits_for_its_content() {
    let server = Server::start();
    server.kubectl(&["create", "namespace", "scratch"]);
    server.kubectl_stdin(&["create", "-n", "scratch", "-f", "-"], r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"held","finalizers":["example.com/hold"]}}"#);
    server.kubectl(&["delete", "namespace", "scratch", "--wait=false"]);
    let phase = server.kubectl(&["get", "namespace", "scratch", "-o", "jsonpath={.status.phase}"]);
    assert_eq!(phase, "Terminating");
    let refused = server.kubectl_fails(&["create", "-n", "scratch", "-f", "-"], r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"late"}}"#);
    assert!(refused.contains("being terminated"), "{refused}");
    server.kubectl(&["patch", "-n", "scratch", "configmap", "held", "--type=merge", "-p", r#"{"metadata":{"finalizers":null}}"#]);
    server.kubectl(&["wait", "--for=delete", "namespace/scratch", "--timeout=60s"]);
    let refused = server.kubectl_fails(&["delete", "namespace", "default"], "");
    assert!(refused.contains("may not be deleted"), "{refused}");
}

fn field(server: &Server, object: &str, path: &str) -> String {
    server.kubectl(&["get", object, "-o", &format!("jsonpath={{{path}}}")])
}

#[test]
fn explicit_background_cascade_collects_dependents_and_waits_on_their_finalizers() {
    let (server, uid) = with_owner("bgx");
    dependent(&server, "bgx-free", "bgx", &uid, None);
    dependent(&server, "bgx-held", "bgx", &uid, Some("example.com/hold"));
    let out = server.kubectl_command(&["delete", "widget", "bgx", "--cascade=background", "-v=8"]).output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "widget.example.com \"bgx\" deleted\n");
    // kubectl logs the DeleteOptions body just before the DELETE line.
    let (before, after) = log.split_once("DELETE https://").unwrap_or_else(|| panic!("no DELETE: {log}"));
    assert!(after.contains("/namespaces/default/widgets/bgx"), "{after}");
    let body = before.rsplit_once("\"Request Body\"").map(|(_, b)| b).unwrap_or_else(|| panic!("no body: {log}"));
    assert!(body.contains(r#"{"propagationPolicy":"Background"}"#), "kubectl sent the policy: {body}");
    // Background: the owner goes at once, its dependents after.
    assert!(!exists(&server, &["widget", "bgx"]));
    server.kubectl(&["wait", "--for=delete", "configmap/bgx-free", "--timeout=60s"]);
    // The held dependent is being deleted, but stays until its finalizer is removed.
    support::within(Duration::from_secs(60), "the held dependent is deleted", || !field(&server, "configmap/bgx-held", ".metadata.deletionTimestamp").is_empty());
    assert_eq!(field(&server, "configmap/bgx-held", ".metadata.finalizers"), r#"["example.com/hold"]"#);
    assert_eq!(field(&server, "configmap/bgx-held", ".data.k"), "v");
    server.kubectl(&["patch", "configmap", "bgx-held", "--type=merge", "-p", r#"{"metadata":{"finalizers":null}}"#]);
    server.kubectl(&["wait", "--for=delete", "configmap/bgx-held", "--timeout=60s"]);
}

#[test]
fn orphan_cascade_strips_the_owner_from_a_finalized_dependent_without_deleting_it() {
    let (server, uid) = with_owner("orx");
    dependent(&server, "orx-held", "orx", &uid, Some("example.com/hold"));
    dependent(&server, "orx-free", "orx", &uid, None);
    server.kubectl(&["delete", "widget", "orx", "--cascade=orphan"]);
    assert!(!exists(&server, &["widget", "orx"]));
    for name in ["orx-held", "orx-free"] {
        let object = format!("configmap/{name}");
        assert!(field(&server, &object, ".metadata.ownerReferences").is_empty(), "{name}: owner reference stripped");
        assert!(field(&server, &object, ".metadata.deletionTimestamp").is_empty(), "{name} is not being deleted");
    }
    assert_eq!(field(&server, "configmap/orx-held", ".metadata.finalizers"), r#"["example.com/hold"]"#);
    // Removing the finalizer of an orphan does not delete it: nothing owns it any more.
    server.kubectl(&["patch", "configmap", "orx-held", "--type=merge", "-p", r#"{"metadata":{"finalizers":null}}"#]);
    // Give the collector time to act: it must leave the orphans alone.
    std::thread::sleep(Duration::from_secs(2));
    for name in ["orx-held", "orx-free"] {
        assert!(exists(&server, &["configmap", name]), "{name} survives");
        assert_eq!(field(&server, &format!("configmap/{name}"), ".data.k"), "v");
        assert!(field(&server, &format!("configmap/{name}"), ".metadata.deletionTimestamp").is_empty(), "{name}");
    }
}
