//! `ObservedObjectCollection` (`kubernetes.crossplane.io/v1alpha1`, and the namespaced
//! `kubernetes.m.crossplane.io/v1alpha1`): the objects of one kind on a target cluster that a
//! label selector matches, each imported as an Observe-only `Object`.
//!
//! As upstream: each match gets an Object named `<collection>-<first 7 hex digits of the
//! sha256 of "<group>/<version>, Kind=<kind>/<namespace>/<name>">`, labelled
//! `kubernetes.crossplane.io/owned-by-collection: <collection>` (plus the template's labels and
//! annotations), owned by the collection (so it goes when the collection does), server-side
//! applied with the collection controller's field manager; Objects of the collection that no
//! longer match are deleted. `status.membershipLabel` is the label to list members by. The
//! collection is listed again at the poll interval.

use std::sync::Arc;
use std::time::Duration;

use oxplane_runtime::Runtime;
use oxplane_runtime::client::{DeleteOptions, Kube};
use oxplane_runtime::conditions::{self, Condition};
use oxplane_runtime::controller::{Action, Controller, ControllerConfig, ReconcileError, Reconciler, spec_or_metadata_changed};
use oxplane_runtime::kinds::Kind;
use oxplane_runtime::managed::annotations;
use oxplane_runtime::managed::usage::ProviderConfigKinds;
use oxplane_runtime::managed::{ConnectContext, ExternalError};
use oxplane_runtime::object::{self, ObjectKey};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::target::{Target, Targets};
use super::{CLUSTER_GROUP, CLUSTER_VERSION, CONFIG_VERSION, NAMESPACED_GROUP, NAMESPACED_VERSION};

/// The label every member carries, with the collection's name.
pub const MEMBERSHIP_LABEL: &str = "kubernetes.crossplane.io/owned-by-collection";
/// The field manager members are applied with.
pub const FIELD_MANAGER: &str = "kubernetes.crossplane.io/observed-object-collection-controller";
/// The collections' version.
pub const VERSION: &str = "v1alpha1";

/// The collection kind of one scope.
pub fn collection_kind(namespaced: bool) -> Kind {
    let group = if namespaced { NAMESPACED_GROUP } else { CLUSTER_GROUP };
    Kind::new(group, VERSION, "ObservedObjectCollection", "observedobjectcollections", namespaced)
}

/// The Object kind members are of, in the collection's scope.
fn member_kind(namespaced: bool) -> Kind {
    if namespaced {
        Kind::new(NAMESPACED_GROUP, NAMESPACED_VERSION, "Object", "objects", true)
    } else {
        Kind::new(CLUSTER_GROUP, CLUSTER_VERSION, "Object", "objects", false)
    }
}

