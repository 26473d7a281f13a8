//! provider-http's cluster-scoped kinds through both served versions with kubectl: a Request
//! and a DisposableRequest created as v1alpha1 (upstream's older shape: mappings by method)
//! are read as v1alpha2 and reconciled against a real REST service; a v1alpha2 Request with
//! fields v1alpha1 lacks is read as v1alpha1 without them, and an update made through v1alpha1
//! keeps them. The CRDs convert through the webhook `oxplane up` serves.

use crate::support;

use std::time::Duration;

use oxplane_providers::http::testing::RestServer;
use serde_json::json;
use support::{Server, is_true, within};

fn ready_and_synced(o: &serde_json::Value) -> bool {
    is_true(o, "Ready") && is_true(o, "Synced")
}

/// A Request of the user `name` at `users` (observed every second) up to its mappings, which
/// follow as a YAML list at the indentation of `mappings:`.
fn request(version: &str, name: &str, users: &str) -> String {
    format!(
        "apiVersion: http.crossplane.io/{version}\nkind: Request\nmetadata:\n  name: {name}\n  annotations:\n    crossplane.io/poll-interval: 1s\nspec:\n  forProvider:\n    \
         headers:\n      Content-Type: [application/json]\n    payload:\n      baseUrl: {users}\n      body: '{{\"username\": \"{name}\", \"email\": \"{name}@example.org\"}}'\n    \
         mappings:\n"
    )
}

