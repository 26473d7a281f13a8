//! The RBAC manager's provider controllers: for every ProviderRevision, the ServiceAccount the
//! provider runs as (named after the revision, in `crossplane-system`), the ClusterRoles
//! `crossplane:provider:<revision>:{aggregate-to-edit,aggregate-to-view,system}` over the
//! kinds the revision installs (its `status.objectRefs`), and the ClusterRoleBinding
//! `crossplane:provider:<revision>:system` of the system role to that ServiceAccount. The
//! `aggregate-to-edit` role also carries `rbac.crossplane.io/aggregate-to-crossplane`: it is
//! how the core gets access to managed kinds. Everything is controlled by the revision, so the
//! garbage collector removes it with the revision.

use std::collections::BTreeMap;
use std::sync::Arc;

use oxplane_runtime::Runtime;
use oxplane_runtime::controller::{Action, Controller, ControllerConfig, ReconcileError, Reconciler, spec_or_metadata_changed};
use oxplane_runtime::events::EventRecorder;
use oxplane_runtime::object::{self, ObjectKey};
use serde_json::{Value, json};

use super::{AGGREGATE_TO, FIELD_MANAGER, apply_changed, SYSTEM_NAMESPACE, cluster_role_binding_kind, cluster_role_kind, service_account_kind};
use crate::packages::provider_revision_kind;

/// The ServiceAccount a provider revision runs as.
pub fn service_account_name(revision: &str) -> String {
    revision.to_string()
}

/// The name of one of a revision's ClusterRoles (`aggregate-to-edit`, `aggregate-to-view`,
/// `system`); the system role's binding has the system role's name.
pub fn role_name(revision: &str, suffix: &str) -> String {
    format!("crossplane:provider:{revision}:{suffix}")
}

/// The kinds a revision installs, by group: the plurals of the CRDs and MRDs its
/// `status.objectRefs` names (`<plural>.<group>`).
fn resources_by_group(revision: &Value) -> BTreeMap<String, Vec<String>> {
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for reference in revision.pointer("/status/objectRefs").and_then(Value::as_array).into_iter().flatten() {
        let kind = reference.get("kind").and_then(Value::as_str).unwrap_or_default();
        if kind != "CustomResourceDefinition" && kind != "ManagedResourceDefinition" {
            continue;
        }
        let Some((plural, group)) = reference.get("name").and_then(Value::as_str).and_then(|n| n.split_once('.')) else { continue };
        let resources = groups.entry(group.to_string()).or_default();
        for resource in [plural.to_string(), format!("{plural}/status")] {
            if !resources.contains(&resource) {
                resources.push(resource);
            }
        }
    }
    groups
}

/// A revision's ServiceAccount, three ClusterRoles and the binding, controlled by it; nothing
/// when the revision installs no kinds (as Crossplane renders no roles then).
pub fn revision_objects(revision: &Value) -> Vec<(oxplane_runtime::kinds::Kind, Value)> {
    let name = object::name(revision).unwrap_or_default();
    let groups = resources_by_group(revision);
    if name.is_empty() || groups.is_empty() {
        return Vec::new();
    }
    let owner = json!([object::owner_reference(revision, true, true)]);
    let rules = |verbs: &[&str]| -> Vec<Value> { groups.iter().map(|(group, resources)| json!({"apiGroups": [group], "resources": resources, "verbs": verbs})).collect() };
    let role = |suffix: &str, labels: Value, rules: Vec<Value>| {
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": role_name(name, suffix), "labels": labels, "ownerReferences": owner},
            "rules": rules,
        })
    };
    let edit_labels = json!({format!("{AGGREGATE_TO}crossplane"): "true", format!("{AGGREGATE_TO}admin"): "true", format!("{AGGREGATE_TO}edit"): "true"});
    let mut system_rules = rules(&["get", "list", "watch", "update", "patch", "create"]);
    system_rules.push(json!({"apiGroups": groups.keys().collect::<Vec<_>>(), "resources": ["*/finalizers"], "verbs": ["update"]}));
    system_rules.push(json!({"apiGroups": ["", "coordination.k8s.io"], "resources": ["secrets", "configmaps", "events", "leases"], "verbs": ["*"]}));
    // A safe-start provider waits for its kinds' CRDs to be established, so it reads CRDs.
    let capabilities = revision.pointer("/status/capabilities").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str);
    if crate::mrd::is_safe_start(capabilities) {
        system_rules.push(json!({"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": ["get", "list", "watch"]}));
    }
    let account = service_account_name(name);
    vec![
        (
            service_account_kind(),
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account, "namespace": SYSTEM_NAMESPACE, "ownerReferences": owner}}),
        ),
        (cluster_role_kind(), role("aggregate-to-edit", edit_labels, rules(&["*"]))),
        (cluster_role_kind(), role("aggregate-to-view", json!({format!("{AGGREGATE_TO}view"): "true"}), rules(&["get", "list", "watch"]))),
        (cluster_role_kind(), role("system", json!({"rbac.crossplane.io/system": name}), system_rules)),
        (
            cluster_role_binding_kind(),
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": role_name(name, "system"), "ownerReferences": owner},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role_name(name, "system")},
                "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": SYSTEM_NAMESPACE}],
            }),
        ),
    ]
}

