//! Table tests for validation: one row per keyword/extension, each with the
//! schema of `spec.x`, the value of `spec.x` and the exact expected errors.

use serde_json::{Value, json};

use super::{compile, object_with, rendered, spec_with};
use crate::schema::Reason;

/// (name, schema of spec.x, value of spec.x, expected "field: message" lines)
type Row = (&'static str, Value, Value, Vec<&'static str>);

fn rows() -> Vec<Row> {
    vec![
        ("integer ok", json!({"type": "integer"}), json!(3), vec![]),
        (
            "integer-valued float is an integer",
            json!({"type": "integer"}),
            json!(3.0),
            vec![],
        ),
        (
            "string for integer",
            json!({"type": "integer"}),
            json!("string"),
            vec![
                r#"spec.x: Invalid value: "string": spec.x in body must be of type integer: "string""#,
            ],
        ),
        (
            "fraction for integer",
            json!({"type": "integer"}),
            json!(3.5),
            vec![
                r#"spec.x: Invalid value: "number": spec.x in body must be of type integer: "number""#,
            ],
        ),
        (
            "number accepts fraction",
            json!({"type": "number"}),
            json!(3.5),
            vec![],
        ),
        (
            "boolean for string",
            json!({"type": "string"}),
            json!(true),
            vec![
                r#"spec.x: Invalid value: "boolean": spec.x in body must be of type string: "boolean""#,
            ],
        ),
        (
            "array for object",
            json!({"type": "object"}),
            json!([]),
            vec![
                r#"spec.x: Invalid value: "array": spec.x in body must be of type object: "array""#,
            ],
        ),
        (
            "object for array",
            json!({"type": "array", "items": {"type": "string"}}),
            json!({}),
            vec![
                r#"spec.x: Invalid value: "object": spec.x in body must be of type array: "object""#,
            ],
        ),
        (
            "string for boolean",
            json!({"type": "boolean"}),
            json!("true"),
            vec![
                r#"spec.x: Invalid value: "string": spec.x in body must be of type boolean: "string""#,
            ],
        ),
        (
            "null when nullable",
            json!({"type": "string", "nullable": true}),
            Value::Null,
            vec![],
        ),
        (
            "nullable skips other checks",
            json!({"type": "string", "nullable": true, "enum": ["a"]}),
            Value::Null,
            vec![],
        ),
        (
            "null when not nullable",
            json!({"type": "string"}),
            Value::Null,
            vec![r#"spec.x: Invalid value: "null": spec.x in body must be of type string: "null""#],
        ),
        (
            "int-or-string int",
            json!({"x-kubernetes-int-or-string": true}),
            json!(8080),
            vec![],
        ),
        (
            "int-or-string string",
            json!({"x-kubernetes-int-or-string": true}),
            json!("50%"),
            vec![],
        ),
        (
            "int-or-string bool",
            json!({"x-kubernetes-int-or-string": true}),
            json!(true),
            vec![
                r#"spec.x: Invalid value: "boolean": spec.x in body must be of type integer or string: "boolean""#,
            ],
        ),
        (
            "int-or-string fraction",
            json!({"x-kubernetes-int-or-string": true}),
            json!(1.5),
            vec![
                r#"spec.x: Invalid value: "number": spec.x in body must be of type integer or string: "number""#,
            ],
        ),
        (
            "int-or-string with anyOf",
            json!({"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]}),
            json!("a"),
            vec![],
        ),
        (
            "enum ok",
            json!({"type": "string", "enum": ["a", "b"]}),
            json!("a"),
            vec![],
        ),
        (
            "enum miss",
            json!({"type": "string", "enum": ["a", "b"]}),
            json!("x"),
            vec![r#"spec.x: Unsupported value: "x": supported values: "a", "b""#],
        ),
        (
            "enum numbers compare by value",
            json!({"type": "number", "enum": [1, 2.5]}),
            json!(1.0),
            vec![],
        ),
        (
            "enum of objects",
            json!({"type": "object", "enum": [{"a": 1}]}),
            json!({"a": 2}),
            vec![r#"spec.x: Unsupported value: {"a":2}: supported values: {"a":1}"#],
        ),
        (
            "maximum",
            json!({"type": "integer", "maximum": 10}),
            json!(11),
            vec!["spec.x: Invalid value: 11: spec.x in body should be less than or equal to 10"],
        ),
        (
            "maximum boundary",
            json!({"type": "integer", "maximum": 10}),
            json!(10),
            vec![],
        ),
        (
            "exclusive maximum",
            json!({"type": "integer", "maximum": 10, "exclusiveMaximum": true}),
            json!(10),
            vec!["spec.x: Invalid value: 10: spec.x in body should be less than 10"],
        ),
        (
            "minimum",
            json!({"type": "integer", "minimum": 1}),
            json!(0),
            vec!["spec.x: Invalid value: 0: spec.x in body should be greater than or equal to 1"],
        ),
        (
            "exclusive minimum",
            json!({"type": "number", "minimum": 1.5, "exclusiveMinimum": true}),
            json!(1.5),
            vec!["spec.x: Invalid value: 1.5: spec.x in body should be greater than 1.5"],
        ),
        (
            "float bound prints like Go",
            json!({"type": "number", "maximum": 10.0}),
            json!(10.5),
            vec!["spec.x: Invalid value: 10.5: spec.x in body should be less than or equal to 10"],
        ),
        (
            "big integers compare exactly",
            json!({"type": "integer", "maximum": 9007199254740993_i64}),
            json!(9007199254740994_i64),
            vec![
                "spec.x: Invalid value: 9007199254740994: spec.x in body should be less than or equal to 9007199254740993",
            ],
        ),
        (
            "multipleOf",
            json!({"type": "integer", "multipleOf": 5}),
            json!(12),
            vec!["spec.x: Invalid value: 12: spec.x in body should be a multiple of 5"],
        ),
        (
            "multipleOf ok",
            json!({"type": "integer", "multipleOf": 5}),
            json!(-15),
            vec![],
        ),
        (
            "multipleOf fractional",
            json!({"type": "number", "multipleOf": 0.1}),
            json!(0.3),
            vec![],
        ),
        (
            "multipleOf fractional miss",
            json!({"type": "number", "multipleOf": 0.25}),
            json!(0.3),
            vec!["spec.x: Invalid value: 0.3: spec.x in body should be a multiple of 0.25"],
        ),
        (
            "maxLength",
            json!({"type": "string", "maxLength": 3}),
            json!("abcd"),
            vec!["spec.x: Too long: may not be longer than 3"],
        ),
        (
            "maxLength counts characters",
            json!({"type": "string", "maxLength": 3}),
            json!("äöü"),
            vec![],
        ),
        (
            "minLength",
            json!({"type": "string", "minLength": 2}),
            json!("a"),
            vec![r#"spec.x: Invalid value: "a": spec.x in body should be at least 2 chars long"#],
        ),
        (
            "pattern",
            json!({"type": "string", "pattern": "^[a-z]+$"}),
            json!("ABC"),
            vec![r#"spec.x: Invalid value: "ABC": spec.x in body should match '^[a-z]+$'"#],
        ),
        (
            "pattern is a search",
            json!({"type": "string", "pattern": "b"}),
            json!("abc"),
            vec![],
        ),
        (
            "format",
            json!({"type": "string", "format": "date-time"}),
            json!("yesterday"),
            vec![
                r#"spec.x: Invalid value: "yesterday": spec.x in body must be of type date-time: "yesterday""#,
            ],
        ),
        (
            "int32 format",
            json!({"type": "integer", "format": "int32"}),
            json!(3000000000_i64),
            vec![
                r#"spec.x: Invalid value: 3000000000: spec.x in body must be of type int32: "3000000000""#,
            ],
        ),
        (
            "unknown format ignored",
            json!({"type": "string", "format": "color"}),
            json!("??"),
            vec![],
        ),
        (
            "minItems",
            json!({"type": "array", "items": {"type": "integer"}, "minItems": 1}),
            json!([]),
            vec!["spec.x: Invalid value: 0: spec.x in body should have at least 1 items"],
        ),
        (
            "maxItems",
            json!({"type": "array", "items": {"type": "integer"}, "maxItems": 2}),
            json!([1, 2, 3]),
            vec!["spec.x: Too many: 3: must have at most 2 items"],
        ),
        (
            "uniqueItems",
            json!({"type": "array", "items": {"type": "number"}, "uniqueItems": true}),
            json!([1, 2, 1.0]),
            vec!["spec.x[2]: Duplicate value: 1"],
        ),
        (
            "uniqueItems objects ignore key order",
            json!({"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}, "uniqueItems": true}),
            json!([{"a": 1, "b": 2}, {"b": 2, "a": 1}]),
            vec![r#"spec.x[1]: Duplicate value: {"a":1,"b":2}"#],
        ),
        (
            "list-type set",
            json!({"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"}),
            json!(["a", "b", "a"]),
            vec![r#"spec.x[2]: Duplicate value: "a""#],
        ),
        (
            "list-type atomic allows duplicates",
            json!({"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "atomic"}),
            json!(["a", "a"]),
            vec![],
        ),
        (
            "list-type map duplicate",
            json!({"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
            "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "v": {"type": "integer"}}}}),
            json!([{"name": "a", "v": 1}, {"name": "a", "v": 2}]),
            vec![r#"spec.x[1]: Duplicate value: {"name":"a"}"#],
        ),
        (
            "list-type map two keys",
            json!({"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port", "protocol"],
            "items": {"type": "object", "properties": {"port": {"type": "integer"}, "protocol": {"type": "string"}}}}),
            json!([{"port": 80, "protocol": "TCP"}, {"port": 80, "protocol": "UDP"}, {"port": 80, "protocol": "TCP"}]),
            vec![r#"spec.x[2]: Duplicate value: {"port":80,"protocol":"TCP"}"#],
        ),
        (
            "list-type map missing key",
            json!({"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
            "items": {"type": "object", "properties": {"name": {"type": "string"}}}}),
            json!([{}]),
            vec!["spec.x[0].name: Required value"],
        ),
        (
            "required",
            json!({"type": "object", "required": ["a", "b"], "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}),
            json!({"a": "x"}),
            vec!["spec.x.b: Required value"],
        ),
        (
            "minProperties",
            json!({"type": "object", "minProperties": 1, "additionalProperties": {"type": "string"}}),
            json!({}),
            vec!["spec.x: Invalid value: 0: spec.x in body should have at least 1 properties"],
        ),
        (
            "maxProperties",
            json!({"type": "object", "maxProperties": 1, "additionalProperties": {"type": "string"}}),
            json!({"a": "1", "b": "2"}),
            vec!["spec.x: Too many: 2: must have at most 1 items"],
        ),
        (
            "additionalProperties schema",
            json!({"type": "object", "additionalProperties": {"type": "string"}}),
            json!({"a": 1}),
            vec![
                r#"spec.x[a]: Invalid value: "integer": spec.x[a] in body must be of type string: "integer""#,
            ],
        ),
        (
            "additionalProperties false where pruning keeps fields",
            json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true,
            "properties": {"a": {"type": "integer"}}, "additionalProperties": false}),
            json!({"a": 1, "b": 2}),
            vec!["spec.x.b: Forbidden: spec.x.b in body is a forbidden property"],
        ),
        (
            "additionalProperties false where pruning removes fields",
            json!({"type": "object",
            "properties": {"a": {"type": "integer"}}, "additionalProperties": false}),
            json!({"a": 1, "b": 2}),
            vec![],
        ),
        (
            "nested array paths",
            json!({"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string", "minLength": 1}}}}),
            json!([{"name": "a"}, {"name": ""}]),
            vec![
                r#"spec.x[1].name: Invalid value: "": spec.x[1].name in body should be at least 1 chars long"#,
            ],
        ),
        (
            "allOf",
            json!({"type": "integer", "allOf": [{"minimum": 1}, {"maximum": 5}]}),
            json!(7),
            vec!["spec.x: Invalid value: 7: spec.x in body should be less than or equal to 5"],
        ),
        (
            "anyOf ok",
            json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
            "anyOf": [{"required": ["a"]}, {"required": ["b"]}]}),
            json!({"b": "x"}),
            vec![],
        ),
        (
            "anyOf miss",
            json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
            "anyOf": [{"required": ["a"]}, {"required": ["b"]}]}),
            json!({}),
            vec![
                r#"spec.x: Invalid value: "object": spec.x in body must validate at least one schema (anyOf)"#,
            ],
        ),
        (
            "oneOf both",
            json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
            "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}),
            json!({"a": "1", "b": "2"}),
            vec![
                r#"spec.x: Invalid value: "object": spec.x in body must validate one and only one schema (oneOf)"#,
            ],
        ),
        (
            "oneOf exactly one",
            json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
            "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}),
            json!({"a": "1"}),
            vec![],
        ),
        (
            "not",
            json!({"type": "string", "not": {"enum": ["forbidden"]}}),
            json!("forbidden"),
            vec![
                r#"spec.x: Invalid value: "string": spec.x in body must not validate the schema (not)"#,
            ],
        ),
        (
            "junctor keywords apply by kind",
            json!({"type": "string", "anyOf": [{"minimum": 3}]}),
            json!("s"),
            vec![],
        ),
        (
            "embedded resource needs apiVersion and kind",
            json!({"type": "object", "x-kubernetes-embedded-resource": true,
            "x-kubernetes-preserve-unknown-fields": false}),
            json!({}),
            vec![
                "spec.x.apiVersion: Required value",
                "spec.x.kind: Required value",
            ],
        ),
        (
            "embedded resource with preserve may be empty",
            json!({"type": "object", "x-kubernetes-embedded-resource": true,
            "x-kubernetes-preserve-unknown-fields": true}),
            json!({}),
            vec![],
        ),
        (
            "embedded resource kind must be a string",
            json!({"type": "object", "x-kubernetes-embedded-resource": true,
            "x-kubernetes-preserve-unknown-fields": true}),
            json!({"apiVersion": "v1", "kind": 5, "metadata": []}),
            vec![
                r#"spec.x.kind: Invalid value: "integer": spec.x.kind in body must be of type string: "integer""#,
                r#"spec.x.metadata: Invalid value: "array": spec.x.metadata in body must be of type object: "array""#,
            ],
        ),
        (
            "embedded resource ok",
            json!({"type": "object", "x-kubernetes-embedded-resource": true,
            "x-kubernetes-preserve-unknown-fields": true}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"}}),
            vec![],
        ),
        (
            "preserve-unknown without type accepts anything",
            json!({"x-kubernetes-preserve-unknown-fields": true}),
            json!([1, {"a": null}]),
            vec![],
        ),
    ]
}

#[test]
fn validation_table() {
    for (name, schema, value, expected) in rows() {
        let s = compile(&spec_with(json!({ "x": schema })));
        let got = rendered(&s.validate(&object_with(json!({ "x": value }))));
        let mut want: Vec<String> = expected.iter().map(|e| e.to_string()).collect();
        want.sort();
        assert_eq!(got, want, "case {name:?}");
    }
}

#[test]
fn reasons_match_kubernetes_cause_types() {
    let cases: Vec<(Value, Value, Reason)> = vec![
        (
            json!({"type": "object", "required": ["y"]}),
            json!({}),
            Reason::FieldValueRequired,
        ),
        (
            json!({"type": "integer", "maximum": 1}),
            json!(2),
            Reason::FieldValueInvalid,
        ),
        (
            json!({"type": "string", "enum": ["a"]}),
            json!("b"),
            Reason::FieldValueNotSupported,
        ),
        (
            json!({"type": "integer"}),
            json!("s"),
            Reason::FieldValueTypeInvalid,
        ),
        (
            json!({"type": "string", "maxLength": 1}),
            json!("ab"),
            Reason::FieldValueTooLong,
        ),
        (
            json!({"type": "array", "items": {"type": "integer"}, "maxItems": 0}),
            json!([1]),
            Reason::FieldValueTooMany,
        ),
        (
            json!({"type": "array", "items": {"type": "integer"}, "x-kubernetes-list-type": "set"}),
            json!([1, 1]),
            Reason::FieldValueDuplicate,
        ),
        (
            json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true, "additionalProperties": false}),
            json!({"z": 1}),
            Reason::FieldValueForbidden,
        ),
    ];
    for (schema, value, reason) in cases {
        let s = compile(&spec_with(json!({ "x": schema })));
        let errs = s.validate(&object_with(json!({ "x": value })));
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(errs[0].reason, reason);
        assert_eq!(errs[0].reason.as_str(), format!("{reason}"));
    }
}

#[test]
fn root_type_and_metadata() {
    let s = compile(&json!({"type": "object", "properties": {
        "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 3}}}}}));
    let errs = s.validate(&json!([]));
    assert_eq!(
        rendered(&errs),
        vec![r#"Invalid value: "array": body must be of type object: "array""#]
    );
    let errs = s.validate(&json!({"metadata": {"name": "toolong", "labels": {"a": "b"}}}));
    assert_eq!(
        rendered(&errs),
        vec!["metadata.name: Too long: may not be longer than 3"]
    );
}

#[test]
fn root_additional_properties_false_spares_top_level_meta_fields() {
    let s = compile(
        &json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true, "additionalProperties": false}),
    );
    let errs = s.validate(&json!({"apiVersion": "v1", "kind": "K", "metadata": {}, "extra": 1}));
    assert_eq!(
        rendered(&errs),
        vec!["extra: Forbidden: extra in body is a forbidden property"]
    );
}

#[test]
fn too_deep_object_is_an_error_not_a_crash() {
    let s = compile(&json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
    let mut v = json!(1);
    for _ in 0..1_000 {
        v = Value::Array(vec![v]);
    }
    let obj = json!({ "spec": v });
    let errs = s.validate(&obj);
    assert_eq!(errs.len(), 1);
    assert!(
        errs[0].message.contains("maximum depth of 128"),
        "{}",
        errs[0]
    );
    assert!(crate::schema::check_depth(&obj).is_err());
    assert!(crate::schema::check_depth(&json!({"a": [1]})).is_ok());
    // Defaulting and pruning stop at the limit instead of recursing further.
    let mut copy = obj.clone();
    s.default(&mut copy);
    assert!(s.prune(&mut copy).is_empty());
    // Dropping a very deep Value recurses inside serde_json; unwind it by hand.
    let mut cur = obj;
    while let Some(next) = cur
        .as_object_mut()
        .and_then(|m| m.remove("spec"))
        .or_else(|| cur.as_array_mut().and_then(|a| a.pop()))
    {
        cur = next;
    }
}

/// kube-apiserver (apiextensions-apiserver's `hasBlockingErr`) runs a CRD's CEL rules after
/// its keywords unless a keyword error blocks them, and then says so once, without a field.
#[test]
fn keyword_errors_that_block_cel_rules_say_so_and_others_come_with_the_rules_errors() {
    let schema = compile(&spec_with(json!({
        "size": {"type": "string", "enum": ["S", "M"], "x-kubernetes-validations": [{"rule": "self != 'XL'", "message": "XL is not sold"}]},
        "name": {"type": "string", "pattern": "^[a-z]+$", "x-kubernetes-validations": [{"rule": "self.size() <= 3", "message": "at most 3 letters"}]},
    })));
    let not_checked = r#"<nil>: Invalid value: "null": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"#;
    // Outside the enum and against the rule: the enum's error, and the rules not checked.
    assert_eq!(rendered(&schema.validate(&object_with(json!({"size": "XL"})))), [not_checked, r#"spec.size: Unsupported value: "XL": supported values: "S", "M""#]);
    let blocked = schema.validate(&object_with(json!({"size": "XL"})));
    assert_eq!((blocked[1].reason, blocked[1].field.as_str()), (Reason::FieldValueInvalid, "<nil>"));
    // The same on an update, and for the other blocking errors (a wrong type here).
    assert_eq!(rendered(&schema.validate_update(&object_with(json!({"size": 5})), Some(&object_with(json!({"size": "S"}))))).len(), 2);
    assert!(rendered(&schema.validate(&object_with(json!({"size": 5})))).contains(&not_checked.to_string()));
    // A pattern does not block: its error comes with the rule's.
    assert_eq!(
        rendered(&schema.validate(&object_with(json!({"name": "ABCD"})))),
        [r#"spec.name: Invalid value: "ABCD": spec.name in body should match '^[a-z]+$'"#, r#"spec.name: Invalid value: "string": at most 3 letters"#]
    );
    // Only the rule: its error alone.
    assert_eq!(rendered(&schema.validate(&object_with(json!({"name": "abcd"})))), [r#"spec.name: Invalid value: "string": at most 3 letters"#]);
    // A schema without rules never adds the notice.
    let plain = compile(&spec_with(json!({"size": {"type": "string", "enum": ["S"]}})));
    assert_eq!(rendered(&plain.validate(&object_with(json!({"size": "XL"})))), [r#"spec.size: Unsupported value: "XL": supported values: "S""#]);
}
