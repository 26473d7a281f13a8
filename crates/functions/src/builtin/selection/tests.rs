#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::*;

fn path(p: &str) -> FieldPath {
    FieldPath::parse(p).unwrap()
}

fn named(name: &str, rest: Value) -> Value {
    let mut v = json!({"metadata": {"name": name}});
    if let (Value::Object(map), Value::Object(rest)) = (&mut v, rest) {
        map.extend(rest);
    }
    v
}

fn names(items: &[Value]) -> Vec<&str> {
    items.iter().map(|i| i["metadata"]["name"].as_str().unwrap_or("")).collect()
}

#[test]
fn sorts_by_string_and_number() {
    let items = vec![named("c", json!({})), named("a", json!({})), named("b", json!({}))];
    let sorted = sort_by_field_path(items, &path("metadata.name")).unwrap();
    assert_eq!(names(&sorted), ["a", "b", "c"]);

    let items = vec![
        named("x", json!({"data": {"n": 3}})),
        named("y", json!({"data": {"n": 1.5}})),
        named("z", json!({"data": {"n": 2}})),
    ];
    let sorted = sort_by_field_path(items, &path("data.n")).unwrap();
    assert_eq!(names(&sorted), ["y", "z", "x"]);
}

#[test]
fn absent_values_sort_as_zero_and_ties_keep_their_order() {
    let items = vec![
        named("b", json!({"data": {"p": "m"}})),
        named("none", json!({})),
        named("null", json!({"data": {"p": null}})),
        named("a", json!({"data": {"p": "m"}})),
    ];
    let sorted = sort_by_field_path(items, &path("data.p")).unwrap();
    assert_eq!(names(&sorted), ["none", "null", "b", "a"]);
}

#[test]
fn nothing_to_sort_on_keeps_the_order() {
    let items = vec![named("c", json!({})), named("a", json!({}))];
    let sorted = sort_by_field_path(items, &path("metadata.missing")).unwrap();
    assert_eq!(names(&sorted), ["c", "a"]);
}

