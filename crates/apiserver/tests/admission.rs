//! The admission chain with a hook registered in-process, as the layers above register theirs:
//! its mutation on create is stored, its refusals of an update and a delete reach the client as
//! the hook's own `Status`, and a refused write stores nothing.

use crate::support;

use std::sync::{Arc, Mutex};

use http::{Method, Request};
use http_body_util::BodyExt;
use oxplane_apiserver::http::AppState;
use oxplane_apiserver::ops::admission::{AdmissionHook, AdmissionRequest, HookFuture, Operation};
use oxplane_apiserver::status::{ApiError, Reason};
use serde_json::{Value, json};
use support::InProcess;

/// Annotates every ConfigMap it sees created; refuses updates of `guarded` that touch its data
/// and every delete of `guarded`. Records what it was asked.
#[derive(Default)]
struct Guard {
    seen: Mutex<Vec<(Operation, String, bool, bool)>>,
}

impl AdmissionHook for Guard {
    fn name(&self) -> &str {
        "test-guard"
    }

    fn mutate<'a>(&'a self, _state: &'a AppState, request: &'a AdmissionRequest<'a>, object: &'a mut Value) -> HookFuture<'a> {
        Box::pin(async move {
            if request.resource.kind == "ConfigMap" && request.operation == Operation::Create {
                object["metadata"]["annotations"]["admitted-by"] = json!("test-guard");
            }
            Ok(())
        })
    }

    fn validate<'a>(&'a self, _state: &'a AppState, request: &'a AdmissionRequest<'a>, object: &'a Value) -> HookFuture<'a> {
        Box::pin(async move {
            if request.resource.kind != "ConfigMap" {
                return Ok(());
            }
            let entry = (request.operation, request.name.to_string(), request.old.is_some(), request.dry_run);
            self.seen.lock().unwrap().push(entry);
            if request.name != "guarded" {
                return Ok(());
            }
            match request.operation {
                Operation::Update if request.old.is_some_and(|old| old["data"] != object["data"]) => {
                    Err(ApiError::new(Reason::Conflict, "test-guard: the data of guarded is frozen"))
                }
                Operation::Delete => Err(ApiError::new(Reason::Forbidden, "test-guard: guarded may not be deleted")
                    .with_details("", "configmaps", "guarded")
                    .with_cause("Guarded", "guarded is protected by test-guard", "metadata.name")),
                _ => Ok(()),
            }
        })
    }
}

