//! The roles and bindings every cluster starts with, as kube-apiserver's RBAC bootstrap
//! creates them: `cluster-admin` (bound to `system:masters`), the user-facing `admin`, `edit`
//! and `view` (aggregated from the `system:aggregate-to-*` roles and any ClusterRole carrying
//! their labels), and the `system:*` roles clients need before anyone grants them anything
//! (`system:discovery`, `system:basic-user`, `system:public-info-viewer`, `system:monitoring`).
//!
//! They are created when missing; an existing one whose `rbac.authorization.kubernetes.io/autoupdate`
//! annotation is `"true"` gets the rules and subjects of this version back at every start.

use serde_json::{Value, json};

use super::rules::PolicyRule;
use crate::ops::{self, ObjectTarget, WriteOptions};
use crate::state::AppState;
use crate::status::{ApiError, Reason};

/// The annotation that lets a start reset a bootstrap object.
pub const AUTOUPDATE: &str = "rbac.authorization.kubernetes.io/autoupdate";
/// The label aggregated into `admin`.
pub const AGGREGATE_TO_ADMIN: &str = "rbac.authorization.k8s.io/aggregate-to-admin";
/// The label aggregated into `edit`.
pub const AGGREGATE_TO_EDIT: &str = "rbac.authorization.k8s.io/aggregate-to-edit";
/// The label aggregated into `view`.
pub const AGGREGATE_TO_VIEW: &str = "rbac.authorization.k8s.io/aggregate-to-view";

const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["create", "delete", "deletecollection", "patch", "update"];
const ALL_VERBS: &[&str] = &["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];

fn meta(name: &str, labels: &[(&str, &str)]) -> Value {
    let mut label_map = serde_json::Map::new();
    label_map.insert("kubernetes.io/bootstrapping".into(), json!("rbac-defaults"));
    for (k, v) in labels {
        label_map.insert(k.to_string(), json!(v));
    }
    json!({"name": name, "labels": label_map, "annotations": {AUTOUPDATE: "true"}})
}

fn cluster_role(name: &str, labels: &[(&str, &str)], rules: Vec<PolicyRule>) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": meta(name, labels), "rules": rules})
}

fn aggregated(name: &str, labels: &[(&str, &str)], selector_label: &str) -> Value {
    let mut role = cluster_role(name, labels, Vec::new());
    role["aggregationRule"] = json!({"clusterRoleSelectors": [{"matchLabels": {selector_label: "true"}}]});
    role
}

fn binding(name: &str, role: &str, groups: &[&str]) -> Value {
    let subjects: Vec<Value> =
        groups.iter().map(|g| json!({"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": g})).collect();
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": meta(name, &[]),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": subjects,
    })
}

/// Namespaced core kinds an app team reads and writes.
const CORE_CONTENT: &[&str] = &[
    "configmaps",
    "endpoints",
    "persistentvolumeclaims",
    "pods",
    "replicationcontrollers",
    "services",
    "serviceaccounts",
];

