//! What happens to an object between the request body and the store, kind by kind: the
//! `apiVersion`/`kind` check, normalisation (Secrets fold `stringData` into `data`), for kinds
//! with a schema defaulting, pruning of unknown fields and validation — with the
//! `fieldValidation` parameter deciding whether unknown or duplicate fields are an error
//! (`Strict`), a `Warning` header (`Warn`, the default) or silently dropped (`Ignore`) — and
//! kind-specific validation (CRDs, ConfigMap and Secret data).

use serde_json::{Value, json};

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
/// body, when it is the object itself). Defaults come from `defaults` (the version the object
/// is stored in, for an update through another one), else from `resource`. Returns the
/// warnings to send.
pub fn admit(
    resource: &ResourceDef,
    defaults: Option<&ResourceDef>,
    object: &mut Value,
    name: &str,
    mode: FieldValidation,
    raw: Option<&[u8]>,
    old: Option<&Value>,
) -> Result<Vec<String>, ApiError> {
    let mut problems = Vec::new();
    if mode != FieldValidation::Ignore
        && let Some(raw) = raw
        && let Ok(duplicates) = duplicate_fields(raw)
    {
        problems.extend(duplicates.into_iter().map(|path| format!("duplicate field \"{path}\"")));
    }
    // Custom resources are defaulted and validated by their schema; built-in kinds only lose
    // unknown fields (their own checks run in `validate`).
    let custom = resource.crd.is_some();
    if let Some(schema) = &resource.validation {
        if custom {
            match defaults.and_then(|d| d.validation.as_ref()) {
                Some(stored) => stored.0.default(object),
                None => schema.0.default(object),
            }
        }
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
    if let Some(schema) = resource.validation.as_ref().filter(|_| custom) {
        let errors = schema.0.validate_update(object, old);
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

/// Checks (or fills in) `apiVersion` and `kind` against the URL's resource.
pub(super) fn check_type(resource: &ResourceDef, object: &mut Value) -> Result<(), ApiError> {
    let expected = (resource.api_version(), resource.kind.clone());
    let found = (
        object.get("apiVersion").and_then(Value::as_str).unwrap_or_default().to_string(),
        object.get("kind").and_then(Value::as_str).unwrap_or_default().to_string(),
    );
    if found.0.is_empty() && found.1.is_empty() {
        object["apiVersion"] = json!(expected.0);
        object["kind"] = json!(expected.1);
        return Ok(());
    }
    if found != expected {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({}) does not match the expected API version ({}) or the kind ({}) does not match the expected kind ({})",
            found.0, expected.0, found.1, expected.1
        )));
    }
    Ok(())
}

/// Kind-specific normalisation on every write: Secrets fold `stringData` into `data`.
pub(super) fn normalize(resource: &ResourceDef, object: &mut Value) -> Result<(), ApiError> {
    if resource.group.is_empty() && resource.kind == "Secret" {
        use base64::Engine;
        let string_data = object.as_object_mut().and_then(|o| o.remove("stringData"));
        if let Some(Value::Object(entries)) = string_data {
            let data = object.as_object_mut().map(|o| o.entry("data").or_insert_with(|| json!({})));
            if let Some(Value::Object(data)) = data {
                for (key, value) in entries {
                    let text = value.as_str().ok_or_else(|| {
                        ApiError::bad_request(format!(
                            "Secret in version \"v1\" cannot be handled as a Secret: stringData.{key} must be a string"
                        ))
                    })?;
                    data.insert(key, json!(base64::engine::general_purpose::STANDARD.encode(text)));
                }
            }
        }
        if object.get("type").is_none() {
            object["type"] = json!("Opaque");
        }
    }
    Ok(())
}

/// Whether `resource` is the CustomResourceDefinition kind itself.
pub(crate) fn is_crd(resource: &ResourceDef) -> bool {
    resource.group == "apiextensions.k8s.io" && resource.kind == "CustomResourceDefinition"
}

/// Kind-specific validation of the object about to be stored.
pub(super) fn validate(resource: &ResourceDef, object: &Value, name: &str) -> Result<(), ApiError> {
    let causes = crate::objects::validate_labels_and_annotations(object);
    if !causes.is_empty() {
        return Err(ApiError::invalid(&resource.kind, &resource.group, name, causes));
    }
    if is_crd(resource) {
        let causes = crate::crd::validate(object);
        if !causes.is_empty() {
            return Err(ApiError::invalid(&resource.kind, &resource.group, name, causes));
        }
    }
    if resource.group.is_empty() && matches!(resource.kind.as_str(), "ConfigMap" | "Secret") {
        check_data_maps(resource, object)?;
    }
    if resource.group == "admissionregistration.k8s.io" {
        let causes = crate::webhooks::config::validate(object, resource.kind == "MutatingWebhookConfiguration");
        if !causes.is_empty() {
            return Err(ApiError::invalid(&resource.kind, &resource.group, name, causes));
        }
    }
    Ok(())
}

/// ConfigMap and Secret data are maps of strings, base64 where the kind says so; Kubernetes
/// refuses anything else when decoding the body (400), so nothing malformed is ever stored.
fn check_data_maps(resource: &ResourceDef, object: &Value) -> Result<(), ApiError> {
    use base64::Engine;
    let base64_fields: &[&str] = if resource.kind == "Secret" { &["data"] } else { &["binaryData"] };
    for field in ["data", "binaryData"] {
        let Some(value) = object.get(field) else { continue };
        if value.is_null() {
            continue;
        }
        let map = value.as_object().ok_or_else(|| {
            ApiError::bad_request(format!("{} in version \"v1\" cannot be handled as a {}: {field} must be a map of strings", resource.kind, resource.kind))
        })?;
        for (key, entry) in map {
            let text = entry.as_str().ok_or_else(|| {
                ApiError::bad_request(format!(
                    "{} in version \"v1\" cannot be handled as a {}: {field}.{key} must be a string",
                    resource.kind, resource.kind
                ))
            })?;
            if base64_fields.contains(&field) && base64::engine::general_purpose::STANDARD.decode(text).is_err() {
                return Err(ApiError::bad_request(format!(
                    "{} in version \"v1\" cannot be handled as a {}: {field}.{key} is not valid base64",
                    resource.kind, resource.kind
                )));
            }
        }
    }
    Ok(())
}

