//! Table tests for `validate_structural`: (schema, expected messages).

use serde_json::{Value, json};

use crate::schema::validate_structural;

/// (name, schema, exact expected messages)
type Row = (&'static str, Value, Vec<&'static str>);

fn rows() -> Vec<Row> {
    vec![
        (
            "structural schema",
            json!({"type": "object", "properties": {
                "spec": {"type": "object", "properties": {
                    "replicas": {"type": "integer", "default": 1, "minimum": 0},
                    "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
                    "raw": {"x-kubernetes-preserve-unknown-fields": true},
                    "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
                    "sel": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "oneOf": [{"required": ["a"]}, {"required": ["b"]}]},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "conds": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"],
                        "items": {"type": "object", "required": ["type"], "properties": {"type": {"type": "string"}}}}
                }},
                "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}}}
            }}),
            vec![],
        ),
        (
            "missing type with properties",
            json!({"type": "object", "properties": {"spec": {"properties": {"a": {"type": "string"}}}}}),
            vec![
                "openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields",
            ],
        ),
        (
            "missing type with items",
            json!({"type": "object", "properties": {"l": {"items": {"type": "string"}}}}),
            vec![
                "openAPIV3Schema.properties[l].type: Required value: must not be empty for specified array items",
            ],
        ),
        (
            "missing type on a leaf",
            json!({"type": "object", "properties": {"a": {"description": "x"}}}),
            vec!["openAPIV3Schema.properties[a].type: Required value: must not be empty"],
        ),
        (
            "root must be an object",
            json!({"type": "string"}),
            vec![r#"openAPIV3Schema.type: Invalid value: "string": must be object at the root"#],
        ),
        (
            "properties with additionalProperties",
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}}),
            vec![
                "openAPIV3Schema.additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive",
            ],
        ),
        (
            "additionalProperties false",
            json!({"type": "object", "additionalProperties": false}),
            vec![
                "openAPIV3Schema.additionalProperties: Forbidden: additionalProperties cannot be set to false",
            ],
        ),
        (
            "array without items",
            json!({"type": "object", "properties": {"l": {"type": "array"}}}),
            vec![
                "openAPIV3Schema.properties[l].items: Required value: must be specified for type array",
            ],
        ),
        (
            "properties on a scalar",
            json!({"type": "object", "properties": {"s": {"type": "string", "properties": {"a": {"type": "string"}}}}}),
            vec![
                "openAPIV3Schema.properties[s].properties: Forbidden: must only be used with type object",
            ],
        ),
        (
            "items on a non-array",
            json!({"type": "object", "properties": {"s": {"type": "object", "items": {"type": "string"}}}}),
            vec![
                "openAPIV3Schema.properties[s].items: Forbidden: must only be used with type array",
            ],
        ),
        (
            "int-or-string with a type",
            json!({"type": "object", "properties": {"p": {"type": "string", "x-kubernetes-int-or-string": true}}}),
            vec![
                r#"openAPIV3Schema.properties[p].type: Invalid value: "string": must be empty if x-kubernetes-int-or-string is true"#,
            ],
        ),
        (
            "embedded resource that is not an object",
            json!({"type": "object", "properties": {"e": {"type": "string", "x-kubernetes-embedded-resource": true}}}),
            vec![
                r#"openAPIV3Schema.properties[e].type: Invalid value: "string": must be object if x-kubernetes-embedded-resource is true"#,
            ],
        ),
        (
            "invalid default type",
            json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"replicas": {"type": "integer", "default": "x"}}}}}),
            vec![
                r#"openAPIV3Schema.properties[spec].properties[replicas].default: spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#,
            ],
        ),
        (
            "default breaking a constraint",
            json!({"type": "object", "properties": {"n": {"type": "integer", "maximum": 3, "default": 4}}}),
            vec![
                "openAPIV3Schema.properties[n].default: n: Invalid value: 4: n in body should be less than or equal to 3",
            ],
        ),
        (
            "default with unknown fields",
            json!({"type": "object", "properties": {"o": {"type": "object", "default": {"a": 1, "zz": [{"q": 1}]},
            "properties": {"a": {"type": "integer"}}}}}),
            vec![r#"openAPIV3Schema.properties[o].default: Invalid value: unknown field "o.zz""#],
        ),
        (
            "default missing a required field",
            json!({"type": "object", "properties": {"o": {"type": "object", "default": {}, "required": ["a"],
            "properties": {"a": {"type": "integer"}}}}}),
            vec!["openAPIV3Schema.properties[o].default: o.a: Required value"],
        ),
        (
            "default satisfied by nested defaults",
            json!({"type": "object", "properties": {"o": {"type": "object", "default": {}, "required": ["a"],
            "properties": {"a": {"type": "integer", "default": 1}}}}}),
            vec![],
        ),
        (
            "default inside items",
            json!({"type": "object", "properties": {"l": {"type": "array", "items": {"type": "string", "default": 1}}}}),
            vec![
                r#"openAPIV3Schema.properties[l].items.default: l[*]: Invalid value: "integer": l[*] in body must be of type string: "integer""#,
            ],
        ),
        (
            "list-type on a non-array",
            json!({"type": "object", "properties": {"s": {"type": "string", "x-kubernetes-list-type": "set"}}}),
            vec![
                r#"openAPIV3Schema.properties[s].x-kubernetes-list-type: Invalid value: "string": must only be used on type=array"#,
            ],
        ),
        (
            "list-map without keys",
            json!({"type": "object", "properties": {"l": {"type": "array", "x-kubernetes-list-type": "map",
            "items": {"type": "object", "properties": {"a": {"type": "string"}}}}}}),
            vec![
                "openAPIV3Schema.properties[l].x-kubernetes-list-map-keys: Required value: must not be empty if x-kubernetes-list-type is map",
            ],
        ),
        (
            "list-map key problems",
            json!({"type": "object", "properties": {"l": {"type": "array", "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["a", "b", "c"], "items": {"type": "object", "required": ["a"], "properties": {
                "a": {"type": "object"}, "b": {"type": "string"}}}}}}),
            vec![
                r#"openAPIV3Schema.properties[l].items.properties[a].type: Invalid value: "object": must be a scalar type if parent array's x-kubernetes-list-type is map"#,
                "openAPIV3Schema.properties[l].items.properties[b]: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
                r#"openAPIV3Schema.properties[l].x-kubernetes-list-map-keys: Invalid value: "c": entries must all be names of item properties"#,
            ],
        ),
        (
            "list-map with scalar items",
            json!({"type": "object", "properties": {"l": {"type": "array", "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["a"], "items": {"type": "string"}}}}),
            vec![
                r#"openAPIV3Schema.properties[l].items.type: Invalid value: "string": must be object if parent array's x-kubernetes-list-type is map"#,
            ],
        ),
        (
            "map keys without list-type map",
            json!({"type": "object", "properties": {"l": {"type": "array", "x-kubernetes-list-map-keys": ["a"],
            "items": {"type": "object", "properties": {"a": {"type": "string"}}}}}}),
            vec![
                "openAPIV3Schema.properties[l].x-kubernetes-list-map-keys: Forbidden: must only be used if x-kubernetes-list-type is map",
            ],
        ),
        (
            "map-type on a non-object",
            json!({"type": "object", "properties": {"s": {"type": "string", "x-kubernetes-map-type": "atomic"}}}),
            vec![
                r#"openAPIV3Schema.properties[s].x-kubernetes-map-type: Invalid value: "string": must only be used on type=object"#,
            ],
        ),
        (
            "junctor setting structural keywords",
            json!({"type": "object", "properties": {"a": {"type": "string"}},
            "anyOf": [{"type": "object", "default": {}, "nullable": true}], "not": {"x-kubernetes-preserve-unknown-fields": true}}),
            vec![
                "openAPIV3Schema.anyOf[0].default: Forbidden: must be undefined to be structural",
                "openAPIV3Schema.anyOf[0].nullable: Forbidden: must be undefined to be structural",
                "openAPIV3Schema.anyOf[0].type: Forbidden: must be empty to be structural",
                "openAPIV3Schema.not.x-kubernetes-preserve-unknown-fields: Forbidden: must be undefined to be structural",
            ],
        ),
        (
            "junctor introducing fields",
            json!({"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "string"}}}},
            "allOf": [{"properties": {"a": {"properties": {"b": {"minLength": 1}, "c": {"minLength": 1}}}, "z": {}}}]}),
            vec![
                "openAPIV3Schema.allOf[0].properties[a].properties[c]: Forbidden: must not be specified in a value validation unless declared in the structural schema",
                "openAPIV3Schema.allOf[0].properties[z]: Forbidden: must not be specified in a value validation unless declared in the structural schema",
            ],
        ),
        (
            "junctor items need structural items",
            json!({"type": "object", "properties": {"o": {"type": "object", "anyOf": [{"items": {"minLength": 1}}]}}}),
            vec![
                "openAPIV3Schema.properties[o].anyOf[0].items: Forbidden: must not be specified in a value validation unless declared in the structural schema",
            ],
        ),
        (
            "metadata beyond name and generateName",
            json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {
            "labels": {"type": "object", "additionalProperties": {"type": "string"}}}}}}),
            vec![
                "openAPIV3Schema.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified",
            ],
        ),
        (
            "does not compile",
            json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "(" }}}),
            vec![],
        ),
    ]
}

#[test]
fn structural_table() {
    for (name, schema, expected) in rows() {
        let mut got = validate_structural(&schema);
        got.sort();
        if name == "does not compile" {
            assert_eq!(got.len(), 1, "{got:?}");
            assert!(
                got[0].starts_with("openAPIV3Schema.properties[a].pattern: Invalid value: \"(\""),
                "{got:?}"
            );
            continue;
        }
        let mut want: Vec<String> = expected.iter().map(|s| s.to_string()).collect();
        want.sort();
        assert_eq!(got, want, "case {name:?}");
    }
}