/// The CRD of one scope, written from upstream's published API.
pub fn crd(namespaced: bool) -> Value {
    let kind = collection_kind(namespaced);
    let provider_config = if namespaced {
        json!({"type": "object", "default": {"kind": "ClusterProviderConfig", "name": "default"}, "required": ["kind", "name"],
               "properties": {"kind": {"type": "string"}, "name": {"type": "string"}}})
    } else {
        json!({"type": "object", "default": {"name": "default"}, "required": ["name"], "properties": {"name": {"type": "string"}}})
    };
    let string_map = json!({"type": "object", "additionalProperties": {"type": "string"}});
    let spec = json!({"type": "object", "required": ["observeObjects"], "properties": {
        "observeObjects": {"type": "object", "required": ["apiVersion", "kind", "selector"], "properties": {
            "apiVersion": {"type": "string", "minLength": 1},
            "kind": {"type": "string", "minLength": 1},
            "namespace": {"type": "string"},
            "selector": {"type": "object", "x-kubernetes-map-type": "atomic", "properties": {
                "matchLabels": string_map,
                "matchExpressions": {"type": "array", "items": {"type": "object", "required": ["key", "operator"], "properties": {
                    "key": {"type": "string"}, "operator": {"type": "string"},
                    "values": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "atomic"}
                }}, "x-kubernetes-list-type": "atomic"}
            }}
        }},
        "providerConfigRef": provider_config,
        "objectTemplate": {"type": "object", "properties": {"metadata": {"type": "object", "properties": {"labels": string_map, "annotations": string_map}}}}
    }});
    let status = json!({"type": "object", "properties": {
        "conditions": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"], "items": {
            "type": "object", "required": ["lastTransitionTime", "reason", "status", "type"], "properties": {
                "lastTransitionTime": {"type": "string", "format": "date-time"}, "message": {"type": "string"},
                "reason": {"type": "string"}, "status": {"type": "string"}, "type": {"type": "string"},
                "observedGeneration": {"type": "integer", "format": "int64"}
            }}},
        "membershipLabel": string_map
    }});
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{}.{}", kind.plural, kind.gvk.group)},
        "spec": {
            "group": kind.gvk.group,
            "names": {"kind": "ObservedObjectCollection", "listKind": "ObservedObjectCollectionList", "plural": kind.plural,
                      "singular": "observedobjectcollection", "categories": ["crossplane", "managed", "kubernetes"]},
            "scope": if namespaced { "Namespaced" } else { "Cluster" },
            "versions": [{
                "name": VERSION, "served": true, "storage": true,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "KIND", "type": "string", "jsonPath": ".spec.kind"},
                    {"name": "APIVERSION", "type": "string", "jsonPath": ".spec.apiVersion", "priority": 1},
                    {"name": "PROVIDERCONFIG", "type": "string", "jsonPath": ".spec.providerConfigRef.name"},
                    {"name": "SYNCED", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Synced')].status"},
                    {"name": "READY", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Ready')].status"},
                    {"name": "AGE", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
                ],
                "schema": {"openAPIV3Schema": {
                    "type": "object", "required": ["spec"],
                    "x-kubernetes-validations": [{"rule": "size(self.metadata.name) < 64", "message": "metadata.name max length is 63"}],
                    "properties": {
                        "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
                        "spec": spec, "status": status
                    }
                }}
            }]
        }
    })
}

/// A label selector (`matchLabels`, `matchExpressions`) as the query string Kubernetes reads.
pub fn selector_string(selector: &Value) -> Result<String, String> {
    let mut terms = Vec::new();
    for (key, value) in selector.get("matchLabels").and_then(Value::as_object).into_iter().flatten() {
        terms.push(format!("{key}={}", value.as_str().unwrap_or_default()));
    }
    for expression in selector.get("matchExpressions").and_then(Value::as_array).into_iter().flatten() {
        let key = expression.get("key").and_then(Value::as_str).unwrap_or_default();
        let values: Vec<&str> = expression.get("values").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
        let operator = expression.get("operator").and_then(Value::as_str).unwrap_or_default();
        terms.push(match (operator, values.is_empty()) {
            ("In", false) => format!("{key} in ({})", values.join(",")),
            ("NotIn", false) => format!("{key} notin ({})", values.join(",")),
            ("Exists", true) => key.to_string(),
            ("DoesNotExist", true) => format!("!{key}"),
            ("In" | "NotIn", true) => return Err(format!("{key}: values must be non-empty for operator {operator}")),
            ("Exists" | "DoesNotExist", false) => return Err(format!("{key}: values must be empty for operator {operator}")),
            (other, _) => return Err(format!("{key}: {other:?} is not a valid label selector operator")),
        });
    }
    Ok(terms.join(","))
}

/// The name of the member Object for a matched object, as upstream names it.
pub fn member_name(collection: &str, group: &str, version: &str, kind: &str, namespace: &str, name: &str) -> String {
    let key = format!("{group}/{version}, Kind={kind}/{namespace}/{name}");
    let digest = hex::encode(Sha256::digest(key.as_bytes()));
    format!("{collection}-{}", &digest[..7])
}

/// Reconciles the collections of one scope.
pub struct CollectionReconciler {
    kube: Kube,
    namespaced: bool,
    configs: Arc<ProviderConfigKinds>,
    targets: Arc<Targets>,
    local: Target,
    poll_interval: Duration,
}

