//! Function packages that are not built in: pulled from their registry (through ImageConfigs
//! and pull secrets, into the package cache) and run as supervised local processes.
//!
//! The image's layers are unpacked once per digest under `DIR/rootfs/<digest>`; the process is
//! the image's `Entrypoint` and `Cmd` (a program inside that root filesystem), started in it
//! with the image's `Env` and what Crossplane's Deployment gives a function:
//! `TLS_SERVER_CERTS_DIR` (a server certificate for `127.0.0.1` and `localhost` from oxplane's
//! CA, so calls use mutual TLS), `FUNCTION_NAME`, `REVISION_NAME`, `REVISION_UID`. It runs in a
//! network namespace of its own (`sandbox.rs`), serving on the SDKs' default port 9443 there,
//! reached through a local port outside that the revision's `status.endpoint` names. Where no
//! namespace can be made, processes share the host's network and each is given its own port
//! with `--address 127.0.0.1:PORT` (the flag both function SDKs and `oxplane function serve`
//! take). Its output goes to `DIR/logs/<revision>.log`;
//! when it exits it is started again after a backoff (1 s doubling to 60 s, reset after a
//! minute up), and the Function is unhealthy meanwhile with the exit and the last lines of the
//! output. The process runs unsandboxed, as the user running oxplane: only trusted packages.
//! It is stopped when the Function goes or moves to another revision, and when oxplane stops;
//! it never outlives oxplane (`process.rs`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use oxplane_functions::grpc::tls::CertificateAuthority;
use oxplane_runtime::client::Kube;
use oxplane_runtime::object;
use oxplane_xpkg::fetch::Cache;
use oxplane_xpkg::meta::PackageType;
use serde_json::Value;

use super::configurations::dependencies::{Dependency, check};
use super::function_revision_kind;
use super::process::{Down, Process, down_now, supervise};
use super::runtime_image::{Dependencies, RuntimeImage};
use super::sandbox::Sandbox;

/// What a running function process is known by.
struct Running {
    revision: String,
    address: String,
    capabilities: Vec<String>,
    /// Why the process is down now (none while it runs).
    down: Down,
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
    /// What each pulled Function depends on, as last checked (kept while it waits for them).
    dependencies: Mutex<HashMap<String, Dependencies>>,
    /// Why processes share oxplane's network (none: each gets a namespace of its own).
    no_sandbox: Option<String>,
}

impl FunctionRuntimes {
    /// Runtimes keeping root filesystems and logs in `dir`, pulling through `cache_dir`, with
    /// certificates from oxplane's CA in `ca_dir`.
    /// Processes an earlier run left in `dir` are killed first.
    pub fn new(kube: Kube, cache_dir: PathBuf, dir: PathBuf, ca_dir: PathBuf) -> Self {
        super::process::reap_orphans(&dir);
        let no_sandbox = super::sandbox::unavailable();
        if let Some(why) = &no_sandbox {
            tracing::warn!(%why, "function processes share oxplane's network: each is given its port with --address");
        }
        FunctionRuntimes { kube, cache: Cache::new(cache_dir), dir, ca_dir, running: Mutex::new(HashMap::new()), dependencies: Mutex::new(HashMap::new()), no_sandbox }
    }

    /// What a running Function's package depends on.
    pub fn dependencies(&self, name: &str) -> Vec<Dependency> {
        self.checked().get(name).map(|d| d.wanted.clone()).unwrap_or_default()
    }

    /// `status.foundDependencies` and `installedDependencies` of a pulled Function's revision.
    pub fn dependency_status(&self, name: &str, status: &mut serde_json::Map<String, Value>) {
        if let Some(dependencies) = self.checked().get(name) {
            dependencies.write_status(status);
        }
    }

