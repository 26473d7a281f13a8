//! Crossplane's RBAC manager: for every CompositeResourceDefinition, the ClusterRoles
//! `crossplane:composite:<xrd>:aggregate-to-{crossplane,edit,view,browse}` granting access to
//! its composite (and claim) kinds, labelled `rbac.crossplane.io/aggregate-to-*` so that the
//! aggregated roles `crossplane`, `crossplane-admin`, `crossplane-edit`, `crossplane-view` and
//! `crossplane-browse` (installed at start, as Crossplane's chart installs them) gather them.
//! The per-XRD roles are controlled by their XRD, so the garbage collector removes them with it.
//! `provider.rs`: the same for every ProviderRevision (its ServiceAccount, roles and binding).
//!
//! At start the chart's identities are installed too: the ServiceAccount `crossplane` (what
//! the core runs as) bound to the aggregated ClusterRole `crossplane`, and the ServiceAccount
//! `rbac-manager` (what these controllers run as) bound to `crossplane-rbac-manager`.

pub mod provider;

use std::sync::Arc;

use oxplane_runtime::Runtime;
use oxplane_runtime::client::Kube;
pub use oxplane_runtime::identity::SYSTEM_NAMESPACE;
use oxplane_runtime::controller::{Action, Controller, ControllerConfig, ReconcileError, Reconciler, spec_or_metadata_changed};
use oxplane_runtime::events::EventRecorder;
use oxplane_runtime::kinds::Kind;
use oxplane_runtime::object::{self, ObjectKey};
use serde_json::{Value, json};

use crate::xrd::controller::xrd_kind;

/// The field manager the roles are applied with.
pub const FIELD_MANAGER: &str = "rbac.crossplane.io/definition";
/// The label prefix of Crossplane's aggregation labels.
pub(crate) const AGGREGATE_TO: &str = "rbac.crossplane.io/aggregate-to-";

const EDIT: &[&str] = &["*"];
const VIEW: &[&str] = &["get", "list", "watch"];

/// `ClusterRole` (rbac.authorization.k8s.io/v1).
pub fn cluster_role_kind() -> Kind {
    Kind::new("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", false)
}

/// `ClusterRoleBinding` (rbac.authorization.k8s.io/v1).
pub fn cluster_role_binding_kind() -> Kind {
    Kind::new("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", false)
}

/// `ServiceAccount` (v1).
pub fn service_account_kind() -> Kind {
    Kind::new("", "v1", "ServiceAccount", "serviceaccounts", true)
}

fn namespace_kind() -> Kind {
    Kind::new("", "v1", "Namespace", "namespaces", false)
}

/// The ServiceAccount Crossplane's core runs as (in [`SYSTEM_NAMESPACE`]).
pub const CORE_SERVICE_ACCOUNT: &str = "crossplane";
/// The ServiceAccount the RBAC manager runs as (in [`SYSTEM_NAMESPACE`]).
pub const RBAC_MANAGER_SERVICE_ACCOUNT: &str = "rbac-manager";

fn rule(group: &str, resources: &[String], verbs: &[&str]) -> Value {
    json!({"apiGroups": [group], "resources": resources, "verbs": verbs})
}

fn labels(suffixes: &[&str]) -> Value {
    Value::Object(suffixes.iter().map(|s| (format!("{AGGREGATE_TO}{s}"), json!("true"))).collect())
}

/// An XRD's four ClusterRoles, controlled by it; empty when the XRD names no group or plural.
pub fn xrd_roles(xrd: &Value) -> Vec<Value> {
    let text = |pointer: &str| xrd.pointer(pointer).and_then(Value::as_str).unwrap_or_default();
    let (name, group, plural) = (object::name(xrd).unwrap_or_default(), text("/spec/group"), text("/spec/names/plural"));
    if name.is_empty() || group.is_empty() || plural.is_empty() {
        return Vec::new();
    }
    let claim = Some(text("/spec/claimNames/plural")).filter(|p| !p.is_empty());
    let with_status = |plural: &str| vec![plural.to_string(), format!("{plural}/status")];
    let mut edit_resources = with_status(plural);
    let mut crossplane_rules = vec![rule(group, &with_status(plural), EDIT), rule(group, &[format!("{plural}/finalizers")], &["update"])];
    if let Some(claim) = claim {
        edit_resources.extend(with_status(claim));
        crossplane_rules.push(rule(group, &with_status(claim), EDIT));
        crossplane_rules.push(rule(group, &[format!("{claim}/finalizers")], &["update"]));
    }
    let owner = json!([{
        "apiVersion": "apiextensions.crossplane.io/v1",
        "kind": "CompositeResourceDefinition",
        "name": name,
        "uid": object::uid(xrd).unwrap_or_default(),
        "controller": true,
        "blockOwnerDeletion": true,
    }]);
    let role = |suffix: &str, labels: Value, rules: Vec<Value>| {
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": format!("crossplane:composite:{name}:aggregate-to-{suffix}"), "labels": labels, "ownerReferences": owner},
            "rules": rules,
        })
    };
    vec![
        role("crossplane", labels(&["crossplane"]), crossplane_rules),
        role("edit", labels(&["admin", "ns-admin", "edit", "ns-edit"]), vec![rule(group, &edit_resources, EDIT)]),
        role("view", labels(&["view", "ns-view"]), vec![rule(group, &edit_resources, VIEW)]),
        role("browse", labels(&["browse"]), vec![rule(group, &with_status(plural), VIEW)]),
    ]
}

