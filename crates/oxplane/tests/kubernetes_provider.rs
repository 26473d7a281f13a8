//! provider-kubernetes end to end: one `oxplane up` runs provider-kubernetes, a second one is
//! the target cluster, reached through a kubeconfig Secret. Objects create a namespace and a
//! ConfigMap there (the ConfigMap after its namespace's Object, through `dependsOn`), update
//! it, revert a change made directly on the target, import an existing object Observe-only,
//! follow the readiness policies, publish connection details read from a Secret on the
//! target, and delete what they created. `InjectedIdentity` targets the control plane itself,
//! and an unreachable target is `Synced=False` naming it.

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
    let target_server = Server::start();
    let control_server = Server::start_with(&["--provider", "provider-kubernetes"]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let control = Kube::new(rt.block_on(control_server.client()));
    let target = Kube::new(rt.block_on(target_server.client()));
    let kubeconfig = std::fs::read_to_string(target_server.kubeconfig()).unwrap();
    let c = Clusters { rt, control: control.clone(), _servers: (target_server, control_server) };

    let provider = Kind::new("pkg.crossplane.io", "v1", "Provider", "providers", false);
    c.wait("provider-kubernetes to be healthy", || c.get(&control, &provider, None, "provider-kubernetes").is_some_and(|p| conditions::is_true(&p, "Healthy")));
    c.create(&control, &secret_kind(), json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "target-kubeconfig", "namespace": "default"}, "stringData": {"kubeconfig": kubeconfig}}));
    let config_kind = Kind::new("kubernetes.crossplane.io", "v1alpha1", "ProviderConfig", "providerconfigs", false);
    c.create(&control, &config_kind, json!({
        "apiVersion": "kubernetes.crossplane.io/v1alpha1", "kind": "ProviderConfig", "metadata": {"name": "default"},
        "spec": {"credentials": {"source": "Secret", "secretRef": {"namespace": "default", "name": "target-kubeconfig", "key": "kubeconfig"}}}
    }));

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

    // InjectedIdentity: the control plane itself.
    c.create(&control, &config_kind, json!({"apiVersion": "kubernetes.crossplane.io/v1alpha1", "kind": "ProviderConfig", "metadata": {"name": "local"}, "spec": {"credentials": {"source": "InjectedIdentity"}}}));
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
