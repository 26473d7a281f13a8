//! Readiness checks, run against the observed composed resource: all must pass.
//!
//! A field that does not exist fails its check quietly (it may appear later); a field of the
//! wrong type or a malformed path is an error, which the caller reports as a warning.

use serde_json::Value;

use super::compile::ReadinessCheck;
use crate::fieldpath::{FieldPath, FieldPathError};

/// Whether `observed` passes every check.
pub(crate) fn is_ready(observed: &Value, checks: &[ReadinessCheck]) -> Result<bool, String> {
    for (index, check) in checks.iter().enumerate() {
        match run_check(check, observed) {
            Ok(true) => {}
            Ok(false) => return Ok(false),
            Err(e) => return Err(format!("cannot run readiness check at index {index}: {e}")),
        }
    }
    Ok(true)
}

/// The value at `path`, `None` when it does not exist.
fn lookup<'a>(observed: &'a Value, path: &str) -> Result<Option<&'a Value>, FieldPathError> {
    match FieldPath::parse(path)?.get(observed) {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

fn run_check(check: &ReadinessCheck, observed: &Value) -> Result<bool, String> {
    let wrong_type = |path: &str, what: &str| format!("{path}: not a {what}");
    match check {
        ReadinessCheck::None => Ok(true),
        ReadinessCheck::NonEmpty(path) => Ok(lookup(observed, path).map_err(|e| e.to_string())?.is_some()),
        ReadinessCheck::MatchString(path, want) => match lookup(observed, path).map_err(|e| e.to_string())? {
            None => Ok(false),
            Some(Value::String(s)) => Ok(s == want),
            Some(_) => Err(wrong_type(path, "string")),
        },
        ReadinessCheck::MatchInteger(path, want) => {
            match lookup(observed, path).map_err(|e| e.to_string())? {
                None => Ok(false),
                // Crossplane holds observed numbers as float64; an integral one compares as the
                // integer it is.
                Some(Value::Number(n)) => Ok(n.as_i64() == Some(*want) || n.as_f64() == Some(*want as f64)),
                Some(_) => Err(wrong_type(path, "(int64) number")),
            }
        }
        ReadinessCheck::MatchTrue(path) | ReadinessCheck::MatchFalse(path) => {
            let want = matches!(check, ReadinessCheck::MatchTrue(_));
            match lookup(observed, path).map_err(|e| e.to_string())? {
                None => Ok(false),
                Some(Value::Bool(b)) => Ok(*b == want),
                Some(_) => Err(wrong_type(path, "bool")),
            }
        }
        ReadinessCheck::MatchCondition { condition_type, status } => {
            Ok(condition_status(observed, condition_type) == status)
        }
    }
}

/// The status of the condition of type `condition_type`; `Unknown` when there is none, as
/// Crossplane's `GetCondition` reports a missing condition.
pub(crate) fn condition_status<'a>(object: &'a Value, condition_type: &str) -> &'a str {
    object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|conditions| {
            conditions.iter().find(|c| c.get("type").and_then(Value::as_str) == Some(condition_type))
        })
        .and_then(|c| c.get("status").and_then(Value::as_str))
        .unwrap_or("Unknown")
}
