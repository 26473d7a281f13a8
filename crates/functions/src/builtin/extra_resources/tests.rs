#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{ENVIRONMENT_KEY, EXTRA_RESOURCES_KEY, run};
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

fn request(spec: Value) -> RunFunctionRequest {
    RunFunctionRequest {
        observed: xr(json!({"cluster": "blue"})),
        input: Some(json!({"apiVersion": "extra-resources.fn.crossplane.io/v1beta1", "kind": "Input", "spec": spec})),
        ..Default::default()
    }
}

fn cluster(name: &str, rest: Value) -> Value {
    let mut v = json!({"apiVersion": "example.org/v1", "kind": "XCluster", "metadata": {"name": name}});
    if let (Value::Object(map), Value::Object(rest)) = (&mut v, rest) {
        map.extend(rest);
    }
    v
}

fn answered(mut req: RunFunctionRequest, answers: Vec<(&str, Vec<Value>)>) -> RunFunctionRequest {
    for (key, items) in answers {
        let items = items.into_iter().map(|resource| Resource { resource, ..Default::default() }).collect();
        req.required_resources.insert(key.to_string(), Resources { items });
    }
    req
}

fn context_at<'a>(rsp: &'a RunFunctionResponse, key: &str) -> &'a Value {
    assert!(rsp.results.is_empty(), "{:?}", rsp.results);
    &rsp.context.as_ref().expect("context")[key]
}

fn fatal(rsp: &RunFunctionResponse) -> &str {
    assert_eq!(rsp.results.len(), 1, "{:?}", rsp.results);
    assert_eq!(rsp.results[0].severity, Severity::Fatal);
    &rsp.results[0].message
}

fn selector(matching: Match, namespace: Option<&str>) -> ResourceSelector {
    ResourceSelector {
        api_version: "example.org/v1".into(),
        kind: "XCluster".into(),
        matching,
        namespace: namespace.map(str::to_string),
    }
}

