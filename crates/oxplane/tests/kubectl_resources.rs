//! The real `kubectl` against `oxplane up`: CRDs and custom resources, Table output with
//! printer columns, patches of every type, selectors, chunked lists, watches and waits.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::Stdio;
use std::time::Duration;

use support::Server;

const WIDGET_CRD: &str = r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"widgets.example.com"},
 "spec":{"group":"example.com","scope":"Namespaced",
  "names":{"plural":"widgets","singular":"widget","kind":"Widget","shortNames":["wd"]},
  "versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{}},
   "additionalPrinterColumns":[
     {"name":"SIZE","type":"integer","jsonPath":".spec.size"},
     {"name":"COLOR","type":"string","jsonPath":".spec.color","priority":1},
     {"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}],
   "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}"#;

fn widget(name: &str, size: u32, labels: &str) -> String {
    format!(r#"{{"apiVersion":"example.com/v1","kind":"Widget","metadata":{{"name":"{name}","labels":{{{labels}}}}},"spec":{{"size":{size},"color":"red"}}}}"#)
}

fn with_widgets() -> Server {
    let server = Server::start();
    server.kubectl_stdin(&["create", "--validate=false", "-f", "-"], WIDGET_CRD);
    server.kubectl(&["wait", "--for=condition=Established", "crd/widgets.example.com", "--timeout=60s"]);
    for (name, size, labels) in [("a", 1, r#""tier":"web""#), ("b", 2, r#""tier":"db""#), ("c", 3, r#""tier":"web""#)] {
        server.kubectl_stdin(&["create", "--validate=false", "-f", "-"], &widget(name, size, labels));
    }
    server
}

fn columns(line: &str) -> Vec<String> {
    line.split_whitespace().map(String::from).collect()
}

#[test]
fn tables_show_printer_columns_and_wide_ones_only_with_wide() {
    let server = with_widgets();
    let out = server.kubectl(&["get", "widgets"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(columns(lines[0]), ["NAME", "SIZE", "AGE"]);
    assert_eq!(columns(lines[1])[..2], ["a".to_string(), "1".to_string()]);
    let wide = server.kubectl(&["get", "wd", "-o", "wide"]);
    assert_eq!(columns(wide.lines().next().unwrap()), ["NAME", "SIZE", "COLOR", "AGE"]);
    let sorted = server.kubectl(&["get", "wd", "--sort-by=.spec.size", "-o", "name"]);
    assert_eq!(sorted, "widget.example.com/a\nwidget.example.com/b\nwidget.example.com/c\n");
    let all = server.kubectl(&["get", "wd", "-A", "--no-headers"]);
    assert!(all.lines().all(|l| l.starts_with("default")), "{all}");
    let ns = server.kubectl(&["get", "ns", "default"]);
    assert_eq!(columns(ns.lines().next().unwrap()), ["NAME", "STATUS", "AGE"]);
    assert_eq!(columns(ns.lines().nth(1).unwrap())[..2], ["default".to_string(), "Active".to_string()]);
}

#[test]
fn selectors_and_chunked_lists() {
    let server = with_widgets();
    assert_eq!(server.kubectl(&["get", "wd", "-l", "tier=web", "-o", "name"]), "widget.example.com/a\nwidget.example.com/c\n");
    assert_eq!(server.kubectl(&["get", "wd", "-l", "tier notin (web)", "-o", "name"]), "widget.example.com/b\n");
    assert_eq!(server.kubectl(&["get", "wd", "--field-selector", "metadata.name=b", "-o", "name"]), "widget.example.com/b\n");
    let chunked = server.kubectl(&["get", "wd", "--chunk-size=1", "-o", "name"]);
    assert_eq!(chunked, "widget.example.com/a\nwidget.example.com/b\nwidget.example.com/c\n");
    let bad = server.kubectl_fails(&["get", "wd", "--field-selector", "spec.size=1"], "");
    assert!(bad.contains("field label not supported"), "{bad}");
}

#[test]
fn patches_of_every_type() {
    let server = with_widgets();
    server.kubectl(&["patch", "wd", "a", "--type", "merge", "-p", r#"{"spec":{"size":10}}"#]);
    server.kubectl(&["patch", "wd", "a", "--type", "json", "-p", r#"[{"op":"test","path":"/spec/size","value":10},{"op":"replace","path":"/spec/size","value":11}]"#]);
    let size = server.kubectl(&["get", "wd", "a", "-o", "jsonpath={.spec.size}"]);
    assert_eq!(size, "11");
    let failed = server.kubectl_fails(&["patch", "wd", "a", "--type", "json", "-p", r#"[{"op":"test","path":"/spec/size","value":1}]"#], "");
    assert!(failed.contains("Invalid") || failed.contains("test operation"), "{failed}");
    let strategic = server.kubectl_fails(&["patch", "wd", "a", "-p", r#"{"spec":{"size":1}}"#], "");
    assert!(strategic.contains("application/strategic-merge-patch+json is not supported"), "{strategic}");
    // Strategic merge works on built-in kinds.
    server.kubectl_stdin(&["create", "--validate=false", "-f", "-"], r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm"},"data":{"a":"1"}}"#);
    server.kubectl(&["patch", "configmap", "cm", "-p", r#"{"data":{"b":"2"}}"#]);
    assert_eq!(server.kubectl(&["get", "cm", "cm", "-o", "jsonpath={.data}"]), r#"{"a":"1","b":"2"}"#);
    server.kubectl(&["label", "wd", "a", "owner=me"]);
    assert_eq!(server.kubectl(&["get", "wd", "-l", "owner=me", "-o", "name"]), "widget.example.com/a\n");
}

#[test]
fn watch_prints_changes_and_wait_sees_conditions() {
    let server = with_widgets();
    // Changes are made only after the watch has printed the initial rows, so it is surely
    // watching; it is stopped once both changes were printed (or ends after a minute).
    let mut watch = server
        .kubectl_command(&["get", "wd", "-w", "--no-headers", "--request-timeout=60s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(watch.stdout.take().unwrap()));
    let mut rows: Vec<Vec<String>> = Vec::new();
    while rows.len() < 3 {
        rows.push(columns(&lines.next().unwrap().unwrap()));
    }
    server.kubectl(&["patch", "wd", "b", "--type", "merge", "-p", r#"{"spec":{"size":42}}"#]);
    server.kubectl(&["delete", "wd", "c"]);
    let seen_all = |rows: &[Vec<String>]| {
        rows.iter().any(|r| r[0] == "b" && r[1] == "42") && rows.iter().filter(|r| r[0] == "c").count() >= 2
    };
    for line in lines {
        rows.push(columns(&line.unwrap()));
        if seen_all(&rows) {
            break;
        }
    }
    let _ = watch.kill();
    watch.wait().unwrap();
    let text = format!("{rows:?}");
    assert!(rows.iter().any(|r| r[0] == "b" && r[1] == "42"), "{text}");
    assert!(rows.iter().filter(|r| r[0] == "c").count() >= 2, "the deletion shows as a row too: {text}");

    // kubectl wait on a jsonpath, satisfied by a later status write.
    let mut wait = server
        .kubectl_command(&["wait", "wd/a", "--for=jsonpath={.status.phase}=Done", "--timeout=60s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    server.kubectl(&["patch", "wd", "a", "--subresource=status", "--type", "merge", "-p", r#"{"status":{"phase":"Done"}}"#]);
    let status = wait.wait().unwrap();
    assert!(status.success());
    server.kubectl(&["delete", "wd", "a", "--wait=true"]);
    assert!(server.kubectl(&["get", "wd", "-o", "name"]).lines().all(|l| !l.ends_with("/a")));
}

#[test]
fn apply_twice_with_default_validation_and_explain() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let crd = dir.path().join("crd.json");
    std::fs::write(&crd, WIDGET_CRD).unwrap();
    assert!(server.kubectl(&["apply", "-f", crd.to_str().unwrap()]).contains("created"));
    assert!(server.kubectl(&["apply", "-f", crd.to_str().unwrap()]).contains("unchanged"));
    let cr = dir.path().join("w.json");
    std::fs::write(&cr, widget("w", 1, "")).unwrap();
    assert_eq!(server.kubectl(&["apply", "-f", cr.to_str().unwrap()]), "widget.example.com/w created\n");
    assert_eq!(server.kubectl(&["apply", "-f", cr.to_str().unwrap()]), "widget.example.com/w unchanged\n");
    std::fs::write(&cr, widget("w", 2, "")).unwrap();
    assert_eq!(server.kubectl(&["apply", "-f", cr.to_str().unwrap()]), "widget.example.com/w configured\n");
    assert_eq!(server.kubectl(&["get", "wd", "w", "-o", "jsonpath={.spec.size}"]), "2");
    // A built-in kind, applied as YAML, then changed (a strategic merge patch).
    let cm = dir.path().join("cm.yaml");
    std::fs::write(&cm, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  a: \"1\"\n").unwrap();
    assert_eq!(server.kubectl(&["apply", "-f", cm.to_str().unwrap()]), "configmap/app created\n");
    std::fs::write(&cm, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  b: \"2\"\n").unwrap();
    assert_eq!(server.kubectl(&["apply", "-f", cm.to_str().unwrap()]), "configmap/app configured\n");
    assert_eq!(server.kubectl(&["get", "cm", "app", "-o", "jsonpath={.data}"]), r#"{"b":"2"}"#, "apply removes what it no longer applies");
    let explain = server.kubectl(&["explain", "configmap.data"]);
    assert!(explain.contains("KIND:       ConfigMap") && explain.contains("map[string]string"), "{explain}");
    let explain = server.kubectl(&["explain", "widgets"]);
    assert!(explain.contains("KIND:       Widget") && explain.contains("GROUP:      example.com"), "{explain}");
}

#[test]
fn describe_shows_events_written_through_events_k8s_io() {
    let server = Server::start();
    server.kubectl_stdin(&["create", "--validate=false", "-f", "-"], r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"subject"}}"#);
    let uid = server.kubectl(&["get", "cm", "subject", "-o", "jsonpath={.metadata.uid}"]);
    let event = format!(
        r#"{{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{{"name":"subject.1"}},
            "eventTime":"2026-01-01T00:00:00.000000Z","reportingController":"oxplane-test","reportingInstance":"one",
            "action":"Reconcile","reason":"Reconciled","note":"everything converged","type":"Normal",
            "regarding":{{"apiVersion":"v1","kind":"ConfigMap","name":"subject","namespace":"default","uid":"{uid}"}}}}"#
    );
    server.kubectl_stdin(&["create", "--validate=false", "-f", "-"], &event);
    let described = server.kubectl(&["describe", "cm", "subject"]);
    assert!(described.contains("Events:"), "{described}");
    assert!(described.contains("Reconciled") && described.contains("everything converged"), "{described}");
    let events = server.kubectl(&["get", "events"]);
    assert!(events.contains("configmap/subject") && events.contains("Reconciled"), "{events}");
}
