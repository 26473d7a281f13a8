//! End-to-end: start the real `oxplane up` and drive it with the real `kubectl`.

use crate::support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::Server;

#[test]
fn kubectl_lists_the_seeded_namespaces() {
    let server = Server::start();
    let out = server.kubectl(&["get", "namespaces", "-o", "name"]);
    // Kubernetes' own, and Crossplane's: the core's and the RBAC manager's ServiceAccounts live there.
    assert_eq!(out, "namespace/crossplane-system\nnamespace/default\nnamespace/kube-node-lease\nnamespace/kube-public\nnamespace/kube-system\n");
}

#[test]
fn version_reports_kubernetes_1_32() {
    let server = Server::start();
    let version: serde_json::Value = serde_json::from_str(&server.kubectl(&["get", "--raw", "/version"])).unwrap();
    assert_eq!((version["major"].as_str(), version["minor"].as_str()), (Some("1"), Some("32")));
}

#[test]
fn requests_without_the_token_are_unauthorized_but_health_is_open() {
    let server = Server::start();
    let (code, body) = server.curl_without_token("/api/v1/namespaces");
    assert_eq!(code, 401, "{body}");
    let status: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status["reason"], "Unauthorized");
    let (code, body) = server.curl_without_token("/readyz");
    assert_eq!((code, body.as_str()), (200, "ok"));
}

#[test]
fn configmaps_are_created_read_and_deleted() {
    let server = Server::start();
    let manifest = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"app"},"data":{"color":"blue"}}"#;
    assert_eq!(server.kubectl_stdin(&["create", "--validate=false", "-f", "-"], manifest), "configmap/app created\n");
    let got: serde_json::Value = serde_json::from_str(&server.kubectl(&["get", "configmap", "app", "-o", "json"])).unwrap();
    assert_eq!(got["data"]["color"], "blue");
    assert_eq!(got["metadata"]["namespace"], "default");
    assert!(got["metadata"]["uid"].as_str().unwrap().len() == 36);
    let again = server.kubectl_fails(&["create", "--validate=false", "-f", "-"], manifest);
    assert!(again.contains("AlreadyExists") && again.contains("configmaps \"app\" already exists"), "{again}");
    assert_eq!(server.kubectl(&["delete", "configmap", "app", "--wait=false"]), "configmap \"app\" deleted\n");
    let gone = server.kubectl_fails(&["get", "configmap", "app"], "");
    assert!(gone.contains("NotFound"), "{gone}");
}

#[test]
fn data_survives_a_restart_and_the_kubeconfig_stays_valid() {
    let mut server = Server::start();
    let manifest = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"keep"},"data":{"k":"v"}}"#;
    server.kubectl_stdin(&["create", "--validate=false", "-f", "-"], manifest);
    server.restart();
    let got: serde_json::Value = serde_json::from_str(&server.kubectl(&["get", "configmap", "keep", "-o", "json"])).unwrap();
    assert_eq!(got["data"]["k"], "v");
}

#[test]
fn a_second_server_on_the_same_data_dir_is_refused() {
    let server = Server::start();
    let out = Command::new(env!("CARGO_BIN_EXE_oxplane"))
        .args(["up", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(server.dir())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("in use by another oxplane process"), "{stderr}");
}

#[test]
fn metrics_are_prometheus_text_with_request_counts() {
    let server = Server::start();
    server.kubectl(&["get", "namespaces"]);
    let metrics = server.kubectl(&["get", "--raw", "/metrics"]);
    assert!(metrics.contains("# TYPE oxplane_store_revision gauge"), "{metrics}");
    assert!(metrics.contains("oxplane_apiserver_requests_total{method=\"GET\",code=\"200\"}"), "{metrics}");
    // The core's own controllers watch from the start.
    assert!(metrics.contains("# TYPE oxplane_apiserver_watchers gauge\noxplane_apiserver_watchers "), "{metrics}");
    assert!(metrics.contains("oxplane_apiserver_resource_watchers{group=\"pkg.crossplane.io\",resource=\"providers\"} "), "{metrics}");
    // kubectl's list of namespaces, by verb and resource as kube-apiserver labels it.
    assert!(
        metrics.contains("oxplane_apiserver_resource_requests_total{verb=\"LIST\",group=\"\",version=\"v1\",resource=\"namespaces\",subresource=\"\",code=\"200\"} "),
        "{metrics}"
    );
    // The Provider controller watches Providers: its own, and the ones others depend on.
    let provider_watches = metrics
        .lines()
        .find_map(|l| l.strip_prefix("oxplane_watches{controller=\"packages/provider.pkg.crossplane.io\",kind=\"pkg.crossplane.io/v1, Kind=Provider\"} "))
        .and_then(|v| v.parse::<u32>().ok());
    assert!(provider_watches.is_some_and(|n| n >= 1), "{metrics}");
    for line in metrics.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let value = line.rsplit(' ').next().unwrap();
        assert!(value.parse::<f64>().is_ok(), "not a sample: {line}");
    }
}

#[test]
fn health_endpoints_answer_without_a_token() {
    let server = Server::start();
    for path in ["/healthz", "/livez", "/readyz"] {
        let (code, body) = server.curl_without_token(path);
        assert_eq!((code, body.as_str()), (200, "ok"), "{path}");
        assert_eq!(server.kubectl(&["get", "--raw", path]), "ok", "{path} with the token too");
    }
}

