//! RBAC's policy rules, subjects and role references, and how a rule matches a request:
//! `rbac.authorization.k8s.io/v1` semantics, pure and unit-tested.

use serde::{Deserialize, Serialize};

use super::Attributes;

/// The wildcard of every rule field.
pub const ALL: &str = "*";

/// One rule of a Role or ClusterRole (`PolicyRule`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRule {
    /// Verbs allowed (`get`, `list`, ..., or `*`).
    #[serde(default)]
    pub verbs: Vec<String>,
    /// API groups the resources are in (`""` is the core group).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_groups: Vec<String>,
    /// Resources (`secrets`, `pods/log`, `*/status`, `*`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    /// Names the rule is limited to; empty means every name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_names: Vec<String>,
    /// Non-resource URL paths (`/healthz`, `/apis/*`); only in ClusterRoles.
    #[serde(default, rename = "nonResourceURLs", skip_serializing_if = "Vec::is_empty")]
    pub non_resource_urls: Vec<String>,
}

fn has(list: &[String], value: &str) -> bool {
    list.iter().any(|item| item == value)
}

fn has_or_all(list: &[String], value: &str) -> bool {
    list.iter().any(|item| item == ALL || item == value)
}

impl PolicyRule {
    /// A rule over resources.
    pub fn resources(verbs: &[&str], groups: &[&str], resources: &[&str]) -> Self {
        let own = |list: &[&str]| list.iter().map(|s| s.to_string()).collect();
        PolicyRule { verbs: own(verbs), api_groups: own(groups), resources: own(resources), ..Default::default() }
    }

    /// A rule over non-resource URLs.
    pub fn urls(verbs: &[&str], urls: &[&str]) -> Self {
        let own = |list: &[&str]| list.iter().map(|s| s.to_string()).collect();
        PolicyRule { verbs: own(verbs), non_resource_urls: own(urls), ..Default::default() }
    }

    /// Whether the rule allows a request with `attributes`.
    pub fn allows(&self, attributes: &Attributes) -> bool {
        if !has_or_all(&self.verbs, &attributes.verb) {
            return false;
        }
        match &attributes.resource {
            Some(r) => {
                has_or_all(&self.api_groups, &r.group)
                    && self.matches_resource(&r.resource, &r.subresource)
                    && (self.resource_names.is_empty() || (!r.name.is_empty() && has(&self.resource_names, &r.name)))
            }
            None => self.non_resource_urls.iter().any(|url| url_matches(url, &attributes.path)),
        }
    }

    /// `resources` matching: the exact `resource[/subresource]`, `*`, or `*/subresource`.
    fn matches_resource(&self, resource: &str, subresource: &str) -> bool {
        self.resources.iter().any(|rule| {
            if rule == ALL {
                return true;
            }
            if subresource.is_empty() {
                return rule == resource;
            }
            match rule.split_once('/') {
                Some((r, s)) => (r == resource || r == ALL) && s == subresource,
                None => false,
            }
        })
    }
}

/// A non-resource URL rule: the path itself, `*`, or a prefix ending in `*`.
fn url_matches(rule: &str, path: &str) -> bool {
    rule == ALL || rule == path || rule.strip_suffix('*').is_some_and(|prefix| path.starts_with(prefix))
}

/// Whether `owner`'s rules allow everything `servant`'s rules allow: each servant rule is split
/// into single (group, resource, verb, name) or (URL, verb) grants, and each must be allowed
/// by some owner rule. Returns the grants that are not (empty when covered).
pub fn uncovered(owner: &[PolicyRule], servant: &[PolicyRule]) -> Vec<PolicyRule> {
    let mut missing = Vec::new();
    for rule in servant {
        for grant in split(rule) {
            if !owner.iter().any(|o| covers(o, &grant)) {
                missing.push(grant);
            }
        }
    }
    missing
}

