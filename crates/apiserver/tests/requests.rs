//! Request-level behaviour: every failure is a `Status` with the right code and reason, and
//! bad input stores nothing. Raw HTTP through kube-rs's client, so bodies and headers are
//! exactly what the test says.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

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