/// The bootstrap ClusterRoles.
pub fn cluster_roles() -> Vec<Value> {
    let with_secrets: Vec<&str> = CORE_CONTENT.iter().copied().chain(["secrets"]).collect();
    vec![
        cluster_role("cluster-admin", &[], vec![PolicyRule::resources(&["*"], &["*"], &["*"]), PolicyRule::urls(&["*"], &["*"])]),
        aggregated("admin", &[], AGGREGATE_TO_ADMIN),
        aggregated("edit", &[(AGGREGATE_TO_ADMIN, "true")], AGGREGATE_TO_EDIT),
        aggregated("view", &[(AGGREGATE_TO_EDIT, "true")], AGGREGATE_TO_VIEW),
        cluster_role(
            "system:aggregate-to-admin",
            &[(AGGREGATE_TO_ADMIN, "true")],
            vec![
                PolicyRule::resources(ALL_VERBS, &["rbac.authorization.k8s.io"], &["rolebindings", "roles"]),
                PolicyRule::resources(&["create"], &["authorization.k8s.io"], &["localsubjectaccessreviews"]),
            ],
        ),
        cluster_role(
            "system:aggregate-to-edit",
            &[(AGGREGATE_TO_EDIT, "true")],
            vec![
                PolicyRule::resources(WRITE, &[""], &with_secrets),
                PolicyRule::resources(READ, &[""], &["secrets"]),
                PolicyRule::resources(&["impersonate"], &[""], &["serviceaccounts"]),
                PolicyRule::resources(&["create"], &[""], &["serviceaccounts/token"]),
                PolicyRule::resources(WRITE, &["coordination.k8s.io"], &["leases"]),
            ],
        ),
        cluster_role(
            "system:aggregate-to-view",
            &[(AGGREGATE_TO_VIEW, "true")],
            vec![
                PolicyRule::resources(READ, &[""], &[CORE_CONTENT, &["events", "limitranges", "resourcequotas", "namespaces", "namespaces/status"]].concat()),
                PolicyRule::resources(READ, &["events.k8s.io"], &["events"]),
                PolicyRule::resources(READ, &["coordination.k8s.io"], &["leases"]),
            ],
        ),
        cluster_role(
            "system:discovery",
            &[],
            vec![PolicyRule::urls(
                &["get"],
                &["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/"],
            )],
        ),
        cluster_role(
            "system:basic-user",
            &[],
            vec![
                PolicyRule::resources(&["create"], &["authentication.k8s.io"], &["selfsubjectreviews"]),
                PolicyRule::resources(&["create"], &["authorization.k8s.io"], &["selfsubjectaccessreviews", "selfsubjectrulesreviews"]),
            ],
        ),
        cluster_role(
            "system:public-info-viewer",
            &[],
            vec![PolicyRule::urls(&["get"], &["/healthz", "/livez", "/readyz", "/version", "/version/"])],
        ),
        cluster_role(
            "system:monitoring",
            &[],
            vec![PolicyRule::urls(&["get"], &["/healthz", "/healthz/*", "/livez", "/livez/*", "/metrics", "/metrics/slis", "/readyz", "/readyz/*"])],
        ),
        cluster_role(
            "system:auth-delegator",
            &[],
            vec![
                PolicyRule::resources(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
                PolicyRule::resources(&["create"], &["authorization.k8s.io"], &["subjectaccessreviews"]),
            ],
        ),
        cluster_role(
            "system:service-account-issuer-discovery",
            &[],
            vec![PolicyRule::urls(&["get"], &["/.well-known/openid-configuration", "/.well-known/openid-configuration/", "/openid/v1/jwks", "/openid/v1/jwks/"])],
        ),
    ]
}

/// The bootstrap ClusterRoleBindings.
pub fn cluster_role_bindings() -> Vec<Value> {
    vec![
        binding("cluster-admin", "cluster-admin", &[crate::authn::MASTERS]),
        binding("system:discovery", "system:discovery", &[crate::authn::AUTHENTICATED]),
        binding("system:basic-user", "system:basic-user", &[crate::authn::AUTHENTICATED]),
        binding("system:public-info-viewer", "system:public-info-viewer", &[crate::authn::AUTHENTICATED, "system:unauthenticated"]),
        binding("system:monitoring", "system:monitoring", &["system:monitoring"]),
        binding("system:service-account-issuer-discovery", "system:service-account-issuer-discovery", &["system:serviceaccounts"]),
    ]
}

/// Creates the bootstrap objects that are missing and resets those marked for autoupdate.
pub async fn ensure(state: &AppState) -> Result<(), ApiError> {
    let objects = cluster_roles().into_iter().map(|o| ("clusterroles", o)).chain(cluster_role_bindings().into_iter().map(|o| ("clusterrolebindings", o)));
    for (plural, wanted) in objects {
        let resource = state
            .registry
            .get(super::RBAC_GROUP, "v1", plural)
            .ok_or_else(|| ApiError::internal(format!("{plural} are not served")))?;
        let name = wanted["metadata"]["name"].as_str().unwrap_or_default().to_string();
        let options = WriteOptions::internal("rbac-bootstrap");
        match ops::create(state, &resource, None, wanted.clone(), None, &options).await {
            Ok(_) => continue,
            Err(error) if error.reason == Reason::AlreadyExists => {}
            Err(error) => return Err(error),
        }
        let target = ObjectTarget { resource: &resource, namespace: None, name: &name, subresource: None };
        // Aggregated roles get their rules from the aggregation controller, not from here.
        let fields: &[&str] = if wanted.get("aggregationRule").is_some() { &["aggregationRule"] } else { &["rules", "roleRef", "subjects"] };
        ops::modify(state, &target, &options, |current| {
            if current["metadata"]["annotations"][AUTOUPDATE] != "true" {
                return false;
            }
            let mut changed = false;
            for field in fields {
                if let Some(value) = wanted.get(*field)
                    && current.get(*field) != Some(value)
                {
                    current[*field] = value.clone();
                    changed = true;
                }
            }
            changed
        })
        .await?;
    }
    crate::controllers::aggregation::aggregate_all(state).await
}
