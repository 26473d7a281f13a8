//! `oxplane xpkg build` and `oxplane xpkg push` as a user runs them, against a real registry
//! (Debian's `docker-registry` on 127.0.0.1): a Configuration folder becomes a package file,
//! is pushed, and pulls back from the registry with the same digest and the same
//! `package.yaml`; a Function built with its runtime (a root filesystem folder, entrypoint and
//! environment) keeps it through the registry; bad input is refused with the cause.

use std::path::Path;

use oxplane_xpkg::registry::{Credentials, pull};
use oxplane_xpkg::testing::Registry;

use crate::support::processes::oxplane;

fn write(root: &Path, path: &str, text: &str) {
    let path = root.join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

const META: &str = "apiVersion: meta.pkg.crossplane.io/v1
kind: Configuration
metadata:
  name: platform-buckets
  annotations: {meta.crossplane.io/maintainer: Platform Team <platform@example.org>}
spec:
  crossplane: {version: '>=v1.14.0'}
  dependsOn:
  - {apiVersion: pkg.crossplane.io/v1, kind: Function, package: xpkg.example.org/fns/function-patch-and-transform, version: '>=v0.8.0'}
";

const XRD: &str = "apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata: {name: xbuckets.platform.example.org}
spec:
  group: platform.example.org
  names: {kind: XBucket, plural: xbuckets}
  versions:
  - name: v1alpha1
    served: true
    referenceable: true
    schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object, properties: {size: {type: string}}}}}}
";

const COMPOSITION: &str = "apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata: {name: xbuckets}
spec:
  compositeTypeRef: {apiVersion: platform.example.org/v1alpha1, kind: XBucket}
  mode: Pipeline
  pipeline:
  - step: compose
    functionRef: {name: function-patch-and-transform}
";

#[test]
fn a_configuration_is_built_pushed_and_pulled_back_unchanged() {
    let registry = Registry::shared();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("package");
    write(&root, "crossplane.yaml", META);
    write(&root, "apis/xrd.yaml", XRD);
    write(&root, "apis/composition.yaml", COMPOSITION);
    let file = dir.path().join("platform-buckets.xpkg");
    let built = oxplane(&["xpkg", "build", "--package-root", root.to_str().unwrap(), "--package-file", file.to_str().unwrap()]);
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    let image = oxplane_xpkg::layout::read(&file).unwrap();
    let digest = image.digest();
    assert!(String::from_utf8_lossy(&built.stdout).contains(&format!("built Configuration platform-buckets (2 objects) as {digest}")));

    let reference = format!("{}/platform/buckets:v0.1.0", registry.host);
    let pushed = oxplane(&["xpkg", "push", &reference, "--package-file", file.to_str().unwrap()]);
    assert!(pushed.status.success(), "{}", String::from_utf8_lossy(&pushed.stderr));
    assert_eq!(String::from_utf8_lossy(&pushed.stdout).trim(), format!("pushed {reference} as {digest}"));

    let runtime = tokio::runtime::Runtime::new().unwrap();
    for reference in [reference.clone(), format!("{}/platform/buckets@{digest}", registry.host)] {
        let pulled = runtime.block_on(pull(&reference, &Credentials::Anonymous)).unwrap();
        assert_eq!(pulled.digest, digest, "{reference}");
        assert_eq!(pulled.image, image, "{reference}");
        let package = oxplane_xpkg::meta::parse(&pulled.image.package_yaml().unwrap()).unwrap();
        assert_eq!(package.name(), "platform-buckets");
        assert_eq!(package.meta["spec"]["dependsOn"][0]["package"], "xpkg.example.org/fns/function-patch-and-transform");
        let names: Vec<&str> = package.objects.iter().map(|o| o["metadata"]["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["xbuckets", "xbuckets.platform.example.org"]);
    }
    // Pulled to a package file by the CLI, and inspected from the registry and from the file.
    let pulled_file = dir.path().join("pulled.xpkg");
    let pulled = oxplane(&["xpkg", "pull", &reference, "-o", pulled_file.to_str().unwrap()]);
    assert!(pulled.status.success(), "{}", String::from_utf8_lossy(&pulled.stderr));
    assert_eq!(
        String::from_utf8_lossy(&pulled.stdout).trim(),
        format!("pulled Configuration platform-buckets (2 objects) from {reference} as {digest} to {}", pulled_file.display())
    );
    assert_eq!(oxplane_xpkg::layout::read(&pulled_file).unwrap(), image);
    let from_registry = oxplane(&["xpkg", "extract", &reference]);
    assert!(from_registry.status.success(), "{}", String::from_utf8_lossy(&from_registry.stderr));
    let from_file = oxplane(&["xpkg", "extract", "--from-xpkg", pulled_file.to_str().unwrap()]);
    assert_eq!(from_registry.stdout, from_file.stdout);
    assert_eq!(String::from_utf8_lossy(&from_file.stdout), image.package_yaml().unwrap());

    // A tag nobody pushed.
    let missing = runtime.block_on(pull(&format!("{}/platform/buckets:v9.9.9", registry.host), &Credentials::Anonymous)).unwrap_err().to_string();
    assert!(missing.starts_with(&format!("cannot pull {}/platform/buckets:v9.9.9:", registry.host)), "{missing}");
}

#[test]
fn bad_packages_and_unreachable_registries_are_refused_with_the_cause() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("package");
    write(&root, "crossplane.yaml", META);
    write(&root, "crd.yaml", "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: buckets.example.org}\n");
    let built = oxplane(&["xpkg", "build", "--package-root", root.to_str().unwrap()]);
    assert!(!built.status.success());
    let stderr = String::from_utf8_lossy(&built.stderr);
    assert!(stderr.contains("a Configuration package may not contain CustomResourceDefinition.apiextensions.k8s.io \"buckets.example.org\""), "{stderr}");

    std::fs::remove_file(root.join("crd.yaml")).unwrap();
    let file = dir.path().join("p.xpkg");
    assert!(oxplane(&["xpkg", "build", "-f", root.to_str().unwrap(), "-o", file.to_str().unwrap()]).status.success());
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let reference = format!("127.0.0.1:{port}/platform/buckets:v0.1.0");
    let pushed = oxplane(&["xpkg", "push", &reference, "-f", file.to_str().unwrap()]);
    assert!(!pushed.status.success());
    let stderr = String::from_utf8_lossy(&pushed.stderr);
    assert!(stderr.contains(&format!("cannot authenticate to push {reference}")) || stderr.contains(&format!("cannot push a blob of {reference}")), "{stderr}");

    let not_a_package = dir.path().join("x.xpkg");
    std::fs::write(&not_a_package, "text").unwrap();
    let pushed = oxplane(&["xpkg", "push", &reference, "-f", not_a_package.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&pushed.stderr).contains("is not an OCI image layout tarball"));
}

#[test]
fn a_blob_damaged_in_the_registry_is_refused_by_digest() {
    let registry = Registry::shared();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("package");
    // Content of its own, so no other test's package shares the damaged blob.
    write(&root, "crossplane.yaml", "apiVersion: meta.pkg.crossplane.io/v1\nkind: Configuration\nmetadata: {name: damaged-in-registry}\n");
    write(&root, "xrd.yaml", XRD);
    let file = dir.path().join("damaged.xpkg");
    assert!(oxplane(&["xpkg", "build", "-f", root.to_str().unwrap(), "-o", file.to_str().unwrap()]).status.success());
    let reference = format!("{}/platform/damaged:v0.1.0", registry.host);
    let pushed = oxplane(&["xpkg", "push", &reference, "-f", file.to_str().unwrap()]);
    assert!(pushed.status.success(), "{}", String::from_utf8_lossy(&pushed.stderr));

    // One byte of the package layer changes on the registry's disk; its length stays.
    let image = oxplane_xpkg::layout::read(&file).unwrap();
    let layer_digest = oxplane_xpkg::digest(&image.layers[0]);
    let blob = registry.blob_file(&layer_digest);
    let mut bytes = std::fs::read(&blob).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&blob, bytes).unwrap();

    let out = dir.path().join("out.xpkg");
    let pulled = oxplane(&["xpkg", "pull", &reference, "-o", out.to_str().unwrap()]);
    assert!(!pulled.status.success());
    let stderr = String::from_utf8_lossy(&pulled.stderr);
    assert!(stderr.contains(&format!("cannot pull blob {layer_digest} of {reference}")) && stderr.to_lowercase().contains("digest"), "{stderr}");
    assert!(!out.exists(), "nothing is written from a damaged pull");
}

