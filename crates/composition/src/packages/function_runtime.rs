//! Function packages that are not built in: pulled from their registry (through ImageConfigs
//! and pull secrets, into the package cache) and run as supervised local processes.
//!
//! The image's layers are unpacked once per digest under `DIR/rootfs/<digest>`; the process is
//! the image's `Entrypoint` and `Cmd` (a program inside that root filesystem), started in it
//! with the image's `Env` and what Crossplane's Deployment gives a function:
//! `TLS_SERVER_CERTS_DIR` (a server certificate for `127.0.0.1` and `localhost` from oxplane's
//! CA, so calls use mutual TLS), `FUNCTION_NAME`, `REVISION_NAME`, `REVISION_UID`. As processes
//! share the host's network here (no network namespace), each is given its own port with
//! `--address 127.0.0.1:PORT` (the flag both function SDKs and `oxplane function serve` take),
//! and the revision's `status.endpoint` names it. Its output goes to `DIR/logs/<revision>.log`;
//! when it exits it is started again after a backoff (1 s doubling to 60 s, reset after a
//! minute up), and the Function is unhealthy meanwhile with the exit and the last lines of the
//! output. The process runs unsandboxed, as the user running oxplane: only trusted packages.
//! It is stopped (killed) when the Function goes or moves to another revision, and when oxplane
//! stops.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use oxplane_functions::grpc::tls::CertificateAuthority;
use oxplane_runtime::client::Kube;
use oxplane_runtime::object;
use oxplane_xpkg::fetch::{Cache, PullPolicy, fetch};
use oxplane_xpkg::meta::PackageType;
use serde_json::Value;

use super::function_revision_kind;
use super::image_configs;

/// What a running function process is known by.
struct Running {
    revision: String,
    address: String,
    capabilities: Vec<String>,
    /// Why the process is down now (none while it runs).
    down: Arc<Mutex<Option<String>>>,
    /// Dropped (or sent `true`) to stop the process.
    _stop: tokio::sync::watch::Sender<bool>,
}

/// A function process as the installer sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Started {
    /// `127.0.0.1:PORT`, where it serves.
    pub address: String,
    /// Why it is down now, if it is.
    pub down: Option<String>,
}

/// The processes of pulled Function packages, by Function name.
pub struct FunctionRuntimes {
    kube: Kube,
    cache: Cache,
    dir: PathBuf,
    ca_dir: PathBuf,
    running: Mutex<HashMap<String, Running>>,
}

