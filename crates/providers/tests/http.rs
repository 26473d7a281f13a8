//! provider-http against a real HTTP service (a small REST service served by the test) and an
//! in-process API server: Requests create, observe, update (also correcting changes made on
//! the server) and delete users; secrets are injected into requests and never shown; answers
//! are copied into Secrets; DisposableRequests send once, retry up to their limit, or loop;
//! a stopped server, a 500, a slow answer and an unexpected body are `Synced=False` naming the
//! target and the cause.

use crate::support;

use std::time::Duration;

use oxplane_providers::http::testing::RestServer;
use oxplane_providers::http::{self, HttpProvider};
use oxplane_runtime::conditions;
use oxplane_runtime::kinds::Kind;
use serde_json::{Value, json};
use support::{events_of, start};

const SECRET_TOKEN: &str = "tok-3f9a61c2";

fn kind(name: &str, namespaced: bool) -> Kind {
    let group = if namespaced { http::NAMESPACED_GROUP } else { http::CLUSTER_GROUP };
    let plural = format!("{}s", name.to_lowercase());
    Kind::new(group, http::VERSION, name, &plural, namespaced)
}

fn secret_kind() -> Kind {
    Kind::new("", "v1", "Secret", "secrets", true)
}

async fn setup() -> (oxplane_apiserver::testing::RunningServer, oxplane_runtime::Runtime, oxplane_runtime::provider::ProviderHandle, RestServer) {
    let (server, runtime) = start().await;
    let provider = HttpProvider { poll_interval: Duration::from_secs(1), ..Default::default() };
    let handle = support::install(&runtime, &provider, "xpkg.crossplane.io/crossplane-contrib/provider-http:v1.0.11").await;
    let config = json!({"apiVersion": "http.crossplane.io/v1alpha1", "kind": "ProviderConfig", "metadata": {"name": "default"}, "spec": {"credentials": {"source": "None"}}});
    runtime.kube.create(&Kind::new(http::CLUSTER_GROUP, "v1alpha1", "ProviderConfig", "providerconfigs", false), &config).await.unwrap();
    let cluster_config = json!({"apiVersion": "http.m.crossplane.io/v1alpha2", "kind": "ClusterProviderConfig", "metadata": {"name": "default"}, "spec": {"credentials": {"source": "None"}}});
    runtime.kube.create(&Kind::new(http::NAMESPACED_GROUP, "v1alpha2", "ClusterProviderConfig", "clusterproviderconfigs", false), &cluster_config).await.unwrap();
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "auth", "namespace": "default"}, "stringData": {"token": SECRET_TOKEN}});
    runtime.kube.create(&secret_kind(), &secret).await.unwrap();
    let rest = RestServer::start().await.unwrap();
    (server, runtime, handle, rest)
}

/// A user Request in the shape of upstream's examples: the server assigns the id, which
/// later URLs take from the last answer.
fn user_request(name: &str, base_url: &str, username: &str, email: &str, namespace: Option<&str>) -> Value {
    let mut metadata = json!({"name": name});
    if let Some(ns) = namespace {
        metadata["namespace"] = json!(ns);
    }
    json!({
        "apiVersion": format!("{}/v1alpha2", if namespace.is_some() { http::NAMESPACED_GROUP } else { http::CLUSTER_GROUP }),
        "kind": "Request",
        "metadata": metadata,
        "spec": {"forProvider": {
            "headers": {"Content-Type": ["application/json"], "Authorization": ["Bearer {{ auth:default:token }}"]},
            "payload": {"baseUrl": format!("{base_url}/users"), "body": json!({"username": username, "email": email}).to_string()},
            "mappings": [
                {"method": "POST", "url": ".payload.baseUrl", "body": "{ username: .payload.body.username, email: .payload.body.email }"},
                {"method": "GET", "url": ".payload.baseUrl + \"/\" + (.response.body.id|tostring)"},
                {"method": "PUT", "url": ".payload.baseUrl + \"/\" + (.response.body.id|tostring)", "body": "{ email: .payload.body.email }"},
                {"method": "DELETE", "url": ".payload.baseUrl + \"/\" + (.response.body.id|tostring)"}
            ],
            "secretInjectionConfigs": [{
                "secretRef": {"name": format!("{name}-out"), "namespace": "default"},
                "keyMappings": [{"secretKey": "user-id", "responseJQ": ".body.id"}, {"secretKey": "gone", "responseJQ": ".body.nothing", "missingFieldStrategy": "setEmpty"}]
            }]
        }}
    })
}