/// Splits a rule into rules of one verb and one group/resource/name or URL each.
fn split(rule: &PolicyRule) -> Vec<PolicyRule> {
    let mut out = Vec::new();
    for verb in &rule.verbs {
        for group in &rule.api_groups {
            for resource in &rule.resources {
                if rule.resource_names.is_empty() {
                    out.push(PolicyRule { verbs: vec![verb.clone()], api_groups: vec![group.clone()], resources: vec![resource.clone()], ..Default::default() });
                }
                for name in &rule.resource_names {
                    out.push(PolicyRule {
                        verbs: vec![verb.clone()],
                        api_groups: vec![group.clone()],
                        resources: vec![resource.clone()],
                        resource_names: vec![name.clone()],
                        ..Default::default()
                    });
                }
            }
        }
        for url in &rule.non_resource_urls {
            out.push(PolicyRule { verbs: vec![verb.clone()], non_resource_urls: vec![url.clone()], ..Default::default() });
        }
    }
    out
}

/// Whether `owner` allows the single grant `grant` (as split by [`split`]).
fn covers(owner: &PolicyRule, grant: &PolicyRule) -> bool {
    let verb_ok = grant.verbs.iter().all(|v| has_or_all(&owner.verbs, v));
    if !verb_ok {
        return false;
    }
    if let Some(url) = grant.non_resource_urls.first() {
        return owner.non_resource_urls.iter().any(|o| url_matches(o, url));
    }
    let group_ok = grant.api_groups.iter().all(|g| has_or_all(&owner.api_groups, g));
    let resource_ok = grant.resources.iter().all(|r| {
        has_or_all(&owner.resources, r)
            || r.split_once('/').is_some_and(|(_, sub)| owner.resources.iter().any(|o| o == &format!("*/{sub}")))
    });
    let name_ok = owner.resource_names.is_empty() || grant.resource_names.iter().all(|n| has(&owner.resource_names, n)) && !grant.resource_names.is_empty();
    group_ok && resource_ok && name_ok
}

/// Who a binding grants its role to (`Subject`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Subject {
    /// `User`, `Group` or `ServiceAccount`.
    #[serde(default)]
    pub kind: String,
    /// The user, group or ServiceAccount name.
    #[serde(default)]
    pub name: String,
    /// A ServiceAccount's namespace (a RoleBinding's own when empty).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// `rbac.authorization.k8s.io` for users and groups, `""` for ServiceAccounts.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_group: String,
}

impl Subject {
    /// Whether the subject names `user` (for a binding in `binding_namespace`).
    pub fn applies_to(&self, user: &crate::authn::UserInfo, binding_namespace: &str) -> bool {
        match self.kind.as_str() {
            "User" => self.name == user.username,
            "Group" => user.in_group(&self.name),
            "ServiceAccount" => {
                let namespace = if self.namespace.is_empty() { binding_namespace } else { &self.namespace };
                user.username.strip_prefix(super::SERVICE_ACCOUNT_PREFIX).is_some_and(|rest| {
                    rest.split_once(':').is_some_and(|(ns, name)| ns == namespace && name == self.name)
                })
            }
            _ => false,
        }
    }
}

