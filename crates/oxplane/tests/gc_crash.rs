//! Restart equivalence of the garbage collector: `kill -9` the server in the middle of a
//! foreground deletion of a deep owner tree (five levels, fan-out ten: 11,111 objects), start
//! it again, and the tree finishes deleting with nothing orphaned.

use crate::support;

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;
use support::Server;

const FAN_OUT: usize = 10;
const LEVELS: usize = 5;
const LABEL: &str = "tree=crash";

fn node(name: &str, parent: Option<(&str, &str)>) -> ConfigMap {
    let owners = match parent {
        Some((name, uid)) => json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": uid, "blockOwnerDeletion": true}]),
        None => json!([]),
    };
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"tree": "crash"}, "ownerReferences": owners},
    }))
    .unwrap()
}

async fn count(api: &Api<ConfigMap>) -> usize {
    api.list_metadata(&ListParams::default().labels(LABEL)).await.map(|l| l.items.len()).unwrap_or(usize::MAX)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_finishes_a_foreground_deletion_after_restart() {
    let mut server = Server::start();
    let api: Api<ConfigMap> = Api::namespaced(server.client().await, "default");
    let root = api.create(&PostParams::default(), &node("n", None)).await.unwrap();
    let mut level = vec![("n".to_string(), root.metadata.uid.unwrap())];
    let mut total = 1;
    for _ in 1..LEVELS {
        let children: Vec<(String, String, String)> = level
            .iter()
            .flat_map(|(name, uid)| (0..FAN_OUT).map(move |i| (format!("{name}-{i}"), name.clone(), uid.clone())))
            .collect();
        let created: Vec<(String, String)> = futures::stream::iter(children)
            .map(|(name, parent, uid)| {
                let api = api.clone();
                async move {
                    let made = api.create(&PostParams::default(), &node(&name, Some((&parent, &uid)))).await.unwrap();
                    (name, made.metadata.uid.unwrap())
                }
            })
            .buffer_unordered(32)
            .collect()
            .await;
        total += created.len();
        level = created;
    }
    assert_eq!(count(&api).await, total);

    api.delete("n", &DeleteParams::foreground()).await.unwrap();
    // Kill it once the collector is well under way, but far from done.
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let left = count(&api).await;
        if left < total - 200 {
            break;
        }
        assert!(Instant::now() < deadline, "the collector made no progress ({left} of {total} left)");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    server.kill_and_restart();
    let api: Api<ConfigMap> = Api::namespaced(server.client().await, "default");
    let left_at_restart = count(&api).await;
    assert!(left_at_restart > 0, "the tree was already gone at the restart; nothing was tested");

    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let left = count(&api).await;
        if left == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "{left} objects of the tree remain after the restart");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!("tree of {total}: {left_at_restart} left at the kill, all deleted after the restart");
}
