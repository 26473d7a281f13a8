//! The annotations of managed resources, and the "critical" write that saves them.
//!
//! The external name and the create intent are what a provider needs to find an external
//! resource again after a crash. They are saved by a merge patch of these annotations alone —
//! never skipped because of management policies, never lost to an unrelated conflict.

use serde_json::{Map, Value, json};

use crate::client::{ApiError, Kube};
use crate::kinds::Kind;
use crate::object;

/// `crossplane.io/external-name`.
pub const EXTERNAL_NAME: &str = "crossplane.io/external-name";
/// `crossplane.io/external-create-pending`: a create is about to be attempted (RFC 3339 time).
pub const CREATE_PENDING: &str = "crossplane.io/external-create-pending";
/// `crossplane.io/external-create-succeeded`.
pub const CREATE_SUCCEEDED: &str = "crossplane.io/external-create-succeeded";
/// `crossplane.io/external-create-failed`.
pub const CREATE_FAILED: &str = "crossplane.io/external-create-failed";
/// `crossplane.io/paused`: only `"true"` pauses.
pub const PAUSED: &str = "crossplane.io/paused";
/// `crossplane.io/poll-interval`: a Go duration overriding the poll interval.
pub const POLL_INTERVAL: &str = "crossplane.io/poll-interval";
/// `crossplane.io/reconcile-requested-at`: an opaque token asking for a reconcile now.
pub const RECONCILE_REQUESTED_AT: &str = "crossplane.io/reconcile-requested-at";

/// The annotations the critical write saves.
pub const CRITICAL: [&str; 4] = [EXTERNAL_NAME, CREATE_PENDING, CREATE_SUCCEEDED, CREATE_FAILED];

/// Acknowledges a new `crossplane.io/reconcile-requested-at` token by recording it in
/// `status.lastHandledReconcileAt`; whether there was a new one.
pub fn take_reconcile_request(object: &mut Value) -> bool {
    let Some(token) = object::annotation(object, RECONCILE_REQUESTED_AT).map(str::to_string) else {
        return false;
    };
    if object.pointer("/status/lastHandledReconcileAt").and_then(Value::as_str) == Some(token.as_str()) {
        return false;
    }
    let Some(root) = object.as_object_mut() else { return false };
    let status = root.entry("status").or_insert_with(|| json!({}));
    if !status.is_object() {
        *status = json!({});
    }
    status["lastHandledReconcileAt"] = Value::String(token);
    true
}

/// Whether the object is paused by annotation.
pub fn is_paused(object: &Value) -> bool {
    object::annotation(object, PAUSED) == Some("true")
}

/// A create was started and its outcome was never recorded: `external-create-pending` is
/// newer than both `-succeeded` and `-failed`.
pub fn create_outcome_unknown(object: &Value) -> bool {
    let time = |key| object::annotation(object, key).and_then(object::parse_time);
    let Some(pending) = time(CREATE_PENDING) else { return false };
    time(CREATE_SUCCEEDED).is_none_or(|t| pending > t) && time(CREATE_FAILED).is_none_or(|t| pending > t)
}

/// Whether a create intent (`external-create-pending`) stamped now would be later than every
/// recorded outcome. The timestamps hold whole seconds (as Crossplane writes them), so an
/// intent stamped in the same second as the last failure would look settled by it, and a
/// crash or a lost response after that create would go unnoticed: the create would be
/// repeated. A retry waits for the clock instead.
pub fn intent_would_be_newest(object: &Value) -> bool {
    let Some(now) = object::parse_time(&object::now_rfc3339()) else { return true };
    let time = |key| object::annotation(object, key).and_then(object::parse_time);
    [CREATE_SUCCEEDED, CREATE_FAILED].into_iter().filter_map(time).all(|outcome| outcome < now)
}

/// Records a create outcome (`key` is `external-create-succeeded` or `-failed`) at the current
/// second, or at the intent's should the clock be behind it: an outcome is never older than
/// the intent it settles.
pub fn stamp_outcome(object: &mut Value, key: &str) {
    let now = object::now_rfc3339();
    let pending = object::annotation(object, CREATE_PENDING).map(str::to_string);
    let later = match (pending.as_deref().and_then(object::parse_time), object::parse_time(&now)) {
        (Some(pending_at), Some(now_at)) if pending_at > now_at => pending.unwrap_or(now),
        _ => now,
    };
    object::set_annotation(object, key, &later);
}

