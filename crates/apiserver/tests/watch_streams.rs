//! Watch streams read as raw HTTP lines: a watcher that stops reading is ended with an in-stream
//! 410 once it falls too far behind while a reading watcher sees every event, and bookmarks
//! carry the cache's revision so a watcher of a quiet kind resumes after writes to other kinds
//! pushed its last event out of the watch cache's window.

use crate::support;

use std::collections::BTreeSet;
use std::time::Duration;

use futures::future::join_all;
use http::Request;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use support::TestServer;

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const SECRETS: &str = "/api/v1/namespaces/default/secrets";

/// A watch response read line by line.
struct Lines {
    body: kube::client::Body,
    buffered: Vec<u8>,
}

impl Lines {
    /// Sends the watch request; only the response head is read.
    async fn open(client: &kube::Client, uri: &str) -> Lines {
        let response = client.send(Request::get(uri).body(kube::client::Body::empty()).unwrap()).await.unwrap();
        assert_eq!(response.status(), 200, "{uri}");
        Lines { body: response.into_body(), buffered: Vec::new() }
    }

    /// The next event, or `None` when the stream ends; fails after 60 s without a line.
    async fn next(&mut self) -> Option<Value> {
        tokio::time::timeout(Duration::from_secs(60), self.read_line()).await.expect("a watch line within 60 s")
    }

    async fn read_line(&mut self) -> Option<Value> {
        loop {
            if let Some(end) = self.buffered.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buffered.drain(..=end).collect();
                return Some(serde_json::from_slice(&line).unwrap());
            }
            match self.body.frame().await {
                Some(frame) => {
                    if let Ok(data) = frame.unwrap().into_data() {
                        self.buffered.extend_from_slice(&data);
                    }
                }
                None => return None,
            }
        }
    }
}

async fn send(client: &kube::Client, method: http::Method, uri: &str, body: Value) -> Value {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header("Content-Type", "application/json")
        .body(if body.is_null() { kube::client::Body::empty() } else { kube::client::Body::from(serde_json::to_vec(&body).unwrap()) })
        .unwrap();
    let response = client.send(request).await.unwrap();
    let code = response.status().as_u16();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let value: Value = serde_json::from_slice(&bytes).unwrap();
    assert!((200..300).contains(&code), "{uri}: {value}");
    value
}

async fn list_revision(client: &kube::Client, uri: &str) -> u64 {
    let list = send(client, http::Method::GET, uri, Value::Null).await;
    list["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap()
}

fn revision_of(event: &Value) -> u64 {
    event["object"]["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap()
}

fn name_of(event: &Value) -> String {
    event["object"]["metadata"]["name"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_that_stops_reading_is_ended_with_410_while_others_keep_up() {
    // A small queue per watcher keeps the test quick; the mechanism is the one of the default.
    let server = TestServer::start_configured(|config| config.watch_live_queue = 64).await;
    let client = server.client().await;
    let start = list_revision(&client, CMS).await;
    let watch = format!("{CMS}?watch=true&resourceVersion={start}");
    // The slow watcher reads the response head and then nothing, until every write is done.
    let mut slow = Lines::open(&client, &watch).await;
    let mut reading = Lines::open(&client, &watch).await;

    // Enough bytes to fill what lies between the server and the stalled client (the watcher's
    // line buffer, TLS and both sockets) many times over, in batches smaller than the queue; the
    // reading watcher drains each batch before the next, so it never falls behind.
    let blob = "x".repeat(16 * 1024);
    let (batches, batch) = (40, 32);
    let mut seen = Vec::new();
    for b in 0..batches {
        let writes = (0..batch).map(|i| {
            let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("cm-{b}-{i}")}, "data": {"blob": blob}});
            let client = client.clone();
            async move { send(&client, http::Method::POST, CMS, body).await }
        });
        join_all(writes).await;
        while seen.len() < (b + 1) * batch {
            let event = reading.next().await.expect("the reading watcher's stream goes on");
            assert_eq!(event["type"], "ADDED", "{}", event["object"]);
            seen.push((revision_of(&event), name_of(&event)));
        }
    }
    let total = batches * batch;
    assert_eq!(seen.len(), total);
    assert!(seen.windows(2).all(|w| w[0].0 < w[1].0), "the reading watcher saw every event once, in order");
    assert_eq!(seen.iter().map(|(_, name)| name.clone()).collect::<BTreeSet<_>>().len(), total);

    // The slow watcher gets what was buffered for it, in order and without gaps, then one ERROR
    // event with a 410 Expired Status, and its stream ends.
    let mut delivered = Vec::new();
    let error = loop {
        let event = slow.next().await.expect("the slow watcher's stream ends with an ERROR event, not silently");
        if event["type"] == "ERROR" {
            break event;
        }
        assert_eq!(event["type"], "ADDED", "{}", event["object"]);
        delivered.push((revision_of(&event), name_of(&event)));
    };
    assert_eq!(error["object"]["kind"], "Status", "{error}");
    assert_eq!(error["object"]["code"], 410, "{error}");
    assert_eq!(error["object"]["reason"], "Expired", "{error}");
    assert!(delivered.len() < total, "the slow watcher was ended before it saw every write");
    assert_eq!(delivered[..], seen[..delivered.len()], "what it did get is the start of the stream, with no gap");
    assert!(slow.next().await.is_none(), "the stream ends after the ERROR event");

    // The reading watcher is still live.
    send(&client, http::Method::POST, CMS, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "after"}})).await;
    let event = reading.next().await.unwrap();
    assert_eq!((event["type"].as_str(), name_of(&event).as_str()), (Some("ADDED"), "after"));
    server.stop().await;
}

