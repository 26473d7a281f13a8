//! Admission webhooks over HTTPS: a validating and a mutating webhook served by a small HTTPS
//! server with a certificate from its own CA (the `caBundle`) deny and mutate as configured, in
//! kube-apiserver's order (mutating before schema validation, validating after); selectors,
//! matchConditions, dry run, failurePolicy with the webhook down, a webhook answering garbage,
//! a `service` target found through a Service's address annotation, configurations
//! kube-apiserver would refuse, and `matchPolicy` (a write through another version of a
//! resource reaches an `Equivalent` webhook converted to the version it names).

use crate::support;

use std::sync::{Arc, Mutex};

use http::{Method, Request};
use http_body_util::BodyExt;
use oxplane_apiserver::webhooks::serve::{Handler, WebhookServer, admission_response};
use serde_json::{Value, json};
use support::TestServer;

async fn send(client: &kube::Client, method: Method, uri: &str, body: Value) -> (u16, Vec<String>, Value) {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header("Content-Type", "application/json")
        .body(kube::client::Body::from(serde_json::to_vec(&body).unwrap()))
        .unwrap();
    let response = client.send(request).await.unwrap();
    let code = response.status().as_u16();
    let warnings = response.headers().get_all("warning").iter().map(|v| v.to_str().unwrap().to_string()).collect();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (code, warnings, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

fn config_map(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}, "data": {"k": "v"}})
}

const CONFIG_MAPS: &str = "/api/v1/namespaces/default/configmaps";

/// The reviews a webhook server received, by path.
type Seen = Arc<Mutex<Vec<(String, Value)>>>;

