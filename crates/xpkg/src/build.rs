//! Building a package image from a folder (`oxplane xpkg build`): `crossplane.yaml` (the meta
//! object) and every other `.yaml`/`.yml` file below the folder (hidden folders skipped, files
//! in path order) become one `package.yaml` stream, checked as Crossplane checks it, in a
//! one-file layer annotated `io.crossplane.xpkg: base`. The image config carries the same mark
//! as a label (`io.crossplane.xpkg:sha256:<layer digest>: base`), as Crossplane's builder
//! leaves it. A Provider or Function may carry its runtime: a folder that becomes the image's
//! root filesystem (one layer before the package layer, modes and symbolic links kept) and the
//! entrypoint and environment its process starts with (the image config's `Entrypoint` and
//! `Env`), as the runtime image Crossplane's builder embeds. The image is reproducible: the same
//! folders give the same digest (no timestamps, owners 0, entries in path order).

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
    compress(tar.into_inner().map_err(XpkgError::io("cannot write the package layer"))?)
}

/// A gzip-compressed layer of `tar` and the tar's digest (the `diff_id`).
fn compress(tar: Vec<u8>) -> Result<(Vec<u8>, String), XpkgError> {
    let diff_id = digest(&tar);
    let mut gzip = flate2::GzBuilder::new().mtime(0).write(Vec::new(), flate2::Compression::default());
    gzip.write_all(&tar).map_err(XpkgError::io("cannot compress a layer"))?;
    let compressed = gzip.finish().map_err(XpkgError::io("cannot compress a layer"))?;
    Ok((compressed, diff_id))
}

/// What a Provider or Function package runs: the folder that becomes its image's root
/// filesystem, and how its process starts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Runtime {
    /// The folder whose content is the root filesystem (`bin/function` becomes `/bin/function`).
    pub root: PathBuf,
    /// The image's `Entrypoint`: the program (a path inside the root filesystem) and its arguments.
    pub entrypoint: Vec<String>,
    /// The image's `Env` (`KEY=VALUE`), which the process starts with.
    pub env: Vec<String>,
}

/// Appends `dir` (relative to `root`) and everything below it to `tar`, in path order.
fn append_tree(tar: &mut tar::Builder<Vec<u8>>, root: &Path, dir: &Path) -> Result<(), XpkgError> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir).map_err(XpkgError::io(format!("cannot read {}", dir.display())))?.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for path in entries {
        let relative = path.strip_prefix(root).unwrap_or(&path);
        let metadata = std::fs::symlink_metadata(&path).map_err(XpkgError::io(format!("cannot read {}", path.display())))?;
        let mut header = tar::Header::new_gnu();
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        header.set_mode(std::os::unix::fs::PermissionsExt::mode(&metadata.permissions()) & 0o7777);
        let failed = XpkgError::io(format!("cannot add {} to the runtime layer", path.display()));
        if metadata.file_type().is_symlink() {
            let target = std::fs::read_link(&path).map_err(XpkgError::io(format!("cannot read {}", path.display())))?;
            header.set_entry_type(tar::EntryType::Symlink);
            header.set_size(0);
            tar.append_link(&mut header, relative, &target).map_err(failed)?;
        } else if metadata.is_dir() {
            header.set_entry_type(tar::EntryType::Directory);
            header.set_size(0);
            tar.append_data(&mut header, relative, std::io::empty()).map_err(failed)?;
            append_tree(tar, root, &path)?;
        } else if metadata.is_file() {
            let file = std::fs::File::open(&path).map_err(XpkgError::io(format!("cannot read {}", path.display())))?;
            header.set_entry_type(tar::EntryType::Regular);
            header.set_size(metadata.len());
            tar.append_data(&mut header, relative, file).map_err(failed)?;
        } else {
            return Err(XpkgError::Invalid(format!("{}: only files, folders and symbolic links can be in a runtime", path.display())));
        }
    }
    Ok(())
}

/// The runtime's root filesystem as a compressed layer, and its `diff_id`.
fn runtime_layer(runtime: &Runtime) -> Result<(Vec<u8>, String), XpkgError> {
    if !runtime.root.is_dir() {
        return Err(XpkgError::Invalid(format!("the runtime root {} is not a folder", runtime.root.display())));
    }
    let mut tar = tar::Builder::new(Vec::new());
    append_tree(&mut tar, &runtime.root, &runtime.root)?;
    compress(tar.into_inner().map_err(XpkgError::io("cannot write the runtime layer"))?)
}

/// The package image of `package`.
pub fn image(package: &Package) -> Result<Image, XpkgError> {
    image_of_stream(&package.to_stream()?)
}

/// The package image of `package` with its runtime: Providers and Functions only.
pub fn image_with_runtime(package: &Package, runtime: &Runtime) -> Result<Image, XpkgError> {
    if package.package_type == meta::PackageType::Configuration {
        return Err(XpkgError::Invalid("a Configuration package has no runtime: only Provider and Function packages run".into()));
    }
    if runtime.entrypoint.is_empty() {
        return Err(XpkgError::Invalid("a runtime needs an entrypoint: the program its process runs".into()));
    }
    if let Some(bad) = runtime.env.iter().find(|e| !e.contains('=')) {
        return Err(XpkgError::Invalid(format!("runtime environment {bad:?} is not KEY=VALUE")));
    }
    assemble(&package.to_stream()?, Some(runtime))
}

/// A package image whose `package.yaml` is `stream` as given, unchecked (for packages made
/// by other tools, and for tests of what a reader does with a bad stream).
pub fn image_of_stream(stream: &str) -> Result<Image, XpkgError> {
    assemble(stream, None)
}

