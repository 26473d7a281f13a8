//! ImageConfigs and pull secrets end to end, with real registries (Debian's `docker-registry`
//! on 127.0.0.1, one of them requiring basic authentication from an htpasswd file with a bcrypt
//! hash) and the real kubectl: a package pulled without credentials fails naming the registry
//! and the 401; `packagePullSecrets` or an ImageConfig's `registry.authentication.pullSecretRef`
//! (docker config JSON Secrets) let it install; an ImageConfig's `rewriteImage` pulls a package
//! from another registry, and the revision says which image it used; dependencies are resolved
//! through both.

use crate::configurations::{configuration, wait_condition};
use crate::support::{Server, condition};

use base64::Engine;
use oxplane_xpkg::registry::{Credentials, push};
use oxplane_xpkg::testing::Registry;

const USER: &str = "platform";
const PASSWORD: &str = "s3cret-pull";

fn push_as(reference: &str, stream: &str, credentials: &Credentials) {
    let image = oxplane_xpkg::build::image_of_stream(stream).unwrap();
    tokio::runtime::Runtime::new().unwrap().block_on(push(&image, reference, credentials)).unwrap();
}

fn package(name: &str, group: &str) -> String {
    format!(
        "apiVersion: meta.pkg.crossplane.io/v1\nkind: Configuration\nmetadata:\n  name: {name}\n---\napiVersion: apiextensions.crossplane.io/v2\nkind: CompositeResourceDefinition\nmetadata:\n  name: things.{group}\nspec:\n  group: {group}\n  names: {{kind: Thing, plural: things}}\n  scope: Namespaced\n  versions:\n  - name: v1\n    served: true\n    referenceable: true\n    schema:\n      openAPIV3Schema: {{type: object}}\n"
    )
}

/// A `kubernetes.io/dockerconfigjson` Secret in Crossplane's namespace for `registry`.
fn pull_secret(name: &str, registry: &str) -> String {
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}"));
    let config = serde_json::json!({"auths": {registry: {"auth": auth}}}).to_string();
    let data = base64::engine::general_purpose::STANDARD.encode(config);
    format!("apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\n  namespace: crossplane-system\ntype: kubernetes.io/dockerconfigjson\ndata:\n  .dockerconfigjson: {data}\n")
}

