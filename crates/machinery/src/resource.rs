//! The description of one served kind: where it lives in the URL space, in discovery and in the
//! store, its schema, table columns, scale paths and apply types; and the built-in kinds.

use std::sync::Arc;

/// One served resource in one group-version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceDef {
    /// API group ("" for core).
    pub group: String,
    /// Version, e.g. `v1`.
    pub version: String,
    /// Kind, e.g. `ConfigMap`.
    pub kind: String,
    /// Plural resource name used in URLs, e.g. `configmaps`.
    pub plural: String,
    /// Singular name, e.g. `configmap`.
    pub singular: String,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// Short names, e.g. `cm`.
    pub short_names: Vec<String>,
    /// Categories, e.g. `all`.
    pub categories: Vec<String>,
    /// Subresources served, e.g. `status`.
    pub subresources: Vec<String>,
    /// The store identity: objects of resources with the same one share storage.
    pub storage: String,
    /// Whether a PUT without `metadata.resourceVersion` is allowed (built-ins; not CRDs or
    /// custom resources).
    pub unconditional_update: bool,
    /// The CRD that defines this resource (`None` for built-ins).
    pub crd: Option<String>,
    /// The Table columns after `Name`.
    pub columns: Vec<crate::table::PrinterColumn>,
    /// The CRD version's `openAPIV3Schema` (`None` for built-ins).
    pub schema: Option<Arc<serde_json::Value>>,
    /// `schema`, compiled for defaulting, pruning and validation.
    pub validation: Option<CompiledSchema>,
    /// Where the `scale` subresource reads and writes, if the resource has one.
    pub scale: Option<ScalePaths>,
    /// The schema server-side apply merges by, compiled on first use.
    pub apply_types: ApplyTypes,
    /// For a deprecated version: the warning every response carries.
    pub deprecation_warning: Option<String>,
    /// A review kind (TokenReview, SubjectAccessReview, ...): answered on create alone and
    /// never stored, so discovery lists only `create` and every other verb is refused.
    pub create_only: bool,
}

/// The schema server-side apply merges objects of a resource by: the kind's schema, with
/// ObjectMeta's list and map semantics for `metadata` (a CRD's schema says nothing about
/// them). Compiled on first use, so serving a thousand CRDs costs nothing until one is applied.
#[derive(Clone, Debug, Default)]
pub struct ApplyTypes(Arc<std::sync::OnceLock<Option<Arc<crate::schema::Node>>>>);

impl PartialEq for ApplyTypes {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for ApplyTypes {}

impl ApplyTypes {
    /// The root node for `resource` (whose cell this is); `None` when its schema is unusable.
    pub fn root(&self, resource: &ResourceDef) -> Option<Arc<crate::schema::Node>> {
        self.0
            .get_or_init(|| {
                let mut schema = match &resource.schema {
                    Some(schema) => (**schema).clone(),
                    None => crate::openapi::builtin::full_schema(&resource.group, &resource.kind),
                };
                if let Some(properties) = schema.get_mut("properties").and_then(serde_json::Value::as_object_mut) {
                    properties.insert("metadata".into(), crate::openapi::builtin::object_meta_schema());
                }
                crate::schema::Schema::compile_structure(&schema).ok().map(Arc::new)
            })
            .clone()
    }
}

/// The paths of a CRD's `scale` subresource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScalePaths {
    /// `specReplicasPath`, e.g. `.spec.replicas`.
    pub spec_replicas: String,
    /// `statusReplicasPath`, e.g. `.status.replicas`.
    pub status_replicas: Option<String>,
    /// `labelSelectorPath`, e.g. `.status.selector`.
    pub label_selector: Option<String>,
}

/// A compiled schema. It is derived from [`ResourceDef::schema`], so equality of resources is
/// decided by that and compiled schemas always compare equal.
#[derive(Clone, Debug)]
pub struct CompiledSchema(pub Arc<crate::schema::Schema>);

impl PartialEq for CompiledSchema {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for CompiledSchema {}

impl ResourceDef {
    /// `group/version`, or `version` for core.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }

    /// The store key prefix of every object of this resource (all namespaces).
    pub fn prefix(&self) -> String {
        format!("/registry/{}/", self.storage)
    }

    /// The store key prefix of the objects in one namespace.
    pub fn namespace_prefix(&self, namespace: &str) -> String {
        format!("/registry/{}/{namespace}/", self.storage)
    }

    /// The store key of one object.
    pub fn key(&self, namespace: Option<&str>, name: &str) -> String {
        match namespace {
            Some(ns) if self.namespaced => format!("/registry/{}/{ns}/{name}", self.storage),
            _ => format!("/registry/{}/{name}", self.storage),
        }
    }