/// `/mutate` adds the label `mutated: yes` and warns; `/count` sets the label `count` to the
/// number of the others; `/validate` refuses ConfigMaps labelled
/// `deny` and any without `mutated` (so it proves the mutation came first); `/garbage`
/// answers something that is no AdmissionReview; `/wrong-uid` answers for another request.
async fn webhook_server(names: &[&str]) -> (WebhookServer, Seen) {
    let seen: Seen = Arc::default();
    let record = seen.clone();
    let handler: Handler = Arc::new(move |path: &str, body: &[u8]| {
        let review: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        record.lock().unwrap().push((path.to_string(), review.clone()));
        let labels = if review["request"]["operation"] == "DELETE" {
            review["request"]["oldObject"]["metadata"]["labels"].clone()
        } else {
            review["request"]["object"]["metadata"]["labels"].clone()
        };
        let answer = match path {
            "/mutate" => {
                let patch = if labels.is_object() {
                    json!([{"op": "add", "path": "/metadata/labels/mutated", "value": "yes"}])
                } else {
                    json!([{"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}}])
                };
                admission_response(&review, true, None, Some(&patch), &["labelled by the test webhook"])
            }
            "/validate" if labels["deny"].is_string() => admission_response(&review, false, Some("configmaps labelled deny are refused"), None, &[]),
            "/validate" if review["request"]["operation"] != "DELETE" && labels["mutated"] != "yes" => {
                admission_response(&review, false, Some("not mutated first"), None, &[])
            }
            "/validate" => admission_response(&review, true, None, None, &[]),
            "/allow" => admission_response(&review, true, None, None, &[]),
            "/count" => {
                let count = labels.as_object().map_or(0, |l| l.keys().filter(|k| *k != "count").count());
                let patch = json!([{"op": "add", "path": "/metadata/labels/count", "value": count.to_string()}]);
                admission_response(&review, true, None, Some(&patch), &[])
            }
            "/wrong-uid" => json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {"uid": "another", "allowed": true}}),
            _ => return (200, b"<html>not a webhook</html>".to_vec()),
        };
        (200, serde_json::to_vec(&answer).unwrap())
    });
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    (WebhookServer::start("127.0.0.1:0", &names, handler).await.unwrap(), seen)
}

fn webhook(name: &str, client_config: Value, extra: Value) -> Value {
    let mut hook = json!({
        "name": name,
        "clientConfig": client_config,
        "rules": [{"operations": ["CREATE", "UPDATE", "DELETE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"], "scope": "Namespaced"}],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 5,
    });
    for (k, v) in extra.as_object().unwrap() {
        hook[k] = v.clone();
    }
    hook
}

async fn configure(client: &kube::Client, kind: &str, name: &str, webhooks: Value) {
    let plural = format!("{}s", kind.to_lowercase());
    let body = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": name}, "webhooks": webhooks});
    let (code, _, answer) = send(client, Method::POST, &format!("/apis/admissionregistration.k8s.io/v1/{plural}"), body).await;
    assert_eq!(code, 201, "{answer}");
}

async fn remove(client: &kube::Client, kind: &str, name: &str) {
    let plural = format!("{}s", kind.to_lowercase());
    let (code, _, answer) = send(client, Method::DELETE, &format!("/apis/admissionregistration.k8s.io/v1/{plural}/{name}"), json!({})).await;
    assert_eq!(code, 200, "{answer}");
}

async fn stored(client: &kube::Client, name: &str) -> Option<Value> {
    let (code, _, object) = send(client, Method::GET, &format!("{CONFIG_MAPS}/{name}"), Value::Null).await;
    (code == 200).then_some(object)
}

#[tokio::test]
async fn validating_and_mutating_webhooks_deny_and_mutate_in_order() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let (hooks, seen) = webhook_server(&["127.0.0.1"]).await;
    let ca = hooks.ca_bundle();
    configure(&client, "MutatingWebhookConfiguration", "labeller", json!([webhook("label.example.com", json!({"url": hooks.url("/mutate"), "caBundle": ca}), json!({}))])).await;
    configure(&client, "ValidatingWebhookConfiguration", "policy", json!([webhook("policy.example.com", json!({"url": hooks.url("/validate"), "caBundle": ca}), json!({}))])).await;

    // Mutated (the validating webhook sees the label), stored with it, warning passed on.
    let (code, warnings, object) = send(&client, Method::POST, CONFIG_MAPS, config_map("plain", json!({"app": "a"}))).await;
    assert_eq!(code, 201, "{object}");
    assert_eq!(object["metadata"]["labels"], json!({"app": "a", "mutated": "yes"}));
    assert_eq!(warnings, vec!["299 - \"labelled by the test webhook\"".to_string()]);
    assert_eq!(stored(&client, "plain").await.unwrap()["metadata"]["labels"]["mutated"], "yes");

    // Denied with the webhook's message after kube-apiserver's prefix; nothing stored.
    let (code, _, status) = send(&client, Method::POST, CONFIG_MAPS, config_map("refused", json!({"deny": "1"}))).await;
    assert_eq!(code, 403, "{status}");
    assert_eq!(status["message"], "admission webhook \"policy.example.com\" denied the request: configmaps labelled deny are refused");
    assert!(stored(&client, "refused").await.is_none());

    // An update to a denied state is refused too, and the stored object stays as it was.
    let mut update = stored(&client, "plain").await.unwrap();
    update["metadata"]["labels"]["deny"] = json!("now");
    let (code, _, _) = send(&client, Method::PUT, &format!("{CONFIG_MAPS}/plain"), update).await;
    assert_eq!(code, 403);
    assert!(stored(&client, "plain").await.unwrap()["metadata"]["labels"].get("deny").is_none());

    // What the webhooks were sent: AdmissionReview v1 with the user, kinds and old object.
    let reviews = seen.lock().unwrap().clone();
    let (_, update_review) = reviews.iter().rev().find(|(p, r)| p == "/validate" && r["request"]["operation"] == "UPDATE").unwrap();
    let request = &update_review["request"];
    assert_eq!(update_review["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(request["kind"], json!({"group": "", "version": "v1", "kind": "ConfigMap"}));
    assert_eq!(request["resource"], json!({"group": "", "version": "v1", "resource": "configmaps"}));
    assert_eq!(request["namespace"], "default");
    assert_eq!(request["name"], "plain");
    assert_eq!(request["userInfo"]["username"], "oxplane-admin");
    assert_eq!(request["oldObject"]["metadata"]["name"], "plain");
    assert_eq!(request["dryRun"], false);

    // Dry run reaches webhooks whose sideEffects allow it, flagged; nothing stored.
    let (code, _, _) = send(&client, Method::POST, &format!("{CONFIG_MAPS}?dryRun=All"), config_map("dry", json!({}))).await;
    assert_eq!(code, 201);
    assert!(stored(&client, "dry").await.is_none());
    assert!(seen.lock().unwrap().iter().any(|(_, r)| r["request"]["name"] == "dry" && r["request"]["dryRun"] == true));

    // Deleting is validated against the stored object.
    let (code, _, _) = send(&client, Method::DELETE, &format!("{CONFIG_MAPS}/plain"), json!({})).await;
    assert_eq!(code, 200);
    assert!(seen.lock().unwrap().iter().any(|(p, r)| p == "/validate" && r["request"]["operation"] == "DELETE" && r["request"]["object"].is_null()));

    // Requests on the configurations themselves never reach webhooks: a bad one can be removed.
    remove(&client, "ValidatingWebhookConfiguration", "policy").await;
    remove(&client, "MutatingWebhookConfiguration", "labeller").await;
    let (code, _, object) = send(&client, Method::POST, CONFIG_MAPS, config_map("free", json!({"deny": "1"}))).await;
    assert_eq!(code, 201, "{object}");
    assert!(object["metadata"]["labels"].get("mutated").is_none());
}

#[tokio::test]
async fn selectors_conditions_and_side_effects_decide_who_is_called() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let (hooks, seen) = webhook_server(&["127.0.0.1"]).await;
    let config = json!({"url": hooks.url("/validate"), "caBundle": hooks.ca_bundle()});
    let (code, _, _) = send(&client, Method::POST, "/api/v1/namespaces", json!({"metadata": {"name": "guarded", "labels": {"policy": "on"}}})).await;
    assert_eq!(code, 201);
    configure(&client, "ValidatingWebhookConfiguration", "scoped", json!([
        webhook("namespaces.example.com", config.clone(), json!({"namespaceSelector": {"matchLabels": {"policy": "on"}}})),
        webhook("objects.example.com", config.clone(), json!({"objectSelector": {"matchExpressions": [{"key": "checked", "operator": "Exists"}]}})),
        webhook("conditions.example.com", config.clone(), json!({"matchConditions": [{"name": "named-x", "expression": "object.metadata.name.startsWith('x-')"}]})),
    ])).await;

    // Only the webhook whose selector matches is called; each refuses for lack of `mutated`.
    let (code, _, status) = send(&client, Method::POST, "/api/v1/namespaces/guarded/configmaps", config_map("a", json!({}))).await;
    assert_eq!(code, 403);
    assert_eq!(status["message"], "admission webhook \"namespaces.example.com\" denied the request: not mutated first");
    let (code, _, status) = send(&client, Method::POST, CONFIG_MAPS, config_map("b", json!({"checked": "yes"}))).await;
    assert_eq!(code, 403);
    assert!(status["message"].as_str().unwrap().contains("\"objects.example.com\""), "{status}");
    let (code, _, status) = send(&client, Method::POST, CONFIG_MAPS, config_map("x-c", json!({}))).await;
    assert_eq!(code, 403);
    assert!(status["message"].as_str().unwrap().contains("\"conditions.example.com\""), "{status}");
    let before = seen.lock().unwrap().len();
    let (code, _, _) = send(&client, Method::POST, CONFIG_MAPS, config_map("d", json!({}))).await;
    assert_eq!(code, 201, "no webhook matches d");
    assert_eq!(seen.lock().unwrap().len(), before, "no webhook was called for d");
    // Other resources are not covered by the rules.
    let (code, _, _) = send(&client, Method::POST, "/api/v1/namespaces/guarded/secrets", json!({"metadata": {"name": "s"}})).await;
    assert_eq!(code, 201);

    // A webhook declaring `NoneOnDryRun` is called for a dry run (v1 accepts no other
    // side effects, so no stored webhook can make a dry run fail for want of support).
    configure(&client, "ValidatingWebhookConfiguration", "effects", json!([
        webhook("effects.example.com", config, json!({"sideEffects": "NoneOnDryRun", "objectSelector": {"matchLabels": {"effects": "yes"}}})),
    ])).await;
    let (code, _, _) = send(&client, Method::POST, &format!("{CONFIG_MAPS}?dryRun=All"), config_map("e", json!({"effects": "yes", "mutated": "yes"}))).await;
    assert_eq!(code, 201, "NoneOnDryRun webhooks are called with dryRun");
}

#[tokio::test]
async fn failure_policy_decides_when_the_webhook_is_down_or_answers_garbage() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let (hooks, _) = webhook_server(&["127.0.0.1"]).await;
    let ca = hooks.ca_bundle();
    // A port nothing listens on: bind one, then free it.
    let down = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("https://{}/validate", listener.local_addr().unwrap())
    };
    configure(&client, "ValidatingWebhookConfiguration", "down", json!([
        webhook("ignored.example.com", json!({"url": down, "caBundle": ca}), json!({"failurePolicy": "Ignore", "objectSelector": {"matchLabels": {"policy": "ignore"}}})),
        webhook("failing.example.com", json!({"url": down, "caBundle": ca}), json!({"failurePolicy": "Fail", "objectSelector": {"matchLabels": {"policy": "fail"}}})),
        webhook("garbage.example.com", json!({"url": hooks.url("/garbage"), "caBundle": ca}), json!({"objectSelector": {"matchLabels": {"policy": "garbage"}}})),
        webhook("uid.example.com", json!({"url": hooks.url("/wrong-uid"), "caBundle": ca}), json!({"objectSelector": {"matchLabels": {"policy": "uid"}}})),
        webhook("untrusted.example.com", json!({"url": hooks.url("/validate")}), json!({"objectSelector": {"matchLabels": {"policy": "untrusted"}}})),
    ])).await;

    let (code, _, object) = send(&client, Method::POST, CONFIG_MAPS, config_map("ignored", json!({"policy": "ignore"}))).await;
    assert_eq!(code, 201, "failurePolicy Ignore lets the request through: {object}");

    let (code, _, status) = send(&client, Method::POST, CONFIG_MAPS, config_map("failed", json!({"policy": "fail"}))).await;
    assert_eq!(code, 500, "{status}");
    assert_eq!(status["reason"], "InternalError");
    let message = status["message"].as_str().unwrap();
    assert!(message.starts_with(&format!("Internal error occurred: failed calling webhook \"failing.example.com\": failed to call webhook: Post \"{down}?timeout=5s\": dial tcp ")), "{message}");
    assert!(message.ends_with("connect: connection refused"), "{message}");
    assert!(stored(&client, "failed").await.is_none());

    let (code, _, status) = send(&client, Method::POST, CONFIG_MAPS, config_map("garbage", json!({"policy": "garbage"}))).await;
    assert_eq!(code, 500, "{status}");
    let message = status["message"].as_str().unwrap();
    assert!(message.starts_with("Internal error occurred: failed calling webhook \"garbage.example.com\": failed to call webhook: Post "), "{message}");
    assert!(message.ends_with("the response is not JSON: expected value at line 1 column 1"), "{message}");
    assert!(stored(&client, "garbage").await.is_none());

    let (code, _, status) = send(&client, Method::POST, CONFIG_MAPS, config_map("uid", json!({"policy": "uid"}))).await;
    assert_eq!(code, 500, "{status}");
    let message = status["message"].as_str().unwrap();
    assert!(message.starts_with("Internal error occurred: failed calling webhook \"uid.example.com\": received invalid webhook response: expected response.uid=\""), "{message}");
    assert!(message.ends_with("\", got \"another\""), "{message}");
    assert!(stored(&client, "uid").await.is_none());

    // Without the caBundle, the test CA is not trusted.
    let (code, _, status) = send(&client, Method::POST, CONFIG_MAPS, config_map("untrusted", json!({"policy": "untrusted"}))).await;
    assert_eq!(code, 500, "{status}");
    assert!(status["message"].as_str().unwrap().contains("tls: failed to verify certificate"), "{status}");
}

