//! `audit.k8s.io/v1` `Policy`: which level a request is logged at (the first rule that matches
//! decides; none matching means `None`) and which stages are left out.

use serde::Deserialize;

/// How much of a request is logged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
pub enum Level {
    /// Nothing.
    None,
    /// Who did what to which object, and the outcome.
    Metadata,
    /// Metadata and the request body.
    Request,
    /// Metadata, the request and the response bodies.
    RequestResponse,
}

impl Level {
    /// The level's name in events.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::None => "None",
            Level::Metadata => "Metadata",
            Level::Request => "Request",
            Level::RequestResponse => "RequestResponse",
        }
    }
}

/// `resources[]` of a rule.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupResources {
    /// API group (`""` core).
    #[serde(default)]
    pub group: String,
    /// Resources (`pods`, `pods/log`, `*/status`, `*`); empty means all.
    #[serde(default)]
    pub resources: Vec<String>,
    /// Object names; empty means all.
    #[serde(default)]
    pub resource_names: Vec<String>,
}

/// One rule.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    /// The level of requests this rule matches.
    pub level: Level,
    /// User names; empty means all.
    #[serde(default)]
    pub users: Vec<String>,
    /// Groups; empty means all.
    #[serde(default)]
    pub user_groups: Vec<String>,
    /// Verbs; empty means all.
    #[serde(default)]
    pub verbs: Vec<String>,
    /// Resources; empty means all (resource requests only when set).
    #[serde(default)]
    pub resources: Vec<GroupResources>,
    /// Namespaces (`""` for cluster-scoped); empty means all.
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// Non-resource URL paths (`/healthz*`); empty means all (non-resource requests only when set).
    #[serde(default, rename = "nonResourceURLs")]
    pub non_resource_urls: Vec<String>,
    /// Stages not logged for requests of this rule.
    #[serde(default)]
    pub omit_stages: Vec<String>,
}

/// A policy file.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    /// `audit.k8s.io/v1`.
    #[serde(default)]
    pub api_version: String,
    /// `Policy`.
    #[serde(default)]
    pub kind: String,
    /// The rules, first match wins.
    #[serde(default)]
    pub rules: Vec<Rule>,
    /// Stages never logged.
    #[serde(default)]
    pub omit_stages: Vec<String>,
}

/// What a rule is matched against.
#[derive(Clone, Debug, Default)]
pub struct Attributes<'a> {
    /// User name.
    pub user: &'a str,
    /// The user's groups.
    pub groups: &'a [String],
    /// The verb (`get`, `list`, `create`, ...).
    pub verb: &'a str,
    /// For resource requests: group, resource, subresource, namespace, name.
    pub resource: Option<(&'a str, &'a str, &'a str, &'a str, &'a str)>,
    /// The path, for non-resource requests.
    pub path: &'a str,
}

/// Kubernetes' rule (`level: Metadata` for everything) when no policy file is given.
pub fn metadata_for_everything() -> Policy {
    Policy {
        api_version: "audit.k8s.io/v1".into(),
        kind: "Policy".into(),
        rules: vec![Rule {
            level: Level::Metadata,
            users: vec![],
            user_groups: vec![],
            verbs: vec![],
            resources: vec![],
            namespaces: vec![],
            non_resource_urls: vec![],
            omit_stages: vec![],
        }],
        omit_stages: vec![],
    }
}

impl Policy {
    /// Reads a policy file (YAML or JSON).
    pub fn parse(text: &str) -> Result<Policy, String> {
        let policy: Policy = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
        if !policy.api_version.is_empty() && policy.api_version != "audit.k8s.io/v1" {
            return Err(format!("unsupported apiVersion {:?}: want audit.k8s.io/v1", policy.api_version));
        }
        if !policy.kind.is_empty() && policy.kind != "Policy" {
            return Err(format!("unsupported kind {:?}: want Policy", policy.kind));
        }
        for stage in policy.omit_stages.iter().chain(policy.rules.iter().flat_map(|r| &r.omit_stages)) {
            if !matches!(stage.as_str(), "RequestReceived" | "ResponseStarted" | "ResponseComplete" | "Panic") {
                return Err(format!("unknown stage {stage:?} in omitStages"));
            }
        }
        Ok(policy)
    }

