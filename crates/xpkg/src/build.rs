//! Building a package image from a folder (`oxplane xpkg build`): `crossplane.yaml` (the meta
//! object) and every other `.yaml`/`.yml` file below the folder (hidden folders skipped, files
//! in path order) become one `package.yaml` stream, checked as Crossplane checks it, in a
//! one-file layer annotated `io.crossplane.xpkg: base`. The image config carries the same mark
//! as a label (`io.crossplane.xpkg:sha256:<layer digest>: base`), as Crossplane's builder
//! leaves it. The image is reproducible: the same folder gives the same digest.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::json;

use crate::meta::{self, Package};
use crate::{ANNOTATION_KEY, Image, MEDIA_OCI_CONFIG, MEDIA_OCI_LAYER_GZIP, MEDIA_OCI_MANIFEST, META_FILE, PACKAGE_ANNOTATION, STREAM_FILE, XpkgError, digest};

/// The YAML files of a package folder below `root`, in path order (hidden entries skipped).
fn yaml_files(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), XpkgError> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(XpkgError::io(format!("cannot read {}", dir.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| !p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with('.')))
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            yaml_files(root, &path, out)?;
        } else if matches!(path.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")) && path != root.join(META_FILE) {
            out.push(path);
        }
    }
    Ok(())
}

/// Reads a package folder into a package: its meta object and objects, checked.
pub fn read_folder(root: &Path) -> Result<Package, XpkgError> {
    let meta_path = root.join(META_FILE);
    let text = std::fs::read_to_string(&meta_path).map_err(XpkgError::io(format!("cannot read {}", meta_path.display())))?;
    let metas = meta::documents(&text, META_FILE)?;
    let [meta_object] = metas.as_slice() else {
        return Err(XpkgError::Invalid(format!("{META_FILE} must hold exactly one document, the package's meta object")));
    };
    let mut stream = serde_yaml_ng::to_string(meta_object).map_err(|e| XpkgError::Invalid(e.to_string()))?;
    let mut files = Vec::new();
    yaml_files(root, root, &mut files)?;
    for file in files {
        let text = std::fs::read_to_string(&file).map_err(XpkgError::io(format!("cannot read {}", file.display())))?;
        let relative = file.strip_prefix(root).unwrap_or(&file).display().to_string();
        for document in meta::documents(&text, &relative)? {
            stream.push_str("---\n");
            stream.push_str(&serde_yaml_ng::to_string(&document).map_err(|e| XpkgError::Invalid(e.to_string()))?);
        }
    }
    let package = meta::parse(&stream)?;
    if meta::parse(&text).is_err() {
        return Err(XpkgError::Invalid(format!("{META_FILE} does not hold a package meta object (meta.pkg.crossplane.io Provider, Configuration or Function)")));
    }
    package.check_kinds()?;
    Ok(package)
}

/// The gzip-compressed tar layer holding only `package.yaml` (mode 0644, no timestamps), and
/// the digest of the uncompressed tar (the image config's `diff_id`).
fn layer(stream: &str) -> Result<(Vec<u8>, String), XpkgError> {
    let mut tar = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_ustar();
    header.set_path(STREAM_FILE).map_err(XpkgError::io("cannot write the package layer"))?;
    header.set_mode(0o644);
    header.set_size(stream.len() as u64);
    header.set_mtime(0);
    header.set_cksum();
    tar.append(&header, stream.as_bytes()).map_err(XpkgError::io("cannot write the package layer"))?;
    let tar = tar.into_inner().map_err(XpkgError::io("cannot write the package layer"))?;
    let diff_id = digest(&tar);
    let mut gzip = flate2::GzBuilder::new().mtime(0).write(Vec::new(), flate2::Compression::default());
    gzip.write_all(&tar).map_err(XpkgError::io("cannot compress the package layer"))?;
    let compressed = gzip.finish().map_err(XpkgError::io("cannot compress the package layer"))?;
    Ok((compressed, diff_id))
}

/// The package image of `package`.
pub fn image(package: &Package) -> Result<Image, XpkgError> {
    image_of_stream(&package.to_stream()?)
}