#[test]
fn sort_errors() {
    let mixed = vec![named("a", json!({"data": {"n": 1}})), named("b", json!({"data": {"n": "1"}}))];
    assert_eq!(
        sort_by_field_path(mixed, &path("data.n")).unwrap_err(),
        r#"cannot sort values of different types "float64" and "string""#
    );
    let bools = vec![named("a", json!({"data": {"n": true}})), named("b", json!({"data": {"n": false}}))];
    assert_eq!(sort_by_field_path(bools, &path("data.n")).unwrap_err(), r#"unsupported type "bool" for sorting"#);
    // A single object is never compared.
    let one = vec![named("a", json!({"data": {"n": {}}}))];
    assert_eq!(sort_by_field_path(one, &path("data.n")).unwrap().len(), 1);
    // A path through a scalar is an error, not a missing field.
    let scalar = vec![named("a", json!({}))];
    assert_eq!(sort_by_field_path(scalar, &path("metadata.name.x")).unwrap_err(), "metadata.name: not an object");
}

#[test]
fn multiple_selection_checks_min_sorts_then_truncates() {
    let selector = Selector {
        mode: Mode::Multiple,
        min_match: Some(2),
        max_match: Some(2),
        sort_by: path("metadata.name"),
        matchers: vec![],
    };
    let items = vec![named("c", json!({})), named("a", json!({})), named("b", json!({}))];
    assert_eq!(names(&select_multiple(items, &selector).unwrap()), ["a", "b"]);
    assert_eq!(
        select_multiple(vec![named("a", json!({}))], &selector).unwrap_err(),
        SelectError::TooFew { min: 2, got: 1 }
    );
    let unbounded = Selector { min_match: None, max_match: None, ..selector };
    assert_eq!(select_multiple(vec![], &unbounded).unwrap(), Vec::<Value>::new());
}

fn matcher(raw: Value) -> Result<LabelMatcher, InputError> {
    let raw: RawLabelMatcher = serde_json::from_value(raw).unwrap();
    parse_matcher(&raw, "m", SelectorDialect { with_mode: true, environment_labels: true })
}

#[test]
fn labels_resolve_from_composite_environment_and_values() {
    let matchers = vec![
        matcher(json!({"key": "a", "valueFromFieldPath": "spec.a"})).unwrap(),
        matcher(json!({"key": "b", "type": "Value", "value": "bee"})).unwrap(),
        matcher(json!({"key": "c", "type": "FromEnvironmentFieldPath", "valueFromFieldPath": "tier"})).unwrap(),
        matcher(json!({"key": "d", "valueFromFieldPath": "spec.d", "fromFieldPathPolicy": "Optional"})).unwrap(),
    ];
    let xr = json!({"spec": {"a": "ay"}});
    let env = json!({"tier": "gold"});
    let resolved = resolve_labels(&matchers, &xr, &env).unwrap();
    assert_eq!(
        resolved.labels,
        BTreeMap::from([("a".into(), "ay".into()), ("b".into(), "bee".into()), ("c".into(), "gold".into())])
    );
    assert!(resolved.missing_optional);

    // A required field that is missing or not a string is an error.
    let err = resolve_labels(&matchers[..1], &json!({}), &env).unwrap_err();
    assert_eq!(
        (err.origin, err.path.as_str(), err.error.to_string()),
        ("composite", "spec.a", "spec: no such field".into())
    );
    let err = resolve_labels(&matchers[..1], &json!({"spec": {"a": 1}}), &env).unwrap_err();
    assert_eq!(err.error.to_string(), "spec.a: not a string");
    let err = resolve_labels(&matchers[2..3], &xr, &json!({})).unwrap_err();
    assert_eq!(err.origin, "environment");
}

#[test]
fn matcher_input_errors() {
    let message = |raw: Value| matcher(raw).unwrap_err().to_string();
    assert_eq!(
        message(json!({"valueFromFieldPath": "x"})),
        "invalid Function input: m.key: Required value: a label matcher needs a key"
    );
    assert_eq!(
        message(json!({"key": "k"})),
        "invalid Function input: m.valueFromFieldPath: Required value: valueFromFieldPath must be set for type FromCompositeFieldPath"
    );
    assert_eq!(
        message(json!({"key": "k", "type": "Value"})),
        "invalid Function input: m.value: Required value: value must be set for type Value"
    );
    assert_eq!(
        message(json!({"key": "k", "type": "FromSomewhere"})),
        "invalid Function input: m.type: Invalid value: \"FromSomewhere\": supported values: \"FromCompositeFieldPath\", \"FromEnvironmentFieldPath\", \"Value\""
    );
    assert_eq!(
        message(json!({"key": "k", "valueFromFieldPath": "a", "fromFieldPathPolicy": "Maybe"})),
        "invalid Function input: m.fromFieldPathPolicy: Invalid value: \"Maybe\": supported values: \"Required\", \"Optional\""
    );
    assert!(
        message(json!({"key": "k", "valueFromFieldPath": "a..b"}))
            .starts_with("invalid Function input: m.valueFromFieldPath: Invalid value: \"a..b\": cannot parse path")
    );
    // Without the environment dialect, FromEnvironmentFieldPath is unknown.
    let raw: RawLabelMatcher =
        serde_json::from_value(json!({"key": "k", "type": "FromEnvironmentFieldPath", "valueFromFieldPath": "a"}))
            .unwrap();
    let err = parse_matcher(&raw, "m", SelectorDialect { with_mode: false, environment_labels: false }).unwrap_err();
    assert!(err.to_string().ends_with("supported values: \"FromCompositeFieldPath\", \"Value\""), "{err}");
}

#[test]
fn selector_defaults_and_counts() {
    let raw: RawSelector = serde_json::from_value(json!({"minMatch": 1.0, "maxMatch": 3})).unwrap();
    let dialect = SelectorDialect { with_mode: true, environment_labels: true };
    let selector = parse_selector(Some(&raw), "s", dialect).unwrap();
    assert_eq!(selector.mode, Mode::Single);
    assert_eq!((selector.min_match, selector.max_match), (Some(1), Some(3)));
    assert_eq!(selector.sort_by, path("metadata.name"));
    assert!(serde_json::from_value::<RawSelector>(json!({"maxMatch": -1})).is_err());
    assert!(serde_json::from_value::<RawSelector>(json!({"maxMatch": 1.5})).is_err());
    assert!(serde_json::from_value::<RawSelector>(json!({"maxMatch": "2"})).is_err());
    let raw: RawSelector = serde_json::from_value(json!({"mode": "All"})).unwrap();
    assert_eq!(
        parse_selector(Some(&raw), "s", dialect).unwrap_err().to_string(),
        "invalid Function input: s.selector.mode: Invalid value: \"All\": supported values: \"Single\", \"Multiple\""
    );
    assert_eq!(
        parse_selector(None, "s", dialect).unwrap_err().to_string(),
        "invalid Function input: s.selector: Required value: a Selector source needs a selector"
    );
    // function-extra-resources has no mode: every selector keeps all its matches.
    let raw: RawSelector = serde_json::from_value(json!({"mode": "Single"})).unwrap();
    let selector =
        parse_selector(Some(&raw), "s", SelectorDialect { with_mode: false, environment_labels: false }).unwrap();
    assert_eq!(selector.mode, Mode::Multiple);
}

#[test]
fn merge_is_deep_for_objects_only() {
    let base = json!({"a": 1, "o": {"x": 1, "y": {"z": 1}}, "l": [1, 2], "s": {"k": 1}});
    let over = json!({"b": 2, "o": {"y": {"w": 2}}, "l": [3], "s": "flat"});
    let (Value::Object(base), Value::Object(over)) = (base, over) else { unreachable!() };
    assert_eq!(
        Value::Object(merge_maps(base, over)),
        json!({"a": 1, "b": 2, "o": {"x": 1, "y": {"z": 1, "w": 2}}, "l": [3], "s": "flat"})
    );
}

#[test]
fn environment_object_stamps_only_when_untyped() {
    assert_eq!(
        environment_object(Map::new()),
        json!({"apiVersion": "internal.crossplane.io/v1alpha1", "kind": "Environment"})
    );
    let Value::Object(typed) = json!({"apiVersion": "v1"}) else { unreachable!() };
    assert_eq!(environment_object(typed), json!({"apiVersion": "v1"}));
}

fn flat_map() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::btree_map(
        "[a-d]",
        prop_oneof![any::<i32>().prop_map(Value::from), "[a-z]{0,3}".prop_map(Value::from)],
        0..4,
    )
    .prop_map(|m| m.into_iter().collect())
}

