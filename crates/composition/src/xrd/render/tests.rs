//! Fixture tests of XR and claim CRD rendering: realistic XRDs in both API versions, and the
//! rendered CRDs checked field by field against the reference and against oxplane's own CRD
//! validation.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

mod fixtures;
use fixtures::*;

fn assert_valid_crd(crd: &Value) {
    let causes = oxplane_apiserver::crd::validate(crd);
    assert!(causes.is_empty(), "rendered CRD rejected: {causes:?}\n{crd:#}");
}

fn version<'a>(crd: &'a Value, name: &str) -> &'a Value {
    crd["spec"]["versions"].as_array().unwrap().iter().find(|v| v["name"] == name).unwrap()
}

fn schema<'a>(crd: &'a Value, name: &str) -> &'a Value {
    &version(crd, name)["schema"]["openAPIV3Schema"]
}

fn column_names(version: &Value) -> Vec<&str> {
    version["additionalPrinterColumns"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect()
}

fn sorted_keys(object: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = object.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    keys
}

#[test]
fn v1_xr_crd_metadata_names_and_owner() {
    let crd = xr_crd(&postgres_v1()).unwrap();
    assert_eq!(crd["apiVersion"], "apiextensions.k8s.io/v1");
    assert_eq!(crd["kind"], "CustomResourceDefinition");
    assert_eq!(crd["metadata"]["name"], "xpostgresqlinstances.example.org");
    // spec.metadata labels win over the XRD's own; the XRD's own annotations are not copied.
    assert_eq!(crd["metadata"]["labels"], json!({"team": "data", "tier": "platinum", "owner": "platform"}));
    assert_eq!(crd["metadata"]["annotations"], json!({"docs.example.org/url": "https://docs.example.org/pg"}));
    assert_eq!(
        crd["metadata"]["ownerReferences"],
        json!([{
            "apiVersion": "apiextensions.crossplane.io/v1",
            "kind": "CompositeResourceDefinition",
            "name": "xpostgresqlinstances.example.org",
            "uid": "6f2c8a1e-0d3b-4c55-9a7e-2b1f0c9d8e71",
            "controller": true,
            "blockOwnerDeletion": true,
        }])
    );
    assert_eq!(crd["spec"]["group"], "example.org");
    assert_eq!(
        crd["spec"]["names"],
        json!({"kind": "XPostgreSQLInstance", "plural": "xpostgresqlinstances", "categories": ["databases", "composite"]})
    );
    assert_eq!(crd["spec"]["scope"], "Cluster");
    assert!(crd["spec"].get("conversion").is_none());
    assert_valid_crd(&crd);
}

#[test]
fn v1_xr_version_and_schema_skeleton() {
    let crd = xr_crd(&postgres_v1()).unwrap();
    assert_eq!(crd["spec"]["versions"].as_array().unwrap().len(), 1);
    let v = version(&crd, "v1alpha1");
    assert_eq!(v["served"], true);
    assert_eq!(v["storage"], true);
    assert_eq!(v["deprecated"], false);
    assert!(v.get("deprecationWarning").is_none());
    assert_eq!(v["subresources"], json!({"status": {}}));

    let s = schema(&crd, "v1alpha1");
    assert_eq!(s["type"], "object");
    assert_eq!(s["description"], "A PostgreSQL instance.");
    assert_eq!(s["required"], json!(["spec"]));
    assert_eq!(s["x-kubernetes-validations"], json!([{"rule": "self.spec.parameters.storageGB <= 1000", "message": "at most 1000GB"}]));
    assert_eq!(sorted_keys(&s["properties"]), ["apiVersion", "kind", "metadata", "spec", "status"]);
    assert_eq!(s["properties"]["apiVersion"], json!({"type": "string"}));
    assert_eq!(s["properties"]["kind"], json!({"type": "string"}));
    // The user's smaller maxLength is kept.
    assert_eq!(
        s["properties"]["metadata"],
        json!({"type": "object", "properties": {"name": {"type": "string", "maxLength": 40}}})
    );
}

#[test]
fn legacy_spec_gets_reconcile_props_at_its_top_over_user_props() {
    let crd = xr_crd(&postgres_v1()).unwrap();
    let spec = &schema(&crd, "v1alpha1")["properties"]["spec"];
    assert_eq!(spec["type"], "object");
    assert_eq!(spec["description"], "The desired instance.");
    assert_eq!(spec["required"], json!(["parameters"]));
    assert_eq!(spec["x-kubernetes-validations"], json!([{"rule": "self.parameters.storageGB >= 20", "message": "at least 20GB"}]));
    let props = &spec["properties"];
    assert_eq!(
        sorted_keys(props),
        [
            "claimRef",
            "compositionRef",
            "compositionRevisionRef",
            "compositionRevisionSelector",
            "compositionSelector",
            "compositionUpdatePolicy",
            "parameters",
            "resourceRefs",
            "writeConnectionSecretToRef",
        ]
    );
    for (name, expected) in expected_reconcile_props("Automatic", true).as_object().unwrap() {
        assert_eq!(&props[name], expected, "spec.{name}");
    }
    // The user's string compositionRef and secret ref are replaced.
    assert_eq!(props["compositionRef"], expected_name_ref());
    assert_eq!(props["claimRef"], expected_claim_ref());
    assert_eq!(props["writeConnectionSecretToRef"], expected_xr_secret_ref());
    assert_eq!(
        props["parameters"],
        json!({"type": "object", "required": ["storageGB"], "properties": {
            "storageGB": {"type": "integer", "minimum": 20},
            "version": {"type": "string", "enum": ["15", "16"]}}})
    );
    assert!(props.get("crossplane").is_none());
}

#[test]
fn legacy_status_gets_conditions_and_connection_details() {
    let crd = xr_crd(&postgres_v1()).unwrap();
    let status = &schema(&crd, "v1alpha1")["properties"]["status"];
    assert_eq!(status["type"], "object");
    assert_eq!(status["description"], "The observed instance.");
    assert_eq!(
        sorted_keys(&status["properties"]),
        ["address", "claimConditionTypes", "conditions", "connectionDetails", "observedGeneration"]
    );
    assert_eq!(status["properties"]["address"], json!({"type": "string"}));
    // The user's `conditions: string` is replaced.
    assert_eq!(status["properties"]["conditions"], expected_conditions());
    assert_eq!(status["properties"]["observedGeneration"], expected_int64());
    assert_eq!(status["properties"]["connectionDetails"], expected_connection_details());
    assert_eq!(status["properties"]["claimConditionTypes"], expected_claim_condition_types());
}

#[test]
fn legacy_printer_columns_follow_the_users() {
    let crd = xr_crd(&postgres_v1()).unwrap();
    let v = version(&crd, "v1alpha1");
    assert_eq!(column_names(v), ["STORAGE", "SYNCED", "READY", "COMPOSITION", "COMPOSITIONREVISION", "AGE"]);
    let mut expected = vec![json!({"name": "STORAGE", "type": "integer", "jsonPath": ".spec.parameters.storageGB"})];
    expected.extend(expected_condition_columns());
    expected.push(json!({"name": "COMPOSITION", "type": "string", "jsonPath": ".spec.compositionRef.name"}));
    expected.push(json!({"name": "COMPOSITIONREVISION", "type": "string", "jsonPath": ".spec.compositionRevisionRef.name", "priority": 1}));
    expected.push(expected_age_column());
    assert_eq!(v["additionalPrinterColumns"], Value::Array(expected));
}

#[test]
fn v1_claim_crd() {
    let crd = claim_crd(&postgres_v1()).unwrap().unwrap();
    assert_eq!(crd["metadata"]["name"], "postgresqlinstances.example.org");
    assert_eq!(crd["metadata"]["labels"], json!({"team": "data", "tier": "platinum", "owner": "platform"}));
    assert_eq!(crd["metadata"]["annotations"], json!({"docs.example.org/url": "https://docs.example.org/pg"}));
    assert_eq!(crd["metadata"]["ownerReferences"][0]["uid"], "6f2c8a1e-0d3b-4c55-9a7e-2b1f0c9d8e71");
    assert_eq!(crd["metadata"]["ownerReferences"][0]["kind"], "CompositeResourceDefinition");
    assert_eq!(crd["metadata"]["ownerReferences"][0]["controller"], true);
    assert_eq!(crd["metadata"]["ownerReferences"][0]["blockOwnerDeletion"], true);
    assert_eq!(crd["spec"]["group"], "example.org");
    assert_eq!(crd["spec"]["scope"], "Namespaced");
    assert_eq!(
        crd["spec"]["names"],
        json!({"kind": "PostgreSQLInstance", "plural": "postgresqlinstances", "shortNames": ["pg"], "categories": ["claim"]})
    );
    let v = version(&crd, "v1alpha1");
    assert_eq!(v["storage"], true);
    assert_eq!(v["served"], true);
    assert_eq!(v["subresources"], json!({"status": {}}));

    let s = schema(&crd, "v1alpha1");
    assert_eq!(s["required"], json!(["spec"]));
    assert_eq!(s["properties"]["metadata"]["properties"]["name"], json!({"type": "string", "maxLength": 40}));
    let props = &s["properties"]["spec"]["properties"];
    assert_eq!(
        sorted_keys(props),
        [
            "compositeDeletePolicy",
            "compositionRef",
            "compositionRevisionRef",
            "compositionRevisionSelector",
            "compositionSelector",
            "compositionUpdatePolicy",
            "parameters",
            "resourceRef",
            "writeConnectionSecretToRef",
        ]
    );
    assert_eq!(props["compositionRef"], expected_name_ref());
    assert_eq!(props["compositionSelector"], expected_selector());
    assert_eq!(props["compositionRevisionRef"], expected_name_ref());
    assert_eq!(props["compositionRevisionSelector"], expected_selector());
    // No default: the XR's default applies.
    assert_eq!(props["compositionUpdatePolicy"], json!({"type": "string", "enum": ["Automatic", "Manual"]}));
    // v1 defaults the XRD's delete policy to Background.
    assert_eq!(
        props["compositeDeletePolicy"],
        json!({"type": "string", "enum": ["Background", "Foreground"], "default": "Background"})
    );
    assert_eq!(
        props["resourceRef"],
        json!({"type": "object", "required": ["apiVersion", "kind", "name"],
               "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"}, "name": {"type": "string"}}})
    );
    assert_eq!(
        props["writeConnectionSecretToRef"],
        json!({"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}})
    );
    assert_eq!(s["properties"]["spec"]["required"], json!(["parameters"]));

    let status = &s["properties"]["status"]["properties"];
    assert_eq!(status["conditions"], expected_conditions());
    assert_eq!(status["connectionDetails"], expected_connection_details());
    assert_eq!(status["claimConditionTypes"], expected_claim_condition_types());
    assert_eq!(status["address"], json!({"type": "string"}));

    assert_eq!(column_names(v), ["STORAGE", "SYNCED", "READY", "CONNECTION-SECRET", "AGE"]);
    let columns = v["additionalPrinterColumns"].as_array().unwrap();
    assert_eq!(columns[1..3], expected_condition_columns()[..]);
    assert_eq!(columns[3], json!({"name": "CONNECTION-SECRET", "type": "string", "jsonPath": ".spec.writeConnectionSecretToRef.name"}));
    assert_eq!(columns[4], expected_age_column());
    assert_valid_crd(&crd);
}

#[test]
fn claim_delete_policy_default_comes_from_the_xrd() {
    let mut xrd = postgres_v1();
    xrd["spec"]["defaultCompositeDeletePolicy"] = json!("Foreground");
    let crd = claim_crd(&xrd).unwrap().unwrap();
    assert_eq!(schema(&crd, "v1alpha1")["properties"]["spec"]["properties"]["compositeDeletePolicy"]["default"], "Foreground");

    // A legacy XRD read as v2 has no v1 defaulting to fall back on: no default at all.
    xrd["apiVersion"] = json!("apiextensions.crossplane.io/v2");
    xrd["spec"]["scope"] = json!("LegacyCluster");
    xrd["spec"].as_object_mut().unwrap().remove("defaultCompositeDeletePolicy");
    let crd = claim_crd(&xrd).unwrap().unwrap();
    assert_eq!(
        schema(&crd, "v1alpha1")["properties"]["spec"]["properties"]["compositeDeletePolicy"],
        json!({"type": "string", "enum": ["Background", "Foreground"]})
    );
    assert_eq!(crd["metadata"]["ownerReferences"][0]["apiVersion"], "apiextensions.crossplane.io/v2");
    assert_valid_crd(&crd);
}

#[test]
fn v2_namespaced_xr_crd() {
    let xrd = app_v2();
    let crd = xr_crd(&xrd).unwrap();
    assert_eq!(crd["metadata"]["name"], "apps.example.crossplane.io");
    assert!(crd["metadata"].get("labels").is_none());
    assert!(crd["metadata"].get("annotations").is_none());
    assert_eq!(crd["metadata"]["ownerReferences"][0]["apiVersion"], "apiextensions.crossplane.io/v2");
    assert_eq!(crd["metadata"]["ownerReferences"][0]["name"], "apps.example.crossplane.io");
    assert_eq!(crd["metadata"]["ownerReferences"][0]["uid"], "0b7f3c2d-91a4-4e6b-8d20-5c3e1f7a9b44");
    assert_eq!(crd["spec"]["scope"], "Namespaced");
    assert_eq!(crd["spec"]["names"], json!({"kind": "App", "plural": "apps", "categories": ["composite"]}));

    let s = schema(&crd, "v1");
    assert!(s.get("description").is_none());
    assert!(s.get("x-kubernetes-validations").is_none());
    assert_eq!(s["properties"]["metadata"]["properties"]["name"], json!({"type": "string", "maxLength": 63}));
    let spec = &s["properties"]["spec"];
    assert_eq!(spec["required"], json!(["image"]));
    assert_eq!(sorted_keys(&spec["properties"]), ["crossplane", "image", "replicas"]);
    assert_eq!(spec["properties"]["image"], json!({"description": "The app's OCI image.", "type": "string"}));
    assert_eq!(spec["properties"]["replicas"], json!({"type": "integer", "default": 1}));
    // The user's `crossplane: string` is replaced; refs carry no namespace for a namespaced XR.
    assert_eq!(
        spec["properties"]["crossplane"],
        json!({
            "type": "object",
            "description": "Configures how Crossplane will reconcile this composite resource",
            "properties": expected_reconcile_props("Automatic", false),
        })
    );
    assert!(spec["properties"]["crossplane"].get("default").is_none());
    assert!(spec["properties"]["crossplane"].get("required").is_none());

    let status = &s["properties"]["status"];
    assert_eq!(sorted_keys(&status["properties"]), ["address", "conditions", "observedGeneration", "replicas"]);
    assert_eq!(status["properties"]["conditions"], expected_conditions());
    assert_eq!(status["properties"]["observedGeneration"], expected_int64());
    assert_eq!(status["properties"]["replicas"], json!({"type": "integer"}));
    assert!(status.get("required").is_none());

    let v = version(&crd, "v1");
    let mut expected = expected_condition_columns();
    expected.push(json!({"name": "COMPOSITION", "type": "string", "jsonPath": ".spec.crossplane.compositionRef.name"}));
    expected.push(json!({"name": "COMPOSITIONREVISION", "type": "string", "jsonPath": ".spec.crossplane.compositionRevisionRef.name", "priority": 1}));
    expected.push(expected_age_column());
    assert_eq!(v["additionalPrinterColumns"], Value::Array(expected));

    assert_eq!(claim_crd(&xrd).unwrap(), None);
    assert_valid_crd(&crd);
}

#[test]
fn v2_without_scope_is_namespaced() {
    let mut xrd = app_v2();
    xrd["spec"].as_object_mut().unwrap().remove("scope");
    assert_eq!(scope(&xrd), Scope::Namespaced);
    let crd = xr_crd(&xrd).unwrap();
    assert_eq!(crd["spec"]["scope"], "Namespaced");
    assert!(schema(&crd, "v1")["properties"]["spec"]["properties"]["crossplane"].is_object());
}

#[test]
fn v2_cluster_xr_crd() {
    let mut xrd = network_v2();
    // CEL rejects claim names on a v2 XRD; rendering must still neither fail nor offer a claim.
    xrd["spec"]["claimNames"] = json!({"kind": "Network", "plural": "networks"});
    let crd = xr_crd(&xrd).unwrap();
    assert_eq!(crd["spec"]["scope"], "Cluster");
    assert_eq!(
        crd["spec"]["names"],
        json!({"kind": "XNetwork", "plural": "xnetworks", "shortNames": ["xnet"], "categories": ["composite"]})
    );
    assert_eq!(crd["spec"]["conversion"], json!({"strategy": "None"}));
    let v = version(&crd, "v1beta1");
    assert_eq!(
        v["subresources"],
        json!({"status": {}, "scale": {"specReplicasPath": ".spec.gateways", "statusReplicasPath": ".status.gateways"}})
    );
    let spec = &schema(&crd, "v1beta1")["properties"]["spec"];
    // A cluster-scoped XR composes across namespaces, so its refs keep the namespace.
    assert_eq!(spec["properties"]["crossplane"]["properties"], expected_reconcile_props("Manual", true));
    assert_eq!(sorted_keys(&spec["properties"]), ["cidr", "crossplane", "gateways"]);
    assert!(spec.get("required").is_none());
    let status = &schema(&crd, "v1beta1")["properties"]["status"]["properties"];
    assert!(status.get("connectionDetails").is_none());
    assert!(status.get("claimConditionTypes").is_none());
    assert_eq!(column_names(v), ["SYNCED", "READY", "COMPOSITION", "COMPOSITIONREVISION", "AGE"]);
    assert_eq!(v["additionalPrinterColumns"][2]["jsonPath"], ".spec.crossplane.compositionRef.name");
    assert_eq!(claim_crd(&xrd).unwrap(), None);
    assert!(!is_legacy(&xrd));
    assert_valid_crd(&crd);
}

#[test]
fn v1_two_versions_one_referenceable() {
    let xrd = bucket_v1_two_versions();
    assert_eq!(referenceable_version(&xrd).as_deref(), Some("v1"));
    assert_eq!(scope(&xrd), Scope::LegacyCluster);
    let crd = xr_crd(&xrd).unwrap();
    assert_eq!(crd["spec"]["scope"], "Cluster");
    // `composite` is already listed and is not repeated.
    assert_eq!(crd["spec"]["names"]["categories"], json!(["composite", "storage"]));
    let names: Vec<&str> = crd["spec"]["versions"].as_array().unwrap().iter().map(|v| v["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["v1beta1", "v1"]);

    let old = version(&crd, "v1beta1");
    assert_eq!(old["served"], true);
    assert_eq!(old["storage"], false);
    assert_eq!(old["deprecated"], true);
    assert_eq!(old["deprecationWarning"], "storage.example.org/v1beta1 XBucket is deprecated; use v1");
    let current = version(&crd, "v1");
    assert_eq!(current["storage"], true);
    assert_eq!(current["deprecated"], false);
    assert!(current.get("deprecationWarning").is_none());

    for v in ["v1beta1", "v1"] {
        let s = schema(&crd, v);
        // A user maxLength above 63 cannot raise the limit.
        assert_eq!(s["properties"]["metadata"]["properties"]["name"], json!({"type": "string", "maxLength": 63}));
        let props = &s["properties"]["spec"]["properties"];
        assert_eq!(props["compositionUpdatePolicy"]["default"], "Manual", "{v}");
        assert_eq!(props["claimRef"], expected_claim_ref(), "{v}");
        assert_eq!(props["resourceRefs"], expected_resource_refs(true), "{v}");
        assert_eq!(column_names(version(&crd, v)), ["SYNCED", "READY", "COMPOSITION", "COMPOSITIONREVISION", "AGE"]);
    }
    assert_eq!(schema(&crd, "v1")["properties"]["spec"]["properties"]["versioning"], json!({"type": "boolean"}));
    assert!(schema(&crd, "v1beta1")["properties"]["spec"]["properties"].get("versioning").is_none());
    // Legacy, but no claim names: nothing offered.
    assert_eq!(claim_crd(&xrd).unwrap(), None);
    assert_valid_crd(&crd);
}

#[test]
fn scope_defaults_by_api_version() {
    let xrd = |api_version: Option<&str>, scope: Option<&str>| {
        let mut xrd = json!({"kind": "CompositeResourceDefinition", "spec": {}});
        if let Some(v) = api_version {
            xrd["apiVersion"] = json!(v);
        }
        if let Some(s) = scope {
            xrd["spec"]["scope"] = json!(s);
        }
        xrd
    };
    let v1 = Some("apiextensions.crossplane.io/v1");
    let v2 = Some("apiextensions.crossplane.io/v2");
    assert_eq!(scope(&xrd(v1, None)), Scope::LegacyCluster);
    assert_eq!(scope(&xrd(v2, None)), Scope::Namespaced);
    assert_eq!(scope(&xrd(None, None)), Scope::LegacyCluster);
    assert_eq!(scope(&xrd(v1, Some("Namespaced"))), Scope::Namespaced);
    assert_eq!(scope(&xrd(v1, Some("Cluster"))), Scope::Cluster);
    assert_eq!(scope(&xrd(v2, Some("Cluster"))), Scope::Cluster);
    assert_eq!(scope(&xrd(v2, Some("LegacyCluster"))), Scope::LegacyCluster);
    assert!(is_legacy(&xrd(v1, None)));
    assert!(!is_legacy(&xrd(v2, None)));
    assert!(!is_legacy(&xrd(v1, Some("Namespaced"))));
}

#[test]
fn v1_namespaced_xr_is_modern() {
    let mut xrd = postgres_v1();
    xrd["spec"]["scope"] = json!("Namespaced");
    let crd = xr_crd(&xrd).unwrap();
    assert_eq!(crd["spec"]["scope"], "Namespaced");
    let props = &schema(&crd, "v1alpha1")["properties"]["spec"]["properties"];
    assert_eq!(props["crossplane"]["properties"], expected_reconcile_props("Automatic", false));
    // The user's own top-level compositionRef is theirs in a modern XR.
    assert_eq!(props["compositionRef"], json!({"type": "string"}));
    assert!(props.get("claimRef").is_none());
    // The user's own secret ref survives: a modern XR has none injected.
    assert_eq!(props["writeConnectionSecretToRef"], json!({"type": "object", "properties": {"key": {"type": "string"}}}));
    // Claim names are only for LegacyCluster.
    assert_eq!(claim_crd(&xrd).unwrap(), None);
    assert_valid_crd(&crd);
}

#[test]
fn missing_schema_fails() {
    let mut xrd = app_v2();
    xrd["spec"]["versions"][0].as_object_mut().unwrap().remove("schema");
    let err = xr_crd(&xrd).unwrap_err();
    assert_eq!(err, RenderError::MissingSchema { version: "v1".into() });
    assert_eq!(err.to_string(), "custom resource validation cannot be nil");

    xrd["spec"]["versions"][0]["schema"] = json!({});
    assert_eq!(xr_crd(&xrd).unwrap_err(), RenderError::MissingSchema { version: "v1".into() });

    xrd["spec"]["versions"][0]["schema"] = json!({"openAPIV3Schema": "object"});
    assert_eq!(xr_crd(&xrd).unwrap_err(), RenderError::InvalidSchema { version: "v1".into() });

    let mut legacy = postgres_v1();
    legacy["spec"]["versions"][0]["schema"] = Value::Null;
    assert_eq!(claim_crd(&legacy).unwrap_err(), RenderError::MissingSchema { version: "v1alpha1".into() });
}

#[test]
fn referenceable_versions_must_be_exactly_one() {
    let mut xrd = bucket_v1_two_versions();
    xrd["spec"]["versions"][1]["referenceable"] = json!(false);
    assert_eq!(referenceable_version(&xrd), None);
    let err = xr_crd(&xrd).unwrap_err();
    assert_eq!(err, RenderError::Referenceable { found: 0 });
    assert_eq!(err.to_string(), "exactly one version must be referenceable, found 0");

    xrd["spec"]["versions"][0]["referenceable"] = json!(true);
    xrd["spec"]["versions"][1]["referenceable"] = json!(true);
    assert_eq!(referenceable_version(&xrd), None);
    assert_eq!(xr_crd(&xrd).unwrap_err(), RenderError::Referenceable { found: 2 });

    let mut legacy = postgres_v1();
    legacy["spec"]["versions"] = json!([]);
    assert_eq!(claim_crd(&legacy).unwrap_err(), RenderError::Referenceable { found: 0 });
}

#[test]
fn malformed_xrds_fail_cleanly() {
    let mut xrd = app_v2();
    xrd["spec"]["scope"] = json!("Global");
    assert_eq!(xr_crd(&xrd).unwrap_err(), RenderError::UnknownScope("Global".into()));

    let mut xrd = app_v2();
    xrd["spec"].as_object_mut().unwrap().remove("names");
    assert_eq!(xr_crd(&xrd).unwrap_err(), RenderError::MissingField { field: "spec.names" });

    let mut xrd = app_v2();
    xrd["spec"].as_object_mut().unwrap().remove("group");
    assert_eq!(xr_crd(&xrd).unwrap_err(), RenderError::MissingField { field: "spec.group" });

    let mut xrd = postgres_v1();
    xrd["spec"]["claimNames"].as_object_mut().unwrap().remove("plural");
    assert_eq!(claim_crd(&xrd).unwrap_err(), RenderError::MissingField { field: "spec.claimNames.plural" });

    assert_eq!(xr_crd(&json!({})).unwrap_err(), RenderError::MissingField { field: "metadata.name" });
    assert_eq!(xr_crd(&json!(null)).unwrap_err(), RenderError::MissingField { field: "metadata.name" });
    assert_eq!(claim_crd(&json!("xrd")).unwrap(), None);
}

/// Names that collide with injected properties in some shape, mixed with arbitrary ones.
fn property_name() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "crossplane",
            "compositionRef",
            "compositionSelector",
            "compositionRevisionRef",
            "compositionRevisionSelector",
            "compositionUpdatePolicy",
            "resourceRefs",
            "claimRef",
            "writeConnectionSecretToRef",
        ])
        .prop_map(String::from),
        "[a-z][a-zA-Z0-9]{0,10}",
    ]
}

