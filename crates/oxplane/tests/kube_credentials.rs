//! The kube crate's client with the credentials oxplane gives users: a ServiceAccount's bound
//! token (`kubectl create token`) and a client certificate from `oxplane kubeconfig` in two
//! groups (two O values, both read: the RoleBinding names the second). Each lists, creates and
//! watches ConfigMaps where RBAC lets it, and is refused (403, Kubernetes' words) a verb its
//! role does not grant.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use serde_json::{Value, json};

use crate::support::Server;

async fn client(kubeconfig: &Path) -> kube::Client {
    let config = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(config, &Default::default()).await.unwrap();
    kube::Client::try_from(config).unwrap()
}

fn config_map(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": "v"}})).unwrap()
}

/// The API error of a refused call.
fn refusal<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> kube::core::Status {
    match result {
        Err(kube::Error::Api(status)) => *status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Lists, creates and watches ConfigMaps in team-a as `username`; a RoleBinding there and any
/// ConfigMap in team-b are refused.
async fn exercise(client: kube::Client, username: &str, tag: &str) {
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "team-a");
    let listed = config_maps.list(&ListParams::default()).await.unwrap();
    let version = listed.metadata.resource_version.clone().unwrap();
    let mut events = config_maps.watch(&WatchParams::default().timeout(30), &version).await.unwrap().boxed();
    let name = format!("made-by-{tag}");
    let created = config_maps.create(&PostParams::default(), &config_map(&name)).await.unwrap();
    assert_eq!(created.metadata.name.as_deref(), Some(name.as_str()));
    let added = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(event) = events.next().await {
            if let WatchEvent::Added(object) = event.unwrap()
                && object.metadata.name.as_deref() == Some(name.as_str())
            {
                return object;
            }
        }
        panic!("the watch ended before the create was seen");
    })
    .await
    .unwrap_or_else(|_| panic!("{tag}: no ADDED event for {name}"));
    assert_eq!(added.data.unwrap()["k"], "v");
    assert!(config_maps.list(&ListParams::default()).await.unwrap().items.iter().any(|c| c.metadata.name.as_deref() == Some(name.as_str())));

    // `edit` grants no RBAC writes: a RoleBinding in team-a is refused.
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), "team-a");
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": format!("escalate-{tag}")},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": username}],
    }))
    .unwrap();
    let status = refusal(bindings.create(&PostParams::default(), &binding).await);
    assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"), "{status:?}");
    assert_eq!(
        status.message,
        format!(
            "rolebindings.rbac.authorization.k8s.io is forbidden: User \"{username}\" cannot create resource \"rolebindings\" in API group \"rbac.authorization.k8s.io\" in the namespace \"team-a\""
        )
    );
    // Nor anything in team-b, watches included.
    let elsewhere: Api<ConfigMap> = Api::namespaced(client, "team-b");
    let status = refusal(elsewhere.watch(&WatchParams::default(), "0").await.map(|_| ()));
    assert_eq!(status.code, 403, "{status:?}");
    assert!(status.message.contains(&format!("User \"{username}\" cannot watch resource \"configmaps\" in API group \"\" in the namespace \"team-b\"")), "{status:?}");
}

#[test]
fn kube_rs_with_a_service_account_token_and_a_client_certificate() {
    let server = Server::start();
    server.kubectl(&["create", "namespace", "team-a"]);
    server.kubectl(&["create", "namespace", "team-b"]);
    server.kubectl(&["create", "serviceaccount", "robot", "-n", "team-a"]);
    server.kubectl(&["create", "rolebinding", "edit", "--clusterrole=edit", "--serviceaccount=team-a:robot", "--group=ops", "-n", "team-a"]);

    // A bound token, in a kubeconfig of its own.
    let token = server.kubectl(&["create", "token", "robot", "-n", "team-a"]).trim().to_string();
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(server.kubeconfig()).unwrap()).unwrap();
    config["users"][0]["user"] = json!({"token": token});
    let token_config = server.dir().join("kubeconfig-robot");
    std::fs::write(&token_config, config.to_string()).unwrap();

    // A client certificate in two groups; only the second is bound to `edit`.
    let cert_config: PathBuf = server.dir().join("kubeconfig-dana");
    let out = Command::new(env!("CARGO_BIN_EXE_oxplane"))
        .args(["kubeconfig", "--user", "dana", "--group", "app-team", "--group", "ops", "--data-dir"])
        .arg(server.dir())
        .arg("--output")
        .arg(&cert_config)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let whoami = server.kubectl_command(&["auth", "whoami", "-o", "json"]).env("KUBECONFIG", &cert_config).output().unwrap();
    let whoami: Value = serde_json::from_slice(&whoami.stdout).unwrap();
    assert_eq!(whoami["status"]["userInfo"]["groups"], json!(["app-team", "ops", "system:authenticated"]), "{whoami}");

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        exercise(client(&token_config).await, "system:serviceaccount:team-a:robot", "robot").await;
        exercise(client(&cert_config).await, "dana", "dana").await;
    });
}
