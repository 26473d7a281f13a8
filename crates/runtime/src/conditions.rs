//! Crossplane's status conditions: the `Ready` and `Synced` conditions with their reasons, and
//! setting a condition the way Crossplane does — equal conditions (ignoring
//! `lastTransitionTime`, and `observedGeneration` unless both are set) are left alone, so a
//! reconcile that changes nothing writes nothing.

use serde_json::{Map, Value, json};

use crate::object;

/// `Ready`.
pub const READY: &str = "Ready";
/// `Synced`.
pub const SYNCED: &str = "Synced";

/// One condition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    /// The type (`Ready`, `Synced`, ...).
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// A PascalCase reason.
    pub reason: String,
    /// A human-readable message (empty: none).
    pub message: String,
    /// The generation the condition was computed for (0: not stamped).
    pub observed_generation: i64,
}

impl Condition {
    /// A condition without message or generation.
    pub fn new(type_: &str, status: &str, reason: &str) -> Self {
        Condition { type_: type_.into(), status: status.into(), reason: reason.into(), message: String::new(), observed_generation: 0 }
    }

    /// The same condition with a message.
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = message.into();
        self
    }

    /// The same condition stamped with a generation.
    pub fn at_generation(mut self, generation: i64) -> Self {
        self.observed_generation = generation;
        self
    }

    /// `Ready=True`, reason `Available`.
    pub fn available() -> Self {
        Condition::new(READY, "True", "Available")
    }

    /// `Ready=False`, reason `Unavailable`.
    pub fn unavailable() -> Self {
        Condition::new(READY, "False", "Unavailable")
    }

    /// `Ready=False`, reason `Creating`.
    pub fn creating() -> Self {
        Condition::new(READY, "False", "Creating")
    }

    /// `Ready=False`, reason `Deleting`.
    pub fn deleting() -> Self {
        Condition::new(READY, "False", "Deleting")
    }

    /// `Synced=True`, reason `ReconcileSuccess`.
    pub fn reconcile_success() -> Self {
        Condition::new(SYNCED, "True", "ReconcileSuccess")
    }

    /// `Synced=False`, reason `ReconcileError`, with the error as message.
    pub fn reconcile_error(error: impl std::fmt::Display) -> Self {
        Condition::new(SYNCED, "False", "ReconcileError").with_message(error.to_string())
    }

    /// `Synced=False`, reason `ReconcilePaused`.
    pub fn reconcile_paused() -> Self {
        Condition::new(SYNCED, "False", "ReconcilePaused")
    }

    /// Reads a condition from its JSON form.
    pub fn from_json(value: &Value) -> Option<Self> {
        Some(Condition {
            type_: value.get("type")?.as_str()?.to_string(),
            status: value.get("status").and_then(Value::as_str).unwrap_or("Unknown").to_string(),
            reason: value.get("reason").and_then(Value::as_str).unwrap_or_default().to_string(),
            message: value.get("message").and_then(Value::as_str).unwrap_or_default().to_string(),
            observed_generation: value.get("observedGeneration").and_then(Value::as_i64).unwrap_or(0),
        })
    }

    /// The JSON form, with `lastTransitionTime` set to `time`.
    pub fn to_json(&self, time: &str) -> Value {
        let mut out = json!({
            "type": self.type_,
            "status": self.status,
            "reason": self.reason,
            "lastTransitionTime": time,
        });
        if !self.message.is_empty() {
            out["message"] = Value::String(self.message.clone());
        }
        if self.observed_generation != 0 {
            out["observedGeneration"] = json!(self.observed_generation);
        }
        out
    }

    /// Crossplane's equality: type, status, reason and message, and the generation when both
    /// sides carry one.
    pub fn equivalent(&self, other: &Condition) -> bool {
        self.type_ == other.type_
            && self.status == other.status
            && self.reason == other.reason
            && self.message == other.message
            && (self.observed_generation == 0 || other.observed_generation == 0 || self.observed_generation == other.observed_generation)
    }
}

/// The condition of `type_` in `status.conditions`, if any.
pub fn get(object: &Value, type_: &str) -> Option<Condition> {
    object
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
        .and_then(Condition::from_json)
}

/// Whether the condition of `type_` is `True`.
pub fn is_true(object: &Value, type_: &str) -> bool {
    get(object, type_).is_some_and(|c| c.status == "True")
}