/// The role a binding grants (`RoleRef`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoleRef {
    /// `rbac.authorization.k8s.io`.
    #[serde(default)]
    pub api_group: String,
    /// `Role` or `ClusterRole`.
    #[serde(default)]
    pub kind: String,
    /// The role's name.
    #[serde(default)]
    pub name: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authn::UserInfo;
    use crate::authz::{Attributes, ResourceAttributes};

    fn request(verb: &str, group: &str, resource: &str, subresource: &str, name: &str) -> Attributes {
        Attributes {
            user: UserInfo::new("alice", ["app-team"]),
            verb: verb.into(),
            resource: Some(ResourceAttributes {
                namespace: "team-a".into(),
                group: group.into(),
                version: "v1".into(),
                resource: resource.into(),
                subresource: subresource.into(),
                name: name.into(),
            }),
            path: String::new(),
        }
    }

    fn path(verb: &str, path: &str) -> Attributes {
        Attributes { user: UserInfo::new("alice", ["app-team"]), verb: verb.into(), resource: None, path: path.into() }
    }

    #[test]
    fn rules_match_verbs_groups_resources_subresources_and_names() {
        let rule = PolicyRule::resources(&["get", "list"], &[""], &["secrets", "pods/log"]);
        assert!(rule.allows(&request("get", "", "secrets", "", "s")));
        assert!(rule.allows(&request("list", "", "secrets", "", "")));
        assert!(!rule.allows(&request("delete", "", "secrets", "", "s")));
        assert!(!rule.allows(&request("get", "apps", "secrets", "", "s")));
        assert!(!rule.allows(&request("get", "", "secrets", "status", "s")), "a subresource needs its own rule");
        assert!(rule.allows(&request("get", "", "pods", "log", "p")));
        assert!(!rule.allows(&request("get", "", "pods", "", "p")));

        let status = PolicyRule::resources(&["update"], &["*"], &["*/status"]);
        assert!(status.allows(&request("update", "example.org", "widgets", "status", "w")));
        assert!(!status.allows(&request("update", "example.org", "widgets", "", "w")));

        let mut named = PolicyRule::resources(&["*"], &[""], &["configmaps"]);
        named.resource_names = vec!["settings".into()];
        assert!(named.allows(&request("update", "", "configmaps", "", "settings")));
        assert!(!named.allows(&request("update", "", "configmaps", "", "other")));
        assert!(!named.allows(&request("list", "", "configmaps", "", "")), "a list names no object");
        assert!(!named.allows(&request("create", "", "configmaps", "", "")));
    }

    #[test]
    fn url_rules_match_paths_and_prefixes() {
        let rule = PolicyRule::urls(&["get"], &["/healthz", "/apis/*"]);
        assert!(rule.allows(&path("get", "/healthz")));
        assert!(rule.allows(&path("get", "/apis/example.org/v1")));
        assert!(!rule.allows(&path("get", "/metrics")));
        assert!(!rule.allows(&path("post", "/healthz")));
        assert!(!rule.allows(&request("get", "", "healthz", "", "")), "URL rules grant no resources");
        assert!(PolicyRule::urls(&["*"], &["*"]).allows(&path("get", "/anything")));
    }

    #[test]
    fn coverage_finds_grants_the_owner_lacks() {
        let admin = [PolicyRule::resources(&["*"], &["*"], &["*"]), PolicyRule::urls(&["*"], &["*"])];
        let edit = [PolicyRule::resources(&["get", "create"], &[""], &["configmaps", "secrets"])];
        assert!(uncovered(&admin, &edit).is_empty());
        let owner = [PolicyRule::resources(&["get", "create"], &[""], &["configmaps"])];
        let missing = uncovered(&owner, &edit);
        assert_eq!(missing.len(), 2);
        assert!(missing.iter().all(|m| m.resources == ["secrets"]));
        // A rule limited to names covers only those names.
        let mut named = PolicyRule::resources(&["get"], &[""], &["secrets"]);
        named.resource_names = vec!["a".into()];
        assert!(!uncovered(&[named.clone()], &[PolicyRule::resources(&["get"], &[""], &["secrets"])]).is_empty());
        assert!(uncovered(&[PolicyRule::resources(&["get"], &[""], &["secrets"])], &[named]).is_empty());
        assert!(uncovered(&[PolicyRule::urls(&["get"], &["/apis/*"])], &[PolicyRule::urls(&["get"], &["/apis/x"])]).is_empty());
        assert!(!uncovered(&[PolicyRule::urls(&["get"], &["/apis"])], &[PolicyRule::urls(&["get"], &["/apis/*"])]).is_empty());
    }

    #[test]
    fn subjects_name_users_groups_and_service_accounts() {
        let alice = UserInfo::new("alice", ["app-team"]);
        let user = |kind: &str, name: &str| Subject { kind: kind.into(), name: name.into(), ..Default::default() };
        assert!(user("User", "alice").applies_to(&alice, ""));
        assert!(!user("User", "bob").applies_to(&alice, ""));
        assert!(user("Group", "app-team").applies_to(&alice, ""));
        assert!(user("Group", "system:authenticated").applies_to(&alice, ""));
        let robot = UserInfo::new("system:serviceaccount:team-a:robot", ["system:serviceaccounts"]);
        assert!(user("ServiceAccount", "robot").applies_to(&robot, "team-a"));
        assert!(!user("ServiceAccount", "robot").applies_to(&robot, "team-b"));
        let elsewhere = Subject { namespace: "team-a".into(), ..user("ServiceAccount", "robot") };
        assert!(elsewhere.applies_to(&robot, "team-b"));
    }
}
