//! Conversions for the kinds of access control kubectl sends as protobuf: RBAC's roles and
//! bindings (`kubectl create role|clusterrole|rolebinding|clusterrolebinding`), the access
//! reviews (`kubectl auth can-i`) and `TokenRequest`/`TokenReview` (`kubectl create token`).

use k8s_pb::api::authentication::v1 as authn;
use k8s_pb::api::authorization::v1 as authz;
use k8s_pb::api::rbac::v1 as rbac;
use k8s_pb::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use super::json::{In, JsonMap, Out};
use super::kinds::{metadata, metadata_from};

fn rule_to_json(m: rbac::PolicyRule) -> JsonMap {
    let mut o = Out::new("");
    o.value("verbs", serde_json::Value::Array(m.verbs.into_iter().map(serde_json::Value::String).collect()));
    o.strings("apiGroups", m.api_groups);
    o.strings("resources", m.resources);
    o.strings("resourceNames", m.resource_names);
    o.strings("nonResourceURLs", m.non_resource_ur_ls);
    o.finish()
}

fn rule_from_json(r: &In<'_>) -> Result<rbac::PolicyRule, String> {
    Ok(rbac::PolicyRule {
        verbs: r.strings("verbs")?,
        api_groups: r.strings("apiGroups")?,
        resources: r.strings("resources")?,
        resource_names: r.strings("resourceNames")?,
        non_resource_ur_ls: r.strings("nonResourceURLs")?,
    })
}

fn rules_from_json(r: &In<'_>) -> Result<Vec<rbac::PolicyRule>, String> {
    r.objects("rules")?.iter().map(rule_from_json).collect()
}

fn selector_to_json(m: LabelSelector) -> JsonMap {
    let mut o = Out::new("");
    o.string_map("matchLabels", m.match_labels);
    o.objects(
        "matchExpressions",
        m.match_expressions
            .into_iter()
            .map(|e| {
                let mut o = Out::new("");
                o.string("key", e.key);
                o.string("operator", e.operator);
                o.strings("values", e.values);
                o.finish()
            })
            .collect(),
    );
    o.finish()
}

fn selector_from_json(r: &In<'_>) -> Result<LabelSelector, String> {
    Ok(LabelSelector {
        match_labels: r.string_map("matchLabels")?,
        match_expressions: r
            .objects("matchExpressions")?
            .iter()
            .map(|e| Ok(LabelSelectorRequirement { key: e.string("key")?, operator: e.string("operator")?, values: e.strings("values")? }))
            .collect::<Result<_, String>>()?,
    })
}

/// Converts an rbac/v1 `Role`.
pub(super) fn role_to_json(m: rbac::Role) -> Result<JsonMap, String> {
    let mut o = Out::new("");
    metadata(&mut o, m.metadata)?;
    o.objects("rules", m.rules.into_iter().map(rule_to_json).collect());
    Ok(o.finish())
}

/// Reads an rbac/v1 `Role`.
pub(super) fn role_from_json(r: &In<'_>) -> Result<rbac::Role, String> {
    Ok(rbac::Role { metadata: metadata_from(r)?, rules: rules_from_json(r)? })
}

/// Converts an rbac/v1 `ClusterRole`.
pub(super) fn cluster_role_to_json(m: rbac::ClusterRole) -> Result<JsonMap, String> {
    let mut o = Out::new("");
    metadata(&mut o, m.metadata)?;
    o.objects("rules", m.rules.into_iter().map(rule_to_json).collect());
    o.object(
        "aggregationRule",
        m.aggregation_rule.map(|a| {
            let mut o = Out::new("");
            o.objects("clusterRoleSelectors", a.cluster_role_selectors.into_iter().map(selector_to_json).collect());
            o.finish()
        }),
    );
    Ok(o.finish())
}

/// Reads an rbac/v1 `ClusterRole`.
pub(super) fn cluster_role_from_json(r: &In<'_>) -> Result<rbac::ClusterRole, String> {
    Ok(rbac::ClusterRole {
        metadata: metadata_from(r)?,
        rules: rules_from_json(r)?,
        aggregation_rule: r
            .object("aggregationRule")?
            .map(|a| {
                Ok::<_, String>(rbac::AggregationRule {
                    cluster_role_selectors: a.objects("clusterRoleSelectors")?.iter().map(selector_from_json).collect::<Result<_, _>>()?,
                })
            })
            .transpose()?,
    })
}

