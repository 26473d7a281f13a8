//! jq expressions (URLs, bodies, checks and secret mappings of provider-http) evaluated with
//! jaq, a jq implementation in Rust. Values cross between serde_json and jaq as JSON text:
//! jaq's value type is its own, and the text form is the one both sides agree on exactly.

use jaq_core::load::{Arena, File, Loader};
use jaq_core::{Compiler, Ctx, Vars, data, unwrap_valr};
use jaq_json::{Val, read};
use serde_json::Value;

/// A jq expression that did not parse, compile or run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("jq expression {expression:?}: {message}")]
pub struct JqError {
    /// The expression.
    pub expression: String,
    /// What went wrong.
    pub message: String,
}

fn error(expression: &str, message: impl Into<String>) -> JqError {
    JqError { expression: expression.to_string(), message: message.into() }
}

/// Every output of `expression` run on `input`.
pub fn eval(expression: &str, input: &Value) -> Result<Vec<Value>, JqError> {
    let defs = jaq_core::defs().chain(jaq_std::defs()).chain(jaq_json::defs());
    let funs = jaq_core::funs().chain(jaq_std::funs()).chain(jaq_json::funs());
    let loader = Loader::new(defs);
    let arena = Arena::default();
    let program = File { code: expression, path: () };
    let modules = loader.load(&arena, program).map_err(|errors| error(expression, format!("cannot parse: {errors:?}")))?;
    let filter = Compiler::default().with_funs(funs).compile(modules).map_err(|errors| error(expression, format!("cannot compile: {errors:?}")))?;
    let text = serde_json::to_string(input).map_err(|e| error(expression, e.to_string()))?;
    let input = read::parse_single(text.as_bytes()).map_err(|e| error(expression, format!("bad input: {e:?}")))?;
    let ctx = Ctx::<data::JustLut<Val>>::new(&filter.lut, Vars::new([]));
    let mut outputs = Vec::new();
    for output in filter.id.run((ctx, input)).map(unwrap_valr) {
        let value = output.map_err(|e| error(expression, format!("{e}")))?;
        let text = value.to_string();
        outputs.push(serde_json::from_str(&text).map_err(|e| error(expression, format!("output {text} is not JSON: {e}")))?);
    }
    Ok(outputs)
}

/// The first output of `expression` (`null` when there is none).
pub fn eval_one(expression: &str, input: &Value) -> Result<Value, JqError> {
    Ok(eval(expression, input)?.into_iter().next().unwrap_or(Value::Null))
}

/// The first output as text: a string as it is, anything else as JSON (what provider-http
/// sends as a URL or a body).
pub fn eval_string(expression: &str, input: &Value) -> Result<String, JqError> {
    Ok(match eval_one(expression, input)? {
        Value::String(text) => text,
        other => other.to_string(),
    })
}

/// The first output as a boolean; anything else is an error.
pub fn eval_bool(expression: &str, input: &Value) -> Result<bool, JqError> {
    match eval_one(expression, input)? {
        Value::Bool(b) => Ok(b),
        other => Err(error(expression, format!("should return a boolean, returned {other}"))),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    #[test]
    fn urls_bodies_and_checks() {
        let input = json!({"payload": {"baseUrl": "http://127.0.0.1:1/api", "body": {"name": "ann"}}, "response": {"body": {"id": 7}}});
        assert_eq!(eval_string(r#".payload.baseUrl + "/users/" + (.response.body.id|tostring)"#, &input).unwrap(), "http://127.0.0.1:1/api/users/7");
        let body = eval_string(r#"{ username: .payload.body.name, n: 1 }"#, &input).unwrap();
        assert_eq!(serde_json::from_str::<Value>(&body).unwrap(), json!({"username": "ann", "n": 1}));
        assert!(eval_bool(r#".response.body.id == 7"#, &input).unwrap());
        assert_eq!(eval_one(".missing.deeper", &input).unwrap(), Value::Null);
        assert_eq!(eval(".payload.body.name | ascii_upcase", &input).unwrap(), vec![json!("ANN")]);
    }

    #[test]
    fn bad_expressions_are_errors() {
        assert!(eval("{{{", &json!({})).is_err());
        assert!(eval("nosuchfunction(1)", &json!({})).is_err());
        assert!(eval_bool(".a", &json!({"a": 1})).is_err());
        assert!(eval(r#"error("boom")"#, &json!({})).unwrap_err().message.contains("boom"));
    }
}
