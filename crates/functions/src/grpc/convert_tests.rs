use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;
use prost::Message;
use serde_json::{Value, json};

use super::*;

/// Any JSON the protocol carries: integers within a double's exact range, any finite
/// fractional number, -0.0, strings, booleans, null, nested arrays and objects.
fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-(1i64 << 53)..=(1i64 << 53)).prop_map(|i| json!(i)),
        any::<f64>().prop_filter("finite fraction", |f| f.is_finite() && f.fract() != 0.0).prop_map(|f| json!(f)),
        // The one whole double with no integer form.
        Just(json!(-0.0)),
        ".{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(".{0,8}", inner, 0..5).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn object() -> impl Strategy<Value = Value> {
    prop::collection::btree_map("[a-zA-Z.]{0,8}", json(), 0..5).prop_map(|m| Value::Object(m.into_iter().collect()))
}

fn bytes_map() -> impl Strategy<Value = BTreeMap<String, Vec<u8>>> {
    prop::collection::btree_map("[a-z]{1,6}", prop::collection::vec(any::<u8>(), 0..8), 0..3)
}

fn resource() -> impl Strategy<Value = Resource> {
    (prop_oneof![Just(Value::Null), object()], bytes_map(), prop_oneof![Just(Ready::Unspecified), Just(Ready::True), Just(Ready::False)])
        .prop_map(|(resource, connection_details, ready)| Resource { resource, connection_details, ready })
}

fn state() -> impl Strategy<Value = State> {
    (prop::option::of(resource()), prop::collection::btree_map("[a-z-]{1,8}", resource(), 0..3)).prop_map(|(composite, resources)| State { composite, resources })
}

fn resources_map() -> impl Strategy<Value = BTreeMap<String, Resources>> {
    prop::collection::btree_map("[a-z]{1,6}", prop::collection::vec(resource(), 0..3).prop_map(|items| Resources { items }), 0..3)
}

fn capability() -> impl Strategy<Value = Capability> {
    prop_oneof![
        Just(Capability::Unspecified),
        Just(Capability::Capabilities),
        Just(Capability::RequiredResources),
        Just(Capability::Credentials),
        Just(Capability::Conditions),
        Just(Capability::RequiredSchemas),
    ]
}

fn request() -> impl Strategy<Value = RunFunctionRequest> {
    (
        (".{0,10}", prop::collection::vec(capability(), 0..6)),
        state(),
        state(),
        prop::option::of(object()),
        prop::option::of(object()),
        resources_map(),
        prop::collection::btree_map("[a-z]{1,6}", bytes_map().prop_map(Credentials::CredentialData), 0..3),
        resources_map(),
        prop::collection::btree_map("[a-z]{1,6}", prop::option::of(object()).prop_map(|openapi_v3| Schema { openapi_v3 }), 0..3),
    )
        .prop_map(|((tag, capabilities), observed, desired, input, context, extra_resources, credentials, required_resources, required_schemas)| {
            RunFunctionRequest {
                meta: RequestMeta { tag, capabilities },
                observed,
                desired,
                input,
                context,
                extra_resources,
                credentials,
                required_resources,
                required_schemas,
            }
        })
}

fn target() -> impl Strategy<Value = Option<Target>> {
    prop::option::of(prop_oneof![Just(Target::Unspecified), Just(Target::Composite), Just(Target::CompositeAndClaim)])
}

fn selector() -> impl Strategy<Value = ResourceSelector> {
    (
        "[a-z./0-9]{1,12}",
        "[A-Za-z]{1,8}",
        prop_oneof![
            "[a-z-]{0,8}".prop_map(Match::Name),
            prop::collection::btree_map("[a-z/.]{1,8}", "[a-z]{0,6}", 0..3).prop_map(Match::Labels)
        ],
        prop::option::of("[a-z]{0,6}"),
    )
        .prop_map(|(api_version, kind, matching, namespace)| ResourceSelector { api_version, kind, matching, namespace })
}