fn subject_to_json(m: rbac::Subject) -> JsonMap {
    let mut o = Out::new("");
    o.string("kind", m.kind);
    o.string("apiGroup", m.api_group);
    o.string("name", m.name);
    o.string("namespace", m.namespace);
    o.finish()
}

fn role_ref_to_json(m: rbac::RoleRef) -> JsonMap {
    let mut o = Out::new("");
    o.string("apiGroup", m.api_group);
    o.string("kind", m.kind);
    o.string("name", m.name);
    o.finish()
}

fn subjects_from_json(r: &In<'_>) -> Result<Vec<rbac::Subject>, String> {
    r.objects("subjects")?
        .iter()
        .map(|s| Ok(rbac::Subject { kind: s.string("kind")?, api_group: s.string("apiGroup")?, name: s.string("name")?, namespace: s.string("namespace")? }))
        .collect()
}

fn role_ref_from_json(r: &In<'_>) -> Result<Option<rbac::RoleRef>, String> {
    r.object("roleRef")?
        .map(|rr| Ok(rbac::RoleRef { api_group: rr.string("apiGroup")?, kind: rr.string("kind")?, name: rr.string("name")? }))
        .transpose()
}

/// Converts an rbac/v1 `RoleBinding`.
pub(super) fn role_binding_to_json(m: rbac::RoleBinding) -> Result<JsonMap, String> {
    let mut o = Out::new("");
    metadata(&mut o, m.metadata)?;
    o.objects("subjects", m.subjects.into_iter().map(subject_to_json).collect());
    o.object("roleRef", m.role_ref.map(role_ref_to_json));
    Ok(o.finish())
}

/// Reads an rbac/v1 `RoleBinding`.
pub(super) fn role_binding_from_json(r: &In<'_>) -> Result<rbac::RoleBinding, String> {
    Ok(rbac::RoleBinding { metadata: metadata_from(r)?, subjects: subjects_from_json(r)?, role_ref: role_ref_from_json(r)? })
}

/// Converts an rbac/v1 `ClusterRoleBinding` (the fields of a RoleBinding).
pub(super) fn cluster_role_binding_to_json(m: rbac::ClusterRoleBinding) -> Result<JsonMap, String> {
    role_binding_to_json(rbac::RoleBinding { metadata: m.metadata, subjects: m.subjects, role_ref: m.role_ref })
}

/// Reads an rbac/v1 `ClusterRoleBinding`.
pub(super) fn cluster_role_binding_from_json(r: &In<'_>) -> Result<rbac::ClusterRoleBinding, String> {
    let m = role_binding_from_json(r)?;
    Ok(rbac::ClusterRoleBinding { metadata: m.metadata, subjects: m.subjects, role_ref: m.role_ref })
}

fn resource_attributes_to_json(m: authz::ResourceAttributes) -> JsonMap {
    let mut o = Out::new("");
    o.string("namespace", m.namespace);
    o.string("verb", m.verb);
    o.string("group", m.group);
    o.string("version", m.version);
    o.string("resource", m.resource);
    o.string("subresource", m.subresource);
    o.string("name", m.name);
    o.finish()
}

fn resource_attributes_from_json(r: &In<'_>) -> Result<authz::ResourceAttributes, String> {
    Ok(authz::ResourceAttributes {
        namespace: r.string("namespace")?,
        verb: r.string("verb")?,
        group: r.string("group")?,
        version: r.string("version")?,
        resource: r.string("resource")?,
        subresource: r.string("subresource")?,
        name: r.string("name")?,
        field_selector: None,
        label_selector: None,
    })
}

fn non_resource_attributes_to_json(m: authz::NonResourceAttributes) -> JsonMap {
    let mut o = Out::new("");
    o.string("path", m.path);
    o.string("verb", m.verb);
    o.finish()
}

fn non_resource_attributes_from_json(r: &In<'_>) -> Result<authz::NonResourceAttributes, String> {
    Ok(authz::NonResourceAttributes { path: r.string("path")?, verb: r.string("verb")? })
}

fn attributes_out(o: &mut Out, resource: Option<authz::ResourceAttributes>, non_resource: Option<authz::NonResourceAttributes>) {
    o.object("resourceAttributes", resource.map(resource_attributes_to_json));
    o.object("nonResourceAttributes", non_resource.map(non_resource_attributes_to_json));
}

type AttributesIn = (Option<authz::ResourceAttributes>, Option<authz::NonResourceAttributes>);

