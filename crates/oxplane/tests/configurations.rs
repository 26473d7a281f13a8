//! Configurations pulled from a real OCI registry (Debian's `docker-registry` on 127.0.0.1),
//! end to end with the real kubectl: the getting-started API built with `oxplane xpkg build`
//! from `examples/getting-started-package` and pushed with `oxplane xpkg push` installs from
//! a `Configuration` (its revision named after the digest, Healthy, owning the XRD and the
//! Composition), and an App of its XRD composes. A missing tag, a `package.yaml` Crossplane's
//! parser or validator refuses and a blob damaged in the registry each leave Crossplane's
//! condition naming the cause (and its event), and install nothing; a kind a Configuration may
//! not hold is Crossplane's lint warning, and only that object is skipped.

use crate::support;
use crate::support::processes::oxplane;

use std::path::Path;
use std::time::Duration;

use oxplane_xpkg::registry::{Credentials, push};
use oxplane_xpkg::testing::Registry;
use serde_json::Value;
use crate::package_dependencies::xrd;
use support::{Server, condition, within};

fn example(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(path).to_str().unwrap().to_string()
}

pub(crate) fn configuration(name: &str, package: &str) -> String {
    format!("apiVersion: pkg.crossplane.io/v1\nkind: Configuration\nmetadata:\n  name: {name}\nspec:\n  package: {package}\n")
}

/// Pushes a package whose `package.yaml` is `stream` as given; returns its digest.
pub(crate) fn push_stream(reference: &str, stream: &str) -> String {
    let image = oxplane_xpkg::build::image_of_stream(stream).unwrap();
    tokio::runtime::Runtime::new().unwrap().block_on(push(&image, reference, &Credentials::Anonymous)).unwrap()
}

/// The condition's `(status, reason, message)` once `check` accepts it.
pub(crate) fn wait_condition(server: &Server, what: &str, type_: &str, check: impl Fn(&Value) -> bool) -> Value {
    let mut last = Value::Null;
    within(Duration::from_secs(60), &format!("{what} {type_}"), || {
        last = server.get(&[what]).and_then(|o| condition(&o, type_)).unwrap_or(Value::Null);
        check(&last)
    });
    last
}

