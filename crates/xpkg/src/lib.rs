//! Crossplane packages (xpkg): OCI images whose `package.yaml` layer holds a package's meta
//! object (`crossplane.yaml`) and the objects it installs.
//!
//! - [`meta`]: parsing a `package.yaml` stream and the rules of what each package type
//!   (Provider, Configuration, Function) may contain.
//! - [`build`]: a package image from a folder (`oxplane xpkg build`).
//! - [`layout`]: images as OCI image layout tarballs (the `.xpkg` files `build` writes), read
//!   back with every blob's digest verified.
//! - [`registry`]: pushing images to and pulling them from OCI registries (`oci-client`),
//!   digests verified.
//! - [`fetch`]: the package manager's fetch: tags resolved to digests, pull policies, and a
//!   content-addressed cache of blobs.
//! - [`auth`]: credentials from pull secrets (docker config JSON).
//! - [`names`]: revision names and DNS labels as Crossplane derives them.
//! - [`rootfs`]: an image's root filesystem unpacked on disk, for running its runtime.
//! - [`testing`]: a private registry for tests (Debian's `docker-registry`).
//!
//! This crate knows no Kubernetes API: installing what a package holds is the package
//! controllers' work.

pub mod auth;
pub mod build;
pub mod fetch;
pub mod layout;
pub mod meta;
pub mod names;
pub mod registry;
pub mod rootfs;
pub mod testing;

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

/// The file inside a package image that holds the package (`StreamFile`).
pub const STREAM_FILE: &str = "package.yaml";
/// The file a package's source folder describes the package in (`MetaFile`).
pub const META_FILE: &str = "crossplane.yaml";
/// The layer annotation (and image-config label prefix) that marks the package layer.
pub const ANNOTATION_KEY: &str = "io.crossplane.xpkg";
/// The value of [`ANNOTATION_KEY`] on the package layer.
pub const PACKAGE_ANNOTATION: &str = "base";
/// The most of `package.yaml` read (Crossplane's `maxPackageSize`, 200 MiB).
pub const MAX_PACKAGE_BYTES: u64 = 200 << 20;

/// OCI image manifest media type.
pub const MEDIA_OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// OCI image config media type.
pub const MEDIA_OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
/// OCI gzip layer media type.
pub const MEDIA_OCI_LAYER_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
/// Docker v2 manifest media type (what `crossplane xpkg build` writes).
pub const MEDIA_DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
/// OCI image index media type.
pub const MEDIA_OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
/// Docker manifest list media type.
pub const MEDIA_DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";

/// Why a package could not be built, read, pushed or pulled.
#[derive(Debug, thiserror::Error)]
pub enum XpkgError {
    /// The package's content breaks a rule of the xpkg format.
    #[error("{0}")]
    Invalid(String),
    /// A file could not be read or written.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        source: std::io::Error,
    },
    /// A blob's content does not match its digest.
    #[error("digest mismatch for {what}: expected {expected}, got {actual}")]
    DigestMismatch {
        /// Which blob.
        what: String,
        /// The digest it was asked for by.
        expected: String,
        /// The digest of what arrived.
        actual: String,
    },
    /// The registry could not be reached or refused.
    #[error("{0}")]
    Registry(String),
}

impl XpkgError {
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> XpkgError {
        let what = what.into();
        move |source| XpkgError::Io { what, source }
    }
}

/// `sha256:<hex>` of some bytes.
pub fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// Checks that `bytes` have the digest `expected` (`sha256:<hex>`).
pub fn verify(what: &str, expected: &str, bytes: &[u8]) -> Result<(), XpkgError> {
    let actual = digest(bytes);
    if actual != expected {
        return Err(XpkgError::DigestMismatch { what: what.to_string(), expected: expected.to_string(), actual });
    }
    Ok(())
}

/// A package image in memory: its manifest, config and layers, by digest.
#[derive(Clone, Debug, PartialEq)]
pub struct Image {
    /// The manifest's bytes as stored (its digest is the image's digest).
    pub manifest: Vec<u8>,
    /// The config blob.
    pub config: Vec<u8>,
    /// The layer blobs, in the manifest's order.
    pub layers: Vec<Vec<u8>>,
}

