//! Schemas of the built-in kinds and of ObjectMeta, written for this server: the fields it
//! serves, with the list semantics strategic merge and server-side apply rely on.

use serde_json::{Map, Value, json};

fn string(description: &str) -> Value {
    json!({"type": "string", "description": description})
}

fn string_map(description: &str) -> Value {
    json!({"type": "object", "additionalProperties": {"type": "string", "default": ""}, "description": description})
}

fn time(description: &str) -> Value {
    json!({"type": "string", "format": "date-time", "description": description})
}

/// ObjectMeta and the types it refers to.
pub fn meta_components() -> Map<String, Value> {
    let mut components = Map::new();
    components.insert(
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta".into(),
        json!({
            "type": "object",
            "description": "ObjectMeta is metadata that all persisted resources must have.",
            "properties": {
                "name": string("Name must be unique within a namespace."),
                "generateName": string("An optional prefix used by the server to generate a unique name when name is not provided."),
                "namespace": string("Namespace defines the space within which each name must be unique."),
                "uid": string("UID is the unique in time and space value for this object, set by the server."),
                "resourceVersion": string("An opaque value that represents the internal version of this object."),
                "generation": {"type": "integer", "format": "int64", "description": "A sequence number representing a specific generation of the desired state."},
                "creationTimestamp": time("When this object was created, set by the server."),
                "deletionTimestamp": time("When this object will be deleted, set by the server when a graceful deletion is requested."),
                "deletionGracePeriodSeconds": {"type": "integer", "format": "int64", "description": "Seconds allowed for this object to terminate gracefully."},
                "labels": string_map("Map of string keys and values that can be used to organize and categorize objects."),
                "annotations": string_map("An unstructured key value map stored with a resource."),
                "finalizers": {"type": "array", "items": {"type": "string", "default": ""}, "x-kubernetes-list-type": "set", "x-kubernetes-patch-strategy": "merge",
                    "description": "Must be empty before the object is deleted from the registry."},
                "ownerReferences": {"type": "array", "items": {"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference"}], "default": {}},
                    "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["uid"], "x-kubernetes-patch-merge-key": "uid", "x-kubernetes-patch-strategy": "merge",
                    "description": "List of objects depended by this object."},
                "managedFields": {"type": "array", "items": {"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry"}], "default": {}},
                    "description": "Maps workflow-id and version to the set of fields that are managed by that workflow."},
            },
        }),
    );
    components.insert(
        "io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference".into(),
        json!({
            "type": "object",
            "required": ["apiVersion", "kind", "name", "uid"],
            "description": "Information to let you identify an owning object.",
            "properties": {
                "apiVersion": string("API version of the referent."),
                "kind": string("Kind of the referent."),
                "name": string("Name of the referent."),
                "uid": string("UID of the referent."),
                "controller": {"type": "boolean", "description": "If true, this reference points to the managing controller."},
                "blockOwnerDeletion": {"type": "boolean", "description": "If true, the owner cannot be deleted from storage until this reference is removed."},
            },
            "x-kubernetes-map-type": "atomic",
        }),
    );
    components.insert(
        "io.k8s.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry".into(),
        json!({
            "type": "object",
            "description": "A workflow-id, a FieldSet and the group version of the resource that the fieldset applies to.",
            "properties": {
                "manager": string("An identifier of the workflow managing these fields."),
                "operation": string("The type of operation which lead to this entry: Apply or Update."),
                "apiVersion": string("The version of this resource that this field set applies to."),
                "time": time("The timestamp of when the entry was added."),
                "fieldsType": string("The discriminator for the different fields format and version."),
                "fieldsV1": {"type": "object", "description": "The field set, in FieldsV1 format."},
                "subresource": string("The name of the subresource used to update that object."),
            },
        }),
    );
    components
}