#[test]
fn a_configuration_from_a_registry_installs_its_api_and_an_app_composes() {
    let registry = Registry::shared();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("getting-started.xpkg");
    let built = oxplane(&["xpkg", "build", "--package-root", &example("getting-started-package"), "-o", file.to_str().unwrap()]);
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    let reference = format!("{}/platform/getting-started:v0.1.0", registry.host);
    let pushed = oxplane(&["xpkg", "push", &reference, "-f", file.to_str().unwrap()]);
    assert!(pushed.status.success(), "{}", String::from_utf8_lossy(&pushed.stderr));
    let digest = oxplane_xpkg::layout::read(&file).unwrap().digest();

    let server = Server::start();
    // Its dependencies installed first, under the names its Composition's steps use: the
    // resolver installs nothing more.
    server.kubectl(&["apply", "-f", &example("getting-started/00-provider.yaml"), "-f", &example("getting-started/01-functions.yaml")]);
    server.kubectl_stdin(&["apply", "-f", "-"], &configuration("getting-started", &reference));
    server.kubectl(&["wait", "--for=condition=Healthy", "configuration/getting-started", "--timeout=90s"]);
    let packages = server.kubectl(&["get", "providers,functions", "-o", "name"]);
    assert_eq!(packages.lines().collect::<Vec<_>>(), ["provider.pkg.crossplane.io/provider-nop", "function.pkg.crossplane.io/function-auto-ready", "function.pkg.crossplane.io/function-patch-and-transform"]);
    let installed = server.get(&["configuration", "getting-started"]).unwrap();
    assert_eq!(condition(&installed, "Installed").unwrap()["reason"], "ActivePackageRevision");
    assert_eq!(condition(&installed, "Healthy").unwrap()["reason"], "HealthyPackageRevision", "{installed}");
    let revision_name = format!("getting-started-{}", &digest["sha256:".len().."sha256:".len() + 12]);
    assert_eq!(installed["status"]["currentRevision"], revision_name.as_str());
    assert_eq!(installed["status"]["currentIdentifier"], reference.as_str());

    // A dependency may turn Healthy after the Configuration does: its revision counts it then.
    within(Duration::from_secs(60), "every dependency installed and healthy", || {
        let revision = server.get(&["configurationrevision", &revision_name]).unwrap();
        (revision["status"]["foundDependencies"].as_i64(), revision["status"]["installedDependencies"].as_i64()) == (Some(3), Some(3))
    });
    let revision = server.get(&["configurationrevision", &revision_name]).unwrap();
    assert_eq!(revision["spec"]["desiredState"], "Active");
    assert_eq!(revision["spec"]["image"], reference.as_str());
    assert_eq!(revision["spec"]["revision"], 1);
    assert_eq!(revision["metadata"]["labels"]["pkg.crossplane.io/package"], "getting-started");
    assert_eq!(condition(&revision, "RevisionHealthy").unwrap()["reason"], "HealthyPackageRevision");
    let refs: Vec<(&str, &str)> =
        revision["status"]["objectRefs"].as_array().unwrap().iter().map(|r| (r["kind"].as_str().unwrap(), r["name"].as_str().unwrap())).collect();
    // Sorted as Crossplane sorts them: descending by apiVersion/kind/name (the XRD is v2).
    assert_eq!(refs, [("CompositeResourceDefinition", "apps.example.org"), ("Composition", "apps")]);
    let columns: Vec<String> = server.kubectl(&["get", "configurationrevisions"]).lines().nth(1).unwrap().split_whitespace().map(str::to_string).collect();
    assert_eq!(columns[..4], [revision_name.as_str(), "True", reference.as_str(), "Active"], "{columns:?}");

    // The XRD is controlled by the revision and owned by the Configuration too.
    let xrd = server.get(&["xrd", "apps.example.org"]).unwrap();
    let owners: Vec<(&str, bool)> =
        xrd["metadata"]["ownerReferences"].as_array().unwrap().iter().map(|o| (o["kind"].as_str().unwrap(), o["controller"].as_bool().unwrap())).collect();
    assert_eq!(owners, [("ConfigurationRevision", true), ("Configuration", false)]);
    // The pulled blobs are in the data directory's content-addressed cache.
    assert!(server.dir().join("cache/xpkg/blobs/sha256").join(digest.trim_start_matches("sha256:")).exists());

    server.kubectl(&["wait", "--for=condition=Established", "xrd/apps.example.org", "--timeout=60s"]);
    server.kubectl(&["apply", "-f", &example("getting-started/04-app.yaml")]);
    server.kubectl(&["wait", "--for=condition=Ready", "app/my-app", "--timeout=60s"]);
    let app = server.get(&["app", "my-app"]).unwrap();
    assert_eq!(app["status"]["databaseSize"], "db.t3.medium");
}

