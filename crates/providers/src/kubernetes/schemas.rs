//! provider-kubernetes's CRDs, written from its published API (`apis/cluster/object/v1alpha2`,
//! `apis/namespaced/object/v1alpha1`, `apis/*/v1alpha1` provider configs): `Object` in
//! `kubernetes.crossplane.io/v1alpha2` (cluster-scoped) and `kubernetes.m.crossplane.io/v1alpha1`
//! (namespaced), with `references`, `readiness`, `connectionDetails` and `watch` beside
//! `forProvider`, and the ProviderConfigs.

use oxplane_runtime::managed::crd::{CREDENTIAL_SOURCES, ManagedCrd, common_credentials, provider_config_crd, provider_config_usage_crd};
use serde_json::{Value, json};

use super::{CLUSTER_GROUP, CLUSTER_VERSION, CONFIG_VERSION, NAMESPACED_GROUP, NAMESPACED_VERSION, OLDER_CLUSTER_VERSION};
use crate::conversion::ConversionWebhook;

/// The properties of a reference; `default_object` names the Object version a reference
/// without apiVersion and kind means.
fn object_reference(default_object: Option<&str>) -> Value {
    let mut properties = json!({
        "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "name": {"type": "string"}, "namespace": {"type": "string"}
    });
    if let Some(api_version) = default_object {
        properties["apiVersion"]["default"] = json!(api_version);
        properties["kind"]["default"] = json!("Object");
    }
    properties
}

/// The apiVersion a reference defaults to: upstream's v1alpha1 Object of the same scope.
pub fn default_reference_api_version(namespaced: bool) -> String {
    if namespaced { format!("{NAMESPACED_GROUP}/{NAMESPACED_VERSION}") } else { format!("{CLUSTER_GROUP}/{OLDER_CLUSTER_VERSION}") }
}

fn extra_spec(namespaced: bool) -> Value {
    let default = default_reference_api_version(namespaced);
    let mut patches_from = json!({"type": "object", "required": ["fieldPath", "name"], "properties": object_reference(Some(&default))});
    patches_from["properties"]["fieldPath"] = json!({"type": "string"});
    let mut connection = json!({"type": "object", "properties": object_reference(None)});
    connection["properties"]["fieldPath"] = json!({"type": "string"});
    connection["properties"]["toConnectionSecretKey"] = json!({"type": "string"});
    connection["properties"]["uid"] = json!({"type": "string"});
    connection["properties"]["resourceVersion"] = json!({"type": "string"});
    json!({
        "references": {"type": "array", "items": {"type": "object", "properties": {
            "dependsOn": {"type": "object", "required": ["name"], "properties": object_reference(Some(&default))},
            "patchesFrom": patches_from,
            "toFieldPath": {"type": "string"}
        }}},
        "readiness": {
            "type": "object",
            "x-kubernetes-validations": [{"rule": "!has(self.policy) || self.policy != 'DeriveFromCelQuery' || (has(self.celQuery) && size(self.celQuery) > 0)", "message": "celQuery must be set if policy is DeriveFromCelQuery"}],
            "properties": {
                "policy": {"type": "string", "default": "SuccessfulCreate", "enum": ["SuccessfulCreate", "DeriveFromObject", "AllTrue", "DeriveFromCelQuery"]},
                "celQuery": {"type": "string"}
            }
        },
        "connectionDetails": {"type": "array", "items": connection},
        "watch": {"type": "boolean", "default": false}
    })
}

fn for_provider() -> Value {
    json!({"type": "object", "required": ["manifest"], "properties": {
        "manifest": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true},
        "deletionPropagationPolicy": {"type": "string", "default": "Background", "enum": ["Orphan", "Background", "Foreground"]}
    }})
}

/// The Object kinds: cluster-scoped and namespaced.
pub fn object_kinds() -> Vec<ManagedCrd> {
    [(CLUSTER_GROUP, CLUSTER_VERSION, false), (NAMESPACED_GROUP, NAMESPACED_VERSION, true)]
        .into_iter()
        .map(|(group, version, namespaced)| ManagedCrd {
            group: group.into(),
            version: version.into(),
            kind: "Object".into(),
            plural: "objects".into(),
            namespaced,
            categories: vec!["kubernetes".into()],
            for_provider: for_provider(),
            at_provider: json!({"type": "object", "properties": {
                "manifest": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}
            }}),
            // Replaced by upstream's columns in `render`.
            extra_columns: Vec::new(),
            for_provider_required: true,
        })
        .collect()
}