/// Applies each ProviderRevision's ServiceAccount, roles and binding.
pub struct ProviderRoles {
    runtime: Runtime,
    recorder: EventRecorder,
}

#[async_trait::async_trait]
impl Reconciler for ProviderRoles {
    async fn reconcile(&self, key: &ObjectKey) -> Result<Action, ReconcileError> {
        let Some(revision) = self.runtime.kube.get(&provider_revision_kind(), None, &key.name).await? else { return Ok(Action::Done) };
        if object::is_deleting(&revision) {
            // Everything is the revision's dependent: the garbage collector removes it.
            return Ok(Action::Done);
        }
        let mut roles = Vec::new();
        let mut bound = Vec::new();
        for (kind, wanted) in revision_objects(&revision) {
            let name = object::name(&wanted).unwrap_or_default().to_string();
            let changed = apply_changed(&self.runtime.kube, &kind, &wanted, FIELD_MANAGER, |e| {
                let (reason, message) = match kind.gvk.kind.as_str() {
                    "ClusterRoleBinding" => ("BindClusterRole", format!("cannot apply ClusterRoleBinding {name}: {e}")),
                    "ServiceAccount" => ("ApplyClusterRoles", format!("cannot apply ServiceAccount {SYSTEM_NAMESPACE}/{name}: {e}")),
                    _ => ("ApplyClusterRoles", format!("cannot apply ClusterRole {name}: {e}")),
                };
                self.recorder.warning(&revision, reason, &message);
                ReconcileError::new(message)
            })
            .await?;
            if !changed {
                continue;
            }
            match kind.gvk.kind.as_str() {
                "ClusterRole" => roles.push(name),
                "ClusterRoleBinding" => bound.push(name),
                _ => {}
            }
        }
        if !roles.is_empty() {
            self.recorder.normal(&revision, "ApplyClusterRoles", format!("Applied RBAC ClusterRoles: {}", roles.join(", ")));
        }
        for role in bound {
            let account = service_account_name(object::name(&revision).unwrap_or_default());
            self.recorder.normal(&revision, "BindClusterRole", format!("Bound system ClusterRole {role:?} to provider ServiceAccount(s): {SYSTEM_NAMESPACE}/{account}"));
        }
        Ok(Action::Done)
    }
}

/// Starts the RBAC manager's provider controller, named
/// `rbac/provider/providerrevision.pkg.crossplane.io`.
pub fn start_controller(runtime: &Runtime) -> Arc<Controller> {
    const NAME: &str = "rbac/provider/providerrevision.pkg.crossplane.io";
    let recorder = EventRecorder::new(runtime.kube.clone(), "rbac/providerrevision.pkg.crossplane.io");
    let reconciler = Arc::new(ProviderRoles { runtime: runtime.clone(), recorder });
    let controller = Controller::start(ControllerConfig::new(NAME), reconciler, runtime.metrics.clone());
    controller.watch_own(&runtime.watches, &provider_revision_kind().gvk, roles_may_change);
    controller
}

