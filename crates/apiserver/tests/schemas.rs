//! Custom resources are defaulted, pruned and validated against their CRD's schema, and
//! `fieldValidation` decides what unknown or duplicate fields cost.

use crate::support;

use http::{Method, Request};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use support::TestServer;

async fn send(client: &kube::Client, method: Method, uri: &str, body: &str) -> (u16, Vec<String>, Value) {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header("Content-Type", "application/json")
        .body(kube::client::Body::from(body.as_bytes().to_vec()))
        .unwrap();
    let response = client.send(request).await.unwrap();
    let code = response.status().as_u16();
    let warnings = response.headers().get_all("warning").iter().map(|v| v.to_str().unwrap().to_string()).collect();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (code, warnings, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

const CRD: &str = r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"pods2.example.com"},
 "spec":{"group":"example.com","scope":"Namespaced","names":{"plural":"pods2","kind":"Pod2"},
  "versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{}},
   "schema":{"openAPIV3Schema":{"type":"object","properties":{
     "spec":{"type":"object","required":["size"],"properties":{
        "size":{"type":"integer","minimum":1,"maximum":10},
        "mode":{"type":"string","enum":["fast","safe"],"default":"safe"},
        "extra":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}},
     "status":{"type":"object","properties":{"conditions":{"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["type"],
        "items":{"type":"object","required":["type","status"],"properties":{"type":{"type":"string"},"status":{"type":"string"}}}}}}}}}}]}}"#;

const URI: &str = "/apis/example.com/v1/namespaces/default/pods2";