#[test]
fn bad_packages_leave_conditions_naming_the_cause_and_install_nothing() {
    let registry = Registry::shared();
    let server = Server::start();

    // A tag nobody pushed.
    let missing = format!("{}/platform/nothing-here:v0.1.0", registry.host);
    server.kubectl_stdin(&["apply", "-f", "-"], &configuration("missing", &missing));
    let installed = wait_condition(&server, "configuration/missing", "Installed", |c| c["reason"] == "UnpackingPackage");
    assert_eq!(installed["status"], "False");
    let message = installed["message"].as_str().unwrap();
    assert!(message.starts_with(&format!("cannot unpack package: cannot authenticate to pull {missing}")) || message.starts_with(&format!("cannot unpack package: cannot resolve {missing}")), "{message}");
    let healthy = condition(&server.get(&["configuration", "missing"]).unwrap(), "Healthy").unwrap();
    assert_eq!((healthy["status"].as_str(), healthy["reason"].as_str()), (Some("False"), Some("UnhealthyPackageRevision")));

    // A Configuration holding a CRD besides its XRD: Crossplane's linter only warns (an event
    // on the revision), the CRD is skipped and the rest is installed.
    let foreign = format!("{}/platform/foreign:v0.1.0", registry.host);
    let crd = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: things.example.org}\n";
    push_stream(&foreign, &format!("apiVersion: meta.pkg.crossplane.io/v1\nkind: Configuration\nmetadata: {{name: foreign}}\n---\n{crd}{}", xrd("foreign.example.org")));
    server.kubectl_stdin(&["apply", "-f", "-"], &configuration("foreign", &foreign));
    server.kubectl(&["wait", "--for=condition=Healthy", "configuration/foreign", "--timeout=60s"]);
    let revision = current_revision(&server, "foreign");
    assert_eq!(
        warning(&server, &revision, "LintPackage"),
        "linting package contents failed: object did not pass any of the linters with following errors: object is not an XRD, object is not an ManagedResourceActivationPolicy, object is not a Composition, object is not an Operation, object is not a CronOperation, object is not a WatchOperation"
    );
    assert!(server.get(&["crd", "things.example.org"]).is_none(), "the CRD is skipped");
    assert!(server.get(&["xrd", "things.foreign.example.org"]).is_some(), "the XRD is installed");

    // A package.yaml Crossplane's validator refuses: the revision says why in its words, with a
    // ValidatePackage event, and nothing of the package is installed.
    let configuration_meta = |spec: &str| format!("apiVersion: meta.pkg.crossplane.io/v1\nkind: Configuration\nmetadata: {{name: c}}\n{spec}---\n");
    let invalid = [
        ("two-metas", format!("{}{}", configuration_meta(""), configuration_meta("")), "not exactly one package meta type"),
        ("no-meta", String::new(), "not exactly one package meta type"),
        ("provider-meta", "apiVersion: meta.pkg.crossplane.io/v1\nkind: Provider\nmetadata: {name: p}\n---\n".to_string(), "package meta type is not Configuration"),
        (
            "bad-constraint",
            configuration_meta("spec: {crossplane: {version: '>=banana'}}\n"),
            "package version constraints are poorly formatted: improper constraint: >=banana",
        ),
    ];
    for (name, stream, _) in &invalid {
        let reference = format!("{}/platform/{name}:v0.1.0", registry.host);
        push_stream(&reference, &format!("{stream}{}", xrd(&format!("{name}.example.org"))));
        server.kubectl_stdin(&["apply", "-f", "-"], &configuration(name, &reference));
    }
    for (name, _, cause) in &invalid {
        let message = format!("validating package contents failed: {cause}");
        let healthy = wait_condition(&server, &format!("configuration/{name}"), "Healthy", |c| c["status"] == "False");
        assert_eq!(healthy["message"], format!("Package revision health is \"False\" with message: {message}").as_str(), "{name}");
        let revision = current_revision(&server, name);
        let revision_healthy = condition(&server.get(&["configurationrevision", &revision]).unwrap(), "RevisionHealthy").unwrap();
        assert_eq!((revision_healthy["reason"].as_str(), revision_healthy["message"].as_str()), (Some("UnhealthyPackageRevision"), Some(message.as_str())));
        assert_eq!(warning(&server, &revision, "ValidatePackage"), message);
        assert!(server.get(&["xrd", &format!("things.{name}.example.org")]).is_none(), "{name}: nothing is installed");
    }

    // packagePullPolicy Never: a package pulled before is read from the cache (and refused for
    // the same reason); one never pulled is not in it.
    let never = |name: &str, package: &str| format!("{}  packagePullPolicy: Never\n", configuration(name, package));
    server.kubectl_stdin(&["apply", "-f", "-"], &never("two-metas-cached", &format!("{}/platform/two-metas:v0.1.0", registry.host)));
    let healthy = wait_condition(&server, "configuration/two-metas-cached", "Healthy", |c| c["status"] == "False");
    assert!(healthy["message"].as_str().unwrap().ends_with("validating package contents failed: not exactly one package meta type"), "{healthy}");
    let unpulled = format!("{}/platform/unpulled:v0.1.0", registry.host);
    push_stream(&unpulled, "apiVersion: meta.pkg.crossplane.io/v1\nkind: Configuration\nmetadata: {name: unpulled}\n");
    server.kubectl_stdin(&["apply", "-f", "-"], &never("unpulled", &unpulled));
    let installed = wait_condition(&server, "configuration/unpulled", "Installed", |c| c["reason"] == "UnpackingPackage");
    assert_eq!(installed["message"], "cannot unpack package: package not in cache and pull policy is Never");

    // A package.yaml Crossplane's parser cannot read: the package is not unpacked, no revision.
    let broken = format!("{}/platform/broken:v0.1.0", registry.host);
    push_stream(&broken, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n");
    server.kubectl_stdin(&["apply", "-f", "-"], &configuration("broken", &broken));
    let installed = wait_condition(&server, "configuration/broken", "Installed", |c| c["reason"] == "UnpackingPackage");
    assert_eq!(installed["message"], format!("cannot unpack package: cannot parse package {broken}: no Crossplane package may contain \"ConfigMap\" of \"v1\"").as_str());
    // (An empty list is printed as nothing with --ignore-not-found.)
    let revisions = server.get(&["configurationrevisions", "-l", "pkg.crossplane.io/package=broken"]);
    assert!(revisions.as_ref().is_none_or(|l| l["items"].as_array().is_none_or(Vec::is_empty)), "{revisions:?}");

    // A layer damaged on the registry's disk.
    let damaged = format!("{}/platform/damaged-config:v0.1.0", registry.host);
    let stream = "apiVersion: meta.pkg.crossplane.io/v1\nkind: Configuration\nmetadata: {name: damaged-config}\n";
    push_stream(&damaged, stream);
    let image = oxplane_xpkg::build::image_of_stream(stream).unwrap();
    let layer = oxplane_xpkg::digest(&image.layers[0]);
    let blob = registry.blob_file(&layer);
    let mut bytes = std::fs::read(&blob).unwrap();
    bytes[0] ^= 0xff;
    std::fs::write(&blob, bytes).unwrap();
    server.kubectl_stdin(&["apply", "-f", "-"], &configuration("damaged", &damaged));
    let installed = wait_condition(&server, "configuration/damaged", "Installed", |c| c["reason"] == "UnpackingPackage");
    let message = installed["message"].as_str().unwrap();
    assert!(message.starts_with(&format!("cannot unpack package: cannot pull blob {layer} of ")) && message.to_lowercase().contains("digest"), "{message}");

    // None of them but the linted one made a revision that installed anything.
    for revision in server.get(&["configurationrevisions", "-l", "pkg.crossplane.io/package!=foreign"]).unwrap()["items"].as_array().unwrap() {
        assert!(revision["status"]["objectRefs"].as_array().is_none_or(Vec::is_empty), "{revision}");
    }
}

