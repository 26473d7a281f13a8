//! CRDs of managed-resource kinds: every managed kind shares Crossplane's spec and status
//! fields (management policies, provider config reference, connection secret, deletion policy
//! for cluster-scoped kinds, conditions), printer columns and categories; a provider supplies
//! only its `forProvider` and `atProvider` schemas.

use serde_json::{Value, json};

/// What a provider says about one managed kind.
#[derive(Clone, Debug)]
pub struct ManagedCrd {
    /// API group, e.g. `nop.crossplane.io`.
    pub group: String,
    /// Version, e.g. `v1alpha1`.
    pub version: String,
    /// Kind, e.g. `NopResource`.
    pub kind: String,
    /// Plural, e.g. `nopresources`.
    pub plural: String,
    /// Namespaced (v2 style) or cluster-scoped (legacy).
    pub namespaced: bool,
    /// Extra categories after `crossplane` and `managed` (e.g. `nop`).
    pub categories: Vec<String>,
    /// The schema of `spec.forProvider` (also used for `spec.initProvider`, without required).
    pub for_provider: Value,
    /// The schema of `status.atProvider`.
    pub at_provider: Value,
    /// Printer columns shown between EXTERNAL-NAME and AGE.
    pub extra_columns: Vec<Value>,
    /// Whether `spec.forProvider` must be given.
    pub for_provider_required: bool,
}

fn conditions_schema() -> Value {
    json!({
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
        "items": {
            "type": "object",
            "required": ["lastTransitionTime", "reason", "status", "type"],
            "properties": {
                "type": {"type": "string"},
                "status": {"type": "string"},
                "reason": {"type": "string"},
                "message": {"type": "string"},
                "lastTransitionTime": {"type": "string", "format": "date-time"},
                "observedGeneration": {"type": "integer", "format": "int64"}
            }
        }
    })
}

/// A CRD with one version (`version` holds everything but the name flags and served/storage).
fn envelope(group: &str, kind: &str, plural: &str, namespaced: bool, categories: Vec<Value>, mut version: Value) -> Value {
    version["served"] = json!(true);
    version["storage"] = json!(true);
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "group": group,
            "names": {
                "kind": kind,
                "listKind": format!("{kind}List"),
                "plural": plural,
                "singular": kind.to_lowercase(),
                "categories": categories,
            },
            "scope": if namespaced { "Namespaced" } else { "Cluster" },
            "versions": [version]
        }
    })
}

/// An object schema with `apiVersion`, `kind`, `metadata` and the given properties.
fn object_schema(mut properties: Value, required: &[&str]) -> Value {
    properties["apiVersion"] = json!({"type": "string"});
    properties["kind"] = json!({"type": "string"});
    properties["metadata"] = json!({"type": "object"});
    let mut schema = json!({"type": "object", "properties": properties});
    if !required.is_empty() {
        schema["required"] = json!(required);
    }
    json!({"openAPIV3Schema": schema})
}

/// Removes `required` lists everywhere in a schema (for `initProvider`, which is partial).
fn without_required(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => Value::Object(
            map.iter().filter(|(k, _)| k.as_str() != "required").map(|(k, v)| (k.clone(), without_required(v))).collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_required).collect()),
        other => other.clone(),
    }
}

