//! Authorization: whether the user a request is from may do what it asks, by Kubernetes' RBAC
//! (`rbac.authorization.k8s.io/v1` Roles, ClusterRoles and their bindings).
//!
//! The HTTP layer's `authorize` middleware turns each authenticated request into
//! [`Attributes`] (verb, group, resource, subresource, namespace, name, or a non-resource path,
//! as kube-apiserver's request-info reads them) and asks the [`Authorizer`]; a refusal is a 403
//! Status worded as Kubernetes words it ([`forbidden`]). `system:masters` is allowed everything
//! without looking at any rule, as kube-apiserver's privileged-group authorizer does; that is
//! the admin credential and the in-process controllers.
//!
//! Files: `rules.rs` (rule matching and coverage), `snapshot.rs` (every role and binding,
//! indexed, rebuilt when one changes), `bootstrap.rs` (the roles every cluster starts with),
//! `escalation.rs` (no one grants what they do not hold), `reviews.rs` (SubjectAccessReview
//! and friends), `impersonation.rs` (`Impersonate-*` headers).

pub mod bootstrap;
pub mod escalation;
pub mod impersonation;
pub mod reviews;
pub mod rules;
pub mod snapshot;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use axum::http::Method;

use crate::authn::{MASTERS, UserInfo};
use crate::cache::WatchCache;
use crate::status::{ApiError, Reason, go_quote, qualified};
pub use rules::{PolicyRule, RoleRef, Subject};
pub use snapshot::Snapshot;

/// The group of every RBAC kind.
pub const RBAC_GROUP: &str = "rbac.authorization.k8s.io";
/// Where RBAC objects live in the store.
pub const RBAC_PREFIX: &str = "/registry/rbac.authorization.k8s.io/";
/// The user-name prefix of ServiceAccounts (`system:serviceaccount:<namespace>:<name>`).
pub const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// What a request asks to do to a resource (kube-apiserver's resource attributes).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResourceAttributes {
    /// The namespace ("" for cluster-scoped requests).
    pub namespace: String,
    /// The API group ("" for core).
    pub group: String,
    /// The API version.
    pub version: String,
    /// The resource (plural).
    pub resource: String,
    /// The subresource ("" for none).
    pub subresource: String,
    /// The object's name ("" for collections).
    pub name: String,
}

/// Who asks to do what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attributes {
    /// Who asks.
    pub user: UserInfo,
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`, or
    /// another verb (`impersonate`, `bind`, `escalate`); for paths the lowercase HTTP method.
    pub verb: String,
    /// The resource, for resource requests.
    pub resource: Option<ResourceAttributes>,
    /// The path, for non-resource requests.
    pub path: String,
}

impl Attributes {
    /// A resource request's attributes.
    pub fn for_resource(user: UserInfo, verb: &str, resource: ResourceAttributes) -> Self {
        Attributes { user, verb: verb.to_string(), resource: Some(resource), path: String::new() }
    }

    /// The attributes of an HTTP request, read from its method, path and query the way
    /// kube-apiserver's request-info does: `/api/<v>/...` and `/apis/<g>/<v>/...` past the
    /// version are resource requests, everything else (discovery included) is a path.
    pub fn from_request(user: UserInfo, method: &Method, path: &str, query: Option<&str>) -> Self {
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        let (group, version, rest) = match parts.as_slice() {
            ["api", version, rest @ ..] if !rest.is_empty() => ("", *version, rest),
            ["apis", group, version, rest @ ..] if !rest.is_empty() => (*group, *version, rest),
            _ => {
                let verb = method.as_str().to_ascii_lowercase();
                return Attributes { user, verb, resource: None, path: path.to_string() };
            }
        };
        let mut resource = ResourceAttributes { group: group.to_string(), version: version.to_string(), ..Default::default() };
        let mut rest: &[&str] = rest;
        // `/namespaces/<ns>/...`: the namespace; `/namespaces/<ns>` itself and its `status` and
        // `finalize` are the Namespace object, in its own namespace.
        if let ["namespaces", namespace, tail @ ..] = rest {
            resource.namespace = namespace.to_string();
            if !tail.is_empty() && !matches!(tail, ["status" | "finalize"]) {
                rest = tail;
            }
        }
        resource.resource = rest.first().map(|s| s.to_string()).unwrap_or_default();
        resource.name = rest.get(1).map(|s| s.to_string()).unwrap_or_default();
        resource.subresource = rest.get(2).map(|s| s.to_string()).unwrap_or_default();
        let pairs = query.map(crate::http::query::form_pairs).unwrap_or_default();
        let param = |name: &str| pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
        let watching = matches!(param("watch"), Some("true" | "1"));
        let verb = match *method {
            Method::POST => "create",
            Method::GET | Method::HEAD if watching => "watch",
            Method::GET | Method::HEAD if resource.name.is_empty() => "list",
            Method::GET | Method::HEAD => "get",
            Method::PUT => "update",
            Method::PATCH => "patch",
            Method::DELETE if resource.name.is_empty() => "deletecollection",
            Method::DELETE => "delete",
            _ => "",
        };
        // A list or watch of one name (`fieldSelector=metadata.name=x`) is about that object,
        // so rules limited to resourceNames apply to it.
        if matches!(verb, "list" | "watch")
            && resource.name.is_empty()
            && let Some(selector) = param("fieldSelector")
            && let Some(name) = selector.strip_prefix("metadata.name=").or_else(|| selector.strip_prefix("metadata.name=="))
            && !name.contains(',')
        {
            resource.name = name.to_string();
        }
        Attributes::for_resource(user, verb, resource)
    }
}

/// An authorization decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Allowed.
    Allow,
    /// Not allowed; the reason is empty or names what could not be resolved (a binding's
    /// missing role), as RBAC's reason does.
    Deny(String),
}

/// Kubernetes' words for a refusal: `User "alice" cannot list resource "secrets" in API group
/// "" in the namespace "team-b"` (or `at the cluster scope`, or `cannot get path "/metrics"`).
pub fn forbidden_message(attributes: &Attributes) -> String {
    let user = go_quote(&attributes.user.username);
    let Some(r) = &attributes.resource else {
        return format!("User {user} cannot {} path {}", attributes.verb, go_quote(&attributes.path));
    };
    let resource = if r.subresource.is_empty() { r.resource.clone() } else { format!("{}/{}", r.resource, r.subresource) };
    let scope = if r.namespace.is_empty() { "at the cluster scope".to_string() } else { format!("in the namespace {}", go_quote(&r.namespace)) };
    format!("User {user} cannot {} resource {} in API group {} {scope}", attributes.verb, go_quote(&resource), go_quote(&r.group))
}