/// The name of a Configuration's current revision, once it has one.
pub(crate) fn current_revision(server: &Server, name: &str) -> String {
    let mut revision = String::new();
    within(Duration::from_secs(60), &format!("configuration/{name} to have a revision"), || {
        revision = server.get(&["configuration", name]).and_then(|c| c["status"]["currentRevision"].as_str().map(str::to_string)).unwrap_or_default();
        !revision.is_empty()
    });
    revision
}

/// The message of the Warning event `reason` about the object `name`, once there is one.
pub(crate) fn warning(server: &Server, name: &str, reason: &str) -> String {
    let mut message = String::new();
    within(Duration::from_secs(60), &format!("a {reason} event about {name}"), || {
        let events = server.get(&["events", "-A", "--field-selector", &format!("involvedObject.name={name},type=Warning,reason={reason}")]).unwrap_or(Value::Null);
        message = events["items"].as_array().and_then(|items| items.last()).and_then(|e| e["message"].as_str()).unwrap_or_default().to_string();
        !message.is_empty()
    });
    message
}

/// Builds the getting-started package with the Composition's `medium` size mapped to
/// `database_size`, pushes it as `reference`; returns its digest.
fn push_getting_started(reference: &str, database_size: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("package");
    std::fs::create_dir_all(root.join("apis")).unwrap();
    std::fs::copy(example("getting-started-package/crossplane.yaml"), root.join("crossplane.yaml")).unwrap();
    std::fs::copy(example("getting-started/02-xrd.yaml"), root.join("apis/xrd.yaml")).unwrap();
    let composition = std::fs::read_to_string(example("getting-started/03-composition.yaml")).unwrap();
    std::fs::write(root.join("apis/composition.yaml"), composition.replace("medium: db.t3.medium", &format!("medium: {database_size}"))).unwrap();
    let file = dir.path().join("p.xpkg");
    assert!(oxplane(&["xpkg", "build", "-f", root.to_str().unwrap(), "-o", file.to_str().unwrap()]).status.success());
    let pushed = oxplane(&["xpkg", "push", reference, "-f", file.to_str().unwrap()]);
    assert!(pushed.status.success(), "{}", String::from_utf8_lossy(&pushed.stderr));
    oxplane_xpkg::layout::read(&file).unwrap().digest()
}