    /// The verbs discovery lists.
    pub fn verbs(&self) -> Vec<&'static str> {
        if self.create_only {
            return vec!["create"];
        }
        vec!["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
    }
}

/// Builds a built-in resource definition.
fn builtin(group: &str, version: &str, kind: &str, plural: &str, namespaced: bool, short: &[&str]) -> ResourceDef {
    let storage_group = if group.is_empty() { "core" } else { group };
    ResourceDef {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
        plural: plural.into(),
        singular: kind.to_lowercase(),
        namespaced,
        short_names: short.iter().map(|s| s.to_string()).collect(),
        categories: Vec::new(),
        subresources: Vec::new(),
        storage: format!("{storage_group}/{plural}"),
        unconditional_update: true,
        crd: None,
        columns: crate::table::builtin_columns(group, kind),
        schema: None,
        // Built-in kinds prune unknown fields (as decoding into their Go types does) but are not
        // validated or defaulted through a schema.
        validation: crate::schema::Schema::compile(&crate::openapi::builtin::full_schema(group, kind))
            .ok()
            .map(|schema| CompiledSchema(Arc::new(schema))),
        scale: None,
        apply_types: ApplyTypes::default(),
        deprecation_warning: None,
        create_only: false,
    }
}

/// A review kind of version `v1`: created to ask a question, answered in its `status`, never
/// stored (kube-apiserver's authentication and authorization reviews).
fn review(group: &str, kind: &str, plural: &str, namespaced: bool) -> ResourceDef {
    ResourceDef { create_only: true, ..builtin(group, "v1", kind, plural, namespaced, &[]) }
}

/// The built-in kinds.
pub fn builtins() -> Vec<ResourceDef> {
    let mut namespaces = builtin("", "v1", "Namespace", "namespaces", false, &["ns"]);
    namespaces.subresources = vec!["status".into(), "finalize".into()];
    let mut events_v1 = builtin("events.k8s.io", "v1", "Event", "events", true, &["ev"]);
    // One storage, two views: events.k8s.io/v1 Events are the core Events, and are checked in
    // that storage form.
    events_v1.storage = "core/events".into();
    events_v1.validation = builtin("", "v1", "Event", "events", true, &[]).validation;
    let mut crds = builtin("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", false, &["crd", "crds"]);
    crds.subresources = vec!["status".into()];
    crds.unconditional_update = false;
    // Services are served so that the `kubernetes` Service (and `kubectl cluster-info`,
    // `kubectl get all`) work and webhooks can name a `service` target (the API server's
    // `webhooks::client::resolve`); nothing routes to them.
    let mut services = builtin("", "v1", "Service", "services", true, &["svc"]);
    services.subresources = vec!["status".into()];
    services.categories = vec!["all".into()];
    // `token` is TokenRequest's subresource: create only (the API server's
    // `authn::service_accounts::requests`).
    let mut service_accounts = builtin("", "v1", "ServiceAccount", "serviceaccounts", true, &["sa"]);
    service_accounts.subresources = vec!["token".into()];
    vec![
        namespaces,
        builtin("", "v1", "ConfigMap", "configmaps", true, &["cm"]),
        services,
        builtin("", "v1", "Endpoints", "endpoints", true, &["ep"]),
        builtin("", "v1", "Secret", "secrets", true, &[]),
        service_accounts,
        builtin("", "v1", "Event", "events", true, &["ev"]),
        events_v1,
        builtin("coordination.k8s.io", "v1", "Lease", "leases", true, &[]),
        crds,
        builtin("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration", "validatingwebhookconfigurations", false, &[]),
        builtin("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration", "mutatingwebhookconfigurations", false, &[]),
        builtin("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", false, &[]),
        builtin("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", false, &[]),
        builtin("rbac.authorization.k8s.io", "v1", "Role", "roles", true, &[]),
        builtin("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", true, &[]),
        // Served by the API server's own handlers (`authn::service_accounts::requests`,
        // `authz::reviews`); listed so that discovery, `kubectl create -f` and
        // `kubectl api-resources` know them.
        review("authentication.k8s.io", "TokenReview", "tokenreviews", false),
        review("authentication.k8s.io", "SelfSubjectReview", "selfsubjectreviews", false),
        review("authorization.k8s.io", "SubjectAccessReview", "subjectaccessreviews", false),
        review("authorization.k8s.io", "SelfSubjectAccessReview", "selfsubjectaccessreviews", false),
        review("authorization.k8s.io", "LocalSubjectAccessReview", "localsubjectaccessreviews", true),
        review("authorization.k8s.io", "SelfSubjectRulesReview", "selfsubjectrulesreviews", false),
    ]
}

/// Kubernetes' version priority, highest first: GA versions (`v2` before `v1`), then betas, then
/// alphas (each by major, then minor number), then versions of any other form alphabetically.
/// The API server picks a group's preferred version this way, whatever order a CRD lists them.
pub fn version_priority(a: &str, b: &str) -> std::cmp::Ordering {
    /// (stability: 2 GA, 1 beta, 0 alpha; major; minor) of a `v<major>[(alpha|beta)<minor>]`.
    fn parse(version: &str) -> Option<(u8, u64, u64)> {
        let rest = version.strip_prefix('v')?;
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        let major = rest.get(..digits).filter(|d| !d.is_empty())?.parse().ok()?;
        let tail = &rest[digits..];
        if tail.is_empty() {
            return Some((2, major, 0));
        }
        let (stability, minor) =
            if let Some(minor) = tail.strip_prefix("beta") { (1, minor) } else { (0, tail.strip_prefix("alpha")?) };
        if minor.is_empty() || !minor.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        Some((stability, major, minor.parse().ok()?))
    }
    match (parse(a), parse(b)) {
        (Some(a), Some(b)) => b.cmp(&a),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

#[cfg(test)]
mod tests {
    use super::version_priority;

    #[test]
    fn versions_sort_as_kubernetes_prefers_them() {
        let mut versions = vec!["foo10", "v1alpha1", "v1", "v11alpha2", "v10beta3", "foo1", "v3beta1", "v2", "v12alpha1", "v11beta2", "v10", "v1beta"];
        versions.sort_by(|a, b| version_priority(a, b));
        assert_eq!(versions, ["v10", "v2", "v1", "v11beta2", "v10beta3", "v3beta1", "v12alpha1", "v11alpha2", "v1alpha1", "foo1", "foo10", "v1beta"]);
    }
}
