//! provider-kubernetes end to end: one `oxplane up` runs provider-kubernetes, a second one is
//! the target cluster, reached through a kubeconfig Secret. Objects create a namespace and a
//! ConfigMap there (the ConfigMap after its namespace's Object, through `dependsOn`), update
//! it, revert a change made directly on the target, import an existing object Observe-only,
//! follow the readiness policies, publish connection details read from a Secret on the
//! target, and delete what they created. `InjectedIdentity` targets the control plane itself,
//! and an unreachable target is `Synced=False` naming it. With `--enable-watches` and
//! `spec.watch`, a change on the target is reverted at once though the poll is an hour away;
//! Objects read and write through v1alpha1 and v1alpha2 with kubectl; ObservedObjectCollections
//! import what a selector matches; each `deletionPropagationPolicy` reaches the target.

use crate::support;

use std::time::{Duration, Instant};

use oxplane_runtime::client::Kube;
use oxplane_runtime::conditions;
use oxplane_runtime::kinds::Kind;
use serde_json::{Value, json};
use support::Server;

fn object_kind() -> Kind {
    Kind::new("kubernetes.crossplane.io", "v1alpha2", "Object", "objects", false)
}

fn config_map_kind() -> Kind {
    Kind::new("", "v1", "ConfigMap", "configmaps", true)
}

fn secret_kind() -> Kind {
    Kind::new("", "v1", "Secret", "secrets", true)
}

fn namespace_kind() -> Kind {
    Kind::new("", "v1", "Namespace", "namespaces", false)
}

struct Clusters {
    rt: tokio::runtime::Runtime,
    control: Kube,
    _servers: (Server, Server),
}

impl Clusters {
    fn get(&self, kube: &Kube, kind: &Kind, namespace: Option<&str>, name: &str) -> Option<Value> {
        self.rt.block_on(kube.get(kind, namespace, name)).unwrap()
    }

    fn object(&self, name: &str) -> Option<Value> {
        self.get(&self.control, &object_kind(), None, name)
    }

    fn create(&self, kube: &Kube, kind: &Kind, object: Value) {
        self.rt.block_on(kube.create(kind, &object)).unwrap();
    }