/// Saves the critical annotations of `object` (as they are in memory) with a merge patch,
/// retrying a few times: this write must not be lost. Updates `object`'s metadata from the
/// answer.
pub async fn save_critical(kube: &Kube, kind: &Kind, object: &mut Value) -> Result<(), ApiError> {
    let mut annotations = Map::new();
    for key in CRITICAL {
        annotations.insert(key.to_string(), object::annotation(object, key).map_or(Value::Null, |v| Value::String(v.into())));
    }
    let patch = json!({"metadata": {"annotations": annotations}});
    let (namespace, name) = (object::namespace(object).map(str::to_string), object::name(object).unwrap_or_default().to_string());
    let mut last = None;
    for attempt in 0..5u32 {
        match kube.merge_patch(kind, namespace.as_deref(), &name, &patch).await {
            Ok(saved) => {
                if let (Some(metadata), Some(root)) = (saved.get("metadata"), object.as_object_mut()) {
                    root.insert("metadata".into(), metadata.clone());
                }
                return Ok(());
            }
            Err(error) if error.is_not_found() || error.is_invalid() => return Err(error),
            Err(error) => {
                last = Some(error);
                tokio::time::sleep(std::time::Duration::from_millis(100 * u64::from(attempt + 1))).await;
            }
        }
    }
    Err(last.unwrap_or_else(|| ApiError::transport("critical annotations not saved")))
}

/// Parses a positive Go duration (`90s`, `1m30s`, `1.5h`, `500ms`): what
/// `crossplane.io/poll-interval` holds. `None` for anything else, or for zero or negative
/// values.
pub fn parse_go_duration(text: &str) -> Option<std::time::Duration> {
    parse_go_duration_or_zero(text).filter(|d| !d.is_zero())
}

/// Parses a Go duration as Go's `time.ParseDuration` does, zero included (`0`, `0s`, `-0s`);
/// negative durations and anything Go refuses are `None`.
pub fn parse_go_duration_or_zero(text: &str) -> Option<std::time::Duration> {
    oxplane_machinery::golang::duration::parse(text.trim()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn go_durations() {
        assert_eq!(parse_go_duration("90s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_go_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_go_duration("1.5h"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("500ms"), Some(Duration::from_millis(500)));
        for bad in ["", "0s", "-1s", "10", "s", "1x", "1m-", "abc"] {
            assert_eq!(parse_go_duration(bad), None, "{bad}");
        }
        assert_eq!(parse_go_duration_or_zero("0s"), Some(Duration::ZERO));
        assert_eq!(parse_go_duration_or_zero("0"), Some(Duration::ZERO));
        assert_eq!(parse_go_duration_or_zero("-0s"), Some(Duration::ZERO));
        assert_eq!(parse_go_duration_or_zero("-1s"), None);
    }

    #[test]
    fn a_new_intent_waits_for_a_later_second_than_the_last_outcome() {
        let now = object::now_rfc3339();
        let mut o = json!({"metadata": {}});
        assert!(intent_would_be_newest(&o));
        object::set_annotation(&mut o, CREATE_FAILED, "2020-01-01T00:00:00Z");
        assert!(intent_would_be_newest(&o));
        object::set_annotation(&mut o, CREATE_FAILED, &now);
        // (Unless the clock moved on to the next second meanwhile.)
        assert!(!intent_would_be_newest(&o) || object::now_rfc3339() != now);
        object::set_annotation(&mut o, CREATE_FAILED, "2020-01-01T00:00:00Z");
        object::set_annotation(&mut o, CREATE_SUCCEEDED, "2999-01-01T00:00:00Z");
        assert!(!intent_would_be_newest(&o));
    }

    #[test]
    fn an_outcome_is_never_older_than_its_intent() {
        let mut o = json!({"metadata": {}});
        object::set_annotation(&mut o, CREATE_PENDING, "2999-01-01T00:00:00Z");
        stamp_outcome(&mut o, CREATE_FAILED);
        assert_eq!(object::annotation(&o, CREATE_FAILED), Some("2999-01-01T00:00:00Z"));
        assert!(!create_outcome_unknown(&o));
        object::set_annotation(&mut o, CREATE_PENDING, "2020-01-01T00:00:00Z");
        stamp_outcome(&mut o, CREATE_SUCCEEDED);
        let succeeded = object::annotation(&o, CREATE_SUCCEEDED).and_then(object::parse_time).unwrap();
        assert!(succeeded > object::parse_time("2020-01-01T00:00:00Z").unwrap());
    }

    #[test]
    fn create_outcome_is_unknown_only_when_pending_is_newest() {
        let with = |pairs: &[(&str, &str)]| {
            let mut o = json!({"metadata": {}});
            for (k, v) in pairs {
                object::set_annotation(&mut o, k, v);
            }
            o
        };
        let t1 = "2026-01-01T00:00:01Z";
        let t2 = "2026-01-01T00:00:02Z";
        assert!(!create_outcome_unknown(&with(&[])));
        assert!(create_outcome_unknown(&with(&[(CREATE_PENDING, t1)])));
        assert!(create_outcome_unknown(&with(&[(CREATE_PENDING, t2), (CREATE_SUCCEEDED, t1)])));
        assert!(!create_outcome_unknown(&with(&[(CREATE_PENDING, t1), (CREATE_SUCCEEDED, t2)])));
        assert!(!create_outcome_unknown(&with(&[(CREATE_PENDING, t1), (CREATE_FAILED, t2)])));
        assert!(!create_outcome_unknown(&with(&[(CREATE_PENDING, "garbage")])));
    }
}
