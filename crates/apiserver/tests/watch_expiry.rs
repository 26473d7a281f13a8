//! Watches from a revision older than the watch cache's window are answered the way clients
//! expect: HTTP 200 and one ERROR event with a 410 `Expired` Status; kube-rs's watcher then
//! relists and carries on.

use crate::support;

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use kube::runtime::watcher;
use support::TestServer;

type Events = futures::stream::BoxStream<'static, Result<watcher::Event<ConfigMap>, watcher::Error>>;

/// The next event; a 410 surfaced by the watcher (before it relists) is counted in `expired`.
async fn next(events: &mut Events, expired: &mut usize) -> watcher::Event<ConfigMap> {
    loop {
        match tokio::time::timeout(Duration::from_secs(30), events.next()).await.unwrap().unwrap() {
            Ok(event) => return event,
            Err(watcher::Error::WatchError(status)) if status.code == 410 => *expired += 1,
            Err(other) => panic!("{other}"),
        }
    }
}

fn cm(name: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm
}

#[tokio::test]
async fn an_expired_resource_version_is_an_in_stream_410_and_the_watcher_relists() {
    let server = TestServer::start_with_window(5).await;
    let client = server.client().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let first = api.create(&PostParams::default(), &cm("c0")).await.unwrap();
    let old = first.metadata.resource_version.unwrap();
    for i in 1..20 {
        api.create(&PostParams::default(), &cm(&format!("c{i}"))).await.unwrap();
    }
    let mut stream = api.watch(&WatchParams::default(), &old).await.unwrap().boxed();
    match stream.next().await.unwrap().unwrap() {
        WatchEvent::Error(status) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
            assert!(status.message.contains("too old resource version"), "{}", status.message);
        }
        other => panic!("expected an ERROR event, got {other:?}"),
    }

    // A kube-rs watcher whose resourceVersion falls out of the window (it sees no events of
    // its own while others write) gets the 410 when it re-watches, relists and carries on.
    let mut labelled = cm("watched");
    labelled.metadata.labels = Some([("app".to_string(), "watched".to_string())].into());
    api.create(&PostParams::default(), &labelled).await.unwrap();
    let config = watcher::Config::default().labels("app=watched").timeout(1);
    let mut events = watcher::watcher(api.clone(), config).boxed();
    let mut inits = 0;
    let mut expired = 0;
    loop {
        match next(&mut events, &mut expired).await {
            watcher::Event::Init => inits += 1,
            watcher::Event::InitDone => break,
            _ => {}
        }
    }
    for i in 0..20 {
        api.create(&PostParams::default(), &cm(&format!("noise{i}"))).await.unwrap();
    }
    // The server ends the watch after 1 s; the re-watch is expired, so the watcher relists.
    loop {
        match next(&mut events, &mut expired).await {
            watcher::Event::Init => inits += 1,
            watcher::Event::InitDone => break,
            _ => {}
        }
    }
    assert!(inits >= 2, "the watcher relisted");
    assert!(expired >= 1, "because its re-watch was expired");
    let mut another = cm("watched-too");
    another.metadata.labels = Some([("app".to_string(), "watched".to_string())].into());
    api.create(&PostParams::default(), &another).await.unwrap();
    // Seen live, or in a later relist's initial list: either way the watcher carries on.
    loop {
        match next(&mut events, &mut expired).await {
            watcher::Event::Apply(object) | watcher::Event::InitApply(object)
                if object.metadata.name.as_deref() == Some("watched-too") =>
            {
                break;
            }
            _ => {}
        }
    }
    server.stop().await;
}