    fn wait(&self, what: &str, check: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !check() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn wait_object(&self, name: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let object = self.object(name);
            if let Some(object) = &object
                && check(object)
            {
                return object.clone();
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}: {:#}", object.map(|o| o["status"].clone()).unwrap_or_default());
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn ready_and_synced(o: &Value) -> bool {
    conditions::is_true(o, "Ready") && conditions::is_true(o, "Synced")
}

/// An Object observed every second (the poll-interval annotation).
fn object(name: &str, manifest: Value) -> Value {
    json!({
        "apiVersion": "kubernetes.crossplane.io/v1alpha2", "kind": "Object",
        "metadata": {"name": name, "annotations": {"crossplane.io/poll-interval": "1s"}},
        "spec": {"forProvider": {"manifest": manifest}}
    })
}

#[test]
fn objects_are_applied_to_a_second_cluster_through_a_kubeconfig_secret() {
    let (c, target, kubeconfig) = clusters_with_args(&[]);
    let control = c.control.clone();
    let config_kind = Kind::new("kubernetes.crossplane.io", "v1alpha1", "ProviderConfig", "providerconfigs", false);

    // A namespace, and a ConfigMap in it that depends on the namespace's Object.
    c.create(&control, &object_kind(), object("team-ns", json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})));
    let mut cm = object("team-settings", json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "team-a", "labels": {"app": "web"}}, "data": {"color": "blue"}}));
    cm["spec"]["references"] = json!([{"dependsOn": {"name": "team-ns"}}]);
    c.create(&control, &object_kind(), cm);
    let ready = c.wait_object("team-settings", "the ConfigMap Object to be Ready", ready_and_synced);
    assert_eq!(ready["status"]["atProvider"]["manifest"]["data"]["color"], "blue");
    assert!(c.get(&target, &namespace_kind(), None, "team-a").is_some());
    let on_target = c.get(&target, &config_map_kind(), Some("team-a"), "team-settings").unwrap();
    assert_eq!(on_target["data"]["color"], "blue", "metadata.name defaults to the Object's name");
    let managers: Vec<&str> = on_target["metadata"]["managedFields"].as_array().unwrap().iter().filter_map(|m| m["manager"].as_str()).collect();
    assert!(managers.contains(&"provider-kubernetes"), "{managers:?}");

    // An update of the manifest reaches the target.
    let mut current = c.object("team-settings").unwrap();
    current["spec"]["forProvider"]["manifest"]["data"]["color"] = json!("green");
    c.rt.block_on(control.replace(&object_kind(), &current)).unwrap();
    c.wait("the update on the target", || c.get(&target, &config_map_kind(), Some("team-a"), "team-settings").is_some_and(|m| m["data"]["color"] == "green"));

    // A change made directly on the target is reverted.
    let mut direct = c.get(&target, &config_map_kind(), Some("team-a"), "team-settings").unwrap();
    direct["data"]["color"] = json!("red");
    c.rt.block_on(target.replace(&config_map_kind(), &direct)).unwrap();
    let started = Instant::now();
    c.wait("the change on the target to be reverted", || c.get(&target, &config_map_kind(), Some("team-a"), "team-settings").is_some_and(|m| m["data"]["color"] == "green"));
    eprintln!("drift reverted in {:?}", started.elapsed());

    // Observe-only import of an object made on the target.
    c.create(&target, &config_map_kind(), json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "legacy", "namespace": "team-a"}, "data": {"owner": "ops"}}));
    let mut import = object("legacy-import", json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "legacy", "namespace": "team-a"}}));
    import["spec"]["managementPolicies"] = json!(["Observe"]);
    c.create(&control, &object_kind(), import);
    let imported = c.wait_object("legacy-import", "the import to be Ready", ready_and_synced);
    assert_eq!(imported["status"]["atProvider"]["manifest"]["data"]["owner"], "ops");

    // Readiness policies.
    let mut cel = object("cel-ready", json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "team-a"}, "data": {"state": "starting"}}));
    cel["spec"]["readiness"] = json!({"policy": "DeriveFromCelQuery", "celQuery": "object.data.state == 'running'"});
    c.create(&control, &object_kind(), cel);
    // Right after the create Ready=False may still say Creating: wait for the query's verdict.
    c.wait_object("cel-ready", "Synced with Ready=False by the celQuery", |o| {
        conditions::is_true(o, "Synced") && conditions::get(o, "Ready").is_some_and(|r| r.status == "False" && r.message.contains("celQuery"))
    });
    let mut current = c.object("cel-ready").unwrap();
    current["spec"]["forProvider"]["manifest"]["data"]["state"] = json!("running");
    c.rt.block_on(control.replace(&object_kind(), &current)).unwrap();
    c.wait_object("cel-ready", "Ready once the query holds", ready_and_synced);
    for policy in ["DeriveFromObject", "AllTrue"] {
        let name = format!("policy-{}", policy.to_lowercase());
        let mut o = object(&name, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "team-a"}}));
        o["spec"]["readiness"] = json!({"policy": policy});
        c.create(&control, &object_kind(), o);
        // A ConfigMap has no conditions: never Ready by these policies.
        c.wait_object(&name, "Synced with Ready=False", |o| conditions::is_true(o, "Synced") && conditions::get(o, "Ready").is_some_and(|r| r.status == "False"));
    }

    // Connection details from a Secret on the target.
    let mut creds = object("db-creds", json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"namespace": "team-a"}, "stringData": {"password": "hunter2"}}));
    creds["spec"]["connectionDetails"] = json!([{"apiVersion": "v1", "kind": "Secret", "name": "db-creds", "namespace": "team-a", "fieldPath": "data.password", "toConnectionSecretKey": "password"}]);
    creds["spec"]["writeConnectionSecretToRef"] = json!({"name": "db-conn", "namespace": "default"});
    c.create(&control, &object_kind(), creds);
    c.wait_object("db-creds", "the Secret Object to be Ready", ready_and_synced);
    c.wait("the connection secret", || c.get(&control, &secret_kind(), Some("default"), "db-conn").is_some());
    let conn = c.get(&control, &secret_kind(), Some("default"), "db-conn").unwrap();
    assert_eq!(oxplane_runtime::managed::connection::decode_data(&conn)["password"], b"hunter2");

    // patchesFrom copies a field of an object in the control plane into the manifest; a
    // reference to an object that does not exist is Synced=False, naming it.
    c.create(&control, &config_map_kind(), json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app-settings", "namespace": "default"}, "data": {"region": "eu-west"}}));
    let mut patched = object("patched", json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "team-a"}, "data": {"fixed": "yes"}}));
    patched["spec"]["references"] = json!([{"patchesFrom": {"apiVersion": "v1", "kind": "ConfigMap", "name": "app-settings", "namespace": "default", "fieldPath": "data.region"}, "toFieldPath": "data.location"}]);
    c.create(&control, &object_kind(), patched);
    c.wait_object("patched", "the patched Object to be Ready", ready_and_synced);
    let on_target = c.get(&target, &config_map_kind(), Some("team-a"), "patched").unwrap();
    assert_eq!(on_target["data"], json!({"fixed": "yes", "location": "eu-west"}));
    let mut dangling = object("dangling", json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "team-a"}}));
    dangling["spec"]["references"] = json!([{"patchesFrom": {"apiVersion": "v1", "kind": "ConfigMap", "name": "no-such-settings", "namespace": "default", "fieldPath": "data.region"}}]);
    c.create(&control, &object_kind(), dangling);
    let failing = c.wait_object("dangling", "Synced=False", |o| conditions::get(o, "Synced").is_some_and(|s| s.status == "False"));
    let message = conditions::get(&failing, "Synced").unwrap().message;
    assert!(message.contains("cannot resolve references: ConfigMap no-such-settings not found"), "{message}");
    assert!(c.get(&target, &config_map_kind(), Some("team-a"), "dangling").is_none());

    // InjectedIdentity (the ProviderConfig `local`): the control plane itself.
    let mut local = object("local-cm", json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "default"}, "data": {"here": "yes"}}));
    local["spec"]["providerConfigRef"] = json!({"name": "local"});
    c.create(&control, &object_kind(), local);
    c.wait_object("local-cm", "the local Object to be Ready", ready_and_synced);
    assert_eq!(c.get(&control, &config_map_kind(), Some("default"), "local-cm").unwrap()["data"]["here"], "yes");
    assert!(c.get(&target, &config_map_kind(), Some("default"), "local-cm").is_none());

    // An unreachable target is Synced=False, naming it.
    let unreachable = kubeconfig.replace(&url_of(&kubeconfig), "https://127.0.0.1:9");
    c.create(&control, &secret_kind(), json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "gone-kubeconfig", "namespace": "default"}, "stringData": {"kubeconfig": unreachable}}));
    c.create(&control, &config_kind, json!({
        "apiVersion": "kubernetes.crossplane.io/v1alpha1", "kind": "ProviderConfig", "metadata": {"name": "gone"},
        "spec": {"credentials": {"source": "Secret", "secretRef": {"namespace": "default", "name": "gone-kubeconfig", "key": "kubeconfig"}}}
    }));
    let mut lost = object("lost", json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "default"}}));
    lost["spec"]["providerConfigRef"] = json!({"name": "gone"});
    c.create(&control, &object_kind(), lost);
    let failing = c.wait_object("lost", "Synced=False", |o| conditions::get(o, "Synced").is_some_and(|s| s.status == "False"));
    let message = conditions::get(&failing, "Synced").unwrap().message;
    assert!(message.contains("https://127.0.0.1:9"), "{message}");

    // A target user RBAC allows nothing: Synced=False with the target's 403, nothing applied.
    let limited_path = c._servers.0.dir().join("kubeconfig-limited");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_oxplane"))
        .args(["kubeconfig", "--user", "limited", "--data-dir"])
        .arg(c._servers.0.dir())
        .arg("--output")
        .arg(&limited_path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let limited = std::fs::read_to_string(&limited_path).unwrap();
    c.create(&control, &secret_kind(), json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "limited-kubeconfig", "namespace": "default"}, "stringData": {"kubeconfig": limited}}));
    c.create(&control, &config_kind, json!({
        "apiVersion": "kubernetes.crossplane.io/v1alpha1", "kind": "ProviderConfig", "metadata": {"name": "limited"},
        "spec": {"credentials": {"source": "Secret", "secretRef": {"namespace": "default", "name": "limited-kubeconfig", "key": "kubeconfig"}}}
    }));
    let mut refused = object("refused", json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "default"}}));
    refused["spec"]["providerConfigRef"] = json!({"name": "limited"});
    c.create(&control, &object_kind(), refused);
    let failing = c.wait_object("refused", "Synced=False", |o| conditions::get(o, "Synced").is_some_and(|s| s.status == "False"));
    let message = conditions::get(&failing, "Synced").unwrap().message;
    assert!(message.contains(r#"configmaps "refused" is forbidden: User "limited" cannot"#), "{message}");
    assert!(message.contains(&url_of(&limited)), "the message names the target: {message}");
    assert!(c.get(&target, &config_map_kind(), Some("default"), "refused").is_none());

    // A manifest pinned to a resourceVersion the target's object no longer has: the target's 409
    // Conflict, naming the target, and the object left as it was.
    c.create(&target, &config_map_kind(), json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "pinned", "namespace": "team-a"}, "data": {"v": "1"}}));
    let pinned = object("pinned", json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "team-a", "resourceVersion": "1"}, "data": {"v": "2"}}));
    c.create(&control, &object_kind(), pinned);
    let failing = c.wait_object("pinned", "Synced=False", |o| conditions::get(o, "Synced").is_some_and(|s| s.status == "False"));
    let message = conditions::get(&failing, "Synced").unwrap().message;
    assert!(message.contains("the object has been modified") && message.contains(&url_of(&kubeconfig)), "{message}");
    assert_eq!(c.get(&target, &config_map_kind(), Some("team-a"), "pinned").unwrap()["data"]["v"], "1");

    // Deleting an Object deletes its object on the target.
    c.rt.block_on(control.delete(&object_kind(), None, "team-settings", &Default::default())).unwrap();
    c.wait("the ConfigMap to be deleted on the target", || c.get(&target, &config_map_kind(), Some("team-a"), "team-settings").is_none());
    c.wait("the Object to be gone", || c.object("team-settings").is_none());
    // The imported object is left alone when its Observe-only Object goes.
    c.rt.block_on(control.delete(&object_kind(), None, "legacy-import", &Default::default())).unwrap();
    c.wait("the import Object to be gone", || c.object("legacy-import").is_none());
    assert!(c.get(&target, &config_map_kind(), Some("team-a"), "legacy").is_some());
}

