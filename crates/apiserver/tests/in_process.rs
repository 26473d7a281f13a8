//! The in-process client: a kube-rs `Client` over [`Server::local_service`] reads, writes and
//! watches exactly as one that dials the server over HTTPS, with no token of its own.

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use oxplane_apiserver::server::{Server, ServerConfig};

#[tokio::test]
async fn a_kube_client_over_the_local_service_reads_writes_and_watches() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ServerConfig::new(dir.path().to_path_buf(), "127.0.0.1:0");
    // Even with no budget for requests from outside, in-process requests are never refused.
    config.max_mutating_requests_inflight = 1;
    let server = Server::start(config).await.unwrap();
    let client = kube::Client::new(server.local_service(), "default");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server.serve(async {
        let _ = stopped.await;
    }));

    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let mut events = watcher(cms.clone(), watcher::Config::default()).applied_objects().boxed();
    let writes = (0..20).map(|i| {
        let cms = cms.clone();
        async move {
            let cm = ConfigMap { metadata: ObjectMeta { name: Some(format!("cm-{i}")), ..Default::default() }, ..Default::default() };
            cms.create(&PostParams::default(), &cm).await
        }
    });
    for result in futures::future::join_all(writes).await {
        result.expect("in-process creates are not limited");
    }
    let mut seen = std::collections::BTreeSet::new();
    while seen.len() < 20 {
        let cm = tokio::time::timeout(std::time::Duration::from_secs(30), events.try_next()).await.unwrap().unwrap().unwrap();
        seen.insert(cm.metadata.name.unwrap());
    }
    assert_eq!(cms.list(&Default::default()).await.unwrap().items.len(), 20);

    let _ = stop.send(());
    serving.await.unwrap().unwrap();
}