#[test]
fn pull_secrets_and_image_configs_authenticate_and_rewrite_pulls() {
    let hash = bcrypt::hash(PASSWORD, 4).unwrap();
    let private = Registry::start_private(Some(&format!("{USER}:{hash}\n")));
    let credentials = Credentials::Basic { username: USER.into(), password: PASSWORD.into() };
    let reference = format!("{}/private/platform:v0.1.0", private.host);
    push_as(&reference, &package("platform", "private.example.org"), &credentials);

    // Pull secrets live in crossplane-system, which the core creates as Crossplane's chart does.
    let server = Server::start();

    // Without credentials: the registry refuses, and the condition says which and why.
    server.apply(&configuration("private", &reference));
    let installed = wait_condition(&server, "configuration/private", "Installed", |c| c["reason"] == "UnpackingPackage");
    let message = installed["message"].as_str().unwrap();
    assert!(message.starts_with("cannot unpack package: ") && message.contains(&private.host), "{message}");
    assert!(message.contains("401 Unauthorized"), "{message}");
    assert!(server.get(&["xrd", "things.private.example.org"]).is_none());

    // With the package's own pull secret it installs.
    server.apply(&pull_secret("private-registry", &private.host));
    server.kubectl(&["patch", "configuration", "private", "--type=merge", "-p", "{\"spec\":{\"packagePullSecrets\":[{\"name\":\"private-registry\"}]}}"]);
    server.kubectl(&["wait", "--for=condition=Healthy", "configuration/private", "--timeout=60s"]);
    assert!(server.get(&["xrd", "things.private.example.org"]).is_some());

    // With an ImageConfig's pull secret, a package naming none installs too.
    let second = format!("{}/private/second:v0.1.0", private.host);
    push_as(&second, &package("second", "second.example.org"), &credentials);
    server.apply(&format!(
        "apiVersion: pkg.crossplane.io/v1beta1\nkind: ImageConfig\nmetadata:\n  name: private-registry\nspec:\n  matchImages:\n  - prefix: {}/private/\n  registry:\n    authentication:\n      pullSecretRef:\n        name: private-registry\n",
        private.host
    ));
    server.apply(&configuration("second", &second));
    server.kubectl(&["wait", "--for=condition=Healthy", "configuration/second", "--timeout=60s"]);
    let installed = server.get(&["configuration", "second"]).unwrap();
    assert_eq!(installed["status"]["appliedImageConfigRefs"], serde_json::json!([{"name": "private-registry", "reason": "SetImagePullSecret"}]));
    assert_eq!(installed["status"]["resolvedPackage"], second.as_str());

    // A rewritten reference: the package names a registry never asked, the mirror serves it.
    let mirror = Registry::shared();
    push_as(&format!("{}/mirror/team/rewritten:v0.2.0", mirror.host), &package("rewritten", "rewritten.example.org"), &Credentials::Anonymous);
    server.apply(&format!(
        "apiVersion: pkg.crossplane.io/v1beta1\nkind: ImageConfig\nmetadata:\n  name: mirror\nspec:\n  matchImages:\n  - type: Prefix\n    prefix: xpkg.example.org/\n  - prefix: xpkg.example.org/team/\n  rewriteImage:\n    prefix: {}/mirror/team/\n",
        mirror.host
    ));
    let original = "xpkg.example.org/team/rewritten:v0.2.0";
    server.apply(&configuration("rewritten", original));
    server.kubectl(&["wait", "--for=condition=Healthy", "configuration/rewritten", "--timeout=60s"]);
    let rewritten = format!("{}/mirror/team/rewritten:v0.2.0", mirror.host);
    let installed = server.get(&["configuration", "rewritten"]).unwrap();
    assert_eq!(installed["status"]["resolvedPackage"], rewritten.as_str());
    assert_eq!(installed["status"]["currentIdentifier"], original);
    assert_eq!(installed["status"]["appliedImageConfigRefs"], serde_json::json!([{"name": "mirror", "reason": "RewriteImage"}]));
    let revision = server.get(&["configurationrevision", installed["status"]["currentRevision"].as_str().unwrap()]).unwrap();
    assert_eq!(revision["spec"]["image"], original);
    assert_eq!(revision["status"]["resolvedPackage"], rewritten.as_str());
    assert_eq!(condition(&revision, "RevisionHealthy").unwrap()["status"], "True");
    assert!(server.get(&["xrd", "things.rewritten.example.org"]).is_some());

    // Dependencies are resolved through ImageConfigs too: tags listed at the mirror for a
    // rewritten source, and with the ImageConfig's pull secret at the private registry; the
    // packages created keep the original sources.
    push_as(&format!("{}/mirror/team/dep:v0.3.0", mirror.host), &package("dep", "dep.example.org"), &Credentials::Anonymous);
    push_as(&format!("{}/private/third:v0.1.0", private.host), &package("third", "third.example.org"), &credentials);
    let consumer = format!("{}/consumers/consumer:v0.1.0", mirror.host);
    let stream = package("consumer", "consumer.example.org").replacen(
        "metadata:\n  name: consumer\n",
        &format!("metadata:\n  name: consumer\nspec:\n  dependsOn:\n  - configuration: xpkg.example.org/team/dep\n    version: \">=v0.1.0\"\n  - configuration: {}/private/third\n    version: \">=v0.1.0\"\n", private.host),
        1,
    );
    push_as(&consumer, &stream, &Credentials::Anonymous);
    server.apply(&configuration("consumer", &consumer));
    server.kubectl(&["wait", "--for=condition=Healthy", "configuration/consumer", "--timeout=90s"]);
    assert_eq!(server.get(&["configuration", "team-dep"]).unwrap()["spec"]["package"], "xpkg.example.org/team/dep:v0.3.0");
    assert_eq!(server.get(&["configuration", "private-third"]).unwrap()["spec"]["package"], format!("{}/private/third:v0.1.0", private.host).as_str());
    server.kubectl(&["wait", "--for=condition=Healthy", "configuration/team-dep", "configuration/private-third", "--timeout=60s"]);
    assert!(server.get(&["xrd", "things.dep.example.org"]).is_some());
    assert!(server.get(&["xrd", "things.third.example.org"]).is_some());
}
