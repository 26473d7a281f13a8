//! `oxplane up` on etcd: objects live in the etcd cluster (so they outlive the process and its
//! data directory), an unreachable etcd is a clear start-up error, and an etcd lost while
//! serving refuses writes with 503, keeps reads going from the cache, and comes back by itself.
//! An etcd served over TLS with client certificates is reached with `--etcd-cafile`,
//! `--etcd-certfile` and `--etcd-keyfile`; a wrong CA or a missing client certificate is a
//! start-up error naming the endpoint and why; a prefix holding another cluster's data is
//! refused at start and left as it was.

use crate::support;

use std::process::{Command, Stdio};
use std::time::Duration;

use oxplane_store::etcd::testing::{self, EtcdCluster};
use support::{Server, within};

fn etcd_args(cluster: &EtcdCluster, prefix: &str, encryption: &str) -> Vec<String> {
    let mut args = vec!["--etcd".to_string(), cluster.endpoints().join(","), "--etcd-prefix".into(), prefix.into()];
    args.extend(["--encryption-provider-config".to_string(), encryption.to_string()]);
    args
}

fn start_on(cluster: &EtcdCluster, prefix: &str) -> Server {
    static CONFIG: std::sync::OnceLock<(tempfile::TempDir, String)> = std::sync::OnceLock::new();
    let (_, encryption) = CONFIG.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = support::shared_encryption_config(dir.path());
        (dir, path)
    });
    let args = etcd_args(cluster, prefix, encryption);
    Server::start_with(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

#[test]
fn objects_live_in_etcd_and_outlive_the_process() {
    let cluster = EtcdCluster::shared();
    let prefix = testing::unique_prefix("up");
    let mut first = start_on(cluster, &prefix);
    first.kubectl(&["create", "configmap", "kept", "--from-literal=color=blue"]);
    first.stop();
    // Another process, another data directory (the same encryption key, as a second server
    // on the store needs): only etcd holds the object.
    let second = start_on(cluster, &prefix);
    let got = second.get(&["configmap", "kept"]).expect("the configmap is in etcd");
    assert_eq!(got["data"]["color"], "blue");
    // A third on another prefix of the same etcd sees none of it.
    let other = start_on(cluster, &testing::unique_prefix("up-other"));
    assert!(other.get(&["configmap", "kept"]).is_none());
}

/// Runs `oxplane up` with `args`, which must make it exit at start: its stderr.
fn fails_at_start(args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_oxplane"))
        .args(["up", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut status = None;
    within(Duration::from_secs(30), "oxplane exits", || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!status.unwrap().success(), "{stderr}");
    stderr
}

#[test]
fn an_unreachable_etcd_at_start_exits_naming_the_endpoint() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let stderr = fails_at_start(&["--etcd", &endpoint]);
    assert!(stderr.contains(&endpoint) && stderr.contains("unavailable"), "{stderr}");
}

/// The keys under `prefix` with their values and mod revisions.
async fn dump(client: &mut etcd_client::Client, prefix: &str) -> Vec<(Vec<u8>, Vec<u8>, i64)> {
    let response = client.get(prefix, Some(etcd_client::GetOptions::new().with_prefix())).await.unwrap();
    response.kvs().iter().map(|kv| (kv.key().to_vec(), kv.value().to_vec(), kv.mod_revision())).collect()
}

#[test]
fn another_clusters_data_under_the_prefix_is_refused_untouched_at_start() {
    let cluster = EtcdCluster::shared();
    let endpoints = cluster.endpoints().join(",");
    let prefix = testing::unique_prefix("foreign");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut client = runtime.block_on(etcd_client::Client::connect(cluster.endpoints(), None)).unwrap();
    // What a Kubernetes cluster's API server keeps under its prefix.
    runtime.block_on(client.put(format!("{prefix}/pods/default/web"), r#"{"kind":"Pod"}"#, None)).unwrap();
    runtime.block_on(client.put(format!("{prefix}/namespaces/default"), r#"{"kind":"Namespace"}"#, None)).unwrap();
    let before = runtime.block_on(dump(&mut client, &prefix));
    let stderr = fails_at_start(&["--etcd", &endpoints, "--etcd-prefix", &prefix]);
    assert!(
        stderr.contains(&format!("the etcd prefix {prefix} at {endpoints} is not an oxplane store"))
            && stderr.contains("refusing to open or modify it"),
        "{stderr}"
    );
    assert_eq!(runtime.block_on(dump(&mut client, &prefix)), before, "the refused prefix was modified");
}

/// PEM files made here: a CA that signed etcd's serving certificate (127.0.0.1) and a client
/// certificate, and another CA that signed nothing etcd knows.
struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    fn get() -> &'static Pki {
        static PKI: std::sync::OnceLock<Pki> = std::sync::OnceLock::new();
        PKI.get_or_init(|| {
            use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair};
            let dir = tempfile::tempdir().unwrap();
            let write = |name: &str, pem: String| std::fs::write(dir.path().join(name), pem).unwrap();
            let ca = |name: &str| {
                let key = KeyPair::generate().unwrap();
                let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
                params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
                params.distinguished_name.push(DnType::CommonName, name);
                let cert = params.self_signed(&key).unwrap();
                (cert.pem(), Issuer::new(params, key))
            };
            let (ca_pem, issuer) = ca("etcd test CA");
            let (other_pem, _) = ca("another CA");
            let leaf = |names: Vec<String>, cn: &str, usage: ExtendedKeyUsagePurpose| {
                let key = KeyPair::generate().unwrap();
                let mut params = CertificateParams::new(names).unwrap();
                params.distinguished_name.push(DnType::CommonName, cn);
                params.extended_key_usages = vec![usage];
                (params.signed_by(&key, &issuer).unwrap().pem(), key.serialize_pem())
            };
            let (server, server_key) = leaf(vec!["127.0.0.1".into(), "localhost".into()], "etcd", ExtendedKeyUsagePurpose::ServerAuth);
            let (client, client_key) = leaf(Vec::new(), "oxplane", ExtendedKeyUsagePurpose::ClientAuth);
            write("ca.pem", ca_pem);
            write("other-ca.pem", other_pem);
            write("server.pem", server);
            write("server-key.pem", server_key);
            write("client.pem", client);
            write("client-key.pem", client_key);
            Pki { dir }
        })
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    /// The process's etcd served over TLS, demanding client certificates of this CA.
    fn etcd(&self) -> &'static EtcdCluster {
        EtcdCluster::shared_tls(|| testing::ServerTls {
            cert: self.dir.path().join("server.pem"),
            key: self.dir.path().join("server-key.pem"),
            client_ca: self.dir.path().join("ca.pem"),
        })
    }
}

#[test]
fn etcd_over_tls_with_a_client_certificate() {
    let pki = Pki::get();
    let endpoint = pki.etcd().endpoints().join(",");
    assert!(endpoint.starts_with("https://"), "{endpoint}");
    let prefix = testing::unique_prefix("tls");
    let (ca, cert, key) = (pki.path("ca.pem"), pki.path("client.pem"), pki.path("client-key.pem"));
    let server = Server::start_with(&["--etcd", &endpoint, "--etcd-prefix", &prefix, "--etcd-cafile", &ca, "--etcd-certfile", &cert, "--etcd-keyfile", &key]);
    server.kubectl(&["create", "configmap", "over-tls", "--from-literal=cipher=yes"]);
    let got = server.get(&["configmap", "over-tls"]).expect("the configmap is stored");
    assert_eq!(got["data"]["cipher"], "yes");
}

#[test]
fn a_wrong_etcd_ca_or_no_client_certificate_fails_at_start_naming_the_endpoint() {
    let pki = Pki::get();
    let endpoint = pki.etcd().endpoints().join(",");
    let (cert, key) = (pki.path("client.pem"), pki.path("client-key.pem"));
    // A CA that did not sign etcd's certificate: oxplane does not trust etcd.
    let other = pki.path("other-ca.pem");
    let stderr = fails_at_start(&["--etcd", &endpoint, "--etcd-cafile", &other, "--etcd-certfile", &cert, "--etcd-keyfile", &key]);
    assert!(stderr.contains(&format!("etcd at {endpoint} is unavailable")), "{stderr}");
    assert!(stderr.contains("UnknownIssuer"), "{stderr}");
    // No client certificate: etcd does not accept oxplane.
    let ca = pki.path("ca.pem");
    let stderr = fails_at_start(&["--etcd", &endpoint, "--etcd-cafile", &ca]);
    assert!(stderr.contains(&format!("etcd at {endpoint} is unavailable")), "{stderr}");
    assert!(stderr.contains("no client certificate was given"), "{stderr}");
}

#[test]
fn the_store_flags_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    for (args, expected) in [
        (vec!["--store", "etcd"], "--store etcd needs --etcd"),
        (vec!["--store", "sqlite", "--etcd", "http://127.0.0.1:2379"], "--etcd flags need --store etcd"),
        (vec!["--etcd", "127.0.0.1:2379"], "expected an http:// or https:// URL"),
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_oxplane"))
            .args(["up", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path())
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success() && stderr.contains(expected), "{args:?}: {stderr}");
    }
}

#[test]
fn the_memory_store_serves_and_forgets() {
    let mut server = Server::start_with(&["--store", "memory"]);
    server.kubectl(&["create", "configmap", "fleeting"]);
    assert!(server.get(&["configmap", "fleeting"]).is_some());
    server.restart();
    assert!(server.get(&["configmap", "fleeting"]).is_none());
}

#[test]
fn losing_etcd_refuses_writes_keeps_reads_and_recovers_without_restart() {
    let cluster = EtcdCluster::start(3);
    let server = start_on(&cluster, "/oxplane");
    server.kubectl(&["create", "configmap", "before", "--from-literal=k=v"]);
    // A read without a resourceVersion waits until the watch cache holds every acknowledged
    // write: from then on the cache can answer for "before" without etcd.
    assert!(server.get(&["configmap", "before"]).is_some());
    cluster.kill_all();
    within(Duration::from_secs(20), "/readyz fails", || server.curl_without_token("/readyz").0 == 503);

    // Writes: 503 with a retry hint, naming etcd.
    let body = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"during"}}"#;
    let (code, headers, answer) = server.curl("POST", "/api/v1/namespaces/default/configmaps", Some(body));
    assert_eq!(code, 503, "{answer}");
    assert!(headers.to_ascii_lowercase().contains("retry-after: 1"), "{headers}");
    let status: serde_json::Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(status["reason"], "ServiceUnavailable");
    assert_eq!(status["details"]["retryAfterSeconds"], 1);
    assert!(status["message"].as_str().unwrap().contains("etcd"), "{answer}");

    // Reads: served from the cache, and they say so.
    let (code, headers, answer) = server.curl("GET", "/api/v1/namespaces/default/configmaps/before", None);
    assert_eq!(code, 200, "{answer}");
    assert!(headers.contains("served from the watch cache"), "{headers}");
    // Not found in the cache is no proof of absence either, and says so.
    let (code, headers, answer) = server.curl("GET", "/api/v1/namespaces/default/configmaps/elsewhere", None);
    assert_eq!(code, 404, "{answer}");
    assert!(headers.contains("served from the watch cache"), "{headers}");
    let listed = server.kubectl_command(&["get", "configmaps", "-o", "name"]).output().unwrap();
    assert!(String::from_utf8_lossy(&listed.stdout).contains("configmap/before"));
    assert!(String::from_utf8_lossy(&listed.stderr).contains("the store is unreachable"));

    // The server cannot renew the controllers' lease: it stops leading before the lease ends
    // (so no other server could run controllers beside its own), and it keeps serving reads.
    within(Duration::from_secs(60), "the server stops leading", || server.log().contains("no longer leading"));
    let (code, _, answer) = server.curl("GET", "/api/v1/namespaces/default/configmaps/before", None);
    assert_eq!(code, 200, "{answer}");

    // etcd comes back: the same process is ready again, accepts writes, reads its own writes
    // fresh, and leads again.
    cluster.restart_all();
    within(Duration::from_secs(60), "/readyz recovers", || server.curl_without_token("/readyz").0 == 200);
    server.kubectl(&["create", "configmap", "after"]);
    let (code, headers, answer) = server.curl("GET", "/api/v1/namespaces/default/configmaps/after", None);
    assert_eq!(code, 200, "{answer}");
    assert!(!headers.contains("served from the watch cache"), "{headers}");
    assert!(server.get(&["configmap", "after"]).is_some());
    within(Duration::from_secs(60), "the server leads again", || {
        let log = server.log();
        log.rfind("no longer leading").is_some_and(|lost| log[lost..].contains("leading: starting the controllers"))
    });
}

