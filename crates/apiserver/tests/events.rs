//! Events are one storage with two views: kube-rs's Recorder writes `events.k8s.io/v1`, and
//! `kubectl describe` reads them back through core `v1` with involvedObject field selectors.

use crate::support;

use k8s_openapi::api::core::v1::{ConfigMap, Event as CoreEvent};
use k8s_openapi::api::events::v1::Event as EventV1;
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::Resource;
use support::TestServer;

#[tokio::test]
async fn recorder_events_are_readable_through_both_versions() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("subject".into());
    let cm = cms.create(&PostParams::default(), &cm).await.unwrap();
    let reference = cm.object_ref(&());

    let recorder = Recorder::new(client.clone(), Reporter { controller: "test-controller".into(), instance: Some("pod-1".into()) });
    let event = Event {
        type_: EventType::Normal,
        reason: "Synced".into(),
        note: Some("all good".into()),
        action: "Reconcile".into(),
        secondary: None,
    };
    recorder.publish(&event, &reference).await.unwrap();
    // A repeat becomes a patch that counts the series.
    recorder.publish(&event, &reference).await.unwrap();

    let core: Api<CoreEvent> = Api::namespaced(client.clone(), "default");
    let selector = format!(
        "involvedObject.name=subject,involvedObject.namespace=default,involvedObject.kind=ConfigMap,involvedObject.uid={}",
        cm.metadata.uid.clone().unwrap()
    );
    let found = core.list(&ListParams::default().fields(&selector)).await.unwrap().items;
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].reason.as_deref(), Some("Synced"));
    assert_eq!(found[0].message.as_deref(), Some("all good"));
    assert_eq!(found[0].reporting_component.as_deref(), Some("test-controller"));
    let other = core.list(&ListParams::default().fields("involvedObject.name=someone-else")).await.unwrap().items;
    assert!(other.is_empty());

    let v1: Api<EventV1> = Api::namespaced(client, "default");
    let listed = v1.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].note.as_deref(), Some("all good"));
    assert_eq!(listed[0].regarding.as_ref().and_then(|r| r.name.as_deref()), Some("subject"));
    assert_eq!(listed[0].series.as_ref().map(|s| s.count), Some(2));
    server.stop().await;
}