#[tokio::test]
async fn a_service_reference_reaches_the_address_its_service_names() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let (hooks, seen) = webhook_server(&["policy.webhooks.svc"]).await;
    let (code, _, _) = send(&client, Method::POST, "/api/v1/namespaces", json!({"metadata": {"name": "webhooks"}})).await;
    assert_eq!(code, 201);
    let service_config = json!({"service": {"namespace": "webhooks", "name": "policy", "path": "/validate", "port": 8443}, "caBundle": hooks.ca_bundle()});
    configure(&client, "ValidatingWebhookConfiguration", "by-service", json!([webhook("service.example.com", service_config, json!({}))])).await;

    // No such Service yet: a failed call naming it.
    let (code, _, status) = send(&client, Method::POST, CONFIG_MAPS, config_map("early", json!({"mutated": "yes"}))).await;
    assert_eq!(code, 500);
    assert!(status["message"].as_str().unwrap().ends_with("failed to call webhook: service \"webhooks/policy\" not found"), "{status}");

    let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "policy", "annotations": {"oxplane.io/address": hooks.address.to_string()}},
        "spec": {"ports": [{"name": "https", "port": 8443}]}});
    let (code, _, answer) = send(&client, Method::POST, "/api/v1/namespaces/webhooks/services", service).await;
    assert_eq!(code, 201, "{answer}");
    let (code, _, status) = send(&client, Method::POST, CONFIG_MAPS, config_map("denied", json!({"deny": "1"}))).await;
    assert_eq!(code, 403, "{status}");
    let (code, _, _) = send(&client, Method::POST, CONFIG_MAPS, config_map("allowed", json!({"mutated": "yes"}))).await;
    assert_eq!(code, 201);
    assert!(seen.lock().unwrap().iter().any(|(p, r)| p == "/validate" && r["request"]["name"] == "allowed"));
}

