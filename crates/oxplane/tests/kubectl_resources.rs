//! The real `kubectl` against `oxplane up`: CRDs and custom resources, Table output with
//! printer columns, patches of every type, selectors, chunked lists, watches and waits.

use crate::support;

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

/// A kind nobody serves yet (a composite applied before its XRD is established): kubectl's own
/// "no matches for kind" answer, as against kube-apiserver, for apply and create alike — not a
/// validation failure about a resource the server could not find.
#[test]
fn an_unknown_kind_gets_kubectls_no_matches_message() {
    let server = Server::start();
    let ghost = "apiVersion: nothere.example.org/v1\nkind: Ghost\nmetadata:\n  name: g\n";
    for verb in ["apply", "create"] {
        let stderr = server.kubectl_fails(&[verb, "-f", "-"], ghost);
        assert!(stderr.contains(r#"no matches for kind "Ghost" in version "nothere.example.org/v1""#), "{verb}: {stderr}");
        assert!(stderr.contains("ensure CRDs are installed first"), "{verb}: {stderr}");
    }
    // Known kinds are still validated against their schema on the server.
    let stderr = server.kubectl_fails(&["apply", "-f", "-"], "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\nbogus: 1\n");
    assert!(stderr.contains(r#"unknown field "bogus""#), "{stderr}");
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

/// Runs kubectl with `-v=6` (request lines in the log), asserting success; returns (stdout, log).
fn kubectl_logged(server: &Server, args: &[&str]) -> (String, String) {
    let mut all = args.to_vec();
    all.push("-v=6");
    let out = server.kubectl_command(&all).output().unwrap();
    assert!(out.status.success(), "kubectl {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Widgets whose name, size and color orders all differ: by size b, c, a; by color c, a, b.
fn with_unordered_widgets() -> Server {
    let server = Server::start();
    server.kubectl_stdin(&["create", "-f", "-"], WIDGET_CRD);
    server.kubectl(&["wait", "--for=condition=Established", "crd/widgets.example.com", "--timeout=60s"]);
    for (name, size, color) in [("a", 3, "green"), ("b", 1, "red"), ("c", 2, "blue"), ("d", 5, "white"), ("e", 4, "yellow")] {
        let body = format!(r#"{{"apiVersion":"example.com/v1","kind":"Widget","metadata":{{"name":"{name}"}},"spec":{{"size":{size},"color":"{color}"}}}}"#);
        server.kubectl_stdin(&["create", "-f", "-"], &body);
    }
    server
}

/// The rows of a table without its header, as columns.
fn rows(table: &str) -> Vec<Vec<String>> {
    table.lines().skip(1).map(columns).collect()
}

/// Whether a table cell is a kubectl age (`0s`, `12s`, `3m4s`, ...).
fn is_age(cell: &str) -> bool {
    cell.ends_with(['s', 'm', 'h', 'd']) && cell.chars().next().is_some_and(|c| c.is_ascii_digit())
}

#[test]
fn get_yaml_shows_the_whole_custom_resource() {
    let server = with_widgets();
    server.kubectl(&["patch", "wd", "b", "--subresource=status", "--type", "merge", "-p", r#"{"status":{"phase":"Ready"}}"#]);
    let yaml = server.kubectl(&["get", "wd", "b", "-o", "yaml"]);
    assert!(yaml.starts_with("apiVersion: example.com/v1\n"), "{yaml}");
    assert!(yaml.contains("\nkind: Widget\n") && yaml.contains("\n  name: b\n") && yaml.contains("\n  namespace: default\n"), "{yaml}");
    let object: serde_json::Value = serde_saphyr::from_str(&yaml).unwrap();
    assert_eq!(object["spec"], serde_json::json!({"size": 2, "color": "red"}));
    assert_eq!(object["status"], serde_json::json!({"phase": "Ready"}));
    assert_eq!(object["metadata"]["labels"], serde_json::json!({"tier": "db"}));
    assert_eq!(object["metadata"]["generation"], 1, "a status write does not bump the generation");
    let uid = server.kubectl(&["get", "wd", "b", "-o", "jsonpath={.metadata.uid}"]);
    assert_eq!(object["metadata"]["uid"], uid.as_str());
    assert!(object["metadata"]["creationTimestamp"].as_str().unwrap().ends_with('Z'), "{yaml}");
    assert!(object["metadata"]["resourceVersion"].as_str().unwrap().parse::<u64>().unwrap() > 0, "{yaml}");
    // A list in YAML holds every object.
    let list: serde_json::Value = serde_saphyr::from_str(&server.kubectl(&["get", "wd", "-o", "yaml"])).unwrap();
    assert_eq!(list["kind"], "List");
    let names: Vec<&str> = list["items"].as_array().unwrap().iter().map(|i| i["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["a", "b", "c"]);
}

#[test]
fn sort_by_with_table_output_orders_rows_and_fills_printer_columns() {
    let server = with_unordered_widgets();
    let (table, log) = kubectl_logged(&server, &["get", "wd", "--sort-by=.spec.size"]);
    assert!(log.contains("/apis/example.com/v1/namespaces/default/widgets?includeObject=Object 200"), "kubectl asked for a Table with objects: {log}");
    assert_eq!(columns(table.lines().next().unwrap()), ["NAME", "SIZE", "AGE"]);
    let got = rows(&table);
    assert_eq!(got.iter().map(|r| (r[0].as_str(), r[1].as_str())).collect::<Vec<_>>(), [("b", "1"), ("c", "2"), ("a", "3"), ("e", "4"), ("d", "5")], "{table}");
    assert!(got.iter().all(|r| r.len() == 3 && is_age(&r[2])), "{table}");

    // A string column, with the wide (priority 1) column shown.
    let table = server.kubectl(&["get", "wd", "--sort-by=.spec.color", "-o", "wide"]);
    assert_eq!(columns(table.lines().next().unwrap()), ["NAME", "SIZE", "COLOR", "AGE"]);
    let got: Vec<Vec<String>> = rows(&table).into_iter().map(|r| r[..3].to_vec()).collect();
    let want = [["c", "2", "blue"], ["a", "3", "green"], ["b", "1", "red"], ["d", "5", "white"], ["e", "4", "yellow"]];
    assert_eq!(got, want.map(|r| r.map(String::from).to_vec()), "{table}");

    // Sorting by a metadata field, without headers.
    server.kubectl(&["label", "wd", "a", "rank=2"]);
    server.kubectl(&["label", "wd", "b", "rank=1"]);
    server.kubectl(&["label", "wd", "c", "rank=3"]);
    let table = server.kubectl(&["get", "wd", "-l", "rank", "--sort-by=.metadata.labels.rank", "--no-headers"]);
    assert_eq!(table.lines().map(|l| columns(l)[0].clone()).collect::<Vec<_>>(), ["b", "a", "c"], "{table}");
}

#[test]
fn chunked_table_lists_show_every_row_once_in_order() {
    let server = with_unordered_widgets();
    for chunk in ["1", "2"] {
        let flag = format!("--chunk-size={chunk}");
        let (table, log) = kubectl_logged(&server, &["get", "wd", &flag, "-o", "wide"]);
        let pages = log.lines().filter(|l| l.contains("/namespaces/default/widgets?") && l.contains(&format!("limit={chunk}"))).count();
        assert_eq!(pages, if chunk == "1" { 5 } else { 3 }, "one request per page: {log}");
        assert_eq!(table.lines().filter(|l| l.starts_with("NAME")).count(), 1, "one header: {table}");
        assert_eq!(columns(table.lines().next().unwrap()), ["NAME", "SIZE", "COLOR", "AGE"]);
        let got: Vec<Vec<String>> = rows(&table).into_iter().map(|r| r[..3].to_vec()).collect();
        let want = [["a", "3", "green"], ["b", "1", "red"], ["c", "2", "blue"], ["d", "5", "white"], ["e", "4", "yellow"]];
        assert_eq!(got, want.map(|r| r.map(String::from).to_vec()), "{table}");
    }
    // Across namespaces too: the NAMESPACE column comes first.
    server.kubectl(&["create", "namespace", "other"]);
    server.kubectl_stdin(&["create", "-n", "other", "-f", "-"], &widget("f", 6, ""));
    let table = server.kubectl(&["get", "wd", "-A", "--chunk-size=1"]);
    assert_eq!(columns(table.lines().next().unwrap()), ["NAMESPACE", "NAME", "SIZE", "AGE"]);
    let got: Vec<(String, String)> = rows(&table).into_iter().map(|r| (r[0].clone(), r[1].clone())).collect();
    let want = [("default", "a"), ("default", "b"), ("default", "c"), ("default", "d"), ("default", "e"), ("other", "f")];
    assert_eq!(got, want.map(|(n, o)| (n.to_string(), o.to_string())), "{table}");
}

/// A table line's cells, cut at the header's column starts (cells may be empty or hold spaces).
fn cells(header: &str, names: &[&str], line: &str) -> Vec<String> {
    let starts: Vec<usize> = names.iter().map(|h| header.find(h).unwrap_or_else(|| panic!("{h} in {header}"))).collect();
    (0..names.len())
        .map(|i| {
            let end = starts.get(i + 1).copied().unwrap_or(line.len()).min(line.len());
            line.get(starts[i]..end).unwrap_or("").trim().to_string()
        })
        .collect()
}

/// `kubectl api-resources` rows: NAME, SHORTNAMES, APIVERSION, NAMESPACED, KIND.
fn api_resources(server: &Server, args: &[&str]) -> Vec<Vec<String>> {
    let mut all = vec!["api-resources"];
    all.extend_from_slice(args);
    let out = server.kubectl(&all);
    let header = out.lines().next().unwrap();
    out.lines().skip(1).map(|line| cells(header, &["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"], line)).collect()
}

#[test]
fn api_resources_lists_builtin_kinds_and_a_new_crd() {
    let server = Server::start();
    server.kubectl_stdin(&["create", "-f", "-"], WIDGET_CRD);
    // A cluster-scoped kind with two short names, categories and two served versions listed
    // beta first: the group's preferred version is the highest by Kubernetes' version order.
    let gadgets = r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
     "metadata":{"name":"gadgets.example.org"},
     "spec":{"group":"example.org","scope":"Cluster",
      "names":{"plural":"gadgets","singular":"gadget","kind":"Gadget","shortNames":["gd","gdg"],"categories":["toys"]},
      "versions":[
       {"name":"v1beta1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}},
       {"name":"v1","served":true,"storage":false,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}"#;
    server.kubectl_stdin(&["create", "-f", "-"], gadgets);
    server.kubectl(&["wait", "--for=condition=Established", "crd/widgets.example.com", "crd/gadgets.example.org", "--timeout=60s"]);
    let rows = api_resources(&server, &[]);
    let row = |name: &str, version: &str| {
        let found: Vec<&Vec<String>> = rows.iter().filter(|r| r[0] == name && r[2] == version).collect();
        assert_eq!(found.len(), 1, "one row for {name} {version}: {rows:?}");
        found[0].iter().map(String::as_str).collect::<Vec<_>>()
    };
    assert_eq!(row("widgets", "example.com/v1"), ["widgets", "wd", "example.com/v1", "true", "Widget"]);
    assert_eq!(row("gadgets", "example.org/v1"), ["gadgets", "gd,gdg", "example.org/v1", "false", "Gadget"]);
    assert!(!rows.iter().any(|r| r[2] == "example.org/v1beta1"), "only the preferred version is listed: {rows:?}");
    assert_eq!(row("configmaps", "v1"), ["configmaps", "cm", "v1", "true", "ConfigMap"]);
    assert_eq!(row("namespaces", "v1"), ["namespaces", "ns", "v1", "false", "Namespace"]);
    assert_eq!(row("events", "v1"), ["events", "ev", "v1", "true", "Event"]);
    assert_eq!(row("events", "events.k8s.io/v1"), ["events", "ev", "events.k8s.io/v1", "true", "Event"]);
    assert_eq!(row("leases", "coordination.k8s.io/v1"), ["leases", "", "coordination.k8s.io/v1", "true", "Lease"]);
    assert_eq!(
        row("customresourcedefinitions", "apiextensions.k8s.io/v1"),
        ["customresourcedefinitions", "crd,crds", "apiextensions.k8s.io/v1", "false", "CustomResourceDefinition"]
    );
    assert!(!rows.iter().any(|r| r[0].contains('/')), "subresources are not listed: {rows:?}");

    // Filters and the wide columns.
    let group = api_resources(&server, &["--api-group=example.org"]);
    assert_eq!(group.iter().map(|r| r[0].as_str()).collect::<Vec<_>>(), ["gadgets"]);
    let wide = server.kubectl(&["api-resources", "--api-group=example.com", "-o", "wide"]);
    let line = wide.lines().find(|l| l.starts_with("widgets")).unwrap();
    assert!(line.contains("create,delete,deletecollection,get,list,patch,update,watch"), "{wide}");
    let wide = server.kubectl(&["api-resources", "--api-group=example.org", "-o", "wide"]);
    assert!(wide.lines().find(|l| l.starts_with("gadgets")).unwrap().trim_end().ends_with("toys"), "{wide}");
    let cluster = server.kubectl(&["api-resources", "--namespaced=false", "-o", "name"]);
    assert!(cluster.lines().any(|l| l == "gadgets.example.org") && cluster.lines().any(|l| l == "namespaces"), "{cluster}");
    assert!(!cluster.lines().any(|l| l == "widgets.example.com" || l == "configmaps"), "{cluster}");
    // The preferred version is what kubectl then reads and writes through.
    server.kubectl_stdin(&["create", "-f", "-"], r#"{"apiVersion":"example.org/v1beta1","kind":"Gadget","metadata":{"name":"g"}}"#);
    assert_eq!(server.kubectl(&["get", "toys", "-o", "jsonpath={.items[*].apiVersion}"]), "example.org/v1");
}

#[test]
fn describe_shows_events_of_a_kube_rs_recorder() {
    use k8s_openapi::api::core::v1::ObjectReference;
    use kube::runtime::events::{Event, EventType, Recorder, Reporter};

    let server = with_widgets();
    server.kubectl_stdin(&["create", "-f", "-"], r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"subject"}}"#);
    let reference = |api_version: &str, kind: &str, name: &str, plural: &str| ObjectReference {
        api_version: Some(api_version.into()),
        kind: Some(kind.into()),
        name: Some(name.into()),
        namespace: Some("default".into()),
        uid: Some(server.kubectl(&["get", plural, name, "-o", "jsonpath={.metadata.uid}"])),
        ..Default::default()
    };
    let widget = reference("example.com/v1", "Widget", "b", "widgets");
    let config_map = reference("v1", "ConfigMap", "subject", "configmaps");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let recorder = Recorder::new(server.client().await, Reporter { controller: "widget-controller".into(), instance: Some("replica-7".into()) });
        let event = |reason: &str, note: &str, type_| Event { type_, reason: reason.into(), note: Some(note.into()), action: "Reconcile".into(), secondary: None };
        recorder.publish(&event("Resized", "size changed to 2", EventType::Normal), &widget).await.unwrap();
        recorder.publish(&event("Resized", "size changed to 2", EventType::Normal), &widget).await.unwrap();
        recorder.publish(&event("SyncFailed", "cannot reach the backend", EventType::Warning), &config_map).await.unwrap();
    });

    // Describe's events table: the row of each event, cut at the header's columns.
    let events_of = |kind: &str, name: &str| -> Vec<Vec<String>> {
        let described = server.kubectl(&["describe", kind, name]);
        let (_, events) = described.split_once("\nEvents:\n").unwrap_or_else(|| panic!("no events: {described}"));
        let header = events.lines().next().unwrap();
        assert_eq!(columns(header), ["Type", "Reason", "Age", "From", "Message"]);
        events.lines().skip(2).map(|l| cells(header, &["Type", "Reason", "Age", "From", "Message"], l)).collect()
    };
    let rows = events_of("widget", "b");
    assert_eq!(rows.len(), 1, "two publications of one event are one series; another object's event is not shown: {rows:?}");
    let row = &rows[0];
    assert_eq!((row[0].as_str(), row[1].as_str()), ("Normal", "Resized"), "{row:?}");
    assert!(is_age(row[2].split(' ').next().unwrap()) && row[2].contains(" (x2 over "), "the series count: {row:?}");
    // kubectl 1.32 shows the reporting controller as From when the core `source` is empty.
    assert_eq!((row[3].as_str(), row[4].as_str()), ("widget-controller", "size changed to 2"), "{row:?}");

    let rows = events_of("configmap", "subject");
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0][..2], ["Warning", "SyncFailed"]);
    assert_eq!(rows[0][3..], ["widget-controller", "cannot reach the backend"]);
}

#[test]
fn cluster_info_get_all_api_versions_and_version() {
    let server = Server::start();
    let url = server.server_url();
    let address = url.trim_start_matches("https://").to_string();
    let (_, port) = address.rsplit_once(':').unwrap();

    let info = server.kubectl(&["cluster-info"]);
    assert!(info.contains(&format!("Kubernetes control plane is running at {url}")), "{info}");

    // The `kubernetes` Service belongs to the `all` category, and its Endpoints name the address
    // the server listens on.
    let all = server.kubectl(&["get", "all"]);
    // (kubectl prefixes names with their kind only when it lists more than one kind.)
    let service = rows(&all).into_iter().find(|r| r[0] == "service/kubernetes" || r[0] == "kubernetes").unwrap_or_else(|| panic!("{all}"));
    assert_eq!(service[1..5], ["ClusterIP", "None", "<none>", &format!("{port}/TCP")], "{all}");
    let endpoints = server.kubectl(&["get", "endpoints", "kubernetes", "--no-headers"]);
    assert_eq!(columns(&endpoints)[1], address, "{endpoints}");
    let svc = server.kubectl(&["get", "svc", "-A", "-o", "wide", "--no-headers"]);
    assert_eq!(columns(&svc)[7], "<none>", "the wide Selector column: {svc}");

    let versions = server.kubectl(&["api-versions"]);
    for expected in ["v1", "apiextensions.crossplane.io/v1", "pkg.crossplane.io/v1", "coordination.k8s.io/v1"] {
        assert!(versions.lines().any(|l| l == expected), "{expected} in {versions}");
    }
    let version = server.kubectl(&["version", "-o", "json"]);
    let version: serde_json::Value = serde_json::from_str(&version).unwrap();
    let git_version = version["serverVersion"]["gitVersion"].as_str().unwrap();
    assert!(git_version.contains(&format!("oxplane.{}", env!("CARGO_PKG_VERSION"))), "{git_version}");
}
