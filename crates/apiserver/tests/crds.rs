//! CustomResourceDefinitions become served kinds at once, in every served version, and stay
//! served across restarts.

use crate::support;

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

/// GET `uri` with an optional Accept header; the status code and the JSON body (or Null).
async fn get_json(client: &kube::Client, uri: &str, accept: Option<&str>) -> (u16, serde_json::Value) {
    let mut request = http::Request::get(uri);
    if let Some(accept) = accept {
        request = request.header("Accept", accept);
    }
    let response = client.send(request.body(kube::client::Body::empty()).unwrap()).await.unwrap();
    let code = response.status().as_u16();
    let bytes = http_body_util::BodyExt::collect(response.into_body()).await.unwrap().to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null))
}

const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// The kinds aggregated discovery lists for `group`, as `version/Kind`.
async fn aggregated_kinds(client: &kube::Client, group: &str) -> Vec<String> {
    let (code, list) = get_json(client, "/apis", Some(AGGREGATED)).await;
    assert_eq!(code, 200);
    let mut kinds = Vec::new();
    for item in list["items"].as_array().unwrap().iter().filter(|i| i["metadata"]["name"] == group) {
        for version in item["versions"].as_array().unwrap() {
            for resource in version["resources"].as_array().unwrap() {
                kinds.push(format!("{}/{}", version["version"].as_str().unwrap(), resource["responseKind"]["kind"].as_str().unwrap()));
            }
        }
    }
    kinds
}

/// The `/openapi/v3` index's URL for `path` (`apis/<group>/<version>`), if listed.
async fn openapi_url(client: &kube::Client, path: &str) -> Option<String> {
    let (code, index) = get_json(client, "/openapi/v3", None).await;
    assert_eq!(code, 200);
    index["paths"][path]["serverRelativeURL"].as_str().map(String::from)
}

/// Waits (generously) until `check` holds; panics with `what` if it never does.
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..600 {
        if check().await {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("timed out waiting until {what}");
}

fn gadget_crd() -> CustomResourceDefinition {
    let mut crd = serde_json::to_value(widget_crd()).unwrap();
    crd["metadata"]["name"] = json!("gadgets.example.com");
    crd["spec"]["names"] = json!({"plural": "gadgets", "singular": "gadget", "kind": "Gadget"});
    crd["spec"]["versions"] = json!([crd["spec"]["versions"][0].clone()]);
    serde_json::from_value(crd).unwrap()
}

#[tokio::test]
async fn a_deleted_crd_leaves_discovery_and_openapi() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &widget_crd()).await.unwrap();
    crds.create(&PostParams::default(), &gadget_crd()).await.unwrap();
    widgets(&client, "v1").create(&PostParams::default(), &widget("v1", "w")).await.unwrap();

    // Both kinds are listed everywhere first.
    let (code, group) = get_json(&client, "/apis/example.com", None).await;
    assert_eq!(code, 200, "{group}");
    assert_eq!(group["kind"], "APIGroup");
    assert_eq!(group["versions"], json!([{"groupVersion": "example.com/v1", "version": "v1"}, {"groupVersion": "example.com/v1beta1", "version": "v1beta1"}]));
    assert_eq!(group["preferredVersion"]["version"], "v1");
    let (_, resources) = get_json(&client, "/apis/example.com/v1", None).await;
    let names: Vec<&str> = resources["resources"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"widgets") && names.contains(&"gadgets"), "{names:?}");
    let mut kinds = aggregated_kinds(&client, "example.com").await;
    kinds.sort();
    assert_eq!(kinds, ["v1/Gadget", "v1/Widget", "v1beta1/Widget"]);
    let v1_url = openapi_url(&client, "apis/example.com/v1").await.expect("example.com/v1 in /openapi/v3");
    assert!(openapi_url(&client, "apis/example.com/v1beta1").await.is_some());
    let (_, document) = get_json(&client, &v1_url, None).await;
    assert!(document["components"]["schemas"]["com.example.v1.Widget"].is_object(), "{}", document["components"]["schemas"]);

    // The widgets' CRD goes (its custom resources first).
    crds.delete("widgets.example.com", &Default::default()).await.unwrap();
    eventually("the widgets CRD is gone", || async { crds.get_opt("widgets.example.com").await.unwrap().is_none() }).await;
    eventually("example.com/v1beta1 leaves /apis/example.com", || async {
        get_json(&client, "/apis/example.com", None).await.1["versions"] == json!([{"groupVersion": "example.com/v1", "version": "v1"}])
    })
    .await;
    let (_, resources) = get_json(&client, "/apis/example.com/v1", None).await;
    let names: Vec<&str> = resources["resources"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["gadgets", "gadgets/status"], "{resources}");
    assert_eq!(get_json(&client, "/apis/example.com/v1beta1", None).await.0, 404);
    assert_eq!(aggregated_kinds(&client, "example.com").await, ["v1/Gadget"]);
    let (code, legacy) = get_json(&client, "/apis", None).await;
    assert_eq!(code, 200);
    let group = legacy["groups"].as_array().unwrap().iter().find(|g| g["name"] == "example.com").unwrap();
    assert_eq!(group["versions"].as_array().unwrap().len(), 1, "{group}");
    assert!(openapi_url(&client, "apis/example.com/v1beta1").await.is_none(), "v1beta1 leaves /openapi/v3");
    let new_v1_url = openapi_url(&client, "apis/example.com/v1").await.unwrap();
    assert_ne!(new_v1_url, v1_url, "the v1 document's hash changes");
    let (_, document) = get_json(&client, &new_v1_url, None).await;
    let schemas = &document["components"]["schemas"];
    assert!(schemas.get("com.example.v1.Widget").is_none() && schemas["com.example.v1.Gadget"].is_object(), "{schemas}");
    assert!(document["paths"].as_object().unwrap().keys().all(|p| !p.contains("widgets")), "{}", document["paths"]);
    assert_eq!(get_json(&client, "/openapi/v3/apis/example.com/v1beta1", None).await.0, 404);

    // The last kind of the group goes: so does the group.
    crds.delete("gadgets.example.com", &Default::default()).await.unwrap();
    eventually("the group leaves discovery", || async { get_json(&client, "/apis/example.com", None).await.0 == 404 }).await;
    let (_, legacy) = get_json(&client, "/apis", None).await;
    assert!(legacy["groups"].as_array().unwrap().iter().all(|g| g["name"] != "example.com"), "{legacy}");
    assert!(aggregated_kinds(&client, "example.com").await.is_empty());
    assert_eq!(get_json(&client, "/apis/example.com/v1", None).await.0, 404);
    assert!(openapi_url(&client, "apis/example.com/v1").await.is_none(), "example.com/v1 leaves /openapi/v3");
    server.stop().await;
}

