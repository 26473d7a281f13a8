//! Write responses: how the outcomes of [`crate::ops`] become HTTP answers (codes, `Warning`
//! headers, the `Status` of a completed deletion).

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::validation::with_warnings;
use crate::ops::{Deleted, Written};
use crate::registry::ResourceDef;

/// 201 with the created object.
pub fn created(written: Written) -> Response {
    with_warnings((StatusCode::CREATED, Json(written.object)).into_response(), &written.warnings)
}

/// 200 with the updated object (201 when an apply created it).
pub fn updated(written: Written) -> Response {
    if written.created {
        return created(written);
    }
    with_warnings(Json(written.object).into_response(), &written.warnings)
}

/// A deletion's answer: the object while finalizers hold it, else a `Status` naming it, as
/// Kubernetes answers for most kinds.
pub fn deleted(resource: &ResourceDef, name: &str, outcome: Deleted) -> Response {
    match outcome {
        Deleted::Pending(object) => Json(object).into_response(),
        Deleted::Gone(object) => Json(deleted_status(resource, name, &object)).into_response(),
    }
}

/// The `Status` answering a completed deletion.
pub fn deleted_status(resource: &ResourceDef, name: &str, object: &Value) -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {"name": name, "group": resource.group, "kind": resource.plural, "uid": object["metadata"]["uid"]},
    })
}

/// The list a collection deletion answers with.
pub fn deleted_list(resource: &ResourceDef, items: Vec<Value>) -> Response {
    Json(json!({
        "kind": format!("{}List", resource.kind),
        "apiVersion": resource.api_version(),
        "metadata": {},
        "items": items,
    }))
    .into_response()
}