impl ManagedCrd {
    /// The CRD.
    pub fn render(&self) -> Value {
        let policies = json!({
            "type": "array",
            "default": ["*"],
            "items": {"type": "string", "enum": ["Observe", "Create", "Update", "Delete", "LateInitialize", "*"]},
            "description": "What the provider may do to the external resource."
        });
        let mut spec_properties = json!({
            "forProvider": self.for_provider,
            "initProvider": without_required(&self.for_provider),
            "managementPolicies": policies,
        });
        if self.namespaced {
            spec_properties["providerConfigRef"] = json!({
                "type": "object",
                "default": {"kind": "ClusterProviderConfig", "name": "default"},
                "required": ["kind", "name"],
                "properties": {"kind": {"type": "string"}, "name": {"type": "string"}}
            });
            spec_properties["writeConnectionSecretToRef"] = json!({
                "type": "object",
                "required": ["name"],
                "properties": {"name": {"type": "string"}}
            });
        } else {
            spec_properties["deletionPolicy"] = json!({"type": "string", "default": "Delete", "enum": ["Orphan", "Delete"]});
            spec_properties["providerConfigRef"] = json!({
                "type": "object",
                "default": {"name": "default"},
                "required": ["name"],
                "properties": {"name": {"type": "string"}, "policy": resolution_policy()}
            });
            spec_properties["writeConnectionSecretToRef"] = json!({
                "type": "object",
                "required": ["name", "namespace"],
                "properties": {"name": {"type": "string"}, "namespace": {"type": "string"}}
            });
        }
        let mut spec = json!({"type": "object", "properties": spec_properties});
        if self.for_provider_required {
            spec["required"] = json!(["forProvider"]);
        }
        let status = json!({
            "type": "object",
            "properties": {
                "atProvider": self.at_provider,
                "conditions": conditions_schema(),
                "observedGeneration": {"type": "integer", "format": "int64"},
                "lastHandledReconcileAt": {"type": "string"}
            }
        });
        let mut columns = vec![
            json!({"name": "READY", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Ready')].status"}),
            json!({"name": "SYNCED", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Synced')].status"}),
            json!({"name": "EXTERNAL-NAME", "type": "string", "jsonPath": ".metadata.annotations.crossplane\\.io/external-name"}),
        ];
        columns.extend(self.extra_columns.iter().cloned());
        columns.push(json!({"name": "AGE", "type": "date", "jsonPath": ".metadata.creationTimestamp"}));
        let mut categories = vec![json!("crossplane"), json!("managed")];
        categories.extend(self.categories.iter().map(|c| json!(c)));
        let version = json!({
            "name": self.version,
            "subresources": {"status": {}},
            "additionalPrinterColumns": columns,
            "schema": object_schema(json!({"spec": spec, "status": status}), &["spec"]),
        });
        envelope(&self.group, &self.kind, &self.plural, self.namespaced, categories, version)
    }

    /// The kind as the runtime addresses it.
    pub fn kind(&self) -> crate::kinds::Kind {
        crate::kinds::Kind::new(&self.group, &self.version, &self.kind, &self.plural, self.namespaced)
    }
}

/// `spec.credentials` of a ProviderConfig as crossplane-runtime defines it: a `source` (one of
/// `sources`), and the selectors `secretRef` (namespace, name and key), `env` and `fs`.
pub fn common_credentials(sources: &[&str]) -> Value {
    json!({"type": "object", "required": ["source"], "properties": {
        "source": {"type": "string", "enum": sources},
        "secretRef": {"type": "object", "required": ["key", "name", "namespace"], "properties": {
            "key": {"type": "string"}, "name": {"type": "string"}, "namespace": {"type": "string"}
        }},
        "env": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}},
        "fs": {"type": "object", "required": ["path"], "properties": {"path": {"type": "string"}}}
    }})
}

/// The credential sources crossplane-runtime knows.
pub const CREDENTIAL_SOURCES: [&str; 5] = ["None", "Secret", "InjectedIdentity", "Environment", "Filesystem"];

/// The CRD of a provider config kind (`ProviderConfig`, `ClusterProviderConfig`) with the given
/// spec schema (required, as every provider's `spec` field is), `status.users` and conditions,
/// `categories` as given (some providers give none), and the columns providers print: AGE, and
/// with `-o wide` SECRET-NAME, the credentials' Secret (`connectionSecretRef` or `secretRef`).
pub fn provider_config_crd(group: &str, version: &str, kind: &str, plural: &str, namespaced: bool, spec: Value, categories: &[&str]) -> Value {
    let status = json!({"type": "object", "properties": {
        "users": {"type": "integer", "format": "int64"},
        "conditions": conditions_schema()
    }});
    let secret = if spec.pointer("/properties/credentials/properties/connectionSecretRef").is_some() { "connectionSecretRef" } else { "secretRef" };
    let version = json!({
        "name": version,
        "subresources": {"status": {}},
        "additionalPrinterColumns": [
            {"name": "AGE", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
            {"name": "SECRET-NAME", "type": "string", "jsonPath": format!(".spec.credentials.{secret}.name"), "priority": 1}
        ],
        "schema": object_schema(json!({"spec": spec, "status": status}), &["spec"]),
    });
    envelope(group, kind, plural, namespaced, categories.iter().map(|c| json!(c)).collect(), version)
}

/// The CRD of a provider config usage kind. `typed`: the reference names the config's kind as
/// well (`ProviderConfigUsage` and `ClusterProviderConfigUsage` of `.m.` groups); otherwise it
/// is a legacy reference (a name, and an optional resolution policy).
pub fn provider_config_usage_crd(group: &str, version: &str, kind: &str, plural: &str, namespaced: bool, typed: bool, categories: &[&str]) -> Value {
    let reference = if typed {
        json!({"type": "object", "required": ["kind", "name"], "properties": {"kind": {"type": "string"}, "name": {"type": "string"}}})
    } else {
        json!({"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "policy": resolution_policy()}})
    };
    let resource = json!({"type": "object", "required": ["apiVersion", "kind", "name"], "properties": {
        "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "name": {"type": "string"}, "uid": {"type": "string"}
    }});
    let version = json!({
        "name": version,
        "additionalPrinterColumns": [
            {"name": "AGE", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
            {"name": "CONFIG-NAME", "type": "string", "jsonPath": ".providerConfigRef.name"},
            {"name": "RESOURCE-KIND", "type": "string", "jsonPath": ".resourceRef.kind"},
            {"name": "RESOURCE-NAME", "type": "string", "jsonPath": ".resourceRef.name"}
        ],
        "schema": object_schema(json!({"providerConfigRef": reference, "resourceRef": resource}), &["providerConfigRef", "resourceRef"]),
    });
    envelope(group, kind, plural, namespaced, categories.iter().map(|c| json!(c)).collect(), version)
}

/// A reference's `policy`: whether it must resolve, and when it is resolved again.
fn resolution_policy() -> Value {
    json!({"type": "object", "properties": {
        "resolution": {"type": "string", "default": "Required", "enum": ["Required", "Optional"]},
        "resolve": {"type": "string", "enum": ["Always", "IfNotPresent"]}
    }})
}
