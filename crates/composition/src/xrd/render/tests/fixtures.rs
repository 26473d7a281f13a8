//! Realistic XRD fixtures in both API versions, and the injected schemas a rendered CRD must
//! hold, written out by hand from the reference (spec §2.2).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};

pub(super) fn yaml(text: &str) -> Value {
    serde_saphyr::from_str(text).unwrap()
}

/// A v1 legacy XRD offering a claim, with a user schema exercising every merged keyword.
pub(super) fn postgres_v1() -> Value {
    yaml(
        r#"
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata:
  name: xpostgresqlinstances.example.org
  uid: 6f2c8a1e-0d3b-4c55-9a7e-2b1f0c9d8e71
  labels:
    team: data
    tier: gold
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: "{}"
spec:
  group: example.org
  names:
    kind: XPostgreSQLInstance
    plural: xpostgresqlinstances
    categories: [databases]
  claimNames:
    kind: PostgreSQLInstance
    plural: postgresqlinstances
    shortNames: [pg]
  connectionSecretKeys: [username, password, endpoint, port]
  defaultCompositionRef:
    name: aws-postgres
  metadata:
    labels:
      tier: platinum
      owner: platform
    annotations:
      docs.example.org/url: https://docs.example.org/pg
  versions:
  - name: v1alpha1
    served: true
    referenceable: true
    additionalPrinterColumns:
    - name: STORAGE
      type: integer
      jsonPath: .spec.parameters.storageGB
    schema:
      openAPIV3Schema:
        description: A PostgreSQL instance.
        type: object
        x-kubernetes-validations:
        - rule: "self.spec.parameters.storageGB <= 1000"
          message: at most 1000GB
        properties:
          metadata:
            type: object
            properties:
              name:
                type: string
                maxLength: 40
          spec:
            type: object
            description: The desired instance.
            required: [parameters]
            x-kubernetes-validations:
            - rule: "self.parameters.storageGB >= 20"
              message: at least 20GB
            properties:
              parameters:
                type: object
                required: [storageGB]
                properties:
                  storageGB:
                    type: integer
                    minimum: 20
                  version:
                    type: string
                    enum: ["15", "16"]
              compositionRef:
                type: string
              writeConnectionSecretToRef:
                type: object
                properties:
                  key:
                    type: string
          status:
            type: object
            description: The observed instance.
            properties:
              address:
                type: string
              conditions:
                type: string
"#,
    )
}

/// A v2 namespaced XRD, the modern default shape.
pub(super) fn app_v2() -> Value {
    yaml(
        r#"
apiVersion: apiextensions.crossplane.io/v2
kind: CompositeResourceDefinition
metadata:
  name: apps.example.crossplane.io
  uid: 0b7f3c2d-91a4-4e6b-8d20-5c3e1f7a9b44
spec:
  scope: Namespaced
  group: example.crossplane.io
  names:
    kind: App
    plural: apps
  versions:
  - name: v1
    served: true
    referenceable: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              image:
                description: The app's OCI image.
                type: string
              replicas:
                type: integer
                default: 1
              crossplane:
                type: string
            required: [image]
          status:
            type: object
            properties:
              replicas:
                type: integer
              address:
                type: string
"#,
    )
}

/// A v2 cluster-scoped XRD with a manual update policy, scale subresource and conversion.
pub(super) fn network_v2() -> Value {
    yaml(
        r#"
apiVersion: apiextensions.crossplane.io/v2
kind: CompositeResourceDefinition
metadata:
  name: xnetworks.platform.example.com
  uid: 3d9e4b1a-7c2f-4f0e-b5a6-8e1d2c3b4a50
spec:
  scope: Cluster
  group: platform.example.com
  names:
    kind: XNetwork
    plural: xnetworks
    shortNames: [xnet]
  defaultCompositionUpdatePolicy: Manual
  conversion:
    strategy: None
  versions:
  - name: v1beta1
    served: true
    referenceable: true
    subresources:
      scale:
        specReplicasPath: .spec.gateways
        statusReplicasPath: .status.gateways
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              cidr:
                type: string
              gateways:
                type: integer
          status:
            type: object
            properties:
              gateways:
                type: integer
"#,
    )
}