fn response() -> impl Strategy<Value = RunFunctionResponse> {
    let result = (
        prop_oneof![Just(Severity::Unspecified), Just(Severity::Fatal), Just(Severity::Warning), Just(Severity::Normal)],
        ".{0,10}",
        prop::option::of("[A-Za-z]{0,8}"),
        target(),
    )
        .prop_map(|(severity, message, reason, target)| FnResult { severity, message, reason, target });
    let condition = (
        "[A-Za-z]{1,8}",
        prop_oneof![Just(ConditionStatus::Unspecified), Just(ConditionStatus::Unknown), Just(ConditionStatus::True), Just(ConditionStatus::False)],
        "[A-Za-z]{0,8}",
        prop::option::of(".{0,8}"),
        target(),
    )
        .prop_map(|(type_, status, reason, message, target)| Condition { type_, status, reason, message, target });
    let requirements = (
        prop::collection::btree_map("[a-z]{1,6}", selector(), 0..3),
        prop::collection::btree_map("[a-z]{1,6}", selector(), 0..3),
        prop::collection::btree_map("[a-z]{1,6}", ("[a-z./]{1,8}", "[A-Za-z]{1,8}").prop_map(|(api_version, kind)| SchemaSelector { api_version, kind }), 0..3),
    )
        .prop_map(|(extra_resources, resources, schemas)| Requirements { extra_resources, resources, schemas });
    (
        (".{0,10}", prop::option::of((0u64..1_000_000, 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)))),
        state(),
        prop::collection::vec(result, 0..3),
        prop::option::of(object()),
        requirements,
        prop::collection::vec(condition, 0..3),
        prop::option::of(object()),
    )
        .prop_map(|((tag, ttl), desired, results, context, requirements, conditions, output)| RunFunctionResponse {
            meta: ResponseMeta { tag, ttl },
            desired,
            results,
            context,
            requirements,
            conditions,
            output,
        })
}

/// Any `google.protobuf.Value` the other direction can meet: every kind, any finite double.
fn proto_value() -> impl Strategy<Value = prost_types::Value> {
    let leaf = prop_oneof![
        Just(Kind::NullValue(0)),
        any::<bool>().prop_map(Kind::BoolValue),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Kind::NumberValue),
        ".{0,12}".prop_map(Kind::StringValue),
    ]
    .prop_map(|kind| prost_types::Value { kind: Some(kind) });
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(|values| Kind::ListValue(prost_types::ListValue { values })),
            prop::collection::btree_map(".{0,8}", inner, 0..5).prop_map(|fields| Kind::StructValue(prost_types::Struct { fields })),
        ]
        .prop_map(|kind| prost_types::Value { kind: Some(kind) })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn requests_survive_the_wire(request in request()) {
        let wire = request_to_proto(&request).unwrap().encode_to_vec();
        let back = request_from_proto(&pb::RunFunctionRequest::decode(wire.as_slice()).unwrap()).unwrap();
        prop_assert_eq!(back, request);
    }

    #[test]
    fn responses_survive_the_wire(response in response()) {
        let wire = response_to_proto(&response).unwrap().encode_to_vec();
        let back = response_from_proto(&pb::RunFunctionResponse::decode(wire.as_slice()).unwrap()).unwrap();
        prop_assert_eq!(back, response);
    }

    #[test]
    fn structs_survive_json(fields in prop::collection::btree_map(".{0,8}", proto_value(), 0..6)) {
        let original = prost_types::Struct { fields };
        let back = struct_from_json(&json_from_struct(&original).unwrap(), "test").unwrap().unwrap_or_default();
        prop_assert_eq!(back, original);
    }

    #[test]
    fn wire_requests_survive_values(request in request()) {
        // Wire -> value -> wire: the message a function receives is the one it was sent.
        let wire = request_to_proto(&request).unwrap();
        let again = request_to_proto(&request_from_proto(&wire).unwrap()).unwrap();
        prop_assert_eq!(again.encode_to_vec(), wire.encode_to_vec());
    }

    #[test]
    fn wire_responses_survive_values(response in response()) {
        let wire = response_to_proto(&response).unwrap();
        let again = response_to_proto(&response_from_proto(&wire).unwrap()).unwrap();
        prop_assert_eq!(again.encode_to_vec(), wire.encode_to_vec());
    }
}

#[test]
fn big_integers_and_fractions_keep_their_json_form() {
    let value = json!({"max": 9_007_199_254_740_992i64, "min": -9_007_199_254_740_992i64, "half": 0.5, "ten": 10});
    let back = json_from_struct(&struct_from_json(&value, "test").unwrap().unwrap()).unwrap();
    assert_eq!(back, value);
}

#[test]
fn non_objects_have_no_struct_form() {
    let error = struct_from_json(&json!([1, 2]), "input").unwrap_err();
    assert_eq!(error.to_string(), "input must be a JSON object, not an array");
}

#[test]
fn a_selector_without_a_match_selects_everything() {
    let selector = pb::ResourceSelector { api_version: "v1".into(), kind: "ConfigMap".into(), r#match: None, namespace: None };
    assert_eq!(selector_from_proto(&selector).matching, Match::Labels(BTreeMap::new()));
}

#[test]
fn negative_ttls_are_expired() {
    assert_eq!(duration_from_proto(prost_types::Duration { seconds: -5, nanos: 0 }), Duration::ZERO);
}