    fn checked(&self) -> std::sync::MutexGuard<'_, HashMap<String, Dependencies>> {
        self.dependencies.lock().unwrap_or_else(|p| p.into_inner())
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
        self.checked().remove(name);
    }

    /// Makes the Function's process run for the revision of `reference`: pulled, unpacked and
    /// started when it is not running yet (a process of another revision is stopped first).
    pub async fn ensure(&self, package: &Value, reference: &str, revision: &str, pull: &oxplane_xpkg::registry::ProgressSender) -> Result<Started, String> {
        let name = object::name(package).unwrap_or_default().to_string();
        let running = self.lock().get(&name).filter(|r| r.revision == revision).map(|r| Started { address: r.address.clone(), down: down_now(&r.down) });
        if let Some(started) = running {
            // Its dependencies are counted again (one may have turned healthy, or gone).
            let wanted = self.dependencies(&name);
            let resolution = check(&self.kube, &wanted).await?;
            let blocked = resolution.error();
            self.checked().insert(name.clone(), Dependencies { wanted, resolution });
            return blocked.map_or(Ok(started), Err);
        }
        self.stop(&name);
        let image = RuntimeImage::pull(&self.kube, &self.cache, &self.dir, package, reference, PackageType::Function, pull).await?;
        let mut capabilities: Vec<String> =
            image.parsed.meta.pointer("/spec/capabilities").and_then(Value::as_array).into_iter().flatten().filter_map(|c| c.as_str().map(str::to_string)).collect();
        if capabilities.is_empty() {
            capabilities.push("composition".into());
        }
        // Nothing runs while a dependency is missing or refused; the Lock entry the package
        // reconciler writes meanwhile lets the resolver install it.
        let dependencies = image.dependencies(&self.kube, package).await?;
        let blocked = dependencies.resolution.error();
        self.checked().insert(name.clone(), dependencies);
        if let Some(error) = blocked {
            return Err(error);
        }
        let (program, mut args) = image.argv(reference, &[])?;
        let certs = self.dir.join("tls").join(revision);
        let ca = CertificateAuthority::load_or_create(&self.ca_dir).map_err(|e| format!("cannot load oxplane's certificate authority: {e}"))?;
        ca.write_server_dir(&certs, &["127.0.0.1".to_string(), "localhost".to_string()]).map_err(|e| format!("cannot issue the function's server certificate: {e}"))?;
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map_err(|e| format!("cannot find a free port: {e}"))?.port();
        let address = format!("127.0.0.1:{port}");
        let uid = self.kube.get(&function_revision_kind(), None, revision).await.ok().flatten().and_then(|r| object::uid(&r).map(str::to_string)).unwrap_or_default();
        let mut env = image.env_pairs();
        env.extend([
            ("TLS_SERVER_CERTS_DIR".to_string(), certs.display().to_string()),
            ("FUNCTION_NAME".to_string(), name.clone()),
            ("REVISION_NAME".to_string(), revision.to_string()),
            ("REVISION_UID".to_string(), uid),
        ]);
        let sandbox = match &self.no_sandbox {
            None => Some(Arc::new(Sandbox::create(None, port, &self.dir).await.map_err(|e| format!("cannot make the function's network: {e}"))?)),
            Some(_) => {
                args.extend(["--address".to_string(), address.clone()]);
                None
            }
        };
        let log = self.dir.join("logs").join(format!("{revision}.log"));
        std::fs::create_dir_all(self.dir.join("logs")).map_err(|e| format!("cannot create the function's log folder: {e}"))?;
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let down = Arc::new(Mutex::new(Some("starting".to_string())));
        let process = Process { name: name.clone(), noun: "function", program, args, env, root: image.root, log, mounts: sandbox.as_ref().map(|s| s.mounts()).unwrap_or_default(), sandbox };
        tokio::spawn(supervise(process, down.clone(), stopped, Arc::new(|| {})));
        tracing::info!(function = %name, revision = %revision, address = %address, "started the function's process");
        let running = Running { revision: revision.to_string(), address: address.clone(), capabilities, down: down.clone(), _stop: stop };
        self.lock().insert(name, running);
        Ok(Started { address, down: down_now(&down) })
    }
}
