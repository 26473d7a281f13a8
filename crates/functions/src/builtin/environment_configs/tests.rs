#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::{Value, json};

use super::{ENVIRONMENT_KEY, run};
use crate::protocol::{
    Match, Resource, ResourceSelector, Resources, RunFunctionRequest, RunFunctionResponse, Severity, State,
};

fn xr(spec: Value) -> State {
    State {
        composite: Some(Resource {
            resource: json!({"apiVersion": "example.org/v1", "kind": "XR", "metadata": {"name": "my-xr"}, "spec": spec}),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn input(spec: Value) -> Value {
    json!({"apiVersion": "environmentconfigs.fn.crossplane.io/v1beta1", "kind": "Input", "spec": spec})
}

fn config(name: &str, data: Value) -> Value {
    json!({"apiVersion": "apiextensions.crossplane.io/v1beta1", "kind": "EnvironmentConfig", "metadata": {"name": name}, "data": data})
}

fn resources(items: Vec<Value>) -> Resources {
    Resources { items: items.into_iter().map(|resource| Resource { resource, ..Default::default() }).collect() }
}

fn request(spec: Value) -> RunFunctionRequest {
    RunFunctionRequest { observed: xr(json!({})), input: Some(input(spec)), ..Default::default() }
}

fn answered(mut req: RunFunctionRequest, answers: Vec<(&str, Vec<Value>)>) -> RunFunctionRequest {
    for (key, items) in answers {
        req.required_resources.insert(key.to_string(), resources(items));
    }
    req
}

fn by_name(name: &str) -> ResourceSelector {
    ResourceSelector {
        api_version: "apiextensions.crossplane.io/v1beta1".into(),
        kind: "EnvironmentConfig".into(),
        matching: Match::Name(name.into()),
        namespace: None,
    }
}

fn by_labels(labels: &[(&str, &str)]) -> ResourceSelector {
    ResourceSelector {
        matching: Match::Labels(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
        ..by_name("")
    }
}

fn environment(rsp: &RunFunctionResponse) -> &Value {
    assert!(rsp.results.is_empty(), "{:?}", rsp.results);
    &rsp.context.as_ref().expect("context")[ENVIRONMENT_KEY]
}

fn fatal(rsp: &RunFunctionResponse) -> &str {
    assert_eq!(rsp.results.len(), 1, "{:?}", rsp.results);
    assert_eq!(rsp.results[0].severity, Severity::Fatal);
    &rsp.results[0].message
}

const TYPED: (&str, &str) = ("internal.crossplane.io/v1alpha1", "Environment");

fn with_type(mut v: Value) -> Value {
    v["apiVersion"] = json!(TYPED.0);
    v["kind"] = json!(TYPED.1);
    v
}

#[test]
fn first_call_returns_only_the_requirements() {
    let mut req = request(json!({"environmentConfigs": [
        {"type": "Reference", "ref": {"name": "first"}},
        {"ref": {"name": "second"}},
        {"type": "Selector", "selector": {"mode": "Multiple", "matchLabels": [{"type": "Value", "key": "foo", "value": "bar"}]}},
        {"type": "Selector", "selector": {"matchLabels": [{"key": "k", "valueFromFieldPath": "spec.missing", "fromFieldPathPolicy": "Optional"}]}},
        {"type": "Selector", "selector": {"matchLabels": [{"key": "region", "valueFromFieldPath": "spec.region"}]}},
    ]}));
    req.observed = xr(json!({"region": "eu"}));
    req.desired = xr(json!({"desired": true}));
    req.context = Some(json!({"other": 1}));
    req.meta.tag = "t".into();
    let rsp = run(&req);
    assert!(rsp.results.is_empty(), "{:?}", rsp.results);
    assert_eq!(
        rsp.requirements.resources,
        BTreeMap::from([
            ("environment-config-0".to_string(), by_name("first")),
            ("environment-config-1".to_string(), by_name("second")),
            ("environment-config-2".to_string(), by_labels(&[("foo", "bar")])),
            // environment-config-3 asks for nothing: its only label is optional and missing.
            ("environment-config-4".to_string(), by_labels(&[("region", "eu")])),
        ])
    );
    assert!(rsp.requirements.extra_resources.is_empty());
    assert_eq!(rsp.desired, req.desired);
    assert_eq!(rsp.context, req.context);
    assert_eq!(rsp.meta.tag, "t");
}

#[test]
fn a_partial_answer_is_not_enough() {
    let spec = json!({"environmentConfigs": [{"ref": {"name": "a"}}, {"ref": {"name": "b"}}]});
    let rsp = run(&answered(request(spec), vec![("environment-config-0", vec![config("a", json!({"k": 1}))])]));
    assert_eq!(rsp.requirements.resources.len(), 2);
    assert_eq!(rsp.context, None);
}

#[test]
fn second_call_merges_configs_over_the_context_environment_over_default_data() {
    // The Go function's own merge example.
    let mut req = request(json!({
        "defaultData": {"b": "only-from-default", "e": "overridden-from-input", "f": "overridden-from-env-config-2"},
        "environmentConfigs": [{"type": "Reference", "ref": {"name": "one"}}, {"type": "Reference", "ref": {"name": "two"}}],
    }));
    req.context = Some(json!({"keep": "me", ENVIRONMENT_KEY: {
        "apiVersion": TYPED.0, "kind": TYPED.1,
        "a": "only-from-input", "e": "overridden-from-input-ok",
        "f": "overridden-from-env-config-1", "g": "overridden-from-env-config-2",
    }}));
    let req = answered(
        req,
        vec![
            (
                "environment-config-0",
                vec![config(
                    "one",
                    json!({"c": "only-from-env-config-1", "f": "overridden-from-env-config-1-ok", "h": "override-from-env-config-1"}),
                )],
            ),
            (
                "environment-config-1",
                vec![config(
                    "two",
                    json!({"d": "only-from-env-config-1", "g": "overridden-from-env-config-2-ok", "h": "override-from-env-config-1-ok"}),
                )],
            ),
        ],
    );
    let rsp = run(&req);
    assert_eq!(
        environment(&rsp),
        &with_type(json!({
            "a": "only-from-input", "b": "only-from-default", "c": "only-from-env-config-1",
            "d": "only-from-env-config-1", "e": "overridden-from-input-ok",
            "f": "overridden-from-env-config-1-ok", "g": "overridden-from-env-config-2-ok",
            "h": "override-from-env-config-1-ok",
        }))
    );
    assert_eq!(rsp.context.as_ref().unwrap()["keep"], "me");
    assert_eq!(rsp.requirements.resources.len(), 2, "the requirements stay stable");
    assert_eq!(rsp.desired, req.desired);
}

#[test]
fn objects_merge_deeply_and_everything_else_is_replaced() {
    let req = answered(
        request(json!({
            "defaultData": {"nested": {"fromDefault": 1, "over": "default"}},
            "environmentConfigs": [{"ref": {"name": "a"}}, {"ref": {"name": "b"}}],
        })),
        vec![
            ("environment-config-0", vec![config("a", json!({"nested": {"over": "a", "a": true}, "list": [1, 2]}))]),
            ("environment-config-1", vec![config("b", json!({"nested": {"b": null}, "list": [3]}))]),
        ],
    );
    assert_eq!(
        environment(&run(&req)),
        &with_type(json!({"nested": {"fromDefault": 1, "over": "a", "a": true, "b": null}, "list": [3]}))
    );
}

#[test]
fn the_deprecated_extra_resources_field_answers_too() {
    let mut req = request(json!({"environmentConfigs": [{"ref": {"name": "a"}}]}));
    req.extra_resources.insert("environment-config-0".into(), resources(vec![config("a", json!({"k": "v"}))]));
    assert_eq!(environment(&run(&req)), &with_type(json!({"k": "v"})));
}

#[test]
fn missing_references_fail_unless_optional() {
    let spec = json!({"environmentConfigs": [{"ref": {"name": "gone"}}, {"ref": {"name": "here"}}]});
    let answers =
        || vec![("environment-config-0", vec![]), ("environment-config-1", vec![config("here", json!({"k": 1}))])];
    let rsp = run(&answered(request(spec.clone()), answers()));
    assert_eq!(
        fatal(&rsp),
        r#"cannot get selected environment configs: cannot process environment config "gone" by reference, "environment-config-0": Required environment config "gone" not found"#
    );
    assert_eq!(rsp.context, None);
    assert_eq!(rsp.requirements.resources.len(), 2);

    let mut optional = spec;
    optional["policy"] = json!({"resolution": "Optional"});
    assert_eq!(environment(&run(&answered(request(optional), answers()))), &with_type(json!({"k": 1})));

    let two = run(&answered(
        request(json!({"environmentConfigs": [{"ref": {"name": "a"}}]})),
        vec![("environment-config-0", vec![config("a", json!({})), config("a", json!({}))])],
    ));
    assert_eq!(
        fatal(&two),
        r#"cannot get selected environment configs: cannot process environment config "a" by reference, "environment-config-0": expected exactly one required resource "a", got 2"#
    );
}

fn selector_spec(selector: Value) -> Value {
    let mut selector = selector;
    selector["matchLabels"] = json!([{"type": "Value", "key": "env", "value": "prod"}]);
    json!({"environmentConfigs": [{"type": "Selector", "selector": selector}]})
}

#[test]
fn single_selector_needs_exactly_one_match() {
    let one = answered(
        request(selector_spec(json!({}))),
        vec![("environment-config-0", vec![config("a", json!({"k": "a"}))])],
    );
    assert_eq!(environment(&run(&one)), &with_type(json!({"k": "a"})));
    for (n, items) in [(0, vec![]), (2, vec![config("a", json!({})), config("b", json!({}))])] {
        // The resolution policy is about references; it does not relax a selector.
        let mut spec = selector_spec(json!({"mode": "Single"}));
        spec["policy"] = json!({"resolution": "Optional"});
        let rsp = run(&answered(request(spec), vec![("environment-config-0", items)]));
        assert_eq!(
            fatal(&rsp),
            format!(
                "cannot get selected environment configs: cannot process environment config \"environment-config-0\" by selector: expected exactly one required resource, got {n}"
            )
        );
    }
}

#[test]
fn multiple_selector_sorts_and_later_configs_win() {
    // Crossplane hands them over in any order; sorted by name, "b" comes last and wins.
    let items = vec![config("b", json!({"k": "b", "onlyB": 1})), config("a", json!({"k": "a", "onlyA": 1}))];
    let req =
        answered(request(selector_spec(json!({"mode": "Multiple"}))), vec![("environment-config-0", items.clone())]);
    assert_eq!(environment(&run(&req)), &with_type(json!({"k": "b", "onlyA": 1, "onlyB": 1})));

    // Sorted by a number instead: "b" has the lower priority, so "a" wins.
    let mut items = items;
    items[0]["data"]["priority"] = json!(1);
    items[1]["data"]["priority"] = json!(2);
    let spec = selector_spec(json!({"mode": "Multiple", "sortByFieldPath": "data.priority"}));
    let rsp = run(&answered(request(spec), vec![("environment-config-0", items.clone())]));
    assert_eq!(environment(&rsp)["k"], "a");

    // maxMatch keeps the first after sorting.
    let spec = selector_spec(json!({"mode": "Multiple", "maxMatch": 1}));
    let rsp = run(&answered(request(spec), vec![("environment-config-0", items.clone())]));
    assert_eq!(environment(&rsp), &with_type(json!({"k": "a", "onlyA": 1, "priority": 2})));

    // minMatch.
    let spec = selector_spec(json!({"mode": "Multiple", "minMatch": 3}));
    let rsp = run(&answered(request(spec), vec![("environment-config-0", items.clone())]));
    assert_eq!(
        fatal(&rsp),
        r#"cannot get selected environment configs: cannot process environment config "environment-config-0" by selector: expected at least 3 required resources, got 2"#
    );

    // Zero matches are fine without minMatch.
    let spec = selector_spec(json!({"mode": "Multiple"}));
    assert_eq!(
        environment(&run(&answered(request(spec), vec![("environment-config-0", vec![])]))),
        &with_type(json!({}))
    );

    // Values of different types cannot be sorted.
    items[1]["data"]["priority"] = json!("2");
    let spec = selector_spec(json!({"mode": "Multiple", "sortByFieldPath": "data.priority"}));
    let rsp = run(&answered(request(spec), vec![("environment-config-0", items)]));
    assert!(fatal(&rsp).ends_with(r#"by selector: cannot sort values of different types "float64" and "string""#));
}

#[test]
fn match_labels_from_the_composite() {
    let spec = |policy: &str| {
        json!({"environmentConfigs": [{"type": "Selector", "selector": {"matchLabels": [
            {"key": "fixed", "type": "Value", "value": "v"},
            {"key": "region", "type": "FromCompositeFieldPath", "valueFromFieldPath": "spec.region", "fromFieldPathPolicy": policy},
        ]}}]})
    };
    // Present: both labels.
    let mut req = request(spec("Required"));
    req.observed = xr(json!({"region": "eu"}));
    assert_eq!(
        run(&req).requirements.resources["environment-config-0"],
        by_labels(&[("fixed", "v"), ("region", "eu")])
    );
    // Missing and Required: the step fails.
    let rsp = run(&request(spec("Required")));
    assert_eq!(
        fatal(&rsp),
        r#"cannot build requirements: cannot get value from composite field path "spec.region": spec.region: no such field"#
    );
    assert!(rsp.requirements.is_empty());
    // Missing and Optional: the label is left out, the others stay.
    assert_eq!(
        run(&request(spec("Optional"))).requirements.resources["environment-config-0"],
        by_labels(&[("fixed", "v")])
    );
}

#[test]
fn match_labels_from_the_environment() {
    let mut req = request(json!({"environmentConfigs": [{"type": "Selector", "selector": {"matchLabels": [
        {"key": "tier", "type": "FromEnvironmentFieldPath", "valueFromFieldPath": "tier"},
    ]}}]}));
    req.context = Some(json!({ENVIRONMENT_KEY: {"tier": "gold"}}));
    assert_eq!(run(&req).requirements.resources["environment-config-0"], by_labels(&[("tier", "gold")]));
}

#[test]
fn no_requirements_at_all_writes_the_environment_at_once() {
    let mut req = request(json!({
        "defaultData": {"d": 1},
        "environmentConfigs": [{"type": "Selector", "selector": {"matchLabels": [
            {"key": "k", "valueFromFieldPath": "spec.missing", "fromFieldPathPolicy": "Optional"},
        ]}}],
    }));
    req.context = Some(json!({ENVIRONMENT_KEY: {"c": 2}}));
    let rsp = run(&req);
    assert!(rsp.requirements.is_empty());
    assert_eq!(environment(&rsp), &with_type(json!({"d": 1, "c": 2})));
}

#[test]
fn without_environment_configs_nothing_happens() {
    let mut req = request(json!({"defaultData": {"d": 1}}));
    req.context = Some(json!({"x": 1}));
    let rsp = run(&req);
    assert!(rsp.results.is_empty() && rsp.requirements.is_empty());
    assert_eq!(rsp.context, req.context);
    // An empty list is a list: the environment is written.
    let rsp = run(&request(json!({"defaultData": {"d": 1}, "environmentConfigs": []})));
    assert_eq!(environment(&rsp), &with_type(json!({"d": 1})));
}

#[test]
fn to_field_path_puts_data_under_a_path() {
    let req = answered(
        request(json!({"environmentConfigs": [
            {"ref": {"name": "a"}, "toFieldPath": "nested.a"},
            {"ref": {"name": "b"}},
        ]})),
        vec![
            ("environment-config-0", vec![config("a", json!({"k": 1}))]),
            ("environment-config-1", vec![config("b", json!({"nested": {"b": 2}}))]),
        ],
    );
    assert_eq!(environment(&run(&req)), &with_type(json!({"nested": {"a": {"k": 1}, "b": 2}})));
}

#[test]
fn data_must_be_an_object_but_may_be_absent() {
    let mut empty = config("empty", json!(null));
    empty.as_object_mut().unwrap().remove("data");
    let req = answered(
        request(json!({"environmentConfigs": [{"ref": {"name": "empty"}}]})),
        vec![("environment-config-0", vec![empty])],
    );
    assert_eq!(environment(&run(&req)), &with_type(json!({})));
    let req = answered(
        request(json!({"environmentConfigs": [{"ref": {"name": "bad"}}]})),
        vec![("environment-config-0", vec![config("bad", json!("text"))])],
    );
    assert_eq!(
        fatal(&run(&req)),
        r#"cannot merge environment data: cannot get data from environment config "bad": data: not an object"#
    );
}

#[test]
fn an_environment_that_has_a_type_keeps_it() {
    let mut req = answered(
        request(json!({"environmentConfigs": [{"ref": {"name": "a"}}]})),
        vec![("environment-config-0", vec![config("a", json!({"k": 1}))])],
    );
    req.context = Some(json!({ENVIRONMENT_KEY: {"apiVersion": "example.org/v1", "kind": "Mine"}}));
    assert_eq!(environment(&run(&req)), &json!({"apiVersion": "example.org/v1", "kind": "Mine", "k": 1}));
    req.context = Some(json!({ENVIRONMENT_KEY: "not an object"}));
    assert_eq!(
        fatal(&run(&req)),
        r#"cannot get Composition environment from *v1.RunFunctionRequest context key "apiextensions.crossplane.io/environment": a string is not an object"#
    );
}

#[test]
fn input_errors() {
    let message = |spec: Value| fatal(&run(&request(spec))).to_string();
    assert_eq!(
        message(json!({"environmentConfigs": [{"type": "Lookup"}]})),
        r#"invalid Function input: spec.environmentConfigs[0].type: Invalid value: "Lookup": supported values: "Reference", "Selector""#
    );
    assert_eq!(
        message(json!({"environmentConfigs": [{"type": "Reference"}]})),
        "invalid Function input: spec.environmentConfigs[0].ref.name: Required value: a Reference source needs the name of an object"
    );
    assert_eq!(
        message(json!({"environmentConfigs": [{"ref": {"name": "a"}}, {"type": "Selector"}]})),
        "invalid Function input: spec.environmentConfigs[1].selector: Required value: a Selector source needs a selector"
    );
    assert_eq!(
        message(json!({"environmentConfigs": [], "policy": {"resolution": "Sometimes"}})),
        r#"invalid Function input: spec.policy.resolution: Invalid value: "Sometimes": supported values: "Required", "Optional""#
    );
    assert!(
        message(json!({"environmentConfigs": "no"}))
            .starts_with("cannot get Function input from *v1.RunFunctionRequest: ")
    );
    assert!(
        message(json!({"defaultData": [1]})).starts_with("cannot get Function input from *v1.RunFunctionRequest: ")
    );
}

proptest! {
    /// Every key of the environment holds the value of the last config that has it, else the
    /// incoming environment's, else the default's.
    #[test]
    fn later_configs_win_for_every_key(
        datas in prop::collection::vec(prop::collection::btree_map("[a-e]", 0i32..100, 0..4), 1..5),
        default in prop::collection::btree_map("[a-e]", 100i32..200, 0..4),
        incoming in prop::collection::btree_map("[a-e]", 200i32..300, 0..4),
    ) {
        let refs: Vec<Value> = (0..datas.len()).map(|i| json!({"ref": {"name": format!("c{i}")}})).collect();
        let mut req = request(json!({"defaultData": default, "environmentConfigs": refs}));
        req.context = Some(json!({ENVIRONMENT_KEY: incoming}));
        for (i, data) in datas.iter().enumerate() {
            req.required_resources.insert(format!("environment-config-{i}"), resources(vec![config(&format!("c{i}"), json!(data))]));
        }
        let rsp = run(&req);
        let env = environment(&rsp).as_object().unwrap();
        for key in ["a", "b", "c", "d", "e"] {
            let expected = datas.iter().rev().find_map(|d| d.get(key)).or_else(|| incoming.get(key)).or_else(|| default.get(key));
            prop_assert_eq!(env.get(key).and_then(Value::as_i64), expected.map(|v| i64::from(*v)));
        }
    }
}
