//! Request-level behaviour: every failure is a `Status` with the right code and reason, and
//! bad input stores nothing. Raw HTTP through kube-rs's client, so bodies and headers are
//! exactly what the test says.

use crate::support;

use futures::StreamExt;
use http::{Method, Request};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use support::TestServer;

/// Sends a request; returns the status code, the Content-Type and the JSON body (or Null).
async fn send(client: &kube::Client, method: Method, uri: &str, content_type: Option<&str>, body: Vec<u8>) -> (u16, String, Value) {
    let mut builder = Request::builder().method(method).uri(uri);
    if let Some(ct) = content_type {
        builder = builder.header("Content-Type", ct);
    }
    let response = client.send(builder.body(kube::client::Body::from(body)).unwrap()).await.unwrap();
    let code = response.status().as_u16();
    let ct = response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (code, ct, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

const CMS: &str = "/api/v1/namespaces/default/configmaps";

fn cm(name: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "b"}})).unwrap()
}

#[tokio::test]
async fn failures_are_statuses_with_the_right_code_and_reason() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let json_ct = Some("application/json");
    // (method, uri, content type, body, expected code, expected reason)
    type Case<'a> = (Method, String, Option<&'a str>, Vec<u8>, u16, &'a str);
    let cases: Vec<Case> = vec![
        (Method::POST, CMS.into(), json_ct, b"{not json".to_vec(), 400, "BadRequest"),
        (Method::POST, CMS.into(), json_ct, b"[1,2]".to_vec(), 400, "BadRequest"),
        (Method::POST, CMS.into(), json_ct, serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}})).unwrap(), 400, "BadRequest"),
        (Method::POST, CMS.into(), json_ct, serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Bad_Name"}})).unwrap(), 422, "Invalid"),
        (Method::POST, CMS.into(), json_ct, serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}})).unwrap(), 422, "Invalid"),
        (Method::POST, CMS.into(), Some("application/vnd.kubernetes.protobuf"), b"k8s\0".to_vec(), 400, "BadRequest"),
        (Method::POST, CMS.into(), Some("application/cbor"), b"{}".to_vec(), 415, "UnsupportedMediaType"),
        (Method::POST, "/api/v1/namespaces/missing/configmaps".into(), json_ct, cm("x"), 404, "NotFound"),
        (Method::GET, format!("{CMS}/nope"), None, vec![], 404, "NotFound"),
        (Method::GET, "/apis/nothing.example.com/v1/things".into(), None, vec![], 404, "NotFound"),
        (Method::POST, CMS.into(), json_ct, vec![b' '; 4 * 1024 * 1024], 413, "RequestEntityTooLarge"),
        (Method::PATCH, format!("{CMS}/x"), Some("text/plain"), b"{}".to_vec(), 415, "UnsupportedMediaType"),
        (Method::GET, format!("{CMS}?limit=ten"), None, vec![], 400, "BadRequest"),
        (Method::GET, format!("{CMS}?labelSelector=a%20in%20(b"), None, vec![], 400, "BadRequest"),
        (Method::POST, format!("{CMS}?dryRun=Some"), json_ct, cm("x"), 400, "BadRequest"),
        (Method::POST, CMS.into(), json_ct, serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "n"}, "data": {"a": 1}})).unwrap(), 400, "BadRequest"),
        (Method::POST, "/api/v1/namespaces/default/secrets".into(), json_ct, serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"a": "not base64!"}})).unwrap(), 400, "BadRequest"),
        (Method::POST, "/api/v1/namespaces/default/secrets".into(), json_ct, serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"a": 5}})).unwrap(), 400, "BadRequest"),
    ];
    for (method, uri, ct, body, code, reason) in cases {
        let (got, content_type, status) = send(&client, method.clone(), &uri, ct, body).await;
        assert_eq!(got, code, "{method} {uri}: {status}");
        assert_eq!(status["kind"], "Status", "{method} {uri}");
        assert_eq!(status["reason"], reason, "{method} {uri}: {status}");
        assert_eq!(status["code"], code);
        assert!(content_type.starts_with("application/json"), "{content_type}");
    }
    // Nothing of the above was stored.
    let (_, _, list) = send(&client, Method::GET, CMS, None, vec![]).await;
    assert_eq!(list["items"], json!([]));
    let (_, _, list) = send(&client, Method::GET, "/api/v1/namespaces/default/secrets", None, vec![]).await;
    assert_eq!(list["items"], json!([]));
    server.stop().await;
}