impl CollectionReconciler {
    /// Lists the matches on the target and makes the members follow them; returns the
    /// membership label.
    async fn sync(&self, collection: &Value) -> Result<Value, String> {
        let name = object::name(collection).unwrap_or_default();
        let namespace = object::namespace(collection);
        let config = self.configs.get(&self.kube, collection).await.map_err(|e| e.to_string())?;
        let context = ConnectContext { kube: &self.kube, provider_config: Some(&config) };
        let target = self.targets.of(&context, &self.local, namespace).await.map_err(|e: ExternalError| e.message)?;
        let criteria = collection.pointer("/spec/observeObjects").cloned().unwrap_or(Value::Null);
        let text = |f: &str| criteria.get(f).and_then(Value::as_str).unwrap_or_default().to_string();
        let kind = target.kind_of(&json!({"apiVersion": text("apiVersion"), "kind": text("kind")})).await.map_err(|e| e.message)?;
        let selector = selector_string(criteria.get("selector").unwrap_or(&Value::Null)).map_err(|e| format!("error creating selector: {e}"))?;
        let search_namespace = Some(text("namespace")).filter(|n| kind.namespaced && !n.is_empty());
        let matches = target
            .kube
            .list(&kind, search_namespace.as_deref(), Some(&selector).filter(|s| !s.is_empty()).map(String::as_str))
            .await
            .map_err(|e| format!("{}: error fetching objects for {}: {e}", target.name, kind.gvk))?;

        let members_kind = member_kind(self.namespaced);
        let label = json!({MEMBERSHIP_LABEL: name});
        let template = collection.pointer("/spec/objectTemplate/metadata");
        let mut wanted = Vec::new();
        for matched in &matches {
            let (matched_namespace, matched_name) = (object::namespace(matched).unwrap_or_default(), object::name(matched).unwrap_or_default());
            let member = member_name(name, &kind.gvk.group, &kind.gvk.version, &kind.gvk.kind, matched_namespace, matched_name);
            let mut labels = template.and_then(|t| t.get("labels")).cloned().unwrap_or_else(|| json!({}));
            labels[MEMBERSHIP_LABEL] = json!(name);
            let mut metadata = json!({"name": member, "labels": labels, "ownerReferences": [object::owner_reference(collection, false, false)]});
            if let Some(namespace) = namespace {
                metadata["namespace"] = json!(namespace);
            }
            if let Some(annotations) = template.and_then(|t| t.get("annotations")).filter(|a| a.as_object().is_some_and(|m| !m.is_empty())) {
                metadata["annotations"] = annotations.clone();
            }
            let mut manifest_metadata = json!({"name": matched_name});
            if !matched_namespace.is_empty() {
                manifest_metadata["namespace"] = json!(matched_namespace);
            }
            let object = json!({
                "apiVersion": members_kind.gvk.api_version(), "kind": "Object", "metadata": metadata,
                "spec": {
                    "providerConfigRef": collection.pointer("/spec/providerConfigRef").cloned().unwrap_or_else(|| json!({"name": "default"})),
                    "managementPolicies": ["Observe"],
                    "forProvider": {"manifest": {"apiVersion": kind.gvk.api_version(), "kind": kind.gvk.kind, "metadata": manifest_metadata}}
                }
            });
            self.kube.apply(&members_kind, &object, FIELD_MANAGER, true).await.map_err(|e| format!("cannot create observed object {member}: {e}"))?;
            wanted.push(member);
        }
        let existing = self
            .kube
            .list(&members_kind, namespace, Some(&format!("{MEMBERSHIP_LABEL}={name}")))
            .await
            .map_err(|e| format!("cannot list members matching labels {label}: {e}"))?;
        for member in existing {
            let member_name = object::name(&member).unwrap_or_default();
            if wanted.iter().any(|w| w == member_name) || object::is_deleting(&member) {
                continue;
            }
            self.kube
                .delete(&members_kind, namespace, member_name, &DeleteOptions::default())
                .await
                .map_err(|e| format!("cannot delete observed object {member_name}: {e}"))?;
        }
        Ok(label)
    }
}