#[tokio::test]
async fn configurations_kube_apiserver_refuses_are_refused() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let body = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "bad"},
        "webhooks": [{"name": "bad", "clientConfig": {"url": "http://127.0.0.1:1/x"}, "admissionReviewVersions": ["v1"], "sideEffects": "Some"}]});
    let (code, _, status) = send(&client, Method::POST, "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", body).await;
    assert_eq!(code, 422, "{status}");
    let fields: Vec<&str> = status["details"]["causes"].as_array().unwrap().iter().map(|c| c["field"].as_str().unwrap()).collect();
    assert_eq!(fields, ["webhooks[0].name", "webhooks[0].sideEffects", "webhooks[0].clientConfig.url"]);
    assert!(status["message"].as_str().unwrap().starts_with("ValidatingWebhookConfiguration.admissionregistration.k8s.io \"bad\" is invalid: "), "{status}");
}

#[tokio::test]
async fn an_if_needed_webhook_is_called_again_after_a_later_change() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let (hooks, seen) = webhook_server(&["127.0.0.1"]).await;
    let ca = hooks.ca_bundle();
    // Configurations run in name order: the counter first, then the labeller changes the object.
    configure(&client, "MutatingWebhookConfiguration", "a-counter", json!([
        webhook("count.example.com", json!({"url": hooks.url("/count"), "caBundle": ca}), json!({"reinvocationPolicy": "IfNeeded"})),
    ])).await;
    configure(&client, "MutatingWebhookConfiguration", "b-labeller", json!([webhook("label.example.com", json!({"url": hooks.url("/mutate"), "caBundle": ca}), json!({}))])).await;
    let (code, _, object) = send(&client, Method::POST, CONFIG_MAPS, config_map("counted", json!({"app": "a"}))).await;
    assert_eq!(code, 201, "{object}");
    assert_eq!(object["metadata"]["labels"], json!({"app": "a", "mutated": "yes", "count": "2"}));
    let calls = seen.lock().unwrap().iter().filter(|(p, r)| p == "/count" && r["request"]["name"] == "counted").count();
    assert_eq!(calls, 2);

    // With the default policy (Never) it is called once and misses the later change.
    remove(&client, "MutatingWebhookConfiguration", "a-counter").await;
    configure(&client, "MutatingWebhookConfiguration", "a-counter", json!([
        webhook("count.example.com", json!({"url": hooks.url("/count"), "caBundle": ca}), json!({})),
    ])).await;
    let (code, _, object) = send(&client, Method::POST, CONFIG_MAPS, config_map("once", json!({"app": "a"}))).await;
    assert_eq!(code, 201, "{object}");
    assert_eq!(object["metadata"]["labels"]["count"], "1");
}