#[tokio::test]
async fn generate_name_dry_run_and_delete_collection() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let generated = serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "app-"}})).unwrap();
    let (code, _, first) = send(&client, Method::POST, CMS, Some("application/json"), generated.clone()).await;
    assert_eq!(code, 201);
    let name = first["metadata"]["name"].as_str().unwrap().to_string();
    assert!(name.starts_with("app-") && name.len() == 9, "{name}");
    let (_, _, second) = send(&client, Method::POST, CMS, Some("application/json"), generated).await;
    assert_ne!(second["metadata"]["name"], first["metadata"]["name"]);

    // dryRun=All answers as if written, and writes nothing.
    let (code, _, dry) = send(&client, Method::POST, &format!("{CMS}?dryRun=All"), Some("application/json"), cm("dry")).await;
    assert_eq!(code, 201);
    assert_eq!(dry["metadata"]["name"], "dry");
    let (code, _, _) = send(&client, Method::GET, &format!("{CMS}/dry"), None, vec![]).await;
    assert_eq!(code, 404);
    let (code, _, _) = send(&client, Method::DELETE, &format!("{CMS}/{name}?dryRun=All"), None, vec![]).await;
    assert_eq!(code, 200);
    let (code, _, _) = send(&client, Method::GET, &format!("{CMS}/{name}"), None, vec![]).await;
    assert_eq!(code, 200, "a dry-run delete deletes nothing");

    // A Python-client style POST without a content type is JSON.
    let (code, _, _) = send(&client, Method::POST, CMS, None, cm("untyped")).await;
    assert_eq!(code, 201);

    let (code, _, deleted) = send(&client, Method::DELETE, CMS, None, vec![]).await;
    assert_eq!(code, 200);
    assert_eq!(deleted["items"].as_array().unwrap().len(), 3);
    let (_, _, list) = send(&client, Method::GET, CMS, None, vec![]).await;
    assert_eq!(list["items"], json!([]));
    server.stop().await;
}

