//! Kubernetes `Status` errors: every failure the API answers is one of these, with the HTTP code
//! and reason clients (kubectl, kube-rs, the Python client) branch on.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// The `reason` of a failed request, with its HTTP code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// 400
    BadRequest,
    /// 401
    Unauthorized,
    /// 403
    Forbidden,
    /// 404
    NotFound,
    /// 405
    MethodNotAllowed,
    /// 406
    NotAcceptable,
    /// 409, the object exists
    AlreadyExists,
    /// 409, a stale write
    Conflict,
    /// 410
    Expired,
    /// 413
    RequestEntityTooLarge,
    /// 415
    UnsupportedMediaType,
    /// 422
    Invalid,
    /// 429
    TooManyRequests,
    /// 500
    InternalError,
    /// 503
    ServiceUnavailable,
    /// 504
    Timeout,
}

impl Reason {
    /// The HTTP status code.
    pub fn code(self) -> u16 {
        match self {
            Reason::BadRequest => 400,
            Reason::Unauthorized => 401,
            Reason::Forbidden => 403,
            Reason::NotFound => 404,
            Reason::MethodNotAllowed => 405,
            Reason::NotAcceptable => 406,
            Reason::AlreadyExists | Reason::Conflict => 409,
            Reason::Expired => 410,
            Reason::RequestEntityTooLarge => 413,
            Reason::UnsupportedMediaType => 415,
            Reason::Invalid => 422,
            Reason::TooManyRequests => 429,
            Reason::InternalError => 500,
            Reason::ServiceUnavailable => 503,
            Reason::Timeout => 504,
        }
    }

    /// The `reason` string.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::BadRequest => "BadRequest",
            Reason::Unauthorized => "Unauthorized",
            Reason::Forbidden => "Forbidden",
            Reason::NotFound => "NotFound",
            Reason::MethodNotAllowed => "MethodNotAllowed",
            Reason::NotAcceptable => "NotAcceptable",
            Reason::AlreadyExists => "AlreadyExists",
            Reason::Conflict => "Conflict",
            Reason::Expired => "Expired",
            Reason::RequestEntityTooLarge => "RequestEntityTooLarge",
            Reason::UnsupportedMediaType => "UnsupportedMediaType",
            Reason::Invalid => "Invalid",
            Reason::TooManyRequests => "TooManyRequests",
            Reason::InternalError => "InternalError",
            Reason::ServiceUnavailable => "ServiceUnavailable",
            Reason::Timeout => "Timeout",
        }
    }
}

/// One field-level cause of an `Invalid` (or other) failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cause {
    /// e.g. `FieldValueRequired`, `FieldValueInvalid`.
    pub reason: String,
    /// Human-readable.
    pub message: String,
    /// The field path, e.g. `metadata.name`.
    pub field: String,
}

/// A failed API request.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    /// Why.
    pub reason: Reason,
    /// What the user sees.
    pub message: String,
    /// `details`, boxed to keep results small on the happy path.
    pub details: Option<Box<Details>>,
}

/// The `details` of a `Status`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Details {
    /// `details.name`.
    pub name: Option<String>,
    /// `details.group`.
    pub group: Option<String>,
    /// `details.kind` (the resource, as Kubernetes fills it).
    pub kind: Option<String>,
    /// `details.causes`.
    pub causes: Vec<Cause>,
}

impl ApiError {
    /// A failure with a reason and a message.
    pub fn new(reason: Reason, message: impl Into<String>) -> Self {
        ApiError { reason, message: message.into(), details: None }
    }

    /// Adds the object's identity to `details`.
    pub fn with_details(mut self, group: &str, resource: &str, name: &str) -> Self {
        let details = self.details.get_or_insert_with(Box::default);
        details.group = Some(group.to_string());
        details.kind = Some(resource.to_string());
        details.name = Some(name.to_string());
        self
    }