#[tokio::test]
async fn defaulting_pruning_validation_and_field_validation() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let (code, _, crd) = send(&client, Method::POST, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD).await;
    assert_eq!(code, 201, "{crd}");

    // Defaulted, unknown fields pruned with a warning, preserved ones kept.
    let body = r#"{"apiVersion":"example.com/v1","kind":"Pod2","metadata":{"name":"a"},"spec":{"size":3,"bogus":1,"extra":{"anything":true}}}"#;
    let (code, warnings, created) = send(&client, Method::POST, URI, body).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["spec"], json!({"size": 3, "mode": "safe", "extra": {"anything": true}}));
    assert_eq!(warnings, [r#"299 - "unknown field \"spec.bogus\"""#]);

    // Strict refuses unknown and duplicate fields and stores nothing.
    let strict = format!("{URI}?fieldValidation=Strict");
    let body = r#"{"apiVersion":"example.com/v1","kind":"Pod2","metadata":{"name":"b"},"spec":{"size":3,"bogus":1}}"#;
    let (code, _, status) = send(&client, Method::POST, &strict, body).await;
    assert_eq!(code, 400, "{status}");
    assert_eq!(status["message"], r#"Pod2 in version "v1" cannot be handled as a Pod2: strict decoding error: unknown field "spec.bogus""#);
    let body = r#"{"apiVersion":"example.com/v1","kind":"Pod2","metadata":{"name":"b"},"spec":{"size":3,"size":4}}"#;
    let (code, _, status) = send(&client, Method::POST, &strict, body).await;
    assert_eq!(code, 400);
    assert!(status["message"].as_str().unwrap().contains(r#"duplicate field "spec.size""#), "{status}");
    let (code, _, _) = send(&client, Method::GET, &format!("{URI}/b"), "").await;
    assert_eq!(code, 404);

    // Invalid values are 422 with one cause per problem.
    let body = r#"{"apiVersion":"example.com/v1","kind":"Pod2","metadata":{"name":"c"},"spec":{"size":11,"mode":"reckless"}}"#;
    let (code, _, status) = send(&client, Method::POST, URI, body).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(status["reason"], "Invalid");
    let fields: Vec<&str> = status["details"]["causes"].as_array().unwrap().iter().map(|c| c["field"].as_str().unwrap()).collect();
    assert!(fields.contains(&"spec.size") && fields.contains(&"spec.mode"), "{status}");
    let body = r#"{"apiVersion":"example.com/v1","kind":"Pod2","metadata":{"name":"c"},"spec":{}}"#;
    let (code, _, status) = send(&client, Method::POST, URI, body).await;
    assert_eq!(code, 422);
    assert_eq!(status["details"]["causes"][0]["reason"], "FieldValueRequired");

    // Patches are validated too, and the status subresource against the status schema.
    let (code, _, status) = send_patch(&client, &format!("{URI}/a"), r#"{"spec":{"size":0}}"#).await;
    assert_eq!(code, 422, "{status}");
    let duplicate_conditions = r#"{"status":{"conditions":[{"type":"Ready","status":"True"},{"type":"Ready","status":"False"}]}}"#;
    let (code, _, status) = send_patch(&client, &format!("{URI}/a/status"), duplicate_conditions).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(status["details"]["causes"][0]["reason"], "FieldValueDuplicate");
    server.stop().await;
}

async fn send_patch(client: &kube::Client, uri: &str, body: &str) -> (u16, Vec<String>, Value) {
    let request = Request::builder()
        .method(Method::PATCH)
        .uri(uri)
        .header("Content-Type", "application/merge-patch+json")
        .body(kube::client::Body::from(body.as_bytes().to_vec()))
        .unwrap();
    let response = client.send(request).await.unwrap();
    let code = response.status().as_u16();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (code, vec![], serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_crd_with_a_non_structural_schema_is_refused() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let crd = CRD.replace(r#""spec":{"type":"object","required""#, r#""spec":{"required""#);
    let (code, _, status) = send(&client, Method::POST, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", &crd).await;
    assert_eq!(code, 422, "{status}");
    assert!(status["details"]["causes"][0]["field"].as_str().unwrap().starts_with("spec.versions[0].schema"), "{status}");
    server.stop().await;
}

const CEL_CRD: &str = r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"usages2.example.com"},
 "spec":{"group":"example.com","scope":"Namespaced","names":{"plural":"usages2","kind":"Usage2"},
  "versions":[{"name":"v1","served":true,"storage":true,
   "schema":{"openAPIV3Schema":{"type":"object","properties":{
     "spec":{"type":"object",
       "x-kubernetes-validations":[{"rule":"has(self.by) || has(self.reason)","message":"either \"spec.by\" or \"spec.reason\" must be specified."}],
       "properties":{
        "by":{"type":"string"},
        "reason":{"type":"string"},
        "state":{"type":"string","x-kubernetes-validations":[{"rule":"oldSelf != 'Active' || self == 'Active'","message":"state cannot be changed once it becomes Active"}]},
        "name":{"type":"string","x-kubernetes-validations":[{"rule":"self == oldSelf","message":"Value is immutable"}]},
        "credentials":{"type":"array","x-kubernetes-validations":[{"rule":"self.all(c, c.source != 'Secret' || has(c.secretRef))","message":"the Secret source requires a secretRef"}],
          "items":{"type":"object","properties":{"source":{"type":"string"},"secretRef":{"type":"object","properties":{"name":{"type":"string"}}}}}}}}}}}}]}}"#;

#[tokio::test]
async fn cel_rules_validate_creates_and_transitions() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let (code, _, crd) = send(&client, Method::POST, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CEL_CRD).await;
    assert_eq!(code, 201, "{crd}");
    let uri = "/apis/example.com/v1/namespaces/default/usages2";
    let object = |spec: Value| json!({"apiVersion": "example.com/v1", "kind": "Usage2", "metadata": {"name": "u"}, "spec": spec}).to_string();

    let (code, _, status) = send(&client, Method::POST, uri, &object(json!({"name": "a"}))).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(status["details"]["causes"][0]["field"], "spec");
    assert!(status["message"].as_str().unwrap().contains(r#"either "spec.by" or "spec.reason" must be specified."#), "{status}");

    let bad_credentials = json!({"reason": "r", "credentials": [{"source": "None"}, {"source": "Secret"}]});
    let (code, _, status) = send(&client, Method::POST, uri, &object(bad_credentials)).await;
    assert_eq!(code, 422, "{status}");
    assert!(status["message"].as_str().unwrap().contains("the Secret source requires a secretRef"), "{status}");

    let (code, _, created) = send(&client, Method::POST, uri, &object(json!({"reason": "r", "name": "a", "state": "Active"}))).await;
    assert_eq!(code, 201, "{created}");
    let item = format!("{uri}/u");
    let (code, _, status) = send_patch(&client, &item, r#"{"spec":{"name":"b"}}"#).await;
    assert_eq!(code, 422, "{status}");
    assert!(status["message"].as_str().unwrap().contains("spec.name: Invalid value: \"string\": Value is immutable"), "{status}");
    let (code, _, status) = send_patch(&client, &item, r#"{"spec":{"state":"Inactive"}}"#).await;
    assert_eq!(code, 422, "{status}");
    assert!(status["message"].as_str().unwrap().contains("state cannot be changed once it becomes Active"), "{status}");
    let (code, _, patched) = send_patch(&client, &item, r#"{"spec":{"by":"someone"}}"#).await;
    assert_eq!(code, 200, "{patched}");

    // A rule that does not compile makes the CRD invalid.
    let broken = CEL_CRD.replace("usages2", "broken2").replace("Usage2", "Broken2").replace("self == oldSelf", "self ==");
    let (code, _, status) = send(&client, Method::POST, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", &broken).await;
    assert_eq!(code, 422, "{status}");
    assert!(status["message"].as_str().unwrap().contains("x-kubernetes-validations[0].rule"), "{status}");
}

#[tokio::test]
async fn built_in_kinds_report_unknown_fields() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let uri = "/api/v1/namespaces/default/configmaps";
    let body = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"a":"b"},"bogus":{"x":1}}"#;
    let (code, _, status) = send(&client, Method::POST, &format!("{uri}?fieldValidation=Strict"), body).await;
    assert_eq!(code, 400, "{status}");
    assert!(status["message"].as_str().unwrap().contains(r#"unknown field "bogus""#), "{status}");
    let (code, warnings, created) = send(&client, Method::POST, uri, body).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(warnings, [r#"299 - "unknown field \"bogus\"""#]);
    assert!(created.get("bogus").is_none());
    assert_eq!(created["data"], json!({"a": "b"}));
    // Duplicate fields are unknown-field problems too.
    let duplicated = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"d"},"data":{"a":"b","a":"c"}}"#;
    let (code, _, status) = send(&client, Method::POST, &format!("{uri}?fieldValidation=Strict"), duplicated).await;
    assert_eq!(code, 400, "{status}");
    assert!(status["message"].as_str().unwrap().contains(r#"duplicate field "data.a""#), "{status}");
}

async fn send_as(client: &kube::Client, method: Method, uri: &str, content_type: &str, body: &str) -> (u16, Vec<String>, Value) {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header("Content-Type", content_type)
        .body(kube::client::Body::from(body.as_bytes().to_vec()))
        .unwrap();
    let response = client.send(request).await.unwrap();
    let code = response.status().as_u16();
    let warnings = response.headers().get_all("warning").iter().map(|v| v.to_str().unwrap().to_string()).collect();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (code, warnings, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

#[tokio::test]
async fn field_validation_on_updates_and_patches() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let (code, _, crd) = send(&client, Method::POST, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD).await;
    assert_eq!(code, 201, "{crd}");
    const MERGE: &str = "application/merge-patch+json";
    const JSON: &str = "application/json";
    let item = format!("{URI}/a");
    let cm = "/api/v1/namespaces/default/configmaps/c";

    // Ignore: unknown fields are pruned silently, on create, PUT and PATCH alike.
    let body = r#"{"apiVersion":"example.com/v1","kind":"Pod2","metadata":{"name":"a"},"spec":{"size":3,"bogus":1}}"#;
    let (code, warnings, created) = send_as(&client, Method::POST, &format!("{URI}?fieldValidation=Ignore"), JSON, body).await;
    assert_eq!((code, warnings.len()), (201, 0), "{created} {warnings:?}");
    assert!(created["spec"].get("bogus").is_none(), "{created}");
    let mut replaced = created.clone();
    replaced["spec"]["size"] = json!(4);
    replaced["spec"]["bogus"] = json!(2);
    replaced["stray"] = json!(true);
    let (code, warnings, put) = send_as(&client, Method::PUT, &format!("{item}?fieldValidation=Ignore"), JSON, &replaced.to_string()).await;
    assert_eq!((code, warnings.len()), (200, 0), "{put} {warnings:?}");
    assert_eq!(put["spec"]["size"], 4);
    assert!(put["spec"].get("bogus").is_none() && put.get("stray").is_none(), "{put}");
    let (code, warnings, patched) =
        send_as(&client, Method::PATCH, &format!("{item}?fieldValidation=Ignore"), MERGE, r#"{"spec":{"size":5,"bogus":3}}"#).await;
    assert_eq!((code, warnings.len()), (200, 0), "{patched} {warnings:?}");
    assert_eq!(patched["spec"]["size"], 5);
    assert!(patched["spec"].get("bogus").is_none(), "{patched}");
    // Warn, the default, says what it pruned.
    let (code, warnings, _) = send_as(&client, Method::PATCH, &item, MERGE, r#"{"spec":{"bogus":4}}"#).await;
    assert_eq!((code, warnings), (200, vec![r#"299 - "unknown field \"spec.bogus\"""#.to_string()]));

    // Strict: a 400 naming the unknown field, for PUT and PATCH, and nothing stored.
    let (_, _, before) = send(&client, Method::GET, &item, "").await;
    let mut strict_put = before.clone();
    strict_put["spec"]["size"] = json!(6);
    strict_put["spec"]["bogus"] = json!(5);
    let (code, _, status) = send_as(&client, Method::PUT, &format!("{item}?fieldValidation=Strict"), JSON, &strict_put.to_string()).await;
    assert_eq!((code, status["reason"].as_str()), (400, Some("BadRequest")), "{status}");
    assert!(status["message"].as_str().unwrap().contains(r#"unknown field "spec.bogus""#), "{status}");
    let (code, _, status) =
        send_as(&client, Method::PATCH, &format!("{item}?fieldValidation=Strict"), MERGE, r#"{"spec":{"size":7,"bogus":6}}"#).await;
    assert_eq!((code, status["reason"].as_str()), (400, Some("BadRequest")), "{status}");
    assert!(status["message"].as_str().unwrap().contains(r#"unknown field "spec.bogus""#), "{status}");
    let (_, _, after) = send(&client, Method::GET, &item, "").await;
    assert_eq!(after, before, "the refused writes stored nothing");
    assert_eq!(after["spec"]["size"], 5);

    // The same for a built-in kind.
    let body = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"a":"b"}}"#;
    assert_eq!(send(&client, Method::POST, "/api/v1/namespaces/default/configmaps", body).await.0, 201);
    let (code, _, status) = send_as(&client, Method::PATCH, &format!("{cm}?fieldValidation=Strict"), MERGE, r#"{"data":{"a":"c"},"bogus":1}"#).await;
    assert_eq!(code, 400, "{status}");
    assert!(status["message"].as_str().unwrap().contains(r#"unknown field "bogus""#), "{status}");
    let (_, _, stored) = send(&client, Method::GET, cm, "").await;
    let mut put = stored.clone();
    put["data"]["a"] = json!("d");
    put["bogus"] = json!(1);
    let (code, _, status) = send_as(&client, Method::PUT, &format!("{cm}?fieldValidation=Strict"), JSON, &put.to_string()).await;
    assert_eq!(code, 400, "{status}");
    assert!(status["message"].as_str().unwrap().contains(r#"unknown field "bogus""#), "{status}");
    assert_eq!(send(&client, Method::GET, cm, "").await.2, stored, "nothing stored");
    let (code, warnings, ignored) = send_as(&client, Method::PUT, &format!("{cm}?fieldValidation=Ignore"), JSON, &put.to_string()).await;
    assert_eq!((code, warnings.len()), (200, 0), "{ignored} {warnings:?}");
    assert_eq!(ignored["data"]["a"], "d");
    assert!(ignored.get("bogus").is_none(), "{ignored}");
    server.stop().await;
}
