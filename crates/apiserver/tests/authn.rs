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