/// Waits until the object satisfies `check`; on timeout, fails showing its status and events.
async fn wait_object(runtime: &oxplane_runtime::Runtime, kind: &Kind, namespace: Option<&str>, name: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let object = runtime.kube.get(kind, namespace, name).await.unwrap();
        if let Some(object) = &object
            && check(object)
        {
            return object.clone();
        }
        if tokio::time::Instant::now() > deadline {
            let events = match &object {
                Some(o) => events_of(runtime, o).await,
                None => Vec::new(),
            };
            panic!("timed out waiting for {what}: {:#}\nevents: {events:#?}", object.map(|o| json!({"metadata": o["metadata"], "status": o["status"]})).unwrap_or_default());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the object is gone; on timeout, fails showing its status and events.
async fn wait_gone(runtime: &oxplane_runtime::Runtime, kind: &Kind, namespace: Option<&str>, name: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while let Some(object) = runtime.kube.get(kind, namespace, name).await.unwrap() {
        if tokio::time::Instant::now() > deadline {
            let events = events_of(runtime, &object).await;
            panic!("timed out waiting for {name} to be gone: {:#}\nevents: {events:#?}", json!({"metadata": object["metadata"], "status": object["status"]}));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn ready_and_synced(o: &Value) -> bool {
    conditions::is_true(o, "Ready") && conditions::is_true(o, "Synced")
}

fn synced_false_with(o: &Value, text: &str) -> bool {
    conditions::get(o, "Synced").is_some_and(|c| c.status == "False" && c.message.contains(text))
}

/// Nothing the provider wrote about the object holds the secret.
async fn assert_no_secret(runtime: &oxplane_runtime::Runtime, object: &Value) {
    assert!(!object["status"].to_string().contains(SECRET_TOKEN), "secret in status: {}", object["status"]);
    for (_, reason, message) in events_of(runtime, object).await {
        assert!(!message.contains(SECRET_TOKEN), "secret in event {reason}: {message}");
    }
}

#[tokio::test]
async fn a_request_creates_observes_updates_corrects_and_deletes_a_user() {
    let (_server, runtime, _provider, rest) = setup().await;
    let request_kind = kind("Request", false);
    runtime.kube.create(&request_kind, &user_request("ann", &rest.base_url(), "ann", "ann@example.com", None)).await.unwrap();

    let ready = wait_object(&runtime, &request_kind, None, "ann", "Ready and Synced", ready_and_synced).await;
    let users = rest.users();
    assert_eq!(users.len(), 1, "{users:?}");
    assert_eq!(users[0]["email"], "ann@example.com");
    let id = users[0]["id"].as_u64().unwrap();
    assert_eq!(rest.posts(), 1);
    // The secret reached the server, and only the server.
    assert!(rest.authorizations().iter().all(|a| a == &format!("Bearer {SECRET_TOKEN}")));
    assert!(!rest.authorizations().is_empty());
    assert_eq!(ready["status"]["requestDetails"]["headers"]["Authorization"], json!(["Bearer {{ auth:default:token }}"]));
    assert_eq!(ready["status"]["response"]["statusCode"], 200);
    assert!(ready["status"]["response"]["body"].as_str().unwrap().contains("ann@example.com"));
    assert!(ready["status"]["cache"]["lastUpdated"].is_string());
    assert_no_secret(&runtime, &ready).await;

    // secretInjectionConfigs: the id is copied into a Secret; a missing field set empty.
    let out = wait_object(&runtime, &secret_kind(), Some("default"), "ann-out", "the injected secret", |s| s.pointer("/data/user-id").is_some()).await;
    let data = oxplane_runtime::managed::connection::decode_data(&out);
    assert_eq!(data["user-id"], id.to_string().as_bytes());
    assert_eq!(data["gone"], b"");

    // A spec change is sent with PUT.
    let body = json!({"username": "ann", "email": "ann@new.example.com"}).to_string();
    runtime.kube.merge_patch(&request_kind, None, "ann", &json!({"spec": {"forProvider": {"payload": {"body": body}}}})).await.unwrap();
    support::wait_for("the update to reach the server", async || (rest.users()[0]["email"] == "ann@new.example.com").then_some(())).await;

    // A change made on the server is corrected at the next observation.
    rest.set_user_field(id, "email", json!("mallory@example.com"));
    support::wait_for("the drift to be corrected", async || (rest.users()[0]["email"] == "ann@new.example.com").then_some(())).await;
    assert_eq!(rest.posts(), 1, "never created twice");

    runtime.kube.delete(&request_kind, None, "ann", &Default::default()).await.unwrap();
    wait_gone(&runtime, &request_kind, None, "ann").await;
    assert!(rest.users().is_empty());
}

#[tokio::test]
async fn request_failures_are_synced_false_naming_the_target_and_cause() {
    let (_server, runtime, _provider, mut rest) = setup().await;
    let request_kind = kind("Request", false);
    let mut request = user_request("bob", &rest.base_url(), "bob", "bob@example.com", None);
    request["spec"]["forProvider"]["waitTimeout"] = json!("1s");
    runtime.kube.create(&request_kind, &request).await.unwrap();
    wait_object(&runtime, &request_kind, None, "bob", "Ready", ready_and_synced).await;
    let target = format!("{}/users/", rest.base_url());

    // A stopped server.
    rest.stop();
    let down = wait_object(&runtime, &request_kind, None, "bob", "Synced=False for the stopped server", |o| synced_false_with(o, "cannot reach")).await;
    assert!(conditions::get(&down, "Synced").unwrap().message.contains(&target), "{:?}", conditions::get(&down, "Synced"));
    rest.restart().await.unwrap();
    wait_object(&runtime, &request_kind, None, "bob", "Synced again after the restart", ready_and_synced).await;

    // A 500.
    rest.fail_next(1000);
    let failing = wait_object(&runtime, &request_kind, None, "bob", "Synced=False for a 500", |o| synced_false_with(o, "answered 500")).await;
    assert!(conditions::get(&failing, "Synced").unwrap().message.contains(&target));
    assert!(failing["status"]["error"].as_str().unwrap().contains("answered 500"));
    rest.fail_next(0);
    wait_object(&runtime, &request_kind, None, "bob", "Synced after the 500s", ready_and_synced).await;

    // An answer slower than waitTimeout.
    rest.set_delay(Duration::from_millis(2500));
    let slow = wait_object(&runtime, &request_kind, None, "bob", "Synced=False for a slow answer", |o| synced_false_with(o, "no answer within the wait timeout")).await;
    assert!(conditions::get(&slow, "Synced").unwrap().message.contains(&target));
    rest.set_delay(Duration::ZERO);
    let back = wait_object(&runtime, &request_kind, None, "bob", "Synced after the slow answers", ready_and_synced).await;
    assert_eq!(rest.users().len(), 1);
    assert_no_secret(&runtime, &back).await;

    // A body the expectedResponseCheck refuses keeps the resource out of date: UPDATE is sent.
    // A merge patch, not a read and replace: the controller writes the status meanwhile.
    let check = json!({"spec": {"forProvider": {"expectedResponseCheck": {"type": "CUSTOM", "logic": ".response.body.email == \"nobody@example.com\""}}}});
    runtime.kube.merge_patch(&request_kind, None, "bob", &check).await.unwrap();
    support::wait_for("an update for the refused body", async || {
        let o = runtime.kube.get(&request_kind, None, "bob").await.unwrap()?;
        let events = events_of(&runtime, &o).await;
        let drift = events.iter().any(|(_, r, m)| r == "ExternalResourceDrifted" && m.contains("expectedResponseCheck"));
        (drift && events.iter().any(|(_, r, _)| r == "UpdatedExternalResource")).then_some(())
    })
    .await;
    // A check that is not a boolean is an error.
    let check = json!({"spec": {"forProvider": {"expectedResponseCheck": {"type": "CUSTOM", "logic": ".response.body.email"}}}});
    runtime.kube.merge_patch(&request_kind, None, "bob", &check).await.unwrap();
    wait_object(&runtime, &request_kind, None, "bob", "Synced=False for a non-boolean check", |o| synced_false_with(o, "should return a boolean")).await;
    assert_eq!(rest.posts(), 1, "never created twice");
}

#[tokio::test]
async fn a_namespaced_request_found_by_name_and_removed_by_custom_check() {
    let (_server, runtime, _provider, rest) = setup().await;
    let request_kind = kind("Request", true);
    let mut request = user_request("cat", &rest.base_url(), "cat", "cat@example.com", Some("default"));
    // Found by name, so it can be looked up without the POST's answer.
    request["spec"]["forProvider"]["mappings"][1]["url"] = json!(".payload.baseUrl + \"/by-name/\" + .payload.body.username");
    request["spec"]["forProvider"]["isRemovedCheck"] = json!({"type": "CUSTOM", "logic": ".response.statusCode == 404"});
    request["spec"]["forProvider"]["secretInjectionConfigs"] = json!([]);
    runtime.kube.create(&request_kind, &request).await.unwrap();
    wait_object(&runtime, &request_kind, Some("default"), "cat", "Ready", ready_and_synced).await;
    assert_eq!(rest.users().len(), 1);

    // A namespaced Request reads Secrets of its own namespace only.
    let mut other = user_request("dog", &rest.base_url(), "dog", "dog@example.com", Some("default"));
    other["spec"]["forProvider"]["headers"]["Authorization"] = json!(["Bearer {{ auth:kube-system:token }}"]);
    other["spec"]["forProvider"]["secretInjectionConfigs"] = json!([]);
    runtime.kube.create(&request_kind, &other).await.unwrap();
    wait_object(&runtime, &request_kind, Some("default"), "dog", "Synced=False for another namespace's secret", |o| synced_false_with(o, "outside the resource's namespace")).await;
    assert_eq!(rest.users().len(), 1);

    runtime.kube.delete(&request_kind, Some("default"), "cat", &Default::default()).await.unwrap();
    support::wait_for("the user to be deleted", async || rest.users().is_empty().then_some(())).await;
}

fn disposable(name: &str, for_provider: Value) -> Value {
    json!({
        "apiVersion": "http.crossplane.io/v1alpha2", "kind": "DisposableRequest",
        "metadata": {"name": name},
        "spec": {"deletionPolicy": "Orphan", "forProvider": for_provider}
    })
}

#[tokio::test]
async fn disposable_requests_send_once_retry_to_their_limit_and_loop() {
    let (_server, runtime, _provider, rest) = setup().await;
    let dr = kind("DisposableRequest", false);
    let base = rest.base_url();

    // A health check with an expected response.
    runtime.kube.create(&dr, &disposable("health", json!({"url": format!("{base}/health"), "method": "GET", "expectedResponse": ".body.status == \"ok\""}))).await.unwrap();
    let health = wait_object(&runtime, &dr, None, "health", "Ready", ready_and_synced).await;
    assert_eq!(health["status"]["synced"], true);
    assert_eq!(health["status"]["response"]["statusCode"], 200);
    assert!(health["status"]["lastReconcileTime"].is_string());

    // A notification with a secret in a header and the body, sent exactly once.
    let body = r#"{"recipient": "ops@example.com", "password": "{{ auth:default:token }}"}"#;
    let notify = json!({"url": format!("{base}/notify"), "method": "POST", "body": body,
        "headers": {"Content-Type": ["application/json"], "Authorization": ["Bearer {{ auth:default:token }}"]},
        "secretInjectionConfigs": [{"secretRef": {"name": "notify-out", "namespace": "default"}, "keyMappings": [{"secretKey": "status", "responseJQ": ".body.job_status"}]}]});
    runtime.kube.create(&dr, &disposable("notify", notify)).await.unwrap();
    let sent = wait_object(&runtime, &dr, None, "notify", "Ready", ready_and_synced).await;
    assert_eq!(rest.posts(), 1);
    assert!(rest.authorizations().contains(&format!("Bearer {SECRET_TOKEN}")));
    // The server echoed the secret: the status shows the placeholder instead.
    assert!(sent["status"]["response"]["body"].as_str().unwrap().contains("{{ auth:default:token }}"), "{}", sent["status"]);
    assert_no_secret(&runtime, &sent).await;
    let out = wait_object(&runtime, &secret_kind(), Some("default"), "notify-out", "the injected secret", |s| s.pointer("/data/status").is_some()).await;
    assert_eq!(oxplane_runtime::managed::connection::decode_data(&out)["status"], b"success");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(rest.posts(), 1, "a DisposableRequest is sent once");

    // An unexpected body: retried up to the limit, then given up with Synced=False.
    let failing = json!({"url": format!("{base}/health"), "method": "GET", "expectedResponse": ".body.status == \"degraded\"", "rollbackRetriesLimit": 2});
    runtime.kube.create(&dr, &disposable("unexpected", failing)).await.unwrap();
    let given_up = wait_object(&runtime, &dr, None, "unexpected", "giving up", |o| synced_false_with(o, "giving up after 2 failed attempts")).await;
    assert_eq!(given_up["status"]["failed"], 2);
    assert!(given_up["status"]["error"].as_str().unwrap().contains("does not match expectedResponse"));
    assert!(conditions::get(&given_up, "Synced").unwrap().message.contains(&format!("{base}/health")));

    // Looping: sent again every nextReconcile.
    let looping = json!({"url": format!("{base}/notify"), "method": "POST", "body": "{}", "shouldLoopInfinitely": true, "nextReconcile": "1s"});
    runtime.kube.create(&dr, &disposable("loop", looping)).await.unwrap();
    support::wait_for("three more posts", async || (rest.posts() >= 4).then_some(())).await;

    // Deleting sends nothing (and stops the loop).
    runtime.kube.delete(&dr, None, "loop", &Default::default()).await.unwrap();
    wait_gone(&runtime, &dr, None, "loop").await;
    let before = rest.posts();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(rest.posts(), before);
}

/// A Secret in `default` holding `key`.
async fn put_secret(runtime: &oxplane_runtime::Runtime, name: &str, data: &[(&str, &str)]) {
    let string_data: serde_json::Map<String, Value> = data.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "default"}, "stringData": string_data});
    runtime.kube.create(&secret_kind(), &secret).await.unwrap();
}

fn selector(name: &str, key: &str) -> Value {
    json!({"name": name, "namespace": "default", "key": key})
}

#[tokio::test]
async fn requests_over_https_trust_what_their_tls_settings_say() {
    use base64::Engine;
    let (_server, runtime, _provider, _plain) = setup().await;
    let rest = RestServer::start_tls(false).await.unwrap();
    let base = rest.base_url();
    assert!(base.starts_with("https://"));
    let dr = kind("DisposableRequest", false);
    let request_kind = kind("Request", false);
    let config_kind = Kind::new(http::CLUSTER_GROUP, "v1alpha1", "ProviderConfig", "providerconfigs", false);

    // No TLS settings: the test CA is not among the system's, so the certificate is refused.
    runtime.kube.create(&dr, &disposable("untrusted", json!({"url": format!("{base}/health"), "method": "GET"}))).await.unwrap();
    let refused = wait_object(&runtime, &dr, None, "untrusted", "Synced=False for an unknown CA", |o| synced_false_with(o, "certificate")).await;
    assert!(conditions::get(&refused, "Synced").unwrap().message.contains(&format!("{base}/health")));

    // insecureSkipTLSVerify: any certificate.
    let mut skip = user_request("insecure", &base, "insecure", "insecure@example.com", None);
    skip["spec"]["forProvider"]["insecureSkipTLSVerify"] = json!(true);
    runtime.kube.create(&request_kind, &skip).await.unwrap();
    wait_object(&runtime, &request_kind, None, "insecure", "Ready over HTTPS without verification", ready_and_synced).await;

    // The CA from a Secret named by the ProviderConfig.
    let ca = rest.ca_pem().unwrap().to_string();
    put_secret(&runtime, "rest-ca", &[("ca.crt", &ca)]).await;
    let config = json!({"apiVersion": "http.crossplane.io/v1alpha1", "kind": "ProviderConfig", "metadata": {"name": "with-ca"},
        "spec": {"credentials": {"source": "None"}, "tls": {"caCertSecretRef": selector("rest-ca", "ca.crt")}}});
    runtime.kube.create(&config_kind, &config).await.unwrap();
    let mut verified = user_request("verified", &base, "verified", "verified@example.com", None);
    verified["spec"]["providerConfigRef"] = json!({"name": "with-ca"});
    runtime.kube.create(&request_kind, &verified).await.unwrap();
    wait_object(&runtime, &request_kind, None, "verified", "Ready with the ProviderConfig's CA", ready_and_synced).await;

    // The CA inline, in the resource's own tlsConfig.
    let bundle = base64::engine::general_purpose::STANDARD.encode(&ca);
    runtime.kube.create(&dr, &disposable("inline-ca", json!({"url": format!("{base}/health"), "method": "GET", "tlsConfig": {"caBundle": bundle}, "expectedResponse": ".body.status == \"ok\""}))).await.unwrap();
    wait_object(&runtime, &dr, None, "inline-ca", "Ready with an inline CA", ready_and_synced).await;
    let names: Vec<String> = rest.users().iter().filter_map(|u| u["username"].as_str().map(str::to_string)).collect();
    assert_eq!(names, ["insecure", "verified"]);

    // A service that requires a client certificate: refused without one, served with the
    // certificate and key from Secrets named by the ProviderConfig.
    let mutual = RestServer::start_tls(true).await.unwrap();
    let (cert, key) = mutual.client_certificate().unwrap();
    put_secret(&runtime, "rest-client", &[("ca.crt", mutual.ca_pem().unwrap()), ("tls.crt", cert), ("tls.key", key)]).await;
    let mut mtls = config.clone();
    mtls["metadata"]["name"] = json!("mutual");
    mtls["spec"]["tls"] = json!({"caCertSecretRef": selector("rest-client", "ca.crt"), "clientCertSecretRef": selector("rest-client", "tls.crt"), "clientKeySecretRef": selector("rest-client", "tls.key")});
    runtime.kube.create(&config_kind, &mtls).await.unwrap();
    let mut anonymous = disposable("anonymous", json!({"url": format!("{}/health", mutual.base_url()), "method": "GET", "insecureSkipTLSVerify": true}));
    anonymous["spec"]["forProvider"]["rollbackRetriesLimit"] = json!(1);
    runtime.kube.create(&dr, &anonymous).await.unwrap();
    wait_object(&runtime, &dr, None, "anonymous", "Synced=False without a client certificate", |o| conditions::get(o, "Synced").is_some_and(|c| c.status == "False")).await;
    let mut signed = user_request("signed", &mutual.base_url(), "signed", "signed@example.com", None);
    signed["spec"]["providerConfigRef"] = json!({"name": "mutual"});
    runtime.kube.create(&request_kind, &signed).await.unwrap();
    wait_object(&runtime, &request_kind, None, "signed", "Ready with a client certificate", ready_and_synced).await;
    assert_eq!(mutual.users().len(), 1);
    for name in ["insecure", "verified", "signed"] {
        runtime.kube.delete(&request_kind, None, name, &Default::default()).await.unwrap();
    }
    support::wait_for("the users to be deleted", async || (rest.users().is_empty() && mutual.users().is_empty()).then_some(())).await;
}