    /// `<resource>.<group> "<name>" not found`, as Kubernetes words it.
    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        ApiError::new(Reason::NotFound, format!("{} \"{name}\" not found", qualified(group, resource)))
            .with_details(group, resource, name)
    }

    /// `<resource>.<group> "<name>" already exists`.
    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        ApiError::new(Reason::AlreadyExists, format!("{} \"{name}\" already exists", qualified(group, resource)))
            .with_details(group, resource, name)
    }

    /// The optimistic-concurrency conflict message kubectl and controllers recognise.
    pub fn conflict(group: &str, resource: &str, name: &str) -> Self {
        ApiError::new(
            Reason::Conflict,
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
                qualified(group, resource)
            ),
        )
        .with_details(group, resource, name)
    }

    /// `<resource>.<group> "<name>" is forbidden: <why>`, as Kubernetes words a 403.
    pub fn forbidden(group: &str, resource: &str, name: &str, why: &str) -> Self {
        ApiError::new(Reason::Forbidden, format!("{} \"{name}\" is forbidden: {why}", qualified(group, resource)))
            .with_details(group, resource, name)
    }

    /// Adds a cause to `details.causes`.
    pub fn with_cause(mut self, reason: &str, message: &str, field: &str) -> Self {
        let details = self.details.get_or_insert_with(Box::default);
        details.causes.push(Cause { reason: reason.into(), message: message.into(), field: field.into() });
        self
    }

    /// A 400 with a message.
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(Reason::BadRequest, message)
    }

    /// A 500 with a message; the cause is logged by the caller.
    pub fn internal(message: impl Into<String>) -> Self {
        ApiError::new(Reason::InternalError, message)
    }

    /// A 422 for `kind "name"` with field causes, worded like Kubernetes:
    /// `Kind.group "name" is invalid: field: message`.
    pub fn invalid(kind: &str, group: &str, name: &str, causes: Vec<Cause>) -> Self {
        let qualified_kind = if group.is_empty() { kind.to_string() } else { format!("{kind}.{group}") };
        let detail: Vec<String> = causes.iter().map(|c| format!("{}: {}", c.field, c.message)).collect();
        let message = format!("{qualified_kind} \"{name}\" is invalid: {}", detail.join(", "));
        let mut error = ApiError::new(Reason::Invalid, message).with_details(group, kind, name);
        if let Some(details) = &mut error.details {
            details.causes = causes;
        }
        error
    }

    /// The `Status` object.
    pub fn to_status(&self) -> Value {
        let mut details = serde_json::Map::new();
        let d = self.details.as_deref().cloned().unwrap_or_default();
        if let Some(name) = &d.name {
            details.insert("name".into(), json!(name));
        }
        if let Some(group) = &d.group {
            details.insert("group".into(), json!(group));
        }
        if let Some(kind) = &d.kind {
            details.insert("kind".into(), json!(kind));
        }
        // Every 422 names its causes, as kube-apiserver's do: kubectl prints only "The Kind
        // "name" is invalid" for one without. A 422 made from a bare message (a patch or apply
        // the engine refused) gets that message as its one cause.
        let mut causes_of = d.causes.clone();
        if causes_of.is_empty() && self.reason == Reason::Invalid {
            let message = self.message.split_once(" is invalid: ").map_or(self.message.as_str(), |(_, m)| m);
            let (field, message) = match message.split_once(": ") {
                Some((field, rest)) if is_field_path(field) => (field, rest),
                _ => ("", message),
            };
            causes_of.push(Cause { reason: "FieldValueInvalid".into(), message: message.into(), field: field.into() });
        }
        if !causes_of.is_empty() {
            let causes: Vec<Value> = causes_of
                .iter()
                .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                .collect();
            details.insert("causes".into(), Value::Array(causes));
        }
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason.as_str(),
            "code": self.reason.code(),
        });
        if self.reason == Reason::ServiceUnavailable {
            // The retry hint clients read (client-go waits this long before retrying).
            details.insert("retryAfterSeconds".into(), json!(1));
        }
        if !details.is_empty() {
            status["details"] = Value::Object(details);
        }
        status
    }
}

/// Whether `text` reads as a field path (`spec.pipeline[0].step`, `.metadata.name`,
/// `fieldManager`) rather than a sentence.
fn is_field_path(text: &str) -> bool {
    !text.is_empty() && !text.contains(' ') && text.chars().next().is_some_and(|c| c == '.' || c.is_ascii_lowercase())
}

pub use oxplane_machinery::golang::go_quote;

/// `resource` or `resource.group`, as Kubernetes names a resource in messages.
pub fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() { resource.to_string() } else { format!("{resource}.{group}") }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.reason.code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = self.to_status().to_string();
        let mut response = (code, body).into_response();
        response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if matches!(self.reason, Reason::TooManyRequests | Reason::ServiceUnavailable) {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_reads_like_kubernetes() {
        let status = ApiError::not_found("", "configmaps", "cm1").to_status();
        assert_eq!(status["message"], "configmaps \"cm1\" not found");
        assert_eq!(status["reason"], "NotFound");
        assert_eq!(status["code"], 404);
        assert_eq!(status["details"]["kind"], "configmaps");
        let status = ApiError::conflict("example.com", "widgets", "w").to_status();
        assert_eq!(status["code"], 409);
        assert!(status["message"].as_str().unwrap().starts_with("Operation cannot be fulfilled on widgets.example.com \"w\""));
    }
}
