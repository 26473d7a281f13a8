//! Authentication: every request reaching a handler carries the [`UserInfo`] it was made as.

use http_body_util::BodyExt;
use oxplane_apiserver::authn::UserInfo;
use oxplane_apiserver::server::{Server, ServerConfig};
use tower::ServiceExt;

#[tokio::test]
async fn responses_carry_the_user_of_their_request() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(ServerConfig::new(dir.path().to_path_buf(), "127.0.0.1:0")).await.unwrap();
    let alice = UserInfo::new("alice", ["app-team"]);
    let get = || axum::http::Request::get("/api/v1/namespaces/default").body(axum::body::Body::empty()).unwrap();

    let response = server.local_service_as(alice.clone()).oneshot(get()).await.unwrap();
    assert_eq!(response.extensions().get::<UserInfo>(), Some(&alice));
    let response = server.local_service().oneshot(get()).await.unwrap();
    assert_eq!(response.extensions().get::<UserInfo>(), Some(&UserInfo::admin()));

    // From outside the process a request brings credentials or is refused.
    let router = oxplane_apiserver::http::router(server.state().clone());
    let response = router.oneshot(get()).await.unwrap();
    assert_eq!(response.status(), 401);
    assert!(response.extensions().get::<UserInfo>().is_none());
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let status: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(status["reason"], "Unauthorized");
}

/// `kubectl auth whoami`'s request, through a client from `kubeconfig`.
async fn whoami(kubeconfig: &str) -> Result<serde_json::Value, kube::Error> {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await.unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let request = axum::http::Request::post("/apis/authentication.k8s.io/v1/selfsubjectreviews")
        .header("content-type", "application/json")
        .body(br#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#.to_vec())
        .unwrap();
    let review: serde_json::Value = client.request(request).await?;
    Ok(review["status"]["userInfo"].clone())
}

fn refused(result: Result<serde_json::Value, kube::Error>) -> u16 {
    match result {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.reason, "Unauthorized");
            status.code
        }
        other => panic!("expected a 401 Status, got {other:?}"),
    }
}

#[tokio::test]
async fn client_certificates_and_token_file_tokens_authenticate_their_users() {
    use oxplane_apiserver::server::{kubeconfig, tls};
    let files = tempfile::tempdir().unwrap();
    let token_file = files.path().join("tokens.csv");
    std::fs::write(&token_file, "bob-token,bob,1001,\"dev,ops\"\n").unwrap();
    let server = crate::support::TestServer::start_configured(|config| config.token_auth_file = Some(token_file.clone())).await;
    let dir = server.dir.path();
    let admin = std::fs::read_to_string(dir.join("kubeconfig")).unwrap();
    let url = serde_yaml_url(&admin);
    let ca = std::fs::read_to_string(dir.join("pki/ca.crt")).unwrap();

    let (cert, key) = tls::issue_client_certificate(dir, "alice", &["app-team".to_string()]).unwrap();
    let alice = whoami(&kubeconfig::render_with_certificate(&url, &ca, "alice", &cert, &key)).await.unwrap();
    assert_eq!(alice, serde_json::json!({"username": "alice", "groups": ["app-team", "system:authenticated"]}));

    let bob = whoami(&kubeconfig::render(&url, &ca, "bob-token")).await.unwrap();
    assert_eq!(bob, serde_json::json!({"username": "bob", "uid": "1001", "groups": ["dev", "ops", "system:authenticated"]}));
    assert_eq!(whoami(&admin).await.unwrap()["username"], "oxplane-admin");

    // A certificate from another CA, an unknown token, a malformed header: 401 each.
    let other = tempfile::tempdir().unwrap();
    tls::ensure(other.path(), &["localhost".to_string()]).unwrap();
    let (cert, key) = tls::issue_client_certificate(other.path(), "mallory", &["system:masters".to_string()]).unwrap();
    assert_eq!(refused(whoami(&kubeconfig::render_with_certificate(&url, &ca, "mallory", &cert, &key)).await), 401);
    assert_eq!(refused(whoami(&kubeconfig::render(&url, &ca, "bob-token-guess")).await), 401);
    assert_eq!(refused(whoami(&kubeconfig::render(&url, &ca, "")).await), 401);
    server.stop().await;
}

/// The server URL in a kubeconfig the server wrote (JSON, which is YAML too).
fn serde_yaml_url(kubeconfig: &str) -> String {
    let config: serde_json::Value = serde_json::from_str(kubeconfig).unwrap();
    config["clusters"][0]["cluster"]["server"].as_str().unwrap().to_string()
}
