//! function-cel-filter: drops desired composed resources whose filter's CEL expression is
//! false.
//!
//! Input: `cel.fn.crossplane.io/v1beta1` `Filters` with `filters[]` (`name`, an RE2 regular
//! expression anchored as `^name$`; `expression`, CEL) and an optional `ttl`. Every
//! expression is evaluated once over `observed`, `desired` (the request's `State`s, with the
//! protobuf field names: `composite`, `resources`, `resource`, `connection_details` as bytes,
//! `ready` as the enum's number) and `context`; a desired composed resource whose name a filter
//! matches is removed when that filter's expression is false. Resources no filter matches are
//! kept. The CEL engine is the `cel` crate the API server's validation rules run on; it has no
//! type checker, so an expression that does not yield a bool is reported when it runs.

use std::collections::HashMap;

use cel::objects::Key;
use serde::Deserialize;
use serde_json::Value as Json;

use crate::golang::duration;
use crate::protocol::{DEFAULT_TTL, FnResult, Ready, Resource, RunFunctionRequest, RunFunctionResponse, State, response_to};

#[derive(Debug, Default, Deserialize)]
struct Input {
    #[serde(default)]
    filters: Vec<Filter>,
    #[serde(default)]
    ttl: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Filter {
    #[serde(default)]
    name: String,
    #[serde(default)]
    expression: String,
}

/// Runs the function.
pub fn run(request: &RunFunctionRequest) -> RunFunctionResponse {
    let mut rsp = response_to(request, DEFAULT_TTL);
    if let Err(message) = filter(request, &mut rsp) {
        rsp.results.push(FnResult::fatal(message));
    }
    rsp
}

fn filter(request: &RunFunctionRequest, rsp: &mut RunFunctionResponse) -> Result<(), String> {
    let input: Input = match &request.input {
        None | Some(Json::Null) => Input::default(),
        Some(v) => serde_json::from_value(v.clone()).map_err(|e| format!("cannot get filters from *v1.RunFunctionRequest: {e}"))?,
    };
    if let Some(ttl) = input.ttl.as_deref().filter(|t| !t.is_empty()) {
        rsp.meta.ttl = Some(duration::parse(ttl).map_err(|e| format!("invalid function input: cannot parse ttl: {e}"))?);
    }
    let mut compiled = Vec::with_capacity(input.filters.len());
    let mut context: Option<cel::Context> = None;
    for (i, f) in input.filters.iter().enumerate() {
        let anchored = format!("^{}$", f.name);
        let re = regex::Regex::new(&anchored)
            .map_err(|e| format!("cannot compile regular expression {anchored:?} for filter {i}: error parsing regexp: {e}"))?;
        let ctx = context.get_or_insert_with(|| variables(request));
        let include = evaluate(ctx, &f.expression)
            .map_err(|e| format!("cannot evaluate CEL expression {:?} for filter {i}: {e}", f.expression))?;
        compiled.push((re, include));
    }
    rsp.desired.resources.retain(|name, _| compiled.iter().all(|(re, include)| !re.is_match(name) || *include));
    Ok(())
}

/// Compiles and runs one expression over `ctx`'s variables; it must yield a bool (a
/// parser or interpreter panic is an error, not a crash).
pub fn evaluate(ctx: &cel::Context, expression: &str) -> Result<bool, String> {
    let program = std::panic::catch_unwind(|| cel::Program::compile(expression))
        .map_err(|_| "cannot parse expression: the CEL parser failed".to_string())?
        .map_err(|e| format!("cannot parse expression: {e}"))?;
    let value = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| program.execute(ctx)))
        .map_err(|_| "cannot evaluate CEL program: the CEL interpreter failed".to_string())?
        .map_err(|e| format!("cannot evaluate CEL program: {e}"))?;
    match value {
        cel::Value::Bool(b) => Ok(b),
        other => Err(format!("expression {expression:?} must return a boolean, but will return {} instead", other.type_of())),
    }
}

/// The CEL variables: `observed`, `desired` and `context`.
fn variables(request: &RunFunctionRequest) -> cel::Context<'static, 'static> {
    let mut ctx = cel::Context::default();
    ctx.add_variable_from_value("observed", state(&request.observed));
    ctx.add_variable_from_value("desired", state(&request.desired));
    ctx.add_variable_from_value("context", request.context.as_ref().map_or_else(|| map(HashMap::new()), json));
    ctx
}

fn map(m: HashMap<Key, cel::Value>) -> cel::Value {
    cel::Value::Map(m.into())
}

fn state(s: &State) -> cel::Value {
    let mut m: HashMap<Key, cel::Value> = HashMap::new();
    m.insert(Key::from("composite"), s.composite.as_ref().map_or_else(|| resource(&Resource::default()), resource));
    let resources: HashMap<Key, cel::Value> = s.resources.iter().map(|(k, r)| (Key::from(k.as_str()), resource(r))).collect();
    m.insert(Key::from("resources"), map(resources));
    map(m)
}

