//! Events the in-server controllers record about the objects they act on, as core `v1`
//! Events (so `kubectl describe` and `kubectl get events` show them).

use serde_json::{Value, json};

use crate::objects;
use crate::ops::{self, WriteOptions};
use crate::state::AppState;

/// Records an Event about `object` (in its namespace, or `default` for cluster-scoped ones);
/// failures are logged, never returned: an event is worth less than the work it reports.
pub async fn record(state: &AppState, object: &Value, kind: &str, reason: &str, message: &str, component: &str) {
    let Some(resource) = state.registry.find_kind("v1", "Event") else { return };
    let name = objects::meta_str(object, "name").unwrap_or_default();
    let namespace = objects::meta_str(object, "namespace").unwrap_or("default").to_string();
    let now = objects::now_rfc3339();
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let event = json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": format!("{name}.{nanos:x}"), "namespace": namespace},
        "involvedObject": {
            "apiVersion": object["apiVersion"],
            "kind": object["kind"],
            "name": name,
            "namespace": objects::meta_str(object, "namespace"),
            "uid": object["metadata"]["uid"],
        },
        "reason": reason,
        "message": message,
        "type": kind,
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": component,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    });
    if let Err(error) = ops::create(state, &resource, Some(&namespace), event, None, &WriteOptions::internal(component)).await {
        tracing::warn!(%error, reason, "could not record an event");
    }
}