/// Crossplane's API groups, which its user-facing roles cover.
const CROSSPLANE_GROUPS: &[&str] = &["apiextensions.crossplane.io", "pkg.crossplane.io", "protection.crossplane.io", "ops.crossplane.io"];

/// The roles Crossplane's chart installs: `crossplane` (what the core runs with, aggregating
/// `aggregate-to-crossplane`), the user-facing `crossplane-{admin,edit,view,browse}` aggregating
/// their labels, their base roles, and `crossplane-admin` bound to the group
/// `crossplane:masters`.
pub fn chart_objects() -> Vec<(Kind, Value)> {
    let aggregated = |name: &str, label: &str, own: Value| {
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name, "labels": own},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {format!("{AGGREGATE_TO}{label}"): "true"}}]},
        })
    };
    let base = |name: &str, labels: Value, rules: Vec<Value>| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name, "labels": labels}, "rules": rules})
    };
    let core = |resources: &[&str], verbs: &[&str]| json!({"apiGroups": [""], "resources": resources, "verbs": verbs});
    let groups = |verbs: &[&str]| json!({"apiGroups": CROSSPLANE_GROUPS, "resources": ["*"], "verbs": verbs});
    let system_labels = json!({"crossplane.io/scope": "system", format!("{AGGREGATE_TO}crossplane"): "true"});
    let mut objects: Vec<Value> = vec![
        aggregated("crossplane", "crossplane", json!({})),
        base(
            "crossplane:system:aggregate-to-crossplane",
            system_labels,
            vec![
                core(&["events"], &["create", "update", "patch", "delete"]),
                core(&["secrets"], &["get", "list", "watch", "create", "update", "patch", "delete"]),
                core(&["serviceaccounts", "services"], &["*"]),
                json!({"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions", "customresourcedefinitions/status"], "verbs": ["*"]}),
                groups(&["*"]),
                json!({"apiGroups": ["extensions", "apps"], "resources": ["deployments"], "verbs": ["get", "list", "create", "update", "patch", "delete", "watch"]}),
                json!({"apiGroups": ["", "coordination.k8s.io"], "resources": ["configmaps", "leases"], "verbs": ["get", "list", "create", "update", "patch", "watch", "delete"]}),
                json!({"apiGroups": ["admissionregistration.k8s.io"], "resources": ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"], "verbs": ["get", "list", "create", "update", "patch", "watch", "delete"]}),
            ],
        ),
    ];
    for level in ["admin", "edit", "view", "browse"] {
        objects.push(aggregated(&format!("crossplane-{level}"), level, json!({})));
    }
    let read = &["get", "list", "watch"];
    objects.extend([
        base(
            "crossplane:aggregate-to-admin",
            labels(&["admin"]),
            vec![
                core(&["events"], read),
                core(&["secrets", "namespaces"], &["*"]),
                json!({"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles", "roles"], "verbs": read}),
                json!({"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterrolebindings", "rolebindings"], "verbs": ["*"]}),
                groups(&["*"]),
                json!({"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": read}),
            ],
        ),
        base(
            "crossplane:aggregate-to-edit",
            labels(&["edit"]),
            vec![core(&["events"], read), core(&["secrets"], &["*"]), core(&["namespaces"], read), groups(&["*"]), json!({"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": read})],
        ),
        base(
            "crossplane:aggregate-to-view",
            labels(&["view"]),
            vec![core(&["events", "namespaces"], read), groups(read), json!({"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": read})],
        ),
        // Browsers see compositions and XRDs (to pick one for a claim), nothing else of
        // Crossplane's: not packages, Usages or Operations.
        base(
            "crossplane:aggregate-to-browse",
            labels(&["browse"]),
            vec![core(&["events"], read), json!({"apiGroups": ["apiextensions.crossplane.io"], "resources": ["*"], "verbs": read})],
        ),
    ]);
    let mut all: Vec<(Kind, Value)> = objects.into_iter().map(|o| (cluster_role_kind(), o)).collect();
    let binding = |name: &str, role: &str, subject: Value| {
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [subject],
        })
    };
    let service_account = |name: &str| json!({"kind": "ServiceAccount", "name": name, "namespace": SYSTEM_NAMESPACE});
    all.push((cluster_role_binding_kind(), binding("crossplane-admin", "crossplane-admin", json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "crossplane:masters"}))));
    // The identities the core and the RBAC manager run as.
    all.push((namespace_kind(), json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NAMESPACE}})));
    for name in [CORE_SERVICE_ACCOUNT, RBAC_MANAGER_SERVICE_ACCOUNT] {
        all.push((service_account_kind(), json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": SYSTEM_NAMESPACE}})));
    }
    all.push((cluster_role_binding_kind(), binding("crossplane", "crossplane", service_account(CORE_SERVICE_ACCOUNT))));
    all.push((cluster_role_kind(), rbac_manager_role()));
    all.push((cluster_role_binding_kind(), binding("crossplane-rbac-manager", "crossplane-rbac-manager", service_account(RBAC_MANAGER_SERVICE_ACCOUNT))));
    all
}

/// What the RBAC manager may do: read the definitions and revisions it renders roles for,
/// manage roles and bindings (with `escalate` and `bind`, as it grants what it does not hold
/// itself), the providers' ServiceAccounts, and its events.
fn rbac_manager_role() -> Value {
    let read = ["get", "list", "watch"];
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "crossplane-rbac-manager"},
        "rules": [
            {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "update", "patch", "delete"]},
            {"apiGroups": [""], "resources": ["namespaces"], "verbs": read},
            {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
            {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": read},
            {"apiGroups": ["apiextensions.crossplane.io"], "resources": ["compositeresourcedefinitions"], "verbs": read},
            {"apiGroups": ["pkg.crossplane.io"], "resources": ["providerrevisions"], "verbs": read},
            {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": read},
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles", "roles"], "verbs": ["get", "list", "watch", "create", "update", "patch", "delete", "escalate", "bind"]},
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterrolebindings", "rolebindings"], "verbs": ["*"]},
            {"apiGroups": ["", "coordination.k8s.io"], "resources": ["configmaps", "leases"], "verbs": ["get", "list", "create", "update", "patch", "watch", "delete"]},
        ],
    })
}

