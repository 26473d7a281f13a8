//! Fetching packages for the package manager: a tag is resolved to a digest at every fetch (as
//! Crossplane does, whatever the pull policy), and the image is read from a content-addressed
//! cache when the policy allows, else pulled and stored there. The cache keeps every blob
//! (index, manifest, config, layers) as `blobs/sha256/<hex>` under its directory, so revisions
//! and packages that share content share the files; whatever is read from it is verified
//! against its digest again, and a damaged file is pulled anew.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::registry::{self, Credentials, ProgressSender, Pulled};
use crate::{Image, XpkgError, verify};

/// `packagePullPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PullPolicy {
    /// Pull when the digest is not in the cache (the default).
    IfNotPresent,
    /// Pull at every fetch.
    Always,
    /// Never pull: only the cache.
    Never,
}

impl PullPolicy {
    /// The policy `spec.packagePullPolicy` names (unset is `IfNotPresent`).
    pub fn parse(text: Option<&str>) -> Result<PullPolicy, XpkgError> {
        match text {
            None | Some("") | Some("IfNotPresent") => Ok(PullPolicy::IfNotPresent),
            Some("Always") => Ok(PullPolicy::Always),
            Some("Never") => Ok(PullPolicy::Never),
            Some(other) => Err(XpkgError::Invalid(format!("unknown packagePullPolicy {other:?}: use IfNotPresent, Always or Never"))),
        }
    }
}

/// The content-addressed package cache.
#[derive(Clone, Debug)]
pub struct Cache {
    dir: PathBuf,
}

impl Cache {
    /// A cache in `dir` (created on first store).
    pub fn new(dir: impl Into<PathBuf>) -> Cache {
        Cache { dir: dir.into() }
    }

    fn path(&self, digest: &str) -> Option<PathBuf> {
        let hex = digest.strip_prefix("sha256:")?;
        (hex.len() == 64 && hex.chars().all(|c| c.is_ascii_hexdigit())).then(|| self.dir.join("blobs/sha256").join(hex))
    }

    /// A blob by digest, if the cache holds it intact.
    fn blob(&self, digest: &str) -> Option<Vec<u8>> {
        let bytes = std::fs::read(self.path(digest)?).ok()?;
        verify(digest, digest, &bytes).ok()?;
        Some(bytes)
    }

    /// Stores a blob under its digest (written to a temporary file, then renamed, so a
    /// reader never sees half a blob).
    fn store(&self, bytes: &[u8]) -> Result<(), XpkgError> {
        let digest = crate::digest(bytes);
        let Some(path) = self.path(&digest) else { return Ok(()) };
        if path.exists() {
            return Ok(());
        }
        let dir = path.parent().unwrap_or(&self.dir);
        std::fs::create_dir_all(dir).map_err(XpkgError::io(format!("cannot create the package cache {}", dir.display())))?;
        let mut file = tempfile::NamedTempFile::new_in(dir).map_err(XpkgError::io("cannot write to the package cache"))?;
        std::io::Write::write_all(&mut file, bytes).map_err(XpkgError::io("cannot write to the package cache"))?;
        file.persist(&path).map_err(|e| XpkgError::Io { what: "cannot write to the package cache".into(), source: e.error })?;
        Ok(())
    }

    /// The image with top-level digest `digest` (an index resolves to its child as a pull
    /// does), if every blob of it is cached intact.
    pub fn get(&self, digest: &str) -> Option<Image> {
        let top = self.blob(digest)?;
        let parsed: Value = serde_json::from_slice(&top).ok()?;
        let manifest = match parsed.get("manifests") {
            Some(_) => self.blob(&registry::select_child(&parsed)?)?,
            None => top,
        };
        let parsed: Value = serde_json::from_slice(&manifest).ok()?;
        let config = self.blob(parsed.pointer("/config/digest")?.as_str()?)?;
        let mut layers = Vec::new();
        for layer in parsed.get("layers")?.as_array()? {
            layers.push(self.blob(layer.get("digest")?.as_str()?)?);
        }
        Some(Image { manifest, config, layers })
    }

    /// Stores what a pull brought.
    pub fn put(&self, pulled: &Pulled) -> Result<(), XpkgError> {
        if let Some(index) = &pulled.index {
            self.store(index)?;
        }
        for blob in [&pulled.image.manifest, &pulled.image.config].into_iter().chain(&pulled.image.layers) {
            self.store(blob)?;
        }
        Ok(())
    }

    /// The cache's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// A fetched package image: the digest its reference resolved to, the image, and whether it
/// came from the cache.
#[derive(Clone, Debug)]
pub struct Fetched {
    /// The digest of what the reference names (an index's, for an index).
    pub digest: String,
    /// The image.
    pub image: Image,
    /// Whether it was read from the cache rather than pulled.
    pub cached: bool,
}

/// Fetches the package `reference` names with `policy`, through `cache`.
pub async fn fetch(reference: &str, credentials: &Credentials, policy: PullPolicy, cache: &Cache) -> Result<Fetched, XpkgError> {
    fetch_with_progress(reference, credentials, policy, cache, None).await
}

/// [`fetch`], reporting a pull's progress (nothing is reported when the cache answers).
pub async fn fetch_with_progress(reference: &str, credentials: &Credentials, policy: PullPolicy, cache: &Cache, progress: Option<&ProgressSender>) -> Result<Fetched, XpkgError> {
    let parsed = registry::parse_reference(reference)?;
    let digest = match parsed.digest() {
        Some(digest) => digest.to_string(),
        None => registry::resolve(reference, credentials).await?,
    };
    if policy != PullPolicy::Always
        && let Some(image) = cache.get(&digest)
    {
        return Ok(Fetched { digest, image, cached: true });
    }
    if policy == PullPolicy::Never {
        return Err(XpkgError::Invalid("package not in cache and pull policy is Never".into()));
    }
    let pinned = format!("{}@{digest}", crate::names::source(reference));
    let pulled = registry::pull_with_progress(&pinned, credentials, progress).await?;
    cache.put(&pulled)?;
    Ok(Fetched { digest: pulled.digest, image: pulled.image, cached: false })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_cache_returns_intact_images_only() {
        let meta = "apiVersion: meta.pkg.crossplane.io/v1\nkind: Configuration\nmetadata: {name: c}\n";
        let image = crate::build::image(&crate::meta::parse(meta).unwrap()).unwrap();
        let index = serde_json::to_vec(&serde_json::json!({"manifests": [{"digest": image.digest(), "platform": {"os": "linux", "architecture": "amd64"}}]})).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::new(dir.path());
        assert_eq!(cache.get(&image.digest()), None);
        let pulled = Pulled { image: image.clone(), digest: crate::digest(&index), index: Some(index.clone()) };
        cache.put(&pulled).unwrap();
        // Found by the index's digest and by the manifest's.
        assert_eq!(cache.get(&crate::digest(&index)).as_ref(), Some(&image));
        assert_eq!(cache.get(&image.digest()).as_ref(), Some(&image));
        // A damaged layer file is a miss, not a damaged image.
        let layer = cache.path(&crate::digest(&image.layers[0])).unwrap();
        std::fs::write(&layer, b"damaged").unwrap();
        assert_eq!(cache.get(&image.digest()), None);
        assert_eq!(cache.path("sha256:../../etc"), None, "only real digests name files");
        assert_eq!(PullPolicy::parse(Some("Sometimes")).unwrap_err().to_string(), "unknown packagePullPolicy \"Sometimes\": use IfNotPresent, Always or Never");
    }
}
