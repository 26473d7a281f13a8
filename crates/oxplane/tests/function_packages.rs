//! A Function package pulled from a real registry (Debian's `docker-registry` on 127.0.0.1) and
//! run as a local process, end to end with the real kubectl: the package is built with
//! `oxplane xpkg build` around a runtime whose entrypoint runs `oxplane function serve
//! function-patch-and-transform`; a Configuration depending on it, which depends on
//! provider-nop, is applied alone, all three are installed, and an XR of its XRD becomes Ready through the
//! pulled function, called over mutual TLS on the address oxplane gave the process; killed,
//! the process is started again and compositions go on.

use std::path::Path;
use std::process::Command;

use crate::configurations::{configuration, push_stream};
use crate::support::processes::{alive, processes_in, write_file};
use crate::support::{Server, condition};

use oxplane_xpkg::testing::Registry;

const XRD: &str = "apiVersion: apiextensions.crossplane.io/v2
kind: CompositeResourceDefinition
metadata:
  name: caches.pulled.example.org
spec:
  group: pulled.example.org
  names: {kind: Cache, plural: caches}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    referenceable: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: string}
          status:
            type: object
            properties:
              size: {type: string}
";

const COMPOSITION: &str = "apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: caches
spec:
  compositeTypeRef: {apiVersion: pulled.example.org/v1, kind: Cache}
  mode: Pipeline
  pipeline:
  - step: patch-and-transform
    functionRef:
      name: fns-function-pt
    input:
      apiVersion: pt.fn.crossplane.io/v1beta1
      kind: Resources
      resources:
      - name: cache
        base:
          apiVersion: nop.crossplane.io/v1alpha1
          kind: NopResource
          spec:
            forProvider:
              conditionAfter:
              - {time: 1s, conditionType: Ready, conditionStatus: 'True', conditionReason: Available}
        patches:
        - {type: FromCompositeFieldPath, fromFieldPath: spec.size, toFieldPath: spec.forProvider.fields.size}
        - {type: ToCompositeFieldPath, fromFieldPath: spec.forProvider.fields.size, toFieldPath: status.size}
";

