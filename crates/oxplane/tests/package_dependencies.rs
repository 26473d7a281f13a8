//! Dependencies and the Lock end to end, with a real OCI registry (Debian's `docker-registry`
//! on 127.0.0.1) and the real kubectl: a Configuration that depends on the built-in
//! provider-nop and on another Configuration package in the registry installs both when
//! applied alone (the second at the highest tag its constraint allows, the first at the version
//! its constraint names), and the `lock` lists all three with their dependencies. A dependency
//! no tag satisfies, an installed dependency of a version the constraint refuses, and a package
//! for another Crossplane version each leave Crossplane's condition and install nothing; a
//! deleted package leaves the Lock, the dependencies it brought stay.

use crate::configurations::{configuration, push_stream, wait_condition};
use crate::support::{Server, condition};

use oxplane_xpkg::testing::Registry;
use serde_json::Value;

fn meta(name: &str, extra_spec: &str) -> String {
    format!("apiVersion: meta.pkg.crossplane.io/v1\nkind: Configuration\nmetadata:\n  name: {name}\nspec:\n  crossplane:\n    version: \">=v2.0.0\"\n{extra_spec}")
}

/// An XRD a package installs, so a test can see whether anything was installed.
pub(crate) fn xrd(group: &str) -> String {
    format!(
        "---\napiVersion: apiextensions.crossplane.io/v2\nkind: CompositeResourceDefinition\nmetadata:\n  name: things.{group}\nspec:\n  group: {group}\n  names: {{kind: Thing, plural: things}}\n  scope: Namespaced\n  versions:\n  - name: v1\n    served: true\n    referenceable: true\n    schema:\n      openAPIV3Schema: {{type: object}}\n"
    )
}

fn revision_healthy(server: &Server, name: &str) -> Value {
    let package = server.get(&["configuration", name]).unwrap();
    let revision = package["status"]["currentRevision"].as_str().unwrap().to_string();
    let revision = server.get(&["configurationrevision", &revision]).unwrap();
    condition(&revision, "RevisionHealthy").unwrap()
}

