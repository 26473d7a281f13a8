//! kube-rs against the server: typed and dynamic APIs, optimistic concurrency, and a watcher.

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::watcher::{self, Event, watcher};
use support::TestServer;

fn config_map(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.metadata.labels = Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
    cm.data = Some(BTreeMap::from([("key".to_string(), "value".to_string())]));
    cm
}

#[tokio::test]
async fn typed_crud_with_conflicts() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");

    let created = cms.create(&PostParams::default(), &config_map("one", &[("app", "a")])).await.unwrap();
    let rv = created.metadata.resource_version.clone().unwrap();
    assert!(created.metadata.uid.is_some());
    assert_eq!(cms.get("one").await.unwrap().data, created.data);

    // A replace at the current resourceVersion succeeds; a stale one is a 409 Conflict.
    let mut changed = created.clone();
    changed.data = Some(BTreeMap::from([("key".to_string(), "new".to_string())]));
    let replaced = cms.replace("one", &PostParams::default(), &changed).await.unwrap();
    assert_ne!(replaced.metadata.resource_version.as_deref(), Some(rv.as_str()));
    let stale = cms.replace("one", &PostParams::default(), &changed).await.unwrap_err();
    match stale {
        kube::Error::Api(status) => assert_eq!((status.code, status.reason.as_str()), (409, "Conflict")),
        other => panic!("{other}"),
    }

    // Creating it again is AlreadyExists; creating in a missing namespace is NotFound.
    let again = cms.create(&PostParams::default(), &config_map("one", &[])).await.unwrap_err();
    assert!(matches!(again, kube::Error::Api(ref s) if s.reason == "AlreadyExists"), "{again}");
    let elsewhere: Api<ConfigMap> = Api::namespaced(client.clone(), "nowhere");
    let missing = elsewhere.create(&PostParams::default(), &config_map("x", &[])).await.unwrap_err();
    assert!(matches!(missing, kube::Error::Api(ref s) if s.code == 404 && s.message.contains("namespaces \"nowhere\" not found")), "{missing}");

    // Label selection and pagination.
    cms.create(&PostParams::default(), &config_map("two", &[("app", "b")])).await.unwrap();
    cms.create(&PostParams::default(), &config_map("three", &[("app", "a")])).await.unwrap();
    let selected = cms.list(&ListParams::default().labels("app=a")).await.unwrap();
    let names: Vec<_> = selected.items.iter().map(|c| c.metadata.name.clone().unwrap()).collect();
    assert_eq!(names, ["one", "three"]);
    let first = cms.list(&ListParams::default().limit(2)).await.unwrap();
    assert_eq!(first.items.len(), 2);
    let token = first.metadata.continue_.clone().unwrap();
    let rest = cms.list(&ListParams::default().limit(2).continue_token(&token)).await.unwrap();
    assert_eq!(rest.items.len(), 1);
    assert!(rest.metadata.continue_.is_none());

    cms.delete("one", &DeleteParams::default()).await.unwrap();
    assert!(cms.get_opt("one").await.unwrap().is_none());
    server.stop().await;
}

#[tokio::test]
async fn secrets_fold_string_data() {
    let server = TestServer::start().await;
    let secrets: Api<Secret> = Api::namespaced(server.client().await, "default");
    let mut secret = Secret::default();
    secret.metadata.name = Some("s".into());
    secret.string_data = Some(BTreeMap::from([("password".to_string(), "hunter2".to_string())]));
    let created = secrets.create(&PostParams::default(), &secret).await.unwrap();
    assert_eq!(created.string_data, None);
    assert_eq!(created.type_.as_deref(), Some("Opaque"));
    let data = created.data.unwrap();
    assert_eq!(data["password"].0, b"hunter2");
    server.stop().await;
}

#[tokio::test]
async fn dynamic_api_and_seeded_namespaces() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let names: Vec<_> = namespaces.list(&ListParams::default()).await.unwrap().items.into_iter().map(|n| n.metadata.name.unwrap()).collect();
    assert_eq!(names, ["default", "kube-node-lease", "kube-public", "kube-system"]);
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("coordination.k8s.io", "v1", "Lease"));
    let leases: Api<DynamicObject> = Api::namespaced_with(client, "kube-system", &resource);
    let lease: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "leader"}, "spec": {"holderIdentity": "me"}
    }))
    .unwrap();
    leases.create(&PostParams::default(), &lease).await.unwrap();
    let got = leases.get("leader").await.unwrap();
    assert_eq!(got.data["spec"]["holderIdentity"], "me");
    server.stop().await;
}

