//! provider-http's CRDs, written from its published API (`apis/*/request/v1alpha2`,
//! `apis/*/disposablerequest/v1alpha2`, `apis/common`): `Request` and `DisposableRequest` in
//! `http.crossplane.io/v1alpha2` (cluster-scoped) and `http.m.crossplane.io/v1alpha2`
//! (namespaced), their ProviderConfigs, and the status fields provider-http keeps beside
//! the conditions (`response`, `cache`, `failed`, `error`, `requestDetails`, ...).

use oxplane_runtime::managed::crd::{CREDENTIAL_SOURCES, ManagedCrd, common_credentials, provider_config_crd, provider_config_usage_crd};
use serde_json::{Value, json};

use super::{CLUSTER_GROUP, CLUSTER_CONFIG_VERSION, NAMESPACED_GROUP, VERSION};

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

/// Every CRD of provider-http.
pub fn crds() -> Vec<Value> {
    let mut crds: Vec<Value> = managed_kinds().iter().map(|(crd, disposable)| render(crd, *disposable)).collect();
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
        let managed: Vec<Value> = crds().into_iter().filter(|c| c.pointer("/spec/names/categories").is_some_and(|k| k.as_array().is_some_and(|k| k.contains(&json!("managed"))))).collect();
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
}