#[test]
fn a_configuration_installs_its_dependencies_and_the_lock_lists_them() {
    let registry = Registry::shared();
    let base = format!("{}/deps/base", registry.host);
    // Three versions of the dependency; the constraint allows the first two.
    for (tag, description) in [("v0.1.0", "first"), ("v0.2.0", "second"), ("v1.0.0", "incompatible")] {
        let stream = meta("base", "").replace("metadata:\n  name: base\n", &format!("metadata:\n  name: base\n  annotations: {{meta.crossplane.io/description: {description}}}\n"));
        push_stream(&format!("{base}:{tag}"), &format!("{stream}{}", xrd("base.example.org")));
    }
    let platform = format!("{}/deps/platform:v0.1.0", registry.host);
    let depends = format!(
        "  dependsOn:\n  - provider: xpkg.crossplane.io/crossplane-contrib/provider-nop\n    version: \">=v0.5.0\"\n  - apiVersion: pkg.crossplane.io/v1\n    kind: Configuration\n    package: {base}\n    version: \">=v0.1.0 <v1.0.0\"\n"
    );
    push_stream(&platform, &format!("{}{}", meta("platform", &depends), xrd("platform.example.org")));

    let server = Server::start();
    server.apply(&configuration("platform", &platform));
    server.kubectl(&["wait", "--for=condition=Healthy", "configuration/platform", "--timeout=90s"]);

    // The dependencies were installed as Crossplane's resolver installs them: named after the
    // repository path, no owner, the highest allowed tag (a built-in: the version named).
    let installed = server.get(&["configuration", "deps-base"]).unwrap();
    assert_eq!(installed["spec"]["package"], format!("{base}:v0.2.0").as_str());
    assert!(installed["metadata"].get("ownerReferences").is_none(), "{installed}");
    server.kubectl(&["wait", "--for=condition=Healthy", "configuration/deps-base", "--timeout=60s"]);
    let installed = server.get(&["configuration", "deps-base"]).unwrap();
    let provider = server.get(&["provider", "crossplane-contrib-provider-nop"]).unwrap();
    assert_eq!(provider["spec"]["package"], "xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.5.0");
    server.kubectl(&["wait", "--for=condition=Healthy", "provider/crossplane-contrib-provider-nop", "--timeout=60s"]);
    // Both XRDs are installed, the dependency's and the platform's.
    assert!(server.get(&["xrd", "things.base.example.org"]).is_some());
    assert!(server.get(&["xrd", "things.platform.example.org"]).is_some());

    let platform_revision = server.get(&["configuration", "platform"]).unwrap()["status"]["currentRevision"].as_str().unwrap().to_string();
    let revision = server.get(&["configurationrevision", &platform_revision]).unwrap();
    assert_eq!((revision["status"]["foundDependencies"].as_i64(), revision["status"]["installedDependencies"].as_i64()), (Some(2), Some(2)), "{revision}");

    // The Lock lists all three packages; the platform's entry carries its dependencies.
    let mut lock = Value::Null;
    crate::support::within(std::time::Duration::from_secs(30), "the lock lists three packages", || {
        lock = server.get(&["lock", "lock"]).unwrap_or(Value::Null);
        lock["packages"].as_array().is_some_and(|p| p.len() == 3)
    });
    let mut entries: Vec<(String, String, String, String)> = lock["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["kind"].as_str().unwrap().into(), p["source"].as_str().unwrap().into(), p["version"].as_str().unwrap().into(), p["name"].as_str().unwrap().into()))
        .collect();
    entries.sort();
    let base_revision = installed["status"]["currentRevision"].as_str().unwrap_or_default().to_string();
    let provider_revision = server.get(&["provider", "crossplane-contrib-provider-nop"]).unwrap()["status"]["currentRevision"].as_str().unwrap().to_string();
    let mut expected = vec![
        ("Configuration".to_string(), base.clone(), "v0.2.0".to_string(), base_revision),
        ("Configuration".to_string(), format!("{}/deps/platform", registry.host), "v0.1.0".to_string(), platform_revision.clone()),
        ("Provider".to_string(), "xpkg.crossplane.io/crossplane-contrib/provider-nop".to_string(), "v0.5.0".to_string(), provider_revision),
    ];
    expected.sort();
    assert_eq!(entries, expected);
    let platform_entry = lock["packages"].as_array().unwrap().iter().find(|p| p["name"] == platform_revision.as_str()).unwrap();
    let dependencies: Vec<(&str, &str, &str)> = platform_entry["dependencies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["package"].as_str().unwrap(), d["type"].as_str().unwrap(), d["constraints"].as_str().unwrap()))
        .collect();
    assert_eq!(dependencies, [("xpkg.crossplane.io/crossplane-contrib/provider-nop", "Provider", ">=v0.5.0"), (base.as_str(), "Configuration", ">=v0.1.0 <v1.0.0")]);
    assert_eq!(condition(&lock, "Resolved").unwrap()["reason"], "DependencyResolutionSucceeded");
    assert_eq!(lock["metadata"]["finalizers"][0], "lock.pkg.crossplane.io");

    // An installed dependency whose version the constraint refuses: the revision says so.
    let too_new = format!("{}/deps/too-new:v0.1.0", registry.host);
    let depends = format!("  dependsOn:\n  - configuration: {base}\n    version: \">=v0.9.0\"\n");
    push_stream(&too_new, &format!("{}{}", meta("too-new", &depends), xrd("too-new.example.org")));
    server.apply(&configuration("too-new", &too_new));
    let healthy = wait_condition(&server, "configuration/too-new", "Healthy", |c| c["status"] == "False");
    let message = format!("cannot resolve package dependencies: incompatible dependencies: existing package {base}@v0.2.0 is incompatible with constraint >=v0.9.0");
    assert_eq!(healthy["message"], format!("Package revision health is \"False\" with message: {message}").as_str());
    assert_eq!(revision_healthy(&server, "too-new")["message"], message.as_str());
    assert!(server.get(&["xrd", "things.too-new.example.org"]).is_none(), "nothing is installed");

    // A dependency no tag satisfies: the Lock says why, the revision names it missing.
    let lonely = format!("{}/deps/lonely", registry.host);
    push_stream(&format!("{lonely}:v0.1.0"), &meta("lonely", ""));
    let wants = format!("{}/deps/wants-v9:v0.1.0", registry.host);
    let depends = format!("  dependsOn:\n  - configuration: {lonely}\n    version: \">=v9.0.0\"\n");
    push_stream(&wants, &format!("{}{}", meta("wants-v9", &depends), xrd("wants.example.org")));
    server.apply(&configuration("wants-v9", &wants));
    let healthy = wait_condition(&server, "configuration/wants-v9", "Healthy", |c| c["status"] == "False");
    assert_eq!(
        healthy["message"],
        format!("Package revision health is \"False\" with message: cannot resolve package dependencies: missing dependencies: \"{lonely}\" (>=v9.0.0)").as_str()
    );
    let resolved = wait_condition(&server, "lock/lock", "Resolved", |c| c["status"] == "False");
    assert_eq!(resolved["reason"], "DependencyResolutionFailed");
    assert_eq!(
        resolved["message"],
        format!("Error occurred during dependency resolution dependency ({lonely}) does not have a valid version to upgrade that satisfies all constraints. If there is a valid version that requires downgrade, manual intervention is required. Constraints: >=v9.0.0").as_str()
    );
    assert!(server.get(&["configuration", "deps-lonely"]).is_none(), "no package is created for it");
    assert!(server.get(&["xrd", "things.wants.example.org"]).is_none(), "nothing is installed");

    // A package for another Crossplane version; ignoreCrossplaneConstraints installs it anyway.
    let future = format!("{}/deps/future:v0.1.0", registry.host);
    push_stream(&future, &format!("{}{}", meta("future", "").replace(">=v2.0.0", ">=v3.0.0"), xrd("future.example.org")));
    server.apply(&configuration("future", &future));
    wait_condition(&server, "configuration/future", "Healthy", |c| c["status"] == "False");
    assert_eq!(revision_healthy(&server, "future")["message"], "incompatible Crossplane version: package is not compatible with Crossplane version (v2.3.0)");
    assert!(server.get(&["xrd", "things.future.example.org"]).is_none(), "nothing is installed");
    server.kubectl(&["patch", "configuration", "future", "--type=merge", "-p", "{\"spec\":{\"ignoreCrossplaneConstraints\":true}}"]);
    server.kubectl(&["wait", "--for=condition=Healthy", "configuration/future", "--timeout=60s"]);
    assert!(server.get(&["xrd", "things.future.example.org"]).is_some());

    // Deleting the platform takes its entry out of the Lock; the dependency it brought stays.
    server.kubectl(&["delete", "configuration", "platform", "--timeout=60s"]);
    crate::support::within(std::time::Duration::from_secs(30), "the platform's entry to leave the lock", || {
        let lock = server.get(&["lock", "lock"]).unwrap();
        !lock["packages"].as_array().unwrap().iter().any(|p| p["name"] == platform_revision.as_str())
    });
    assert!(server.get(&["configuration", "deps-base"]).is_some());
    assert!(server.get(&["provider", "crossplane-contrib-provider-nop"]).is_some());
}

/// With `--enable-dependency-version-upgrades` (Crossplane's alpha flag; without it the
/// dependent reports the incompatible dependency, as above) an installed dependency whose
/// version a new dependent refuses is moved to the lowest version at or above it that every
/// dependent allows; when none does, the Lock says so and nothing moves.
#[test]
fn with_dependency_upgrades_an_installed_dependency_moves_to_a_version_every_dependent_allows() {
    let registry = Registry::shared();
    let base = format!("{}/upgrades/base", registry.host);
    for tag in ["v0.1.0", "v0.2.0", "v0.3.0", "v1.0.0"] {
        // Each version its own content (so its own digest and revision).
        let stream = meta("base", "").replace("name: base\n", &format!("name: base\n  annotations: {{meta.crossplane.io/description: {tag}}}\n"));
        push_stream(&format!("{base}:{tag}"), &format!("{stream}{}", xrd("upgraded.example.org")));
    }
    let dependent = |name: &str, constraint: &str| {
        let reference = format!("{}/upgrades/{name}:v0.1.0", registry.host);
        let depends = format!("  dependsOn:\n  - configuration: {base}\n    version: \"{constraint}\"\n");
        push_stream(&reference, &format!("{}{}", meta(name, &depends), xrd(&format!("{name}.example.org"))));
        configuration(name, &reference)
    };
    let installed_version = |server: &Server| server.get(&["configuration", "upgrades-base"]).unwrap()["spec"]["package"].as_str().unwrap().to_string();

    let server = Server::start_with(&["--enable-dependency-version-upgrades"]);
    // The dependency, installed by hand at its first version.
    server.apply(&configuration("upgrades-base", &format!("{base}:v0.1.0")));
    server.kubectl(&["wait", "--for=condition=Healthy", "configuration/upgrades-base", "--timeout=90s"]);

    // A dependent that needs v0.2.0 or later below v1: the dependency moves to v0.2.0, and both
    // are healthy.
    server.apply(&dependent("needs-two", ">=v0.2.0 <v1.0.0"));
    server.kubectl(&["wait", "--for=condition=Healthy", "configuration/needs-two", "--timeout=90s"]);
    assert_eq!(installed_version(&server), format!("{base}:v0.2.0"));
    server.kubectl(&["wait", "--for=condition=Healthy", "configuration/upgrades-base", "--timeout=60s"]);

    // Another that needs v0.3.0 or later: v0.3.0 satisfies both (v1.0.0 would refuse the first).
    server.apply(&dependent("needs-three", ">=v0.3.0"));
    server.kubectl(&["wait", "--for=condition=Healthy", "configuration/needs-three", "--timeout=90s"]);
    assert_eq!(installed_version(&server), format!("{base}:v0.3.0"));
    server.kubectl(&["wait", "--for=condition=Healthy", "configuration/needs-two", "configuration/upgrades-base", "--timeout=60s"]);
    crate::support::within(std::time::Duration::from_secs(30), "the lock to list the dependency at v0.3.0", || {
        let lock = server.get(&["lock", "lock"]).unwrap_or(Value::Null);
        lock["packages"].as_array().into_iter().flatten().any(|p| p["source"] == base.as_str() && p["version"] == "v0.3.0")
    });

    // One that no version satisfies together with the others: the Lock says why, the
    // dependent reports the incompatible dependency, and the dependency stays where it is.
    server.apply(&dependent("needs-five", ">=v5.0.0"));
    let resolved = wait_condition(&server, "lock/lock", "Resolved", |c| c["status"] == "False");
    let message = resolved["message"].as_str().unwrap();
    let prefix = format!(
        "Error occurred during dependency resolution cannot find dependency version to upgrade: dependency ({base}) does not have a valid version to upgrade that satisfies all constraints. If there is a valid version that requires downgrade, manual intervention is required. Constraints: ["
    );
    assert!(message.starts_with(&prefix), "{message}");
    for constraint in [">=v0.2.0 <v1.0.0", ">=v0.3.0", ">=v5.0.0"] {
        assert!(message[prefix.len()..].contains(constraint), "{message}");
    }
    let healthy = wait_condition(&server, "configuration/needs-five", "Healthy", |c| c["status"] == "False");
    assert_eq!(
        healthy["message"],
        format!("Package revision health is \"False\" with message: cannot resolve package dependencies: incompatible dependencies: existing package {base}@v0.3.0 is incompatible with constraint >=v5.0.0").as_str()
    );
    assert_eq!(installed_version(&server), format!("{base}:v0.3.0"));
    assert!(server.get(&["xrd", "things.needs-five.example.org"]).is_none(), "nothing of it is installed");
}
