//! Escalation prevention, as Kubernetes' RBAC storage enforces it: a user may write a Role or
//! ClusterRole only with rules they hold themselves (or the `escalate` verb on it), and a
//! RoleBinding or ClusterRoleBinding only to a role whose rules they hold (or the `bind` verb
//! on that role). `system:masters` and the server's own writes are exempt. Also the checks of
//! a binding's `roleRef` (valid kinds, immutable), so a binding never points at nonsense.

use serde_json::Value;

use super::rules::{PolicyRule, RoleRef, uncovered};
use super::{Attributes, Decision, RBAC_GROUP, ResourceAttributes};
use crate::authn::{MASTERS, UserInfo};
use crate::ops::admission::{AdmissionHook, AdmissionRequest, HookFuture, Operation};
use crate::state::AppState;
use crate::status::{ApiError, Cause, go_quote};

/// The admission hook guarding RBAC writes.
pub struct EscalationCheck;

/// Go's `%q` of a string slice: `["a" "b"]`.
fn go_list(items: &[String]) -> String {
    format!("[{}]", items.iter().map(|s| go_quote(s)).collect::<Vec<_>>().join(" "))
}

/// Kubernetes' compact form of a rule: `{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}`.
pub fn compact(rule: &PolicyRule) -> String {
    let mut parts = Vec::new();
    if !rule.api_groups.is_empty() {
        parts.push(format!("APIGroups:{}", go_list(&rule.api_groups)));
    }
    if !rule.resources.is_empty() {
        parts.push(format!("Resources:{}", go_list(&rule.resources)));
    }
    if !rule.non_resource_urls.is_empty() {
        parts.push(format!("NonResourceURLs:{}", go_list(&rule.non_resource_urls)));
    }
    if !rule.resource_names.is_empty() {
        parts.push(format!("ResourceNames:{}", go_list(&rule.resource_names)));
    }
    if !rule.verbs.is_empty() {
        parts.push(format!("Verbs:{}", go_list(&rule.verbs)));
    }
    format!("{{{}}}", parts.join(", "))
}

/// Merges single grants that differ only in their verb into one rule each, in first-seen order.
fn compact_rules(grants: Vec<PolicyRule>) -> Vec<PolicyRule> {
    let mut out: Vec<PolicyRule> = Vec::new();
    for grant in grants {
        match out.iter_mut().find(|r| {
            r.api_groups == grant.api_groups && r.resources == grant.resources && r.resource_names == grant.resource_names && r.non_resource_urls == grant.non_resource_urls
        }) {
            Some(existing) => {
                for verb in grant.verbs {
                    if !existing.verbs.contains(&verb) {
                        existing.verbs.push(verb);
                    }
                }
            }
            None => out.push(grant),
        }
    }
    out
}

/// Whether `user` may skip the checks: the server itself (no user) or `system:masters`.
fn exempt(user: Option<&UserInfo>) -> bool {
    user.is_none_or(|u| u.in_group(MASTERS))
}

/// Refuses `wanted` unless `user` holds every rule of it in `namespace`.
fn confirm_no_escalation(state: &AppState, user: &UserInfo, namespace: &str, wanted: &[PolicyRule], what: (&str, &str)) -> Result<(), ApiError> {
    let (held, errors) = state.authorizer.rules_for(user, namespace);
    let missing = uncovered(&held, wanted);
    if missing.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> = compact_rules(missing).iter().map(compact).collect();
    let mut why = format!(
        "user {} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
        go_quote(&user.username),
        go_list(&user.groups),
        lines.join("\n")
    );
    if !errors.is_empty() {
        why.push_str(&format!("; resolution errors: [{}]", errors.join(" ")));
    }
    Err(ApiError::forbidden(RBAC_GROUP, what.0, what.1, &why))
}

/// Whether `user` may use `verb` (`escalate`, `bind`) on the RBAC object named.
fn may(state: &AppState, user: &UserInfo, verb: &str, resource: &str, namespace: &str, name: &str) -> bool {
    let attributes = Attributes::for_resource(
        user.clone(),
        verb,
        ResourceAttributes { namespace: namespace.into(), group: RBAC_GROUP.into(), version: "v1".into(), resource: resource.into(), name: name.into(), ..Default::default() },
    );
    state.authorizer.decide(&attributes) == Decision::Allow
}

/// A 422 for one field of the object written.
fn field_error(request: &AdmissionRequest<'_>, reason: &str, field: &str, message: String) -> ApiError {
    ApiError::invalid(&request.resource.kind, RBAC_GROUP, request.name, vec![Cause { reason: reason.into(), message, field: field.into() }])
}

fn role_ref(object: &Value) -> RoleRef {
    object.get("roleRef").and_then(|r| serde_json::from_value(r.clone()).ok()).unwrap_or_default()
}