#[test]
fn a_pulled_function_runs_as_a_process_and_an_xr_composes_through_it() {
    let registry = Registry::shared();
    let dir = tempfile::tempdir().unwrap();
    let function_source = format!("{}/fns/function-pt", registry.host);
    // The function depends on provider-nop (its NopResources are what the Composition makes).
    push_function(dir.path(), &format!("{function_source}:v0.1.0"), "[{provider: xpkg.crossplane.io/crossplane-contrib/provider-nop, version: \">=v0.5.0\"}]");

    // The Configuration: the XRD and Composition above, depending on the function.
    let platform = format!("{}/platform/caches:v0.1.0", registry.host);
    let meta = format!(
        "apiVersion: meta.pkg.crossplane.io/v1\nkind: Configuration\nmetadata:\n  name: caches\nspec:\n  dependsOn:\n  - function: {function_source}\n    version: \">=v0.1.0\"\n"
    );
    push_stream(&platform, &format!("{meta}---\n{XRD}---\n{COMPOSITION}"));

    let mut server = Server::start();
    server.apply(&configuration("caches", &platform));
    server.kubectl(&["wait", "--for=condition=Healthy", "configuration/caches", "--timeout=90s"]);
    server.kubectl(&["wait", "--for=condition=Healthy", "function/fns-function-pt", "--timeout=90s"]);
    // The resolver installs what the function's Lock entry depends on once the function is in.
    crate::support::within(std::time::Duration::from_secs(60), "the function's dependency to be installed", || server.get(&["provider", "crossplane-contrib-provider-nop"]).is_some());
    server.kubectl(&["wait", "--for=condition=Healthy", "provider/crossplane-contrib-provider-nop", "--timeout=90s"]);
    let function = server.get(&["function", "fns-function-pt"]).unwrap();
    assert_eq!(function["spec"]["package"], format!("{function_source}:v0.1.0").as_str());
    let revision = server.get(&["functionrevision", function["status"]["currentRevision"].as_str().unwrap()]).unwrap();
    let endpoint = revision["status"]["endpoint"].as_str().unwrap().to_string();
    assert!(endpoint.starts_with("127.0.0.1:"), "{revision}");
    assert_eq!(condition(&revision, "RuntimeHealthy").unwrap()["status"], "True");
    let lock = server.get(&["lock", "lock"]).unwrap();
    assert_eq!(lock["packages"].as_array().unwrap().len(), 3, "{lock}");
    let entry = lock["packages"].as_array().unwrap().iter().find(|p| p["source"] == function_source.as_str()).unwrap();
    assert_eq!(entry["dependencies"][0]["package"], "xpkg.crossplane.io/crossplane-contrib/provider-nop", "{lock}");
    assert_eq!(entry["dependencies"][0]["constraints"], ">=v0.5.0", "{lock}");

    server.kubectl(&["wait", "--for=condition=Established", "xrd/caches.pulled.example.org", "--timeout=60s"]);
    server.apply("apiVersion: pulled.example.org/v1\nkind: Cache\nmetadata: {name: shared, namespace: default}\nspec: {size: large}\n");
    server.kubectl(&["wait", "--for=condition=Ready", "cache/shared", "-n", "default", "--timeout=90s"]);
    let cache = server.get(&["cache", "shared", "-n", "default"]).unwrap();
    assert_eq!(cache["status"]["size"], "large", "composed through the pulled function");
    // Killed, the process is started again, and compositions go on through it.
    let first = function_process(server.pid());
    // In a network namespace of its own, serving on the SDKs' default port there (given no
    // --address), which the endpoint's port outside reaches.
    let cmdline = String::from_utf8_lossy(&std::fs::read(format!("/proc/{first}/cmdline")).unwrap()).replace('\0', " ");
    assert!(!cmdline.contains("--address"), "{cmdline}");
    let namespace = |pid: u32| std::fs::read_link(format!("/proc/{pid}/ns/net")).unwrap();
    assert_ne!(namespace(first), namespace(server.pid()), "the function shares oxplane's network");
    assert!(Command::new("kill").args(["-KILL", &first.to_string()]).status().unwrap().success());
    let mut second = 0;
    crate::support::within(std::time::Duration::from_secs(30), "the function's process to be started again", || {
        second = function_process(server.pid());
        second != 0 && second != first
    });
    server.kubectl(&["patch", "cache", "shared", "-n", "default", "--type=merge", "-p", "{\"spec\":{\"size\":\"small\"}}"]);
    crate::support::within(std::time::Duration::from_secs(60), "the XR to compose through the restarted function", || {
        server.get(&["cache", "shared", "-n", "default"]).is_some_and(|c| c["status"]["size"] == "small")
    });
    // The process's output is kept per revision in the data directory.
    let log = server.dir().join("runtimes/functions/logs").join(format!("{}.log", revision["metadata"]["name"].as_str().unwrap()));
    let output = std::fs::read_to_string(&log).unwrap();
    assert!(output.contains("serving function-patch-and-transform on 0.0.0.0:9443 (mutual TLS)"), "{output}");
    // Its dependency is counted found and installed (healthy) on its revision, as Crossplane's
    // DEP-FOUND and DEP-INSTALLED columns show them.
    let revision_name = revision["metadata"]["name"].as_str().unwrap().to_string();
    crate::support::within(std::time::Duration::from_secs(90), "the function's dependency counted installed", || {
        server.get(&["functionrevision", &revision_name]).is_some_and(|r| (r["status"]["foundDependencies"].as_i64(), r["status"]["installedDependencies"].as_i64()) == (Some(1), Some(1)))
    });

    // A function whose dependency no registry has: it waits, saying which, and runs nothing.
    let needy_dir = tempfile::tempdir().unwrap();
    let absent = format!("{}/absent/provider-gone", registry.host);
    let needy = format!("{}/fns/function-needy:v0.1.0", registry.host);
    push_function(needy_dir.path(), &needy, &format!("[{{provider: {absent}, version: \">=v1.0.0\"}}]"));
    server.apply(&format!("apiVersion: pkg.crossplane.io/v1\nkind: Function\nmetadata: {{name: needy}}\nspec: {{package: \"{needy}\"}}\n"));
    let healthy = crate::configurations::wait_condition(&server, "function/needy", "Healthy", |c| c["status"] == "False");
    let expected = format!("cannot resolve package dependencies: missing dependencies: \"{absent}\" (>=v1.0.0)");
    assert!(healthy["message"].as_str().unwrap_or_default().contains(&expected), "{healthy}");
    let needy_revision = server.get(&["function", "needy"]).unwrap()["status"]["currentRevision"].as_str().unwrap().to_string();
    let needy_revision = server.get(&["functionrevision", &needy_revision]).unwrap();
    assert_eq!(needy_revision["status"]["foundDependencies"], 0, "{needy_revision}");
    assert!(needy_revision["status"].get("endpoint").is_none(), "no process runs for it: {needy_revision}");
    let lock = server.get(&["lock", "lock"]).unwrap();
    assert!(lock.to_string().contains(&absent), "its Lock entry names what it waits for: {lock}");

    // oxplane killed with SIGKILL: its function process does not outlive it (nothing of the
    // old run keeps serving, or holds its port), and the next start runs exactly one again.
    let before = function_process(server.pid());
    assert_ne!(before, 0);
    server.kill();
    crate::support::within(std::time::Duration::from_secs(10), "the function process to exit with oxplane", || !alive(before));
    server.spawn();
    server.kubectl(&["patch", "cache", "shared", "-n", "default", "--type=merge", "-p", "{\"spec\":{\"size\":\"medium\"}}"]);
    crate::support::within(std::time::Duration::from_secs(90), "the XR to compose through the function of the new start", || {
        server.get(&["cache", "shared", "-n", "default"]).is_some_and(|c| c["status"]["size"] == "medium")
    });
    assert!(!alive(before));
    assert_eq!(function_processes_under(server.dir()), vec![function_process(server.pid())], "one function process, the new start's");
}

