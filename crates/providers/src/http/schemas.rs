//! provider-http's CRDs, written from its published API (`apis/*/request/v1alpha2`,
//! `apis/*/disposablerequest/v1alpha2`, `apis/common`): `Request` and `DisposableRequest` in
//! `http.crossplane.io/v1alpha2` (cluster-scoped) and `http.m.crossplane.io/v1alpha2`
//! (namespaced), their ProviderConfigs, and the status fields provider-http keeps beside
//! the conditions (`response`, `cache`, `failed`, `error`, `requestDetails`, ...).

use oxplane_runtime::managed::crd::{CREDENTIAL_SOURCES, ManagedCrd, common_credentials, provider_config_crd, provider_config_usage_crd};
use serde_json::{Value, json};

use super::conversion::{DISPOSABLE_ONLY_V1ALPHA2, DISPOSABLE_PATH, REQUEST_ONLY_V1ALPHA2, REQUESTS_PATH, V1ALPHA1_METHODS};
use super::{CLUSTER_GROUP, CLUSTER_CONFIG_VERSION, NAMESPACED_GROUP, OLDER_VERSION, VERSION};
use crate::conversion::ConversionWebhook;

fn headers() -> Value {
    json!({"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}})
}

fn duration(description: &str) -> Value {
    json!({"type": "string", "description": description})
}

fn secret_key_selector() -> Value {
    json!({"type": "object", "required": ["key", "name", "namespace"], "properties": {
        "key": {"type": "string"}, "name": {"type": "string"}, "namespace": {"type": "string"}
    }})
}

/// `tlsConfig` (also a ProviderConfig's `tls`).
fn tls_config() -> Value {
    json!({"type": "object", "properties": {
        "caBundle": {"type": "string", "format": "byte", "description": "PEM CA bundle (base64 in JSON) trusted instead of the system roots."},
        "caCertSecretRef": secret_key_selector(),
        "clientCertSecretRef": secret_key_selector(),
        "clientKeySecretRef": secret_key_selector(),
        "insecureSkipVerify": {"type": "boolean"}
    }})
}

fn secret_injection_configs() -> Value {
    json!({"type": "array", "items": {"type": "object", "required": ["secretRef"], "properties": {
        "secretRef": {"type": "object", "required": ["name", "namespace"], "properties": {"name": {"type": "string"}, "namespace": {"type": "string"}}},
        "secretKey": {"type": "string", "description": "Deprecated: use keyMappings."},
        "responsePath": {"type": "string", "description": "Deprecated: use keyMappings."},
        "keyMappings": {"type": "array", "items": {"type": "object", "required": ["responseJQ", "secretKey"], "properties": {
            "secretKey": {"type": "string"},
            "responseJQ": {"type": "string"},
            "missingFieldStrategy": {"type": "string", "default": "delete", "enum": ["preserve", "setEmpty", "delete"]}
        }}},
        "metadata": {"type": "object", "properties": {
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "annotations": {"type": "object", "additionalProperties": {"type": "string"}}
        }},
        "setOwnerReference": {"type": "boolean"}
    }}})
}

fn response_check() -> Value {
    json!({"type": "object", "properties": {
        "type": {"type": "string", "enum": ["DEFAULT", "CUSTOM"]},
        "logic": {"type": "string", "description": "A jq expression over {response, payload} returning a boolean."}
    }})
}

fn exclusive_tls() -> Value {
    json!([{"rule": "!(has(self.insecureSkipTLSVerify) && self.insecureSkipTLSVerify == true && has(self.tlsConfig))", "message": "insecureSkipTLSVerify and tlsConfig are mutually exclusive"}])
}

fn allowed_status_codes() -> Value {
    json!({"type": "array", "items": {"type": "integer"}, "description": "Status codes (400-599) not treated as errors."})
}

/// `spec.forProvider` of a Request.
pub fn request_for_provider() -> Value {
    json!({
        "type": "object",
        "required": ["mappings", "payload"],
        "x-kubernetes-validations": exclusive_tls(),
        "properties": {
            "mappings": {"type": "array", "minItems": 1, "items": {"type": "object", "required": ["url"], "properties": {
                "method": {"type": "string", "enum": ["POST", "GET", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"]},
                "action": {"type": "string", "enum": ["CREATE", "OBSERVE", "UPDATE", "REMOVE"]},
                "body": {"type": "string", "description": "A jq expression over {payload, response} giving the body."},
                "url": {"type": "string", "description": "A jq expression over {payload, response} giving the URL."},
                "headers": headers()
            }}},
            "payload": {"type": "object", "properties": {"baseUrl": {"type": "string"}, "body": {"type": "string"}}},
            "headers": headers(),
            "waitTimeout": duration("How long a request may take (a Go duration)."),
            "insecureSkipTLSVerify": {"type": "boolean"},
            "tlsConfig": tls_config(),
            "secretInjectionConfigs": secret_injection_configs(),
            "expectedResponseCheck": response_check(),
            "isRemovedCheck": response_check(),
            "allowedStatusCodes": allowed_status_codes()
        }
    })
}

fn immutable(mut schema: Value, field: &str) -> Value {
    schema["x-kubernetes-validations"] = json!([{"rule": "self == oldSelf", "message": format!("Field 'forProvider.{field}' is immutable")}]);
    schema
}

/// `spec.forProvider` of a DisposableRequest.
pub fn disposable_for_provider() -> Value {
    json!({
        "type": "object",
        "required": ["method", "url"],
        "x-kubernetes-validations": exclusive_tls(),
        "properties": {
            "url": immutable(json!({"type": "string"}), "url"),
            "method": immutable(json!({"type": "string"}), "method"),
            "headers": immutable(headers(), "headers"),
            "body": immutable(json!({"type": "string"}), "body"),
            "waitTimeout": duration("How long the request may take (a Go duration)."),
            "rollbackRetriesLimit": {"type": "integer", "format": "int32"},
            "insecureSkipTLSVerify": {"type": "boolean"},
            "tlsConfig": tls_config(),
            "expectedResponse": {"type": "string", "description": "A jq expression over the response returning a boolean."},
            "nextReconcile": duration("With shouldLoopInfinitely, how long until the request is sent again."),
            "shouldLoopInfinitely": {"type": "boolean"},
            "secretInjectionConfigs": secret_injection_configs(),
            "allowedStatusCodes": allowed_status_codes()
        }
    })
}

fn response_schema() -> Value {
    json!({"type": "object", "properties": {"statusCode": {"type": "integer"}, "body": {"type": "string"}, "headers": headers()}})
}

fn request_details(method_required: bool) -> Value {
    let mut schema = json!({"type": "object", "properties": {
        "method": {"type": "string"}, "action": {"type": "string"}, "body": {"type": "string"}, "url": {"type": "string"}, "headers": headers()
    }});
    if method_required {
        schema["properties"].as_object_mut().map(|p| p.remove("action"));
    }
    schema
}

/// Status fields beside `atProvider` and the conditions.
fn status_fields(disposable: bool) -> Value {
    let mut fields = json!({
        "response": response_schema(),
        "failed": {"type": "integer", "format": "int32"},
        "error": {"type": "string"},
        "requestDetails": request_details(disposable)
    });
    if disposable {
        fields["synced"] = json!({"type": "boolean"});
        fields["lastReconcileTime"] = json!({"type": "string", "format": "date-time"});
    } else {
        fields["cache"] = json!({"type": "object", "properties": {"lastUpdated": {"type": "string"}, "response": response_schema()}});
    }
    fields
}

fn managed(kind: &str, plural: &str, namespaced: bool, for_provider: Value) -> ManagedCrd {
    ManagedCrd {
        group: if namespaced { NAMESPACED_GROUP } else { CLUSTER_GROUP }.into(),
        version: VERSION.into(),
        kind: kind.into(),
        plural: plural.into(),
        namespaced,
        categories: vec!["http".into()],
        for_provider,
        at_provider: json!({"type": "object"}),
        extra_columns: Vec::new(),
        for_provider_required: true,
    }
}

/// The managed kinds: Request and DisposableRequest, cluster-scoped and namespaced.
pub fn managed_kinds() -> Vec<(ManagedCrd, bool)> {
    let mut kinds = Vec::new();
    for namespaced in [false, true] {
        kinds.push((managed("Request", "requests", namespaced, request_for_provider()), false));
        kinds.push((managed("DisposableRequest", "disposablerequests", namespaced, disposable_for_provider()), true));
    }
    kinds
}

/// A managed kind's CRD with provider-http's status fields.
fn render(crd: &ManagedCrd, disposable: bool) -> Value {
    let mut rendered = crd.render();
    if let Some(properties) = rendered.pointer_mut("/spec/versions/0/schema/openAPIV3Schema/properties/status/properties").and_then(Value::as_object_mut)
        && let Value::Object(fields) = status_fields(disposable)
    {
        properties.extend(fields);
    }
    rendered
}

fn config_spec() -> Value {
    json!({"type": "object", "required": ["credentials"], "properties": {
        "credentials": common_credentials(&CREDENTIAL_SOURCES),
        "tls": tls_config()
    }})
}

/// Removes `fields` from `schema.properties`.
fn remove_properties(schema: Option<&mut Value>, fields: &[&str]) {
    if let Some(properties) = schema.and_then(|s| s.get_mut("properties")).and_then(Value::as_object_mut) {
        for field in fields {
            properties.remove(*field);
        }
    }
}

/// The v1alpha1 schema of a cluster-scoped kind, from its v1alpha2 one: upstream's v1alpha1
/// fields (see `conversion.rs` for the differences).
fn v1alpha1_schema(schema: &mut Value, disposable: bool) {
    // No tlsConfig: nothing to be exclusive with.
    if let Some(for_provider) = schema.pointer_mut("/properties/spec/properties/forProvider").and_then(Value::as_object_mut) {
        for_provider.remove("x-kubernetes-validations");
    }
    // The fields v1alpha1 has not: the ones its conversion keeps aside.
    let only_v1alpha2: &[&[&str]] = if disposable { &DISPOSABLE_ONLY_V1ALPHA2 } else { &REQUEST_ONLY_V1ALPHA2 };
    for path in only_v1alpha2 {
        if let Some((field, parents)) = path.split_last() {
            let pointer: String = parents.iter().map(|p| format!("/properties/{p}")).collect();
            remove_properties(schema.pointer_mut(&pointer), &[field]);
        }
    }
    if disposable {
        return;
    }
    let mappings = schema.pointer_mut("/properties/spec/properties/forProvider/properties/mappings").and_then(Value::as_object_mut);
    if let Some(mappings) = mappings {
        mappings.remove("minItems");
        if let Some(items) = mappings.get_mut("items") {
            items["required"] = json!(["method", "url"]);
            items["properties"]["method"]["enum"] = json!(V1ALPHA1_METHODS);
            remove_properties(Some(items), &["action"]);
        }
    }
    if let Some(details) = schema.pointer_mut("/properties/status/properties/requestDetails") {
        details["required"] = json!(["method", "url"]);
    }
}

/// The cluster-scoped kind's CRD also serves v1alpha1, converting through `webhook`.
fn serve_v1alpha1(crd: &mut Value, disposable: bool, webhook: &ConversionWebhook) {
    let Some(mut older) = crd.pointer("/spec/versions/0").cloned() else { return };
    older["name"] = json!(OLDER_VERSION);
    older["storage"] = json!(false);
    if let Some(schema) = older.pointer_mut("/schema/openAPIV3Schema") {
        v1alpha1_schema(schema, disposable);
    }
    if let Some(versions) = crd.pointer_mut("/spec/versions").and_then(Value::as_array_mut) {
        versions.push(older);
    }
    crd["spec"]["conversion"] = webhook.conversion(if disposable { DISPOSABLE_PATH } else { REQUESTS_PATH });
}

/// Every CRD of provider-http. With a conversion webhook, the cluster-scoped Request and
/// DisposableRequest are also served as v1alpha1, converted through it.
pub fn crds(conversion: Option<&ConversionWebhook>) -> Vec<Value> {
    let mut crds: Vec<Value> = managed_kinds()
        .iter()
        .map(|(crd, disposable)| {
            let mut rendered = render(crd, *disposable);
            if let Some(webhook) = conversion
                && !crd.namespaced
            {
                serve_v1alpha1(&mut rendered, *disposable, webhook);
            }
            rendered
        })
        .collect();
    // As upstream: the configs have no categories, the usages {crossplane, provider, http}, and
    // the namespaced group also serves ClusterProviderConfigUsage.
    let usage_categories = ["crossplane", "provider", "http"];
    crds.push(provider_config_crd(CLUSTER_GROUP, CLUSTER_CONFIG_VERSION, "ProviderConfig", "providerconfigs", false, config_spec(), &[]));
    crds.push(provider_config_usage_crd(CLUSTER_GROUP, CLUSTER_CONFIG_VERSION, "ProviderConfigUsage", "providerconfigusages", false, false, &usage_categories));
    crds.push(provider_config_crd(NAMESPACED_GROUP, VERSION, "ProviderConfig", "providerconfigs", true, config_spec(), &[]));
    crds.push(provider_config_crd(NAMESPACED_GROUP, VERSION, "ClusterProviderConfig", "clusterproviderconfigs", false, config_spec(), &[]));
    crds.push(provider_config_usage_crd(NAMESPACED_GROUP, VERSION, "ProviderConfigUsage", "providerconfigusages", true, true, &usage_categories));
    crds.push(provider_config_usage_crd(NAMESPACED_GROUP, VERSION, "ClusterProviderConfigUsage", "clusterproviderconfigusages", false, true, &usage_categories));
    crds
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Upstream's Request and DisposableRequest CRDs (both scopes) print READY, SYNCED,
    /// EXTERNAL-NAME and AGE, in that order, with those JSON paths.
    #[test]
    fn managed_kinds_print_upstream_columns() {
        let managed: Vec<Value> = crds(None).into_iter().filter(|c| c.pointer("/spec/names/categories").is_some_and(|k| k.as_array().is_some_and(|k| k.contains(&json!("managed"))))).collect();
        assert_eq!(managed.len(), 4);
        for crd in managed {
            let columns: Vec<(String, String)> = crd
                .pointer("/spec/versions/0/additionalPrinterColumns")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|c| (c["name"].as_str().unwrap_or_default().to_string(), c["jsonPath"].as_str().unwrap_or_default().to_string()))
                .collect();
            let expected = [
                ("READY", ".status.conditions[?(@.type=='Ready')].status"),
                ("SYNCED", ".status.conditions[?(@.type=='Synced')].status"),
                ("EXTERNAL-NAME", ".metadata.annotations.crossplane\\.io/external-name"),
                ("AGE", ".metadata.creationTimestamp"),
            ];
            assert_eq!(columns, expected.map(|(n, p)| (n.to_string(), p.to_string())), "{}", crd["metadata"]["name"]);
        }
    }

    /// As upstream's: the cluster-scoped kinds serve v1alpha1 beside v1alpha2 (storage), with
    /// v1alpha1's fields; the namespaced ones only v1alpha2. Only with a webhook to convert.
    #[test]
    fn cluster_kinds_serve_v1alpha1_with_its_fields() {
        let webhook = ConversionWebhook { base_url: "https://127.0.0.1:1".into(), ca_bundle: "Q0E=".into() };
        let served = crds(Some(&webhook));
        let crd = |name: &str| served.iter().find(|c| c["metadata"]["name"] == name).unwrap();
        let versions = |c: &Value| -> Vec<(String, bool)> {
            c["spec"]["versions"].as_array().unwrap().iter().map(|v| (v["name"].as_str().unwrap().to_string(), v["storage"] == true)).collect()
        };
        let both = vec![("v1alpha2".to_string(), true), ("v1alpha1".to_string(), false)];
        assert_eq!(versions(crd("requests.http.crossplane.io")), both);
        assert_eq!(versions(crd("disposablerequests.http.crossplane.io")), both);
        assert_eq!(versions(crd("requests.http.m.crossplane.io")), vec![("v1alpha2".to_string(), true)]);
        let requests = crd("requests.http.crossplane.io");
        assert_eq!(requests["spec"]["conversion"]["webhook"]["clientConfig"]["url"], "https://127.0.0.1:1/convert/requests.http.crossplane.io");
        let older = &requests["spec"]["versions"][1]["schema"]["openAPIV3Schema"]["properties"];
        let for_provider = &older["spec"]["properties"]["forProvider"];
        assert!(for_provider["properties"].get("tlsConfig").is_none());
        assert!(for_provider["properties"].get("expectedResponseCheck").is_none());
        assert_eq!(for_provider["properties"]["mappings"]["items"]["required"], json!(["method", "url"]));
        assert!(for_provider["properties"]["mappings"]["items"]["properties"].get("action").is_none());
        assert!(older["status"]["properties"]["requestDetails"]["properties"].get("action").is_none());
        // v1alpha2 is untouched.
        let newer = &requests["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["forProvider"]["properties"];
        assert!(newer.get("tlsConfig").is_some() && newer["mappings"]["items"]["properties"].get("action").is_some());
        let disposable = &crd("disposablerequests.http.crossplane.io")["spec"]["versions"][1]["schema"]["openAPIV3Schema"]["properties"];
        assert!(disposable["spec"]["properties"]["forProvider"]["properties"].get("shouldLoopInfinitely").is_none());
        assert!(disposable["status"]["properties"].get("lastReconcileTime").is_none());
        assert!(crds(None).iter().all(|c| c["spec"]["versions"].as_array().unwrap().len() == 1));
    }
}
