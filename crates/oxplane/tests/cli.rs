//! The binary's command line, run as a user would.

use std::process::Command;

fn oxplane() -> Command {
    Command::new(env!("CARGO_BIN_EXE_oxplane"))
}

#[test]
fn version_and_help() {
    let out = oxplane().arg("--version").output().unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), format!("oxplane {}", env!("CARGO_PKG_VERSION")));
    let out = oxplane().arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("Crossplane-compatible control plane"), "{help}");
    assert!(help.contains("bench"), "{help}");
}

#[test]
fn an_unknown_subcommand_is_a_clear_error() {
    let out = oxplane().arg("frobnicate").output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unrecognized subcommand 'frobnicate'"));
}

#[test]
fn bad_circuit_breaker_settings_are_refused_by_name_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    for (flag, value, says) in [
        ("--circuit-breaker-burst", "0", "--circuit-breaker-burst must be a number of at least 1 (got 0)"),
        ("--circuit-breaker-refill-rate", "0", "--circuit-breaker-refill-rate must be a positive number of events per second (got 0)"),
        ("--circuit-breaker-burst", "many", "invalid value 'many' for '--circuit-breaker-burst <EVENTS>'"),
    ] {
        let out = oxplane().args(["up", "--listen", "127.0.0.1:0", "--data-dir"]).arg(&data).args([flag, value]).output().unwrap();
        assert!(!out.status.success(), "{flag} {value}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{stderr}");
        assert!(!data.exists(), "nothing was created for {flag} {value}");
    }
}

#[test]
fn bench_store_prints_one_json_object_with_the_named_figures() {
    let dir = tempfile::tempdir().unwrap();
    let out = oxplane()
        .args(["bench", "store", "--json", "--seconds", "0.2", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["bench"], "store");
    let figures = report["figures"].as_array().unwrap();
    for name in ["writes_per_s_w1", "writes_per_s_w16", "writes_per_s_w64", "p99_ms_w64", "baseline_writes_per_s"] {
        let figure = figures.iter().find(|f| f["name"] == name).unwrap_or_else(|| panic!("missing {name}"));
        assert!(figure["value"].as_f64().unwrap() > 0.0, "{name} must be measured");
        assert!(figure["unit"].is_string());
    }
    // The temporary databases are cleaned up.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn bench_api_prints_the_named_figures() {
    bench_report(
        &["api", "--json", "--seconds", "0.2", "--list-objects", "50", "--crds", "10", "--watchers", "5"],
        "api",
        &[
            "http_creates_per_s_c1", "http_creates_per_s_c32", "store_writes_per_s_c32", "list_10k_ms",
            "watch_fanout_p99_ms", "crd_1000_rss_mb", "crd_1000_establish_s", "discovery_cold_s",
            "http_creates_per_s_c32_rbac_service_account", "token_auth_first_use_us", "token_auth_cached_us", "static_token_auth_us",
        ],
    );
}

#[test]
fn bench_api_on_etcd_prints_the_server_beside_sqlite_and_raw_etcd() {
    bench_report(
        &["api", "--store", "etcd", "--json", "--seconds", "0.2", "--list-objects", "50", "--watchers", "5"],
        "api",
        &[
            "raw_etcd_writes_per_s_c32", "etcd_http_creates_per_s_c1", "etcd_http_creates_per_s_c32",
            "sqlite_http_creates_per_s_c32", "etcd_http_to_raw_etcd_ratio_c32", "etcd_list_10k_ms", "etcd_watch_fanout_p99_ms",
        ],
    );
}

/// Runs `oxplane bench <args>` and returns its report, asserting it is one JSON object named
/// `bench` whose `names` are all measured (above zero).
fn bench_report(args: &[&str], bench: &str, names: &[&str]) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let out = oxplane().arg("bench").args(args).arg("--dir").arg(dir.path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["bench"], bench);
    let figures = report["figures"].as_array().unwrap();
    for name in names {
        let figure = figures.iter().find(|f| f["name"] == *name).unwrap_or_else(|| panic!("missing {name}: {report}"));
        assert!(figure["value"].as_f64().unwrap() > 0.0, "{name} must be measured: {report}");
        assert!(figure["unit"].is_string());
    }
    report
}

#[test]
fn bench_mr_prints_the_named_figures() {
    bench_report(&["mr", "--json", "--resources", "20", "--clients", "4"], "mr", &["mr_5000_ready_s", "mr_reconciles_per_s", "api_only_5000_create_s"]);
}

#[test]
fn bench_compose_prints_the_named_figures() {
    bench_report(
        &["compose", "--json", "--xrs", "5", "--clients", "2", "--samples", "3"],
        "compose",
        &["xr_1000_ready_s", "xr_reconciles_per_s", "peak_rss_mb", "composed_change_p50_ms", "composed_change_p99_ms"],
    );
}