fn attributes_in(spec: &In<'_>) -> Result<AttributesIn, String> {
    Ok((
        spec.object("resourceAttributes")?.as_ref().map(resource_attributes_from_json).transpose()?,
        spec.object("nonResourceAttributes")?.as_ref().map(non_resource_attributes_from_json).transpose()?,
    ))
}

fn access_status_to_json(m: authz::SubjectAccessReviewStatus) -> JsonMap {
    let mut o = Out::new("");
    o.value("allowed", serde_json::Value::Bool(m.allowed.unwrap_or_default()));
    if m.denied == Some(true) {
        o.opt_bool("denied", m.denied);
    }
    o.string("reason", m.reason);
    o.string("evaluationError", m.evaluation_error);
    o.finish()
}

fn access_status_from_json(r: &In<'_>) -> Result<Option<authz::SubjectAccessReviewStatus>, String> {
    r.object("status")?
        .map(|s| {
            Ok(authz::SubjectAccessReviewStatus {
                allowed: s.boolean("allowed")?,
                denied: s.boolean("denied")?,
                reason: s.string("reason")?,
                evaluation_error: s.string("evaluationError")?,
            })
        })
        .transpose()
}

/// Converts an authorization/v1 `SelfSubjectAccessReview`.
pub(super) fn self_subject_access_review_to_json(m: authz::SelfSubjectAccessReview) -> Result<JsonMap, String> {
    let mut o = Out::new("");
    metadata(&mut o, m.metadata)?;
    o.object(
        "spec",
        m.spec.map(|s| {
            let mut o = Out::new("spec");
            attributes_out(&mut o, s.resource_attributes, s.non_resource_attributes);
            o.finish()
        }),
    );
    o.object("status", m.status.map(access_status_to_json));
    Ok(o.finish())
}

/// Reads an authorization/v1 `SelfSubjectAccessReview`.
pub(super) fn self_subject_access_review_from_json(r: &In<'_>) -> Result<authz::SelfSubjectAccessReview, String> {
    let spec = r
        .object("spec")?
        .map(|s| {
            let (resource_attributes, non_resource_attributes) = attributes_in(&s)?;
            Ok::<_, String>(authz::SelfSubjectAccessReviewSpec { resource_attributes, non_resource_attributes })
        })
        .transpose()?;
    Ok(authz::SelfSubjectAccessReview { metadata: metadata_from(r)?, spec, status: access_status_from_json(r)? })
}

fn subject_spec_to_json(s: authz::SubjectAccessReviewSpec) -> JsonMap {
    let mut o = Out::new("spec");
    attributes_out(&mut o, s.resource_attributes, s.non_resource_attributes);
    o.string("user", s.user);
    o.strings("groups", s.groups);
    if !s.extra.is_empty() {
        let extra = s.extra.into_iter().map(|(k, v)| (k, serde_json::json!(v.items))).collect();
        o.value("extra", serde_json::Value::Object(extra));
    }
    o.string("uid", s.uid);
    o.finish()
}

fn subject_spec_from_json(s: &In<'_>) -> Result<authz::SubjectAccessReviewSpec, String> {
    let (resource_attributes, non_resource_attributes) = attributes_in(s)?;
    let mut extra = std::collections::BTreeMap::new();
    if let Some(map) = s.object("extra")? {
        for key in map.keys() {
            let items = map.strings(&key)?;
            extra.insert(key, authz::ExtraValue { items });
        }
    }
    Ok(authz::SubjectAccessReviewSpec { resource_attributes, non_resource_attributes, user: s.string("user")?, groups: s.strings("groups")?, extra, uid: s.string("uid")? })
}

/// Converts an authorization/v1 `SubjectAccessReview`.
pub(super) fn subject_access_review_to_json(m: authz::SubjectAccessReview) -> Result<JsonMap, String> {
    let mut o = Out::new("");
    metadata(&mut o, m.metadata)?;
    o.object("spec", m.spec.map(subject_spec_to_json));
    o.object("status", m.status.map(access_status_to_json));
    Ok(o.finish())
}

/// Reads an authorization/v1 `SubjectAccessReview`.
pub(super) fn subject_access_review_from_json(r: &In<'_>) -> Result<authz::SubjectAccessReview, String> {
    Ok(authz::SubjectAccessReview {
        metadata: metadata_from(r)?,
        spec: r.object("spec")?.as_ref().map(subject_spec_from_json).transpose()?,
        status: access_status_from_json(r)?,
    })
}

