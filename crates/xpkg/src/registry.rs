//! Moving package images to and from OCI registries with `oci-client`: pushing the exact
//! bytes of an image (so its digest is the one `build` computed), and pulling an image by tag
//! or digest with every blob checked against its digest. An image index resolves to its
//! linux/amd64 child (a child without a platform counts as linux/amd64), as Crossplane reads
//! package content. Registries on loopback addresses are spoken to in plain HTTP, as
//! Crossplane's registry client does for them; every other registry over HTTPS.

use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference, RegistryOperation};
use serde_json::Value;

use crate::{Image, MEDIA_DOCKER_LIST, MEDIA_DOCKER_MANIFEST, MEDIA_OCI_INDEX, MEDIA_OCI_MANIFEST, XpkgError, verify};

/// Credentials for a registry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Credentials {
    /// No credentials.
    #[default]
    Anonymous,
    /// HTTP basic authentication.
    Basic {
        /// The user name.
        username: String,
        /// The password.
        password: String,
    },
    /// A registry token (sent as a bearer token).
    Bearer(String),
}

impl Credentials {
    fn auth(&self) -> RegistryAuth {
        match self {
            Credentials::Anonymous => RegistryAuth::Anonymous,
            Credentials::Basic { username, password } => RegistryAuth::Basic(username.clone(), password.clone()),
            Credentials::Bearer(token) => RegistryAuth::Bearer(token.clone()),
        }
    }
}