/// Every live process serving function-patch-and-transform from a root filesystem in the data
/// directory `dir`, whoever its parent is.
fn function_processes_under(dir: &Path) -> Vec<u32> {
    processes_in(&dir.join("runtimes/functions/rootfs"), "function-patch-and-transform")
}

/// Builds (in `dir`) and pushes to `reference` a Function package whose runtime runs
/// oxplane's own function server for function-patch-and-transform, depending on `depends_on`
/// (a YAML list of `dependsOn` entries).
fn push_function(dir: &Path, reference: &str, depends_on: &str) {
    let package = dir.join("function");
    write_file(
        &package.join("crossplane.yaml"),
        &format!("apiVersion: meta.pkg.crossplane.io/v1\nkind: Function\nmetadata: {{name: function-pt}}\nspec: {{capabilities: [composition], dependsOn: {depends_on}}}\n"),
        false,
    );
    let program = dir.join("rootfs/usr/local/bin/function");
    write_file(&program, &format!("#!/bin/sh\nexec {} function serve function-patch-and-transform \"$@\"\n", env!("CARGO_BIN_EXE_oxplane")), true);
    let file = dir.join("function-pt.xpkg");
    let built = Command::new(env!("CARGO_BIN_EXE_oxplane"))
        .args(["xpkg", "build", "-f", package.to_str().unwrap(), "-o", file.to_str().unwrap(), "--runtime-root"])
        .arg(dir.join("rootfs"))
        .args(["--entrypoint", "/usr/local/bin/function"])
        .output()
        .unwrap();
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    let pushed = Command::new(env!("CARGO_BIN_EXE_oxplane")).args(["xpkg", "push", reference, "-f", file.to_str().unwrap()]).output().unwrap();
    assert!(pushed.status.success(), "{}", String::from_utf8_lossy(&pushed.stderr));
}