#[tokio::test]
async fn bookmarks_carry_the_cache_revision_so_a_quiet_kind_resumes_without_410() {
    let server = TestServer::start_configured(|config| {
        config.watch_cache_window = 5;
        config.watch_bookmark_interval = Duration::from_millis(200);
    })
    .await;
    let client = server.client().await;
    let start = list_revision(&client, SECRETS).await;
    let mut quiet = Lines::open(&client, &format!("{SECRETS}?watch=true&allowWatchBookmarks=true&resourceVersion={start}")).await;
    let first = quiet.next().await.unwrap();
    assert_eq!(first["type"], "BOOKMARK", "{first}");
    assert_eq!(first["object"]["kind"], "Secret");
    assert_eq!(first["object"]["apiVersion"], "v1");
    assert!(revision_of(&first) >= start, "{first}");

    // Writes to another kind, four times the window.
    let mut last = 0;
    for i in 0..20 {
        let created = send(&client, http::Method::POST, CMS, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("noise-{i}")}})).await;
        last = created["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
    }
    // The watcher's start revision has left the window.
    let mut expired = Lines::open(&client, &format!("{SECRETS}?watch=true&resourceVersion={start}")).await;
    let error = expired.next().await.unwrap();
    assert_eq!((error["type"].as_str(), error["object"]["code"].as_u64()), (Some("ERROR"), Some(410)), "{error}");

    // The quiet watcher's bookmarks move on with the cache, past every write to the other kind.
    let mut bookmark = first;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while revision_of(&bookmark) < last && std::time::Instant::now() < deadline {
        bookmark = quiet.next().await.unwrap();
        assert_eq!(bookmark["type"], "BOOKMARK", "the quiet kind has no other events: {bookmark}");
    }
    let resume = revision_of(&bookmark);
    assert!(resume >= last, "a bookmark reached the revision of the last write ({last}); the last one said {resume}");

    // Resuming from the bookmark's revision is not expired: the next event is the next secret.
    let mut resumed = Lines::open(&client, &format!("{SECRETS}?watch=true&resourceVersion={resume}")).await;
    send(&client, http::Method::POST, SECRETS, json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1"}})).await;
    let event = resumed.next().await.unwrap();
    assert_eq!((event["type"].as_str(), name_of(&event).as_str()), (Some("ADDED"), "s1"), "{event}");

    // Without allowWatchBookmarks there are none, however long the watch is quiet.
    let resume = revision_of(&event);
    let mut plain = Lines::open(&client, &format!("{SECRETS}?watch=true&resourceVersion={resume}")).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    send(&client, http::Method::POST, SECRETS, json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s2"}})).await;
    let event = plain.next().await.unwrap();
    assert_eq!((event["type"].as_str(), name_of(&event).as_str()), (Some("ADDED"), "s2"), "{event}");
    server.stop().await;
}