/// The image: the runtime's layer (if any), then the package layer, annotated as Crossplane
/// annotates it; the runtime's entrypoint and environment in the image config.
fn assemble(stream: &str, runtime: Option<&Runtime>) -> Result<Image, XpkgError> {
    let (layer, diff_id) = layer(stream)?;
    let layer_digest = digest(&layer);
    let labels: BTreeMap<String, String> = [(format!("{ANNOTATION_KEY}:{layer_digest}"), PACKAGE_ANNOTATION.to_string())].into();
    let mut layers = Vec::new();
    let mut diff_ids = Vec::new();
    let mut descriptors = Vec::new();
    let mut image_config = json!({"Labels": labels});
    if let Some(runtime) = runtime {
        let (runtime_layer, runtime_diff_id) = runtime_layer(runtime)?;
        descriptors.push(json!({"mediaType": MEDIA_OCI_LAYER_GZIP, "digest": digest(&runtime_layer), "size": runtime_layer.len()}));
        diff_ids.push(runtime_diff_id);
        layers.push(runtime_layer);
        image_config["Entrypoint"] = json!(runtime.entrypoint);
        if !runtime.env.is_empty() {
            image_config["Env"] = json!(runtime.env);
        }
    }
    descriptors.push(json!({
        "mediaType": MEDIA_OCI_LAYER_GZIP,
        "digest": layer_digest,
        "size": layer.len(),
        "annotations": {ANNOTATION_KEY: PACKAGE_ANNOTATION},
    }));
    diff_ids.push(diff_id);
    layers.push(layer);
    let config = serde_json::to_vec(&json!({
        "architecture": "amd64",
        "os": "linux",
        "config": image_config,
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    }))
    .map_err(|e| XpkgError::Invalid(e.to_string()))?;
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": MEDIA_OCI_MANIFEST,
        "config": {"mediaType": MEDIA_OCI_CONFIG, "digest": digest(&config), "size": config.len()},
        "layers": descriptors,
    }))
    .map_err(|e| XpkgError::Invalid(e.to_string()))?;
    Ok(Image { manifest, config, layers })
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
    fn a_runtime_becomes_the_root_filesystem_before_the_package_layer() {
        use std::io::Read;
        use std::os::unix::fs::PermissionsExt;
        let function = "apiVersion: meta.pkg.crossplane.io/v1beta1\nkind: Function\nmetadata: {name: function-x}\n";
        let dir = folder(&[("package/crossplane.yaml", function), ("rootfs/usr/local/bin/function", "#!/bin/sh\nexec true\n"), ("rootfs/etc/motd", "hi\n")]);
        let program = dir.path().join("rootfs/usr/local/bin/function");
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink("usr/local/bin", dir.path().join("rootfs/bin")).unwrap();
        let package = read_folder(&dir.path().join("package")).unwrap();
        let runtime = Runtime { root: dir.path().join("rootfs"), entrypoint: vec!["/usr/local/bin/function".into(), "--debug".into()], env: vec!["MODE=test".into()] };
        let image = image_with_runtime(&package, &runtime).unwrap();
        image.verify().unwrap();
        assert_eq!(image.digest(), image_with_runtime(&package, &runtime).unwrap().digest(), "reproducible");
        // The package layer is still the one a reader finds.
        assert_eq!(meta::parse(&image.package_yaml().unwrap()).unwrap(), package);
        let config: serde_json::Value = serde_json::from_slice(&image.config).unwrap();
        assert_eq!(config["config"]["Entrypoint"], json!(["/usr/local/bin/function", "--debug"]));
        assert_eq!(config["config"]["Env"], json!(["MODE=test"]));
        assert_eq!(config["rootfs"]["diff_ids"].as_array().unwrap().len(), 2);
        let descriptors = image.layer_descriptors().unwrap();
        assert!(descriptors[0].2.is_empty() && descriptors[1].2[ANNOTATION_KEY] == "base");
        let mut tar = Vec::new();
        flate2::read::GzDecoder::new(image.layers[0].as_slice()).read_to_end(&mut tar).unwrap();
        let mut archive = tar::Archive::new(tar.as_slice());
        let entries: Vec<(String, u32, String)> = archive
            .entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let link = e.link_name().unwrap().map(|l| l.display().to_string()).unwrap_or_default();
                (e.path().unwrap().display().to_string(), e.header().mode().unwrap(), link)
            })
            .collect();
        assert_eq!(
            entries,
            [
                ("bin".to_string(), 0o777, "usr/local/bin".to_string()),
                ("etc".to_string(), 0o755, String::new()),
                ("etc/motd".to_string(), 0o644, String::new()),
                ("usr".to_string(), 0o755, String::new()),
                ("usr/local".to_string(), 0o755, String::new()),
                ("usr/local/bin".to_string(), 0o755, String::new()),
                ("usr/local/bin/function".to_string(), 0o755, String::new()),
            ]
        );
        let configuration = read_folder(folder(&[("crossplane.yaml", META)]).path()).unwrap();
        assert_eq!(image_with_runtime(&configuration, &runtime).unwrap_err().to_string(), "a Configuration package has no runtime: only Provider and Function packages run");
        let no_entrypoint = Runtime { entrypoint: Vec::new(), ..runtime.clone() };
        assert_eq!(image_with_runtime(&package, &no_entrypoint).unwrap_err().to_string(), "a runtime needs an entrypoint: the program its process runs");
    }

    #[test]
    fn a_digest_mismatch_is_named() {
        let dir = folder(&[("crossplane.yaml", META), ("xrd.yaml", XRD)]);
        let mut image = image(&read_folder(dir.path()).unwrap()).unwrap();
        image.layers[0].push(0);
        assert!(image.verify().unwrap_err().to_string().starts_with("digest mismatch for layer 0: expected sha256:"));
    }
}