/// A v1 XRD without a scope, with a deprecated version beside the referenceable one.
pub(super) fn bucket_v1_two_versions() -> Value {
    yaml(
        r#"
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata:
  name: xbuckets.storage.example.org
  uid: a1b2c3d4-e5f6-4789-8abc-def012345678
spec:
  group: storage.example.org
  names:
    kind: XBucket
    plural: xbuckets
    categories: [composite, storage]
  defaultCompositionUpdatePolicy: Manual
  defaultCompositeDeletePolicy: Foreground
  versions:
  - name: v1beta1
    served: true
    referenceable: false
    deprecated: true
    deprecationWarning: storage.example.org/v1beta1 XBucket is deprecated; use v1
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              region:
                type: string
  - name: v1
    served: true
    referenceable: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          metadata:
            type: object
            properties:
              name:
                type: string
                maxLength: 100
          spec:
            type: object
            properties:
              region:
                type: string
              versioning:
                type: boolean
"#,
    )
}

// Expected injected schemas, written out from spec §2.2.

pub(super) fn expected_name_ref() -> Value {
    json!({"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}})
}

pub(super) fn expected_selector() -> Value {
    json!({"type": "object", "required": ["matchLabels"],
           "properties": {"matchLabels": {"type": "object", "additionalProperties": {"type": "string"}}}})
}

pub(super) fn expected_resource_refs(with_namespace: bool) -> Value {
    let mut refs = json!({
        "type": "array",
        "x-kubernetes-list-type": "atomic",
        "items": {"type": "object", "required": ["apiVersion", "kind"],
                  "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"}, "name": {"type": "string"}}},
    });
    if with_namespace {
        refs["items"]["properties"]["namespace"] = json!({"type": "string"});
    }
    refs
}

/// The reconcile properties of an XR (under `spec.crossplane` or at the top of legacy `spec`).
pub(super) fn expected_reconcile_props(update_default: &str, with_namespace: bool) -> Value {
    json!({
        "compositionRef": expected_name_ref(),
        "compositionSelector": expected_selector(),
        "compositionRevisionRef": expected_name_ref(),
        "compositionRevisionSelector": expected_selector(),
        "compositionUpdatePolicy": {"type": "string", "enum": ["Automatic", "Manual"], "default": update_default},
        "resourceRefs": expected_resource_refs(with_namespace),
    })
}

pub(super) fn expected_claim_ref() -> Value {
    json!({"type": "object", "required": ["apiVersion", "kind", "namespace", "name"],
           "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                          "namespace": {"type": "string"}, "name": {"type": "string"}}})
}

pub(super) fn expected_xr_secret_ref() -> Value {
    json!({"type": "object", "required": ["name", "namespace"],
           "properties": {"name": {"type": "string"}, "namespace": {"type": "string"}}})
}

pub(super) fn expected_conditions() -> Value {
    json!({
        "description": "Conditions of the resource.",
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
        "items": {
            "type": "object",
            "required": ["lastTransitionTime", "reason", "status", "type"],
            "properties": {
                "lastTransitionTime": {"type": "string", "format": "date-time"},
                "message": {"type": "string"},
                "observedGeneration": {"type": "integer", "format": "int64"},
                "reason": {"type": "string"},
                "status": {"type": "string"},
                "type": {"type": "string"},
            },
        },
    })
}

pub(super) fn expected_int64() -> Value {
    json!({"type": "integer", "format": "int64"})
}

pub(super) fn expected_connection_details() -> Value {
    json!({"type": "object", "properties": {"lastPublishedTime": {"type": "string", "format": "date-time"}}})
}

pub(super) fn expected_claim_condition_types() -> Value {
    json!({"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}})
}

pub(super) fn expected_condition_columns() -> Vec<Value> {
    vec![
        json!({"name": "SYNCED", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Synced')].status"}),
        json!({"name": "READY", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Ready')].status"}),
    ]
}

pub(super) fn expected_age_column() -> Value {
    json!({"name": "AGE", "type": "date", "jsonPath": ".metadata.creationTimestamp"})
}
