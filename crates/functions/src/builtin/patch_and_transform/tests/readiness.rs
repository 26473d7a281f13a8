//! Each readiness check type, on the observed composed resource.

use serde_json::{Value, json};

use super::super::compile::{ReadinessCheck, compile_input};
use super::super::readiness::is_ready;
use crate::golang::value::float;

/// Compiles a readiness check through a template, so defaults and validation apply as for
/// real input.
fn check(raw: Value) -> ReadinessCheck {
    let input = json!({"resources": [{"name": "t", "readinessChecks": [raw]}]});
    let compiled = compile_input(Some(&input)).unwrap();
    compiled.templates[0].readiness_checks[0].clone()
}

fn observed() -> Value {
    json!({
        "status": {
            "phase": "Running",
            "replicas": float(3.0),
            "ok": true,
            "bad": false,
            "empty": "",
            "conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "Synced", "status": "False"}
            ]
        }
    })
}

fn ready(raw: Value) -> Result<bool, String> {
    is_ready(&observed(), &[check(raw)])
}

#[test]
fn match_string() {
    assert_eq!(
        ready(json!({"type": "MatchString", "fieldPath": "status.phase", "matchString": "Running"})),
        Ok(true)
    );
    assert_eq!(
        ready(json!({"type": "MatchString", "fieldPath": "status.phase", "matchString": "Pending"})),
        Ok(false)
    );
    assert_eq!(
        ready(json!({"type": "MatchString", "fieldPath": "status.nope", "matchString": "x"})),
        Ok(false)
    );
    assert_eq!(
        ready(json!({"type": "MatchString", "fieldPath": "status.ok", "matchString": "true"})),
        Err("cannot run readiness check at index 0: status.ok: not a string".to_string())
    );
}

#[test]
fn match_integer_on_float64_observed_numbers() {
    assert_eq!(
        ready(json!({"type": "MatchInteger", "fieldPath": "status.replicas", "matchInteger": 3})),
        Ok(true)
    );
    assert_eq!(
        ready(json!({"type": "MatchInteger", "fieldPath": "status.replicas", "matchInteger": 2})),
        Ok(false)
    );
    assert_eq!(
        ready(json!({"type": "MatchInteger", "fieldPath": "status.nope", "matchInteger": 2})),
        Ok(false)
    );
    assert_eq!(
        ready(json!({"type": "MatchInteger", "fieldPath": "status.phase", "matchInteger": 2})),
        Err("cannot run readiness check at index 0: status.phase: not a (int64) number".to_string())
    );
}

#[test]
fn non_empty_true_false_and_none() {
    assert_eq!(ready(json!({"type": "NonEmpty", "fieldPath": "status.phase"})), Ok(true));
    // NonEmpty only asks that the field exists.
    assert_eq!(ready(json!({"type": "NonEmpty", "fieldPath": "status.empty"})), Ok(true));
    assert_eq!(ready(json!({"type": "NonEmpty", "fieldPath": "status.nope"})), Ok(false));
    assert_eq!(ready(json!({"type": "MatchTrue", "fieldPath": "status.ok"})), Ok(true));
    assert_eq!(ready(json!({"type": "MatchTrue", "fieldPath": "status.bad"})), Ok(false));
    assert_eq!(ready(json!({"type": "MatchTrue", "fieldPath": "status.nope"})), Ok(false));
    assert_eq!(ready(json!({"type": "MatchFalse", "fieldPath": "status.bad"})), Ok(true));
    assert_eq!(ready(json!({"type": "MatchFalse", "fieldPath": "status.ok"})), Ok(false));
    assert_eq!(
        ready(json!({"type": "MatchFalse", "fieldPath": "status.phase"})),
        Err("cannot run readiness check at index 0: status.phase: not a bool".to_string())
    );
    assert_eq!(ready(json!({"type": "None"})), Ok(true));
    assert_eq!(is_ready(&json!({}), &[check(json!({"type": "None"}))]), Ok(true));
}

#[test]
fn match_condition_with_defaults() {
    assert_eq!(ready(json!({"type": "MatchCondition"})), Ok(true));
    assert_eq!(
        ready(json!({"type": "MatchCondition", "matchCondition": {"type": "Synced", "status": "False"}})),
        Ok(true)
    );
    assert_eq!(ready(json!({"type": "MatchCondition", "matchCondition": {"type": "Synced"}})), Ok(false));
    // A condition that is not there has status Unknown.
    assert_eq!(
        ready(json!({"type": "MatchCondition", "matchCondition": {"type": "Healthy", "status": "Unknown"}})),
        Ok(true)
    );
    assert_eq!(is_ready(&json!({}), &[check(json!({"type": "MatchCondition"}))]), Ok(false));
}

#[test]
fn all_checks_must_pass_and_the_default_is_ready_true() {
    let both = [
        check(json!({"type": "MatchString", "fieldPath": "status.phase", "matchString": "Running"})),
        check(json!({"type": "MatchTrue", "fieldPath": "status.bad"})),
    ];
    assert_eq!(is_ready(&observed(), &both), Ok(false));
    assert_eq!(is_ready(&observed(), &both[..1]), Ok(true));
    assert_eq!(is_ready(&observed(), &ReadinessCheck::default_checks()), Ok(true));
    let not_ready = json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}});
    assert_eq!(is_ready(&not_ready, &ReadinessCheck::default_checks()), Ok(false));
}

#[test]
fn invalid_checks_are_refused() {
    let refuse = |raw: Value| {
        let input = json!({"resources": [{"name": "t", "readinessChecks": [raw]}]});
        compile_input(Some(&input)).unwrap_err().to_string()
    };
    assert_eq!(
        refuse(json!({"type": "MatchStrings"})),
        "invalid Function input: resources[0].readinessChecks[0].type: Invalid value: \"MatchStrings\": unknown readiness check type"
    );
    assert_eq!(
        refuse(json!({"type": "MatchString", "fieldPath": "a"})),
        "invalid Function input: resources[0].readinessChecks[0].matchString: Required value: cannot be nil for type MatchString"
    );
    assert_eq!(
        refuse(json!({"type": "NonEmpty"})),
        "invalid Function input: resources[0].readinessChecks[0].fieldPath: Required value: cannot be empty"
    );
}