/// Whether a registry host (with or without a port) is a loopback address.
pub fn is_loopback(registry: &str) -> bool {
    let host = match registry.rsplit_once(':') {
        Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => host,
        _ => registry,
    };
    let host = host.trim_matches(['[', ']']);
    host == "localhost" || host.ends_with(".localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Parses an image reference (`registry/repository:tag` or `...@sha256:...`).
pub fn parse_reference(reference: &str) -> Result<Reference, XpkgError> {
    reference.parse::<Reference>().map_err(|e| XpkgError::Invalid(format!("invalid package reference {reference:?}: {e}")))
}

fn client(reference: &Reference) -> Client {
    // reqwest (under oci-client) is built without a TLS crypto provider of its own and panics
    // without a process default: install ring, the provider the rest of the workspace uses.
    // An error only means some provider is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let registry = reference.resolve_registry().to_string();
    let protocol = if is_loopback(&registry) { ClientProtocol::Http } else { ClientProtocol::Https };
    Client::new(ClientConfig { protocol, ..Default::default() })
}

/// Whether the registry refused the credentials (or their absence): HTTP 401.
fn unauthorized(error: &OciDistributionError) -> bool {
    match error {
        OciDistributionError::UnauthorizedError { .. } => true,
        OciDistributionError::ServerError { code, .. } => *code == 401,
        OciDistributionError::RegistryError { envelope, .. } => envelope.errors.iter().any(|e| e.code == OciErrorCode::Unauthorized),
        _ => false,
    }
}

fn registry_error(action: &str, reference: &Reference) -> impl FnOnce(OciDistributionError) -> XpkgError {
    let target = reference.whole();
    let action = action.to_string();
    // oci-client words a 401 in several ways, not all naming the status: say it plainly.
    move |error| match unauthorized(&error) {
        true => XpkgError::Registry(format!("cannot {action} {target}: 401 Unauthorized: {error}")),
        false => XpkgError::Registry(format!("cannot {action} {target}: {error}")),
    }
}

/// Pushes `image` to `reference` (its blobs, then its manifest under the reference's tag);
/// returns the digest the registry stores the image under.
pub async fn push(image: &Image, reference: &str, credentials: &Credentials) -> Result<String, XpkgError> {
    image.verify()?;
    let reference = parse_reference(reference)?;
    let client = client(&reference);
    client.auth(&reference, &credentials.auth(), RegistryOperation::Push).await.map_err(registry_error("authenticate to push", &reference))?;
    for blob in std::iter::once(&image.config).chain(&image.layers) {
        let digest = crate::digest(blob);
        client.push_blob(&reference, blob.clone(), &digest).await.map_err(registry_error("push a blob of", &reference))?;
    }
    let media_type = image.manifest_json()?.get("mediaType").and_then(Value::as_str).unwrap_or(MEDIA_OCI_MANIFEST).to_string();
    let content_type = media_type.parse().map_err(|_| XpkgError::Invalid(format!("invalid manifest media type {media_type:?}")))?;
    client
        .push_manifest_raw(&reference, image.manifest.clone(), content_type)
        .await
        .map_err(registry_error("push the manifest of", &reference))?;
    Ok(image.digest())
}

/// What a pull found: the image, and the digest the reference resolved to (the index's when
/// the reference names an index, which is what a package revision is named after).
#[derive(Clone, Debug)]
pub struct Pulled {
    /// The image (for an index, its linux/amd64 child).
    pub image: Image,
    /// The digest of what the reference names.
    pub digest: String,
    /// The image index the reference names, when it names one.
    pub index: Option<Vec<u8>>,
}

/// The host's platform as OCI names it (`linux`, `amd64`/`arm64`/...).
pub fn host_platform() -> [&'static str; 2] {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        other => other,
    };
    [std::env::consts::OS, arch]
}

/// The child of an image index a package is read from: linux/amd64 (as Crossplane reads
/// package content; a child without a platform counts as linux/amd64), else the host's
/// platform.
pub fn select_child(index: &Value) -> Option<String> {
    let children = index.get("manifests")?.as_array()?;
    let platform_of = |child: &Value| -> (String, String) {
        let text = |f: &str| child.pointer(&format!("/platform/{f}")).and_then(Value::as_str).unwrap_or_default().to_string();
        match child.get("platform") {
            None => ("linux".to_string(), "amd64".to_string()),
            Some(_) => (text("os"), text("architecture")),
        }
    };
    let [os, arch] = host_platform();
    let wanted = [("linux", "amd64"), (os, arch)];
    wanted.iter().find_map(|(os, arch)| {
        children.iter().find(|c| platform_of(c) == (os.to_string(), arch.to_string())).and_then(|c| c.get("digest")?.as_str().map(str::to_string))
    })
}

/// The digest a reference names now (a HEAD of its manifest, GET when HEAD fails).
pub async fn resolve(reference: &str, credentials: &Credentials) -> Result<String, XpkgError> {
    let reference = parse_reference(reference)?;
    let client = client(&reference);
    let auth = credentials.auth();
    client.auth(&reference, &auth, RegistryOperation::Pull).await.map_err(registry_error("authenticate to pull", &reference))?;
    match client.fetch_manifest_digest(&reference, &auth).await {
        Ok(digest) => Ok(digest),
        Err(_) => {
            let accepted = [MEDIA_OCI_MANIFEST, MEDIA_DOCKER_MANIFEST, MEDIA_OCI_INDEX, MEDIA_DOCKER_LIST];
            let (bytes, _) = client.pull_manifest_raw(&reference, &auth, &accepted).await.map_err(registry_error("resolve", &reference))?;
            Ok(crate::digest(&bytes))
        }
    }
}

/// The tags of the repository `source` (`registry/repository`, no tag) names.
pub async fn tags(source: &str, credentials: &Credentials) -> Result<Vec<String>, XpkgError> {
    let reference = parse_reference(source)?;
    let client = client(&reference);
    let auth = credentials.auth();
    client.auth(&reference, &auth, RegistryOperation::Pull).await.map_err(registry_error("authenticate to list the tags of", &reference))?;
    let listed = client.list_tags(&reference, &auth, None, None).await.map_err(registry_error("list the tags of", &reference))?;
    Ok(listed.tags)
}

/// How far a pull has come: bytes and layers of the image received so far (the layers'
/// sizes are their descriptors' sizes, known from the manifest before any layer arrives).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Bytes of the image's layers received.
    pub bytes: u64,
    /// Bytes of all its layers.
    pub total_bytes: u64,
    /// Layers received in full.
    pub layers: usize,
    /// Layers of the image.
    pub total_layers: usize,
}