impl FunctionRuntimes {
    /// Runtimes keeping root filesystems and logs in `dir`, pulling through `cache_dir`, with
    /// certificates from oxplane's CA in `ca_dir`.
    pub fn new(kube: Kube, cache_dir: PathBuf, dir: PathBuf, ca_dir: PathBuf) -> Self {
        FunctionRuntimes { kube, cache: Cache::new(cache_dir), dir, ca_dir, running: Mutex::new(HashMap::new()) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Running>> {
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The endpoint and capabilities of a running Function, for its revision's status.
    pub fn status(&self, name: &str) -> Option<(String, Vec<String>)> {
        self.lock().get(name).map(|r| (r.address.clone(), r.capabilities.clone()))
    }

    /// Stops a Function's process, if it runs.
    pub fn stop(&self, name: &str) {
        self.lock().remove(name);
    }

    /// Makes the Function's process run for the revision of `reference`: pulled, unpacked and
    /// started when it is not running yet (a process of another revision is stopped first).
    pub async fn ensure(&self, package: &Value, reference: &str, revision: &str) -> Result<Started, String> {
        let name = object::name(package).unwrap_or_default().to_string();
        if let Some(running) = self.lock().get(&name).filter(|r| r.revision == revision) {
            let down = running.down.lock().unwrap_or_else(|p| p.into_inner()).clone();
            return Ok(Started { address: running.address.clone(), down });
        }
        self.stop(&name);
        let configs = image_configs::list(&self.kube).await.map_err(|e| format!("cannot unpack package: {e}"))?;
        let applied = image_configs::apply(&configs, reference);
        let credentials = image_configs::pull_credentials(&self.kube, &image_configs::pull_secret_names(package, &applied), &applied.image).await?;
        let policy = PullPolicy::parse(package.pointer("/spec/packagePullPolicy").and_then(Value::as_str)).map_err(|e| e.to_string())?;
        let fetched = fetch(&applied.image, &credentials, policy, &self.cache).await.map_err(|e| format!("cannot unpack package: {e}"))?;
        let stream = fetched.image.package_yaml().map_err(|e| format!("cannot get package: {e}"))?;
        let parsed = oxplane_xpkg::meta::parse(&stream).map_err(|e| format!("cannot parse package: {e}"))?;
        if parsed.package_type != PackageType::Function {
            return Err(format!("validating package contents failed: package meta type is not Function (it is a {})", parsed.package_type.kind()));
        }
        let mut capabilities: Vec<String> =
            parsed.meta.pointer("/spec/capabilities").and_then(Value::as_array).into_iter().flatten().filter_map(|c| c.as_str().map(str::to_string)).collect();
        if capabilities.is_empty() {
            capabilities.push("composition".into());
        }
        let root = self.dir.join("rootfs").join(fetched.digest.trim_start_matches("sha256:"));
        if !root.exists() {
            oxplane_xpkg::rootfs::unpack(&fetched.image, &root).map_err(|e| format!("cannot unpack the image of {reference}: {e}"))?;
        }
        let config: Value = serde_json::from_slice(&fetched.image.config).map_err(|e| format!("the image config of {reference} is not JSON: {e}"))?;
        let strings = |pointer: &str| -> Vec<String> {
            config.pointer(pointer).and_then(Value::as_array).into_iter().flatten().filter_map(|v| v.as_str().map(str::to_string)).collect()
        };
        let mut argv = strings("/config/Entrypoint");
        argv.extend(strings("/config/Cmd"));
        let image_env = strings("/config/Env");
        let Some(first) = argv.first().cloned() else {
            return Err(format!("the image of {reference} names no entrypoint to run"));
        };
        let program = program_in(&root, &first, &image_env).ok_or_else(|| format!("the entrypoint {first:?} of {reference} is not in its image"))?;
        let certs = self.dir.join("tls").join(revision);
        let ca = CertificateAuthority::load_or_create(&self.ca_dir).map_err(|e| format!("cannot load oxplane's certificate authority: {e}"))?;
        ca.write_server_dir(&certs, &["127.0.0.1".to_string(), "localhost".to_string()]).map_err(|e| format!("cannot issue the function's server certificate: {e}"))?;
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map_err(|e| format!("cannot find a free port: {e}"))?.port();
        let address = format!("127.0.0.1:{port}");
        let uid = self.kube.get(&function_revision_kind(), None, revision).await.ok().flatten().and_then(|r| object::uid(&r).map(str::to_string)).unwrap_or_default();
        let mut env: Vec<(String, String)> = image_env.iter().filter_map(|e| e.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect();
        if !env.iter().any(|(k, _)| k == "PATH") {
            env.push(("PATH".into(), "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into()));
        }
        env.extend([
            ("TLS_SERVER_CERTS_DIR".to_string(), certs.display().to_string()),
            ("FUNCTION_NAME".to_string(), name.clone()),
            ("REVISION_NAME".to_string(), revision.to_string()),
            ("REVISION_UID".to_string(), uid),
        ]);
        let mut args: Vec<String> = argv[1..].to_vec();
        args.extend(["--address".to_string(), address.clone()]);
        let log = self.dir.join("logs").join(format!("{revision}.log"));
        std::fs::create_dir_all(self.dir.join("logs")).map_err(|e| format!("cannot create the function's log folder: {e}"))?;
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let down = Arc::new(Mutex::new(Some("starting".to_string())));
        let process = Process { name: name.clone(), program, args, env, root, log };
        tokio::spawn(supervise(process, down.clone(), stopped));
        tracing::info!(function = %name, revision = %revision, address = %address, "started the function's process");
        let running = Running { revision: revision.to_string(), address: address.clone(), capabilities, down: down.clone(), _stop: stop };
        self.lock().insert(name, running);
        let down = down.lock().unwrap_or_else(|p| p.into_inner()).clone();
        Ok(Started { address, down })
    }
}

/// A program path of the image: absolute paths inside its root filesystem, bare names on the
/// image's `PATH` there.
fn program_in(root: &Path, program: &str, env: &[String]) -> Option<PathBuf> {
    if let Some(inside) = program.strip_prefix('/') {
        let path = root.join(inside);
        return path.exists().then_some(path);
    }
    let path = env.iter().find_map(|e| e.strip_prefix("PATH=")).unwrap_or("/usr/local/bin:/usr/bin:/bin");
    path.split(':').map(|dir| root.join(dir.trim_start_matches('/')).join(program)).find(|p| p.exists())
}

/// How to start a function's process.
struct Process {
    name: String,
    program: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    root: PathBuf,
    log: PathBuf,
}

/// The last lines of a log file (at most 2 KiB of its end).
fn last_lines(log: &Path) -> String {
    let mut text = String::new();
    if let Ok(mut file) = std::fs::File::open(log) {
        let length = file.metadata().map(|m| m.len()).unwrap_or(0);
        let _ = file.seek(SeekFrom::Start(length.saturating_sub(2048)));
        let _ = file.read_to_string(&mut text);
    }
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(5)..].join("\n")
}

/// Runs the process until stopped, starting it again after a backoff whenever it exits.
async fn supervise(process: Process, down: Arc<Mutex<Option<String>>>, mut stopped: tokio::sync::watch::Receiver<bool>) {
    let set_down = |why: Option<String>| *down.lock().unwrap_or_else(|p| p.into_inner()) = why;
    let mut backoff = Duration::from_secs(1);
    loop {
        let output = std::fs::OpenOptions::new().create(true).append(true).open(&process.log);
        let spawned = output.and_then(|out| {
            let err = out.try_clone()?;
            tokio::process::Command::new(&process.program)
                .args(&process.args)
                .env_clear()
                .envs(process.env.iter().map(|(k, v)| (k, v)))
                .current_dir(&process.root)
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err)
                .kill_on_drop(true)
                .spawn()
        });
        match spawned {
            Err(error) => set_down(Some(format!("cannot start {}: {error}", process.program.display()))),
            Ok(mut child) => {
                set_down(None);
                let started = Instant::now();
                tokio::select! {
                    status = child.wait() => {
                        let status = status.map_or_else(|e| e.to_string(), |s| s.to_string());
                        let why = format!("the function process exited ({status}); its last output: {}", last_lines(&process.log));
                        tracing::warn!(function = %process.name, %why, "function process exited; starting it again after {backoff:?}");
                        set_down(Some(why));
                        if started.elapsed() > Duration::from_secs(60) {
                            backoff = Duration::from_secs(1);
                        }
                    }
                    _ = stopped.changed() => {
                        let _ = child.kill().await;
                        return;
                    }
                }
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = stopped.changed() => return,
        }
        backoff = (backoff * 2).min(Duration::from_secs(60));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn programs_are_found_inside_the_image() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("usr/local/bin")).unwrap();
        std::fs::write(dir.path().join("usr/local/bin/function"), "").unwrap();
        assert_eq!(program_in(dir.path(), "/usr/local/bin/function", &[]), Some(dir.path().join("usr/local/bin/function")));
        assert_eq!(program_in(dir.path(), "function", &["PATH=/bin:/usr/local/bin".into()]), Some(dir.path().join("usr/local/bin/function")));
        assert_eq!(program_in(dir.path(), "/bin/sh", &[]), None, "never the host's");
    }

    #[test]
    fn the_last_lines_of_a_log_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("x.log");
        std::fs::write(&log, (1..=9).map(|i| format!("line {i}\n")).collect::<String>()).unwrap();
        assert_eq!(last_lines(&log), "line 5\nline 6\nline 7\nline 8\nline 9");
    }
}
