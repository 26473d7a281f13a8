//! Fuzz-style: hundreds of random and malformed bodies, content types and paths. The server
//! must answer every one with a `Status` (never a 5xx, never a hang), and what it stored must
//! still be consistent: every object listable, decodable and named.

use crate::support;

use http::{Method, Request};
use http_body_util::BodyExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use support::TestServer;

const CONTENT_TYPES: [&str; 7] = [
    "application/json",
    "application/merge-patch+json",
    "application/json-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
    "application/vnd.kubernetes.protobuf",
    "text/plain",
];

const PATHS: [&str; 6] = [
    "/api/v1/namespaces/default/configmaps",
    "/api/v1/namespaces/default/configmaps/target",
    "/api/v1/namespaces/default/secrets",
    "/api/v1/namespaces",
    "/apis/coordination.k8s.io/v1/namespaces/default/leases",
    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
];

fn random_json(rng: &mut StdRng, depth: u32) -> Value {
    match rng.random_range(0..if depth > 3 { 5 } else { 7 }) {
        0 => Value::Null,
        1 => json!(rng.random::<bool>()),
        2 => json!(rng.random::<i64>()),
        3 => json!(rng.random::<f64>()),
        4 => json!(["name", "metadata", "spec", "-", "/", "~1", "data", ""][rng.random_range(0..8)]),
        5 => Value::Array((0..rng.random_range(0..4)).map(|_| random_json(rng, depth + 1)).collect()),
        _ => {
            let keys = ["apiVersion", "kind", "metadata", "name", "namespace", "data", "spec", "op", "path", "value", "$patch", "labels"];
            Value::Object((0..rng.random_range(0..5)).map(|_| (keys[rng.random_range(0..keys.len())].to_string(), random_json(rng, depth + 1))).collect())
        }
    }
}

fn mutated_object(rng: &mut StdRng) -> Value {
    let mut object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("f{}", rng.random_range(0..20))}, "data": {"a": "b"}});
    for _ in 0..rng.random_range(0..3) {
        let field = ["apiVersion", "kind", "metadata", "data"][rng.random_range(0..4)];
        object[field] = random_json(rng, 1);
    }
    object
}

fn body(rng: &mut StdRng) -> Vec<u8> {
    match rng.random_range(0..5) {
        0 => (0..rng.random_range(0..64)).map(|_| rng.random::<u8>()).collect(),
        1 => random_json(rng, 0).to_string().into_bytes(),
        2 => {
            let mut text = mutated_object(rng).to_string().into_bytes();
            let cut = rng.random_range(0..=text.len());
            text.truncate(cut);
            text
        }
        3 => {
            let op = ["add", "remove", "replace", "test", "move", "copy", "bogus"][rng.random_range(0..7)];
            let path = ["/data/a", "/metadata/name", "/", "", "/x/-", "/metadata/finalizers"][rng.random_range(0..6)];
            json!([{"op": op, "path": path, "value": random_json(rng, 2), "from": "/data"}]).to_string().into_bytes()
        }
        _ => mutated_object(rng).to_string().into_bytes(),
    }
}

#[tokio::test]
async fn random_and_malformed_requests_get_statuses_and_leave_the_store_consistent() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let seed_body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "target"}, "data": {"a": "b"}});
    let request = Request::post(PATHS[0]).header("Content-Type", "application/json").body(kube::client::Body::from(seed_body.to_string().into_bytes())).unwrap();
    assert_eq!(client.send(request).await.unwrap().status().as_u16(), 201);

    let mut rng = StdRng::seed_from_u64(0x0A_0B_0C);
    let mut codes = std::collections::BTreeMap::new();
    for case in 0..400 {
        let method = [Method::POST, Method::PUT, Method::PATCH, Method::DELETE, Method::GET][rng.random_range(0..5)].clone();
        // Mostly well-aimed requests (so bodies reach the decoders), sometimes anything.
        let aimed = rng.random_bool(0.8);
        let path = match (&method, aimed) {
            (&Method::POST, true) => PATHS[[0, 2, 4][rng.random_range(0..3)]],
            (_, true) => PATHS[1],
            _ => PATHS[rng.random_range(0..PATHS.len())],
        };
        let content_type = match (&method, aimed) {
            (&Method::PATCH, true) => CONTENT_TYPES[rng.random_range(1..4)],
            (_, true) => CONTENT_TYPES[0],
            _ => CONTENT_TYPES[rng.random_range(0..CONTENT_TYPES.len())],
        };
        let payload = body(&mut rng);
        let request = Request::builder()
            .method(method.clone())
            .uri(path)
            .header("Content-Type", content_type)
            .body(kube::client::Body::from(payload.clone()))
            .unwrap();
        let response = tokio::time::timeout(std::time::Duration::from_secs(10), client.send(request))
            .await
            .unwrap_or_else(|_| panic!("case {case}: no answer"))
            .unwrap();
        let code = response.status().as_u16();
        *codes.entry(code).or_insert(0) += 1;
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        assert!(code < 500, "case {case}: {method} {path} ({content_type}) {:?} -> {code}: {}", String::from_utf8_lossy(&payload), String::from_utf8_lossy(&bytes));
        if code >= 400 {
            let status: Value = serde_json::from_slice(&bytes).unwrap_or_else(|_| panic!("case {case}: {code} without a Status"));
            assert_eq!(status["kind"], "Status", "case {case}");
            assert_eq!(status["code"], code, "case {case}");
        }
    }

    // The cases reached the decoders and writers, not only the routing.
    for code in [201, 400, 422] {
        assert!(codes.get(&code).copied().unwrap_or(0) > 0, "no {code} among {codes:?}");
    }

    // Everything stored is still a well-formed, named object of its kind.
    for path in ["/api/v1/configmaps", "/api/v1/secrets", "/api/v1/namespaces", "/apis/coordination.k8s.io/v1/leases"] {
        let response = client.send(Request::get(path).body(kube::client::Body::empty()).unwrap()).await.unwrap();
        assert_eq!(response.status().as_u16(), 200, "{path}");
        let list: Value = serde_json::from_slice(&response.into_body().collect().await.unwrap().to_bytes()).unwrap();
        for item in list["items"].as_array().unwrap() {
            assert!(item["metadata"]["name"].as_str().is_some_and(|n| !n.is_empty()), "{path}: {item}");
            assert!(item["metadata"]["uid"].is_string(), "{path}: {item}");
        }
    }
    server.stop().await;
}