fn render(crd: &ManagedCrd) -> Value {
    let mut rendered = crd.render();
    if let Some(properties) = rendered.pointer_mut("/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties").and_then(Value::as_object_mut)
        && let Value::Object(extra) = extra_spec(crd.namespaced)
    {
        properties.extend(extra);
    }
    // Upstream's columns, in its order (no EXTERNAL-NAME: an Object's object is named by its
    // manifest).
    let column = |name: &str, path: &str, priority: u8| {
        let mut c = json!({"name": name, "type": "string", "jsonPath": path});
        if priority > 0 {
            c["priority"] = json!(priority);
        }
        c
    };
    rendered["spec"]["versions"][0]["additionalPrinterColumns"] = json!([
        column("KIND", ".spec.forProvider.manifest.kind", 0),
        column("APIVERSION", ".spec.forProvider.manifest.apiVersion", 1),
        column("METANAME", ".spec.forProvider.manifest.metadata.name", 1),
        column("METANAMESPACE", ".spec.forProvider.manifest.metadata.namespace", 1),
        column("PROVIDERCONFIG", ".spec.providerConfigRef.name", 0),
        column("SYNCED", ".status.conditions[?(@.type=='Synced')].status", 0),
        column("READY", ".status.conditions[?(@.type=='Ready')].status", 0),
        {"name": "AGE", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
    ]);
    // The cluster-scoped Object is also served as v1alpha1 (deprecated), the version references
    // name by default. With the conversion webhook it has its own fields (see `crds`).
    if crd.version == CLUSTER_VERSION
        && let Some(versions) = rendered.pointer_mut("/spec/versions").and_then(Value::as_array_mut)
        && let Some(mut older) = versions.first().cloned()
    {
        older["name"] = json!(OLDER_CLUSTER_VERSION);
        older["storage"] = json!(false);
        older["deprecated"] = json!(true);
        versions.push(older);
    }
    rendered
}

/// v1alpha1's spec fields where they differ from v1alpha2's: `managementPolicy` for
/// `managementPolicies`, the deprecated `providerRef`, no `deletionPropagationPolicy`, and
/// readiness without `DeriveFromCelQuery`.
fn v1alpha1_spec(spec: &mut serde_json::Map<String, Value>) {
    spec.remove("managementPolicies");
    spec.remove("initProvider");
    spec.insert(
        "managementPolicy".into(),
        json!({"type": "string", "default": "Default", "enum": ["Default", "ObserveCreateUpdate", "ObserveDelete", "Observe"]}),
    );
    spec.insert("providerRef".into(), json!({"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}));
    if let Some(for_provider) = spec.get_mut("forProvider").and_then(|f| f.get_mut("properties")).and_then(Value::as_object_mut) {
        for_provider.remove("deletionPropagationPolicy");
    }
    spec.insert(
        "readiness".into(),
        json!({"type": "object", "properties": {
            "policy": {"type": "string", "default": "SuccessfulCreate", "enum": ["SuccessfulCreate", "DeriveFromObject", "AllTrue"]}
        }}),
    );
}

fn config_spec() -> Value {
    let mut identity = common_credentials(&CREDENTIAL_SOURCES);
    identity["required"] = json!(["source", "type"]);
    identity["properties"]["type"] = json!({"type": "string", "enum": [
        "GoogleApplicationCredentials", "AzureServicePrincipalCredentials", "AzureWorkloadIdentityCredentials", "UpboundTokens", "AWSWebIdentityCredentials"
    ]});
    json!({"type": "object", "required": ["credentials"], "properties": {
        "credentials": common_credentials(&CREDENTIAL_SOURCES),
        "identity": identity
    }})
}

/// Every CRD of provider-kubernetes. With a conversion webhook, the cluster-scoped Object's
/// v1alpha1 has upstream's v1alpha1 fields and objects are converted through it; without one
/// (an API server with no webhook to call), v1alpha1 shows v1alpha2's fields unconverted.
pub fn crds(conversion: Option<&ConversionWebhook>) -> Vec<Value> {
    let mut crds: Vec<Value> = object_kinds().iter().map(render).collect();
    for crd in &mut crds {
        let Some(webhook) = conversion else { break };
        if crd.pointer("/spec/group").and_then(Value::as_str) != Some(CLUSTER_GROUP) {
            continue;
        }
        crd["spec"]["conversion"] = webhook.conversion(super::CONVERSION_PATH);
        for version in crd.pointer_mut("/spec/versions").and_then(Value::as_array_mut).into_iter().flatten() {
            if version["name"] == OLDER_CLUSTER_VERSION
                && let Some(spec) = version.pointer_mut("/schema/openAPIV3Schema/properties/spec/properties").and_then(Value::as_object_mut)
            {
                v1alpha1_spec(spec);
            }
        }
    }
    let categories = ["crossplane", "provider", "kubernetes"];
    crds.push(provider_config_crd(CLUSTER_GROUP, CONFIG_VERSION, "ProviderConfig", "providerconfigs", false, config_spec(), &categories));
    crds.push(provider_config_usage_crd(CLUSTER_GROUP, CONFIG_VERSION, "ProviderConfigUsage", "providerconfigusages", false, false, &categories));
    crds.push(provider_config_crd(NAMESPACED_GROUP, CONFIG_VERSION, "ProviderConfig", "providerconfigs", true, config_spec(), &categories));
    crds.push(provider_config_crd(NAMESPACED_GROUP, CONFIG_VERSION, "ClusterProviderConfig", "clusterproviderconfigs", false, config_spec(), &categories));
    crds.push(provider_config_usage_crd(NAMESPACED_GROUP, CONFIG_VERSION, "ProviderConfigUsage", "providerconfigusages", true, true, &categories));
    crds
}
