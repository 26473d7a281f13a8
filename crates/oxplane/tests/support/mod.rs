//! Test support: a real `oxplane up` process in a temporary data directory, and the real
//! `kubectl` pointed at it with a private HOME (so its discovery cache starts empty).

#![allow(dead_code)]

pub mod function_servers;
pub mod processes;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The servers' log filter; `OXPLANE_TEST_LOG` replaces it (e.g. with `debug` to see more).
const LOG_FILTER: &str = "info,kube=warn,hyper=warn,tower=warn";

/// A running server.
pub struct Server {
    dir: tempfile::TempDir,
    home: tempfile::TempDir,
    child: Option<Child>,
    /// Extra arguments of `oxplane up`.
    args: Vec<String>,
    /// Extra environment of the next start only.
    env: Vec<(String, String)>,
    /// Extra environment of every start.
    env_always: Vec<(String, String)>,
    starts: usize,
}

impl Server {
    /// Starts `oxplane up` on a free port and waits until its kubeconfig answers.
    pub fn start() -> Server {
        Server::start_with(&[])
    }

    /// Starts `oxplane up` with extra arguments (e.g. `--provider provider-nop`).
    pub fn start_with(args: &[&str]) -> Server {
        let mut server = Server::new(args);
        server.spawn();
        server
    }

    /// A server that is not started yet.
    pub fn new(args: &[&str]) -> Server {
        Server {
            dir: tempfile::tempdir().unwrap(),
            home: tempfile::tempdir().unwrap(),
            child: None,
            args: args.iter().map(|a| a.to_string()).collect(),
            env: Vec::new(),
            env_always: Vec::new(),
            starts: 0,
        }
    }

    /// Sets an environment variable for every start.
    pub fn env_always(&mut self, key: &str, value: &str) {
        self.env_always.push((key.to_string(), value.to_string()));
    }

    /// How many times the process was started.
    pub fn starts(&self) -> usize {
        self.starts
    }

    /// Sets an environment variable for the next start only.
    pub fn env_once(&mut self, key: &str, value: &str) {
        self.env.push((key.to_string(), value.to_string()));
    }

    /// The log of every start so far (stderr, at level info for oxplane's crates).
    pub fn log(&self) -> String {
        (1..=self.starts).map(|n| std::fs::read_to_string(self.dir.path().join(format!("oxplane-{n}.log"))).unwrap_or_default()).collect()
    }

    /// Log lines at WARN or ERROR.
    pub fn warnings(&self) -> Vec<String> {
        self.log().lines().filter(|l| l.contains(" WARN ") || l.contains(" ERROR ")).map(str::to_string).collect()
    }