#[test]
fn sigterm_ends_the_server_with_status_zero() {
    let mut server = Server::start();
    server.kubectl_stdin(&["create", "-f", "-"], r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"before-stop"}}"#);
    // An open watch does not hold the shutdown up.
    let mut watch = server
        .kubectl_command(&["get", "configmaps", "-w", "--request-timeout=0"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(watch.stdout.take().unwrap()));
    assert!(lines.next().unwrap().unwrap().starts_with("NAME"), "the watch is running");
    let status = server.terminate(Duration::from_secs(60)).expect("oxplane exits within a minute of SIGTERM");
    assert!(status.success(), "exit status after SIGTERM: {status:?}\n{}", server.log());
    let _ = watch.kill();
    let _ = watch.wait();
    // It shut down cleanly: the next start finds the data and no stale lock.
    server.spawn();
    assert!(server.get(&["configmap", "before-stop"]).is_some());
    let status = server.terminate(Duration::from_secs(60)).expect("exits again");
    assert!(status.success(), "{status:?}");
}

#[test]
fn oxplane_home_is_the_data_directory_without_data_dir() {
    let user_home = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    // A directory that does not exist yet: `up` creates it.
    let home = state.path().join("plane");
    let log = std::fs::File::create(state.path().join("oxplane.log")).unwrap();
    /// Kills the server if an assertion fails before it is stopped.
    struct Running(std::process::Child);
    impl Drop for Running {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut child = Running(Command::new(env!("CARGO_BIN_EXE_oxplane"))
        .args(["up", "--listen", "127.0.0.1:0"])
        .env("OXPLANE_HOME", &home)
        .env("HOME", user_home.path())
        .env("OXPLANE_LOG", "info,kube=warn,hyper=warn,tower=warn")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap());
    let kubeconfig = home.join("kubeconfig");
    let kubectl = |args: &[&str]| Command::new("kubectl").args(args).env("KUBECONFIG", &kubeconfig).env("HOME", user_home.path()).output().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !(kubeconfig.exists() && kubectl(&["get", "--raw", "/readyz"]).status.success()) {
        let log = || std::fs::read_to_string(state.path().join("oxplane.log")).unwrap_or_default();
        assert!(child.0.try_wait().unwrap().is_none(), "oxplane exited: {}", log());
        assert!(Instant::now() < deadline, "not ready in $OXPLANE_HOME: {}", log());
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = kubectl(&["get", "namespace", "default", "-o", "name"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "namespace/default\n", "{}", String::from_utf8_lossy(&out.stderr));
    for file in ["oxplane.db", "admin.token", "pki/ca.crt"] {
        assert!(home.join(file).exists(), "{file} in $OXPLANE_HOME");
    }
    assert!(!user_home.path().join(".oxplane").exists(), "~/.oxplane is not used when OXPLANE_HOME is set");
    let status = support::sigterm(&mut child.0, Duration::from_secs(60)).expect("exits after SIGTERM");
    assert!(status.success(), "{status:?}");
}

/// The number after `prefix` in `line`.
fn number_after(line: &str, prefix: &str) -> u64 {
    let rest = &line[line.find(prefix).unwrap_or_else(|| panic!("{prefix:?} in {line:?}")) + prefix.len()..];
    rest.chars().take_while(char::is_ascii_digit).collect::<String>().parse().unwrap()
}

#[test]
fn up_reports_its_start_up_steps_on_stderr() {
    let mut server = Server::new(&[]);
    // Warnings only: the lines below are written whatever the log level.
    server.env_always("OXPLANE_LOG", "warn");
    server.spawn();
    server.apply("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: remembered\ndata:\n  a: b\n");
    let steps = |log: &str| -> Vec<String> {
        log.lines().filter(|l| l.starts_with("oxplane: ") || l.starts_with("oxplane is serving on ")).map(str::to_string).collect()
    };
    let first = steps(&server.log());
    server.restart();
    let log = server.log();
    let second = steps(&log[log.rfind("oxplane: store opened").unwrap()..]);
    for lines in [&first, &second] {
        assert_eq!(lines.len(), 5, "{lines:#?}");
        assert!(lines[0].starts_with(&format!("oxplane: store opened: SQLite in {}, at revision ", server.dir().display())), "{lines:#?}");
        assert!(lines[0].ends_with(" objects replayed into the watch cache)"), "{lines:#?}");
        assert!(lines[1].starts_with("oxplane: serving ") && lines[1].contains(" CustomResourceDefinitions ("), "{lines:#?}");
        assert!(lines[2].starts_with("oxplane: starting Crossplane's core"), "{lines:#?}");
        assert!(number_after(&lines[3], "oxplane: controllers running: ") > 0, "{lines:#?}");
        assert!(lines[4].starts_with("oxplane is serving on https://127.0.0.1:"), "{lines:#?}");
    }
    assert!(second[4].starts_with(&format!("oxplane is serving on {} (kubeconfig: ", server.server_url())), "{second:#?}");
    // The second start replays what the first wrote: Crossplane's CRDs and the ConfigMap.
    assert!(number_after(&second[0], "at revision ") > number_after(&first[0], "at revision "), "{first:#?} {second:#?}");
    assert!(number_after(&second[0], "(") > number_after(&first[0], "("), "{first:#?} {second:#?}");
    assert!(number_after(&second[1], "oxplane: serving ") > number_after(&first[1], "oxplane: serving "), "{first:#?} {second:#?}");
}