/// Applies [`chart_objects`] (as whoever installs Crossplane: the admin in `oxplane up`).
pub async fn install_chart_roles(kube: &Kube) -> Result<(), oxplane_runtime::client::ApiError> {
    for (kind, object) in chart_objects() {
        kube.apply(&kind, &object, FIELD_MANAGER, true).await?;
    }
    Ok(())
}

/// Applies `wanted` (server-side, forced) and says whether that changed what was stored: its
/// resourceVersion moved, or it was created. `on_apply_error` words a refused apply; a failed
/// read before it is returned as it is.
pub(crate) async fn apply_changed(
    kube: &Kube,
    kind: &Kind,
    wanted: &Value,
    field_manager: &str,
    on_apply_error: impl FnOnce(oxplane_runtime::client::ApiError) -> ReconcileError,
) -> Result<bool, ReconcileError> {
    let before = kube.get(kind, object::namespace(wanted), object::name(wanted).unwrap_or_default()).await?;
    let applied = kube.apply(kind, wanted, field_manager, true).await.map_err(on_apply_error)?;
    Ok(before.as_ref().and_then(object::resource_version) != object::resource_version(&applied))
}

/// Applies each XRD's ClusterRoles.
pub struct DefinitionRoles {
    runtime: Runtime,
    recorder: EventRecorder,
}

#[async_trait::async_trait]
impl Reconciler for DefinitionRoles {
    async fn reconcile(&self, key: &ObjectKey) -> Result<Action, ReconcileError> {
        let Some(xrd) = self.runtime.kube.get(&xrd_kind(), None, &key.name).await? else { return Ok(Action::Done) };
        if object::is_deleting(&xrd) {
            // The roles are the XRD's dependents: the garbage collector removes them with it.
            return Ok(Action::Done);
        }
        let mut changed = Vec::new();
        for role in xrd_roles(&xrd) {
            let name = object::name(&role).unwrap_or_default().to_string();
            let applied = apply_changed(&self.runtime.kube, &cluster_role_kind(), &role, FIELD_MANAGER, |e| {
                let message = format!("cannot apply ClusterRole {name}: {e}");
                self.recorder.warning(&xrd, "ApplyClusterRoles", &message);
                ReconcileError::new(message)
            })
            .await?;
            if applied {
                changed.push(name);
            }
        }
        if !changed.is_empty() {
            self.recorder.normal(&xrd, "ApplyClusterRoles", format!("Applied RBAC ClusterRoles: {}", changed.join(", ")));
        }
        Ok(Action::Done)
    }
}

