//! Server-side apply through kube-rs: create-if-absent, managedFields, conflicts between field
//! managers and `force`, removal of fields a manager stops applying, list-map merging from a
//! CRD schema, and `Update` ownership for other writes.

use crate::support;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::{Value, json};
use support::TestServer;

fn entries(object: &impl kube::Resource) -> Vec<Value> {
    let managed = object.meta().managed_fields.clone().unwrap_or_default();
    managed.into_iter().map(|e| serde_json::to_value(e).unwrap()).collect()
}

fn entry<'a>(entries: &'a [Value], manager: &str) -> Option<&'a Value> {
    entries.iter().find(|e| e["manager"] == manager)
}

fn cm(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}, "data": data})
}

#[tokio::test]
async fn apply_creates_merges_conflicts_and_forces() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let as_ = |manager: &str| PatchParams::apply(manager);

    let created = cms.patch("applied", &as_("alice"), &Patch::Apply(cm(json!({"a": "1", "b": "2"})))).await.unwrap();
    assert_eq!(created.data.as_ref().unwrap()["a"], "1");
    let list = entries(&created);
    let alice = entry(&list, "alice").expect("an Apply entry for alice");
    assert_eq!(alice["operation"], "Apply");
    assert_eq!(alice["fieldsType"], "FieldsV1");
    assert_eq!(alice["fieldsV1"], json!({"f:data": {"f:a": {}, "f:b": {}}}));

    // Another manager, another field: both kept. Same field, same value: shared.
    let merged = cms.patch("applied", &as_("bob"), &Patch::Apply(cm(json!({"a": "1", "c": "3"})))).await.unwrap();
    assert_eq!(merged.data.as_ref().unwrap().len(), 3);

    // Same field, different value: a 409 naming the owner and the field.
    let error = cms.patch("applied", &as_("bob"), &Patch::Apply(cm(json!({"a": "9", "c": "3"})))).await.unwrap_err();
    let kube::Error::Api(status) = &error else { panic!("{error:?}") };
    assert_eq!(status.code, 409, "{status:?}");
    assert!(status.message.contains("conflict with \"alice\""), "{}", status.message);
    assert_eq!(status.reason, "Conflict");
    let causes: Vec<(String, String, String)> = status
        .details
        .as_ref()
        .expect("a 409 apply conflict has details")
        .causes
        .iter()
        .map(|c| (c.reason.clone(), c.field.clone(), c.message.clone()))
        .collect();
    assert_eq!(causes, [("FieldManagerConflict".to_string(), ".data.a".to_string(), "conflict with \"alice\"".to_string())]);
    // Conflicts on several fields: one cause each; the refused apply changed nothing.
    let error = cms.patch("applied", &as_("bob"), &Patch::Apply(cm(json!({"a": "9", "b": "9", "c": "3"})))).await.unwrap_err();
    let kube::Error::Api(status) = &error else { panic!("{error:?}") };
    assert_eq!(status.code, 409, "{status:?}");
    let mut fields: Vec<(&str, &str)> =
        status.details.as_ref().unwrap().causes.iter().map(|c| (c.reason.as_str(), c.field.as_str())).collect();
    fields.sort();
    assert_eq!(fields, [("FieldManagerConflict", ".data.a"), ("FieldManagerConflict", ".data.b")], "{status:?}");
    assert_eq!(status.message, "Apply failed with 2 conflicts: conflicts with \"alice\":\n- .data.a\n- .data.b");
    let unchanged = cms.get("applied").await.unwrap();
    assert_eq!(unchanged.metadata.resource_version, merged.metadata.resource_version);
    assert_eq!(unchanged.data, merged.data);
    let forced = cms.patch("applied", &as_("bob").force(), &Patch::Apply(cm(json!({"a": "9", "c": "3"})))).await.unwrap();
    assert_eq!(forced.data.as_ref().unwrap()["a"], "9");
    let list = entries(&forced);
    assert_eq!(entry(&list, "alice").unwrap()["fieldsV1"], json!({"f:data": {"f:b": {}}}), "alice lost a to bob");

    // Alice stops applying b: it goes. Bob stops applying c: it goes.
    let dropped = cms.patch("applied", &as_("alice"), &Patch::Apply(cm(json!({})))).await.unwrap();
    assert!(!dropped.data.as_ref().unwrap().contains_key("b"));
    let dropped = cms.patch("applied", &as_("bob"), &Patch::Apply(cm(json!({"a": "9"})))).await.unwrap();
    assert_eq!(dropped.data.unwrap(), [("a".to_string(), "9".to_string())].into());

    // A merge patch records Update ownership and takes the field from the applier.
    let patched = cms
        .patch("applied", &PatchParams { field_manager: Some("editor".into()), ..Default::default() }, &Patch::Merge(json!({"data": {"a": "7"}})))
        .await
        .unwrap();
    let list = entries(&patched);
    let editor = entry(&list, "editor").unwrap();
    assert_eq!(editor["operation"], "Update");
    assert_eq!(editor["fieldsV1"], json!({"f:data": {"f:a": {}}}));
    assert!(entry(&list, "bob").is_none(), "bob owned only a, now the editor's");
}