/// Sets a condition in `status.conditions`, stamped with the object's generation; whether
/// anything changed. An equivalent condition is left as it is (with its old transition time).
pub fn set(object: &mut Value, condition: Condition) -> bool {
    let generation = object::generation(object);
    let condition = if condition.observed_generation == 0 && generation != 0 { condition.at_generation(generation) } else { condition };
    let Some(root) = object.as_object_mut() else {
        return false;
    };
    let status = root.entry("status").or_insert_with(|| json!({}));
    if !status.is_object() {
        *status = json!({});
    }
    let Some(status) = status.as_object_mut() else {
        return false;
    };
    let list = status.entry("conditions").or_insert_with(|| json!([]));
    if !list.is_array() {
        *list = json!([]);
    }
    let Some(list) = list.as_array_mut() else {
        return false;
    };
    let time = object::now_rfc3339();
    match list.iter().position(|c| c.get("type").and_then(Value::as_str) == Some(condition.type_.as_str())) {
        Some(index) => {
            let existing = Condition::from_json(&list[index]);
            if existing.as_ref().is_some_and(|e| e.equivalent(&condition) && e.observed_generation == condition.observed_generation) {
                return false;
            }
            // Only a real change of state moves the transition time; a newer generation or a
            // reworded message keeps it.
            let time = match (&existing, list[index].get("lastTransitionTime").and_then(Value::as_str)) {
                (Some(e), Some(t)) if e.status == condition.status && e.reason == condition.reason => t.to_string(),
                _ => time,
            };
            list[index] = condition.to_json(&time);
        }
        None => list.push(condition.to_json(&time)),
    }
    true
}

/// Removes the condition of `type_`; whether it was there.
pub fn remove(object: &mut Value, type_: &str) -> bool {
    let Some(list) = object.pointer_mut("/status/conditions").and_then(Value::as_array_mut) else {
        return false;
    };
    let before = list.len();
    list.retain(|c| c.get("type").and_then(Value::as_str) != Some(type_));
    before != list.len()
}

/// A copy of `status` with conditions and everything else, for comparing before and after a
/// reconcile.
pub fn status_of(object: &Value) -> Value {
    object.get("status").cloned().unwrap_or(Value::Object(Map::new()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn setting_an_equal_condition_changes_nothing() {
        let mut mr = json!({"metadata": {"generation": 3}});
        assert!(set(&mut mr, Condition::available()));
        let first = mr.clone();
        assert!(!set(&mut mr, Condition::available()));
        assert_eq!(mr, first);
        assert_eq!(get(&mr, READY).unwrap().observed_generation, 3);
        assert!(is_true(&mr, READY));
    }

    #[test]
    fn a_new_generation_or_reason_is_written() {
        let mut mr = json!({"metadata": {"generation": 1}});
        set(&mut mr, Condition::reconcile_success());
        mr["metadata"]["generation"] = json!(2);
        assert!(set(&mut mr, Condition::reconcile_success()));
        assert_eq!(get(&mr, SYNCED).unwrap().observed_generation, 2);
        assert!(set(&mut mr, Condition::reconcile_error("boom")));
        let synced = get(&mr, SYNCED).unwrap();
        assert_eq!((synced.status.as_str(), synced.reason.as_str(), synced.message.as_str()), ("False", "ReconcileError", "boom"));
        assert_eq!(mr["status"]["conditions"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn conditions_of_other_types_are_kept_and_order_is_stable() {
        let mut mr = json!({"status": {"conditions": [{"type": "Green", "status": "True", "reason": "X", "lastTransitionTime": "2020-01-01T00:00:00Z"}]}});
        set(&mut mr, Condition::creating());
        set(&mut mr, Condition::reconcile_success());
        let types: Vec<&str> = mr["status"]["conditions"].as_array().unwrap().iter().map(|c| c["type"].as_str().unwrap()).collect();
        assert_eq!(types, ["Green", "Ready", "Synced"]);
        assert!(remove(&mut mr, "Green"));
        assert!(get(&mr, "Green").is_none());
    }

    #[test]
    fn a_mistyped_status_is_replaced_not_a_panic() {
        let mut mr = json!({"status": "weird"});
        assert!(set(&mut mr, Condition::deleting()));
        assert_eq!(get(&mr, READY).unwrap().reason, "Deleting");
    }
}
