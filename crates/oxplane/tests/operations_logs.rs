//! What an operator meets first: JSON logs that carry the controller and the object, no secret
//! value in any log line at any level, and Events that expire after `--event-ttl`.

use crate::support;

use std::process::Command;
use std::time::Duration;

use support::{Server, within};

#[test]
fn json_logs_at_every_level_carry_the_reconcile_and_no_secret() {
    let mut server = Server::new(&["--log-format", "json", "--provider", "provider-nop"]);
    server.env_always("OXPLANE_LOG", "trace");
    server.spawn();
    let password = "correct-horse-battery-staple-4711";
    server.kubectl(&["create", "secret", "generic", "db", &format!("--from-literal=password={password}")]);
    server.kubectl(&["patch", "secret", "db", "--type=merge", "-p", r#"{"stringData":{"other":"tr0ub4dor-and-3-more-words"}}"#]);
    server.kubectl(&["get", "secret", "db", "-o", "yaml"]);
    server.kubectl(&["wait", "--for=condition=Healthy", "provider/provider-nop", "--timeout=60s"]);
    server.stop();

    let log = server.log();
    assert!(!log.contains(password) && !log.contains("tr0ub4dor-and-3-more-words"), "a Secret's value is in the log");
    let token = std::fs::read_to_string(server.dir().join("admin.token")).unwrap();
    assert!(!log.contains(token.trim()), "the admin token is in the log");

    let lines: Vec<serde_json::Value> =
        log.lines().filter(|l| !l.trim().is_empty() && l.starts_with('{')).map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(lines.len() > 10, "trace logging writes lines: {log}");
    for line in &lines {
        assert!(line["timestamp"].is_string() && line["level"].is_string() && line["target"].is_string(), "{line}");
    }
    let reconciles: Vec<&serde_json::Value> = lines.iter().filter(|l| l["span"]["name"] == "reconcile").collect();
    let package = reconciles
        .iter()
        .find(|l| l["span"]["controller"] == "packages/provider.pkg.crossplane.io" && l["span"]["object_name"] == "provider-nop")
        .unwrap_or_else(|| panic!("a log line inside the Provider's reconcile: {} reconcile lines", reconciles.len()));
    assert_eq!(package["span"]["resource"], "provider.pkg.crossplane.io", "{package}");
    assert_eq!(package["span"]["namespace"], "", "{package}");
}

#[test]
fn events_expire_after_the_event_ttl_unless_they_happen_again() {
    let server = Server::start_with(&["--event-ttl", "3s"]);
    let event = |name: &str| {
        let now = jiff::Timestamp::now().to_string();
        format!(
            r#"{{"apiVersion":"v1","kind":"Event","metadata":{{"name":"{name}","namespace":"default"}},
            "involvedObject":{{"kind":"ConfigMap","name":"x","namespace":"default"}},"reason":"Tested","message":"m","type":"Normal",
            "firstTimestamp":"{now}","lastTimestamp":"{now}","count":1}}"#
        )
    };
    server.kubectl_stdin(&["create", "-f", "-"], &event("old"));
    server.kubectl_stdin(&["create", "-f", "-"], &event("renewed"));
    // `renewed` happens again every second; `old` never does.
    let mut renewals = 0;
    within(Duration::from_secs(30), "the old event expires", || {
        server.kubectl_stdin(&["replace", "-f", "-"], &event("renewed"));
        renewals += 1;
        server.get(&["event", "old"]).is_none()
    });
    assert!(renewals >= 2, "the old event lived for a while first");
    assert!(server.get(&["event", "renewed"]).is_some(), "an event that keeps happening is kept");
}

#[test]
fn an_event_ttl_that_is_not_a_go_duration_is_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_oxplane")).args(["up", "--event-ttl", "soon"]).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("invalid value 'soon' for '--event-ttl <DURATION>': time: invalid duration \"soon\""), "{stderr}");
    let out = Command::new(env!("CARGO_BIN_EXE_oxplane")).args(["up", "--event-ttl", "0s"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("the event TTL must be more than zero"));
}

#[test]
fn metrics_have_latency_histograms_from_every_layer_and_the_process() {
    let server = Server::start_with(&["--provider", "provider-nop"]);
    server.kubectl(&["wait", "--for=condition=Healthy", "provider/provider-nop", "--timeout=60s"]);
    server.kubectl(&["create", "configmap", "c", "--from-literal=a=b"]);
    let metrics = server.kubectl(&["get", "--raw", "/metrics"]);
    for expected in [
        "# TYPE oxplane_apiserver_request_duration_seconds histogram",
        "oxplane_apiserver_request_duration_seconds_count{verb=\"POST\",group=\"\",resource=\"configmaps\",subresource=\"\",code=\"201\"} 1",
        "# TYPE oxplane_reconcile_duration_seconds histogram",
        "oxplane_workqueue_wait_seconds_bucket{controller=\"packages/provider.pkg.crossplane.io\"",
        "# TYPE oxplane_store_commit_duration_seconds histogram",
        "# TYPE oxplane_store_commit_batch_size histogram",
        "# TYPE oxplane_watch_cache_lag_revisions gauge",
        "# TYPE process_cpu_seconds_total counter",
        "# TYPE process_resident_memory_bytes gauge",
        "# TYPE process_open_fds gauge",
        // The counters that were there before stay.
        "oxplane_apiserver_requests_total{",
        "oxplane_reconciles_total{",
    ] {
        assert!(metrics.contains(expected), "{expected} in\n{metrics}");
    }
    let open_fds: f64 = metrics.lines().find_map(|l| l.strip_prefix("process_open_fds ")).unwrap().parse().unwrap();
    assert!(open_fds > 5.0, "a server has its listener, store and log open: {open_fds}");
}
