//! The `authorization.k8s.io/v1` reviews: `SelfSubjectAccessReview` (`kubectl auth can-i`),
//! `SubjectAccessReview`, `LocalSubjectAccessReview` and `SelfSubjectRulesReview`
//! (`kubectl auth can-i --list`). Each is created (201) and answered in its `status`; none is
//! stored.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::{Value, json};

use super::rules::PolicyRule;
use super::{Attributes, Decision, ResourceAttributes};
use crate::authn::UserInfo;
use crate::state::AppState;
use crate::status::{ApiError, Cause};

const GROUP: &str = "authorization.k8s.io";

fn text(value: &Value, key: &str) -> String {
    value.get(key).and_then(Value::as_str).unwrap_or_default().to_string()
}

/// The body as a JSON object of `kind` (JSON or kubectl's protobuf).
fn review(headers: &HeaderMap, body: &Bytes, kind: &str) -> Result<Value, ApiError> {
    let (object, _) = crate::http::resources::request_object(headers, body)?;
    let found = text(&object, "kind");
    if !found.is_empty() && found != kind {
        return Err(ApiError::bad_request(format!("expected a {kind}, got a {found}")));
    }
    Ok(object)
}

fn invalid(kind: &str, field: &str, message: &str) -> ApiError {
    ApiError::invalid(kind, GROUP, "", vec![Cause { reason: "FieldValueRequired".into(), message: message.into(), field: field.into() }])
}

/// The attributes a review's `spec` asks about, for `user`.
fn spec_attributes(kind: &str, spec: &Value, user: UserInfo) -> Result<Attributes, ApiError> {
    match (spec.get("resourceAttributes").filter(|v| v.is_object()), spec.get("nonResourceAttributes").filter(|v| v.is_object())) {
        (Some(r), None) => Ok(Attributes::for_resource(
            user,
            &text(r, "verb"),
            ResourceAttributes {
                namespace: text(r, "namespace"),
                group: text(r, "group"),
                version: text(r, "version"),
                resource: text(r, "resource"),
                subresource: text(r, "subresource"),
                name: text(r, "name"),
            },
        )),
        (None, Some(n)) => Ok(Attributes { user, verb: text(n, "verb"), resource: None, path: text(n, "path") }),
        (Some(_), Some(_)) => Err(invalid(kind, "spec.nonResourceAttributes", "Invalid value: \"\": cannot be specified in combination with resourceAttributes")),
        (None, None) => Err(invalid(kind, "spec.resourceAttributes", "Required value: exactly one of nonResourceAttributes or resourceAttributes must be specified")),
    }
}

/// The review as answered: its spec back, and `status` with `allowed` (and the reason).
async fn answer(state: &AppState, mut object: Value, attributes: Attributes) -> Response {
    let decision = state.authorizer.authorize(&attributes).await;
    let status = match decision {
        Decision::Allow => json!({"allowed": true, "reason": state.authorizer.explain(&attributes)}),
        Decision::Deny(reason) if reason.is_empty() => json!({"allowed": false}),
        Decision::Deny(reason) => json!({"allowed": false, "reason": reason}),
    };
    object["apiVersion"] = json!("authorization.k8s.io/v1");
    // The metadata posted comes back (a LocalSubjectAccessReview's namespace included), as
    // kube-apiserver returns the review it was given with its status filled in.
    if !object["metadata"].is_object() {
        object["metadata"] = json!({});
    }
    object["metadata"]["creationTimestamp"] = Value::Null;
    object["status"] = status;
    (StatusCode::CREATED, Json(object)).into_response()
}

/// `POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews`: may I?
pub async fn self_subject_access_review(State(state): State<Arc<AppState>>, Extension(user): Extension<UserInfo>, headers: HeaderMap, body: Bytes) -> Response {
    const KIND: &str = "SelfSubjectAccessReview";
    let result = review(&headers, &body, KIND).and_then(|mut object| {
        object["kind"] = json!(KIND);
        let attributes = spec_attributes(KIND, &object["spec"], user)?;
        Ok((object, attributes))
    });
    match result {
        Ok((object, attributes)) => answer(&state, object, attributes).await,
        Err(error) => error.into_response(),
    }
}

/// The user a SubjectAccessReview's spec names.
fn spec_user(spec: &Value) -> UserInfo {
    let groups: Vec<String> = spec.get("groups").and_then(|g| serde_json::from_value(g.clone()).ok()).unwrap_or_default();
    UserInfo {
        username: text(spec, "user"),
        uid: text(spec, "uid"),
        groups,
        extra: spec.get("extra").and_then(|e| serde_json::from_value(e.clone()).ok()).unwrap_or_default(),
    }
}