#[tokio::test]
async fn watcher_sees_every_change() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(&PostParams::default(), &config_map("before", &[])).await.unwrap();
    let mut stream = watcher::watcher(cms.clone(), watcher::Config::default()).boxed();
    let mut next = async || {
        let event = tokio::time::timeout(Duration::from_secs(30), stream.try_next()).await.unwrap().unwrap().unwrap();
        match event {
            Event::InitApply(cm) => format!("init {}", cm.metadata.name.unwrap()),
            Event::Apply(cm) => format!("apply {}", cm.metadata.name.unwrap()),
            Event::Delete(cm) => format!("delete {}", cm.metadata.name.unwrap()),
            Event::Init => "init".to_string(),
            Event::InitDone => "init done".to_string(),
        }
    };
    let mut seen = Vec::new();
    // The initial list first; changes are made once it is done, so they arrive as watch events.
    while seen.last().map(String::as_str) != Some("init done") {
        seen.push(next().await);
    }
    cms.create(&PostParams::default(), &config_map("after", &[])).await.unwrap();
    cms.delete("before", &DeleteParams::default()).await.unwrap();
    seen.push(next().await);
    seen.push(next().await);
    let seen: Vec<String> = seen.into_iter().filter(|s| s != "init" && s != "init done").collect();
    assert_eq!(seen, ["init before", "apply after", "delete before"]);
    server.stop().await;
}

#[tokio::test]
async fn metadata_only_reads_list_get_and_watch() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(server.client().await, "default");
    cms.create(&PostParams::default(), &config_map("meta-a", &[("app", "m")])).await.unwrap();
    cms.create(&PostParams::default(), &config_map("meta-b", &[("app", "other")])).await.unwrap();

    let list = cms.list_metadata(&ListParams::default().labels("app=m")).await.unwrap();
    assert_eq!(list.items.len(), 1);
    assert_eq!(list.items[0].metadata.name.as_deref(), Some("meta-a"));
    assert!(list.metadata.resource_version.is_some());
    let one = cms.get_metadata("meta-b").await.unwrap();
    assert_eq!(one.metadata.labels.unwrap()["app"], "other");
    assert_eq!(one.types.unwrap().kind, "PartialObjectMetadata");

    let metas: Api<kube::core::PartialObjectMeta<ConfigMap>> = Api::namespaced(server.client().await, "default");
    let stream = watcher(metas, watcher::Config::default().labels("app=m"));
    let mut stream = std::pin::pin!(stream);
    let first = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            if let Some(Event::InitApply(object)) = stream.try_next().await.unwrap() {
                return object;
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(first.metadata.name.as_deref(), Some("meta-a"));
}

/// Patches and server-side applies carry no resourceVersion: however many clients write one
/// object at once, none of them is answered with a conflict (the server re-applies them in
/// turn), and every change is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_patches_of_one_object_all_land() {
    use kube::api::{Patch, PatchParams};
    let server = TestServer::start().await;
    let client = server.client_without_retries().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(&PostParams::default(), &config_map("hot", &[])).await.unwrap();
    let mut writers = Vec::new();
    for writer in 0..32 {
        let cms = cms.clone();
        writers.push(tokio::spawn(async move {
            for round in 0..8 {
                let key = format!("w{writer}-r{round}");
                if writer % 2 == 0 {
                    let patch = serde_json::json!({"data": {key: "merged"}});
                    cms.patch("hot", &PatchParams::default(), &Patch::Merge(&patch)).await?;
                } else {
                    let apply = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "hot"}, "data": {key: "applied"}});
                    cms.patch("hot", &PatchParams::apply(&format!("writer-{writer}-{round}")), &Patch::Apply(&apply)).await?;
                }
            }
            Ok::<_, kube::Error>(())
        }));
    }
    for writer in writers {
        writer.await.unwrap().unwrap();
    }
    let hot = cms.get("hot").await.unwrap();
    assert_eq!(hot.data.unwrap().len(), 1 + 32 * 8, "every patch kept");
    // A patch that names a resourceVersion is conditional on it: stale is a conflict, current
    // goes through.
    let stale = serde_json::json!({"metadata": {"resourceVersion": "1"}, "data": {"late": "x"}});
    let error = cms.patch("hot", &PatchParams::default(), &Patch::Merge(&stale)).await.unwrap_err();
    assert!(matches!(error, kube::Error::Api(ref s) if s.code == 409), "{error}");
    let current = serde_json::json!({"metadata": {"resourceVersion": hot.metadata.resource_version}, "data": {"late": "x"}});
    cms.patch("hot", &PatchParams::default(), &Patch::Merge(&current)).await.unwrap();
}
