//! For tests: one private OCI registry per test process (Debian's `docker-registry`, which
//! `scripts/test` installs), started on first use on 127.0.0.1 at a free port with its storage
//! in a temporary directory, and stopped by a watchdog when the process exits; and registries
//! of a test's own, such as one requiring basic authentication; a slow proxy in front of a
//! registry, and images with a large layer, for tests of a pull in progress. Panics when
//! something cannot start: it is test support only.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use oxplane_testing::Watchdog;

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
        Watchdog::new().kill(child.id()).remove(&dir).arm().unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(&host).is_err() {
            assert!(Instant::now() < deadline, "docker-registry did not listen on {host}: {}", std::fs::read_to_string(dir.join("log")).unwrap_or_default());
            std::thread::sleep(Duration::from_millis(50));
        }
        Registry { host, storage: dir.join("data") }
    }
}

/// `image` with an extra layer before its others: an uncompressed tar of one file of `size`
/// bytes that do not compress (a pseudo-random sequence), for tests of large pulls. The
/// manifest and config are rewritten to name it, so the image's digest changes.
pub fn with_large_layer(image: &crate::Image, size: usize) -> crate::Image {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15 ^ size as u64;
    let mut data = Vec::with_capacity(size + 8);
    while data.len() < size {
        // xorshift64: fast, and enough to defeat compression.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        data.extend_from_slice(&state.to_le_bytes());
    }
    data.truncate(size);
    let mut tar = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_ustar();
    header.set_path("large").unwrap();
    header.set_mode(0o644);
    header.set_size(size as u64);
    header.set_mtime(0);
    header.set_cksum();
    tar.append(&header, data.as_slice()).unwrap();
    let layer = tar.into_inner().unwrap();
    let layer_digest = crate::digest(&layer);
    let mut config: serde_json::Value = serde_json::from_slice(&image.config).unwrap();
    config["rootfs"]["diff_ids"].as_array_mut().unwrap().insert(0, serde_json::json!(layer_digest));
    let config = serde_json::to_vec(&config).unwrap();
    let mut manifest = image.manifest_json().unwrap();
    manifest["config"]["digest"] = serde_json::json!(crate::digest(&config));
    manifest["config"]["size"] = serde_json::json!(config.len());
    manifest["layers"].as_array_mut().unwrap().insert(0, serde_json::json!({"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layer_digest, "size": layer.len()}));
    let mut layers = image.layers.clone();
    layers.insert(0, layer);
    crate::Image { manifest: serde_json::to_vec(&manifest).unwrap(), config, layers }
}

/// A TCP proxy on 127.0.0.1 (a free port; its `HOST:PORT` is returned) to `target`, sending
/// what `target` answers at most `bytes_per_second` (requests pass at full speed): a slow
/// registry for tests that watch a pull in progress. It runs until the process exits.
pub fn throttled_proxy(target: &str, bytes_per_second: u64) -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let target = target.to_string();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let Ok(server) = std::net::TcpStream::connect(&target) else { continue };
            let (mut client_in, mut server_out) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut client_in, &mut server_out);
                let _ = server_out.shutdown(std::net::Shutdown::Write);
            });
            let (mut server_in, mut client_out) = (server, client);
            std::thread::spawn(move || {
                // Chunks of a tenth of a second's worth, each followed by a tenth of a second.
                let mut buffer = vec![0u8; (bytes_per_second / 10).max(1) as usize];
                while let Ok(n) = server_in.read(&mut buffer) {
                    if n == 0 || client_out.write_all(&buffer[..n]).is_err() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                let _ = client_out.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    address
}
