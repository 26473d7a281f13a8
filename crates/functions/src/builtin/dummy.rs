//! function-dummy: answers the response written in its input.
//!
//! Input: `dummy.fn.crossplane.io/v1beta1` `Response` whose `response` is a
//! `RunFunctionResponse` in protobuf's JSON form (`desired`, `results`, `context`,
//! `requirements`, `conditions`, `meta`, `output`; camelCase or proto field names, enums by
//! name or number, bytes in base64, durations as `"60s"`). As the real function does, the
//! response to the request (desired state and context passed through, one minute TTL) is
//! overlaid with it by protobuf's merge rules: a set scalar replaces, lists append, map
//! entries (composed resources, `Struct` fields, connection details) replace entry by entry,
//! messages merge field by field.

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine;
use serde_json::{Map, Value};

use crate::protocol::{
    Condition, ConditionStatus, DEFAULT_TTL, FnResult, Match, Ready, Resource, ResourceSelector, RunFunctionRequest,
    RunFunctionResponse, SchemaSelector, Severity, State, Target, response_to,
};

/// Runs the function.
pub fn run(request: &RunFunctionRequest) -> RunFunctionResponse {
    let mut rsp = response_to(request, DEFAULT_TTL);
    let overlay = match &request.input {
        Some(Value::Object(input)) => input.get("response").cloned().unwrap_or(Value::Null),
        _ => Value::Null,
    };
    let result = match &overlay {
        Value::Object(o) => merge_response(&mut rsp, o),
        Value::Null => Err("proto: syntax error (line 1:1): unexpected token".to_string()),
        _ => Err("proto: syntax error (line 1:1): unexpected token".to_string()),
    };
    if let Err(e) = result {
        let mut failed = response_to(request, DEFAULT_TTL);
        failed.results.push(FnResult::fatal(format!("cannot unmarshal RunFunctionResponse from *v1.RunFunctionRequest: {e}")));
        return failed;
    }
    rsp
}

/// A field of a message by its JSON or proto name.
fn field<'v>(o: &'v Map<String, Value>, json: &str, proto: &str) -> Option<&'v Value> {
    o.get(json).or_else(|| o.get(proto)).filter(|v| !v.is_null())
}

fn check_fields(o: &Map<String, Value>, known: &[&str], message: &str) -> Result<(), String> {
    for k in o.keys() {
        if !known.contains(&k.as_str()) {
            return Err(format!("proto: ({message}) unknown field {k:?}"));
        }
    }
    Ok(())
}

fn merge_response(rsp: &mut RunFunctionResponse, o: &Map<String, Value>) -> Result<(), String> {
    check_fields(o, &["meta", "desired", "results", "context", "requirements", "conditions", "output"], "RunFunctionResponse")?;
    if let Some(Value::Object(meta)) = field(o, "meta", "meta") {
        if let Some(tag) = meta.get("tag").and_then(Value::as_str).filter(|t| !t.is_empty()) {
            rsp.meta.tag = tag.to_string();
        }
        if let Some(ttl) = meta.get("ttl").and_then(Value::as_str) {
            let d = proto_duration(ttl)?;
            if !d.is_zero() {
                rsp.meta.ttl = Some(d);
            }
        }
    }
    if let Some(Value::Object(desired)) = field(o, "desired", "desired") {
        merge_state(&mut rsp.desired, desired)?;
    }
    for r in field(o, "results", "results").and_then(Value::as_array).into_iter().flatten() {
        rsp.results.push(result(r)?);
    }
    if let Some(Value::Object(ctx)) = field(o, "context", "context") {
        rsp.context = Some(merge_struct(rsp.context.take(), ctx));
    }
    if let Some(Value::Object(req)) = field(o, "requirements", "requirements") {
        for (json, proto, extra) in [("extraResources", "extra_resources", true), ("resources", "resources", false)] {
            if let Some(Value::Object(m)) = field(req, json, proto) {
                for (k, v) in m {
                    let sel = selector(v)?;
                    if extra {
                        rsp.requirements.extra_resources.insert(k.clone(), sel);
                    } else {
                        rsp.requirements.resources.insert(k.clone(), sel);
                    }
                }
            }
        }
        if let Some(Value::Object(m)) = field(req, "schemas", "schemas") {
            for (k, v) in m {
                let s = |f: &str, p: &str| field(v.as_object().unwrap_or(&Map::new()), f, p).and_then(Value::as_str).unwrap_or_default().to_string();
                rsp.requirements.schemas.insert(k.clone(), SchemaSelector { api_version: s("apiVersion", "api_version"), kind: s("kind", "kind") });
            }
        }
    }
    for c in field(o, "conditions", "conditions").and_then(Value::as_array).into_iter().flatten() {
        rsp.conditions.push(condition(c)?);
    }
    if let Some(Value::Object(out)) = field(o, "output", "output") {
        rsp.output = Some(merge_struct(rsp.output.take(), out));
    }
    Ok(())
}

