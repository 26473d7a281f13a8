//! Conversion between the wire messages ([`super::proto::v1`]) and the plain values of
//! [`crate::protocol`], both ways.
//!
//! The conversion is lossless for everything the protocol can carry. Two limits come from the
//! protocol itself, not from this code: a `google.protobuf.Struct` number is a double, so a JSON
//! integer survives only up to 2^53 (a whole double within that range comes back as a JSON
//! integer, as Kubernetes' decoders read it), and a `Struct` holds only objects, so `input`,
//! `context` and resources must be JSON objects (anything else is refused with an error rather
//! than silently changed).

use std::collections::BTreeMap;
use std::time::Duration;

use prost_types::value::Kind;
use serde_json::{Map, Number, Value};

use super::proto::v1 as pb;
use crate::protocol::{
    Capability, Condition, ConditionStatus, Credentials, FnResult, Match, Ready, RequestMeta, Requirements, Resource, ResourceSelector, Resources, ResponseMeta,
    RunFunctionRequest, RunFunctionResponse, Schema, SchemaSelector, Severity, State, Target,
};

/// A value that has no wire form, or a wire message that has no value form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConversionError(pub String);

/// The largest integer a double holds exactly (2^53): whole doubles up to this come back as
/// JSON integers.
const MAX_EXACT_INTEGER: f64 = 9_007_199_254_740_992.0;

// ---- JSON <-> google.protobuf.Struct -------------------------------------------------------

/// A JSON object as a `Struct`; `None` for JSON null (an absent struct).
pub fn struct_from_json(value: &Value, what: &str) -> Result<Option<prost_types::Struct>, ConversionError> {
    match value {
        Value::Null => Ok(None),
        Value::Object(map) => Ok(Some(struct_from_map(map)?)),
        other => Err(ConversionError(format!("{what} must be a JSON object, not {}", json_type(other)))),
    }
}

fn struct_from_map(map: &Map<String, Value>) -> Result<prost_types::Struct, ConversionError> {
    let mut fields = BTreeMap::new();
    for (key, value) in map {
        fields.insert(key.clone(), value_from_json(value)?);
    }
    Ok(prost_types::Struct { fields })
}

fn value_from_json(value: &Value) -> Result<prost_types::Value, ConversionError> {
    let kind = match value {
        Value::Null => Kind::NullValue(0),
        Value::Bool(b) => Kind::BoolValue(*b),
        Value::Number(n) => {
            let f = n.as_f64().ok_or_else(|| ConversionError(format!("number {n} cannot be represented as a double")))?;
            Kind::NumberValue(f)
        }
        Value::String(s) => Kind::StringValue(s.clone()),
        Value::Array(items) => Kind::ListValue(prost_types::ListValue { values: items.iter().map(value_from_json).collect::<Result<_, _>>()? }),
        Value::Object(map) => Kind::StructValue(struct_from_map(map)?),
    };
    Ok(prost_types::Value { kind: Some(kind) })
}

/// A `Struct` as a JSON object.
pub fn json_from_struct(value: &prost_types::Struct) -> Result<Value, ConversionError> {
    let mut map = Map::new();
    for (key, field) in &value.fields {
        map.insert(key.clone(), json_from_value(field)?);
    }
    Ok(Value::Object(map))
}

fn json_from_value(value: &prost_types::Value) -> Result<Value, ConversionError> {
    Ok(match &value.kind {
        None | Some(Kind::NullValue(_)) => Value::Null,
        Some(Kind::BoolValue(b)) => Value::Bool(*b),
        Some(Kind::NumberValue(f)) => json_number(*f)?,
        Some(Kind::StringValue(s)) => Value::String(s.clone()),
        Some(Kind::ListValue(list)) => Value::Array(list.values.iter().map(json_from_value).collect::<Result<_, _>>()?),
        Some(Kind::StructValue(s)) => json_from_struct(s)?,
    })
}