/// Under `matchPolicy: Equivalent` (the default) a webhook whose rules name one version of a
/// resource is called for writes through another, with the object converted to the version it
/// named (`kind`/`resource` that version, `requestKind`/`requestResource` the one written); an
/// `Exact` webhook is not called.
#[tokio::test]
async fn an_equivalent_webhook_sees_writes_through_other_versions_in_its_own() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gizmos.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"},
            "versions": [
                {"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
                {"name": "v2", "served": true, "storage": false, "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}
            ]
        }
    });
    let (code, _, answer) = send(&client, Method::POST, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd).await;
    assert_eq!(code, 201, "{answer}");
    let (hooks, seen) = webhook_server(&["127.0.0.1"]).await;
    let ca = hooks.ca_bundle();
    let rules = json!([{"operations": ["CREATE"], "apiGroups": ["example.com"], "apiVersions": ["v1"], "resources": ["gizmos"]}]);
    configure(
        &client,
        "ValidatingWebhookConfiguration",
        "gizmos",
        json!([
            webhook("equivalent.example.com", json!({"url": hooks.url("/allow"), "caBundle": ca}), json!({"rules": rules})),
            webhook("exact.example.com", json!({"url": hooks.url("/exact"), "caBundle": ca}), json!({"rules": rules, "matchPolicy": "Exact"})),
        ]),
    )
    .await;

    // A mutating one too: its patch of the v1 object comes back to the v2 written.
    configure(&client, "MutatingWebhookConfiguration", "gizmos", json!([webhook("label.example.com", json!({"url": hooks.url("/mutate"), "caBundle": ca}), json!({"rules": rules}))])).await;

    let gizmo = json!({"apiVersion": "example.com/v2", "kind": "Gizmo", "metadata": {"name": "g"}, "spec": {"size": 1}});
    let (code, _, answer) = send(&client, Method::POST, "/apis/example.com/v2/namespaces/default/gizmos", gizmo).await;
    assert_eq!(code, 201, "{answer}");
    assert_eq!(answer["apiVersion"], "example.com/v2", "answered in the version written");
    assert_eq!(answer["metadata"]["labels"]["mutated"], "yes", "{answer}");
    let seen = seen.lock().unwrap().clone();
    let paths: Vec<&str> = seen.iter().map(|(path, _)| path.as_str()).collect();
    assert_eq!(paths, ["/mutate", "/allow"], "the Exact webhook is not called");
    assert_eq!(seen[0].1["request"]["object"]["apiVersion"], "example.com/v1");
    let request = &seen[1].1["request"];
    assert_eq!(request["object"]["metadata"]["labels"]["mutated"], "yes", "validated after the mutation");
    assert_eq!(request["object"]["apiVersion"], "example.com/v1", "{request}");
    assert_eq!(request["object"]["spec"]["size"], 1);
    assert_eq!(request["kind"], json!({"group": "example.com", "version": "v1", "kind": "Gizmo"}));
    assert_eq!(request["resource"], json!({"group": "example.com", "version": "v1", "resource": "gizmos"}));
    assert_eq!(request["requestKind"], json!({"group": "example.com", "version": "v2", "kind": "Gizmo"}));
    assert_eq!(request["requestResource"], json!({"group": "example.com", "version": "v2", "resource": "gizmos"}));
}