/// The 403 Status for a refused request, as kube-apiserver's: `<resource>[.<group>] ["<name>"]
/// is forbidden: <message>[: <reason>]`, `forbidden: ...` for paths.
pub fn forbidden(attributes: &Attributes, reason: &str) -> ApiError {
    let mut message = forbidden_message(attributes);
    if !reason.is_empty() {
        message = format!("{message}: {reason}");
    }
    match &attributes.resource {
        None => ApiError::new(Reason::Forbidden, format!("forbidden: {message}")).with_details("", "", ""),
        Some(r) => {
            let what = qualified(&r.group, &r.resource);
            let head = if r.name.is_empty() { what } else { format!("{what} {}", go_quote(&r.name)) };
            ApiError::new(Reason::Forbidden, format!("{head} is forbidden: {message}")).with_details(&r.group, &r.resource, &r.name)
        }
    }
}

/// Decides requests by RBAC over the roles and bindings in the watch cache.
pub struct Authorizer {
    cache: Arc<WatchCache>,
    /// The revision of the last RBAC change the cache applied.
    changed: Arc<AtomicU64>,
    /// The rules as of `snapshot.built_for`.
    snapshot: RwLock<Arc<Snapshot>>,
    /// One rebuild at a time.
    rebuilding: Mutex<()>,
}

impl Authorizer {
    /// An authorizer following the RBAC objects of `cache`.
    pub fn new(cache: Arc<WatchCache>) -> Self {
        let changed = cache.track(RBAC_PREFIX);
        Authorizer { cache, changed, snapshot: RwLock::new(Arc::new(Snapshot::default())), rebuilding: Mutex::new(()) }
    }