/// The schema of a built-in kind (without apiVersion, kind and metadata, which are added).
pub fn schema(group: &str, kind: &str) -> Value {
    match (group, kind) {
        ("", "ConfigMap") => json!({"description": "ConfigMap holds configuration data for pods to consume.", "properties": {
            "data": string_map("Data contains the configuration data."),
            "binaryData": {"type": "object", "additionalProperties": {"type": "string", "format": "byte"}, "description": "BinaryData contains the binary data."},
            "immutable": {"type": "boolean", "description": "If set to true, the data stored in the ConfigMap cannot be updated."}}}),
        ("", "Secret") => json!({"description": "Secret holds secret data of a certain type.", "properties": {
            "data": {"type": "object", "additionalProperties": {"type": "string", "format": "byte"}, "description": "Data contains the secret data, base64 encoded."},
            "stringData": string_map("stringData allows specifying non-binary secret data in string form; it is merged into data on write."),
            "type": string("Used to facilitate programmatic handling of secret data."),
            "immutable": {"type": "boolean", "description": "If set to true, the data stored in the Secret cannot be updated."}}}),
        ("", "Namespace") => json!({"description": "Namespace provides a scope for Names.", "properties": {
            "spec": {"type": "object", "properties": {"finalizers": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "atomic", "description": "Finalizers is an opaque list of values that must be empty to permanently remove the object."}}},
            "status": {"type": "object", "properties": {"phase": string("Phase is the current lifecycle phase of the namespace: Active or Terminating."),
                "conditions": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"], "description": "The latest available observations of the namespace's state.",
                    "items": {"type": "object", "properties": {"type": {"type": "string"}, "status": {"type": "string"}, "lastTransitionTime": {"type": "string", "format": "date-time"},
                        "reason": {"type": "string"}, "message": {"type": "string"}}}}}}}}),
        ("", "ServiceAccount") => json!({"description": "ServiceAccount binds together a name, a principal and a set of secrets.", "properties": {
            "secrets": {"type": "array", "items": {"type": "object", "x-kubernetes-map-type": "atomic", "properties": {"name": string("Name of the referent."), "namespace": string("Namespace of the referent.")}},
                "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"], "x-kubernetes-patch-merge-key": "name", "x-kubernetes-patch-strategy": "merge"},
            "imagePullSecrets": {"type": "array", "items": {"type": "object", "properties": {"name": string("Name of the referent.")}}, "x-kubernetes-list-type": "atomic"},
            "automountServiceAccountToken": {"type": "boolean"}}}),
        ("", "Event") => json!({"description": "Event is a report of an event somewhere in the cluster.", "properties": {
            "involvedObject": reference(), "reason": string("A short, machine understandable string that gives the reason for the transition."),
            "message": string("A human-readable description of the status of this operation."),
            "source": {"type": "object", "properties": {"component": string("Component from which the event is generated."), "host": string("Node name on which the event is generated.")}},
            "firstTimestamp": time("The time at which the event was first recorded."), "lastTimestamp": time("The time at which the most recent occurrence of this event was recorded."),
            "count": {"type": "integer", "format": "int32"}, "type": string("Type of this event (Normal, Warning)."),
            "eventTime": {"type": "string", "format": "date-time"}, "series": {"type": "object", "properties": {"count": {"type": "integer"}, "lastObservedTime": {"type": "string", "format": "date-time"}}},
            "action": string("What action was taken/failed regarding to the Regarding object."), "related": reference(),
            "reportingComponent": string("Name of the controller that emitted this Event."), "reportingInstance": string("ID of the controller instance.")}}),
        ("", "Service") => json!({"description": "Service is a named abstraction of software service consisting of local port that the proxy listens on, and the selector that determines which pods will answer requests sent through the proxy.", "properties": {
            "spec": {"type": "object", "description": "Spec defines the behavior of a service.", "properties": {
                "type": string("type determines how the Service is exposed: ClusterIP, NodePort, LoadBalancer or ExternalName."),
                "clusterIP": string("clusterIP is the IP address of the service, or None for a headless service."),
                "clusterIPs": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "atomic"},
                "externalIPs": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "atomic"},
                "externalName": string("externalName is the external reference that discovery mechanisms will return as an alias for this service."),
                "selector": {"type": "object", "additionalProperties": {"type": "string"}, "x-kubernetes-map-type": "atomic", "description": "Route service traffic to pods with label keys and values matching this selector."},
                "sessionAffinity": string("Supports ClientIP and None."),
                "ipFamilies": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "atomic"},
                "ipFamilyPolicy": {"type": "string"},
                "internalTrafficPolicy": {"type": "string"},
                "publishNotReadyAddresses": {"type": "boolean"},
                "ports": {"type": "array", "description": "The list of ports that are exposed by this service.",
                    "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port", "protocol"], "x-kubernetes-patch-merge-key": "port", "x-kubernetes-patch-strategy": "merge",
                    "items": {"type": "object", "required": ["port"], "properties": {
                        "name": {"type": "string"}, "protocol": {"type": "string", "default": "TCP"}, "appProtocol": {"type": "string"},
                        "port": {"type": "integer", "format": "int32"}, "targetPort": {"x-kubernetes-int-or-string": true},
                        "nodePort": {"type": "integer", "format": "int32"}}}}}},
            "status": {"type": "object", "properties": {"loadBalancer": {"type": "object", "properties": {"ingress": {"type": "array", "x-kubernetes-list-type": "atomic",
                "items": {"type": "object", "properties": {"ip": {"type": "string"}, "hostname": {"type": "string"}}}}}}}}}}),
        ("", "Endpoints") => json!({"description": "Endpoints is a collection of endpoints that implement the actual service.", "properties": {
            "subsets": {"type": "array", "x-kubernetes-list-type": "atomic", "description": "The set of all endpoints is the union of all subsets.", "items": {"type": "object", "properties": {
                "addresses": {"type": "array", "x-kubernetes-list-type": "atomic", "items": {"type": "object", "properties": {"ip": {"type": "string"}, "hostname": {"type": "string"}, "nodeName": {"type": "string"}}}},
                "notReadyAddresses": {"type": "array", "x-kubernetes-list-type": "atomic", "items": {"type": "object", "properties": {"ip": {"type": "string"}, "hostname": {"type": "string"}}}},
                "ports": {"type": "array", "x-kubernetes-list-type": "atomic", "items": {"type": "object", "properties": {
                    "name": {"type": "string"}, "port": {"type": "integer", "format": "int32"}, "protocol": {"type": "string"}, "appProtocol": {"type": "string"}}}}}}}}}),
        ("events.k8s.io", "Event") => json!({"description": "Event is a report of an event somewhere in the cluster.", "required": ["eventTime"], "properties": {
            "eventTime": {"type": "string", "format": "date-time"}, "series": {"type": "object", "properties": {"count": {"type": "integer"}, "lastObservedTime": {"type": "string", "format": "date-time"}}},
            "reportingController": string("The name of the controller that emitted this Event."), "reportingInstance": string("The ID of the controller instance."),
            "action": string("What action was taken/failed regarding to the regarding object."), "reason": string("Why the action was taken."),
            "regarding": reference(), "related": reference(), "note": string("A human-readable description of the status of this operation."),
            "type": string("Type of this event (Normal, Warning)."),
            "deprecatedSource": {"type": "object", "properties": {"component": {"type": "string"}, "host": {"type": "string"}}},
            "deprecatedFirstTimestamp": time(""), "deprecatedLastTimestamp": time(""), "deprecatedCount": {"type": "integer", "format": "int32"}}}),
        ("coordination.k8s.io", "Lease") => json!({"description": "Lease defines a lease concept.", "properties": {"spec": {"type": "object", "properties": {
            "holderIdentity": string("The identity of the holder of a current lease."),
            "leaseDurationSeconds": {"type": "integer", "format": "int32", "description": "Duration that candidates for a lease need to wait to force acquire it."},
            "acquireTime": {"type": "string", "format": "date-time"}, "renewTime": {"type": "string", "format": "date-time"},
            "leaseTransitions": {"type": "integer", "format": "int32"}, "strategy": {"type": "string"}, "preferredHolder": {"type": "string"}}}}}),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => json!({
            "description": "CustomResourceDefinition represents a resource that should be exposed on the API server.",
            "properties": {
                "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "description": "The desired definition of the custom resource."},
                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "description": "The observed state of the definition."}}}),
        ("rbac.authorization.k8s.io", "Role") => json!({"description": "Role is a namespaced set of policy rules, granted by RoleBindings.", "properties": {
            "rules": policy_rules()}}),
        ("rbac.authorization.k8s.io", "ClusterRole") => json!({"description": "ClusterRole is a cluster-wide set of policy rules, granted by RoleBindings and ClusterRoleBindings.", "properties": {
            "rules": policy_rules(),
            "aggregationRule": {"type": "object", "description": "Selects ClusterRoles whose rules are gathered into this one's by the controller.", "properties": {
                "clusterRoleSelectors": {"type": "array", "x-kubernetes-list-type": "atomic", "items": {"type": "object", "x-kubernetes-map-type": "atomic", "properties": {
                    "matchLabels": string_map("Labels the selected ClusterRoles carry."),
                    "matchExpressions": {"type": "array", "items": {"type": "object", "properties": {"key": {"type": "string"}, "operator": {"type": "string"}, "values": strings("")}}}}}}}}}}),
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => json!({"description": "A binding grants the rules of a role to subjects.", "required": ["roleRef"], "properties": {
            "subjects": {"type": "array", "x-kubernetes-list-type": "atomic", "items": {"type": "object", "x-kubernetes-map-type": "atomic", "required": ["kind", "name"], "properties": {
                "kind": string("User, Group or ServiceAccount."), "apiGroup": string("rbac.authorization.k8s.io for users and groups."),
                "name": string("The subject's name."), "namespace": string("A ServiceAccount's namespace.")}}},
            "roleRef": {"type": "object", "x-kubernetes-map-type": "atomic", "required": ["apiGroup", "kind", "name"], "properties": {
                "apiGroup": string("rbac.authorization.k8s.io."), "kind": string("Role or ClusterRole."), "name": string("The role's name.")}}}}),
        _ => json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
    }
}

