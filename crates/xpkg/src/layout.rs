//! Package images as files: an OCI image layout (`oci-layout`, `index.json`,
//! `blobs/sha256/<hex>`) in one tar file, the `.xpkg` that `oxplane xpkg build` writes and
//! `oxplane xpkg push` reads. Reading verifies every blob against its digest.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use serde_json::{Value, json};

use crate::{Image, MEDIA_OCI_MANIFEST, XpkgError, digest, verify};

/// `oci-layout`'s content.
const LAYOUT_VERSION: &str = r#"{"imageLayoutVersion":"1.0.0"}"#;

fn append(tar: &mut tar::Builder<std::fs::File>, path: &str, bytes: &[u8]) -> Result<(), XpkgError> {
    let mut header = tar::Header::new_ustar();
    header.set_path(path).map_err(XpkgError::io(format!("cannot write {path}")))?;
    header.set_mode(0o644);
    header.set_size(bytes.len() as u64);
    header.set_mtime(0);
    header.set_cksum();
    tar.append(&header, bytes).map_err(XpkgError::io(format!("cannot write {path}")))
}

fn blob_path(digest: &str) -> String {
    format!("blobs/{}", digest.replacen(':', "/", 1))
}

/// Writes `image` to `path` as an OCI image layout tarball.
pub fn write(image: &Image, path: &Path) -> Result<(), XpkgError> {
    let file = std::fs::File::create(path).map_err(XpkgError::io(format!("cannot create {}", path.display())))?;
    let mut tar = tar::Builder::new(file);
    append(&mut tar, "oci-layout", LAYOUT_VERSION.as_bytes())?;
    let index = json!({
        "schemaVersion": 2,
        "manifests": [{"mediaType": MEDIA_OCI_MANIFEST, "digest": image.digest(), "size": image.manifest.len()}],
    });
    append(&mut tar, "index.json", index.to_string().as_bytes())?;
    append(&mut tar, &blob_path(&image.digest()), &image.manifest)?;
    append(&mut tar, &blob_path(&digest(&image.config)), &image.config)?;
    for layer in &image.layers {
        append(&mut tar, &blob_path(&digest(layer)), layer)?;
    }
    tar.into_inner().and_then(|f| f.sync_all()).map_err(XpkgError::io(format!("cannot write {}", path.display())))
}