#[tokio::test]
async fn the_openapi_hash_of_a_group_version_follows_its_crd_schema() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut crd = serde_json::to_value(widget_crd()).unwrap();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"] =
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}});
    crds.create(&PostParams::default(), &serde_json::from_value(crd).unwrap()).await.unwrap();
    let before = openapi_url(&client, "apis/example.com/v1").await.unwrap();
    let beta_before = openapi_url(&client, "apis/example.com/v1beta1").await.unwrap();
    assert_eq!(openapi_url(&client, "apis/example.com/v1").await.unwrap(), before, "the hash is stable while nothing changes");

    // A write to the CRD that leaves the schema alone leaves the hash alone.
    let labelled = json!({"metadata": {"labels": {"team": "a"}}});
    crds.patch("widgets.example.com", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&labelled)).await.unwrap();
    assert_eq!(openapi_url(&client, "apis/example.com/v1").await.unwrap(), before);

    // A new property in v1's schema: a new hash for v1, whose document has the property; v1beta1 keeps its hash.
    let mut current = serde_json::to_value(crds.get("widgets.example.com").await.unwrap()).unwrap();
    current["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["colour"] = json!({"type": "string"});
    crds.replace("widgets.example.com", &PostParams::default(), &serde_json::from_value(current).unwrap()).await.unwrap();
    let after = openapi_url(&client, "apis/example.com/v1").await.unwrap();
    assert_ne!(after, before, "the v1 hash changed with its schema");
    assert_eq!(openapi_url(&client, "apis/example.com/v1beta1").await.unwrap(), beta_before);
    let (code, document) = get_json(&client, &after, None).await;
    assert_eq!(code, 200);
    let spec = &document["components"]["schemas"]["com.example.v1.Widget"]["properties"]["spec"]["properties"];
    assert_eq!(spec["colour"]["type"], "string", "{spec}");
    server.stop().await;
}

#[tokio::test]
async fn names_accepted_is_reported_and_a_conflicting_kind_is_refused_its_names() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let created = crds.create(&PostParams::default(), &widget_crd()).await.unwrap();
    for crd in [created, crds.get("widgets.example.com").await.unwrap()] {
        let status = crd.status.unwrap();
        let conditions = status.conditions.unwrap();
        let names = conditions.iter().find(|c| c.type_ == "NamesAccepted").expect("a NamesAccepted condition");
        assert_eq!((names.status.as_str(), names.reason.as_deref()), ("True", Some("NoConflicts")));
        assert_eq!(names.message.as_deref(), Some("no conflicts found"));
        let accepted = status.accepted_names.unwrap();
        assert_eq!((accepted.plural.as_str(), accepted.kind.as_str()), ("widgets", "Widget"));
        assert_eq!(accepted.singular.as_deref(), Some("widget"));
        assert_eq!(accepted.list_kind.as_deref(), Some("WidgetList"));
        assert_eq!(accepted.short_names, Some(vec!["wd".to_string()]));
    }

    // Another CRD of the group claiming the kind Widget does not get its names, and is not served.
    let mut clash = serde_json::to_value(gadget_crd()).unwrap();
    clash["spec"]["names"]["kind"] = json!("Widget");
    crds.create(&PostParams::default(), &serde_json::from_value(clash).unwrap()).await.unwrap();
    let stored = crds.get("gadgets.example.com").await.unwrap();
    let conditions = stored.status.unwrap().conditions.unwrap();
    let names = conditions.iter().find(|c| c.type_ == "NamesAccepted").unwrap();
    assert_eq!((names.status.as_str(), names.reason.as_deref()), ("False", Some("NameConflict")), "{names:?}");
    let established = conditions.iter().find(|c| c.type_ == "Established").unwrap();
    assert_eq!(established.status, "False");
    assert_eq!(get_json(&client, "/apis/example.com/v1/namespaces/default/gadgets", None).await.0, 404);
    server.stop().await;
}