    /// Starts the process (after `new`, or after it died).
    pub fn spawn(&mut self) {
        let _ = std::fs::remove_file(self.kubeconfig());
        self.starts += 1;
        let log = std::fs::File::create(self.dir.path().join(format!("oxplane-{}.log", self.starts))).unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_oxplane"));
        command
            .args(["up", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(self.dir.path())
            .args(&self.args)
            .env("OXPLANE_LOG", std::env::var("OXPLANE_TEST_LOG").unwrap_or_else(|_| LOG_FILTER.to_string()))
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(log);
        for (key, value) in self.env.drain(..).chain(self.env_always.iter().cloned()) {
            command.env(key, value);
        }
        let child = command.spawn().unwrap();
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if self.kubeconfig().exists() {
                let (code, body) = self.curl_without_token("/readyz");
                if code == 200 && body == "ok" {
                    return;
                }
            }
            if !self.env_always.is_empty() && self.exited() {
                // Killed at a fault point before it was ready: the caller starts it again.
                return;
            }
            assert!(Instant::now() < deadline, "oxplane did not become ready");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Replaces the extra arguments of `oxplane up` for the next starts.
    pub fn set_args(&mut self, args: &[&str]) {
        self.args = args.iter().map(|a| a.to_string()).collect();
    }

    /// Stops the server with SIGTERM and starts it again on the same data directory.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    /// Sends SIGTERM and waits for the process to exit.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
            let _ = child.wait();
        }
    }

    /// Sends SIGTERM and waits up to `limit` for the process to exit; its exit status, or `None`
    /// when it was not running or did not exit in time (then it is killed).
    pub fn terminate(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let mut child = self.child.take()?;
        sigterm(&mut child, limit)
    }

    /// Whether the process has exited (e.g. killed itself at a fault point).
    pub fn exited(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(Some(_))) | None)
    }

    /// Waits for the process to exit by itself, up to `limit`; whether it did.
    pub fn wait_exit(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if self.exited() {
                self.child = None;
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// Kills the server with SIGKILL (no chance to clean up) and starts it again.
    pub fn kill_and_restart(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.spawn();
    }

    /// A kube-rs client from the server's kubeconfig.
    pub async fn client(&self) -> kube::Client {
        let kubeconfig = kube::config::Kubeconfig::read_from(self.kubeconfig()).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await.unwrap();
        kube::Client::try_from(config).unwrap()
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The kubeconfig the server wrote.
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }

    /// Kills the server with SIGKILL and leaves it dead.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The process id of the running server.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).unwrap_or(0)
    }

    /// The URL the server serves on.
    pub fn url(&self) -> String {
        self.server_url()
    }

    /// The `https://host:port` the kubeconfig points at.
    pub fn server_url(&self) -> String {
        let config: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(self.kubeconfig()).unwrap()).unwrap();
        config["clusters"][0]["cluster"]["server"].as_str().unwrap().to_string()
    }

    /// A kubectl command pointed at this server.
    pub fn kubectl_command(&self, args: &[&str]) -> Command {
        let mut command = Command::new("kubectl");
        command.args(args).env("KUBECONFIG", self.kubeconfig()).env("HOME", self.home.path());
        command
    }

    fn run(&self, args: &[&str], stdin: &str) -> std::process::Output {
        let mut child = self
            .kubectl_command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl is installed");
        child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
        child.wait_with_output().unwrap()
    }

    /// Runs kubectl, asserting success; returns stdout.
    pub fn kubectl(&self, args: &[&str]) -> String {
        self.kubectl_stdin(args, "")
    }

    /// Runs kubectl with `stdin`, asserting success; returns stdout.
    pub fn kubectl_stdin(&self, args: &[&str], stdin: &str) -> String {
        let out = self.run(args, stdin);
        assert!(out.status.success(), "kubectl {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs kubectl with `stdin`: stdout on success, stderr on failure.
    pub fn kubectl_try(&self, args: &[&str], stdin: &str) -> Result<String, String> {
        let out = self.run(args, stdin);
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// Runs kubectl, asserting failure; returns stderr.
    pub fn kubectl_fails(&self, args: &[&str], stdin: &str) -> String {
        let out = self.run(args, stdin);
        assert!(!out.status.success(), "kubectl {args:?} should have failed: {}", String::from_utf8_lossy(&out.stdout));
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    /// Applies a YAML stream with `kubectl apply -f -`.
    pub fn apply(&self, yaml: &str) {
        self.kubectl_stdin(&["apply", "-f", "-"], yaml);
    }

    /// `kubectl get <args> -o json --ignore-not-found`: the object or list, or `None` when
    /// the object does not exist.
    pub fn get(&self, args: &[&str]) -> Option<serde_json::Value> {
        let mut all = vec!["get"];
        all.extend_from_slice(args);
        all.extend(["-o", "json", "--ignore-not-found"]);
        let out = self.kubectl(&all);
        (!out.trim().is_empty()).then(|| serde_json::from_str(&out).unwrap())
    }

    /// GETs `path` with no credentials, trusting the server's CA; returns (status, body).
    pub fn curl_without_token(&self, path: &str) -> (u16, String) {
        let ca = self.dir.path().join("pki").join("ca.crt");
        let Ok(url) = std::panic::catch_unwind(|| self.server_url()) else { return (0, String::new()) };
        let out = Command::new("curl")
            .args(["-s", "--cacert"])
            .arg(&ca)
            .args(["-w", "\n%{http_code}"])
            .arg(format!("{url}{path}"))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
        (code.trim().parse().unwrap_or(0), body.to_string())
    }
}

impl Server {
    /// Sends a request with the admin token; returns (status, response headers, body).
    pub fn curl(&self, method: &str, path: &str, body: Option<&str>) -> (u16, String, String) {
        let config: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(self.kubeconfig()).unwrap()).unwrap();
        let token = config["users"][0]["user"]["token"].as_str().unwrap().to_string();
        let ca = self.dir.path().join("pki").join("ca.crt");
        let headers = self.dir.path().join("curl-headers");
        let mut command = Command::new("curl");
        command
            .args(["-s", "-X", method, "--cacert"])
            .arg(&ca)
            .arg("-D")
            .arg(&headers)
            .args(["-H", &format!("Authorization: Bearer {token}"), "-H", "Content-Type: application/json"])
            .args(["-w", "\n%{http_code}", "--max-time", "30"]);
        if let Some(body) = body {
            command.args(["--data-binary", body]);
        }
        let out = command.arg(format!("{}{path}", self.server_url())).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
        let headers = std::fs::read_to_string(&headers).unwrap_or_default();
        (code.trim().parse().unwrap_or(0), headers, body.to_string())
    }
}

/// Writes an `EncryptionConfiguration` with one fixed AES-GCM key into `dir` and returns its
/// path: servers sharing one etcd must all read each other's Secrets, as kube-apiservers do.
pub fn shared_encryption_config(dir: &Path) -> String {
    let path = dir.join("encryption.json");
    let config = serde_json::json!({
        "apiVersion": "apiserver.config.k8s.io/v1",
        "kind": "EncryptionConfiguration",
        "resources": [{"resources": ["secrets"], "providers": [{"aesgcm": {"keys": [
            {"name": "shared", "secret": "c2hhcmVkLWtleS1zaGFyZWQta2V5LXNoYXJlZC1rZXk="}
        ]}}]}],
    });
    std::fs::write(&path, config.to_string()).unwrap();
    path.display().to_string()
}

/// Sends SIGTERM to `child` and waits up to `limit` for it to exit; its exit status, or `None`
/// when it did not exit in time (then it is killed, so no test leaves it running).
pub fn sigterm(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// The condition of `type_` in an object's `status.conditions`.
pub fn condition(object: &serde_json::Value, type_: &str) -> Option<serde_json::Value> {
    object["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == type_).cloned()
}

/// The NopResources composed for composite `xr`, by composition resource name.
pub fn composed_nops(server: &Server, xr: &str) -> std::collections::BTreeMap<String, serde_json::Value> {
    let list = server.get(&["nopresources", "-l", &format!("crossplane.io/composite={xr}")]).unwrap_or_default();
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| Some((n["metadata"]["annotations"]["crossplane.io/composition-resource-name"].as_str()?.to_string(), n.clone())))
        .collect()
}

/// Whether the condition of `type_` is `True`.
pub fn is_true(object: &serde_json::Value, type_: &str) -> bool {
    condition(object, type_).is_some_and(|c| c["status"] == "True")
}

/// What `kubectl ARGS` prints, as rows of whitespace-separated cells (a table's header first).
pub fn table(server: &Server, args: &[&str]) -> Vec<Vec<String>> {
    server.kubectl(args).lines().map(|l| l.split_whitespace().map(str::to_string).collect()).collect()
}

/// Polls `check` every 250 ms until it holds, failing the test after `limit`.
pub fn within(limit: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !check() {
        assert!(Instant::now() < deadline, "not within {limit:?}: {what}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// What Rust's debug formatting of values looks like, which no user should ever read.
const DEBUG_FORMATTING: [&str; 6] = ["Object {", "String(\"", "Number(", "Array [", "Bool(", "Some("];

impl Server {
    /// Copies this server's logs where they outlive the test (the data directory does not), for
    /// a failed test: under the target directory, named after the test, and says where.
    fn keep_logs(&self) {
        let test = std::thread::current().name().unwrap_or("unnamed").replace("::", "-");
        let dir = self.dir.path().file_name().map(|n| n.to_string_lossy().trim_start_matches('.').to_string()).unwrap_or_default();
        let kept = Path::new(env!("CARGO_TARGET_TMPDIR")).join("failed-tests").join(test).join(dir);
        if std::fs::create_dir_all(&kept).is_err() {
            return;
        }
        for n in 1..=self.starts {
            let name = format!("oxplane-{n}.log");
            let _ = std::fs::copy(self.dir.path().join(&name), kept.join(&name));
        }
        eprintln!("the server's logs are kept in {}", kept.display());
    }

    /// Every condition and event message of every object served that shows Rust debug
    /// formatting, as `<kind>/<name>: <message>`.
    pub fn debug_formatted_messages(&self) -> Vec<String> {
        debug_formatted(&self.every_object())
    }

    /// Every object the server serves a list of, in one kubectl call (`Null` if it cannot answer).
    fn every_object(&self) -> serde_json::Value {
        let Ok(kinds) = self.kubectl_try(&["api-resources", "--verbs=list", "-o", "name"], "") else { return serde_json::Value::Null };
        let kinds: Vec<&str> = kinds.lines().filter(|k| !k.is_empty()).collect();
        let out = self.run(&["get", &kinds.join(","), "-A", "-o", "json"], "");
        serde_json::from_slice(&out.stdout).unwrap_or_default()
    }

    /// Secret values (of every Secret in `objects`, and the admin token) that the server's log
    /// shows: none may, at any level.
    fn secrets_in_log(&self, objects: &serde_json::Value) -> Vec<String> {
        use base64::Engine;
        let mut values: Vec<String> = std::fs::read_to_string(self.dir.path().join("admin.token")).into_iter().map(|t| t.trim().to_string()).collect();
        for item in objects["items"].as_array().into_iter().flatten().filter(|i| i["kind"] == "Secret") {
            for value in item["data"].as_object().into_iter().flatten().filter_map(|(_, v)| v.as_str()) {
                let decoded = base64::engine::general_purpose::STANDARD.decode(value).ok().and_then(|b| String::from_utf8(b).ok());
                values.extend(decoded);
            }
        }
        let log = self.log();
        // Short values ("true", "5432") say nothing about a leak and match by chance.
        values.into_iter().filter(|v| v.len() >= 12 && log.contains(v.as_str())).collect()
    }
}

/// Condition messages, Event messages and notes among `objects` that show Rust's debug
/// formatting.
fn debug_formatted(objects: &serde_json::Value) -> Vec<String> {
    let mut found = Vec::new();
    for item in objects["items"].as_array().into_iter().flatten() {
        let messages = item["status"]["conditions"].as_array().into_iter().flatten().map(|c| &c["message"]).chain([&item["message"], &item["note"]]);
        for message in messages.filter_map(|m| m.as_str()) {
            if DEBUG_FORMATTING.iter().any(|p| message.contains(p)) {
                found.push(format!("{}/{}: {message}", item["kind"].as_str().unwrap_or_default(), item["metadata"]["name"].as_str().unwrap_or_default()));
            }
        }
    }
    found
}

impl Drop for Server {
    fn drop(&mut self) {
        // Every end-to-end test checks, as it ends, that no message it caused shows Rust's
        // debug formatting, and that its server's log shows no Secret's value.
        let running = self.child.as_mut().is_some_and(|c| matches!(c.try_wait(), Ok(None)));
        let objects = if running && !std::thread::panicking() { self.every_object() } else { serde_json::Value::Null };
        self.stop();
        if std::thread::panicking() {
            self.keep_logs();
        }
        let found = debug_formatted(&objects);
        assert!(found.is_empty(), "messages show Rust debug formatting:\n{}", found.join("\n"));
        let leaked = if objects.is_null() { Vec::new() } else { self.secrets_in_log(&objects) };
        assert!(leaked.is_empty(), "the server's log shows secret values: {leaked:?}");
    }
}

/// Waits until the object `what` (kubectl's `TYPE/NAME`) is Ready and Synced, failing after two
/// minutes with its last status.
pub fn wait_ready_and_synced(server: &Server, what: &str) {
    let mut last = serde_json::Value::Null;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        last = server.get(&[what]).unwrap_or(last);
        if is_true(&last, "Ready") && is_true(&last, "Synced") {
            return;
        }
        assert!(Instant::now() < deadline, "{what} not Ready and Synced: {}", last["status"]);
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// One key of the Secret `name` in the kubeconfig's namespace, decoded.
pub fn secret_value(server: &Server, name: &str, key: &str) -> String {
    let secret = server.get(&[&format!("secret/{name}")]).unwrap_or_else(|| panic!("secret {name}"));
    let value = oxplane_runtime::managed::connection::decode_data(&secret).remove(key).unwrap_or_else(|| panic!("{name} has no {key}"));
    String::from_utf8(value).unwrap()
}

/// Waits until the object `what` reports `Synced=False` and returns the condition's message.
pub fn sync_error(server: &Server, what: &str) -> String {
    let mut message = String::new();
    within(Duration::from_secs(90), &format!("{what} Synced=False"), || {
        let Some(object) = server.get(&[what]) else { return false };
        match condition(&object, "Synced") {
            Some(c) if c["status"] == "False" => {
                message = c["message"].as_str().unwrap_or_default().to_string();
                true
            }
            _ => false,
        }
    });
    message
}