impl Progress {
    /// `12.5 MiB of 40.0 MiB, 1 of 3 layers`.
    pub fn describe(&self) -> String {
        let mib = |bytes: u64| format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0));
        format!("{} of {}, {} of {} layers", mib(self.bytes), mib(self.total_bytes), self.layers, self.total_layers)
    }
}

/// Where a pull reports its progress: a watch channel (its receivers see the latest).
pub type ProgressSender = tokio::sync::watch::Sender<Progress>;

/// A blob's bytes as they arrive, counted into the pull's progress. (`pull_blob` writes into
/// any `AsyncWrite`; a `Vec` that also counts is all it takes, no stream handling of our own.)
struct Counted<'a> {
    bytes: Vec<u8>,
    progress: Option<&'a ProgressSender>,
}

impl tokio::io::AsyncWrite for Counted<'_> {
    fn poll_write(self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>, buf: &[u8]) -> std::task::Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        this.bytes.extend_from_slice(buf);
        if let Some(progress) = this.progress {
            progress.send_modify(|p| p.bytes += buf.len() as u64);
        }
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

/// Pulls the image `reference` names, verifying every digest.
pub async fn pull(reference: &str, credentials: &Credentials) -> Result<Pulled, XpkgError> {
    pull_with_progress(reference, credentials, None).await
}

