//! What happens to a custom resource between the request body and the store: defaulting,
//! pruning of unknown fields, and validation against its CRD's schema, with the
//! `fieldValidation` parameter deciding whether unknown or duplicate fields are an error
//! (`Strict`), a `Warning` header (`Warn`, the default) or silently dropped (`Ignore`).

use axum::http::HeaderValue;
use axum::response::Response;
use serde_json::Value;

use crate::registry::ResourceDef;
use crate::schema::duplicate_fields;
use crate::status::{ApiError, Cause};

/// The `fieldValidation` directive.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FieldValidation {
    /// Drop unknown fields silently.
    Ignore,
    /// Drop them and say so in `Warning` headers.
    #[default]
    Warn,
    /// Refuse the request.
    Strict,
}

impl FieldValidation {
    /// From the query parameter (absent means `Warn`, as in Kubernetes).
    pub fn from_query(value: Option<&str>) -> Result<Self, ApiError> {
        match value {
            None | Some("") | Some("Warn") => Ok(FieldValidation::Warn),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some(other) => Err(ApiError::bad_request(format!(
                "fieldValidation: Unsupported value: \"{other}\": supported values: \"Ignore\", \"Strict\", \"Warn\""
            ))),
        }
    }
}

/// Defaults, prunes and validates `object` (for kinds with a schema), and applies the
/// field-validation directive to unknown fields and to duplicate fields of `raw` (the request
/// body, when it is the object itself). Returns the warnings to send.
pub fn admit(
    resource: &ResourceDef,
    object: &mut Value,
    name: &str,
    mode: FieldValidation,
    raw: Option<&[u8]>,
) -> Result<Vec<String>, ApiError> {
    let mut problems = Vec::new();
    if mode != FieldValidation::Ignore
        && let Some(raw) = raw
        && let Ok(duplicates) = duplicate_fields(raw)
    {
        problems.extend(duplicates.into_iter().map(|path| format!("duplicate field \"{path}\"")));
    }
    if let Some(schema) = &resource.validation {
        schema.0.default(object);
        let pruned = schema.0.prune(object);
        if mode != FieldValidation::Ignore {
            problems.extend(pruned.into_iter().map(|path| format!("unknown field \"{}\"", path.trim_start_matches('.'))));
        }
    }
    if mode == FieldValidation::Strict && !problems.is_empty() {
        return Err(ApiError::bad_request(format!(
            "{kind} in version \"{version}\" cannot be handled as a {kind}: strict decoding error: {}",
            problems.join(", "),
            kind = resource.kind,
            version = resource.version,
        )));
    }
    if let Some(schema) = &resource.validation {
        let errors = schema.0.validate(object);
        if !errors.is_empty() {
            let causes = errors
                .into_iter()
                .map(|e| Cause { reason: e.reason.as_str().to_string(), message: e.message, field: e.field })
                .collect();
            return Err(ApiError::invalid(&resource.kind, &resource.group, name, causes));
        }
    }
    Ok(problems)
}

/// Adds `Warning: 299 - "..."` headers, which kubectl prints.
pub fn with_warnings(mut response: Response, warnings: &[String]) -> Response {
    for warning in warnings {
        let text = format!("299 - \"{}\"", warning.replace('\\', "\\\\").replace('"', "\\\""));
        if let Ok(value) = HeaderValue::from_str(&text) {
            response.headers_mut().append("Warning", value);
        }
    }
    response
}
