//! Every Role, ClusterRole and binding at one moment, indexed for decisions: cluster-wide
//! bindings in one list, RoleBindings by namespace, roles by name with their rules parsed.
//! Rebuilt from the watch cache whenever an RBAC object changes (see
//! [`super::Authorizer::snapshot`]), so a decision never parses JSON.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use super::rules::{PolicyRule, RoleRef, Subject};
use super::{Attributes, Decision, RBAC_PREFIX};
use crate::authn::UserInfo;
use crate::cache::WatchCache;
use crate::objects;

/// A RoleBinding or ClusterRoleBinding.
#[derive(Clone, Debug, Default)]
pub struct Binding {
    /// Its name.
    pub name: String,
    /// Its namespace ("" for ClusterRoleBindings).
    pub namespace: String,
    /// Who it grants to.
    pub subjects: Vec<Subject>,
    /// What it grants.
    pub role_ref: RoleRef,
}

impl Binding {
    fn from_object(object: &Value) -> Option<Binding> {
        Some(Binding {
            name: objects::meta_str(object, "name")?.to_string(),
            namespace: objects::meta_str(object, "namespace").unwrap_or_default().to_string(),
            subjects: serde_json::from_value(object.get("subjects").cloned().unwrap_or(Value::Null)).unwrap_or_default(),
            role_ref: serde_json::from_value(object.get("roleRef").cloned()?).ok()?,
        })
    }

    /// Whether the binding grants its role to `user`.
    pub fn applies_to(&self, user: &UserInfo) -> bool {
        self.subjects.iter().any(|s| s.applies_to(user, &self.namespace))
    }
}

/// The rules of a role's `rules` field (malformed rules, which validation refuses, grant nothing).
pub fn rules_of(object: &Value) -> Vec<PolicyRule> {
    object.get("rules").and_then(|r| serde_json::from_value(r.clone()).ok()).unwrap_or_default()
}

/// The RBAC objects at one moment.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// The RBAC change counter value this was built for.
    pub built_for: u64,
    cluster_roles: HashMap<String, Arc<Vec<PolicyRule>>>,
    roles: HashMap<(String, String), Arc<Vec<PolicyRule>>>,
    cluster_bindings: Vec<Binding>,
    bindings: HashMap<String, Vec<Binding>>,
}

impl Snapshot {
    /// Reads every RBAC object from the cache.
    pub fn build(cache: &WatchCache, built_for: u64) -> Snapshot {
        let mut snapshot = Snapshot { built_for, ..Default::default() };
        let list = |plural: &str| cache.list(&format!("{RBAC_PREFIX}{plural}/")).0;
        for role in list("clusterroles") {
            if let Some(name) = objects::meta_str(&role, "name") {
                snapshot.cluster_roles.insert(name.to_string(), Arc::new(rules_of(&role)));
            }
        }
        for role in list("roles") {
            if let (Some(ns), Some(name)) = (objects::meta_str(&role, "namespace"), objects::meta_str(&role, "name")) {
                snapshot.roles.insert((ns.to_string(), name.to_string()), Arc::new(rules_of(&role)));
            }
        }
        snapshot.cluster_bindings = list("clusterrolebindings").iter().filter_map(|b| Binding::from_object(b)).collect();
        for binding in list("rolebindings").iter().filter_map(|b| Binding::from_object(b)) {
            snapshot.bindings.entry(binding.namespace.clone()).or_default().push(binding);
        }
        snapshot
    }

    /// The rules a binding grants, or the error Kubernetes' RBAC gives when its role is missing
    /// (`clusterrole.rbac.authorization.k8s.io "x" not found`).
    pub fn role_rules(&self, role_ref: &RoleRef, namespace: &str) -> Result<Arc<Vec<PolicyRule>>, String> {
        let found = match role_ref.kind.as_str() {
            "ClusterRole" => self.cluster_roles.get(&role_ref.name),
            "Role" => self.roles.get(&(namespace.to_string(), role_ref.name.clone())),
            other => return Err(format!("unsupported role reference kind: {other:?}")),
        };
        found.cloned().ok_or_else(|| format!("{}.{} \"{}\" not found", role_ref.kind.to_ascii_lowercase(), super::RBAC_GROUP, role_ref.name))
    }

    /// The bindings that apply to `user` in `namespace`: the cluster-wide ones first, then the
    /// namespace's.
    fn applicable<'a>(&'a self, user: &'a UserInfo, namespace: &'a str) -> impl Iterator<Item = &'a Binding> + 'a {
        let local = if namespace.is_empty() { None } else { self.bindings.get(namespace) };
        self.cluster_bindings.iter().chain(local.into_iter().flatten()).filter(move |b| b.applies_to(user))
    }

    /// Decides a request: allowed when some rule of some role bound to the user allows it.
    pub fn decide(&self, attributes: &Attributes) -> Decision {
        let namespace = attributes.resource.as_ref().map(|r| r.namespace.as_str()).unwrap_or_default();
        let mut errors = Vec::new();
        for binding in self.applicable(&attributes.user, namespace) {
            match self.role_rules(&binding.role_ref, &binding.namespace) {
                Ok(rules) if rules.iter().any(|rule| rule.allows(attributes)) => return Decision::Allow,
                Ok(_) => {}
                Err(error) => errors.push(error),
            }
        }
        Decision::Deny(match errors.len() {
            0 => String::new(),
            1 => format!("RBAC: {}", errors[0]),
            _ => format!("RBAC: [{}]", errors.join(", ")),
        })
    }

    /// Why a request is allowed, as RBAC words it: `RBAC: allowed by ClusterRoleBinding "x" of
    /// ClusterRole "y" to Group "z"` (a RoleBinding is named `"name/namespace"`); empty when it
    /// is not.
    pub fn explain(&self, attributes: &Attributes) -> String {
        let namespace = attributes.resource.as_ref().map(|r| r.namespace.as_str()).unwrap_or_default();
        for binding in self.applicable(&attributes.user, namespace) {
            let Ok(rules) = self.role_rules(&binding.role_ref, &binding.namespace) else { continue };
            if !rules.iter().any(|rule| rule.allows(attributes)) {
                continue;
            }
            let (kind, name) = if binding.namespace.is_empty() {
                ("ClusterRoleBinding", binding.name.clone())
            } else {
                ("RoleBinding", format!("{}/{}", binding.name, binding.namespace))
            };
            let subject = binding.subjects.iter().find(|s| s.applies_to(&attributes.user, &binding.namespace));
            let to = subject.map(|s| format!(" to {} {:?}", s.kind, s.name)).unwrap_or_default();
            return format!("RBAC: allowed by {kind} {name:?} of {} {:?}{to}", binding.role_ref.kind, binding.role_ref.name);
        }
        String::new()
    }

    /// Every rule that applies to `user` in `namespace`, and what could not be resolved.
    pub fn rules_for(&self, user: &UserInfo, namespace: &str) -> (Vec<PolicyRule>, Vec<String>) {
        let mut rules = Vec::new();
        let mut errors = Vec::new();
        for binding in self.applicable(user, namespace) {
            match self.role_rules(&binding.role_ref, &binding.namespace) {
                Ok(found) => rules.extend(found.iter().cloned()),
                Err(error) => errors.push(error),
            }
        }
        (rules, errors)
    }

    /// The ClusterRoles by name (for aggregation).
    pub fn cluster_role(&self, name: &str) -> Option<Arc<Vec<PolicyRule>>> {
        self.cluster_roles.get(name).cloned()
    }
}
