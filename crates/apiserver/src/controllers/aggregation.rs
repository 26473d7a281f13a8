//! ClusterRole aggregation, as kube-controller-manager's `clusterrole-aggregation` controller:
//! a ClusterRole with an `aggregationRule` gets as its `rules` the rules of every other
//! ClusterRole whose labels match one of its `clusterRoleSelectors` (in name order, without
//! repeats), kept up to date whenever any ClusterRole changes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::Value;

use super::runner::{Queue, Reconciler};
use crate::authz::rules::PolicyRule;
use crate::authz::snapshot::rules_of;
use crate::cache::{CacheEvent, EventType};
use crate::objects;
use crate::ops::{self, ObjectTarget, WriteOptions};
use crate::selectors::LabelSelector;
use crate::state::AppState;
use crate::status::ApiError;

const PREFIX: &str = "/registry/rbac.authorization.k8s.io/clusterroles/";

/// Keeps aggregated ClusterRoles' rules up to date.
#[derive(Default)]
pub struct Aggregation {
    /// Every ClusterRole by name.
    roles: BTreeMap<String, Arc<Value>>,
    /// The names of those with an aggregation rule.
    aggregated: BTreeSet<String>,
}

/// The rules `role`'s aggregation rule gathers from `roles`; `None` without a rule.
pub fn aggregate(role: &Value, roles: &BTreeMap<String, Arc<Value>>) -> Option<Vec<PolicyRule>> {
    let selectors = role.get("aggregationRule")?.get("clusterRoleSelectors")?.as_array()?;
    let selectors: Vec<LabelSelector> = selectors.iter().filter_map(|s| LabelSelector::from_label_selector_json(s).ok()).collect();
    let own = objects::meta_str(role, "name").unwrap_or_default();
    let mut rules: Vec<PolicyRule> = Vec::new();
    for (name, other) in roles {
        if name == own || !selectors.iter().any(|s| !s.is_empty() && s.matches_object(other)) {
            continue;
        }
        for rule in rules_of(other) {
            if !rules.contains(&rule) {
                rules.push(rule);
            }
        }
    }
    Some(rules)
}

impl Reconciler for Aggregation {
    type Item = String;

    fn name(&self) -> &'static str {
        "clusterrole-aggregation"
    }

    fn reset(&mut self) {
        *self = Aggregation::default();
    }

    fn observe(&mut self, event: &CacheEvent, queue: &mut Queue<String>) {
        let Some(name) = event.key.strip_prefix(PREFIX) else { return };
        match event.kind {
            EventType::Deleted => {
                self.roles.remove(name);
                self.aggregated.remove(name);
            }
            _ => {
                self.roles.insert(name.to_string(), event.object.clone());
                if event.object.get("aggregationRule").is_some_and(|a| !a.is_null()) {
                    self.aggregated.insert(name.to_string());
                } else {
                    self.aggregated.remove(name);
                }
            }
        }
        // Any ClusterRole may feed any aggregated one (labels change too): look at them all.
        for aggregated in &self.aggregated {
            queue.add(aggregated.clone());
        }
    }

    async fn reconcile(&mut self, state: &AppState, name: String, _queue: &mut Queue<String>) -> Result<(), ApiError> {
        let Some(role) = self.roles.get(&name) else { return Ok(()) };
        let Some(rules) = aggregate(role, &self.roles) else { return Ok(()) };
        let wanted = serde_json::to_value(&rules).map_err(|e| ApiError::internal(e.to_string()))?;
        if role.get("rules").unwrap_or(&Value::Null) == &wanted || (wanted.as_array().is_some_and(Vec::is_empty) && role.get("rules").is_none()) {
            return Ok(());
        }
        let Some(resource) = state.registry.get(crate::authz::RBAC_GROUP, "v1", "clusterroles") else { return Ok(()) };
        let target = ObjectTarget { resource: &resource, namespace: None, name: &name, subresource: None };
        ops::modify(state, &target, &WriteOptions::internal("clusterrole-aggregation-controller"), |current| {
            if current.get("rules") == Some(&wanted) {
                return false;
            }
            current["rules"] = wanted.clone();
            true
        })
        .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn role(name: &str, labels: Value, rules: Value) -> (String, Arc<Value>) {
        (name.to_string(), Arc::new(json!({"metadata": {"name": name, "labels": labels}, "rules": rules})))
    }

    #[test]
    fn aggregation_gathers_the_rules_of_matching_roles_once() {
        let get = json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]}]);
        let roles: BTreeMap<String, Arc<Value>> = [
            role("a", json!({"agg": "true"}), get.clone()),
            role("b", json!({"agg": "true"}), get.clone()),
            role("c", json!({"agg": "false"}), json!([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}])),
        ]
        .into_iter()
        .collect();
        let target = json!({"metadata": {"name": "t"}, "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"agg": "true"}}]}});
        let rules = aggregate(&target, &roles).unwrap();
        assert_eq!(serde_json::to_value(rules).unwrap(), get);
        assert!(aggregate(&json!({"metadata": {"name": "x"}}), &roles).is_none());
    }
}