fn strings(description: &str) -> Value {
    json!({"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "atomic", "description": description})
}

/// A Role's or ClusterRole's `rules`.
fn policy_rules() -> Value {
    json!({"type": "array", "x-kubernetes-list-type": "atomic", "description": "What the role allows.", "items": {"type": "object", "required": ["verbs"], "properties": {
        "verbs": strings("Verbs allowed, or *."),
        "apiGroups": strings("API groups of the resources (\"\" is the core group), or *."),
        "resources": strings("Resources (plural, resource/subresource, */subresource), or *."),
        "resourceNames": strings("Names the rule is limited to; empty means all."),
        "nonResourceURLs": strings("Paths (a trailing * matches a prefix); ClusterRoles only.")}}})
}

/// The whole schema of a built-in kind, with `apiVersion`, `kind` and ObjectMeta inlined (no
/// `$ref`s): what pruning of unknown fields and server-side apply's merge rules work from.
pub fn full_schema(group: &str, kind: &str) -> Value {
    let mut schema = schema(group, kind);
    schema["type"] = json!("object");
    let meta = object_meta_schema();
    if let Some(properties) = schema.as_object_mut().map(|o| o.entry("properties").or_insert_with(|| json!({}))).and_then(Value::as_object_mut) {
        properties.insert("apiVersion".into(), json!({"type": "string"}));
        properties.insert("kind".into(), json!({"type": "string"}));
        properties.insert("metadata".into(), meta);
    }
    schema
}

/// ObjectMeta with its references inlined: how `metadata` merges under server-side apply
/// (finalizers a set, owner references a map keyed by uid, labels and annotations granular).
pub fn object_meta_schema() -> Value {
    let components = meta_components();
    let mut meta = components.get("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta").cloned().unwrap_or_else(|| json!({"type": "object"}));
    inline_refs(&mut meta, &components, 0);
    meta
}

/// Replaces `{"allOf": [{"$ref": "#/components/schemas/X"}], ...}` by component X (merged with
/// the other keywords beside it), recursively.
fn inline_refs(value: &mut Value, components: &Map<String, Value>, depth: usize) {
    if depth > 16 {
        return;
    }
    if let Some(map) = value.as_object_mut() {
        let target = map
            .get("allOf")
            .and_then(|all| all.as_array())
            .and_then(|all| all.first())
            .and_then(|first| first.get("$ref"))
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix("#/components/schemas/"))
            .and_then(|name| components.get(name))
            .cloned();
        if let Some(Value::Object(component)) = target {
            map.remove("allOf");
            map.remove("default");
            for (key, entry) in component {
                map.entry(key).or_insert(entry);
            }
        }
        for entry in map.values_mut() {
            inline_refs(entry, components, depth + 1);
        }
    } else if let Some(list) = value.as_array_mut() {
        for entry in list {
            inline_refs(entry, components, depth + 1);
        }
    }
}

fn reference() -> Value {
    json!({"type": "object", "x-kubernetes-map-type": "atomic", "properties": {
        "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "name": {"type": "string"}, "namespace": {"type": "string"},
        "uid": {"type": "string"}, "resourceVersion": {"type": "string"}, "fieldPath": {"type": "string"}}})
}