#[test]
fn a_function_is_built_with_its_runtime_and_pulled_back_with_it() {
    use std::os::unix::fs::PermissionsExt;
    let registry = Registry::shared();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("package");
    write(&root, "crossplane.yaml", "apiVersion: meta.pkg.crossplane.io/v1\nkind: Function\nmetadata: {name: function-hello}\nspec: {capabilities: [composition]}\n");
    let rootfs = dir.path().join("rootfs");
    write(&rootfs, "usr/local/bin/function", "#!/bin/sh\nexec echo hello \"$@\"\n");
    std::fs::set_permissions(rootfs.join("usr/local/bin/function"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let file = dir.path().join("function-hello.xpkg");
    let (root, rootfs, file_arg) = (root.to_str().unwrap(), rootfs.to_str().unwrap(), file.to_str().unwrap());
    let built = oxplane(&["xpkg", "build", "-f", root, "-o", file_arg, "--runtime-root", rootfs, "--entrypoint", "/usr/local/bin/function", "--entrypoint", "--debug", "--env", "GREETING=hi"]);
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    let image = oxplane_xpkg::layout::read(&file).unwrap();
    let reference = format!("{}/functions/hello:v0.1.0", registry.host);
    assert!(oxplane(&["xpkg", "push", &reference, "-f", file_arg]).status.success());
    let pulled = tokio::runtime::Runtime::new().unwrap().block_on(pull(&reference, &Credentials::Anonymous)).unwrap();
    assert_eq!(pulled.image, image);
    let config: serde_json::Value = serde_json::from_slice(&pulled.image.config).unwrap();
    assert_eq!(config["config"]["Entrypoint"], serde_json::json!(["/usr/local/bin/function", "--debug"]));
    assert_eq!(config["config"]["Env"], serde_json::json!(["GREETING=hi"]));
    assert_eq!(pulled.image.layers.len(), 2, "the runtime's layer, then the package's");
    assert_eq!(oxplane_xpkg::meta::parse(&pulled.image.package_yaml().unwrap()).unwrap().name(), "function-hello");

    // A Configuration has no runtime; a runtime needs its entrypoint.
    let configuration = dir.path().join("configuration");
    write(&configuration, "crossplane.yaml", META);
    let refused = oxplane(&["xpkg", "build", "-f", configuration.to_str().unwrap(), "--runtime-root", rootfs, "--entrypoint", "/usr/local/bin/function"]);
    assert!(String::from_utf8_lossy(&refused.stderr).contains("a Configuration package has no runtime"), "{}", String::from_utf8_lossy(&refused.stderr));
    let refused = oxplane(&["xpkg", "build", "-f", root, "--runtime-root", rootfs]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--entrypoint"), "{}", String::from_utf8_lossy(&refused.stderr));
}