/// `POST /apis/authorization.k8s.io/v1/subjectaccessreviews`: may they?
pub async fn subject_access_review(State(state): State<Arc<AppState>>, headers: HeaderMap, body: Bytes) -> Response {
    const KIND: &str = "SubjectAccessReview";
    let result = review(&headers, &body, KIND).and_then(|mut object| {
        object["kind"] = json!(KIND);
        let user = spec_user(&object["spec"]);
        if user.username.is_empty() && user.groups.is_empty() {
            return Err(invalid(KIND, "spec.user", "Invalid value: \"\": at least one of user or group must be specified"));
        }
        let attributes = spec_attributes(KIND, &object["spec"], user)?;
        Ok((object, attributes))
    });
    match result {
        Ok((object, attributes)) => answer(&state, object, attributes).await,
        Err(error) => error.into_response(),
    }
}

/// `POST /apis/authorization.k8s.io/v1/namespaces/<ns>/localsubjectaccessreviews`: may they,
/// in this namespace?
pub async fn local_subject_access_review(State(state): State<Arc<AppState>>, Path(namespace): Path<String>, headers: HeaderMap, body: Bytes) -> Response {
    const KIND: &str = "LocalSubjectAccessReview";
    let result = review(&headers, &body, KIND).and_then(|mut object| {
        object["kind"] = json!(KIND);
        let user = spec_user(&object["spec"]);
        let mut attributes = spec_attributes(KIND, &object["spec"], user)?;
        match attributes.resource.as_mut() {
            Some(r) if r.namespace.is_empty() || r.namespace == namespace => {
                r.namespace = namespace.clone();
                if !object["metadata"].is_object() {
                    object["metadata"] = json!({});
                }
                object["metadata"]["namespace"] = json!(namespace);
            }
            Some(r) => {
                return Err(ApiError::invalid(
                    KIND,
                    GROUP,
                    "",
                    vec![Cause {
                        reason: "FieldValueInvalid".into(),
                        message: format!("Invalid value: {}: must match metadata.namespace", crate::status::go_quote(&r.namespace)),
                        field: "spec.resourceAttributes.namespace".into(),
                    }],
                ));
            }
            None => return Err(invalid(KIND, "spec.resourceAttributes", "Required value: disallowed on this kind of request")),
        }
        Ok((object, attributes))
    });
    match result {
        Ok((object, attributes)) => answer(&state, object, attributes).await,
        Err(error) => error.into_response(),
    }
}

/// `POST /apis/authorization.k8s.io/v1/selfsubjectrulesreviews`: everything I may do in a
/// namespace, as resource rules and non-resource rules.
pub async fn self_subject_rules_review(State(state): State<Arc<AppState>>, Extension(user): Extension<UserInfo>, headers: HeaderMap, body: Bytes) -> Response {
    const KIND: &str = "SelfSubjectRulesReview";
    let mut object = match review(&headers, &body, KIND) {
        Ok(object) => object,
        Err(error) => return error.into_response(),
    };
    let namespace = text(&object["spec"], "namespace");
    if namespace.is_empty() {
        return invalid(KIND, "spec.namespace", "Required value: namespace is required").into_response();
    }
    let (rules, errors) = state.authorizer.rules_for(&user, &namespace);
    let (resource_rules, url_rules): (Vec<PolicyRule>, Vec<PolicyRule>) = rules.into_iter().partition(|r| r.non_resource_urls.is_empty());
    let resource_rules: Vec<Value> = resource_rules
        .into_iter()
        .map(|r| json!({"verbs": r.verbs, "apiGroups": r.api_groups, "resources": r.resources, "resourceNames": r.resource_names}))
        .map(strip_empty)
        .collect();
    let url_rules: Vec<Value> = url_rules.into_iter().map(|r| json!({"verbs": r.verbs, "nonResourceURLs": r.non_resource_urls})).collect();
    let mut status = json!({"resourceRules": resource_rules, "nonResourceRules": url_rules, "incomplete": !errors.is_empty()});
    if !errors.is_empty() {
        status["evaluationError"] = json!(errors.join(", "));
    }
    object["apiVersion"] = json!("authorization.k8s.io/v1");
    object["kind"] = json!(KIND);
    object["metadata"] = json!({"creationTimestamp": null});
    object["status"] = status;
    (StatusCode::CREATED, Json(object)).into_response()
}

/// Drops empty lists, as Go's `omitempty` does.
fn strip_empty(mut rule: Value) -> Value {
    if let Some(map) = rule.as_object_mut() {
        map.retain(|k, v| k == "verbs" || v.as_array().is_none_or(|a| !a.is_empty()));
    }
    rule
}