/// A `Struct` merged into another: top-level fields replace.
fn merge_struct(dst: Option<Value>, src: &Map<String, Value>) -> Value {
    let mut m = match dst {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    for (k, v) in src {
        m.insert(k.clone(), v.clone());
    }
    Value::Object(m)
}

fn merge_state(dst: &mut State, o: &Map<String, Value>) -> Result<(), String> {
    if let Some(Value::Object(c)) = field(o, "composite", "composite") {
        let mut composite = dst.composite.take().unwrap_or_default();
        merge_resource(&mut composite, c)?;
        dst.composite = Some(composite);
    }
    if let Some(Value::Object(rs)) = field(o, "resources", "resources") {
        for (name, r) in rs {
            let mut fresh = Resource::default();
            if let Value::Object(r) = r {
                merge_resource(&mut fresh, r)?;
            }
            dst.resources.insert(name.clone(), fresh);
        }
    }
    Ok(())
}

fn merge_resource(dst: &mut Resource, o: &Map<String, Value>) -> Result<(), String> {
    check_fields(o, &["resource", "connectionDetails", "connection_details", "ready"], "Resource")?;
    if let Some(Value::Object(r)) = field(o, "resource", "resource") {
        dst.resource = merge_struct(Some(std::mem::take(&mut dst.resource)), r);
    }
    if let Some(Value::Object(cd)) = field(o, "connectionDetails", "connection_details") {
        for (k, v) in cd {
            dst.connection_details.insert(k.clone(), proto_bytes(v.as_str().unwrap_or_default())?);
        }
    }
    if let Some(r) = field(o, "ready", "ready") {
        let ready = match (r.as_str(), r.as_i64()) {
            (Some("READY_TRUE"), _) | (_, Some(1)) => Ready::True,
            (Some("READY_FALSE"), _) | (_, Some(2)) => Ready::False,
            (Some("READY_UNSPECIFIED"), _) | (_, Some(0)) => Ready::Unspecified,
            _ => return Err(format!("proto: invalid value for enum field ready: {r}")),
        };
        if ready != Ready::Unspecified {
            dst.ready = ready;
        }
    }
    Ok(())
}

/// protojson bytes: standard or URL-safe base64, padded or not.
fn proto_bytes(s: &str) -> Result<Vec<u8>, String> {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    for engine in [&STANDARD, &STANDARD_NO_PAD, &URL_SAFE, &URL_SAFE_NO_PAD] {
        if let Ok(b) = engine.decode(s) {
            return Ok(b);
        }
    }
    Err(format!("proto: invalid value for bytes field: {s:?}"))
}

/// protojson `Duration`: decimal seconds ending in `s`.
fn proto_duration(s: &str) -> Result<Duration, String> {
    s.strip_suffix('s')
        .and_then(|n| n.parse::<f64>().ok())
        .and_then(|f| Duration::try_from_secs_f64(f).ok())
        .ok_or_else(|| format!("proto: invalid google.protobuf.Duration value {s:?}"))
}

fn enum_of<T: Copy>(v: Option<&Value>, names: &[(&str, T)], default: T, what: &str) -> Result<T, String> {
    match v {
        None | Some(Value::Null) => Ok(default),
        Some(Value::String(s)) => names.iter().find(|(n, _)| n == s).map(|(_, t)| *t).ok_or_else(|| format!("proto: invalid value for enum field {what}: {s:?}")),
        Some(Value::Number(n)) => n
            .as_u64()
            .and_then(|i| names.get(i as usize))
            .map(|(_, t)| *t)
            .ok_or_else(|| format!("proto: invalid value for enum field {what}: {n}")),
        Some(other) => Err(format!("proto: invalid value for enum field {what}: {other}")),
    }
}

const TARGETS: [(&str, Option<Target>); 3] =
    [("TARGET_UNSPECIFIED", None), ("TARGET_COMPOSITE", Some(Target::Composite)), ("TARGET_COMPOSITE_AND_CLAIM", Some(Target::CompositeAndClaim))];

fn result(v: &Value) -> Result<FnResult, String> {
    let o = v.as_object().cloned().unwrap_or_default();
    let severity = enum_of(
        o.get("severity"),
        &[
            ("SEVERITY_UNSPECIFIED", Severity::Unspecified),
            ("SEVERITY_FATAL", Severity::Fatal),
            ("SEVERITY_WARNING", Severity::Warning),
            ("SEVERITY_NORMAL", Severity::Normal),
        ],
        Severity::Unspecified,
        "severity",
    )?;
    let target = enum_of(o.get("target"), &TARGETS, None, "target")?;
    Ok(FnResult {
        severity,
        message: o.get("message").and_then(Value::as_str).unwrap_or_default().to_string(),
        reason: o.get("reason").and_then(Value::as_str).map(str::to_string),
        target,
    })
}

fn condition(v: &Value) -> Result<Condition, String> {
    let o = v.as_object().cloned().unwrap_or_default();
    let status = enum_of(
        o.get("status"),
        &[
            ("STATUS_CONDITION_UNSPECIFIED", ConditionStatus::Unspecified),
            ("STATUS_CONDITION_UNKNOWN", ConditionStatus::Unknown),
            ("STATUS_CONDITION_TRUE", ConditionStatus::True),
            ("STATUS_CONDITION_FALSE", ConditionStatus::False),
        ],
        ConditionStatus::Unspecified,
        "status",
    )?;
    Ok(Condition {
        type_: o.get("type").and_then(Value::as_str).unwrap_or_default().to_string(),
        status,
        reason: o.get("reason").and_then(Value::as_str).unwrap_or_default().to_string(),
        message: o.get("message").and_then(Value::as_str).map(str::to_string),
        target: enum_of(o.get("target"), &TARGETS, None, "target")?,
    })
}

fn selector(v: &Value) -> Result<ResourceSelector, String> {
    let o = v.as_object().cloned().unwrap_or_default();
    let s = |j: &str, p: &str| field(&o, j, p).and_then(Value::as_str).unwrap_or_default().to_string();
    let matching = match (field(&o, "matchName", "match_name"), field(&o, "matchLabels", "match_labels")) {
        (Some(Value::String(n)), _) => Match::Name(n.clone()),
        (_, Some(Value::Object(l))) => {
            let labels = l.get("labels").and_then(Value::as_object).cloned().unwrap_or_default();
            Match::Labels(labels.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string())).collect::<BTreeMap<_, _>>())
        }
        _ => return Err("proto: ResourceSelector: one of match_name or match_labels is required".into()),
    };
    let namespace = field(&o, "namespace", "namespace").and_then(Value::as_str).map(str::to_string);
    Ok(ResourceSelector { api_version: s("apiVersion", "api_version"), kind: s("kind", "kind"), matching, namespace })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use serde_json::json;

    use super::*;

    /// function-dummy's own example.
    fn example() -> Value {
        json!({
            "apiVersion": "dummy.fn.crossplane.io/v1beta1",
            "kind": "Response",
            "response": {
                "desired": {
                    "composite": {
                        "resource": {"status": {"widgets": 200}},
                        "connectionDetails": {"very": "c2VjcmV0"}
                    },
                    "resources": {
                        "cool-resource": {
                            "resource": {"apiVersion": "example.org/v1", "kind": "Composed", "spec": {"forProvider": {"widgets": 200}}},
                            "ready": "READY_TRUE"
                        }
                    }
                },
                "results": [{"severity": "SEVERITY_NORMAL", "message": "I did the thing!"}]
            }
        })
    }

    #[test]
    fn answers_its_input_merged_over_the_request() {
        let mut req = RunFunctionRequest { input: Some(example()), ..Default::default() };
        req.meta.tag = "t".into();
        req.desired.composite = Some(Resource { resource: json!({"apiVersion": "example.crossplane.io/v1", "kind": "XR", "status": {"old": 1}}), ..Default::default() });
        req.desired.resources.insert("earlier".into(), Resource { resource: json!({"kind": "Earlier"}), ..Default::default() });
        req.context = Some(json!({"keep": true}));
        let rsp = run(&req);
        assert_eq!(rsp.meta.tag, "t");
        assert_eq!(rsp.meta.ttl, Some(DEFAULT_TTL));
        let xr = rsp.desired.composite.as_ref().unwrap();
        // A Struct's top-level fields replace: status is the overlay's.
        assert_eq!(xr.resource, json!({"apiVersion": "example.crossplane.io/v1", "kind": "XR", "status": {"widgets": 200}}));
        assert_eq!(xr.connection_details["very"], b"secret");
        assert_eq!(rsp.desired.resources["cool-resource"].ready, Ready::True);
        assert_eq!(rsp.desired.resources["cool-resource"].resource["spec"]["forProvider"]["widgets"], json!(200));
        assert!(rsp.desired.resources.contains_key("earlier"));
        assert_eq!(rsp.results, vec![FnResult::normal("I did the thing!")]);
        assert_eq!(rsp.context, Some(json!({"keep": true})));
    }

    #[test]
    fn every_field_of_the_response() {
        let input = json!({"response": {
            "meta": {"ttl": "30s", "tag": "ignored-unless-set"},
            "context": {"k": "v"},
            "requirements": {"resources": {"cm": {"apiVersion": "v1", "kind": "ConfigMap", "matchName": "x", "namespace": "ns"}},
                             "extra_resources": {"l": {"api_version": "v1", "kind": "Secret", "match_labels": {"labels": {"a": "b"}}}}},
            "conditions": [{"type": "Custom", "status": "STATUS_CONDITION_TRUE", "reason": "Because", "target": "TARGET_COMPOSITE_AND_CLAIM"}],
            "results": [{"severity": 1, "message": "boom", "reason": "Failed", "target": "TARGET_COMPOSITE"}],
            "output": {"o": 1}
        }});
        let rsp = run(&RunFunctionRequest { input: Some(input), ..Default::default() });
        assert_eq!(rsp.meta.ttl, Some(Duration::from_secs(30)));
        assert_eq!(rsp.meta.tag, "ignored-unless-set");
        assert_eq!(rsp.context, Some(json!({"k": "v"})));
        assert_eq!(rsp.requirements.resources["cm"].matching, Match::Name("x".into()));
        assert_eq!(rsp.requirements.resources["cm"].namespace.as_deref(), Some("ns"));
        assert_eq!(rsp.requirements.extra_resources["l"].matching, Match::Labels(BTreeMap::from([("a".into(), "b".into())])));
        assert_eq!(rsp.conditions[0].status, ConditionStatus::True);
        assert_eq!(rsp.conditions[0].target, Some(Target::CompositeAndClaim));
        assert_eq!(rsp.results[0].severity, Severity::Fatal);
        assert_eq!(rsp.results[0].reason.as_deref(), Some("Failed"));
        assert_eq!(rsp.output, Some(json!({"o": 1})));
    }

    #[test]
    fn bad_input_is_a_fatal_result() {
        let rsp = run(&RunFunctionRequest { input: Some(json!({"response": {"bogus": 1}})), ..Default::default() });
        assert_eq!(rsp.results.len(), 1);
        assert_eq!(rsp.results[0].severity, Severity::Fatal);
        assert_eq!(rsp.results[0].message, "cannot unmarshal RunFunctionResponse from *v1.RunFunctionRequest: proto: (RunFunctionResponse) unknown field \"bogus\"");
    }
}