/// A package image whose `package.yaml` is `stream` as given, unchecked (for packages made
/// by other tools, and for tests of what a reader does with a bad stream).
pub fn image_of_stream(stream: &str) -> Result<Image, XpkgError> {
    let (layer, diff_id) = layer(stream)?;
    let layer_digest = digest(&layer);
    let labels: BTreeMap<String, String> = [(format!("{ANNOTATION_KEY}:{layer_digest}"), PACKAGE_ANNOTATION.to_string())].into();
    let config = serde_json::to_vec(&json!({
        "architecture": "amd64",
        "os": "linux",
        "config": {"Labels": labels},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
    }))
    .map_err(|e| XpkgError::Invalid(e.to_string()))?;
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": MEDIA_OCI_MANIFEST,
        "config": {"mediaType": MEDIA_OCI_CONFIG, "digest": digest(&config), "size": config.len()},
        "layers": [{
            "mediaType": MEDIA_OCI_LAYER_GZIP,
            "digest": layer_digest,
            "size": layer.len(),
            "annotations": {ANNOTATION_KEY: PACKAGE_ANNOTATION},
        }],
    }))
    .map_err(|e| XpkgError::Invalid(e.to_string()))?;
    Ok(Image { manifest, config, layers: vec![layer] })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn folder(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    const META: &str = "apiVersion: meta.pkg.crossplane.io/v1\nkind: Configuration\nmetadata: {name: platform}\n";
    const XRD: &str = "apiVersion: apiextensions.crossplane.io/v1\nkind: CompositeResourceDefinition\nmetadata: {name: xthings.example.org}\n";
    const COMPOSITION: &str = "apiVersion: apiextensions.crossplane.io/v1\nkind: Composition\nmetadata: {name: things}\n";

    #[test]
    fn a_folder_becomes_a_reproducible_image_whose_package_reads_back() {
        let dir = folder(&[("crossplane.yaml", META), ("apis/xrd.yaml", XRD), ("apis/composition.yml", COMPOSITION), (".git/x.yaml", "not: read"), ("README.md", "# no")]);
        let package = read_folder(dir.path()).unwrap();
        let image = image(&package).unwrap();
        image.verify().unwrap();
        assert_eq!(image.digest(), super::image(&read_folder(dir.path()).unwrap()).unwrap().digest());
        let read = meta::parse(&image.package_yaml().unwrap()).unwrap();
        assert_eq!(read, package);
        let kinds: Vec<&str> = read.objects.iter().map(|o| o["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["Composition", "CompositeResourceDefinition"]);
        let descriptors = image.layer_descriptors().unwrap();
        assert_eq!(descriptors[0].2[ANNOTATION_KEY], "base");
        let config: serde_json::Value = serde_json::from_slice(&image.config).unwrap();
        assert_eq!(config["config"]["Labels"][format!("io.crossplane.xpkg:{}", descriptors[0].1)], "base");
    }

    #[test]
    fn bad_folders_are_refused_with_the_cause() {
        let missing = folder(&[("xrd.yaml", XRD)]);
        assert!(read_folder(missing.path()).unwrap_err().to_string().contains("crossplane.yaml"));
        let foreign = folder(&[("crossplane.yaml", META), ("crd.yaml", "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: bs.example.org}\n")]);
        assert_eq!(
            read_folder(foreign.path()).unwrap_err().to_string(),
            "a Configuration package may not contain CustomResourceDefinition.apiextensions.k8s.io \"bs.example.org\""
        );
        let not_meta = folder(&[("crossplane.yaml", XRD)]);
        assert_eq!(read_folder(not_meta.path()).unwrap_err().to_string(), "not exactly one package meta type");
        let broken = folder(&[("crossplane.yaml", META), ("x.yaml", "a: [")]);
        assert!(read_folder(broken.path()).unwrap_err().to_string().starts_with("x.yaml: document 1:"));
    }

    #[test]
    fn a_digest_mismatch_is_named() {
        let dir = folder(&[("crossplane.yaml", META), ("xrd.yaml", XRD)]);
        let mut image = image(&read_folder(dir.path()).unwrap()).unwrap();
        image.layers[0].push(0);
        assert!(image.verify().unwrap_err().to_string().starts_with("digest mismatch for layer 0: expected sha256:"));
    }
}