/// `oxplane up --pull-package PREFIX` turns the built-in off for the references starting with
/// PREFIX: a Function named as a built-in one is pulled and run as its package's process, and
/// a dependency on it is resolved from its registry's tags (the highest allowed, where a
/// built-in is installed at the version its constraint names); other references still use
/// the built-in. A Provider under the prefix is pulled too (`provider_packages` runs one).
#[test]
fn pull_package_prefixes_turn_the_built_in_off_for_those_packages() {
    let registry = Registry::shared();
    let dir = tempfile::tempdir().unwrap();
    let source = format!("{}/real/function-patch-and-transform", registry.host);
    for tag in ["v0.1.0", "v0.2.0"] {
        push_function(dir.path(), &format!("{source}:{tag}"), "[]");
    }
    let platform = format!("{}/real/platform:v0.1.0", registry.host);
    push_stream(
        &platform,
        &format!("apiVersion: meta.pkg.crossplane.io/v1\nkind: Configuration\nmetadata:\n  name: platform\nspec:\n  dependsOn:\n  - function: {source}\n    version: \">=v0.1.0\"\n"),
    );

    let server = Server::start_with(&["--pull-package", &format!("{}/real/", registry.host)]);
    server.apply(&configuration("platform", &platform));
    server.apply("apiVersion: pkg.crossplane.io/v1\nkind: Function\nmetadata: {name: function-auto-ready}\nspec: {package: xpkg.crossplane.io/crossplane-contrib/function-auto-ready:v0.2.1}\n");
    server.kubectl(&["wait", "--for=condition=Healthy", "configuration/platform", "--timeout=90s"]);
    server.kubectl(&["wait", "--for=condition=Healthy", "function/real-function-patch-and-transform", "function/function-auto-ready", "--timeout=90s"]);
    let function = server.get(&["function", "real-function-patch-and-transform"]).unwrap();
    assert_eq!(function["spec"]["package"], format!("{source}:v0.2.0").as_str(), "the highest tag of its registry");
    let endpoint = |name: &str| {
        let package = server.get(&["function", name]).unwrap();
        let revision = server.get(&["functionrevision", package["status"]["currentRevision"].as_str().unwrap()]).unwrap();
        revision["status"]["endpoint"].as_str().unwrap_or_default().to_string()
    };
    assert!(endpoint("real-function-patch-and-transform").starts_with("127.0.0.1:"), "pulled and run as a process");
    assert_ne!(function_process(server.pid()), 0, "its process runs");
    assert_eq!(endpoint("function-auto-ready"), "in-process:///function-auto-ready", "other references keep the built-in");

    // A Provider the prefix sends to its registry is pulled from it rather than served by the
    // built-in of its name: this one is not there, and the Provider says so.
    let provider = format!("{}/real/provider-nop:v0.4.0", registry.host);
    server.apply(&format!("apiVersion: pkg.crossplane.io/v1\nkind: Provider\nmetadata: {{name: provider-nop}}\nspec: {{package: {provider}}}\n"));
    let installed = crate::configurations::wait_condition(&server, "provider/provider-nop", "Installed", |c| c["reason"] == "UnpackingPackage");
    let message = installed["message"].as_str().unwrap();
    assert!(message.starts_with("cannot unpack package: ") && message.contains(&provider), "{message}");
    assert!(!message.contains("built-in providers"), "no built-in is offered for a reference that is to be pulled: {message}");
    assert!(server.get(&["crd", "nopresources.nop.crossplane.io"]).is_none(), "the built-in is not installed");
}

/// The pid of the function server process oxplane (`server`) started, or 0.
fn function_process(server: u32) -> u32 {
    let tasks = std::fs::read_dir(format!("/proc/{server}/task")).into_iter().flatten().flatten();
    let children: Vec<u32> = tasks
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|text| text.split_whitespace().filter_map(|pid| pid.parse().ok()).collect::<Vec<u32>>())
        .collect();
    children
        .into_iter()
        .find(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| String::from_utf8_lossy(&c).contains("function-patch-and-transform")))
        .unwrap_or(0)
}

/// A slow pull of a Function's image says how far it got while it runs, on the Function's
/// `Installed=False/UnpackingPackage` (as a Configuration's does) and in the log; once pulled,
/// the function runs.
#[test]
fn a_slow_function_pull_reports_its_progress() {
    use oxplane_xpkg::registry::{Credentials, push};
    let registry = Registry::shared();
    let dir = tempfile::tempdir().unwrap();
    push_function(dir.path(), &format!("{}/slow/function-pt:v0.0.1", registry.host), "[]");
    let built = oxplane_xpkg::layout::read(&dir.path().join("function-pt.xpkg")).unwrap();
    let image = oxplane_xpkg::testing::with_large_layer(&built, 12 << 20);
    tokio::runtime::Runtime::new().unwrap().block_on(push(&image, &format!("{}/slow/function-pt:v0.1.0", registry.host), &Credentials::Anonymous)).unwrap();
    // Pulled through a proxy that sends 3 MiB a second: about four seconds.
    let slow = oxplane_xpkg::testing::throttled_proxy(&registry.host, 3 << 20);
    let reference = format!("{slow}/slow/function-pt:v0.1.0");

    let server = Server::start();
    server.apply(&format!("apiVersion: pkg.crossplane.io/v1\nkind: Function\nmetadata: {{name: slow-pt}}\nspec: {{package: \"{reference}\"}}\n"));
    let prefix = format!("pulling package {reference}: ");
    // `X MiB of Y MiB, 0 of N layers` with 0 < X < 12: the large layer is arriving.
    crate::configurations::watch_pull_progress(&server, &["function", "slow-pt"], &prefix, |rest| rest.contains(" MiB, 0 of "));
    server.kubectl(&["wait", "--for=condition=Healthy", "function/slow-pt", "--timeout=90s"]);
    let installed = condition(&server.get(&["function", "slow-pt"]).unwrap(), "Installed").unwrap();
    assert_eq!(installed["reason"], "ActivePackageRevision");
    assert!(server.log().contains(&prefix), "the progress is in the log");
}