fn revision_of(name: &str, digest: &str) -> String {
    format!("{name}-{}", &digest["sha256:".len().."sha256:".len() + 12])
}

#[test]
fn upgrades_move_control_to_the_new_revision_and_manual_activation_waits() {
    let registry = Registry::shared();
    let v1 = format!("{}/platform/upgrades:v0.1.0", registry.host);
    let v2 = format!("{}/platform/upgrades:v0.2.0", registry.host);
    let digest1 = push_getting_started(&v1, "db.t3.medium");
    let digest2 = push_getting_started(&v2, "db.t3.xlarge");
    let (first, second) = (revision_of("upgrades", &digest1), revision_of("upgrades", &digest2));

    let server = Server::start();
    server.kubectl(&["apply", "-f", &example("getting-started/00-provider.yaml"), "-f", &example("getting-started/01-functions.yaml")]);
    server.kubectl_stdin(&["apply", "-f", "-"], &configuration("upgrades", &v1));
    server.kubectl(&["wait", "--for=condition=Healthy", "configuration/upgrades", "--timeout=90s"]);
    // The meta object's annotations are on the revision.
    let revision = server.get(&["configurationrevision", &first]).unwrap();
    assert_eq!(revision["metadata"]["annotations"]["meta.crossplane.io/maintainer"], "oxplane examples");
    server.kubectl(&["wait", "--for=condition=Established", "xrd/apps.example.org", "--timeout=60s"]);
    server.kubectl(&["apply", "-f", &example("getting-started/04-app.yaml")]);
    // A second App pinned to the composition revision it starts with (`Manual`).
    server.apply("apiVersion: example.org/v1\nkind: App\nmetadata: {name: pinned-app, namespace: default}\nspec:\n  size: medium\n  crossplane: {compositionUpdatePolicy: Manual}\n");
    server.kubectl(&["wait", "--for=condition=Ready", "app/my-app", "app/pinned-app", "-n", "default", "--timeout=60s"]);

    // Version 2 under Manual activation: a new revision, inactive; nothing changes yet.
    server.kubectl(&["patch", "configuration", "upgrades", "--type=merge", "-p",
        &format!("{{\"spec\":{{\"package\":\"{v2}\",\"revisionActivationPolicy\":\"Manual\"}}}}")]);
    let installed = wait_condition(&server, "configuration/upgrades", "Installed", |c| c["reason"] == "InactivePackageRevision");
    assert_eq!((installed["status"].as_str(), installed["message"].as_str()), (Some("False"), Some("Package is inactive")));
    let states = |server: &Server| -> Vec<(String, String, i64)> {
        let mut out: Vec<(String, String, i64)> = server.get(&["configurationrevisions"]).unwrap()["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r["metadata"]["name"].as_str().unwrap().to_string(), r["spec"]["desiredState"].as_str().unwrap().to_string(), r["spec"]["revision"].as_i64().unwrap()))
            .collect();
        out.sort_by_key(|s| s.2);
        out
    };
    within(Duration::from_secs(30), "both revisions inactive", || {
        states(&server) == [(first.clone(), "Inactive".to_string(), 1), (second.clone(), "Inactive".to_string(), 2)]
    });
    let composition = server.get(&["composition", "apps"]).unwrap();
    assert!(composition.to_string().contains("db.t3.medium"), "the Composition stays at version 1 while nothing is active");

    // Activated by hand, version 2 takes control and the App follows its Composition.
    server.kubectl(&["patch", "configurationrevision", &second, "--type=merge", "-p", "{\"spec\":{\"desiredState\":\"Active\"}}"]);
    within(Duration::from_secs(60), "the Composition at version 2", || server.get(&["composition", "apps"]).unwrap().to_string().contains("db.t3.xlarge"));
    server.kubectl(&["wait", "--for=condition=Healthy", "configuration/upgrades", "--timeout=60s"]);
    let owners = server.get(&["composition", "apps"]).unwrap()["metadata"]["ownerReferences"].clone();
    let controllers: Vec<&str> = owners.as_array().unwrap().iter().filter(|o| o["controller"] == true).map(|o| o["name"].as_str().unwrap()).collect();
    assert_eq!(controllers, [second.as_str()], "{owners}");
    within(Duration::from_secs(60), "the App composed by version 2", || server.get(&["app", "my-app"]).unwrap()["status"]["databaseSize"] == "db.t3.xlarge");
    // The pinned App stays on the composition revision of version 1 (the App above was
    // composed by version 2 after it, so it had its chance to move).
    let pinned = server.get(&["app", "pinned-app", "-n", "default"]).unwrap();
    assert_eq!(pinned["status"]["databaseSize"], "db.t3.medium", "{pinned}");
    let followed = server.get(&["app", "my-app", "-n", "default"]).unwrap();
    let reference = |app: &Value| app["spec"]["crossplane"]["compositionRevisionRef"]["name"].as_str().unwrap_or_default().to_string();
    assert!(!reference(&pinned).is_empty() && reference(&pinned) != reference(&followed), "{pinned}\n{followed}");

    // Back to version 1, automatically: its revision is active again and numbered highest;
    // with revisionHistoryLimit 1 both revisions are kept.
    server.kubectl(&["patch", "configuration", "upgrades", "--type=merge", "-p",
        &format!("{{\"spec\":{{\"package\":\"{v1}\",\"revisionActivationPolicy\":\"Automatic\"}}}}")]);
    within(Duration::from_secs(60), "version 1 active again", || {
        states(&server) == [(second.clone(), "Inactive".to_string(), 2), (first.clone(), "Active".to_string(), 3)]
    });
    within(Duration::from_secs(60), "the App composed by version 1", || server.get(&["app", "my-app"]).unwrap()["status"]["databaseSize"] == "db.t3.medium");

    // Deleting the Configuration removes its revisions and what they installed.
    server.kubectl(&["delete", "app", "my-app", "pinned-app", "-n", "default", "--timeout=60s"]);
    server.kubectl(&["delete", "configuration", "upgrades", "--timeout=60s"]);
    within(Duration::from_secs(60), "the XRD and Composition gone", || server.get(&["xrd", "apps.example.org"]).is_none() && server.get(&["composition", "apps"]).is_none());
    // (An empty list is printed as nothing with --ignore-not-found.)
    within(Duration::from_secs(30), "the revisions gone", || server.get(&["configurationrevisions"]).is_none_or(|l| l["items"].as_array().is_none_or(Vec::is_empty)));
}

/// Waits until `object`'s `Installed=False/UnpackingPackage` message reports a pull under way
/// (`PREFIX X MiB ...` with 0 < X < 12, and what follows `prefix` passing `rest`), and checks
/// every such message it saw has the progress form.
pub(crate) fn watch_pull_progress(server: &Server, object: &[&str], prefix: &str, rest: impl Fn(&str) -> bool) {
    let mut seen: Vec<String> = Vec::new();
    within(Duration::from_secs(60), "a report of the pull under way", || {
        let installed = server.get(object).and_then(|c| condition(&c, "Installed")).unwrap_or(Value::Null);
        if installed["reason"] == "UnpackingPackage" && installed["status"] == "False" {
            seen.push(installed["message"].as_str().unwrap_or_default().to_string());
        }
        seen.iter().any(|m| {
            let Some(after) = m.strip_prefix(prefix) else { return false };
            let received: f64 = after.split(' ').next().and_then(|x| x.parse().ok()).unwrap_or(0.0);
            rest(after) && received > 0.0 && received < 12.0
        })
    });
    for message in &seen {
        assert!(message.starts_with(prefix) && message.ends_with(" layers"), "{message}");
    }
}

/// A slow pull of a large package reports its progress while it runs, on the Configuration
/// (`Installed=False/UnpackingPackage`, `pulling package REF: 3.0 MiB of 12.0 MiB, 0 of 2
/// layers`) and in the log; once pulled, the package installs as any other.
#[test]
fn a_slow_pull_reports_its_progress_in_bytes_and_layers() {
    let registry = Registry::shared();
    let stream = format!("apiVersion: meta.pkg.crossplane.io/v1\nkind: Configuration\nmetadata: {{name: large}}\n{}", xrd("large.example.org"));
    let image = oxplane_xpkg::testing::with_large_layer(&oxplane_xpkg::build::image_of_stream(&stream).unwrap(), 12 << 20);
    tokio::runtime::Runtime::new().unwrap().block_on(push(&image, &format!("{}/progress/large:v0.1.0", registry.host), &Credentials::Anonymous)).unwrap();
    // Pulled through a proxy that sends 3 MiB a second: about four seconds.
    let slow = oxplane_xpkg::testing::throttled_proxy(&registry.host, 3 << 20);
    let reference = format!("{slow}/progress/large:v0.1.0");

    let server = Server::start();
    server.apply(&configuration("large", &reference));
    let prefix = format!("pulling package {reference}: ");
    // `X MiB of 12.0 MiB, 0 of 2 layers` with 0 < X < 12: the large layer is arriving.
    watch_pull_progress(&server, &["configuration", "large"], &prefix, |rest| rest.ends_with(" of 12.0 MiB, 0 of 2 layers"));
    server.kubectl(&["wait", "--for=condition=Healthy", "configuration/large", "--timeout=90s"]);
    let installed = condition(&server.get(&["configuration", "large"]).unwrap(), "Installed").unwrap();
    assert_eq!(installed["reason"], "ActivePackageRevision");
    assert!(server.get(&["xrd", "things.large.example.org"]).is_some());
    let log = server.log();
    assert!(log.contains(&prefix), "the progress is in the log");
    assert!(log.contains("pulled a layer") && log.contains("layers=2"), "each layer pulled is in the log");
}
