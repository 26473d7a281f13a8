//! For tests: one private OCI registry per test process (Debian's `docker-registry`, which
//! `scripts/test` installs), started on first use on 127.0.0.1 at a free port with its storage
//! in a temporary directory, and stopped by a watchdog when the process exits; and registries
//! of a test's own, such as one requiring basic authentication. Panics when it cannot start:
//! it is test support only.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The shared registry.
pub struct Registry {
    /// `127.0.0.1:PORT`, the registry part of references to push and pull.
    pub host: String,
    /// The registry's storage directory (`docker/registry/v2/blobs/sha256/<2 hex>/<hex>/data`
    /// holds each blob), for tests that damage what it serves.
    pub storage: std::path::PathBuf,
}

impl Registry {
    /// The file the registry keeps blob `digest` (`sha256:<hex>`) in.
    pub fn blob_file(&self, digest: &str) -> std::path::PathBuf {
        let hex = digest.trim_start_matches("sha256:");
        self.storage.join("docker/registry/v2/blobs/sha256").join(&hex[..2.min(hex.len())]).join(hex).join("data")
    }

    /// The shared registry, started on first use.
    pub fn shared() -> &'static Registry {
        static REGISTRY: OnceLock<Registry> = OnceLock::new();
        REGISTRY.get_or_init(|| Registry::start_private(None))
    }

    /// A registry of the caller's own (stopped when the process exits); with `htpasswd` (the
    /// file's text: `user:bcrypt hash` lines) it requires basic authentication for every
    /// request, as a private registry does.
    pub fn start_private(htpasswd: Option<&str>) -> Registry {
        let dir = tempfile::Builder::new().prefix("oxplane-registry-").tempdir().unwrap().keep();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let host = format!("127.0.0.1:{port}");
        let config = dir.join("config.yml");
        let mut text =
            format!("version: 0.1\nlog: {{level: warn}}\nstorage:\n  filesystem: {{rootdirectory: {}}}\n  delete: {{enabled: true}}\nhttp:\n  addr: {host}\n", dir.join("data").display());
        if let Some(htpasswd) = htpasswd {
            let file = dir.join("htpasswd");
            std::fs::write(&file, htpasswd).unwrap();
            text.push_str(&format!("auth:\n  htpasswd:\n    realm: oxplane-tests\n    path: {}\n", file.display()));
        }
        std::fs::write(&config, text).unwrap();
        let log = std::fs::File::create(dir.join("log")).unwrap();
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("docker-registry is not installed (scripts/test installs it)");
        // Stop the registry when this process is gone, however it ends.
        let stop = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 1; done; kill {child} 2>/dev/null; sleep 1; kill -9 {child} 2>/dev/null; rm -rf {dir}",
            pid = std::process::id(),
            child = child.id(),
            dir = dir.display(),
        );
        Command::new("setsid").args(["sh", "-c", &stop]).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(&host).is_err() {
            assert!(Instant::now() < deadline, "docker-registry did not listen on {host}: {}", std::fs::read_to_string(dir.join("log")).unwrap_or_default());
            std::thread::sleep(Duration::from_millis(50));
        }
        Registry { host, storage: dir.join("data") }
    }
}