    /// The roles and bindings as the cache holds them now.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        let wanted = self.changed.load(Ordering::Acquire);
        let current = self.snapshot.read().unwrap_or_else(|p| p.into_inner()).clone();
        if current.built_for == wanted {
            return current;
        }
        let _one = self.rebuilding.lock().unwrap_or_else(|p| p.into_inner());
        let current = self.snapshot.read().unwrap_or_else(|p| p.into_inner()).clone();
        if current.built_for == wanted {
            return current;
        }
        let fresh = Arc::new(Snapshot::build(&self.cache, wanted));
        *self.snapshot.write().unwrap_or_else(|p| p.into_inner()) = fresh.clone();
        fresh
    }

    /// Decides a request by the rules as the cache holds them now.
    pub fn decide(&self, attributes: &Attributes) -> Decision {
        if attributes.user.in_group(MASTERS) {
            return Decision::Allow;
        }
        self.snapshot().decide(attributes)
    }

    /// Decides a request; a refusal is decided again once the cache holds every acknowledged
    /// write, so a binding a client has just been told is created applies to its next request.
    pub async fn authorize(&self, attributes: &Attributes) -> Decision {
        let first = self.decide(attributes);
        if first == Decision::Allow {
            return first;
        }
        let before = self.changed.load(Ordering::Acquire);
        if self.cache.sync().await.is_err() || self.changed.load(Ordering::Acquire) == before {
            return first;
        }
        self.decide(attributes)
    }

    /// Why an allowed request is allowed (see [`Snapshot::explain`]).
    pub fn explain(&self, attributes: &Attributes) -> String {
        if attributes.user.in_group(MASTERS) {
            return String::new();
        }
        self.snapshot().explain(attributes)
    }

    /// Every rule that applies to `user` in `namespace` ("" for cluster-wide rules only), and
    /// the bindings whose roles could not be found.
    pub fn rules_for(&self, user: &UserInfo, namespace: &str) -> (Vec<PolicyRule>, Vec<String>) {
        if user.in_group(MASTERS) {
            return (vec![PolicyRule::resources(&["*"], &["*"], &["*"]), PolicyRule::urls(&["*"], &["*"])], Vec::new());
        }
        self.snapshot().rules_for(user, namespace)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alice() -> UserInfo {
        UserInfo::new("alice", ["app-team"])
    }

    #[test]
    fn request_attributes_read_like_kube_apiservers() {
        let a = Attributes::from_request(alice(), &Method::GET, "/api/v1/namespaces/team-b/secrets", None);
        assert_eq!(a.verb, "list");
        let r = a.resource.unwrap();
        assert_eq!((r.namespace.as_str(), r.group.as_str(), r.resource.as_str(), r.name.as_str()), ("team-b", "", "secrets", ""));

        let a = Attributes::from_request(alice(), &Method::GET, "/apis/example.org/v1/namespaces/a/widgets", Some("watch=true&labelSelector=x%3Dy"));
        assert_eq!(a.verb, "watch");
        let a = Attributes::from_request(alice(), &Method::GET, "/api/v1/namespaces/a/configmaps", Some("fieldSelector=metadata.name%3Dsettings"));
        assert_eq!((a.verb.as_str(), a.resource.unwrap().name.as_str()), ("list", "settings"));

        let a = Attributes::from_request(alice(), &Method::PUT, "/apis/example.org/v1/widgets/w/status", None);
        let r = a.resource.unwrap();
        assert_eq!((a.verb.as_str(), r.namespace.as_str(), r.name.as_str(), r.subresource.as_str()), ("update", "", "w", "status"));

        let a = Attributes::from_request(alice(), &Method::GET, "/api/v1/namespaces/team-b", None);
        let r = a.resource.unwrap();
        assert_eq!((a.verb.as_str(), r.namespace.as_str(), r.resource.as_str(), r.name.as_str()), ("get", "team-b", "namespaces", "team-b"));
        let a = Attributes::from_request(alice(), &Method::PUT, "/api/v1/namespaces/x/finalize", None);
        let r = a.resource.unwrap();
        assert_eq!((r.resource.as_str(), r.name.as_str(), r.subresource.as_str()), ("namespaces", "x", "finalize"));

        assert_eq!(Attributes::from_request(alice(), &Method::DELETE, "/api/v1/namespaces/a/configmaps", None).verb, "deletecollection");
        assert_eq!(Attributes::from_request(alice(), &Method::POST, "/api/v1/namespaces/a/configmaps", None).verb, "create");
        let a = Attributes::from_request(alice(), &Method::GET, "/apis/example.org/v1", None);
        assert_eq!((a.verb.as_str(), a.path.as_str(), a.resource), ("get", "/apis/example.org/v1", None));
    }

    #[test]
    fn refusals_are_worded_as_kubernetes_words_them() {
        let list = Attributes::from_request(alice(), &Method::GET, "/api/v1/namespaces/team-b/secrets", None);
        let status = forbidden(&list, "").to_status();
        assert_eq!(
            status["message"],
            "secrets is forbidden: User \"alice\" cannot list resource \"secrets\" in API group \"\" in the namespace \"team-b\""
        );
        assert_eq!((status["code"].as_u64(), status["reason"].as_str()), (Some(403), Some("Forbidden")));
        assert_eq!(status["details"]["kind"], "secrets");

        let get = Attributes::from_request(alice(), &Method::GET, "/apis/apiextensions.crossplane.io/v1/compositions/c", None);
        assert_eq!(
            forbidden(&get, "").message,
            "compositions.apiextensions.crossplane.io \"c\" is forbidden: User \"alice\" cannot get resource \"compositions\" in API group \"apiextensions.crossplane.io\" at the cluster scope"
        );
        let status = Attributes::from_request(alice(), &Method::PATCH, "/apis/example.org/v1/namespaces/a/widgets/w/status", None);
        assert!(forbidden(&status, "RBAC: role.rbac.authorization.k8s.io \"gone\" not found").message.ends_with(
            "cannot patch resource \"widgets/status\" in API group \"example.org\" in the namespace \"a\": RBAC: role.rbac.authorization.k8s.io \"gone\" not found"
        ));
        let path = Attributes::from_request(alice(), &Method::GET, "/metrics", None);
        assert_eq!(forbidden(&path, "").message, "forbidden: User \"alice\" cannot get path \"/metrics\"");
    }
}