fn resource(r: &Resource) -> cel::Value {
    let mut m: HashMap<Key, cel::Value> = HashMap::new();
    m.insert(Key::from("resource"), if r.resource.is_object() { json(&r.resource) } else { map(HashMap::new()) });
    let details: HashMap<Key, cel::Value> =
        r.connection_details.iter().map(|(k, v)| (Key::from(k.as_str()), cel::Value::Bytes(v.clone().into()))).collect();
    m.insert(Key::from("connection_details"), map(details));
    let ready = match r.ready {
        Ready::Unspecified => 0,
        Ready::True => 1,
        Ready::False => 2,
    };
    m.insert(Key::from("ready"), cel::Value::Int(ready));
    map(m)
}

/// A protobuf `Struct` value in CEL: every number a double.
fn json(v: &Json) -> cel::Value {
    match v {
        Json::Null => cel::Value::Null,
        Json::Bool(b) => cel::Value::Bool(*b),
        Json::Number(n) => cel::Value::Float(n.as_f64().unwrap_or_default()),
        Json::String(s) => cel::Value::String(s.clone().into()),
        Json::Array(items) => cel::Value::List(items.iter().map(json).collect::<Vec<_>>().into()),
        Json::Object(o) => map(o.iter().map(|(k, v)| (Key::from(k.as_str()), json(v))).collect()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;
    use crate::protocol::Severity;

    fn request(filters: Json) -> RunFunctionRequest {
        let mut r = RunFunctionRequest {
            input: Some(json!({"apiVersion": "cel.fn.crossplane.io/v1beta1", "kind": "Filters", "filters": filters})),
            ..Default::default()
        };
        r.observed.composite = Some(Resource { resource: json!({"spec": {"export": "S3", "widgets": 42}}), ..Default::default() });
        for name in ["table", "bucket", "bucket-2"] {
            r.desired.resources.insert(name.into(), Resource { resource: json!({"spec": {"widgets": 42}}), ..Default::default() });
        }
        r.observed.resources.insert(
            "bucket".into(),
            Resource { resource: json!({}), connection_details: BTreeMap::from([("user".into(), b"admin".to_vec())]), ready: Ready::True },
        );
        r.context = Some(json!({"env": "prod"}));
        r
    }

    fn kept(r: &RunFunctionRequest) -> Vec<String> {
        let rsp = run(r);
        assert!(rsp.results.is_empty(), "{:?}", rsp.results);
        rsp.desired.resources.keys().cloned().collect()
    }

    fn fatal(r: &RunFunctionRequest) -> String {
        let rsp = run(r);
        assert_eq!(rsp.results.len(), 1);
        assert_eq!(rsp.results[0].severity, Severity::Fatal);
        rsp.results[0].message.clone()
    }

    #[test]
    fn readme_examples() {
        let keep = |expr: &str| kept(&request(json!([{"name": "bucket", "expression": expr}])));
        assert_eq!(keep("observed.composite.resource.spec.export == \"S3\""), ["bucket", "bucket-2", "table"]);
        assert_eq!(keep("observed.composite.resource.spec.export == \"GCS\""), ["bucket-2", "table"]);
        assert_eq!(keep("observed.composite.resource.spec.widgets == 42"), ["bucket", "bucket-2", "table"]);
        assert_eq!(keep("observed.resources['bucket'].connection_details['user'] == b'admin'"), ["bucket", "bucket-2", "table"]);
        assert_eq!(keep("desired.resources['bucket'].resource.spec.widgets == 41"), ["bucket-2", "table"]);
        assert_eq!(keep("\"bucket\" in desired.resources"), ["bucket", "bucket-2", "table"]);
        assert_eq!(keep("context.env == 'dev'"), ["bucket-2", "table"]);
        assert_eq!(keep("observed.resources['bucket'].ready == 1"), ["bucket", "bucket-2", "table"]);
        // Names are regular expressions anchored at both ends.
        let rsp = kept(&request(json!([{"name": "bucket.*", "expression": "false"}])));
        assert_eq!(rsp, ["table"]);
        // Every matching filter must agree.
        let rsp = kept(&request(json!([{"name": ".*", "expression": "true"}, {"name": "table", "expression": "false"}])));
        assert_eq!(rsp, ["bucket", "bucket-2"]);
    }

    #[test]
    fn errors() {
        assert_eq!(
            fatal(&request(json!([{"name": "b", "expression": "1 + 1"}]))),
            "cannot evaluate CEL expression \"1 + 1\" for filter 0: expression \"1 + 1\" must return a boolean, but will return int instead"
        );
        assert!(fatal(&request(json!([{"name": "b", "expression": "observed.composite.resource.spec.export =="}])))
            .starts_with("cannot evaluate CEL expression \"observed.composite.resource.spec.export ==\" for filter 0: cannot parse expression: "));
        assert!(fatal(&request(json!([{"name": "b", "expression": "observed.composite.resource.spec.nope"}])))
            .starts_with("cannot evaluate CEL expression \"observed.composite.resource.spec.nope\" for filter 0: cannot evaluate CEL program: "));
        assert!(fatal(&request(json!([{"name": "(", "expression": "true"}]))).starts_with("cannot compile regular expression \"^($\" for filter 0: "));
        let mut r = request(json!([]));
        r.input = Some(json!({"filters": [], "ttl": "5m"}));
        assert_eq!(run(&r).meta.ttl, Some(std::time::Duration::from_secs(300)));
    }
}
