//! Authorization: RBAC over HTTPS with client certificates, as kubectl and kube-rs meet it:
//! grants by RoleBindings and ClusterRoleBindings, Kubernetes' 403 wording, resourceNames,
//! non-resource URLs, access reviews, impersonation, escalation prevention, aggregation.

use std::time::Duration;

use oxplane_apiserver::server::{kubeconfig, tls};
use serde_json::{Value, json};

use crate::support::TestServer;

/// A kube-rs client for `user` in `groups`, with a client certificate from the server's CA.
async fn client_as(server: &TestServer, user: &str, groups: &[&str]) -> kube::Client {
    let dir = server.dir.path();
    let admin: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("kubeconfig")).unwrap()).unwrap();
    let url = admin["clusters"][0]["cluster"]["server"].as_str().unwrap().to_string();
    let ca = std::fs::read_to_string(dir.join("pki/ca.crt")).unwrap();
    let groups: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
    let (cert, key) = tls::issue_client_certificate(dir, user, &groups).unwrap();
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&kubeconfig::render_with_certificate(&url, &ca, user, &cert, &key)).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await.unwrap();
    config.default_retry = false;
    kube::Client::try_from(config).unwrap()
}

/// A raw request; the answer's JSON, or the Status of a refusal.
async fn call(client: &kube::Client, method: &str, path: &str, body: Option<Value>, headers: &[(&str, &str)]) -> Result<Value, kube::Error> {
    let mut request = axum::http::Request::builder().method(method).uri(path).header("content-type", "application/json");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let body = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
    client.request::<Value>(request.body(body).unwrap()).await
}

/// The refusal's code and message.
fn refusal(result: Result<Value, kube::Error>) -> (u16, String) {
    match result {
        Err(kube::Error::Api(status)) => (status.code, status.message.clone()),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn configmap(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "b"}})
}

fn binding(kind: &str, name: &str, role_kind: &str, role: &str, subject: Value) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": [subject],
    })
}

fn user(name: &str) -> Value {
    json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": name})
}