    /// The level and the stages left out for a request.
    pub fn decide(&self, attributes: &Attributes<'_>) -> (Level, Vec<String>) {
        for rule in &self.rules {
            if rule_matches(rule, attributes) {
                let mut omit = self.omit_stages.clone();
                omit.extend(rule.omit_stages.iter().cloned());
                return (rule.level, omit);
            }
        }
        (Level::None, Vec::new())
    }
}

fn rule_matches(rule: &Rule, a: &Attributes<'_>) -> bool {
    if !rule.users.is_empty() && !rule.users.iter().any(|u| u == a.user) {
        return false;
    }
    if !rule.user_groups.is_empty() && !rule.user_groups.iter().any(|g| a.groups.contains(g)) {
        return false;
    }
    if !rule.verbs.is_empty() && !rule.verbs.iter().any(|v| v == a.verb) {
        return false;
    }
    match a.resource {
        Some((group, resource, subresource, namespace, name)) => {
            if !rule.non_resource_urls.is_empty() {
                return false;
            }
            if !rule.namespaces.is_empty() && !rule.namespaces.iter().any(|n| n == namespace) {
                return false;
            }
            if rule.resources.is_empty() {
                return true;
            }
            let full = if subresource.is_empty() { resource.to_string() } else { format!("{resource}/{subresource}") };
            rule.resources.iter().any(|gr| {
                gr.group == group
                    && (gr.resources.is_empty()
                        || gr.resources.iter().any(|r| {
                            r == "*" || *r == full || (subresource.is_empty() && r == resource) || r.strip_prefix("*/").is_some_and(|s| s == subresource)
                        }))
                    && (gr.resource_names.is_empty() || gr.resource_names.iter().any(|n| n == name))
            })
        }
        None => {
            if !rule.resources.is_empty() || !rule.namespaces.is_empty() {
                return false;
            }
            rule.non_resource_urls.is_empty()
                || rule.non_resource_urls.iter().any(|p| match p.strip_suffix('*') {
                    Some(prefix) => a.path.starts_with(prefix),
                    None => a.path == p,
                })
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const POLICY: &str = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: None
    users: ["system:kube-proxy"]
  - level: None
    nonResourceURLs: ["/healthz*", "/version"]
  - level: Metadata
    resources: [{group: "", resources: ["secrets", "configmaps"]}]
  - level: Request
    verbs: ["create", "update", "patch"]
    namespaces: ["team-a"]
  - level: RequestResponse
    resources: [{group: "example.com", resources: ["widgets/status"], resourceNames: ["w1"]}]
    omitStages: [ResponseStarted]
  - level: Metadata
"#;

    fn resource<'a>(verb: &'a str, group: &'a str, plural: &'a str, sub: &'a str, ns: &'a str, name: &'a str) -> Attributes<'a> {
        Attributes { user: "alice", groups: &[], verb, resource: Some((group, plural, sub, ns, name)), path: "" }
    }

    #[test]
    fn the_first_matching_rule_decides() {
        let policy = Policy::parse(POLICY).unwrap();
        let level = |a: Attributes<'_>| policy.decide(&a).0;
        assert_eq!(level(Attributes { user: "system:kube-proxy", verb: "get", path: "/api", ..Default::default() }), Level::None);
        assert_eq!(level(Attributes { user: "bob", verb: "get", path: "/healthz/ready", ..Default::default() }), Level::None);
        assert_eq!(level(Attributes { user: "bob", verb: "get", path: "/metrics", ..Default::default() }), Level::Metadata);
        assert_eq!(level(resource("create", "", "secrets", "", "team-a", "s")), Level::Metadata);
        assert_eq!(level(resource("create", "", "pods", "", "team-a", "p")), Level::Request);
        assert_eq!(level(resource("get", "", "pods", "", "team-a", "p")), Level::Metadata);
        assert_eq!(level(resource("update", "example.com", "widgets", "status", "team-b", "w1")), Level::RequestResponse);
        assert_eq!(level(resource("update", "example.com", "widgets", "status", "team-b", "w2")), Level::Metadata);
        let (_, omit) = policy.decide(&resource("update", "example.com", "widgets", "status", "x", "w1"));
        assert_eq!(omit, ["RequestReceived", "ResponseStarted"]);
    }

    #[test]
    fn bad_policies_are_refused() {
        assert!(Policy::parse("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: Loud}]").is_err());
        assert!(Policy::parse("apiVersion: audit.k8s.io/v1beta1\nkind: Policy\nrules: []").is_err());
        assert!(Policy::parse("kind: Policy\nomitStages: [Sometimes]\nrules: []").is_err());
    }
}
