#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

fn f(name: &str) -> Segment {
    Segment::Field(name.to_string())
}

fn i(index: usize) -> Segment {
    Segment::Index(index)
}

#[test]
fn parses_the_documented_valid_paths() {
    let cases: Vec<(&str, Vec<Segment>)> = vec![
        ("metadata.name", vec![f("metadata"), f("name")]),
        ("spec.containers[0].name", vec![f("spec"), f("containers"), i(0), f("name")]),
        ("data[.config.yml]", vec![f("data"), f(".config.yml")]),
        (
            "metadata.annotations['crossplane.io/external-name']",
            vec![f("metadata"), f("annotations"), f("crossplane.io/external-name")],
        ),
        (
            "metadata.labels[example.crossplane.io/app]",
            vec![f("metadata"), f("labels"), f("example.crossplane.io/app")],
        ),
        ("spec.items[0][8]", vec![f("spec"), f("items"), i(0), i(8)]),
        ("apiVersion", vec![f("apiVersion")]),
        ("[42]", vec![i(42)]),
        ("a[\"b\"]", vec![f("a"), f("b")]),
        ("a[*].b", vec![f("a"), f("*"), f("b")]),
        ("a[0]b", vec![f("a"), i(0), f("b")]),
        // Larger than an unsigned 32-bit number: a field name, not an index.
        ("a[4294967296]", vec![f("a"), f("4294967296")]),
        ("a[-1]", vec![f("a"), f("-1")]),
        ("", vec![]),
    ];
    for (path, want) in cases {
        let got = FieldPath::parse(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(got.segments(), want.as_slice(), "{path}");
    }
}

#[test]
fn rejects_the_documented_invalid_paths_with_crossplanes_messages() {
    let cases = [
        (".metadata.name", "cannot parse path \".metadata.name\": unexpected '.' at position 0"),
        ("metadata..name", "cannot parse path \"metadata..name\": unexpected '.' at position 9"),
        ("metadata.name.", "cannot parse path \"metadata.name.\": unexpected '.' at position 13"),
        ("spec.containers[]", "cannot parse path \"spec.containers[]\": unexpected ']' at position 16"),
        (
            "spec.containers.[0].name",
            "cannot parse path \"spec.containers.[0].name\": unexpected '[' at position 16",
        ),
        ("spec[0", "cannot parse path \"spec[0\": unterminated '[' at position 4"),
        ("spec]", "cannot parse path \"spec]\": unexpected ']' at position 4"),
        ("a[b[c]", "cannot parse path \"a[b[c]\": unexpected '[' at position 3"),
    ];
    for (path, want) in cases {
        let err = FieldPath::parse(path).unwrap_err();
        assert_eq!(err.to_string(), want, "{path}");
    }
}

#[test]
fn renders_fields_with_periods_and_wildcards_in_brackets() {
    let path = FieldPath::from_segments(vec![f("metadata"), f("annotations"), f("a.b/c"), i(3), f("*")]);
    assert_eq!(path.to_string(), "metadata.annotations[a.b/c][3][*]");
    assert_eq!(FieldPath::from_segments(vec![i(1), f("x")]).to_string(), "[1].x");
}

#[test]
fn get_tells_not_found_from_wrong_type() {
    let obj = json!({"spec": {"list": [1, {"a": "b"}], "s": "str"}});
    assert_eq!(get_value(&obj, "spec.list[1].a").unwrap(), &json!("b"));
    assert_eq!(get_value(&obj, "spec").unwrap(), &obj["spec"]);

    let missing = get_value(&obj, "spec.nope.deeper").unwrap_err();
    assert!(missing.is_not_found());
    assert_eq!(missing.to_string(), "spec.nope: no such field");

    let past_end = get_value(&obj, "spec.list[2]").unwrap_err();
    assert!(past_end.is_not_found());
    assert_eq!(past_end.to_string(), "spec.list[2]: no such element");

    let not_object = get_value(&obj, "spec.s.x").unwrap_err();
    assert!(!not_object.is_not_found());
    assert_eq!(not_object.to_string(), "spec.s: not an object");

    let not_array = get_value(&obj, "spec.s[0]").unwrap_err();
    assert!(!not_array.is_not_found());
    assert_eq!(not_array.to_string(), "spec.s: not an array");

    assert!(!FieldPath::parse("..").map(|_| ()).unwrap_err().is_not_found());
}

#[test]
fn typed_getters_check_the_type() {
    let obj = json!({"a": "x", "b": true, "c": 1});
    assert_eq!(get_string(&obj, "a").unwrap(), "x");
    assert!(get_bool(&obj, "b").unwrap());
    assert_eq!(get_string(&obj, "c").unwrap_err().to_string(), "c: not a string");
    assert_eq!(get_bool(&obj, "a").unwrap_err().to_string(), "a: not a bool");
    assert!(get_string(&obj, "z").unwrap_err().is_not_found());
}

#[test]
fn set_creates_objects_and_grows_arrays_with_nulls() {
    let mut obj = json!({});
    set_value(&mut obj, "spec.items[2].name", json!("c")).unwrap();
    assert_eq!(obj, json!({"spec": {"items": [null, null, {"name": "c"}]}}));

    set_value(&mut obj, "spec.items[0][1]", json!(7)).unwrap();
    assert_eq!(obj, json!({"spec": {"items": [[null, 7], null, {"name": "c"}]}}));

    // An existing array is grown, not replaced.
    set_value(&mut obj, "spec.items[4]", json!("e")).unwrap();
    assert_eq!(obj["spec"]["items"], json!([[null, 7], null, {"name": "c"}, null, "e"]));

    // A bracketed name with periods is one field.
    set_value(&mut obj, "metadata.annotations['crossplane.io/external-name']", json!("x")).unwrap();
    assert_eq!(obj["metadata"]["annotations"], json!({"crossplane.io/external-name": "x"}));

    // A null on the way counts as missing.
    let mut obj = json!({"spec": null});
    set_value(&mut obj, "spec.a", json!(1)).unwrap();
    assert_eq!(obj, json!({"spec": {"a": 1}}));
}

#[test]
fn set_refuses_to_go_through_scalars_and_huge_indexes() {
    let mut obj = json!({"spec": {"s": "str", "l": [1]}});
    let err = set_value(&mut obj, "spec.s.x", json!(1)).unwrap_err();
    assert_eq!(err.to_string(), "spec.s is not an object");
    let err = set_value(&mut obj, "spec.s[0]", json!(1)).unwrap_err();
    assert_eq!(err.to_string(), "spec.s is not an array");
    let err = set_value(&mut obj, "spec.l.x", json!(1)).unwrap_err();
    assert_eq!(err.to_string(), "spec.l is not an object");
    let err = set_value(&mut obj, "spec.l[1025]", json!(1)).unwrap_err();
    assert_eq!(err.to_string(), "index 1025 is greater than max allowed index 1024");
    set_value(&mut obj, "spec.l[1024]", json!(1)).unwrap();
    assert_eq!(obj["spec"]["l"].as_array().unwrap().len(), 1025);
}

#[test]
fn set_on_an_empty_path_replaces_the_root() {
    let mut obj = json!({"a": 1});
    FieldPath::default().set(&mut obj, json!("x")).unwrap();
    assert_eq!(obj, json!("x"));
}

#[test]
fn delete_removes_fields_and_elements() {
    let mut obj = json!({"spec": {"a": 1, "b": 2, "l": ["x", "y", "z"]}});
    delete_field(&mut obj, "spec.a").unwrap();
    delete_field(&mut obj, "spec.l[1]").unwrap();
    assert_eq!(obj, json!({"spec": {"b": 2, "l": ["x", "z"]}}));
    // Missing paths are not errors.
    delete_field(&mut obj, "spec.nope.deeper").unwrap();
    delete_field(&mut obj, "spec.l[9]").unwrap();
    delete_field(&mut obj, "status").unwrap();
    assert_eq!(obj, json!({"spec": {"b": 2, "l": ["x", "z"]}}));
    assert_eq!(delete_field(&mut obj, "spec.b.c").unwrap_err().to_string(), "spec.b is not an object");
    assert_eq!(delete_field(&mut obj, "spec.b[0]").unwrap_err().to_string(), "spec.b is not an array");
}

#[test]
fn wildcards_expand_to_each_index_and_key() {
    let obj = json!({"spec": {"containers": [
        {"name": "a", "args": ["x", "y"]},
        {"name": "b", "args": ["z"]}
    ], "m": {"k2": 1, "k1": 2}}});
    let expanded: Vec<String> =
        expand_wildcards(&obj, &FieldPath::parse("spec.containers[*].args[*]").unwrap())
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect();
    assert_eq!(
        expanded,
        vec!["spec.containers[0].args[0]", "spec.containers[0].args[1]", "spec.containers[1].args[0]"]
    );
    let keys: Vec<String> = expand_wildcards(&obj, &FieldPath::parse("spec.m[*]").unwrap())
        .unwrap()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(keys, vec!["spec.m.k1", "spec.m.k2"]);
    // A missing prefix expands to nothing; a scalar cannot be expanded.
    assert!(expand_wildcards(&obj, &FieldPath::parse("spec.nope[*]").unwrap()).unwrap().is_empty());
    let err = expand_wildcards(&obj, &FieldPath::parse("spec.containers[0].name[*]").unwrap()).unwrap_err();
    assert_eq!(err.to_string(), "\"spec.containers[0].name\": unexpected wildcard usage");
}

/// One case per merge policy, written from Crossplane's documented toFieldPath policies.
#[test]
fn merge_policies() {
    let dst = json!({"keep": "dst", "empty": "", "list": ["a", "b"], "nested": {"x": 1, "y": 2}});
    let src = json!({"keep": "src", "empty": "filled", "list": ["b", "c"], "nested": {"y": 3, "z": 4}, "new": true});

    let merge_objects = MergeOptions { keep_map_values: true, append_slice: false };
    assert_eq!(
        merge_values(dst.clone(), src.clone(), &merge_objects),
        json!({"keep": "dst", "empty": "filled", "list": ["a", "b"],
               "nested": {"x": 1, "y": 2, "z": 4}, "new": true})
    );

    let merge_objects_append = MergeOptions { keep_map_values: true, append_slice: true };
    assert_eq!(
        merge_values(dst.clone(), src.clone(), &merge_objects_append),
        json!({"keep": "dst", "empty": "filled", "list": ["a", "b", "c"],
               "nested": {"x": 1, "y": 2, "z": 4}, "new": true})
    );

    let force = MergeOptions { keep_map_values: false, append_slice: false };
    assert_eq!(
        merge_values(dst.clone(), src.clone(), &force),
        json!({"keep": "src", "empty": "filled", "list": ["b", "c"],
               "nested": {"x": 1, "y": 3, "z": 4}, "new": true})
    );

    let force_append = MergeOptions { keep_map_values: false, append_slice: true };
    assert_eq!(
        merge_values(dst.clone(), src, &force_append),
        json!({"keep": "src", "empty": "filled", "list": ["a", "b", "c"],
               "nested": {"x": 1, "y": 3, "z": 4}, "new": true})
    );

    // Top-level arrays: appended without duplicates (numbers compare by value).
    assert_eq!(merge_values(json!([1, 2]), json!([2.0, 3]), &force_append), json!([1, 2, 3]));
    // Top-level scalars: kept under MergeObjects unless empty, replaced under Force.
    assert_eq!(merge_values(json!("a"), json!("b"), &merge_objects), json!("a"));
    assert_eq!(merge_values(json!(0), json!(5), &merge_objects), json!(5));
    assert_eq!(merge_values(json!("a"), json!("b"), &force), json!("b"));
    // Null on either side yields the source.
    assert_eq!(merge_values(Value::Null, json!({"a": 1}), &merge_objects), json!({"a": 1}));
    assert_eq!(merge_values(json!({"a": 1}), Value::Null, &merge_objects), Value::Null);
    // A source object replaces a destination scalar under Force.
    assert_eq!(merge_values(json!({"a": "s"}), json!({"a": {"b": 1}}), &force), json!({"a": {"b": 1}}));
}

#[test]
fn merge_at_a_path_replaces_without_options_and_merges_with_them() {
    let mut obj = json!({"spec": {"tags": {"a": "1"}}});
    let path = FieldPath::parse("spec.tags").unwrap();
    path.merge(
        &mut obj,
        json!({"b": "2"}),
        Some(&MergeOptions { keep_map_values: true, append_slice: false }),
    )
    .unwrap();
    assert_eq!(obj, json!({"spec": {"tags": {"a": "1", "b": "2"}}}));
    path.merge(&mut obj, json!({"c": "3"}), None).unwrap();
    assert_eq!(obj, json!({"spec": {"tags": {"c": "3"}}}));
    // A missing destination is simply set.
    FieldPath::parse("spec.new[1]")
        .unwrap()
        .merge(&mut obj, json!(["x"]), Some(&MergeOptions { keep_map_values: false, append_slice: true }))
        .unwrap();
    assert_eq!(obj["spec"]["new"], json!([null, ["x"]]));
    // A wrong type on the way to the destination is an error when merging.
    let err = FieldPath::parse("spec.tags.c.d")
        .unwrap()
        .merge(&mut obj, json!(1), Some(&MergeOptions::default()))
        .unwrap_err();
    assert_eq!(err.to_string(), "spec.tags.c: not an object");
}

fn segment_strategy() -> impl Strategy<Value = Segment> {
    prop_oneof![
        "[a-zA-Z_][a-zA-Z0-9_/-]{0,8}".prop_map(Segment::Field),
        // Names with periods are rendered in brackets; they must not look like numbers.
        "[a-z][a-z0-9]{0,4}\\.[a-z0-9.]{0,6}".prop_map(Segment::Field),
        (0usize..50).prop_map(Segment::Index),
    ]
}

proptest! {
    #[test]
    fn parse_of_a_rendered_path_returns_the_same_segments(segments in prop::collection::vec(segment_strategy(), 1..6)) {
        let path = FieldPath::from_segments(segments.clone());
        let rendered = path.to_string();
        let parsed = FieldPath::parse(&rendered).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(parsed.segments(), segments.as_slice());
    }

    #[test]
    fn set_then_get_round_trips(
        segments in prop::collection::vec(segment_strategy(), 1..6),
        value in prop_oneof![any::<i64>().prop_map(Value::from), "[a-z]{0,5}".prop_map(Value::from), any::<bool>().prop_map(Value::from)],
    ) {
        // Only paths starting with a field fit an object root.
        prop_assume!(matches!(segments[0], Segment::Field(_)));
        let path = FieldPath::from_segments(segments);
        let mut obj = json!({"untouched": 1});
        path.set(&mut obj, value.clone()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(path.get(&obj).map_err(|e| TestCaseError::fail(e.to_string()))?, &value);
        // Setting again is idempotent.
        let before = obj.clone();
        path.set(&mut obj, value).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&obj, &before);
        if path.segments()[0] != Segment::Field("untouched".into()) {
            prop_assert_eq!(&obj["untouched"], &json!(1));
        }
    }

    #[test]
    fn delete_after_set_makes_the_path_missing(segments in prop::collection::vec(segment_strategy(), 1..5)) {
        prop_assume!(matches!(segments[0], Segment::Field(_)));
        let path = FieldPath::from_segments(segments);
        let mut obj = json!({});
        path.set(&mut obj, json!("v")).map_err(|e| TestCaseError::fail(e.to_string()))?;
        path.delete(&mut obj).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let still = path.get(&obj);
        // Deleting an array element shifts later ones up, so the element may exist again only if
        // it was not the last; in a freshly built path it always is the last.
        prop_assert!(still.is_err() || still.ok() != Some(&json!("v")));
    }
}