/// Retries `attempt` until it succeeds (the aggregation controller fills `edit` just after start).
async fn eventually<F, Fut>(mut attempt: F) -> Value
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Value, kube::Error>>,
{
    for _ in 0..100 {
        if let Ok(value) = attempt().await {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    attempt().await.unwrap()
}

#[tokio::test]
async fn a_rolebinding_to_edit_grants_a_namespace_and_nothing_else() {
    let server = TestServer::start().await;
    let admin = server.client().await;
    for ns in ["team-a", "team-b"] {
        call(&admin, "POST", "/api/v1/namespaces", Some(json!({"metadata": {"name": ns}})), &[]).await.unwrap();
    }
    let alice = client_as(&server, "alice", &["app-team"]).await;

    // Before any grant: only discovery and the self reviews.
    let (code, message) = refusal(call(&alice, "GET", "/api/v1/namespaces/team-a/configmaps", None, &[]).await);
    assert_eq!(code, 403);
    assert_eq!(message, "configmaps is forbidden: User \"alice\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"team-a\"");
    call(&alice, "GET", "/apis", None, &[]).await.unwrap();
    let (_, message) = refusal(call(&alice, "GET", "/metrics", None, &[]).await);
    assert_eq!(message, "forbidden: User \"alice\" cannot get path \"/metrics\"");

    let mut rb = binding("RoleBinding", "alice-edit", "ClusterRole", "edit", user("alice"));
    rb["metadata"]["namespace"] = json!("team-a");
    call(&admin, "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/team-a/rolebindings", Some(rb), &[]).await.unwrap();

    eventually(|| call(&alice, "POST", "/api/v1/namespaces/team-a/configmaps", Some(configmap("settings")), &[])).await;
    let list = call(&alice, "GET", "/api/v1/namespaces/team-a/configmaps?labelSelector=x%3Dy", None, &[]).await.unwrap();
    assert_eq!(list["items"], json!([]));
    call(&alice, "GET", "/api/v1/namespaces/team-a/secrets", None, &[]).await.unwrap();

    let (code, message) = refusal(call(&alice, "POST", "/api/v1/namespaces/team-b/configmaps", Some(configmap("x")), &[]).await);
    assert_eq!(code, 403);
    assert_eq!(message, "configmaps is forbidden: User \"alice\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"team-b\"");
    assert!(call(&admin, "GET", "/api/v1/namespaces/team-b/configmaps/x", None, &[]).await.is_err(), "nothing stored");
    let (_, message) = refusal(call(&alice, "GET", "/api/v1/namespaces/team-b/configmaps?watch=true", None, &[]).await);
    assert!(message.contains("cannot watch resource \"configmaps\""), "{message}");
    let (_, message) = refusal(call(&alice, "GET", "/api/v1/namespaces", None, &[]).await);
    assert_eq!(message, "namespaces is forbidden: User \"alice\" cannot list resource \"namespaces\" in API group \"\" at the cluster scope");
    let (_, message) = refusal(call(&alice, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", Some(json!({"metadata": {"name": "mine"}})), &[]).await);
    assert_eq!(
        message,
        "clusterroles.rbac.authorization.k8s.io is forbidden: User \"alice\" cannot create resource \"clusterroles\" in API group \"rbac.authorization.k8s.io\" at the cluster scope"
    );
    let (_, message) = refusal(call(&alice, "DELETE", "/api/v1/namespaces/team-b", None, &[]).await);
    assert_eq!(message, "namespaces \"team-b\" is forbidden: User \"alice\" cannot delete resource \"namespaces\" in API group \"\" in the namespace \"team-b\"");

    // Access reviews answer the same questions.
    let review = |ns: &str| json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"namespace": ns, "verb": "create", "resource": "configmaps"}}});
    let allowed = call(&alice, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", Some(review("team-a")), &[]).await.unwrap();
    assert_eq!(allowed["status"]["allowed"], true);
    assert_eq!(allowed["status"]["reason"], "RBAC: allowed by RoleBinding \"alice-edit/team-a\" of ClusterRole \"edit\" to User \"alice\"");
    let refused = call(&alice, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", Some(review("team-b")), &[]).await.unwrap();
    assert_eq!(refused["status"]["allowed"], false);
    let rules = call(&alice, "POST", "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
        Some(json!({"kind": "SelfSubjectRulesReview", "spec": {"namespace": "team-a"}})), &[]).await.unwrap();
    let resource_rules = rules["status"]["resourceRules"].as_array().unwrap();
    assert!(resource_rules.iter().any(|r| r["resources"].as_array().unwrap().contains(&json!("configmaps"))
        && r["verbs"].as_array().unwrap().contains(&json!("create"))), "{rules}");
    assert!(rules["status"]["nonResourceRules"].as_array().unwrap().iter().any(|r| r["nonResourceURLs"].as_array().unwrap().contains(&json!("/apis/*"))));
    let sar = json!({"kind": "SubjectAccessReview", "spec": {"user": "alice", "groups": ["app-team"],
        "resourceAttributes": {"namespace": "team-a", "verb": "delete", "resource": "secrets", "name": "s"}}});
    assert_eq!(call(&admin, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", Some(sar.clone()), &[]).await.unwrap()["status"]["allowed"], true);
    let (code, _) = refusal(call(&alice, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", Some(sar), &[]).await);
    assert_eq!(code, 403, "asking about others needs its own grant");
    server.stop().await;
}

#[tokio::test]
async fn resource_names_impersonation_and_aggregation() {
    let server = TestServer::start().await;
    let admin = server.client().await;
    call(&admin, "POST", "/api/v1/namespaces", Some(json!({"metadata": {"name": "team-b"}})), &[]).await.unwrap();
    for name in ["settings", "other"] {
        call(&admin, "POST", "/api/v1/namespaces/team-b/configmaps", Some(configmap(name)), &[]).await.unwrap();
    }
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "settings-reader", "namespace": "team-b"},
        "rules": [{"verbs": ["get", "watch", "list"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["settings"]}]});
    call(&admin, "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/team-b/roles", Some(role), &[]).await.unwrap();
    let mut rb = binding("RoleBinding", "bob-settings", "Role", "settings-reader", user("bob"));
    rb["metadata"]["namespace"] = json!("team-b");
    call(&admin, "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/team-b/rolebindings", Some(rb), &[]).await.unwrap();

    let bob = client_as(&server, "bob", &[]).await;
    call(&bob, "GET", "/api/v1/namespaces/team-b/configmaps/settings", None, &[]).await.unwrap();
    let (_, message) = refusal(call(&bob, "GET", "/api/v1/namespaces/team-b/configmaps/other", None, &[]).await);
    assert_eq!(message, "configmaps \"other\" is forbidden: User \"bob\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"team-b\"");
    refusal(call(&bob, "GET", "/api/v1/namespaces/team-b/configmaps", None, &[]).await);
    let one = call(&bob, "GET", "/api/v1/namespaces/team-b/configmaps?fieldSelector=metadata.name%3Dsettings", None, &[]).await.unwrap();
    assert_eq!(one["items"].as_array().unwrap().len(), 1);

    // Impersonation: the admin may act as bob; bob may not act as anyone.
    let as_bob = call(&admin, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", Some(json!({"kind": "SelfSubjectReview"})), &[("Impersonate-User", "bob"), ("Impersonate-Group", "dev")]).await.unwrap();
    assert_eq!(as_bob["status"]["userInfo"], json!({"username": "bob", "groups": ["dev", "system:authenticated"]}));
    let (code, _) = refusal(call(&admin, "GET", "/api/v1/namespaces/team-b/configmaps/other", None, &[("Impersonate-User", "bob")]).await);
    assert_eq!(code, 403);
    let (code, message) = refusal(call(&bob, "GET", "/api/v1/namespaces", None, &[("Impersonate-User", "oxplane-admin"), ("Impersonate-Group", "system:masters")]).await);
    assert_eq!(code, 403);
    assert_eq!(message, "users \"oxplane-admin\" is forbidden: User \"bob\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope");

    // A ClusterRole labelled for aggregation into view adds to view.
    let extra = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "widgets-view", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
        "rules": [{"verbs": ["get"], "apiGroups": ["example.org"], "resources": ["widgets"]}]});
    call(&admin, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", Some(extra), &[]).await.unwrap();
    for role in ["view", "edit", "admin"] {
        let path = format!("/apis/rbac.authorization.k8s.io/v1/clusterroles/{role}");
        eventually(|| async {
            let role = call(&admin, "GET", &path, None, &[]).await?;
            let has = role["rules"].as_array().is_some_and(|rules| rules.iter().any(|r| r["resources"] == json!(["widgets"])));
            if has { Ok(role) } else { Err(kube::Error::LinesCodecMaxLineLengthExceeded) }
        })
        .await;
    }
    server.stop().await;
}

#[tokio::test]
async fn nobody_grants_what_they_do_not_hold() {
    let server = TestServer::start().await;
    let admin = server.client().await;
    call(&admin, "POST", "/api/v1/namespaces", Some(json!({"metadata": {"name": "team-c"}})), &[]).await.unwrap();
    let mut rb = binding("RoleBinding", "carol-admin", "ClusterRole", "admin", user("carol"));
    rb["metadata"]["namespace"] = json!("team-c");
    call(&admin, "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/team-c/rolebindings", Some(rb), &[]).await.unwrap();
    let carol = client_as(&server, "carol", &["ops"]).await;
    let roles = "/apis/rbac.authorization.k8s.io/v1/namespaces/team-c/roles";
    let bindings = "/apis/rbac.authorization.k8s.io/v1/namespaces/team-c/rolebindings";

    let held = json!({"metadata": {"name": "cm-writer"}, "rules": [{"verbs": ["get", "create"], "apiGroups": [""], "resources": ["configmaps"]}]});
    eventually(|| call(&carol, "POST", roles, Some(held.clone()), &[])).await;
    let more = json!({"metadata": {"name": "too-much"}, "rules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["nodes"]}]});
    let (code, message) = refusal(call(&carol, "POST", roles, Some(more), &[]).await);
    assert_eq!(code, 403);
    assert_eq!(
        message,
        "roles.rbac.authorization.k8s.io \"too-much\" is forbidden: user \"carol\" (groups=[\"ops\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"nodes\"], Verbs:[\"get\" \"list\"]}"
    );

    let mut to_admin = binding("RoleBinding", "dave-cluster-admin", "ClusterRole", "cluster-admin", user("dave"));
    to_admin["metadata"]["namespace"] = json!("team-c");
    let (code, message) = refusal(call(&carol, "POST", bindings, Some(to_admin), &[]).await);
    assert_eq!(code, 403);
    assert!(message.starts_with("rolebindings.rbac.authorization.k8s.io \"dave-cluster-admin\" is forbidden: user \"carol\""), "{message}");
    let mut to_missing = binding("RoleBinding", "dave-missing", "Role", "missing", user("dave"));
    to_missing["metadata"]["namespace"] = json!("team-c");
    let (code, message) = refusal(call(&carol, "POST", bindings, Some(to_missing.clone()), &[]).await);
    assert_eq!((code, message.as_str()), (400, "role.rbac.authorization.k8s.io \"missing\" not found"));
    let mut cluster_kind = to_missing.clone();
    cluster_kind["roleRef"]["kind"] = json!("Group");
    let (code, _) = refusal(call(&carol, "POST", bindings, Some(cluster_kind), &[]).await);
    assert_eq!(code, 422);
    for name in ["too-much"] {
        assert!(call(&admin, "GET", &format!("{roles}/{name}"), None, &[]).await.is_err(), "nothing stored");
    }
    for name in ["dave-cluster-admin", "dave-missing"] {
        assert!(call(&admin, "GET", &format!("{bindings}/{name}"), None, &[]).await.is_err(), "nothing stored");
    }

    // A binding to a role carol holds is fine; so is one the admin makes to a missing role,
    // whose subject is then told why it is refused.
    let mut ok = binding("RoleBinding", "dave-cm", "Role", "cm-writer", user("dave"));
    ok["metadata"]["namespace"] = json!("team-c");
    call(&carol, "POST", bindings, Some(ok), &[]).await.unwrap();
    call(&admin, "POST", bindings, Some(to_missing), &[]).await.unwrap();
    let dave = client_as(&server, "dave", &[]).await;
    let (_, message) = refusal(call(&dave, "GET", "/api/v1/namespaces/team-c/secrets", None, &[]).await);
    assert!(message.ends_with("in the namespace \"team-c\": RBAC: role.rbac.authorization.k8s.io \"missing\" not found"), "{message}");
    server.stop().await;
}