#[test]
fn requests_convert_between_v1alpha1_and_v1alpha2_through_kubectl() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let rest = rt.block_on(RestServer::start()).unwrap();
    let server = Server::start_with(&["--provider", "provider-http"]);
    within(Duration::from_secs(60), "provider-http to be healthy", || {
        server.get(&["provider.pkg.crossplane.io", "provider-http"]).is_some_and(|p| is_true(&p, "Healthy"))
    });
    server.apply("apiVersion: http.crossplane.io/v1alpha1\nkind: ProviderConfig\nmetadata:\n  name: default\nspec:\n  credentials:\n    source: None\n");
    let users = format!("{}/users", rest.base_url());
    let v1 = |kind: &str, name: &str| server.get(&[&format!("{kind}.v1alpha1.http.crossplane.io"), name]);
    let v2 = |kind: &str, name: &str| server.get(&[&format!("{kind}.v1alpha2.http.crossplane.io"), name]);

    // Written as v1alpha1 (mappings by method), read as v1alpha2, and reconciled: the user is
    // created on the service once.
    server.apply(&format!(
        "{}    - method: POST\n      url: .payload.baseUrl\n      body: '{{ username: .payload.body.username, email: .payload.body.email }}'\n    \
         - method: GET\n      url: '.payload.baseUrl + \"/\" + (.response.body.id|tostring)'\n    \
         - method: PUT\n      url: '.payload.baseUrl + \"/\" + (.response.body.id|tostring)'\n      body: '{{ email: .payload.body.email }}'\n    \
         - method: DELETE\n      url: '.payload.baseUrl + \"/\" + (.response.body.id|tostring)'\n",
        request("v1alpha1", "ada", &users)
    ));
    let newer = v2("request", "ada").unwrap();
    assert_eq!(newer["apiVersion"], "http.crossplane.io/v1alpha2");
    assert_eq!(newer["spec"]["forProvider"]["mappings"][0], json!({"method": "POST", "url": ".payload.baseUrl", "body": "{ username: .payload.body.username, email: .payload.body.email }"}));
    within(Duration::from_secs(60), "the v1alpha1 Request to be Ready", || v2("request", "ada").is_some_and(|r| ready_and_synced(&r)));
    let created: Vec<_> = rest.users().into_iter().filter(|u| u["username"] == "ada").collect();
    assert_eq!(created.len(), 1, "{created:?}");
    // The status reads the same through v1alpha1, without the action v1alpha1 has not.
    let older = v1("request", "ada").unwrap();
    assert!(ready_and_synced(&older), "{older:#}");
    assert_eq!(older["status"]["response"]["statusCode"], 200);
    assert!(older["status"]["requestDetails"]["method"].is_string(), "{older:#}");
    assert!(older["status"]["requestDetails"].get("action").is_none(), "{older:#}");
    assert!(v2("request", "ada").unwrap()["status"]["requestDetails"]["action"].is_string());

    // Written as v1alpha2 with mappings by action and a custom check: v1alpha1 shows the
    // methods they are sent with, and an update made through v1alpha1 keeps the rest.
    server.apply(&format!(
        "{}    - action: CREATE\n      url: .payload.baseUrl\n      body: '{{ username: .payload.body.username, email: .payload.body.email }}'\n    \
         - action: OBSERVE\n      url: '.payload.baseUrl + \"/by-name/\" + .payload.body.username'\n    \
         - action: UPDATE\n      url: '.payload.baseUrl + \"/\" + (.response.body.id|tostring)'\n      body: '{{ email: .payload.body.email }}'\n    \
         - action: REMOVE\n      url: '.payload.baseUrl + \"/\" + (.response.body.id|tostring)'\n    \
         expectedResponseCheck:\n      type: CUSTOM\n      logic: '.response.body.email == .payload.body.email'\n",
        request("v1alpha2", "grace", &users)
    ));
    within(Duration::from_secs(60), "the v1alpha2 Request to be Ready", || v2("request", "grace").is_some_and(|r| ready_and_synced(&r)));
    let mut older = v1("request", "grace").unwrap();
    assert_eq!(older["apiVersion"], "http.crossplane.io/v1alpha1");
    let methods: Vec<&str> = older["spec"]["forProvider"]["mappings"].as_array().unwrap().iter().map(|m| m["method"].as_str().unwrap()).collect();
    assert_eq!(methods, ["POST", "GET", "PUT", "DELETE"]);
    assert!(older["spec"]["forProvider"]["mappings"].as_array().unwrap().iter().all(|m| m.get("action").is_none()), "{older:#}");
    assert!(older["spec"]["forProvider"].get("expectedResponseCheck").is_none(), "{older:#}");
    older["spec"]["forProvider"]["payload"]["body"] = json!(r#"{"username": "grace", "email": "hopper@example.org"}"#);
    older["metadata"].as_object_mut().unwrap().remove("managedFields");
    server.kubectl_stdin(&["replace", "-f", "-"], &older.to_string());
    let newer = v2("request", "grace").unwrap();
    assert_eq!(newer["spec"]["forProvider"]["expectedResponseCheck"]["type"], "CUSTOM");
    assert_eq!(newer["spec"]["forProvider"]["mappings"][0]["action"], "CREATE");
    assert!(newer["spec"]["forProvider"]["mappings"][0].get("method").is_none(), "{newer:#}");
    assert!(newer["metadata"]["annotations"].get("http.crossplane.io/v1alpha2-fields").is_none(), "{newer:#}");
    within(Duration::from_secs(60), "the change made through v1alpha1 to reach the service", || {
        rest.users().iter().any(|u| u["username"] == "grace" && u["email"] == "hopper@example.org")
    });

    // A DisposableRequest written as v1alpha1 is sent once; v1alpha2 has its fields as they
    // were written.
    let posts = rest.posts();
    server.apply(&format!(
        "apiVersion: http.crossplane.io/v1alpha1\nkind: DisposableRequest\nmetadata:\n  name: notify\nspec:\n  forProvider:\n    \
         url: {}/notify\n    method: POST\n    body: '{{\"event\": \"deployed\"}}'\n    headers:\n      Content-Type: [application/json]\n    rollbackRetriesLimit: 2\n",
        rest.base_url()
    ));
    within(Duration::from_secs(60), "the DisposableRequest to be sent", || v2("disposablerequest", "notify").is_some_and(|r| ready_and_synced(&r) && r["status"]["synced"] == true));
    assert_eq!(rest.posts(), posts + 1);
    let newer = v2("disposablerequest", "notify").unwrap();
    assert_eq!(newer["spec"]["forProvider"]["rollbackRetriesLimit"], 2);
    assert_eq!(v1("disposablerequest", "notify").unwrap()["status"]["response"]["statusCode"], newer["status"]["response"]["statusCode"]);

    // Both CRDs convert through the webhook; kubectl lists through either version.
    for crd in ["requests.http.crossplane.io", "disposablerequests.http.crossplane.io"] {
        let crd = server.get(&["crd", crd]).unwrap();
        assert_eq!(crd["spec"]["conversion"]["strategy"], "Webhook", "{crd:#}");
    }
    let listed = server.kubectl(&["get", "requests.v1alpha1.http.crossplane.io"]);
    assert!(listed.contains("ada") && listed.contains("grace"), "{listed}");

    // Deleted through v1alpha1: the users go from the service.
    server.kubectl(&["delete", "requests.v1alpha1.http.crossplane.io", "ada", "grace", "--timeout=60s"]);
    within(Duration::from_secs(30), "the users to be removed", || rest.users().iter().all(|u| u["username"] != "ada" && u["username"] != "grace"));
}