/// GET with an `Accept` header; the status code and the JSON body (or Null).
async fn get_accepting(client: &kube::Client, uri: &str, accept: &str) -> (u16, Value) {
    let request = Request::get(uri).header("Accept", accept).body(kube::client::Body::empty()).unwrap();
    let response = client.send(request).await.unwrap();
    let code = response.status().as_u16();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

fn revision(object: &Value) -> u64 {
    object["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap()
}

#[tokio::test]
async fn accept_and_resource_version_cases() {
    let server = TestServer::start().await;
    // kube-rs retries a 504 on its own for minutes; this test wants to see the first one.
    let client = server.client_without_retries().await;

    // Only JSON (and its Table and metadata forms) is served.
    for uri in [CMS.to_string(), "/api/v1/namespaces/default".to_string()] {
        let (code, status) = get_accepting(&client, &uri, "application/xml").await;
        assert_eq!((code, status["reason"].as_str()), (406, Some("NotAcceptable")), "{uri}: {status}");
        assert_eq!(status["code"], 406);
    }
    assert_eq!(get_accepting(&client, CMS, "application/xml, application/json").await.0, 200, "a later served range is picked");

    // A revision the server has not reached is waited for, then a 504 Timeout.
    let (_, _, list) = send(&client, Method::GET, CMS, None, vec![]).await;
    let current = revision(&list);
    let far = current + 1_000_000;
    let (code, _, status) = send(&client, Method::GET, &format!("{CMS}?resourceVersion={far}"), None, vec![]).await;
    assert_eq!((code, status["reason"].as_str()), (504, Some("Timeout")), "{status}");
    let message = status["message"].as_str().unwrap();
    assert!(message.starts_with(&format!("Too large resource version: {far}, current: ")), "{message}");

    // A revision just written is served at once, at least as new as asked.
    for i in 0..5 {
        let (code, _, created) = send(&client, Method::POST, CMS, Some("application/json"), cm(&format!("rv-{i}"))).await;
        assert_eq!(code, 201);
        let written = revision(&created);
        let (code, _, list) = send(&client, Method::GET, &format!("{CMS}?resourceVersion={written}"), None, vec![]).await;
        assert_eq!(code, 200, "{list}");
        assert!(revision(&list) >= written, "{} < {written}", list["metadata"]["resourceVersion"]);
        let names: Vec<&str> = list["items"].as_array().unwrap().iter().map(|i| i["metadata"]["name"].as_str().unwrap()).collect();
        assert!(names.contains(&format!("rv-{i}").as_str()), "{names:?}");
        let (code, _, got) = send(&client, Method::GET, &format!("{CMS}/rv-{i}?resourceVersion={written}"), None, vec![]).await;
        assert_eq!((code, revision(&got)), (200, written));
    }
    server.stop().await;
}

#[tokio::test]
async fn a_continue_token_of_a_compacted_snapshot_is_expired() {
    let server = support::InProcess::start(|_| {}).await;
    let client = &server.client;
    for name in ["a", "b", "c"] {
        assert_eq!(send(client, Method::POST, CMS, Some("application/json"), cm(name)).await.0, 201);
    }
    let (code, _, first) = send(client, Method::GET, &format!("{CMS}?limit=1"), None, vec![]).await;
    assert_eq!(code, 200);
    let token = first["metadata"]["continue"].as_str().unwrap().to_string();

    // The cache moves past the snapshot: the next page is read from the store at its revision.
    assert_eq!(send(client, Method::POST, CMS, Some("application/json"), cm("a2")).await.0, 201);
    let (code, _, second) = send(client, Method::GET, &format!("{CMS}?limit=1&continue={token}"), None, vec![]).await;
    assert_eq!(code, 200, "{second}");
    assert_eq!(second["items"][0]["metadata"]["name"], "b", "the snapshot's next item, not the newer a2");
    assert_eq!(second["metadata"]["resourceVersion"], first["metadata"]["resourceVersion"]);

    // Once the store compacts past that revision, the token is expired.
    let store = server.state.store.clone();
    store.compact(store.current_revision().await.unwrap()).await.unwrap();
    let (code, _, status) = send(client, Method::GET, &format!("{CMS}?limit=1&continue={token}"), None, vec![]).await;
    assert_eq!((code, status["reason"].as_str()), (410, Some("Expired")), "{status}");
    assert!(status["message"].as_str().unwrap().contains("continue parameter is too old"), "{status}");
    // A new list without the token works.
    let (code, _, fresh) = send(client, Method::GET, &format!("{CMS}?limit=1"), None, vec![]).await;
    assert_eq!((code, fresh["items"][0]["metadata"]["name"].as_str()), (200, Some("a")));
}

const WIDGETS: &str = "/apis/example.com/v1/namespaces/default/widgets";

fn scaled_widget_crd() -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .unwrap()
}

#[tokio::test]
async fn dry_runs_of_every_write_store_nothing() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let json_ct = Some("application/json");
    let merge = Some("application/merge-patch+json");
    let (code, _, crd) = send(&client, Method::POST, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json_ct, scaled_widget_crd()).await;
    assert_eq!(code, 201, "{crd}");
    let widget = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"replicas": 2}});
    assert_eq!(send(&client, Method::POST, WIDGETS, json_ct, serde_json::to_vec(&widget).unwrap()).await.0, 201);
    for name in ["one", "two"] {
        assert_eq!(send(&client, Method::POST, CMS, json_ct, cm(name)).await.0, 201);
    }
    let (_, _, list) = send(&client, Method::GET, CMS, None, vec![]).await;
    let start = revision(&list);
    let (_, _, one) = send(&client, Method::GET, &format!("{CMS}/one"), None, vec![]).await;
    let (_, _, w) = send(&client, Method::GET, &format!("{WIDGETS}/w"), None, vec![]).await;
    let cms: kube::Api<k8s_openapi::api::core::v1::ConfigMap> = kube::Api::namespaced(client.clone(), "default");
    let mut events = cms.watch(&kube::api::WatchParams::default(), &start.to_string()).await.unwrap().boxed();

    // Each dry run answers with the object as it would be, at the stored resourceVersion.
    let mut changed = one.clone();
    changed["data"]["a"] = json!("put");
    let (code, _, put) = send(&client, Method::PUT, &format!("{CMS}/one?dryRun=All"), json_ct, serde_json::to_vec(&changed).unwrap()).await;
    assert_eq!((code, put["data"]["a"].as_str()), (200, Some("put")), "{put}");
    assert_eq!(put["metadata"]["resourceVersion"], one["metadata"]["resourceVersion"]);
    let (code, _, patched) = send(&client, Method::PATCH, &format!("{CMS}/one?dryRun=All"), merge, br#"{"data":{"a":"merged"}}"#.to_vec()).await;
    assert_eq!((code, patched["data"]["a"].as_str()), (200, Some("merged")), "{patched}");
    assert_eq!(patched["metadata"]["resourceVersion"], one["metadata"]["resourceVersion"]);
    let apply = Some("application/apply-patch+yaml");
    let applied_body = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: one\ndata:\n  a: applied\n".to_vec();
    let (code, _, applied) = send(&client, Method::PATCH, &format!("{CMS}/one?dryRun=All&fieldManager=dry&force=true"), apply, applied_body).await;
    assert_eq!((code, applied["data"]["a"].as_str()), (200, Some("applied")), "{applied}");
    assert_eq!(applied["metadata"]["resourceVersion"], one["metadata"]["resourceVersion"]);
    assert!(applied["metadata"]["managedFields"].as_array().unwrap().iter().any(|e| e["manager"] == "dry"), "{applied}");
    let ghost = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ghost\ndata:\n  a: b\n".to_vec();
    let (code, _, _) = send(&client, Method::PATCH, &format!("{CMS}/ghost?dryRun=All&fieldManager=dry"), apply, ghost).await;
    assert_eq!(code, 201, "a dry-run apply of a new object answers as a create");
    let (code, _, collection) = send(&client, Method::DELETE, &format!("{CMS}?dryRun=All"), None, vec![]).await;
    assert_eq!(code, 200, "{collection}");
    assert_eq!(collection["items"].as_array().unwrap().len(), 2);
    let scale = json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "w", "namespace": "default"}, "spec": {"replicas": 5}});
    let (code, _, scaled) = send(&client, Method::PUT, &format!("{WIDGETS}/w/scale?dryRun=All"), json_ct, serde_json::to_vec(&scale).unwrap()).await;
    assert_eq!((code, scaled["spec"]["replicas"].as_i64()), (200, Some(5)), "{scaled}");
    assert_eq!(scaled["metadata"]["resourceVersion"], w["metadata"]["resourceVersion"]);
    let (code, _, scaled) = send(&client, Method::PATCH, &format!("{WIDGETS}/w/scale?dryRun=All"), merge, br#"{"spec":{"replicas":7}}"#.to_vec()).await;
    assert_eq!((code, scaled["spec"]["replicas"].as_i64()), (200, Some(7)), "{scaled}");

    // Nothing was stored: the objects are as they were, the store's revision did not move, and
    // a watcher's next event is the next real write.
    assert_eq!(send(&client, Method::GET, &format!("{CMS}/one"), None, vec![]).await.2, one);
    assert_eq!(send(&client, Method::GET, &format!("{WIDGETS}/w"), None, vec![]).await.2, w);
    assert_eq!(send(&client, Method::GET, &format!("{CMS}/ghost"), None, vec![]).await.0, 404);
    let (_, _, list) = send(&client, Method::GET, CMS, None, vec![]).await;
    assert_eq!(revision(&list), start, "no write reached the store");
    assert_eq!(list["items"].as_array().unwrap().len(), 2);
    assert_eq!(send(&client, Method::POST, CMS, json_ct, cm("sentinel")).await.0, 201);
    let first = tokio::time::timeout(std::time::Duration::from_secs(30), events.next()).await.unwrap().unwrap().unwrap();
    match first {
        kube::api::WatchEvent::Added(cm) => assert_eq!(cm.metadata.name.as_deref(), Some("sentinel")),
        other => panic!("the first event after the dry runs is the sentinel's creation, not {other:?}"),
    }
    server.stop().await;
}