/// Whether a revision's change may change what its roles say: its identity and metadata, or
/// the kinds and capabilities in its status (not its health conditions).
fn roles_may_change(old: Option<&Value>, new: &Value) -> bool {
    let status = |o: Option<&Value>, field: &str| o.and_then(|o| o.pointer(&format!("/status/{field}"))).cloned();
    spec_or_metadata_changed(old, new)
        || status(old, "objectRefs") != status(Some(new), "objectRefs")
        || status(old, "capabilities") != status(Some(new), "capabilities")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn revision() -> Value {
        json!({
            "apiVersion": "pkg.crossplane.io/v1",
            "kind": "ProviderRevision",
            "metadata": {"name": "provider-nop-0123456789ab", "uid": "r1"},
            "status": {"objectRefs": [
                {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "name": "nopresources.nop.crossplane.io"},
                {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "name": "providerconfigs.nop.crossplane.io"},
                {"apiVersion": "apiextensions.crossplane.io/v1alpha1", "kind": "ManagedResourceDefinition", "name": "things.example.org"},
                {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration", "name": "ignored"},
            ]},
        })
    }

    #[test]
    fn a_revision_gets_its_service_account_three_roles_and_a_binding_with_crossplanes_names_labels_and_rules() {
        let objects = revision_objects(&revision());
        let names: Vec<(&str, &str)> = objects.iter().map(|(k, o)| (k.gvk.kind.as_str(), o["metadata"]["name"].as_str().unwrap())).collect();
        assert_eq!(
            names,
            [
                ("ServiceAccount", "provider-nop-0123456789ab"),
                ("ClusterRole", "crossplane:provider:provider-nop-0123456789ab:aggregate-to-edit"),
                ("ClusterRole", "crossplane:provider:provider-nop-0123456789ab:aggregate-to-view"),
                ("ClusterRole", "crossplane:provider:provider-nop-0123456789ab:system"),
                ("ClusterRoleBinding", "crossplane:provider:provider-nop-0123456789ab:system"),
            ]
        );
        assert_eq!(objects[0].1["metadata"]["namespace"], "crossplane-system");
        let edit = &objects[1].1;
        assert_eq!(
            edit["metadata"]["labels"],
            json!({"rbac.crossplane.io/aggregate-to-crossplane": "true", "rbac.crossplane.io/aggregate-to-admin": "true", "rbac.crossplane.io/aggregate-to-edit": "true"})
        );
        assert_eq!(
            edit["rules"],
            json!([
                {"apiGroups": ["example.org"], "resources": ["things", "things/status"], "verbs": ["*"]},
                {"apiGroups": ["nop.crossplane.io"], "resources": ["nopresources", "nopresources/status", "providerconfigs", "providerconfigs/status"], "verbs": ["*"]},
            ])
        );
        assert_eq!(objects[2].1["metadata"]["labels"], json!({"rbac.crossplane.io/aggregate-to-view": "true"}));
        assert_eq!(objects[2].1["rules"][0]["verbs"], json!(["get", "list", "watch"]));
        let system = &objects[3].1;
        assert_eq!(system["metadata"]["labels"], json!({"rbac.crossplane.io/system": "provider-nop-0123456789ab"}));
        assert_eq!(system["rules"][1]["verbs"], json!(["get", "list", "watch", "update", "patch", "create"]));
        assert_eq!(system["rules"][2], json!({"apiGroups": ["example.org", "nop.crossplane.io"], "resources": ["*/finalizers"], "verbs": ["update"]}));
        assert_eq!(system["rules"][3], json!({"apiGroups": ["", "coordination.k8s.io"], "resources": ["secrets", "configmaps", "events", "leases"], "verbs": ["*"]}));
        let binding = &objects[4].1;
        assert_eq!(binding["roleRef"]["name"], "crossplane:provider:provider-nop-0123456789ab:system");
        assert_eq!(binding["subjects"], json!([{"kind": "ServiceAccount", "name": "provider-nop-0123456789ab", "namespace": "crossplane-system"}]));
        for (_, object) in &objects {
            assert_eq!(object["metadata"]["ownerReferences"][0]["uid"], "r1");
            assert_eq!(object["metadata"]["ownerReferences"][0]["controller"], true);
        }
    }

    #[test]
    fn a_safe_start_revision_may_read_crds() {
        let crd_rule = json!({"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": ["get", "list", "watch"]});
        let system_rules = |revision: &Value| revision_objects(revision)[3].1["rules"].as_array().unwrap().clone();
        assert!(!system_rules(&revision()).contains(&crd_rule));
        let mut safe_start = revision();
        safe_start["status"]["capabilities"] = json!(["SafeStart"]);
        assert_eq!(system_rules(&safe_start).last(), Some(&crd_rule));
    }

    #[test]
    fn a_revision_installing_no_kinds_gets_nothing() {
        let mut bare = revision();
        bare["status"]["objectRefs"] = json!([]);
        assert!(revision_objects(&bare).is_empty());
        assert!(revision_objects(&json!({"metadata": {"name": "x"}})).is_empty());
    }
}
