//! OpenAPI v3 documents (and an empty v2, see [`v2`]), built from the kinds served: one
//! document per group-version. kubectl needs them for `apply`, `create -f`, `edit` and `replace`
//! with default validation (it then sends `fieldValidation=Strict` and lets the server check),
//! for computing client-side-apply patches, and for `explain`.
//!
//! Built-in kinds take their schemas from [`builtin`], custom resources from their CRD's
//! `openAPIV3Schema`. The API server caches the documents; this module only builds them.

pub mod builtin;
pub mod v2;

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::resource::ResourceDef;

/// The index path of a group-version.
pub fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() { format!("api/{version}") } else { format!("apis/{group}/{version}") }
}

/// The component name of a kind: the reversed group, the version and the kind
/// (`io.k8s.api.core.v1.ConfigMap` for built-ins, `com.example.v1.Widget` for CRDs).
pub fn component_name(resource: &ResourceDef) -> String {
    if resource.crd.is_none() {
        let group = match resource.group.as_str() {
            "" => "core".to_string(),
            g => g.trim_end_matches(".k8s.io").replace('.', "_"),
        };
        let prefix = if resource.group == "apiextensions.k8s.io" {
            "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions".to_string()
        } else {
            format!("io.k8s.api.{group}")
        };
        return format!("{prefix}.{}.{}", resource.version, resource.kind);
    }
    let reversed: Vec<&str> = resource.group.split('.').rev().collect();
    format!("{}.{}.{}", reversed.join("."), resource.version, resource.kind)
}

fn gvk(resource: &ResourceDef) -> Value {
    json!({"group": resource.group, "version": resource.version, "kind": resource.kind})
}

fn query_parameter(name: &str, description: &str) -> Value {
    json!({"name": name, "in": "query", "description": description, "schema": {"type": "string", "uniqueItems": true}})
}

fn operation(resource: &ResourceDef, action: &str, list: bool, body: Option<Vec<&str>>) -> Value {
    let reference = json!({"$ref": format!("#/components/schemas/{}", component_name(resource))});
    let mut op = json!({
        "description": format!("{action} {}", resource.kind),
        "operationId": format!("{action}{}{}", resource.kind, if list { "List" } else { "" }),
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk(resource),
        "parameters": [
            query_parameter("dryRun", "When present, indicates that modifications should not be persisted."),
            query_parameter("fieldManager", "A name associated with the actor or entity that is making these changes."),
            query_parameter("fieldValidation", "How the server handles unknown and duplicate fields: Ignore, Warn or Strict."),
        ],
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": reference}}}},
    });
    if let Some(types) = body {
        let content: Map<String, Value> = types.into_iter().map(|t| (t.to_string(), json!({"schema": reference}))).collect();
        op["requestBody"] = json!({"content": content, "required": true});
    }
    op
}

/// The paths of one resource: its collection (namespaced and cluster-wide) and its items.
fn paths(resource: &ResourceDef, out: &mut Map<String, Value>) {
    let base = if resource.group.is_empty() { format!("/api/{}", resource.version) } else { format!("/apis/{}/{}", resource.group, resource.version) };
    let collection = if resource.namespaced {
        format!("{base}/namespaces/{{namespace}}/{}", resource.plural)
    } else {
        format!("{base}/{}", resource.plural)
    };
    if resource.create_only {
        // A review: created, answered, never stored; nothing to read, change or delete.
        out.insert(collection, json!({"post": operation(resource, "post", false, Some(vec!["application/json"]))}));
        return;
    }
    let mut patch_types = vec!["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"];
    if resource.crd.is_none() {
        patch_types.push("application/strategic-merge-patch+json");
    }
    out.insert(
        collection.clone(),
        json!({
            "get": operation(resource, "list", true, None),
            "post": operation(resource, "post", false, Some(vec!["application/json"])),
        }),
    );
    out.insert(
        format!("{collection}/{{name}}"),
        json!({
            "get": operation(resource, "get", false, None),
            "put": operation(resource, "put", false, Some(vec!["application/json"])),
            "patch": operation(resource, "patch", false, Some(patch_types.clone())),
            "delete": operation(resource, "delete", false, None),
        }),
    );
    for sub in &resource.subresources {
        if sub == "token" {
            // TokenRequest: create only.
            out.insert(format!("{collection}/{{name}}/{sub}"), json!({"post": operation(resource, "post", false, Some(vec!["application/json"]))}));
            continue;
        }
        out.insert(
            format!("{collection}/{{name}}/{sub}"),
            json!({
                "get": operation(resource, "get", false, None),
                "put": operation(resource, "put", false, Some(vec!["application/json"])),
                "patch": operation(resource, "patch", false, Some(patch_types.clone())),
            }),
        );
    }
}

/// The schema of a kind, with apiVersion, kind and the full ObjectMeta.
fn kind_schema(resource: &ResourceDef) -> Value {
    let mut schema = match &resource.schema {
        Some(schema) => (**schema).clone(),
        None => builtin::schema(&resource.group, &resource.kind),
    };
    if !schema.is_object() {
        schema = json!({"type": "object"});
    }
    schema["type"] = json!("object");
    let properties = schema
        .as_object_mut()
        .map(|o| o.entry("properties").or_insert_with(|| json!({})))
        .and_then(Value::as_object_mut);
    if let Some(properties) = properties {
        properties.insert("apiVersion".into(), json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."}));
        properties.insert("kind".into(), json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents."}));
        properties.insert("metadata".into(), json!({"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}], "default": {}, "description": "Standard object's metadata."}));
    }
    schema["x-kubernetes-group-version-kind"] = json!([gvk(resource)]);
    schema
}

/// The OpenAPI v3 document of the given kinds (all of one group-version).
pub fn build(resources: &[Arc<ResourceDef>]) -> Value {
    let mut path_map = Map::new();
    let mut components = builtin::meta_components();
    for resource in resources {
        paths(resource, &mut path_map);
        components.insert(component_name(resource), kind_schema(resource));
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": path_map,
        "components": {"schemas": components},
    })
}
