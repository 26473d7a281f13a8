//! A webhook's `matchConditions`: CEL expressions over `object`, `oldObject` and `request` (the
//! AdmissionRequest being sent), evaluated with the `cel` crate as the CRD validation rules are.
//! As kube-apiserver: a condition that is false skips the webhook, whatever the others say; an
//! error (with no condition false) is a failed call, handled by the webhook's failurePolicy.
//! `authorizer` is not offered.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};

use cel::objects::Key;
use serde_json::Value as Json;

use super::config::MatchCondition;

/// Compiles one expression (the `cel` parser's panics caught).
pub fn compile(expression: &str) -> Result<cel::Program, String> {
    catch_unwind(|| cel::Program::compile(expression))
        .map_err(|_| "the CEL parser failed".to_string())?
        .map_err(|e| e.to_string())
}

/// Whether the webhook is to be called: `Ok(true)` when every condition holds, `Ok(false)` when
/// one is false, `Err` naming the first condition that could not be evaluated otherwise.
pub fn matches(conditions: &[MatchCondition], object: &Json, old: &Json, request: &Json) -> Result<bool, String> {
    if conditions.is_empty() {
        return Ok(true);
    }
    let mut context = cel::Context::default();
    context.add_variable_from_value("object", value(object));
    context.add_variable_from_value("oldObject", value(old));
    context.add_variable_from_value("request", value(request));
    let mut error = None;
    for condition in conditions {
        let outcome = compile(&condition.expression).and_then(|program| {
            catch_unwind(AssertUnwindSafe(|| program.execute(&context)))
                .map_err(|_| "the CEL interpreter failed".to_string())?
                .map_err(|e| e.to_string())
        });
        match outcome {
            Ok(cel::Value::Bool(true)) => {}
            Ok(cel::Value::Bool(false)) => return Ok(false),
            Ok(other) => {
                error.get_or_insert_with(|| format!("matchCondition '{}': expected a bool, got {}", condition.name, other.type_of()));
            }
            Err(e) => {
                error.get_or_insert_with(|| format!("matchCondition '{}' evaluation failed: {e}", condition.name));
            }
        }
    }
    match error {
        Some(error) => Err(error),
        None => Ok(true),
    }
}

/// JSON as Kubernetes types unstructured data for CEL: integral numbers are ints.
fn value(v: &Json) -> cel::Value {
    match v {
        Json::Null => cel::Value::Null,
        Json::Bool(b) => cel::Value::Bool(*b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => cel::Value::Int(i),
            None => cel::Value::Float(n.as_f64().unwrap_or_default()),
        },
        Json::String(s) => cel::Value::String(s.clone().into()),
        Json::Array(items) => cel::Value::List(items.iter().map(value).collect::<Vec<_>>().into()),
        Json::Object(map) => {
            let entries: HashMap<Key, cel::Value> = map.iter().map(|(k, v)| (Key::from(k.as_str()), value(v))).collect();
            cel::Value::Map(entries.into())
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use super::*;

    fn condition(name: &str, expression: &str) -> MatchCondition {
        MatchCondition { name: name.into(), expression: expression.into() }
    }

    #[test]
    fn false_wins_over_errors_and_errors_over_true() {
        let object = json!({"metadata": {"name": "a", "labels": {"team": "x"}}});
        let request = json!({"userInfo": {"username": "alice"}, "operation": "CREATE"});
        let yes = condition("yes", "object.metadata.labels.team == 'x'");
        let no = condition("no", "request.userInfo.username == 'bob'");
        let broken = condition("broken", "object.spec.missing == 1");
        assert_eq!(matches(&[yes.clone()], &object, &Json::Null, &request), Ok(true));
        assert_eq!(matches(&[broken.clone(), no], &object, &Json::Null, &request), Ok(false));
        let error = matches(&[yes, broken], &object, &Json::Null, &request).unwrap_err();
        assert!(error.starts_with("matchCondition 'broken' evaluation failed"), "{error}");
        assert!(matches(&[condition("int", "1 + 1")], &object, &Json::Null, &request).is_err());
        assert_eq!(matches(&[condition("old", "oldObject == null")], &object, &Json::Null, &request), Ok(true));
    }
}
