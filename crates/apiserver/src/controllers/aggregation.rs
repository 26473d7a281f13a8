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

/// Writes `rules` as the rules of aggregated ClusterRole `name` unless they are already.
async fn write_rules(state: &AppState, name: &str, rules: &[PolicyRule]) -> Result<bool, ApiError> {
    let wanted = serde_json::to_value(rules).map_err(|e| ApiError::internal(e.to_string()))?;
    let Some(resource) = state.registry.get(crate::authz::RBAC_GROUP, "v1", "clusterroles") else { return Ok(false) };
    let target = ObjectTarget { resource: &resource, namespace: None, name, subresource: None };
    let written = ops::modify(state, &target, &WriteOptions::internal("clusterrole-aggregation-controller"), |current| {
        let empty = wanted.as_array().is_some_and(Vec::is_empty) && current.get("rules").is_none_or(Value::is_null);
        if empty || current.get("rules") == Some(&wanted) {
            return false;
        }
        current["rules"] = wanted.clone();
        true
    })
    .await?;
    Ok(written.is_some())
}

/// Aggregates every aggregated ClusterRole now, until nothing changes (an aggregated role may
/// feed another, as `view` feeds `edit` feeds `admin`): the server does this once at start, so
/// the bootstrap roles are whole before the first request and the controller has nothing to
/// write then.
pub async fn aggregate_all(state: &AppState) -> Result<(), ApiError> {
    for _ in 0..8 {
        state.cache.sync().await.map_err(crate::state::cache_error)?;
        let roles: BTreeMap<String, Arc<Value>> = state
            .cache
            .list(PREFIX)
            .0
            .into_iter()
            .filter_map(|role| Some((objects::meta_str(&role, "name")?.to_string(), role)))
            .collect();
        let mut changed = false;
        for (name, role) in &roles {
            if let Some(rules) = aggregate(role, &roles) {
                changed |= write_rules(state, name, &rules).await?;
            }
        }
        if !changed {
            break;
        }
    }
    Ok(())
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
        if role.get("rules").and_then(|r| serde_json::from_value::<Vec<PolicyRule>>(r.clone()).ok()).unwrap_or_default() == rules {
            return Ok(());
        }
        write_rules(state, &name, &rules).await?;
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
