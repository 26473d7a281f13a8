//! A kube-rs `Controller` with the finalizer helper: adding the finalizer is a JSON patch whose
//! `test` of a missing `/metadata/finalizers` must compare equal to null, as in the Go library.

use crate::support;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{Event, finalizer};
use kube::runtime::watcher;
use support::TestServer;

const FINALIZER: &str = "example.com/cleanup";

/// The controller's context: the API it patches and the names it reconciled.
type Context = (Api<ConfigMap>, Arc<Mutex<BTreeSet<String>>>);

#[derive(Debug, thiserror::Error)]
#[error("never")]
struct Never;

#[tokio::test]
async fn a_finalizer_controller_adds_its_finalizer_and_reconciles() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for name in ["one", "two"] {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(name.into());
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }
    let applied = Arc::new(Mutex::new(BTreeSet::new()));
    let context = Arc::new((cms.clone(), applied.clone()));
    let controller = Controller::new(cms.clone(), watcher::Config::default())
        .run(
            |object: Arc<ConfigMap>, ctx: Arc<Context>| async move {
                let (api, applied) = &*ctx;
                finalizer(api, FINALIZER, object, |event| async move {
                    if let Event::Apply(cm) = event {
                        applied.lock().unwrap().insert(cm.metadata.name.clone().unwrap());
                    }
                    Ok::<_, Never>(Action::await_change())
                })
                .await
            },
            |_, _, _| Action::requeue(Duration::from_millis(200)),
            context,
        )
        .for_each(|_| async {});
    let check = async {
        loop {
            let done = applied.lock().unwrap().len() == 2;
            if done {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::select! {
        () = controller => panic!("the controller stopped"),
        result = tokio::time::timeout(Duration::from_secs(30), check) => result.expect("both objects reconciled"),
    }
    for name in ["one", "two"] {
        let finalizers = cms.get(name).await.unwrap().metadata.finalizers.unwrap_or_default();
        assert_eq!(finalizers, [FINALIZER]);
    }
    server.stop().await;
}