/// The server URL of a kubeconfig (JSON, as oxplane writes it).
fn url_of(kubeconfig: &str) -> String {
    let parsed: Value = serde_json::from_str(kubeconfig).unwrap();
    parsed["clusters"][0]["cluster"]["server"].as_str().unwrap().to_string()
}

/// The `managed/object.kubernetes.crossplane.io` controller's live subscriptions to ConfigMaps
/// in the control plane's watch registry (`oxplane_watches` on `/metrics`).
fn object_configmap_subscriptions(server: &Server) -> u64 {
    let (code, _, body) = server.curl("GET", "/metrics", None);
    assert_eq!(code, 200, "{body}");
    body.lines()
        .filter(|l| l.starts_with("oxplane_watches{") && l.contains("controller=\"managed/object.kubernetes.crossplane.io\"") && l.contains("Kind=ConfigMap"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// The environment variable of the control plane's process holding the target's kubeconfig.
const TARGET_KUBECONFIG_VARIABLE: &str = "OXPLANE_TEST_TARGET_KUBECONFIG";

/// A target cluster and a control plane running provider-kubernetes with `args` in its
/// DeploymentRuntimeConfig (as upstream's flags reach its process), with the ProviderConfig
/// `default` (the target, through a kubeconfig Secret) and `local` (InjectedIdentity).
fn clusters_with_args(args: &[&str]) -> (Clusters, Kube, String) {
    let target_server = Server::start();
    let kubeconfig = std::fs::read_to_string(target_server.kubeconfig()).unwrap();
    let mut control_server = Server::new(&[]);
    control_server.env_once(TARGET_KUBECONFIG_VARIABLE, &kubeconfig);
    control_server.spawn();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let control = Kube::new(rt.block_on(control_server.client()));
    let target = Kube::new(rt.block_on(target_server.client()));
    let c = Clusters { rt, control: control.clone(), _servers: (target_server, control_server) };
    let runtime_config = Kind::new("pkg.crossplane.io", "v1beta1", "DeploymentRuntimeConfig", "deploymentruntimeconfigs", false);
    c.create(&control, &runtime_config, json!({
        "apiVersion": "pkg.crossplane.io/v1beta1", "kind": "DeploymentRuntimeConfig", "metadata": {"name": "provider-flags"},
        "spec": {"deploymentTemplate": {"spec": {"selector": {}, "template": {"spec": {"containers": [{"name": "package-runtime", "args": args}]}}}}}
    }));
    let provider = Kind::new("pkg.crossplane.io", "v1", "Provider", "providers", false);
    c.create(&control, &provider, json!({
        "apiVersion": "pkg.crossplane.io/v1", "kind": "Provider", "metadata": {"name": "provider-kubernetes"},
        "spec": {"package": "xpkg.crossplane.io/crossplane-contrib/provider-kubernetes:v0.18.0", "runtimeConfigRef": {"name": "provider-flags"}}
    }));
    c.wait("provider-kubernetes to be healthy", || c.get(&control, &provider, None, "provider-kubernetes").is_some_and(|p| conditions::is_true(&p, "Healthy")));
    c.create(&control, &secret_kind(), json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "target-kubeconfig", "namespace": "default"}, "stringData": {"kubeconfig": kubeconfig}}));
    let config_kind = Kind::new("kubernetes.crossplane.io", "v1alpha1", "ProviderConfig", "providerconfigs", false);
    c.create(&control, &config_kind, json!({
        "apiVersion": "kubernetes.crossplane.io/v1alpha1", "kind": "ProviderConfig", "metadata": {"name": "default"},
        "spec": {"credentials": {"source": "Secret", "secretRef": {"namespace": "default", "name": "target-kubeconfig", "key": "kubeconfig"}}}
    }));
    c.create(&control, &config_kind, json!({"apiVersion": "kubernetes.crossplane.io/v1alpha1", "kind": "ProviderConfig", "metadata": {"name": "local"}, "spec": {"credentials": {"source": "InjectedIdentity"}}}));
    (c, target, kubeconfig)
}

