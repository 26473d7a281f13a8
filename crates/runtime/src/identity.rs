//! Who a controller acts as. Crossplane's components run under identities of their own (the
//! core as the ServiceAccount `crossplane`, the RBAC manager as `rbac-manager`, each provider
//! as its revision's ServiceAccount), so what they may read and write is what RBAC grants
//! those accounts. Where the API server runs in the same process, [`Clients`] hands out
//! in-process clients acting as such an identity; against another API server each process
//! acts as whoever its kubeconfig names.

use crate::Runtime;
use crate::client::Kube;

/// The namespace Crossplane's own ServiceAccounts live in.
pub const SYSTEM_NAMESPACE: &str = "crossplane-system";

/// A user as the API server authenticates it: a name and groups.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// The user name (`system:serviceaccount:<namespace>:<name>` for a ServiceAccount).
    pub username: String,
    /// The groups.
    pub groups: Vec<String>,
}

impl Identity {
    /// A ServiceAccount, with the groups Kubernetes gives every ServiceAccount token's user.
    pub fn service_account(namespace: &str, name: &str) -> Self {
        Identity {
            username: service_account_user(namespace, name),
            groups: vec!["system:serviceaccounts".into(), format!("system:serviceaccounts:{namespace}"), "system:authenticated".into()],
        }
    }
}

/// `system:serviceaccount:<namespace>:<name>`.
pub fn service_account_user(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// Makes clients of the control plane's API acting as a given identity.
pub trait Clients: Send + Sync {
    /// A client whose every request is authenticated as `identity`.
    fn client_as(&self, identity: &Identity) -> kube::Client;
}

impl Runtime {
    /// This runtime with its requests made by `client` (another identity); the watches and
    /// metrics stay shared, so informers are not duplicated per identity.
    pub fn acting_as(&self, client: kube::Client) -> Runtime {
        Runtime { kube: Kube::new(client), watches: self.watches.clone(), metrics: self.metrics.clone() }
    }
}

/// The verbs Crossplane's core needs on a kind it composes: reading it (the realtime
/// watches list and watch it), applying, updating and deleting it.
pub const COMPOSE_VERBS: [&str; 7] = ["get", "list", "watch", "create", "update", "patch", "delete"];

impl Kube {
    /// Whether this client's user may `verb` a resource (`namespace` none: every namespace,
    /// or a cluster-scoped kind), by a SelfSubjectAccessReview: the API server's own RBAC
    /// evaluation, which every authenticated user may ask for.
    pub async fn can_i(&self, verb: &str, group: &str, resource: &str, namespace: Option<&str>) -> Result<bool, crate::client::ApiError> {
        let kind = crate::kinds::Kind::new("authorization.k8s.io", "v1", "SelfSubjectAccessReview", "selfsubjectaccessreviews", false);
        let review = serde_json::json!({
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"verb": verb, "group": group, "resource": resource, "namespace": namespace.unwrap_or_default()}},
        });
        let answer = self.create(&kind, &review).await?;
        Ok(answer.pointer("/status/allowed").and_then(serde_json::Value::as_bool).unwrap_or(false))
    }

    /// The user this client's requests are authenticated as (a SelfSubjectReview).
    pub async fn whoami(&self) -> Result<String, crate::client::ApiError> {
        let kind = crate::kinds::Kind::new("authentication.k8s.io", "v1", "SelfSubjectReview", "selfsubjectreviews", false);
        let answer = self.create(&kind, &serde_json::json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})).await?;
        Ok(answer.pointer("/status/userInfo/username").and_then(serde_json::Value::as_str).unwrap_or_default().to_string())
    }

    /// Which of `verbs` this client's user may not use on a kind in `namespace`; when any,
    /// the refusal worded as Crossplane's `RoleBasedAccessControl` event words it:
    /// `<user> is not allowed to [get, list] resource <plural>.<group>/<version> in namespace <ns>`
    /// (`<plural>/<version>` for the core group).
    pub async fn access_denied(&self, kind: &crate::kinds::Kind, namespace: Option<&str>, verbs: &[&str]) -> Result<Option<String>, crate::client::ApiError> {
        let mut denied = Vec::new();
        for verb in verbs {
            if !self.can_i(verb, &kind.gvk.group, &kind.plural, namespace).await? {
                denied.push(*verb);
            }
        }
        if denied.is_empty() {
            return Ok(None);
        }
        let user = self.whoami().await?;
        Ok(Some(denied_message(&user, kind, namespace, &denied)))
    }
}

/// Crossplane's wording of what a user may not do to a kind.
pub fn denied_message(user: &str, kind: &crate::kinds::Kind, namespace: Option<&str>, denied: &[&str]) -> String {
    let gvk = &kind.gvk;
    let resource = if gvk.group.is_empty() { format!("{}/{}", kind.plural, gvk.version) } else { format!("{}.{}/{}", kind.plural, gvk.group, gvk.version) };
    let mut message = format!("{user} is not allowed to [{}] resource {resource}", denied.join(", "));
    if let Some(namespace) = namespace.filter(|n| !n.is_empty()) {
        message.push_str(&format!(" in namespace {namespace}"));
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::Kind;

    #[test]
    fn refusals_are_worded_as_crossplanes() {
        let namespaces = Kind::new("", "v1", "Namespace", "namespaces", false);
        assert_eq!(
            denied_message("system:serviceaccount:crossplane-system:crossplane", &namespaces, None, &["get", "create"]),
            "system:serviceaccount:crossplane-system:crossplane is not allowed to [get, create] resource namespaces/v1"
        );
        let projects = Kind::new("argoproj.io", "v1alpha1", "AppProject", "appprojects", true);
        assert_eq!(
            denied_message("u", &projects, Some("argocd"), &["patch"]),
            "u is not allowed to [patch] resource appprojects.argoproj.io/v1alpha1 in namespace argocd"
        );
    }

    #[test]
    fn service_accounts_have_kubernetes_groups() {
        let identity = Identity::service_account("crossplane-system", "crossplane");
        assert_eq!(identity.username, "system:serviceaccount:crossplane-system:crossplane");
        assert_eq!(identity.groups, ["system:serviceaccounts", "system:serviceaccounts:crossplane-system", "system:authenticated"]);
    }
}