fn nested_map() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::btree_map(
        "[a-c]",
        prop_oneof![any::<i32>().prop_map(Value::from), flat_map().prop_map(Value::Object)],
        0..4,
    )
    .prop_map(|m| m.into_iter().collect())
}

proptest! {
    /// Merging flat maps in order: every key holds the value of the last map that has it.
    #[test]
    fn later_maps_win_for_every_key(maps in prop::collection::vec(flat_map(), 0..6)) {
        let merged = maps.iter().cloned().fold(Map::new(), merge_maps);
        for (key, value) in &merged {
            let last = maps.iter().rev().find_map(|m| m.get(key));
            prop_assert_eq!(Some(value), last);
        }
        let key_count = maps.iter().flat_map(|m| m.keys()).collect::<std::collections::BTreeSet<_>>().len();
        prop_assert_eq!(merged.len(), key_count);
    }

    /// A map merged over itself, or an empty map merged either way, changes nothing.
    #[test]
    fn merge_identities(m in nested_map()) {
        prop_assert_eq!(merge_maps(m.clone(), m.clone()), m.clone());
        prop_assert_eq!(merge_maps(Map::new(), m.clone()), m.clone());
        prop_assert_eq!(merge_maps(m.clone(), Map::new()), m);
    }

    /// Sorting is a permutation, and its keys come out in order.
    #[test]
    fn sorting_is_an_ordered_permutation(ns in prop::collection::vec(-1000i32..1000, 0..12)) {
        let items: Vec<Value> = ns.iter().enumerate().map(|(i, n)| json!({"i": i, "data": {"n": n}})).collect();
        let sorted = sort_by_field_path(items.clone(), &path("data.n")).unwrap();
        prop_assert_eq!(sorted.len(), items.len());
        let keys: Vec<i64> = sorted.iter().map(|v| v["data"]["n"].as_i64().unwrap()).collect();
        prop_assert!(keys.windows(2).all(|w| w[0] <= w[1]));
        let mut before: Vec<u64> = items.iter().map(|v| v["i"].as_u64().unwrap()).collect();
        let mut after: Vec<u64> = sorted.iter().map(|v| v["i"].as_u64().unwrap()).collect();
        before.sort_unstable();
        after.sort_unstable();
        prop_assert_eq!(before, after);
    }
}