#[test]
fn with_watch_a_change_on_the_target_is_reverted_at_once_not_at_the_poll() {
    // As upstream: watches are an alpha feature the provider runs with only when its
    // DeploymentRuntimeConfig passes --enable-watches to the package runtime.
    let (c, target, _) = clusters_with_args(&["--enable-watches"]);
    let control = c.control.clone();

    // Observed once an hour: only the watch can explain a revert within the test.
    let hourly = |name: &str, watch: bool, manifest: Value| {
        let mut o = object(name, manifest);
        o["metadata"]["annotations"]["crossplane.io/poll-interval"] = json!("1h");
        o["spec"]["watch"] = json!(watch);
        o
    };
    let manifest = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "default"}, "data": {"color": "blue"}});
    c.create(&control, &object_kind(), hourly("watched", true, manifest.clone()));
    c.create(&control, &object_kind(), hourly("polled", false, manifest.clone()));
    for name in ["watched", "polled"] {
        c.wait_object(name, "the Object to be Ready", ready_and_synced);
    }
    let paint = |name: &str, color: &str| {
        let mut direct = c.get(&target, &config_map_kind(), Some("default"), name).unwrap();
        direct["data"]["color"] = json!(color);
        c.rt.block_on(target.replace(&config_map_kind(), &direct)).unwrap();
    };
    paint("polled", "red");
    paint("watched", "red");
    let started = Instant::now();
    c.wait("the watched object to be reverted", || c.get(&target, &config_map_kind(), Some("default"), "watched").is_some_and(|m| m["data"]["color"] == "blue"));
    eprintln!("drift on the target reverted through the watch in {:?}", started.elapsed());
    // The Object without spec.watch waits for its poll, an hour away.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(c.get(&target, &config_map_kind(), Some("default"), "polled").unwrap()["data"]["color"], "red");
    // A second change is seen as well (the subscription lives on).
    paint("watched", "green");
    c.wait("the second change to be reverted", || c.get(&target, &config_map_kind(), Some("default"), "watched").is_some_and(|m| m["data"]["color"] == "blue"));

    // InjectedIdentity: the control plane's object, watched through the control plane's own
    // counted watches; the subscription goes when the Object does.
    let before = object_configmap_subscriptions(&c._servers.1);
    let mut local = hourly("local-watched", true, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "default"}, "data": {"color": "blue"}}));
    local["spec"]["providerConfigRef"] = json!({"name": "local"});
    c.create(&control, &object_kind(), local);
    c.wait_object("local-watched", "the local Object to be Ready", ready_and_synced);
    assert_eq!(object_configmap_subscriptions(&c._servers.1), before + 1);
    let mut direct = c.get(&control, &config_map_kind(), Some("default"), "local-watched").unwrap();
    direct["data"]["color"] = json!("red");
    c.rt.block_on(control.replace(&config_map_kind(), &direct)).unwrap();
    c.wait("the local change to be reverted", || c.get(&control, &config_map_kind(), Some("default"), "local-watched").is_some_and(|m| m["data"]["color"] == "blue"));
    c.rt.block_on(control.delete(&object_kind(), None, "local-watched", &Default::default())).unwrap();
    c.wait("the local Object to be gone", || c.object("local-watched").is_none());
    c.wait("its subscription to be dropped", || object_configmap_subscriptions(&c._servers.1) == before);

    // Without --enable-watches (the DeploymentRuntimeConfig changed: the provider restarts with
    // its new arguments), spec.watch is not honoured: nothing is subscribed, and a change waits
    // for the poll.
    let mut local = hourly("local-unwatched", true, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "default"}, "data": {"color": "blue"}}));
    local["spec"]["providerConfigRef"] = json!({"name": "local"});
    c.create(&control, &object_kind(), local);
    c.wait_object("local-unwatched", "the local Object to be Ready", ready_and_synced);
    assert_eq!(object_configmap_subscriptions(&c._servers.1), before + 1);
    let runtime_config = Kind::new("pkg.crossplane.io", "v1beta1", "DeploymentRuntimeConfig", "deploymentruntimeconfigs", false);
    let patch = json!({"spec": {"deploymentTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "package-runtime", "args": ["--debug"]}]}}}}}});
    c.rt.block_on(control.merge_patch(&runtime_config, None, "provider-flags", &patch)).unwrap();
    c.wait("the restarted provider to watch nothing", || object_configmap_subscriptions(&c._servers.1) == before);
    // The restarted controllers observe every Object once as they start: let that pass first.
    std::thread::sleep(Duration::from_secs(2));
    let mut direct = c.get(&control, &config_map_kind(), Some("default"), "local-unwatched").unwrap();
    direct["data"]["color"] = json!("red");
    c.rt.block_on(control.replace(&config_map_kind(), &direct)).unwrap();
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(c.get(&control, &config_map_kind(), Some("default"), "local-unwatched").unwrap()["data"]["color"], "red");
    assert_eq!(object_configmap_subscriptions(&c._servers.1), before);
}

#[test]
fn objects_convert_between_v1alpha1_and_v1alpha2_through_kubectl() {
    let server = Server::start_with(&["--provider", "provider-kubernetes"]);
    let wait = |what: &str, check: &dyn Fn() -> bool| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !check() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    wait("provider-kubernetes to be healthy", &|| {
        server.get(&["provider.pkg.crossplane.io", "provider-kubernetes"]).is_some_and(|p| conditions::is_true(&p, "Healthy"))
    });
    server.apply(
        "apiVersion: kubernetes.crossplane.io/v1alpha1\nkind: ProviderConfig\nmetadata:\n  name: default\nspec:\n  credentials:\n    source: InjectedIdentity\n---\n\
         apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: existing\n  namespace: default\ndata:\n  owner: ops\n",
    );
    let v1 = |name: &str| server.get(&["objects.v1alpha1.kubernetes.crossplane.io", name]);
    let v2 = |name: &str| server.get(&["objects.v1alpha2.kubernetes.crossplane.io", name]);

    // Written as v1alpha1 (managementPolicy), read as v1alpha2 (managementPolicies).
    server.apply(
        "apiVersion: kubernetes.crossplane.io/v1alpha1\nkind: Object\nmetadata:\n  name: imported\nspec:\n  managementPolicy: Observe\n  forProvider:\n    manifest:\n      apiVersion: v1\n      kind: ConfigMap\n      metadata:\n        name: existing\n        namespace: default\n",
    );
    let newer = v2("imported").unwrap();
    assert_eq!(newer["apiVersion"], "kubernetes.crossplane.io/v1alpha2");
    assert_eq!(newer["spec"]["managementPolicies"], json!(["Observe"]));
    assert!(newer["spec"].get("managementPolicy").is_none(), "{newer:#}");
    // The controller works on it as any v1alpha2 Object: Observe-only, it imports.
    wait("the import to be Ready", &|| v2("imported").is_some_and(|o| ready_and_synced(&o)));
    assert_eq!(v2("imported").unwrap()["status"]["atProvider"]["manifest"]["data"]["owner"], "ops");
    let older = v1("imported").unwrap();
    assert_eq!(older["spec"]["managementPolicy"], "Observe");
    assert!(older["spec"].get("managementPolicies").is_none(), "{older:#}");
    assert!(ready_and_synced(&older), "status is the same in both versions");

    // Written as v1alpha2 with fields v1alpha1 lacks: shown without them as v1alpha1, and an
    // update made through v1alpha1 keeps them.
    server.apply(
        "apiVersion: kubernetes.crossplane.io/v1alpha2\nkind: Object\nmetadata:\n  name: made\nspec:\n  managementPolicies: [Observe, Create, Update]\n  forProvider:\n    deletionPropagationPolicy: Foreground\n    manifest:\n      apiVersion: v1\n      kind: ConfigMap\n      metadata:\n        namespace: default\n      data:\n        color: blue\n  readiness:\n    policy: DeriveFromCelQuery\n    celQuery: \"object.data.color == 'blue'\"\n",
    );
    wait("the made Object to be Ready", &|| v2("made").is_some_and(|o| ready_and_synced(&o)));
    let mut older = v1("made").unwrap();
    assert_eq!(older["apiVersion"], "kubernetes.crossplane.io/v1alpha1");
    assert_eq!(older["spec"]["managementPolicy"], "ObserveCreateUpdate");
    assert!(older["spec"]["forProvider"].get("deletionPropagationPolicy").is_none(), "{older:#}");
    older["spec"]["forProvider"]["manifest"]["data"]["color"] = json!("green");
    older["spec"]["readiness"] = json!({"policy": "SuccessfulCreate"});
    older["metadata"].as_object_mut().unwrap().remove("managedFields");
    server.kubectl_stdin(&["replace", "-f", "-"], &older.to_string());
    let newer = v2("made").unwrap();
    assert_eq!(newer["spec"]["forProvider"]["deletionPropagationPolicy"], "Foreground");
    assert_eq!(newer["spec"]["managementPolicies"], json!(["Observe", "Create", "Update"]));
    assert_eq!(newer["spec"]["forProvider"]["manifest"]["data"]["color"], "green");
    assert_eq!(newer["spec"]["readiness"], json!({"policy": "SuccessfulCreate", "celQuery": "object.data.color == 'blue'"}));
    assert!(newer["metadata"]["annotations"].get("kubernetes.crossplane.io/v1alpha2-fields").is_none(), "{newer:#}");
    wait("the change to reach the ConfigMap", &|| server.get(&["configmap", "made", "-n", "default"]).is_some_and(|m| m["data"]["color"] == "green"));

    // kubectl lists both versions; the CRD converts through a webhook.
    let crd = server.get(&["crd", "objects.kubernetes.crossplane.io"]).unwrap();
    assert_eq!(crd["spec"]["conversion"]["strategy"], "Webhook");
    let listed = server.kubectl(&["get", "objects.v1alpha1.kubernetes.crossplane.io"]);
    assert!(listed.contains("imported") && listed.contains("made"), "{listed}");
    // Upstream's printer columns, the wide ones with -o wide.
    let header = |args: &[&str]| server.kubectl(args).lines().next().unwrap().split_whitespace().map(str::to_string).collect::<Vec<_>>();
    assert_eq!(header(&["get", "objects.kubernetes.crossplane.io"]), ["NAME", "KIND", "PROVIDERCONFIG", "SYNCED", "READY", "AGE"]);
    assert_eq!(
        header(&["get", "objects.kubernetes.crossplane.io", "-o", "wide"]),
        ["NAME", "KIND", "APIVERSION", "METANAME", "METANAMESPACE", "PROVIDERCONFIG", "SYNCED", "READY", "AGE"]
    );
}

fn collection_kind(group: &str) -> Kind {
    Kind::new(group, "v1alpha1", "ObservedObjectCollection", "observedobjectcollections", group.contains(".m."))
}

#[test]
fn observed_object_collections_import_what_a_selector_matches_on_the_target() {
    // Listed again every second (`--poll`, as upstream's flag).
    let (c, target, _) = clusters_with_args(&["--poll=1s"]);
    let control = c.control.clone();
    // A collection deletes the Objects of objects that stop matching: the provider's own
    // ClusterRole (as Crossplane's RBAC manager makes it) does not let it delete, so it is
    // granted, as a Crossplane user grants a provider more, to the provider's ServiceAccounts.
    let role = Kind::new("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", false);
    let binding = Kind::new("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", false);
    c.create(&control, &role, json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "provider-kubernetes-collections"},
        "rules": [{"apiGroups": ["kubernetes.crossplane.io", "kubernetes.m.crossplane.io"], "resources": ["objects"], "verbs": ["delete"]}]
    }));
    c.create(&control, &binding, json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "provider-kubernetes-collections"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "provider-kubernetes-collections"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:serviceaccounts:crossplane-system"}]
    }));
    let target_cm = |name: &str, app: &str| {
        c.create(&target, &config_map_kind(), json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default", "labels": {"app": app}}, "data": {"name": name}}));
    };
    target_cm("web-a", "web");
    target_cm("web-b", "web");
    target_cm("db", "db");
    let cluster = collection_kind("kubernetes.crossplane.io");
    c.create(&control, &cluster, json!({
        "apiVersion": "kubernetes.crossplane.io/v1alpha1", "kind": "ObservedObjectCollection", "metadata": {"name": "web"},
        "spec": {
            "observeObjects": {"apiVersion": "v1", "kind": "ConfigMap", "namespace": "default", "selector": {"matchLabels": {"app": "web"}}},
            "objectTemplate": {"metadata": {"labels": {"team": "frontend"}, "annotations": {"imported-by": "collection"}}}
        }
    }));
    let members = || -> Vec<Value> { c.rt.block_on(control.list(&object_kind(), None, Some("kubernetes.crossplane.io/owned-by-collection=web"))).unwrap() };
    let names_on_target = |members: &[Value]| -> Vec<String> {
        let mut names: Vec<String> = members.iter().map(|m| m["spec"]["forProvider"]["manifest"]["metadata"]["name"].as_str().unwrap().to_string()).collect();
        names.sort();
        names
    };
    c.wait("two members", || names_on_target(&members()) == ["web-a", "web-b"]);
    let collection = c.get(&control, &cluster, None, "web").unwrap();
    c.wait("the collection to be Ready", || c.get(&control, &cluster, None, "web").is_some_and(|o| ready_and_synced(&o)));
    assert_eq!(c.get(&control, &cluster, None, "web").unwrap()["status"]["membershipLabel"], json!({"kubernetes.crossplane.io/owned-by-collection": "web"}));
    for member in members() {
        let name = member["metadata"]["name"].as_str().unwrap().to_string();
        assert!(name.starts_with("web-") && name.len() == "web-".len() + 7, "{name}");
        assert_eq!(member["spec"]["managementPolicies"], json!(["Observe"]));
        assert_eq!(member["metadata"]["labels"]["team"], "frontend");
        assert_eq!(member["metadata"]["annotations"]["imported-by"], "collection");
        assert_eq!(member["metadata"]["ownerReferences"][0]["uid"], collection["metadata"]["uid"]);
        // Each member imports its object: Ready, with the object as observed.
        let imported = c.wait_object(&name, "the member to be Ready", ready_and_synced);
        let on_target = imported["spec"]["forProvider"]["manifest"]["metadata"]["name"].clone();
        assert_eq!(imported["status"]["atProvider"]["manifest"]["data"]["name"], on_target);
    }

    // An object that stops matching leaves the collection (its Object goes, the object stays);
    // one that starts matching joins it.
    let mut relabelled = c.get(&target, &config_map_kind(), Some("default"), "web-b").unwrap();
    relabelled["metadata"]["labels"]["app"] = json!("api");
    c.rt.block_on(target.replace(&config_map_kind(), &relabelled)).unwrap();
    target_cm("web-c", "web");
    c.wait("the members to follow the target", || names_on_target(&members()) == ["web-a", "web-c"]);
    assert!(c.get(&target, &config_map_kind(), Some("default"), "web-b").is_some(), "Observe-only: the object is left alone");

    // The namespaced form makes namespaced Objects in its namespace.
    c.create(&control, &namespace_kind(), json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}));
    let cluster_config = Kind::new("kubernetes.m.crossplane.io", "v1alpha1", "ClusterProviderConfig", "clusterproviderconfigs", false);
    c.create(&control, &cluster_config, json!({
        "apiVersion": "kubernetes.m.crossplane.io/v1alpha1", "kind": "ClusterProviderConfig", "metadata": {"name": "default"},
        "spec": {"credentials": {"source": "Secret", "secretRef": {"namespace": "default", "name": "target-kubeconfig", "key": "kubeconfig"}}}
    }));
    let namespaced = collection_kind("kubernetes.m.crossplane.io");
    c.create(&control, &namespaced, json!({
        "apiVersion": "kubernetes.m.crossplane.io/v1alpha1", "kind": "ObservedObjectCollection", "metadata": {"name": "dbs", "namespace": "team"},
        "spec": {"observeObjects": {"apiVersion": "v1", "kind": "ConfigMap", "selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["db"]}]}}}
    }));
    let namespaced_object = Kind::new("kubernetes.m.crossplane.io", "v1alpha1", "Object", "objects", true);
    c.wait("the namespaced member to be Ready", || {
        let found = c.rt.block_on(control.list(&namespaced_object, Some("team"), Some("kubernetes.crossplane.io/owned-by-collection=dbs"))).unwrap();
        found.len() == 1 && ready_and_synced(&found[0]) && found[0]["status"]["atProvider"]["manifest"]["data"]["name"] == "db"
    });

    // A selector Kubernetes cannot read is Synced=False, naming it.
    c.create(&control, &cluster, json!({
        "apiVersion": "kubernetes.crossplane.io/v1alpha1", "kind": "ObservedObjectCollection", "metadata": {"name": "broken"},
        "spec": {"observeObjects": {"apiVersion": "v1", "kind": "ConfigMap", "selector": {"matchExpressions": [{"key": "app", "operator": "In"}]}}}
    }));
    c.wait("the broken collection to be Synced=False", || {
        c.get(&control, &cluster, None, "broken").and_then(|o| conditions::get(&o, "Synced")).is_some_and(|s| s.status == "False" && s.message.contains("error creating selector"))
    });

    // Deleting the collection deletes its Objects, not the objects they observe.
    c.rt.block_on(control.delete(&cluster, None, "web", &Default::default())).unwrap();
    c.wait("the members to be gone", || members().is_empty());
    assert!(c.get(&target, &config_map_kind(), Some("default"), "web-a").is_some());
}

#[test]
fn deletion_propagation_policies_reach_the_target_as_kubernetes_defines_them() {
    let (c, target, _) = clusters_with_args(&[]);
    let control = c.control.clone();

    // The kubeconfig may also come from a file (`source: Filesystem`) or an environment
    // variable of the provider's process (`source: Environment`).
    let config_kind = Kind::new("kubernetes.crossplane.io", "v1alpha1", "ProviderConfig", "providerconfigs", false);
    let path = c._servers.0.kubeconfig();
    c.create(&control, &config_kind, json!({"apiVersion": "kubernetes.crossplane.io/v1alpha1", "kind": "ProviderConfig", "metadata": {"name": "from-file"},
        "spec": {"credentials": {"source": "Filesystem", "fs": {"path": path.to_str().unwrap()}}}}));
    let mut from_file = object("from-file", json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "default"}, "data": {"via": "file"}}));
    from_file["spec"]["providerConfigRef"] = json!({"name": "from-file"});
    c.create(&control, &object_kind(), from_file);
    c.wait_object("from-file", "the Object to be Ready", ready_and_synced);
    assert_eq!(c.get(&target, &config_map_kind(), Some("default"), "from-file").unwrap()["data"]["via"], "file");
    c.create(&control, &config_kind, json!({"apiVersion": "kubernetes.crossplane.io/v1alpha1", "kind": "ProviderConfig", "metadata": {"name": "from-env"},
        "spec": {"credentials": {"source": "Environment", "env": {"name": "OXPLANE_TEST_NO_SUCH_KUBECONFIG"}}}}));
    let mut from_env = object("from-env", json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "default"}}));
    from_env["spec"]["providerConfigRef"] = json!({"name": "from-env"});
    c.create(&control, &object_kind(), from_env);
    let failing = c.wait_object("from-env", "Synced=False", |o| conditions::get(o, "Synced").is_some_and(|s| s.status == "False"));
    let message = conditions::get(&failing, "Synced").unwrap().message;
    assert!(message.contains("environment variable \"OXPLANE_TEST_NO_SUCH_KUBECONFIG\""), "{message}");
    // A variable that is set: the kubeconfig in it reaches the target.
    c.create(&control, &config_kind, json!({"apiVersion": "kubernetes.crossplane.io/v1alpha1", "kind": "ProviderConfig", "metadata": {"name": "from-set-env"},
        "spec": {"credentials": {"source": "Environment", "env": {"name": TARGET_KUBECONFIG_VARIABLE}}}}));
    let mut from_set_env = object("from-set-env", json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "default"}, "data": {"via": "environment"}}));
    from_set_env["spec"]["providerConfigRef"] = json!({"name": "from-set-env"});
    c.create(&control, &object_kind(), from_set_env);
    c.wait_object("from-set-env", "the Object to be Ready", ready_and_synced);
    assert_eq!(c.get(&target, &config_map_kind(), Some("default"), "from-set-env").unwrap()["data"]["via"], "environment");
    assert!(c.get(&control, &config_map_kind(), Some("default"), "from-set-env").is_none(), "made on the target, not the control plane");

    // Each Object manages a parent ConfigMap on the target; a child there is owned by it and
    // held by a finalizer, so what happens to each shows which policy the delete used.
    let setup = |policy: &str| -> (String, String) {
        let (parent, child) = (format!("parent-{}", policy.to_lowercase()), format!("child-{}", policy.to_lowercase()));
        let mut o = object(&parent, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "default"}, "data": {"role": "parent"}}));
        o["spec"]["forProvider"]["deletionPropagationPolicy"] = json!(policy);
        c.create(&control, &object_kind(), o);
        c.wait_object(&parent, "the Object to be Ready", ready_and_synced);
        let uid = c.get(&target, &config_map_kind(), Some("default"), &parent).unwrap()["metadata"]["uid"].clone();
        c.create(&target, &config_map_kind(), json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": child, "namespace": "default", "finalizers": ["example.com/hold"],
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": parent, "uid": uid, "blockOwnerDeletion": true}]
        }}));
        c.rt.block_on(control.delete(&object_kind(), None, &parent, &Default::default())).unwrap();
        (parent, child)
    };
    let release = |child: &str| {
        c.rt.block_on(target.merge_patch(&config_map_kind(), Some("default"), child, &json!({"metadata": {"finalizers": null}}))).unwrap();
    };
    let on_target = |name: &str| c.get(&target, &config_map_kind(), Some("default"), name);

    // Orphan: the parent goes, the child stays, no longer owned.
    let (parent, child) = setup("Orphan");
    c.wait("the orphaning delete", || on_target(&parent).is_none() && c.object(&parent).is_none());
    c.wait("the child to be orphaned", || on_target(&child).is_some_and(|o| o["metadata"]["ownerReferences"].as_array().is_none_or(Vec::is_empty)));
    assert!(on_target(&child).unwrap()["metadata"].get("deletionTimestamp").is_none(), "an orphan is not deleted");
    release(&child);

    // Background: the parent goes at once; the garbage collector deletes the child after.
    let (parent, child) = setup("Background");
    c.wait("the parent to go", || on_target(&parent).is_none() && c.object(&parent).is_none());
    c.wait("the child to be deleted", || on_target(&child).is_some_and(|o| o["metadata"].get("deletionTimestamp").is_some()));
    release(&child);
    c.wait("the child to be gone", || on_target(&child).is_none());

    // Foreground: the parent stays (deleting, with foregroundDeletion) until its blocking
    // child is gone, and the Object waits for it.
    let (parent, child) = setup("Foreground");
    c.wait("the child to be deleted", || on_target(&child).is_some_and(|o| o["metadata"].get("deletionTimestamp").is_some()));
    let held = on_target(&parent).expect("the parent waits for its child");
    assert!(held["metadata"]["finalizers"].as_array().unwrap().iter().any(|f| f == "foregroundDeletion"), "{held:#}");
    assert!(c.object(&parent).is_some(), "the Object waits for the object on the target");
    release(&child);
    c.wait("the parent and the Object to go", || on_target(&child).is_none() && on_target(&parent).is_none() && c.object(&parent).is_none());
}

