//! Conversion between a resource's stored form and the version a client asked for.
//!
//! Custom resources have one storage for every served version and conversion `None`: only
//! `apiVersion` changes. Events are stored in the core `v1` shape and also served as
//! `events.k8s.io/v1`, whose fields have other names (`regarding` for `involvedObject`, `note`
//! for `message`, ...); every field of either shape has a place in the core one, so nothing is
//! lost either way.

use serde_json::{Map, Value, json};

use crate::registry::ResourceDef;

/// Whether objects of `resource` are stored in the events.k8s.io shape's counterpart.
fn is_events_v1(resource: &ResourceDef) -> bool {
    resource.group == "events.k8s.io" && resource.kind == "Event"
}

/// Whether `object` (as stored) must be converted to be shown as `resource`.
pub fn needs_conversion(resource: &ResourceDef, object: &Value) -> bool {
    is_events_v1(resource)
        || (resource.crd.is_some() && object.get("apiVersion").and_then(Value::as_str) != Some(resource.api_version().as_str()))
}

/// Shows a stored object as `resource` (the version the client asked for).
pub fn present(resource: &ResourceDef, object: &mut Value) {
    if is_events_v1(resource) {
        core_to_events_v1(object);
    } else if needs_conversion(resource, object) {
        object["apiVersion"] = Value::String(resource.api_version());
    }
}

/// Turns an object written through `resource` into its stored form.
pub fn to_storage(resource: &ResourceDef, object: &mut Value) {
    if is_events_v1(resource) {
        events_v1_to_core(object);
    }
}

/// Moves `from` to `to` in `map` if present.
fn rename(map: &mut Map<String, Value>, from: &str, to: &str) {
    if let Some(value) = map.remove(from) {
        map.insert(to.to_string(), value);
    }
}

fn core_to_events_v1(object: &mut Value) {
    let Some(map) = object.as_object_mut() else { return };
    map.insert("apiVersion".into(), json!("events.k8s.io/v1"));
    rename(map, "involvedObject", "regarding");
    rename(map, "message", "note");
    rename(map, "reportingComponent", "reportingController");
    rename(map, "source", "deprecatedSource");
    rename(map, "firstTimestamp", "deprecatedFirstTimestamp");
    rename(map, "lastTimestamp", "deprecatedLastTimestamp");
    rename(map, "count", "deprecatedCount");
    if map.get("reportingController").is_none_or(|v| v.as_str().is_none_or(str::is_empty))
        && let Some(component) = map.get("deprecatedSource").and_then(|s| s.get("component")).cloned()
    {
        map.insert("reportingController".into(), component);
    }
    // events.k8s.io/v1 requires eventTime; core events written without it use their first
    // timestamp (or creation time), with MicroTime precision.
    if map.get("eventTime").is_none_or(Value::is_null) {
        let fallback = map
            .get("deprecatedFirstTimestamp")
            .and_then(Value::as_str)
            .or_else(|| map.get("metadata").and_then(|m| m.get("creationTimestamp")).and_then(Value::as_str))
            .map(micro_time);
        if let Some(time) = fallback {
            map.insert("eventTime".into(), json!(time));
        }
    }
}

fn events_v1_to_core(object: &mut Value) {
    let Some(map) = object.as_object_mut() else { return };
    map.insert("apiVersion".into(), json!("v1"));
    rename(map, "regarding", "involvedObject");
    rename(map, "note", "message");
    rename(map, "reportingController", "reportingComponent");
    rename(map, "deprecatedSource", "source");
    rename(map, "deprecatedFirstTimestamp", "firstTimestamp");
    rename(map, "deprecatedLastTimestamp", "lastTimestamp");
    rename(map, "deprecatedCount", "count");
}

/// `2026-01-02T03:04:05Z` as a MicroTime: `2026-01-02T03:04:05.000000Z`.
fn micro_time(time: &str) -> String {
    match time.strip_suffix('Z') {
        Some(base) if !base.contains('.') => format!("{base}.000000Z"),
        _ => time.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::builtins;

    fn resource(group: &str) -> ResourceDef {
        builtins().into_iter().find(|r| r.kind == "Event" && r.group == group).unwrap()
    }

    #[test]
    fn events_round_trip_between_the_two_views() {
        let core = json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "default", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "involvedObject": {"kind": "ConfigMap", "name": "cm", "namespace": "default"},
            "reason": "Created", "message": "made it", "type": "Normal",
            "source": {"component": "me"}, "firstTimestamp": "2026-01-01T00:00:01Z", "count": 2
        });
        let mut view = core.clone();
        present(&resource("events.k8s.io"), &mut view);
        assert_eq!(view["apiVersion"], "events.k8s.io/v1");
        assert_eq!(view["regarding"]["name"], "cm");
        assert_eq!(view["note"], "made it");
        assert_eq!(view["reportingController"], "me");
        assert_eq!(view["eventTime"], "2026-01-01T00:00:01.000000Z");
        assert_eq!(view["deprecatedCount"], 2);
        let mut back = view.clone();
        to_storage(&resource("events.k8s.io"), &mut back);
        assert_eq!(back["involvedObject"], core["involvedObject"]);
        assert_eq!(back["message"], core["message"]);
        assert_eq!(back["count"], core["count"]);
        let mut untouched = core.clone();
        present(&resource(""), &mut untouched);
        assert_eq!(untouched, core);
    }
}
