//! The label and field selection of a list or watch request, checked against the fields the
//! resource supports (Kubernetes refuses unsupported field selectors with 400).

use serde_json::Value;

use crate::registry::ResourceDef;
use crate::selectors::{FieldSelector, LabelSelector, field_value};
use crate::status::ApiError;

/// Field selectors every resource supports.
const COMMON_FIELDS: [&str; 2] = ["metadata.name", "metadata.namespace"];
/// Extra field selectors of core Events (the fields `kubectl describe` filters on).
const EVENT_FIELDS: [&str; 10] = [
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "type",
];

/// A request's selection.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    label: LabelSelector,
    field: FieldSelector,
}

fn supported(resource: &ResourceDef, field: &str) -> bool {
    if COMMON_FIELDS.contains(&field) {
        return true;
    }
    match (resource.group.as_str(), resource.kind.as_str()) {
        ("", "Event") => EVENT_FIELDS.contains(&field) || field == "source",
        ("", "Secret") => field == "type",
        ("", "Namespace") => field == "status.phase",
        _ => false,
    }
}

/// The value a field selector compares for `field`.
fn lookup(object: &Value, field: &str) -> Option<String> {
    match field {
        "source" => field_value(object, "source.component"),
        _ => field_value(object, field),
    }
}

impl Selection {
    /// Parses the `labelSelector` and `fieldSelector` parameters for `resource`.
    pub fn parse(resource: &ResourceDef, label: Option<&str>, field: Option<&str>) -> Result<Selection, ApiError> {
        let label = match label {
            Some(text) => LabelSelector::parse(text).map_err(|e| ApiError::bad_request(e.message()))?,
            None => LabelSelector::everything(),
        };
        let field = match field {
            Some(text) => FieldSelector::parse(text).map_err(|e| ApiError::bad_request(e.message()))?,
            None => FieldSelector::everything(),
        };
        field
            .check_supported(|f| supported(resource, f))
            .map_err(|e| ApiError::bad_request(e.message()))?;
        Ok(Selection { label, field })
    }

    /// Whether nothing is filtered out.
    pub fn is_everything(&self) -> bool {
        self.label.is_empty() && self.field.is_empty()
    }

    /// Whether `object` is selected.
    pub fn matches(&self, object: &Value) -> bool {
        self.label.matches_object(object) && self.field.matches(|f| lookup(object, f))
    }
}