fn labels(pairs: &[(&str, &str)]) -> Match {
    Match::Labels(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
}

/// The original layout: `into` names the requirement and the context entry.
fn legacy_spec() -> Value {
    json!({"extraResources": [
        {"kind": "XCluster", "apiVersion": "example.org/v1", "into": "one", "ref": {"name": "c1"}, "namespace": "team-a"},
        {"kind": "XCluster", "apiVersion": "example.org/v1", "into": "many", "type": "Selector", "selector": {
            "minMatch": 1, "maxMatch": 2,
            "matchLabels": [{"key": "type", "type": "Value", "value": "cluster"}, {"key": "color", "valueFromFieldPath": "spec.cluster"}],
        }},
    ]})
}

#[test]
fn first_call_returns_only_the_requirements() {
    let mut req = request(legacy_spec());
    req.desired = xr(json!({"d": 1}));
    req.context = Some(json!({"other": 1}));
    let rsp = run(&req);
    assert!(rsp.results.is_empty(), "{:?}", rsp.results);
    assert_eq!(
        rsp.requirements.resources,
        BTreeMap::from([
            ("one".to_string(), selector(Match::Name("c1".into()), Some("team-a"))),
            ("many".to_string(), selector(labels(&[("color", "blue"), ("type", "cluster")]), None)),
        ])
    );
    assert_eq!(rsp.desired, req.desired);
    assert_eq!(rsp.context, req.context);
}

#[test]
fn second_call_puts_lists_under_the_default_context_key() {
    let mut req = answered(
        request(legacy_spec()),
        vec![
            ("one", vec![cluster("c1", json!({}))]),
            ("many", vec![cluster("c4", json!({})), cluster("c3", json!({})), cluster("c2", json!({}))]),
        ],
    );
    req.context = Some(json!({"other": 1}));
    let rsp = run(&req);
    assert_eq!(
        context_at(&rsp, EXTRA_RESOURCES_KEY),
        &json!({"one": [cluster("c1", json!({}))], "many": [cluster("c2", json!({})), cluster("c3", json!({}))]})
    );
    assert_eq!(rsp.context.as_ref().unwrap()["other"], 1);
    assert_eq!(rsp.requirements.resources.len(), 2, "the requirements stay stable");
    assert_eq!(rsp.desired, req.desired);
}

#[test]
fn a_custom_context_key_and_field_paths() {
    let spec = json!({
        "into": {"contextKey": "my-key"},
        "extraResources": [
            {"kind": "XCluster", "apiVersion": "example.org/v1", "toFieldPath": "clusters.all", "type": "Selector",
             "selector": {"sortByFieldPath": "spec.size"}},
            {"kind": "XCluster", "apiVersion": "example.org/v1", "toFieldPath": "sizes", "type": "Selector",
             "selector": {"sortByFieldPath": "spec.size"}, "fromFieldPath": "spec.size"},
        ],
    });
    // No matchLabels: every object of the kind.
    let rsp = run(&request(spec.clone()));
    assert_eq!(
        rsp.requirements.resources,
        BTreeMap::from([
            ("resources-0".to_string(), selector(labels(&[]), None)),
            ("resources-1".to_string(), selector(labels(&[]), None)),
        ])
    );
    let found = vec![cluster("big", json!({"spec": {"size": 3}})), cluster("small", json!({"spec": {"size": 1}}))];
    let rsp = run(&answered(request(spec), vec![("resources-0", found.clone()), ("resources-1", found.clone())]));
    assert_eq!(context_at(&rsp, "my-key"), &json!({"clusters": {"all": [found[1], found[0]]}, "sizes": [1, 3]}));
    assert!(rsp.context.as_ref().unwrap().get(EXTRA_RESOURCES_KEY).is_none());
}

#[test]
fn into_the_environment() {
    let spec = json!({
        "into": {"type": "Environment"},
        "extraResources": [
            {"kind": "XCluster", "apiVersion": "example.org/v1", "ref": {"name": "c1"}, "fromFieldPath": "spec"},
            {"kind": "XCluster", "apiVersion": "example.org/v1", "ref": {"name": "c2"}, "toFieldPath": "second"},
        ],
    });
    let mut req = answered(
        request(spec),
        vec![
            ("resources-0", vec![cluster("c1", json!({"spec": {"size": 1, "region": "eu"}}))]),
            ("resources-1", vec![cluster("c2", json!({}))]),
        ],
    );
    req.context = Some(json!({ENVIRONMENT_KEY: {"region": "us", "kept": true}}));
    assert_eq!(
        context_at(&run(&req), ENVIRONMENT_KEY),
        &json!({"apiVersion": "internal.crossplane.io/v1alpha1", "kind": "Environment",
                "region": "eu", "kept": true, "size": 1, "second": cluster("c2", json!({}))})
    );
}

#[test]
fn references_missing_fail_unless_optional() {
    let req = |optional: bool| {
        let mut spec = json!({"extraResources": [
            {"kind": "XCluster", "apiVersion": "example.org/v1", "into": "gone", "ref": {"name": "gone"}},
            {"kind": "XCluster", "apiVersion": "example.org/v1", "into": "here", "ref": {"name": "here"}},
        ]});
        if optional {
            spec["policy"] = json!({"resolution": "Optional"});
        }
        answered(request(spec), vec![("gone", vec![]), ("here", vec![cluster("here", json!({}))])])
    };
    assert_eq!(
        fatal(&run(&req(false))),
        r#"verifying and sorting extra resources: Required extra resource "gone" not found"#
    );
    assert_eq!(context_at(&run(&req(true)), EXTRA_RESOURCES_KEY), &json!({"here": [cluster("here", json!({}))]}));
}

#[test]
fn selector_limits() {
    let spec = |selector: Value| json!({"extraResources": [{"kind": "XCluster", "apiVersion": "example.org/v1", "into": "x", "type": "Selector", "selector": selector}]});
    let rsp = run(&answered(request(spec(json!({"minMatch": 1}))), vec![("x", vec![])]));
    assert_eq!(fatal(&rsp), r#"verifying and sorting extra resources: expected at least 1 extra resources "x", got 0"#);
    // No match, no minimum: an empty list.
    let rsp = run(&answered(request(spec(json!({}))), vec![("x", vec![])]));
    assert_eq!(context_at(&rsp, EXTRA_RESOURCES_KEY), &json!({"x": []}));
    // Optional labels that are all missing ask for nothing; the entry is left out.
    let optional = spec(
        json!({"matchLabels": [{"key": "k", "valueFromFieldPath": "spec.nope", "fromFieldPathPolicy": "Optional"}]}),
    );
    let rsp = run(&request(optional));
    assert!(rsp.requirements.is_empty());
    assert_eq!(context_at(&rsp, EXTRA_RESOURCES_KEY), &json!({}));
    // Required labels that are missing fail.
    let required = spec(json!({"matchLabels": [{"key": "k", "valueFromFieldPath": "spec.nope"}]}));
    assert_eq!(
        fatal(&run(&request(required))),
        r#"could not build extra resource requirements: cannot get value from field path "spec.nope": spec.nope: no such field"#
    );
}

#[test]
fn from_field_path_must_exist() {
    let spec = json!({"extraResources": [{"kind": "XCluster", "apiVersion": "example.org/v1", "into": "x", "ref": {"name": "c"}, "fromFieldPath": "status.id"}]});
    let rsp = run(&answered(request(spec), vec![("x", vec![cluster("c", json!({}))])]));
    assert_eq!(fatal(&rsp), "verifying and sorting extra resources: status: no such field");
}

#[test]
fn input_errors() {
    let message = |spec: Value| fatal(&run(&request(spec))).to_string();
    let entry = |extra: Value| {
        let mut e = json!({"kind": "XCluster", "apiVersion": "example.org/v1", "ref": {"name": "c"}});
        e.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        e
    };
    assert_eq!(
        message(json!({"extraResources": [entry(json!({"into": "x"})), entry(json!({"into": "x"}))]})),
        r#"invalid Function input: spec.extraResources[1].into: Invalid value: "x": another entry already uses this key"#
    );
    assert_eq!(
        message(json!({"extraResources": [entry(json!({}))]})),
        "invalid Function input: spec.extraResources[0].toFieldPath: Required value: toFieldPath (or into) must be set when spec.into.type is Context"
    );
    assert_eq!(
        message(json!({"extraResources": [{"apiVersion": "v1", "into": "x", "ref": {"name": "c"}}]})),
        "invalid Function input: spec.extraResources[0].kind: Required value: the kind of the objects to fetch"
    );
    assert_eq!(
        message(json!({"extraResources": [entry(json!({"into": "x", "fromFieldPath": ""}))]})),
        r#"invalid Function input: spec.extraResources[0].fromFieldPath: Invalid value: "": fromFieldPath cannot be empty, omit the field to get the whole object"#
    );
    assert_eq!(
        message(json!({"into": {"type": "Somewhere"}, "extraResources": []})),
        r#"invalid Function input: spec.into.type: Invalid value: "Somewhere": supported values: "Context", "Environment""#
    );
    assert_eq!(
        message(
            json!({"extraResources": [entry(json!({"into": "x", "type": "Selector", "selector": {"matchLabels": [{"key": "k", "type": "FromEnvironmentFieldPath", "valueFromFieldPath": "a"}]}}))]})
        ),
        r#"invalid Function input: spec.extraResources[0].selector.matchLabels[0].type: Invalid value: "FromEnvironmentFieldPath": supported values: "FromCompositeFieldPath", "Value""#
    );
}

#[test]
fn without_extra_resources_nothing_happens() {
    let mut req = request(json!({}));
    req.context = Some(json!({"x": 1}));
    let rsp = run(&req);
    assert!(rsp.results.is_empty() && rsp.requirements.is_empty());
    assert_eq!(rsp.context, req.context);
}

#[test]
fn the_deprecated_extra_resources_field_answers_too() {
    let mut req = request(
        json!({"extraResources": [{"kind": "XCluster", "apiVersion": "example.org/v1", "into": "x", "ref": {"name": "c"}}]}),
    );
    let items = vec![Resource { resource: cluster("c", json!({})), ..Default::default() }];
    req.extra_resources.insert("x".into(), Resources { items });
    assert_eq!(context_at(&run(&req), EXTRA_RESOURCES_KEY), &json!({"x": [cluster("c", json!({}))]}));
}
