//! A CRD with two versions and a conversion webhook (`strategy: Webhook`, served over HTTPS by
//! the test with a certificate from its own CA) through the real `kubectl`: objects written
//! through either version are stored in the storage version and read, listed, patched and
//! watched through both; a webhook that fails is reported as kube-apiserver reports it.

use crate::support;

use std::sync::{Arc, Mutex};

use oxplane_apiserver::webhooks::serve::{Handler, WebhookServer};
use serde_json::{Value, json};
use support::Server;

/// Renames `spec.color` (v1) and `spec.colour` (v2) into each other; `/fail` refuses.
fn converter(seen: Arc<Mutex<Vec<String>>>) -> Handler {
    Arc::new(move |path: &str, body: &[u8]| {
        let review: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        let desired = review["request"]["desiredAPIVersion"].as_str().unwrap_or_default().to_string();
        seen.lock().unwrap().push(desired.clone());
        let uid = review["request"]["uid"].clone();
        if path == "/fail" {
            let answer = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                "response": {"uid": uid, "result": {"status": "Failure", "message": "the converter is broken"}}});
            return (200, answer.to_string().into_bytes());
        }
        let converted: Vec<Value> = review["request"]["objects"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .map(|mut object| {
                let (from, to) = if desired.ends_with("/v2") { ("color", "colour") } else { ("colour", "color") };
                if let Some(value) = object["spec"].as_object_mut().and_then(|spec| spec.remove(from)) {
                    object["spec"][to] = value;
                }
                object["apiVersion"] = json!(desired);
                object
            })
            .collect();
        let answer = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": {"uid": uid, "convertedObjects": converted, "result": {"status": "Success"}}});
        (200, answer.to_string().into_bytes())
    })
}

fn crd(plural: &str, kind: &str, url: &str, ca_bundle: &str) -> String {
    let schema = |field: &str| json!({"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {field: {"type": "string"}}}}}});
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.example.com")},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind},
            "conversion": {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {"url": url, "caBundle": ca_bundle}}},
            "versions": [
                {"name": "v1", "served": true, "storage": true, "schema": schema("color")},
                {"name": "v2", "served": true, "storage": false, "schema": schema("colour")}]}})
    .to_string()
}

#[test]
fn a_conversion_webhook_serves_both_versions_through_kubectl() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let hooks = runtime
        .block_on(WebhookServer::start("127.0.0.1:0", &["127.0.0.1".to_string()], converter(seen.clone())))
        .unwrap();
    let server = Server::start();
    server.kubectl_stdin(&["create", "-f", "-"], &crd("gizmos", "Gizmo", &hooks.url("/convert"), &hooks.ca_bundle()));
    server.kubectl(&["wait", "--for=condition=Established", "crd/gizmos.example.com", "--timeout=60s"]);

    // Written through v1 (the storage version), read through v2.
    server.kubectl_stdin(&["create", "-f", "-"], r#"{"apiVersion":"example.com/v1","kind":"Gizmo","metadata":{"name":"old"},"spec":{"color":"red"}}"#);
    let v2 = server.kubectl(&["get", "gizmos.v2.example.com", "old", "-o", "json"]);
    let v2: Value = serde_json::from_str(&v2).unwrap();
    assert_eq!(v2["apiVersion"], "example.com/v2");
    assert_eq!(v2["spec"], json!({"colour": "red"}));

    // Written through v2: converted to v1 to be stored, read back through both.
    seen.lock().unwrap().clear();
    let created = server.kubectl_stdin(&["create", "-f", "-", "-o", "json"], r#"{"apiVersion":"example.com/v2","kind":"Gizmo","metadata":{"name":"new"},"spec":{"colour":"blue"}}"#);
    let created: Value = serde_json::from_str(&created).unwrap();
    assert_eq!(created["apiVersion"], "example.com/v2");
    assert_eq!(created["spec"], json!({"colour": "blue"}));
    assert!(seen.lock().unwrap().iter().any(|v| v == "example.com/v1"), "stored in v1 through the webhook");
    assert_eq!(server.kubectl(&["get", "gizmos.v1.example.com", "new", "-o", "jsonpath={.spec.color}"]), "blue");

    // A list through v2 converts every object; a patch through v2 lands in both views.
    let list = server.kubectl(&["get", "gizmos.v2.example.com", "-o", "jsonpath={range .items[*]}{.metadata.name}={.spec.colour} {end}"]);
    assert_eq!(list.trim(), "new=blue old=red");
    server.kubectl(&["patch", "gizmos.v2.example.com", "old", "--type=merge", "-p", r#"{"spec":{"colour":"green"}}"#]);
    assert_eq!(server.kubectl(&["get", "gizmos.v1.example.com", "old", "-o", "jsonpath={.spec.color}"]), "green");
    assert_eq!(server.kubectl(&["get", "gizmos.v2.example.com", "old", "-o", "jsonpath={.spec.colour}"]), "green");

    // A watch through v2 sees objects converted.
    let watched = server.kubectl(&["get", "gizmos.v2.example.com", "--watch", "--request-timeout=2s", "-o", "jsonpath={.spec.colour} "]);
    assert!(watched.contains("green") && watched.contains("blue"), "{watched}");

    // A webhook that refuses: the read fails as kube-apiserver's does, the object is intact.
    server.kubectl_stdin(&["create", "-f", "-"], &crd("brokens", "Broken", &hooks.url("/fail"), &hooks.ca_bundle()));
    server.kubectl(&["wait", "--for=condition=Established", "crd/brokens.example.com", "--timeout=60s"]);
    server.kubectl_stdin(&["create", "-f", "-"], r#"{"apiVersion":"example.com/v1","kind":"Broken","metadata":{"name":"b"},"spec":{"color":"red"}}"#);
    let error = server.kubectl_fails(&["get", "brokens.v2.example.com", "b"], "");
    assert!(error.contains("conversion webhook for example.com/v1, Kind=Broken failed: the converter is broken"), "{error}");
    let error = server.kubectl_fails(&["create", "-f", "-"], r#"{"apiVersion":"example.com/v2","kind":"Broken","metadata":{"name":"c"},"spec":{"colour":"red"}}"#);
    assert!(error.contains("conversion webhook for example.com/v2, Kind=Broken failed: the converter is broken"), "{error}");
    assert_eq!(server.kubectl(&["get", "brokens.v1.example.com", "-o", "name"]).trim(), "broken.example.com/b");

    // A CRD whose webhook strategy names no client is refused.
    let invalid = r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"bads.example.com"},
      "spec":{"group":"example.com","scope":"Namespaced","names":{"plural":"bads","kind":"Bad"},"conversion":{"strategy":"Webhook"},
      "versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object"}}}]}}"#;
    let error = server.kubectl_fails(&["create", "-f", "-"], invalid);
    assert!(error.contains("spec.conversion.webhook.clientConfig: Required value: required when strategy is set to Webhook"), "{error}");
    drop(hooks);
    drop(runtime);
}
