//! Property tests: (a) pruning is idempotent and prune-then-validate never
//! reports unknown fields; (b) defaulting is idempotent; (d) random objects
//! against random (even malformed) schemas never panic. Property (c) lives
//! in `props_valid.rs`. This file also holds the shared JSON generators.

use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Map, Value, json};

use crate::schema::{Reason, Schema, duplicate_fields, validate_structural};

// ---------- arbitrary JSON ----------

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-e]",
        1 => select(vec!["apiVersion", "kind", "metadata", "spec"]).prop_map(str::to_string),
        1 => "[a-z]{1,8}",
    ]
}

pub(super) fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|i| json!(i)),
        (-20i64..20).prop_map(|i| json!(i)),
        any::<u64>().prop_map(|u| json!(u)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        "[a-z]{0,6}".prop_map(Value::String),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 40, 5, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..5).prop_map(Value::Array),
            btree_map(key(), inner, 0..5).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn arb_object() -> impl Strategy<Value = Value> {
    (btree_map(key(), arb_json(), 0..4), arb_json()).prop_map(|(m, spec)| {
        let mut obj: Map<String, Value> = m.into_iter().collect();
        obj.insert("spec".into(), spec);
        Value::Object(obj)
    })
}

// ---------- random structural schemas (for a, b) ----------

fn arb_structural() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(json!({"type": "string"})),
        Just(json!({"type": "integer", "default": 1})),
        Just(json!({"type": "string", "default": "d", "nullable": true})),
        Just(json!({"type": "boolean", "enum": [true]})),
        Just(json!({"type": "number", "maximum": 10})),
        Just(json!({"x-kubernetes-int-or-string": true})),
        Just(json!({"x-kubernetes-preserve-unknown-fields": true})),
        arb_json().prop_map(|d| json!({"type": "string", "default": d})),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            (btree_map("[a-e]", inner.clone(), 0..4), any::<bool>(), proptest::option::of(arb_json()))
                .prop_map(|(props, preserve, default)| {
                    let mut s = json!({"type": "object", "properties": props});
                    if preserve {
                        s["x-kubernetes-preserve-unknown-fields"] = json!(true);
                    }
                    if let Some(d) = default {
                        s["default"] = d;
                    }
                    s
                }),
            inner.clone().prop_map(|items| json!({"type": "array", "items": items})),
            inner.clone().prop_map(|v| json!({"type": "object", "additionalProperties": v})),
            inner.clone().prop_map(|v| json!({"type": "object", "x-kubernetes-embedded-resource": true, "properties": {"spec": v}})),
            (inner.clone(), inner).prop_map(|(a, b)| json!({"type": "object", "properties": {"a": a}, "anyOf": [b]})),
        ]
    })
}

pub(super) fn root_of(spec: Value) -> Value {
    json!({"type": "object", "properties": {"spec": spec}})
}

pub(super) fn compiled(schema: &Value) -> Result<Schema, TestCaseError> {
    Schema::compile(schema)
        .map_err(|e| TestCaseError::fail(format!("generated schema should compile: {e}")))
}

// ---------- arbitrary, possibly malformed schemas (for d) ----------

const KEYWORDS: &[&str] = &[
    "type",
    "required",
    "enum",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "nullable",
    "default",
    "additionalProperties",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-int-or-string",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
];

fn keyword_value(kw: &'static str) -> BoxedStrategy<Value> {
    let good: BoxedStrategy<Value> = match kw {
        "type" => select(vec![
            "object", "array", "string", "integer", "number", "boolean", "",
        ])
        .prop_map(|t| json!(t))
        .boxed(),
        "required" | "x-kubernetes-list-map-keys" => {
            vec("[a-c]", 0..3).prop_map(|v| json!(v)).boxed()
        }
        "enum" => vec(arb_json(), 0..3).prop_map(Value::Array).boxed(),
        "minimum" | "maximum" => prop_oneof![
            (-5i64..5).prop_map(|i| json!(i)),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| json!(f))
        ]
        .boxed(),
        "multipleOf" => select(vec![
            json!(2),
            json!(0.5),
            json!(1e-300),
            json!(1e300),
            json!(3),
            json!(u64::MAX),
        ])
        .boxed(),
        "minLength" | "maxLength" | "minItems" | "maxItems" | "minProperties" | "maxProperties" => {
            (0u32..4).prop_map(|n| json!(n)).boxed()
        }
        "pattern" => select(vec!["^[a-z]+$", "a|b", "\\d", "^$", "(?i)X"])
            .prop_map(|p| json!(p))
            .boxed(),
        "format" => select(vec![
            "date-time",
            "date",
            "byte",
            "uuid",
            "email",
            "hostname",
            "ipv4",
            "ipv6",
            "cidr",
            "uri",
            "int32",
            "int64",
            "x",
        ])
        .prop_map(|f| json!(f))
        .boxed(),
        "default" => arb_json().boxed(),
        "x-kubernetes-list-type" => select(vec!["atomic", "set", "map"])
            .prop_map(|t| json!(t))
            .boxed(),
        "x-kubernetes-map-type" => select(vec!["atomic", "granular"])
            .prop_map(|t| json!(t))
            .boxed(),
        _ => any::<bool>().prop_map(Value::Bool).boxed(),
    };
    // Mostly well-typed so that most schemas compile and get exercised; sometimes anything.
    prop_oneof![9 => good, 1 => arb_json()].boxed()
}