/// The conversion webhook listens on a new port at each start: a restarted server points the
/// Object CRD at it before it serves, so reads through v1alpha1 work at once.
#[test]
fn objects_read_through_v1alpha1_at_once_after_a_restart() {
    let mut server = Server::start_with(&["--provider", "provider-kubernetes"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !server.get(&["provider.pkg.crossplane.io", "provider-kubernetes"]).is_some_and(|p| conditions::is_true(&p, "Healthy")) {
        assert!(Instant::now() < deadline, "timed out waiting for provider-kubernetes to be healthy");
        std::thread::sleep(Duration::from_millis(100));
    }
    server.apply(
        "apiVersion: kubernetes.crossplane.io/v1alpha2\nkind: Object\nmetadata:\n  name: kept\nspec:\n  managementPolicies: [Observe]\n  forProvider:\n    manifest:\n      apiVersion: v1\n      kind: ConfigMap\n      metadata:\n        name: absent\n        namespace: default\n",
    );
    let url = |server: &Server| server.get(&["crd", "objects.kubernetes.crossplane.io"]).unwrap()["spec"]["conversion"]["webhook"]["clientConfig"]["url"].clone();
    let read_v1alpha1 = |server: &Server| {
        let read = server.kubectl_try(&["get", "objects.v1alpha1.kubernetes.crossplane.io", "kept", "-o", "json"], "");
        let read: Value = serde_json::from_str(&read.unwrap_or_else(|e| panic!("reading through v1alpha1 after the restart: {e}"))).unwrap();
        assert_eq!(read["apiVersion"], "kubernetes.crossplane.io/v1alpha1");
        assert_eq!(read["spec"]["managementPolicy"], "Observe");
    };
    let before = url(&server);
    server.restart();
    read_v1alpha1(&server);
    assert_ne!(url(&server), before, "the webhook moved to a new port");
    // Serving the API only, nothing installs provider-kubernetes's CRDs again: the server
    // itself points the CRD at its webhook.
    server.set_args(&["--controllers", "false"]);
    server.restart();
    read_v1alpha1(&server);
}