fn json_number(f: f64) -> Result<Value, ConversionError> {
    // -0.0 has no integer form: it stays a double, so its sign survives the round trip.
    if f.fract() == 0.0 && f.abs() <= MAX_EXACT_INTEGER && !(f == 0.0 && f.is_sign_negative()) {
        // Exact: |f| <= 2^53 fits an i64 without rounding.
        #[allow(clippy::cast_possible_truncation)]
        return Ok(Value::Number(Number::from(f as i64)));
    }
    Number::from_f64(f).map(Value::Number).ok_or_else(|| ConversionError(format!("number {f} is not valid JSON")))
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn optional_struct(value: Option<&Value>, what: &str) -> Result<Option<prost_types::Struct>, ConversionError> {
    match value {
        None => Ok(None),
        // `Some(null)` has no wire form distinct from absence; it is sent as absent.
        Some(value) => struct_from_json(value, what),
    }
}

fn optional_json(value: Option<&prost_types::Struct>) -> Result<Option<Value>, ConversionError> {
    value.map(json_from_struct).transpose()
}

// ---- Requests ------------------------------------------------------------------------------

/// A request as its wire message.
pub fn request_to_proto(request: &RunFunctionRequest) -> Result<pb::RunFunctionRequest, ConversionError> {
    Ok(pb::RunFunctionRequest {
        meta: Some(pb::RequestMeta {
            tag: request.meta.tag.clone(),
            capabilities: request.meta.capabilities.iter().map(|c| capability_to_proto(*c) as i32).collect(),
        }),
        observed: Some(state_to_proto(&request.observed)?),
        desired: Some(state_to_proto(&request.desired)?),
        input: optional_struct(request.input.as_ref(), "input")?,
        context: optional_struct(request.context.as_ref(), "context")?,
        extra_resources: resources_map_to_proto(&request.extra_resources)?,
        credentials: request
            .credentials
            .iter()
            .map(|(name, Credentials::CredentialData(data))| {
                let source = pb::credentials::Source::CredentialData(pb::CredentialData { data: data.clone() });
                (name.clone(), pb::Credentials { source: Some(source) })
            })
            .collect(),
        required_resources: resources_map_to_proto(&request.required_resources)?,
        required_schemas: request
            .required_schemas
            .iter()
            .map(|(name, schema)| Ok((name.clone(), pb::Schema { openapi_v3: optional_struct(schema.openapi_v3.as_ref(), "openapi_v3")? })))
            .collect::<Result<_, ConversionError>>()?,
    })
}

/// A wire request as a value.
pub fn request_from_proto(request: &pb::RunFunctionRequest) -> Result<RunFunctionRequest, ConversionError> {
    let meta = request.meta.clone().unwrap_or_default();
    Ok(RunFunctionRequest {
        meta: RequestMeta { tag: meta.tag, capabilities: meta.capabilities.iter().map(|c| capability_from_proto(*c)).collect() },
        observed: state_from_proto(request.observed.as_ref())?,
        desired: state_from_proto(request.desired.as_ref())?,
        input: optional_json(request.input.as_ref())?,
        context: optional_json(request.context.as_ref())?,
        extra_resources: resources_map_from_proto(&request.extra_resources)?,
        credentials: request
            .credentials
            .iter()
            .filter_map(|(name, credentials)| match &credentials.source {
                Some(pb::credentials::Source::CredentialData(data)) => Some((name.clone(), Credentials::CredentialData(data.data.clone()))),
                None => None,
            })
            .collect(),
        required_resources: resources_map_from_proto(&request.required_resources)?,
        required_schemas: request
            .required_schemas
            .iter()
            .map(|(name, schema)| Ok((name.clone(), Schema { openapi_v3: optional_json(schema.openapi_v3.as_ref())? })))
            .collect::<Result<_, ConversionError>>()?,
    })
}

fn capability_to_proto(capability: Capability) -> pb::Capability {
    match capability {
        Capability::Unspecified => pb::Capability::Unspecified,
        Capability::Capabilities => pb::Capability::Capabilities,
        Capability::RequiredResources => pb::Capability::RequiredResources,
        Capability::Credentials => pb::Capability::Credentials,
        Capability::Conditions => pb::Capability::Conditions,
        Capability::RequiredSchemas => pb::Capability::RequiredSchemas,
    }
}

fn capability_from_proto(value: i32) -> Capability {
    match pb::Capability::try_from(value) {
        Ok(pb::Capability::Capabilities) => Capability::Capabilities,
        Ok(pb::Capability::RequiredResources) => Capability::RequiredResources,
        Ok(pb::Capability::Credentials) => Capability::Credentials,
        Ok(pb::Capability::Conditions) => Capability::Conditions,
        Ok(pb::Capability::RequiredSchemas) => Capability::RequiredSchemas,
        // A capability newer than this code: it cannot use it either way.
        Ok(pb::Capability::Unspecified) | Err(_) => Capability::Unspecified,
    }
}

// ---- State ---------------------------------------------------------------------------------

fn state_to_proto(state: &State) -> Result<pb::State, ConversionError> {
    Ok(pb::State {
        composite: state.composite.as_ref().map(resource_to_proto).transpose()?,
        resources: state.resources.iter().map(|(name, r)| Ok((name.clone(), resource_to_proto(r)?))).collect::<Result<_, ConversionError>>()?,
    })
}

fn state_from_proto(state: Option<&pb::State>) -> Result<State, ConversionError> {
    let Some(state) = state else { return Ok(State::default()) };
    Ok(State {
        composite: state.composite.as_ref().map(resource_from_proto).transpose()?,
        resources: state.resources.iter().map(|(name, r)| Ok((name.clone(), resource_from_proto(r)?))).collect::<Result<_, ConversionError>>()?,
    })
}

fn resource_to_proto(resource: &Resource) -> Result<pb::Resource, ConversionError> {
    Ok(pb::Resource {
        resource: struct_from_json(&resource.resource, "a resource")?,
        connection_details: resource.connection_details.clone(),
        ready: match resource.ready {
            Ready::Unspecified => pb::Ready::Unspecified,
            Ready::True => pb::Ready::True,
            Ready::False => pb::Ready::False,
        } as i32,
    })
}

fn resource_from_proto(resource: &pb::Resource) -> Result<Resource, ConversionError> {
    Ok(Resource {
        resource: resource.resource.as_ref().map(json_from_struct).transpose()?.unwrap_or(Value::Null),
        connection_details: resource.connection_details.clone(),
        ready: match pb::Ready::try_from(resource.ready) {
            Ok(pb::Ready::True) => Ready::True,
            Ok(pb::Ready::False) => Ready::False,
            // Anything else is not READY_TRUE, which is all a caller asks of it.
            Ok(pb::Ready::Unspecified) | Err(_) => Ready::Unspecified,
        },
    })
}

fn resources_map_to_proto(map: &BTreeMap<String, Resources>) -> Result<BTreeMap<String, pb::Resources>, ConversionError> {
    map.iter()
        .map(|(name, resources)| Ok((name.clone(), pb::Resources { items: resources.items.iter().map(resource_to_proto).collect::<Result<_, _>>()? })))
        .collect()
}

fn resources_map_from_proto(map: &BTreeMap<String, pb::Resources>) -> Result<BTreeMap<String, Resources>, ConversionError> {
    map.iter()
        .map(|(name, resources)| Ok((name.clone(), Resources { items: resources.items.iter().map(resource_from_proto).collect::<Result<_, _>>()? })))
        .collect()
}

// ---- Responses -----------------------------------------------------------------------------

/// A response as its wire message.
pub fn response_to_proto(response: &RunFunctionResponse) -> Result<pb::RunFunctionResponse, ConversionError> {
    Ok(pb::RunFunctionResponse {
        meta: Some(pb::ResponseMeta { tag: response.meta.tag.clone(), ttl: response.meta.ttl.map(duration_to_proto) }),
        desired: Some(state_to_proto(&response.desired)?),
        results: response
            .results
            .iter()
            .map(|r| pb::Result {
                severity: match r.severity {
                    Severity::Unspecified => pb::Severity::Unspecified,
                    Severity::Fatal => pb::Severity::Fatal,
                    Severity::Warning => pb::Severity::Warning,
                    Severity::Normal => pb::Severity::Normal,
                } as i32,
                message: r.message.clone(),
                reason: r.reason.clone(),
                target: r.target.map(target_to_proto),
            })
            .collect(),
        context: optional_struct(response.context.as_ref(), "context")?,
        requirements: Some(requirements_to_proto(&response.requirements)),
        conditions: response
            .conditions
            .iter()
            .map(|c| pb::Condition {
                r#type: c.type_.clone(),
                status: match c.status {
                    ConditionStatus::Unspecified => pb::Status::ConditionUnspecified,
                    ConditionStatus::Unknown => pb::Status::ConditionUnknown,
                    ConditionStatus::True => pb::Status::ConditionTrue,
                    ConditionStatus::False => pb::Status::ConditionFalse,
                } as i32,
                reason: c.reason.clone(),
                message: c.message.clone(),
                target: c.target.map(target_to_proto),
            })
            .collect(),
        output: optional_struct(response.output.as_ref(), "output")?,
    })
}

/// A wire response as a value.
pub fn response_from_proto(response: &pb::RunFunctionResponse) -> Result<RunFunctionResponse, ConversionError> {
    let meta = response.meta.clone().unwrap_or_default();
    Ok(RunFunctionResponse {
        meta: ResponseMeta { tag: meta.tag, ttl: meta.ttl.map(duration_from_proto) },
        desired: state_from_proto(response.desired.as_ref())?,
        results: response
            .results
            .iter()
            .map(|r| FnResult {
                severity: match pb::Severity::try_from(r.severity) {
                    Ok(pb::Severity::Fatal) => Severity::Fatal,
                    Ok(pb::Severity::Warning) => Severity::Warning,
                    Ok(pb::Severity::Normal) => Severity::Normal,
                    // An unknown severity is treated as unspecified (a warning), as Crossplane does.
                    Ok(pb::Severity::Unspecified) | Err(_) => Severity::Unspecified,
                },
                message: r.message.clone(),
                reason: r.reason.clone(),
                target: r.target.map(target_from_proto),
            })
            .collect(),
        context: optional_json(response.context.as_ref())?,
        requirements: response.requirements.as_ref().map(requirements_from_proto).unwrap_or_default(),
        conditions: response
            .conditions
            .iter()
            .map(|c| Condition {
                type_: c.r#type.clone(),
                status: match pb::Status::try_from(c.status) {
                    Ok(pb::Status::ConditionUnknown) => ConditionStatus::Unknown,
                    Ok(pb::Status::ConditionTrue) => ConditionStatus::True,
                    Ok(pb::Status::ConditionFalse) => ConditionStatus::False,
                    Ok(pb::Status::ConditionUnspecified) | Err(_) => ConditionStatus::Unspecified,
                },
                reason: c.reason.clone(),
                message: c.message.clone(),
                target: c.target.map(target_from_proto),
            })
            .collect(),
        output: optional_json(response.output.as_ref())?,
    })
}

fn target_to_proto(target: Target) -> i32 {
    let target = match target {
        Target::Unspecified => pb::Target::Unspecified,
        Target::Composite => pb::Target::Composite,
        Target::CompositeAndClaim => pb::Target::CompositeAndClaim,
    };
    target as i32
}

fn target_from_proto(value: i32) -> Target {
    match pb::Target::try_from(value) {
        Ok(pb::Target::Composite) => Target::Composite,
        Ok(pb::Target::CompositeAndClaim) => Target::CompositeAndClaim,
        // Unspecified (or unknown) targets the composite.
        Ok(pb::Target::Unspecified) | Err(_) => Target::Unspecified,
    }
}

fn duration_to_proto(duration: Duration) -> prost_types::Duration {
    prost_types::Duration { seconds: i64::try_from(duration.as_secs()).unwrap_or(i64::MAX), nanos: duration.subsec_nanos() as i32 }
}

fn duration_from_proto(duration: prost_types::Duration) -> Duration {
    // A negative TTL means "already expired": zero.
    if duration.seconds < 0 || duration.nanos < 0 {
        return Duration::ZERO;
    }
    Duration::new(duration.seconds as u64, duration.nanos.min(999_999_999) as u32)
}

fn requirements_to_proto(requirements: &Requirements) -> pb::Requirements {
    pb::Requirements {
        extra_resources: requirements.extra_resources.iter().map(|(k, s)| (k.clone(), selector_to_proto(s))).collect(),
        resources: requirements.resources.iter().map(|(k, s)| (k.clone(), selector_to_proto(s))).collect(),
        schemas: requirements
            .schemas
            .iter()
            .map(|(k, s)| (k.clone(), pb::SchemaSelector { api_version: s.api_version.clone(), kind: s.kind.clone() }))
            .collect(),
    }
}

fn requirements_from_proto(requirements: &pb::Requirements) -> Requirements {
    Requirements {
        extra_resources: requirements.extra_resources.iter().map(|(k, s)| (k.clone(), selector_from_proto(s))).collect(),
        resources: requirements.resources.iter().map(|(k, s)| (k.clone(), selector_from_proto(s))).collect(),
        schemas: requirements
            .schemas
            .iter()
            .map(|(k, s)| (k.clone(), SchemaSelector { api_version: s.api_version.clone(), kind: s.kind.clone() }))
            .collect(),
    }
}

fn selector_to_proto(selector: &ResourceSelector) -> pb::ResourceSelector {
    pb::ResourceSelector {
        api_version: selector.api_version.clone(),
        kind: selector.kind.clone(),
        r#match: Some(match &selector.matching {
            Match::Name(name) => pb::resource_selector::Match::MatchName(name.clone()),
            Match::Labels(labels) => pb::resource_selector::Match::MatchLabels(pb::MatchLabels { labels: labels.clone() }),
        }),
        namespace: selector.namespace.clone(),
    }
}

fn selector_from_proto(selector: &pb::ResourceSelector) -> ResourceSelector {
    ResourceSelector {
        api_version: selector.api_version.clone(),
        kind: selector.kind.clone(),
        matching: match &selector.r#match {
            Some(pb::resource_selector::Match::MatchName(name)) => Match::Name(name.clone()),
            Some(pb::resource_selector::Match::MatchLabels(labels)) => Match::Labels(labels.labels.clone()),
            // No match at all selects every resource of the kind: no labels to match.
            None => Match::Labels(BTreeMap::new()),
        },
        namespace: selector.namespace.clone(),
    }
}

#[cfg(test)]
#[path = "convert_tests.rs"]
mod tests;