#[tokio::test]
async fn apply_needs_a_field_manager_and_a_matching_type() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let request = |query: &str, body: &str| {
        http::Request::builder()
            .method("PATCH")
            .uri(format!("/api/v1/namespaces/default/configmaps/x{query}"))
            .header("Content-Type", "application/apply-patch+yaml")
            .body(kube::client::Body::from(body.as_bytes().to_vec()))
            .unwrap()
    };
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  k: v\n";
    let response = client.send(request("", yaml)).await.unwrap();
    assert_eq!(response.status().as_u16(), 422);
    let response = client.send(request("?fieldManager=yaml", yaml)).await.unwrap();
    assert_eq!(response.status().as_u16(), 201, "a YAML body creates the object");
    let response = client.send(request("?fieldManager=yaml", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: x\n")).await.unwrap();
    assert_eq!(response.status().as_u16(), 400);
}

#[tokio::test]
async fn list_maps_merge_by_key_between_managers() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "routers.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "routers", "kind": "Router"},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "routes": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                            "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "to": {"type": "string"}}}},
                        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}}},
                    "status": {"type": "object", "properties": {"phase": {"type": "string"}}}}}}}]}
    });
    let crds: Api<DynamicObject> = Api::all_with(client.clone(), &ApiResource::from_gvk(&GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition")));
    crds.create(&PostParams::default(), &serde_json::from_value(crd).unwrap()).await.unwrap();
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Router"));
    let routers: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &resource);
    let config = |spec: Value| json!({"apiVersion": "example.com/v1", "kind": "Router", "metadata": {"name": "r"}, "spec": spec});

    routers.patch("r", &PatchParams::apply("a"), &Patch::Apply(config(json!({"routes": [{"name": "x", "to": "1"}], "tags": ["t1"]})))).await.unwrap();
    let both = routers.patch("r", &PatchParams::apply("b"), &Patch::Apply(config(json!({"routes": [{"name": "y", "to": "2"}], "tags": ["t2"]})))).await.unwrap();
    assert_eq!(both.data["spec"]["routes"], json!([{"name": "x", "to": "1"}, {"name": "y", "to": "2"}]));
    assert_eq!(both.data["spec"]["tags"], json!(["t1", "t2"]));
    let fewer = routers.patch("r", &PatchParams::apply("a"), &Patch::Apply(config(json!({})))).await.unwrap();
    assert_eq!(fewer.data["spec"]["routes"], json!([{"name": "y", "to": "2"}]), "a's item goes, b's stays");
    assert_eq!(fewer.data["spec"]["tags"], json!(["t2"]));

    // The status subresource is applied and owned separately.
    let status = json!({"apiVersion": "example.com/v1", "kind": "Router", "metadata": {"name": "r"}, "status": {"phase": "Ready"}});
    let with_status = routers.patch_status("r", &PatchParams::apply("ctrl"), &Patch::Apply(status)).await.unwrap();
    assert_eq!(with_status.data["status"]["phase"], "Ready");
    let list = entries(&with_status);
    let ctrl = entry(&list, "ctrl").unwrap();
    assert_eq!(ctrl["subresource"], "status");
    assert_eq!(ctrl["fieldsV1"], json!({"f:status": {"f:phase": {}}}));
}

#[tokio::test]
async fn writes_that_change_nothing_are_not_persisted() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let first = cms.patch("applied", &PatchParams::apply("alice"), &Patch::Apply(cm(json!({"a": "1"})))).await.unwrap();
    let version = first.metadata.resource_version.clone();
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    // The same apply again, a merge patch setting what is set, a PUT of the object as read.
    let again = cms.patch("applied", &PatchParams::apply("alice"), &Patch::Apply(cm(json!({"a": "1"})))).await.unwrap();
    assert_eq!(again.metadata.resource_version, version, "a no-op apply keeps the resourceVersion");
    assert_eq!(entries(&again), entries(&first), "and the managedFields timestamps");
    let merged = cms.patch("applied", &PatchParams::default(), &Patch::Merge(json!({"data": {"a": "1"}}))).await.unwrap();
    assert_eq!(merged.metadata.resource_version, version, "a no-op merge patch keeps the resourceVersion");
    let replaced = cms.replace("applied", &PostParams::default(), &first).await.unwrap();
    assert_eq!(replaced.metadata.resource_version, version, "a no-op PUT keeps the resourceVersion");
    // A real change is written.
    let changed = cms.patch("applied", &PatchParams::apply("alice"), &Patch::Apply(cm(json!({"a": "2"})))).await.unwrap();
    assert_ne!(changed.metadata.resource_version, version);
    server.stop().await;
}

#[tokio::test]
async fn a_resource_version_in_the_applied_configuration_is_a_precondition() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let created = cms.patch("applied", &PatchParams::apply("alice"), &Patch::Apply(cm(json!({"a": "1"})))).await.unwrap();
    let current = created.metadata.resource_version.clone().unwrap();

    // The current resourceVersion: applied, with force (a pinned apply still takes fields).
    let mut pinned = cm(json!({"a": "2"}));
    pinned["metadata"]["resourceVersion"] = json!(current);
    let updated = cms.patch("applied", &PatchParams::apply("alice"), &Patch::Apply(pinned.clone())).await.unwrap();
    assert_eq!(updated.data.as_ref().unwrap()["a"], "2");

    // A stale one: 409 as kube-apiserver answers, and nothing changed.
    pinned["data"] = json!({"a": "3"});
    let error = cms.patch("applied", &PatchParams::apply("alice").force(), &Patch::Apply(pinned)).await.unwrap_err();
    let kube::Error::Api(status) = &error else { panic!("{error:?}") };
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"), "{status:?}");
    assert!(status.message.contains("the object has been modified"), "{}", status.message);
    assert_eq!(cms.get("applied").await.unwrap().data.unwrap()["a"], "2");
}