#[test]
fn a_server_killed_during_writes_loses_no_acknowledged_write() {
    let cluster = EtcdCluster::shared();
    let prefix = testing::unique_prefix("killed");
    let mut first = start_on(cluster, &prefix);
    let acknowledged = std::sync::Mutex::new(Vec::new());
    let stop = std::sync::atomic::AtomicBool::new(false);
    let pid = first.pid().to_string();
    std::thread::scope(|scope| {
        // Writers create ConfigMaps as fast as the server answers; a 201 is an acknowledgement.
        for writer in 0..3 {
            let (server, acknowledged, stop) = (&first, &acknowledged, &stop);
            scope.spawn(move || {
                for i in 0.. {
                    if stop.load(std::sync::atomic::Ordering::SeqCst) {
                        return;
                    }
                    let name = format!("w{writer}-{i}");
                    let body = format!(r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}"}}}}"#);
                    if server.curl("POST", "/api/v1/namespaces/default/configmaps", Some(&body)).0 == 201 {
                        acknowledged.lock().unwrap().push(name);
                    }
                }
            });
        }
        within(Duration::from_secs(120), "30 acknowledged writes", || acknowledged.lock().unwrap().len() >= 30);
        // SIGKILL in the middle of the writes: no chance to flush or finish anything.
        assert!(Command::new("kill").args(["-9", &pid]).status().unwrap().success());
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    first.kill();
    let acknowledged = acknowledged.into_inner().unwrap();

    // Another process on the same prefix (another data directory) holds every one of them.
    let second = start_on(cluster, &prefix);
    let listed = second.kubectl(&["get", "configmaps", "-o", "name"]);
    let listed: std::collections::BTreeSet<&str> = listed.lines().filter_map(|l| l.strip_prefix("configmap/")).collect();
    let lost: Vec<&String> = acknowledged.iter().filter(|name| !listed.contains(name.as_str())).collect();
    assert!(lost.is_empty(), "acknowledged but lost: {lost:?} (of {})", acknowledged.len());
}