fn property_schema() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!({"type": "string"})),
        (0i64..100).prop_map(|min| json!({"type": "integer", "minimum": min})),
        Just(json!({"type": "object", "properties": {"enabled": {"type": "boolean"}}})),
        Just(json!({"type": "array", "items": {"type": "string"}})),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn injected_props_win_and_user_props_survive(
        user in prop::collection::btree_map(property_name(), property_schema(), 0..8),
        scope_name in prop::sample::select(vec!["Namespaced", "Cluster", "LegacyCluster"]),
    ) {
        let mut xrd = app_v2();
        xrd["spec"]["scope"] = json!(scope_name);
        xrd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"] = json!(user);
        let crd = xr_crd(&xrd).unwrap();
        let props = schema(&crd, "v1")["properties"]["spec"]["properties"].as_object().unwrap().clone();
        let injected = match scope_name {
            "LegacyCluster" => {
                let mut p = expected_reconcile_props("Automatic", true);
                p["claimRef"] = expected_claim_ref();
                p["writeConnectionSecretToRef"] = expected_xr_secret_ref();
                p
            }
            "Cluster" => json!({"crossplane": {
                "type": "object",
                "description": "Configures how Crossplane will reconcile this composite resource",
                "properties": expected_reconcile_props("Automatic", true)}}),
            _ => json!({"crossplane": {
                "type": "object",
                "description": "Configures how Crossplane will reconcile this composite resource",
                "properties": expected_reconcile_props("Automatic", false)}}),
        };
        let injected = injected.as_object().unwrap();
        for (name, expected) in injected {
            prop_assert_eq!(props.get(name), Some(expected), "injected {}", name);
        }
        for (name, schema) in &user {
            if !injected.contains_key(name) {
                prop_assert_eq!(props.get(name), Some(schema), "user {}", name);
            }
        }
        prop_assert_eq!(props.len(), injected.len() + user.keys().filter(|n| !injected.contains_key(*n)).count());
        prop_assert!(oxplane_apiserver::crd::validate(&crd).is_empty());
    }
}