impl Image {
    /// The image's digest: the digest of its manifest.
    pub fn digest(&self) -> String {
        digest(&self.manifest)
    }

    /// The manifest, parsed.
    pub fn manifest_json(&self) -> Result<serde_json::Value, XpkgError> {
        serde_json::from_slice(&self.manifest).map_err(|e| XpkgError::Invalid(format!("the image manifest is not JSON: {e}")))
    }

    /// The layers' descriptors: media type, digest and annotations, in order.
    pub fn layer_descriptors(&self) -> Result<Vec<(String, String, BTreeMap<String, String>)>, XpkgError> {
        let manifest = self.manifest_json()?;
        let layers = manifest.get("layers").and_then(serde_json::Value::as_array).ok_or_else(|| XpkgError::Invalid("the image manifest has no layers".into()))?;
        Ok(layers
            .iter()
            .map(|layer| {
                let text = |f: &str| layer.get(f).and_then(serde_json::Value::as_str).unwrap_or_default().to_string();
                let annotations = layer
                    .get("annotations")
                    .and_then(serde_json::Value::as_object)
                    .map(|a| a.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect())
                    .unwrap_or_default();
                (text("mediaType"), text("digest"), annotations)
            })
            .collect())
    }

    /// Checks the config and every layer against the digests the manifest names.
    pub fn verify(&self) -> Result<(), XpkgError> {
        let manifest = self.manifest_json()?;
        let config_digest = manifest.pointer("/config/digest").and_then(serde_json::Value::as_str).unwrap_or_default();
        verify("the image config", config_digest, &self.config)?;
        let descriptors = self.layer_descriptors()?;
        if descriptors.len() != self.layers.len() {
            return Err(XpkgError::Invalid(format!("the manifest names {} layers, {} are present", descriptors.len(), self.layers.len())));
        }
        for (i, ((_, expected, _), layer)) in descriptors.iter().zip(&self.layers).enumerate() {
            verify(&format!("layer {i}"), expected, layer)?;
        }
        Ok(())
    }

    /// The `package.yaml` stream, found as Crossplane finds it: in the first layer annotated
    /// `io.crossplane.xpkg: base`, else in the layers in order (the last one holding it wins,
    /// as in the flattened filesystem); the entry whose base name is `package.yaml`.
    pub fn package_yaml(&self) -> Result<String, XpkgError> {
        let descriptors = self.layer_descriptors()?;
        let annotated = descriptors.iter().position(|(_, _, a)| a.get(ANNOTATION_KEY).map(String::as_str) == Some(PACKAGE_ANNOTATION));
        let candidates: Vec<usize> = match annotated {
            Some(i) => vec![i],
            None => (0..self.layers.len()).rev().collect(),
        };
        for i in candidates {
            let (media_type, _, _) = &descriptors[i];
            if let Some(text) = find_stream(&self.layers[i], media_type)? {
                return Ok(text);
            }
        }
        Err(XpkgError::Invalid(format!("{STREAM_FILE} not found in package")))
    }
}

/// The `package.yaml` inside a layer (gzip or plain tar), if it has one.
fn find_stream(layer: &[u8], media_type: &str) -> Result<Option<String>, XpkgError> {
    use std::io::Read;
    let gzipped = media_type.ends_with("gzip") || layer.starts_with(&[0x1f, 0x8b]);
    let reader: Box<dyn Read + '_> = if gzipped { Box::new(flate2::read::GzDecoder::new(layer)) } else { Box::new(layer) };
    let mut archive = tar::Archive::new(reader);
    let entries = archive.entries().map_err(XpkgError::io("cannot read a package layer"))?;
    for entry in entries {
        let entry = entry.map_err(XpkgError::io("cannot read a package layer"))?;
        let path = entry.path().map_err(XpkgError::io("cannot read a package layer"))?.into_owned();
        if path.file_name().and_then(|n| n.to_str()) != Some(STREAM_FILE) {
            continue;
        }
        let mut text = String::new();
        entry.take(MAX_PACKAGE_BYTES).read_to_string(&mut text).map_err(XpkgError::io(format!("cannot read {STREAM_FILE}")))?;
        return Ok(Some(text));
    }
    Ok(None)
}
