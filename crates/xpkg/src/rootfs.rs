//! A package image's root filesystem on disk, for running its runtime: every layer unpacked
//! in order (gzip-compressed or plain tar), whiteouts applied (`.wh.NAME` deletes `NAME`,
//! `.wh..wh..opq` empties its folder), entries that would land outside the folder refused by
//! the `tar` crate. The folder is written under a temporary name and renamed when complete,
//! so a half-unpacked image is never taken for a whole one.

use std::io::Read;
use std::path::Path;

use crate::{Image, XpkgError};

/// Unpacks `image`'s layers into `dir` (which must not exist yet; its parent is created).
pub fn unpack(image: &Image, dir: &Path) -> Result<(), XpkgError> {
    let partial = dir.with_extension("partial");
    let _ = std::fs::remove_dir_all(&partial);
    std::fs::create_dir_all(&partial).map_err(XpkgError::io(format!("cannot create {}", partial.display())))?;
    for (index, layer) in image.layers.iter().enumerate() {
        let reader: Box<dyn Read + '_> = if layer.starts_with(&[0x1f, 0x8b]) { Box::new(flate2::read::GzDecoder::new(layer.as_slice())) } else { Box::new(layer.as_slice()) };
        let mut archive = tar::Archive::new(reader);
        archive.set_preserve_permissions(true);
        archive.set_overwrite(true);
        let failed = |e: std::io::Error| XpkgError::Invalid(format!("cannot unpack layer {index}: {e}"));
        for entry in archive.entries().map_err(failed)? {
            let mut entry = entry.map_err(failed)?;
            let path = entry.path().map_err(failed)?.into_owned();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if let Some(hidden) = name.strip_prefix(".wh.") {
                let parent = partial.join(path.parent().unwrap_or(Path::new("")));
                let escapes = path.components().any(|c| !matches!(c, std::path::Component::Normal(_) | std::path::Component::CurDir));
                if escapes || (hidden.contains("..") && hidden != ".wh..opq") {
                    return Err(XpkgError::Invalid(format!("cannot unpack layer {index}: whiteout {} leaves the image", path.display())));
                }
                if hidden == ".wh..opq" {
                    for child in std::fs::read_dir(&parent).into_iter().flatten().flatten() {
                        remove(&child.path());
                    }
                } else {
                    remove(&parent.join(hidden));
                }
                continue;
            }
            entry.unpack_in(&partial).map_err(failed)?;
        }
    }
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent).map_err(XpkgError::io(format!("cannot create {}", parent.display())))?;
    }
    std::fs::rename(&partial, dir).map_err(XpkgError::io(format!("cannot move the unpacked image to {}", dir.display())))
}

fn remove(path: &Path) {
    match std::fs::symlink_metadata(path) {
        Ok(metadata) if metadata.is_dir() => {
            let _ = std::fs::remove_dir_all(path);
        }
        Ok(_) => {
            let _ = std::fs::remove_file(path);
        }
        Err(_) => {}
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn layers_unpack_in_order_with_modes_kept() {
        let dir = tempfile::tempdir().unwrap();
        let package = dir.path().join("package");
        std::fs::create_dir_all(&package).unwrap();
        std::fs::write(package.join("crossplane.yaml"), "apiVersion: meta.pkg.crossplane.io/v1\nkind: Function\nmetadata: {name: f}\n").unwrap();
        let rootfs = dir.path().join("rootfs");
        std::fs::create_dir_all(rootfs.join("bin")).unwrap();
        std::fs::write(rootfs.join("bin/function"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(rootfs.join("bin/function"), std::fs::Permissions::from_mode(0o755)).unwrap();
        let runtime = crate::build::Runtime { root: rootfs, entrypoint: vec!["/bin/function".into()], env: Vec::new() };
        let image = crate::build::image_with_runtime(&crate::build::read_folder(&package).unwrap(), &runtime).unwrap();
        let out = dir.path().join("out/rootfs");
        unpack(&image, &out).unwrap();
        assert_eq!(std::fs::metadata(out.join("bin/function")).unwrap().permissions().mode() & 0o777, 0o755);
        assert!(out.join("package.yaml").exists(), "the package layer is part of the image's filesystem");
        assert!(!dir.path().join("out/rootfs.partial").exists());
    }
}