/// Starts the RBAC manager's definition controller, named
/// `rbac/definition/compositeresourcedefinition.apiextensions.crossplane.io`.
pub fn start_controller(runtime: &Runtime) -> Arc<Controller> {
    const NAME: &str = "rbac/definition/compositeresourcedefinition.apiextensions.crossplane.io";
    let recorder = EventRecorder::new(runtime.kube.clone(), "rbac/compositeresourcedefinition.apiextensions.crossplane.io");
    let reconciler = Arc::new(DefinitionRoles { runtime: runtime.clone(), recorder });
    let controller = Controller::start(ControllerConfig::new(NAME), reconciler, runtime.metrics.clone());
    controller.watch_own(&runtime.watches, &xrd_kind().gvk, spec_or_metadata_changed);
    controller
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_xrd_with_a_claim_gets_four_roles_with_crossplanes_names_labels_and_rules() {
        let xrd = json!({
            "metadata": {"name": "xdatabases.example.org", "uid": "u1"},
            "spec": {"group": "example.org", "names": {"kind": "XDatabase", "plural": "xdatabases"}, "claimNames": {"kind": "Database", "plural": "databases"}},
        });
        let roles = xrd_roles(&xrd);
        let names: Vec<&str> = roles.iter().map(|r| r["metadata"]["name"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "crossplane:composite:xdatabases.example.org:aggregate-to-crossplane",
                "crossplane:composite:xdatabases.example.org:aggregate-to-edit",
                "crossplane:composite:xdatabases.example.org:aggregate-to-view",
                "crossplane:composite:xdatabases.example.org:aggregate-to-browse",
            ]
        );
        assert_eq!(
            roles[0]["rules"],
            json!([
                {"apiGroups": ["example.org"], "resources": ["xdatabases", "xdatabases/status"], "verbs": ["*"]},
                {"apiGroups": ["example.org"], "resources": ["xdatabases/finalizers"], "verbs": ["update"]},
                {"apiGroups": ["example.org"], "resources": ["databases", "databases/status"], "verbs": ["*"]},
                {"apiGroups": ["example.org"], "resources": ["databases/finalizers"], "verbs": ["update"]},
            ])
        );
        assert_eq!(
            roles[1]["metadata"]["labels"],
            json!({"rbac.crossplane.io/aggregate-to-admin": "true", "rbac.crossplane.io/aggregate-to-ns-admin": "true", "rbac.crossplane.io/aggregate-to-edit": "true", "rbac.crossplane.io/aggregate-to-ns-edit": "true"})
        );
        assert_eq!(roles[2]["rules"][0]["resources"], json!(["xdatabases", "xdatabases/status", "databases", "databases/status"]));
        assert_eq!(roles[2]["rules"][0]["verbs"], json!(["get", "list", "watch"]));
        // Browse never covers claims.
        assert_eq!(roles[3]["rules"], json!([{"apiGroups": ["example.org"], "resources": ["xdatabases", "xdatabases/status"], "verbs": ["get", "list", "watch"]}]));
        for role in &roles {
            assert_eq!(role["metadata"]["ownerReferences"][0]["uid"], "u1");
            assert_eq!(role["metadata"]["ownerReferences"][0]["controller"], true);
        }
    }

    #[test]
    fn an_xrd_without_a_claim_or_a_plural() {
        let xrd = json!({"metadata": {"name": "xthings.example.org", "uid": "u"}, "spec": {"group": "example.org", "names": {"plural": "xthings"}}});
        let roles = xrd_roles(&xrd);
        assert_eq!(roles[0]["rules"].as_array().unwrap().len(), 2);
        assert_eq!(roles[1]["rules"][0]["resources"], json!(["xthings", "xthings/status"]));
        assert!(xrd_roles(&json!({"metadata": {"name": "x"}, "spec": {}})).is_empty());
    }

    #[test]
    fn the_chart_roles_aggregate_crossplanes_labels() {
        let objects = chart_objects();
        let find = |name: &str| objects.iter().find(|(_, o)| o["metadata"]["name"] == name).map(|(_, o)| o.clone()).unwrap();
        for level in ["admin", "edit", "view", "browse"] {
            let role = find(&format!("crossplane-{level}"));
            assert_eq!(role["aggregationRule"]["clusterRoleSelectors"][0]["matchLabels"][format!("rbac.crossplane.io/aggregate-to-{level}")], "true");
            assert_eq!(find(&format!("crossplane:aggregate-to-{level}"))["metadata"]["labels"][format!("rbac.crossplane.io/aggregate-to-{level}")], "true");
        }
        assert_eq!(find("crossplane-admin")["kind"], "ClusterRole");
        let binding = objects.iter().find(|(k, _)| k.gvk.kind == "ClusterRoleBinding").map(|(_, o)| o).unwrap();
        assert_eq!(binding["subjects"][0]["name"], "crossplane:masters");
    }
}