/// [`pull`], reporting the bytes and layers received to `progress` as they arrive, and each
/// layer pulled to the log.
pub async fn pull_with_progress(reference: &str, credentials: &Credentials, progress: Option<&ProgressSender>) -> Result<Pulled, XpkgError> {
    let reference = parse_reference(reference)?;
    let client = client(&reference);
    let auth = credentials.auth();
    client.auth(&reference, &auth, RegistryOperation::Pull).await.map_err(registry_error("authenticate to pull", &reference))?;
    let accepted = [MEDIA_OCI_MANIFEST, MEDIA_DOCKER_MANIFEST, MEDIA_OCI_INDEX, MEDIA_DOCKER_LIST];
    let (top, top_digest) = client.pull_manifest_raw(&reference, &auth, &accepted).await.map_err(registry_error("pull", &reference))?;
    let top = top.to_vec();
    verify(&format!("the manifest of {}", reference.whole()), &top_digest, &top)?;
    if let Some(pinned) = reference.digest() {
        verify(&format!("the manifest of {}", reference.whole()), pinned, &top)?;
    }
    let parsed: Value = serde_json::from_slice(&top).map_err(|e| XpkgError::Invalid(format!("the manifest of {} is not JSON: {e}", reference.whole())))?;
    let (manifest, index) = match parsed.get("manifests") {
        None => (top, None),
        Some(_) => {
            let child = select_child(&parsed).ok_or_else(|| {
                XpkgError::Invalid(format!("no child with platform linux/amd64 or {} in index {}", host_platform().join("/"), reference.whole()))
            })?;
            let pinned = Reference::with_digest(reference.registry().to_string(), reference.repository().to_string(), child.clone());
            let (bytes, _) = client.pull_manifest_raw(&pinned, &auth, &accepted).await.map_err(registry_error("pull", &pinned))?;
            verify(&format!("the manifest of {}", pinned.whole()), &child, &bytes)?;
            (bytes.to_vec(), Some(top))
        }
    };
    let manifest_json: Value = serde_json::from_slice(&manifest).map_err(|e| XpkgError::Invalid(format!("the image manifest is not JSON: {e}")))?;
    let config_digest = manifest_json.pointer("/config/digest").and_then(Value::as_str).unwrap_or_default().to_string();
    let descriptors: Vec<(String, u64)> = manifest_json
        .get("layers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|l| Some((l.get("digest")?.as_str()?.to_string(), l.get("size").and_then(Value::as_u64).unwrap_or(0))))
        .collect();
    if let Some(progress) = progress {
        progress.send_replace(Progress { bytes: 0, total_bytes: descriptors.iter().map(|(_, size)| size).sum(), layers: 0, total_layers: descriptors.len() });
    }
    let mut config = Counted { bytes: Vec::new(), progress: None };
    client.pull_blob(&reference, config_digest.as_str(), &mut config).await.map_err(registry_error(&format!("pull blob {config_digest} of"), &reference))?;
    let mut layers = Vec::new();
    for (i, (digest, size)) in descriptors.iter().enumerate() {
        let mut layer = Counted { bytes: Vec::new(), progress };
        client.pull_blob(&reference, digest.as_str(), &mut layer).await.map_err(registry_error(&format!("pull blob {digest} of"), &reference))?;
        if let Some(progress) = progress {
            progress.send_modify(|p| p.layers += 1);
        }
        tracing::info!(reference = %reference.whole(), layer = i + 1, layers = descriptors.len(), bytes = size, "pulled a layer");
        layers.push(layer.bytes);
    }
    let image = Image { manifest, config: config.bytes, layers };
    image.verify()?;
    Ok(Pulled { image, digest: top_digest, index })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn an_index_resolves_to_linux_amd64_or_the_host() {
        let index = serde_json::json!({"manifests": [
            {"digest": "sha256:arm", "platform": {"os": "linux", "architecture": "arm64"}},
            {"digest": "sha256:amd", "platform": {"os": "linux", "architecture": "amd64"}},
        ]});
        assert_eq!(select_child(&index).as_deref(), Some("sha256:amd"));
        let bare = serde_json::json!({"manifests": [{"digest": "sha256:any"}]});
        assert_eq!(select_child(&bare).as_deref(), Some("sha256:any"));
        let [os, arch] = host_platform();
        let host = serde_json::json!({"manifests": [
            {"digest": "sha256:other", "platform": {"os": "plan9", "architecture": "mips"}},
            {"digest": "sha256:host", "platform": {"os": os, "architecture": arch}},
        ]});
        assert_eq!(select_child(&host).as_deref(), Some("sha256:host"));
        let none = serde_json::json!({"manifests": [{"digest": "sha256:other", "platform": {"os": "plan9", "architecture": "mips"}}]});
        assert_eq!(select_child(&none), None);
    }

    #[test]
    fn progress_reads_as_bytes_and_layers() {
        let progress = Progress { bytes: 3 << 20, total_bytes: 12 << 20, layers: 1, total_layers: 2 };
        assert_eq!(progress.describe(), "3.0 MiB of 12.0 MiB, 1 of 2 layers");
    }

    #[tokio::test]
    async fn counted_writes_keep_the_bytes_and_count_them() {
        use tokio::io::AsyncWriteExt;
        let (sender, receiver) = tokio::sync::watch::channel(Progress::default());
        let mut counted = Counted { bytes: Vec::new(), progress: Some(&sender) };
        counted.write_all(b"hello ").await.unwrap();
        counted.write_all(b"world").await.unwrap();
        assert_eq!((counted.bytes.as_slice(), receiver.borrow().bytes), (&b"hello world"[..], 11));
    }

    #[test]
    fn loopback_registries_are_recognised() {
        for host in ["127.0.0.1:5000", "localhost:5000", "localhost", "[::1]:5000", "registry.localhost"] {
            assert!(is_loopback(host), "{host}");
        }
        for host in ["xpkg.crossplane.io", "10.0.0.1:5000", "ghcr.io"] {
            assert!(!is_loopback(host), "{host}");
        }
    }
}