/// Reads the image an OCI image layout tarball holds (its index's only manifest), with the
/// manifest, config and layers checked against their digests.
pub fn read(path: &Path) -> Result<Image, XpkgError> {
    let file = std::fs::File::open(path).map_err(XpkgError::io(format!("cannot open {}", path.display())))?;
    let mut files = BTreeMap::new();
    let mut archive = tar::Archive::new(file);
    let not_layout = |e: std::io::Error| XpkgError::Invalid(format!("{} is not an OCI image layout tarball: {e}", path.display()));
    for entry in archive.entries().map_err(not_layout)? {
        let mut entry = entry.map_err(not_layout)?;
        let name = entry.path().map_err(not_layout)?.to_string_lossy().trim_start_matches("./").to_string();
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).map_err(not_layout)?;
        files.insert(name, bytes);
    }
    let index: Value = files
        .get("index.json")
        .and_then(|b| serde_json::from_slice(b).ok())
        .ok_or_else(|| XpkgError::Invalid(format!("{} is not an OCI image layout tarball: no index.json", path.display())))?;
    let manifests = index.get("manifests").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let [descriptor] = manifests else {
        return Err(XpkgError::Invalid(format!("{} holds {} images; a package file holds one", path.display(), manifests.len())));
    };
    let blob = |digest: &str, what: &str| -> Result<Vec<u8>, XpkgError> {
        let bytes = files.get(&blob_path(digest)).ok_or_else(|| XpkgError::Invalid(format!("{} lacks {what} {digest}", path.display())))?;
        verify(what, digest, bytes)?;
        Ok(bytes.clone())
    };
    let manifest = blob(descriptor.get("digest").and_then(Value::as_str).unwrap_or_default(), "the image manifest")?;
    let parsed: Value = serde_json::from_slice(&manifest).map_err(|e| XpkgError::Invalid(format!("the image manifest is not JSON: {e}")))?;
    let config = blob(parsed.pointer("/config/digest").and_then(Value::as_str).unwrap_or_default(), "the image config")?;
    let mut layers = Vec::new();
    for layer in parsed.get("layers").and_then(Value::as_array).into_iter().flatten() {
        layers.push(blob(layer.get("digest").and_then(Value::as_str).unwrap_or_default(), "a layer")?);
    }
    Ok(Image { manifest, config, layers })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn image() -> Image {
        let meta = "apiVersion: meta.pkg.crossplane.io/v1\nkind: Function\nmetadata: {name: f}\n";
        crate::build::image(&crate::meta::parse(meta).unwrap()).unwrap()
    }

    #[test]
    fn an_image_written_reads_back_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.xpkg");
        write(&image(), &path).unwrap();
        assert_eq!(read(&path).unwrap(), image());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

        /// Any image written as a layout reads back byte for byte, with the same digest; and
        /// any one byte of any blob changed in the file is refused.
        #[test]
        fn layouts_round_trip_and_refuse_any_damaged_byte(
            names in proptest::collection::vec("[a-z][a-z0-9]{0,12}", 0..5),
            descriptions in proptest::collection::vec("\\PC{0,40}", 0..5),
            flip in proptest::prelude::any::<proptest::sample::Index>(),
        ) {
            let mut text = String::from("apiVersion: meta.pkg.crossplane.io/v1\nkind: Configuration\nmetadata: {name: p}\n");
            for (i, name) in names.iter().enumerate() {
                let description = descriptions.get(i).cloned().unwrap_or_default();
                text.push_str(&format!("---\napiVersion: apiextensions.crossplane.io/v1\nkind: Composition\nmetadata: {{name: {name}{i}, annotations: {{d: {}}}}}\n", serde_json::to_string(&description).unwrap()));
            }
            let image = crate::build::image(&crate::meta::parse(&text).unwrap()).unwrap();
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("p.xpkg");
            write(&image, &path).unwrap();
            let read_back = read(&path).unwrap();
            proptest::prop_assert_eq!(read_back.digest(), image.digest());
            proptest::prop_assert_eq!(&read_back, &image);
            proptest::prop_assert_eq!(crate::meta::parse(&read_back.package_yaml().unwrap()).unwrap().objects.len(), names.len());

            // Damage one byte inside one of the blobs as stored in the tar file.
            let mut file = std::fs::read(&path).unwrap();
            let blobs: Vec<&[u8]> = std::iter::once(image.manifest.as_slice()).chain([image.config.as_slice()]).chain(image.layers.iter().map(Vec::as_slice)).collect();
            let blob = blobs[flip.index(blobs.len())];
            let start = file.windows(blob.len()).position(|w| w == blob).unwrap();
            file[start + flip.index(blob.len())] ^= 0x01;
            std::fs::write(&path, &file).unwrap();
            let error = read(&path).unwrap_err().to_string();
            proptest::prop_assert!(error.starts_with("digest mismatch for "), "{}", error);
        }
    }

    #[test]
    fn a_damaged_blob_or_a_foreign_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.xpkg");
        let original = image();
        let good_layer_digest = digest(&original.layers[0]);
        // The layer blob holds other bytes under the layer's name.
        let file = std::fs::File::create(&path).unwrap();
        let mut tar = tar::Builder::new(file);
        append(&mut tar, "index.json", json!({"manifests": [{"digest": original.digest()}]}).to_string().as_bytes()).unwrap();
        append(&mut tar, &blob_path(&original.digest()), &original.manifest).unwrap();
        append(&mut tar, &blob_path(&digest(&original.config)), &original.config).unwrap();
        append(&mut tar, &blob_path(&good_layer_digest), b"other bytes").unwrap();
        tar.into_inner().unwrap();
        assert!(read(&path).unwrap_err().to_string().starts_with(&format!("digest mismatch for a layer: expected {good_layer_digest}")));
        std::fs::write(&path, b"plain text").unwrap();
        assert!(read(&path).unwrap_err().to_string().contains("is not an OCI image layout tarball"));
    }
}
