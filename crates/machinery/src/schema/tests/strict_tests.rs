//! Tests for duplicate-key detection used by `fieldValidation=Strict`.

use crate::schema::duplicate_fields;

#[test]
fn duplicate_field_table() {
    let cases: Vec<(&str, Vec<&str>)> = vec![
        (r#"{"metadata":{"name":"a"}}"#, vec![]),
        (
            r#"{"metadata":{"name":"a","name":"b"}}"#,
            vec!["metadata.name"],
        ),
        (r#"{"kind":"A","kind":"B","spec":{}}"#, vec!["kind"]),
        (
            r#"{"spec":{"items":[{"x":1},{"x":1,"y":2,"x":3}]}}"#,
            vec!["spec.items[1].x"],
        ),
        (r#"{"a":1,"a":2,"a":3}"#, vec!["a"]),
        (r#"{"a":1,"\u0061":2}"#, vec!["a"]),
        (
            r#"{"s":{"a":{"b":1},"a":{"b":2,"b":3}}}"#,
            vec!["s.a", "s.a.b"],
        ),
        (r#"[{"a":1,"a":2}]"#, vec!["[0].a"]),
        (r#"  {"a":[[],[{"k":null,"k":true}]]}  "#, vec!["a[1][0].k"]),
        ("12.5", vec![]),
    ];
    for (input, want) in cases {
        assert_eq!(
            duplicate_fields(input.as_bytes()),
            Ok(want.iter().map(|s| s.to_string()).collect()),
            "{input}"
        );
    }
}

#[test]
fn invalid_json_is_an_error() {
    for input in [
        r#"{"a":1"#,
        r#"{"a":1} x"#,
        "",
        "{'a':1}",
        r#"{"a":01}"#,
        "\u{ff}",
    ] {
        assert!(duplicate_fields(input.as_bytes()).is_err(), "{input:?}");
    }
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let deep = "[".repeat(100_000) + &"]".repeat(100_000);
    let err = duplicate_fields(deep.as_bytes());
    assert!(err.is_err_and(|e| e.contains("recursion limit")));
    let ok = "[".repeat(100) + &"]".repeat(100);
    assert_eq!(duplicate_fields(ok.as_bytes()), Ok(vec![]));
}