/// Converts an authorization/v1 `LocalSubjectAccessReview` (the fields of a SubjectAccessReview).
pub(super) fn local_subject_access_review_to_json(m: authz::LocalSubjectAccessReview) -> Result<JsonMap, String> {
    subject_access_review_to_json(authz::SubjectAccessReview { metadata: m.metadata, spec: m.spec, status: m.status })
}

/// Reads an authorization/v1 `LocalSubjectAccessReview`.
pub(super) fn local_subject_access_review_from_json(r: &In<'_>) -> Result<authz::LocalSubjectAccessReview, String> {
    let m = subject_access_review_from_json(r)?;
    Ok(authz::LocalSubjectAccessReview { metadata: m.metadata, spec: m.spec, status: m.status })
}

/// Converts an authorization/v1 `SelfSubjectRulesReview` (its spec; the status is the server's).
pub(super) fn self_subject_rules_review_to_json(m: authz::SelfSubjectRulesReview) -> Result<JsonMap, String> {
    let mut o = Out::new("");
    metadata(&mut o, m.metadata)?;
    o.object(
        "spec",
        m.spec.map(|s| {
            let mut o = Out::new("spec");
            o.string("namespace", s.namespace);
            o.finish()
        }),
    );
    Ok(o.finish())
}

/// Reads an authorization/v1 `SelfSubjectRulesReview` (its spec).
pub(super) fn self_subject_rules_review_from_json(r: &In<'_>) -> Result<authz::SelfSubjectRulesReview, String> {
    Ok(authz::SelfSubjectRulesReview {
        metadata: metadata_from(r)?,
        spec: r.object("spec")?.map(|s| Ok::<_, String>(authz::SelfSubjectRulesReviewSpec { namespace: s.string("namespace")? })).transpose()?,
        status: None,
    })
}

/// Converts an authentication/v1 `TokenRequest` (its spec; the status is the server's).
pub(super) fn token_request_to_json(m: authn::TokenRequest) -> Result<JsonMap, String> {
    let mut o = Out::new("");
    metadata(&mut o, m.metadata)?;
    o.object(
        "spec",
        m.spec.map(|s| {
            let mut o = Out::new("spec");
            o.strings("audiences", s.audiences);
            o.opt_int("expirationSeconds", s.expiration_seconds);
            o.object(
                "boundObjectRef",
                s.bound_object_ref.map(|b| {
                    let mut o = Out::new("spec.boundObjectRef");
                    o.string("kind", b.kind);
                    o.string("apiVersion", b.api_version);
                    o.string("name", b.name);
                    o.string("uid", b.u_id);
                    o.finish()
                }),
            );
            o.finish()
        }),
    );
    Ok(o.finish())
}

/// Reads an authentication/v1 `TokenRequest` (its spec).
pub(super) fn token_request_from_json(r: &In<'_>) -> Result<authn::TokenRequest, String> {
    let spec = r
        .object("spec")?
        .map(|s| {
            Ok::<_, String>(authn::TokenRequestSpec {
                audiences: s.strings("audiences")?,
                expiration_seconds: s.int64("expirationSeconds")?,
                bound_object_ref: s
                    .object("boundObjectRef")?
                    .map(|b| {
                        Ok::<_, String>(authn::BoundObjectReference { kind: b.string("kind")?, api_version: b.string("apiVersion")?, name: b.string("name")?, u_id: b.string("uid")? })
                    })
                    .transpose()?,
            })
        })
        .transpose()?;
    Ok(authn::TokenRequest { metadata: metadata_from(r)?, spec, status: None })
}

/// Converts an authentication/v1 `TokenReview` (its spec; the status is the server's).
pub(super) fn token_review_to_json(m: authn::TokenReview) -> Result<JsonMap, String> {
    let mut o = Out::new("");
    metadata(&mut o, m.metadata)?;
    o.object(
        "spec",
        m.spec.map(|s| {
            let mut o = Out::new("spec");
            o.string("token", s.token);
            o.strings("audiences", s.audiences);
            o.finish()
        }),
    );
    Ok(o.finish())
}

/// Reads an authentication/v1 `TokenReview` (its spec).
pub(super) fn token_review_from_json(r: &In<'_>) -> Result<authn::TokenReview, String> {
    Ok(authn::TokenReview {
        metadata: metadata_from(r)?,
        spec: r.object("spec")?.map(|s| Ok::<_, String>(authn::TokenReviewSpec { token: s.string("token")?, audiences: s.strings("audiences")? })).transpose()?,
        status: None,
    })
}