fn arb_any_schema() -> impl Strategy<Value = Value> {
    let keywords = || {
        btree_map(select(KEYWORDS), Just(()), 0..5).prop_flat_map(|m| {
            let pairs: Vec<BoxedStrategy<(String, Value)>> = m
                .into_keys()
                .map(|k| {
                    keyword_value(k)
                        .prop_map(move |v| (k.to_string(), v))
                        .boxed()
                })
                .collect();
            pairs
        })
    };
    let leaf = keywords().prop_map(|pairs| Value::Object(pairs.into_iter().collect()));
    leaf.prop_recursive(4, 32, 4, move |inner| {
        (
            keywords(),
            btree_map("[a-c]", inner.clone(), 0..3),
            proptest::option::of(inner.clone()),
            proptest::option::of(inner.clone()),
            vec(inner.clone(), 0..3),
            proptest::option::of(inner),
            select(vec!["allOf", "anyOf", "oneOf"]),
        )
            .prop_map(
                |(pairs, props, items, additional, junctors, not, junctor)| {
                    let mut m: Map<String, Value> = pairs.into_iter().collect();
                    if !props.is_empty() {
                        m.insert(
                            "properties".into(),
                            Value::Object(props.into_iter().collect()),
                        );
                    }
                    if let Some(i) = items {
                        m.insert("items".into(), i);
                    }
                    if let Some(a) = additional {
                        m.insert("additionalProperties".into(), a);
                    }
                    if !junctors.is_empty() {
                        m.insert(junctor.into(), Value::Array(junctors));
                    }
                    if let Some(n) = not {
                        m.insert("not".into(), n);
                    }
                    Value::Object(m)
                },
            )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// (a) Pruning twice changes nothing more, and validation after pruning reports no unknown fields.
    #[test]
    fn prune_is_idempotent(spec in arb_structural(), object in arb_object()) {
        let s = compiled(&root_of(spec))?;
        for defaulted in [false, true] {
            let mut once = object.clone();
            if defaulted {
                s.default(&mut once);
            }
            s.prune(&mut once);
            let mut twice = once.clone();
            prop_assert_eq!(s.prune(&mut twice), Vec::<String>::new());
            prop_assert_eq!(&twice, &once);
            let errors = s.validate(&once);
            prop_assert!(errors.iter().all(|e| e.reason != Reason::FieldValueForbidden), "{:?}", errors);
        }
    }

    /// (b) Defaulting twice equals defaulting once.
    #[test]
    fn default_is_idempotent(spec in arb_structural(), object in arb_object()) {
        let s = compiled(&root_of(spec))?;
        let mut once = object;
        s.default(&mut once);
        let mut twice = once.clone();
        s.default(&mut twice);
        prop_assert_eq!(twice, once);
    }

    /// (d) Random objects against random, possibly malformed schemas never panic.
    #[test]
    fn random_inputs_never_panic(schema in arb_any_schema(), object in arb_object(), path in "[a-c.\\[\\]0-9*]{0,12}") {
        let _ = validate_structural(&schema);
        if let Ok(s) = Schema::compile(&schema) {
            let mut o = object;
            s.default(&mut o);
            let _ = s.validate(&o);
            let _ = s.prune(&mut o);
            let _ = s.validate(&o);
            let _ = s.node_at(&path);
            let _ = s.list_map_keys_at(&path);
            let _ = s.preserves_unknown_fields_at(&path);
        }
    }

    /// (d) Duplicate detection never panics on arbitrary bytes and finds injected duplicates.
    #[test]
    fn duplicate_fields_never_panics(bytes in vec(any::<u8>(), 0..64), object in arb_json()) {
        let _ = duplicate_fields(&bytes);
        let text = serde_json::to_string(&json!({"spec": object})).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let injected = format!("{{\"dup\":1,{}", &text[1..]);
        let injected = injected.replacen('{', "{\"dup\":0,", 1);
        prop_assert_eq!(duplicate_fields(injected.as_bytes()), Ok(vec!["dup".to_string()]));
    }
}