async fn send(client: &kube::Client, method: Method, uri: &str, content_type: &str, body: Value) -> (u16, Value) {
    let body = if body.is_null() { kube::client::Body::empty() } else { kube::client::Body::from(serde_json::to_vec(&body).unwrap()) };
    let request = Request::builder().method(method).uri(uri).header("Content-Type", content_type).body(body).unwrap();
    let response = client.send(request).await.unwrap();
    let code = response.status().as_u16();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const JSON: &str = "application/json";

#[tokio::test]
async fn a_registered_hook_mutates_creates_and_refuses_updates_and_deletes() {
    let guard = Arc::new(Guard::default());
    let hook = guard.clone();
    let server = InProcess::start(move |server| server.state().admission.register(hook)).await;
    let client = &server.client;

    // The mutation on create is stored.
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "guarded"}, "data": {"a": "1"}});
    let (code, created) = send(client, Method::POST, CMS, JSON, body).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["metadata"]["annotations"]["admitted-by"], "test-guard");
    let (_, stored) = send(client, Method::GET, &format!("{CMS}/guarded"), JSON, Value::Null).await;
    assert_eq!(stored["metadata"]["annotations"]["admitted-by"], "test-guard");
    let version = stored["metadata"]["resourceVersion"].clone();

    // Refused: a PUT and a merge patch of the data carry the hook's code, reason and message.
    let mut changed = stored.clone();
    changed["data"]["a"] = json!("2");
    let (code, status) = send(client, Method::PUT, &format!("{CMS}/guarded"), JSON, changed).await;
    assert_eq!((code, status["reason"].as_str(), status["code"].as_u64()), (409, Some("Conflict"), Some(409)), "{status}");
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["message"], "test-guard: the data of guarded is frozen");
    let (code, status) =
        send(client, Method::PATCH, &format!("{CMS}/guarded"), "application/merge-patch+json", json!({"data": {"a": "3"}})).await;
    assert_eq!((code, status["message"].as_str()), (409, Some("test-guard: the data of guarded is frozen")), "{status}");

    // An update the hook accepts goes through (and keeps the create-time annotation).
    let (code, labelled) = send(
        client,
        Method::PATCH,
        &format!("{CMS}/guarded"),
        "application/merge-patch+json",
        json!({"metadata": {"labels": {"ok": "yes"}}}),
    )
    .await;
    assert_eq!(code, 200, "{labelled}");
    assert_eq!(labelled["metadata"]["annotations"]["admitted-by"], "test-guard");
    assert_ne!(labelled["metadata"]["resourceVersion"], version);
    let version = labelled["metadata"]["resourceVersion"].clone();

    // Refused: a delete, with the hook's details and causes.
    let (code, status) = send(client, Method::DELETE, &format!("{CMS}/guarded"), JSON, Value::Null).await;
    assert_eq!((code, status["reason"].as_str()), (403, Some("Forbidden")), "{status}");
    assert_eq!(status["message"], "test-guard: guarded may not be deleted");
    assert_eq!(status["details"]["name"], "guarded");
    assert_eq!(status["details"]["causes"][0], json!({"reason": "Guarded", "message": "guarded is protected by test-guard", "field": "metadata.name"}));

    // Nothing the refused writes carried was stored.
    let (code, stored) = send(client, Method::GET, &format!("{CMS}/guarded"), JSON, Value::Null).await;
    assert_eq!(code, 200, "the refused delete deleted nothing");
    assert_eq!(stored["data"], json!({"a": "1"}));
    assert_eq!(stored["metadata"]["resourceVersion"], version);
    assert!(stored["metadata"].get("deletionTimestamp").is_none(), "{stored}");

    // Objects the hook lets through are created (annotated), changed and deleted.
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "free"}, "data": {"a": "1"}});
    assert_eq!(send(client, Method::POST, CMS, JSON, body).await.0, 201);
    let (code, _) = send(client, Method::PATCH, &format!("{CMS}/free"), "application/merge-patch+json", json!({"data": {"a": "2"}})).await;
    assert_eq!(code, 200);
    let (code, _) = send(client, Method::DELETE, &format!("{CMS}/free"), JSON, Value::Null).await;
    assert_eq!(code, 200);
    assert_eq!(send(client, Method::GET, &format!("{CMS}/free"), JSON, Value::Null).await.0, 404);

    // A dry run is admitted as one.
    let (code, _) = send(client, Method::DELETE, &format!("{CMS}/guarded?dryRun=All"), JSON, Value::Null).await;
    assert_eq!(code, 403, "a dry run is refused as the real write would be");

    // The hook saw each write with the stored object for updates and deletes.
    let seen = guard.seen.lock().unwrap().clone();
    let expected = [
        (Operation::Create, "guarded", false, false),
        (Operation::Update, "guarded", true, false),
        (Operation::Update, "guarded", true, false),
        (Operation::Update, "guarded", true, false),
        (Operation::Delete, "guarded", true, false),
        (Operation::Create, "free", false, false),
        (Operation::Update, "free", true, false),
        (Operation::Delete, "free", true, false),
        (Operation::Delete, "guarded", true, true),
    ];
    let expected: Vec<_> = expected.into_iter().map(|(op, name, old, dry)| (op, name.to_string(), old, dry)).collect();
    assert_eq!(seen, expected);
}