impl EscalationCheck {
    fn check_role(state: &AppState, request: &AdmissionRequest<'_>, object: &Value) -> Result<(), ApiError> {
        let Some(user) = request.user.filter(|u| !exempt(Some(u))) else { return Ok(()) };
        if request.operation == Operation::Update
            && let Some(old) = request.old
            && old.get("rules") == object.get("rules")
            && old.get("aggregationRule") == object.get("aggregationRule")
        {
            return Ok(());
        }
        let namespace = request.namespace.unwrap_or_default();
        if may(state, user, "escalate", &request.resource.plural, namespace, request.name) {
            return Ok(());
        }
        let mut wanted = super::snapshot::rules_of(object);
        // An aggregation rule can gather any permission: only who holds them all may write one.
        if object.get("aggregationRule").is_some_and(|a| !a.is_null()) {
            wanted = vec![PolicyRule::resources(&["*"], &["*"], &["*"]), PolicyRule::urls(&["*"], &["*"])];
        }
        confirm_no_escalation(state, user, namespace, &wanted, (&request.resource.plural, request.name))
    }

    fn check_binding(state: &AppState, request: &AdmissionRequest<'_>, object: &Value) -> Result<(), ApiError> {
        let wanted = role_ref(object);
        if let (Operation::Update, Some(old)) = (request.operation, request.old)
            && role_ref(old) != wanted
        {
            let value = object.get("roleRef").map(|v| v.to_string()).unwrap_or_default();
            return Err(field_error(request, "FieldValueInvalid", "roleRef", format!("Invalid value: {}: cannot change roleRef", go_quote(&value))));
        }
        let cluster_binding = request.resource.kind == "ClusterRoleBinding";
        let kind_ok = match wanted.kind.as_str() {
            "ClusterRole" => true,
            "Role" => !cluster_binding,
            _ => false,
        };
        if !kind_ok {
            let supported = if cluster_binding { "\"ClusterRole\"" } else { "\"ClusterRole\", \"Role\"" };
            return Err(field_error(request, "FieldValueNotSupported", "roleRef.kind", format!("Unsupported value: {}: supported values: {supported}", go_quote(&wanted.kind))));
        }
        if wanted.api_group != RBAC_GROUP {
            let message = format!("Unsupported value: {}: supported values: \"{RBAC_GROUP}\"", go_quote(&wanted.api_group));
            return Err(field_error(request, "FieldValueNotSupported", "roleRef.apiGroup", message));
        }
        if wanted.name.is_empty() {
            return Err(field_error(request, "FieldValueRequired", "roleRef.name", "Required value".into()));
        }
        let Some(user) = request.user.filter(|u| !exempt(Some(u))) else { return Ok(()) };
        if request.operation == Operation::Update && request.old.is_some_and(|old| role_ref(old) == wanted) {
            return Ok(());
        }
        let namespace = request.namespace.unwrap_or_default();
        let role_plural = if wanted.kind == "Role" { "roles" } else { "clusterroles" };
        if may(state, user, "bind", role_plural, namespace, &wanted.name) {
            return Ok(());
        }
        let rules = state.authorizer.snapshot().role_rules(&wanted, namespace).map_err(ApiError::bad_request)?;
        confirm_no_escalation(state, user, namespace, &rules, (&request.resource.plural, request.name))
    }
}

impl AdmissionHook for EscalationCheck {
    fn name(&self) -> &str {
        "RBACEscalation"
    }

    fn validate<'a>(&'a self, state: &'a AppState, request: &'a AdmissionRequest<'a>, object: &'a Value) -> HookFuture<'a> {
        Box::pin(async move {
            if request.resource.group != RBAC_GROUP || request.operation == Operation::Delete {
                return Ok(());
            }
            match request.resource.kind.as_str() {
                "Role" | "ClusterRole" => Self::check_role(state, request, object),
                "RoleBinding" | "ClusterRoleBinding" => Self::check_binding(state, request, object),
                _ => Ok(()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_rules_are_listed_compactly_as_kubernetes_does() {
        let grants = vec![
            PolicyRule::resources(&["get"], &[""], &["secrets"]),
            PolicyRule::resources(&["list"], &[""], &["secrets"]),
            PolicyRule::urls(&["get"], &["/metrics"]),
        ];
        let lines: Vec<String> = compact_rules(grants).iter().map(compact).collect();
        assert_eq!(lines, ["{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"list\"]}", "{NonResourceURLs:[\"/metrics\"], Verbs:[\"get\"]}"]);
        assert_eq!(go_list(&["app-team".into(), "system:authenticated".into()]), "[\"app-team\" \"system:authenticated\"]");
    }
}