#[async_trait::async_trait]
impl Reconciler for CollectionReconciler {
    async fn reconcile(&self, key: &ObjectKey) -> Result<Action, ReconcileError> {
        let kind = collection_kind(self.namespaced);
        let Some(mut collection) = self.kube.get(&kind, key.namespace.as_deref(), &key.name).await? else { return Ok(Action::Done) };
        // Members are owned by the collection: the garbage collector deletes them with it.
        if object::is_deleting(&collection) {
            return Ok(Action::Done);
        }
        let before = conditions::status_of(&collection);
        let action = if annotations::is_paused(&collection) {
            conditions::set(&mut collection, Condition::reconcile_paused());
            Action::Done
        } else {
            match self.sync(&collection).await {
                Ok(label) => {
                    conditions::set(&mut collection, Condition::reconcile_success());
                    conditions::set(&mut collection, Condition::available());
                    collection["status"]["membershipLabel"] = label;
                    Action::RequeueAfter(self.poll_interval)
                }
                Err(message) => {
                    conditions::set(&mut collection, Condition::reconcile_error(&message));
                    Action::Requeue
                }
            }
        };
        if conditions::status_of(&collection) != before {
            self.kube.replace_status(&kind, &collection).await?;
        }
        Ok(action)
    }
}

/// Starts the collection controller of one scope, named
/// `managed/observedobjectcollection.<group>`.
pub fn start(runtime: &Runtime, namespaced: bool, targets: Arc<Targets>, local: Target, poll_interval: Duration) -> Arc<Controller> {
    let kind = collection_kind(namespaced);
    let group = if namespaced { NAMESPACED_GROUP } else { CLUSTER_GROUP };
    let configs = Arc::new(ProviderConfigKinds {
        config: Kind::new(group, CONFIG_VERSION, "ProviderConfig", "providerconfigs", namespaced),
        cluster_config: namespaced.then(|| Kind::new(group, CONFIG_VERSION, "ClusterProviderConfig", "clusterproviderconfigs", false)),
        usage: Kind::new(group, CONFIG_VERSION, "ProviderConfigUsage", "providerconfigusages", namespaced),
    });
    let reconciler = Arc::new(CollectionReconciler { kube: runtime.kube.clone(), namespaced, configs, targets, local, poll_interval });
    let controller = Controller::start(ControllerConfig::new(format!("managed/observedobjectcollection.{group}")), reconciler, runtime.metrics.clone());
    runtime.watches.kinds().insert(kind.clone());
    controller.watch_own(&runtime.watches, &kind.gvk, spec_or_metadata_changed);
    controller
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_read_as_kubernetes_reads_them() {
        let selector = json!({"matchLabels": {"app": "web"}, "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["a", "b"]}, {"key": "legacy", "operator": "DoesNotExist"}, {"key": "team", "operator": "Exists"}
        ]});
        assert_eq!(selector_string(&selector).unwrap(), "app=web,tier in (a,b),!legacy,team");
        assert_eq!(selector_string(&json!({})).unwrap(), "");
        assert!(selector_string(&json!({"matchExpressions": [{"key": "x", "operator": "In"}]})).unwrap_err().contains("non-empty"));
        assert!(selector_string(&json!({"matchExpressions": [{"key": "x", "operator": "Near"}]})).unwrap_err().contains("Near"));
    }

    #[test]
    fn member_names_are_the_collection_and_a_stable_hash() {
        let name = member_name("mine", "", "v1", "ConfigMap", "default", "a");
        assert!(name.starts_with("mine-") && name.len() == "mine-".len() + 7, "{name}");
        assert_eq!(name, member_name("mine", "", "v1", "ConfigMap", "default", "a"));
        assert_ne!(name, member_name("mine", "", "v1", "ConfigMap", "default", "b"));
        // The hash is of upstream's key, `<group>/<version>, Kind=<kind>/<namespace>/<name>`:
        // sha256("/v1, Kind=ConfigMap/default/a") starts with 57e10f3.
        assert_eq!(name, "mine-57e10f3");
    }
}
