//! CustomResourceDefinitions become served kinds at once, in every served version, and stay
//! served across restarts.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::discovery::Discovery;
use serde_json::json;
use support::TestServer;

fn widget_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [
                {"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                 "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
                {"name": "v1beta1", "served": true, "storage": false,
                 "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}
            ]
        }
    }))
    .unwrap()
}

fn widgets(client: &kube::Client, version: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", version, "Widget"));
    Api::namespaced_with(client.clone(), "default", &resource)
}

fn widget(version: &str, name: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": format!("example.com/{version}"), "kind": "Widget",
        "metadata": {"name": name}, "spec": {"size": 3}, "status": {"ignored": true}
    }))
    .unwrap()
}

#[tokio::test]
async fn a_crd_is_established_and_served_in_every_version() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let created = crds.create(&PostParams::default(), &widget_crd()).await.unwrap();
    let status = created.status.unwrap();
    let conditions = status.conditions.unwrap();
    let established = conditions.iter().find(|c| c.type_ == "Established").unwrap();
    assert_eq!(established.status, "True");
    assert_eq!(status.stored_versions.unwrap(), ["v1"]);

    // Served at once, in both versions, sharing one storage.
    let v1 = widgets(&client, "v1");
    let stored = v1.create(&PostParams::default(), &widget("v1", "w1")).await.unwrap();
    assert_eq!(stored.data["spec"]["size"], 3);
    assert!(stored.data.get("status").is_none(), "the main endpoint ignores status");
    let through_beta = widgets(&client, "v1beta1").get("w1").await.unwrap();
    assert_eq!(through_beta.types.unwrap().api_version, "example.com/v1beta1");

    // Custom resources refuse an update without a resourceVersion.
    let mut unversioned = widget("v1", "w1");
    unversioned.metadata.resource_version = None;
    let refused = v1.replace("w1", &PostParams::default(), &unversioned).await.unwrap_err();
    assert!(matches!(refused, kube::Error::Api(ref s) if s.code == 422 && s.message.contains("must be specified for an update")), "{refused}");

    // The status subresource changes only the status and does not move the generation.
    let mut with_status = v1.get("w1").await.unwrap();
    with_status.data["status"] = json!({"ready": true});
    with_status.data["spec"]["size"] = json!(99);
    let updated = v1.replace_status("w1", &PostParams::default(), &with_status).await.unwrap();
    assert_eq!(updated.data["status"]["ready"], true);
    assert_eq!(updated.data["spec"]["size"], 3);
    assert_eq!(updated.metadata.generation, Some(1));
    // A spec change moves the generation.
    let mut bigger = updated.clone();
    bigger.data["spec"]["size"] = json!(4);
    let bigger = v1.replace("w1", &PostParams::default(), &bigger).await.unwrap();
    assert_eq!(bigger.metadata.generation, Some(2));

    // Discovery lists it.
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    let group = discovery.get("example.com").expect("example.com in discovery");
    let versions: Vec<_> = group.versions().collect();
    assert!(versions.contains(&"v1") && versions.contains(&"v1beta1"), "{versions:?}");
    let aggregated = Discovery::new(client.clone()).run_aggregated().await.unwrap();
    let group = aggregated.get("example.com").expect("example.com in aggregated discovery");
    let (resource, caps) = group.recommended_kind("Widget").unwrap();
    assert_eq!((resource.plural.as_str(), caps.scope.clone()), ("widgets", kube::discovery::Scope::Namespaced));
    assert!(caps.subresources.iter().any(|(r, _)| r.plural == "widgets/status" || r.plural == "status"), "{:?}", caps.subresources);
    server.stop().await;
}

#[tokio::test]
async fn invalid_crds_are_refused_with_causes() {
    let server = TestServer::start().await;
    let crds: Api<CustomResourceDefinition> = Api::all(server.client().await);
    let mut crd = widget_crd();
    crd.metadata.name = Some("gadgets.example.com".into());
    let error = crds.create(&PostParams::default(), &crd).await.unwrap_err();
    match error {
        kube::Error::Api(status) => {
            assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
            assert!(status.message.contains("metadata.name"), "{}", status.message);
        }
        other => panic!("{other}"),
    }
    server.stop().await;
}

#[tokio::test]
async fn crds_are_served_again_after_a_restart() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &widget_crd()).await.unwrap();
    widgets(&client, "v1").create(&PostParams::default(), &widget("v1", "kept")).await.unwrap();
    let dir = server.dir.path().to_path_buf();
    // Keep the data directory: stop the server without dropping the TempDir.
    let kept = tempfile::tempdir().unwrap();
    let copy = kept.path().join("data");
    server.stop_keeping(&dir, &copy).await;
    let server = TestServer::start_in(&copy).await;
    let client = server.client().await;
    let got = widgets(&client, "v1").get("kept").await.unwrap();
    assert_eq!(got.data["spec"]["size"], 3);
    server.stop().await;
}

#[tokio::test]
async fn the_scale_subresource_reads_and_writes_the_replicas_paths() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let mut crd = serde_json::to_value(widget_crd()).unwrap();
    crd["spec"]["versions"][0]["subresources"]["scale"] =
        json!({"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas", "labelSelectorPath": ".status.selector"});
    let crd: CustomResourceDefinition = serde_json::from_value(crd).unwrap();
    Api::<CustomResourceDefinition>::all(client.clone()).create(&PostParams::default(), &crd).await.unwrap();
    let api = widgets(&client, "v1");
    let mut w = widget("v1", "s");
    w.data["spec"]["replicas"] = json!(2);
    api.create(&PostParams::default(), &w).await.unwrap();
    let scale = api.get_scale("s").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(2));
    let patch = json!({"spec": {"replicas": 5}});
    let scaled = api.patch_scale("s", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch)).await.unwrap();
    assert_eq!(scaled.spec.unwrap().replicas, Some(5));
    let object = api.get("s").await.unwrap();
    assert_eq!(object.data["spec"]["replicas"], 5);
    assert_eq!(object.metadata.generation, Some(2));
    let bad = api.patch_scale("s", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&json!({"spec": {"replicas": -1}}))).await.unwrap_err();
    assert!(matches!(bad, kube::Error::Api(ref s) if s.code == 422), "{bad}");
    server.stop().await;
}

#[tokio::test]
async fn deprecated_versions_warn_on_every_response() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut crd = serde_json::to_value(widget_crd()).unwrap();
    crd["spec"]["versions"][1]["deprecated"] = json!(true);
    crd["spec"]["versions"][0]["deprecated"] = json!(true);
    crd["spec"]["versions"][0]["deprecationWarning"] = json!("example.com/v1 Widget is old; use v2");
    crds.create(&PostParams::default(), &serde_json::from_value(crd).unwrap()).await.unwrap();
    let warning = |path: &'static str| {
        let client = client.clone();
        async move {
            let request = http::Request::get(path).body(kube::client::Body::empty()).unwrap();
            let response = client.send(request).await.unwrap();
            assert_eq!(response.status(), 200);
            response.headers().get_all("warning").iter().map(|v| v.to_str().unwrap().to_string()).collect::<Vec<_>>()
        }
    };
    assert_eq!(warning("/apis/example.com/v1/widgets").await, [r#"299 - "example.com/v1 Widget is old; use v2""#]);
    assert_eq!(warning("/apis/example.com/v1beta1/namespaces/default/widgets").await, [r#"299 - "example.com/v1beta1 Widget is deprecated""#]);
    server.stop().await;
}
