//! Property (c): an object generated to satisfy a randomly generated simple
//! schema validates with no errors, and passes defaulting and pruning
//! untouched. `Gen` describes a schema and knows how to generate values
//! that satisfy it.

use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use proptest::sample::{select, subsequence};
use serde_json::{Map, Value, json};

use super::props::{arb_json, compiled, root_of};
use crate::schema::{duplicate_fields, validate_structural};

#[derive(Debug, Clone)]
enum Gen {
    Int {
        lo: i64,
        span: i64,
        step: i64,
    },
    Num {
        lo: i32,
        width: i32,
    },
    Str {
        min: usize,
        extra: usize,
        pattern: bool,
    },
    Enum(Vec<&'static str>),
    Bool,
    Format(&'static str),
    IntOrString,
    Any,
    Array {
        items: Box<Gen>,
        min: usize,
        extra: usize,
    },
    Set {
        unique_items: bool,
    },
    ListMap(Box<Gen>),
    Object {
        props: Vec<(String, Gen, bool)>,
        preserve: bool,
    },
    Map {
        value: Box<Gen>,
        max: usize,
    },
    Embedded,
    Nullable(Box<Gen>),
}

const FORMATS: &[&str] = &[
    "date-time",
    "date",
    "uuid",
    "ipv4",
    "ipv6",
    "cidr",
    "byte",
    "email",
    "hostname",
    "uri",
];

fn arb_gen() -> impl Strategy<Value = Gen> {
    let leaf = prop_oneof![
        (-50i64..50, 0i64..20, 1i64..6).prop_map(|(lo, span, step)| Gen::Int { lo, span, step }),
        (-100i32..100, 1i32..50).prop_map(|(lo, width)| Gen::Num { lo, width }),
        (0usize..3, 0usize..5, any::<bool>()).prop_map(|(min, extra, pattern)| Gen::Str {
            min,
            extra,
            pattern
        }),
        subsequence(vec!["a", "b", "c", "d"], 1..=4).prop_map(Gen::Enum),
        Just(Gen::Bool),
        select(FORMATS).prop_map(Gen::Format),
        Just(Gen::IntOrString),
        Just(Gen::Any),
        any::<bool>().prop_map(|unique_items| Gen::Set { unique_items }),
        Just(Gen::Embedded),
    ];
    leaf.prop_recursive(3, 20, 4, |inner| {
        prop_oneof![
            (inner.clone(), 0usize..2, 0usize..3).prop_map(|(g, min, extra)| Gen::Array {
                items: Box::new(g),
                min,
                extra
            }),
            inner.clone().prop_map(|g| Gen::ListMap(Box::new(g))),
            (
                btree_map("[a-f]", (inner.clone(), any::<bool>()), 0..4),
                any::<bool>()
            )
                .prop_map(|(m, preserve)| Gen::Object {
                    props: m.into_iter().map(|(k, (g, r))| (k, g, r)).collect(),
                    preserve,
                }),
            (inner.clone(), 0usize..4).prop_map(|(g, max)| Gen::Map {
                value: Box::new(g),
                max
            }),
            inner.prop_map(|g| Gen::Nullable(Box::new(g))),
        ]
    })
}

impl Gen {
    fn schema(&self) -> Value {
        match self {
            Gen::Int { lo, span, step } => {
                json!({"type": "integer", "minimum": lo * step, "maximum": (lo + span) * step, "multipleOf": step, "format": "int32"})
            }
            Gen::Num { lo, width } => {
                json!({"type": "number", "minimum": lo, "maximum": lo + width})
            }
            Gen::Str {
                min,
                extra,
                pattern,
            } => {
                let mut s = json!({"type": "string", "minLength": min, "maxLength": min + extra});
                if *pattern {
                    s["pattern"] = json!("^[a-z]*$");
                }
                s
            }
            Gen::Enum(values) => json!({"type": "string", "enum": values}),
            Gen::Bool => json!({"type": "boolean"}),
            Gen::Format(f) => json!({"type": "string", "format": f}),
            Gen::IntOrString => json!({"x-kubernetes-int-or-string": true}),
            Gen::Any => json!({"x-kubernetes-preserve-unknown-fields": true}),
            Gen::Array { items, min, extra } => {
                json!({"type": "array", "items": items.schema(), "minItems": min, "maxItems": min + extra})
            }
            Gen::Set { unique_items: true } => {
                json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true})
            }
            Gen::Set {
                unique_items: false,
            } => {
                json!({"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"})
            }
            Gen::ListMap(value) => {
                json!({"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "value": value.schema()}}})
            }
            Gen::Object { props, preserve } => {
                let properties: Map<String, Value> = props
                    .iter()
                    .map(|(k, g, _)| (k.clone(), g.schema()))
                    .collect();
                let required: Vec<&String> = props
                    .iter()
                    .filter(|(_, _, r)| *r)
                    .map(|(k, _, _)| k)
                    .collect();
                json!({"type": "object", "properties": properties, "required": required, "x-kubernetes-preserve-unknown-fields": preserve})
            }
            Gen::Map { value, max } => {
                json!({"type": "object", "additionalProperties": value.schema(), "maxProperties": max})
            }
            Gen::Embedded => {
                json!({"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true})
            }
            Gen::Nullable(g) => {
                let mut s = g.schema();
                s["nullable"] = json!(true);
                s
            }
        }
    }

    fn value(&self) -> BoxedStrategy<Value> {
        match self.clone() {
            Gen::Int { lo, span, step } => (lo..=lo + span).prop_map(move |k| json!(k * step)).boxed(),
            Gen::Num { lo, width } => (0.0f64..1.0).prop_map(move |t| json!(f64::from(lo) + t * f64::from(width))).boxed(),
            Gen::Str { min, extra, pattern } => {
                let chars = if pattern { vec!['a', 'q', 'z'] } else { vec!['a', 'Z', '0', ' ', 'ä', '€', '😀'] };
                vec(select(chars), min..=min + extra).prop_map(|c| Value::String(c.into_iter().collect())).boxed()
            }
            Gen::Enum(values) => select(values).prop_map(|v| json!(v)).boxed(),
            Gen::Bool => any::<bool>().prop_map(Value::Bool).boxed(),
            Gen::Format(f) => format_value(f),
            Gen::IntOrString => prop_oneof![any::<i64>().prop_map(|i| json!(i)), "[0-9]{1,3}%".prop_map(Value::String)].boxed(),
            // A null under a non-nullable field is dropped by defaulting, as in Kubernetes.
            Gen::Any => arb_json().prop_filter("non-null", |v| !v.is_null()).boxed(),
            Gen::Array { items, min, extra } => vec(items.value(), min..=min + extra).prop_map(Value::Array).boxed(),
            Gen::Set { .. } => subsequence(vec!["a", "b", "c", "d"], 0..=4).prop_map(|v| json!(v)).boxed(),
            Gen::ListMap(value) => vec(proptest::option::of(value.value()), 0..4)
                .prop_map(|vals| {
                    let items = vals.into_iter().enumerate().map(|(i, v)| {
                        let mut item = json!({"name": format!("k{i}")});
                        if let Some(v) = v {
                            item["value"] = v;
                        }
                        item
                    });
                    Value::Array(items.collect())
                })
                .boxed(),
            Gen::Object { props, preserve } => {
                let fields: Vec<BoxedStrategy<Option<(String, Value)>>> = props
                    .into_iter()
                    .map(|(k, g, required)| {
                        let v = g.value();
                        if required {
                            v.prop_map(move |v| Some((k.clone(), v))).boxed()
                        } else {
                            proptest::option::of(v).prop_map(move |v| v.map(|v| (k.clone(), v))).boxed()
                        }
                    })
                    .collect();
                let extra = if preserve { proptest::option::of(arb_json()).boxed() } else { Just(None).boxed() };
                (fields, extra)
                    .prop_map(|(fields, extra)| {
                        let mut m: Map<String, Value> = fields.into_iter().flatten().collect();
                        if let Some(e) = extra {
                            m.insert("zz_unknown".into(), e);
                        }
                        Value::Object(m)
                    })
                    .boxed()
            }
            Gen::Map { value, max } => btree_map("[a-z]{1,4}", value.value(), 0..=max)
                .prop_map(|m| Value::Object(m.into_iter().collect()))
                .boxed(),
            Gen::Embedded => arb_json()
                .prop_map(|data| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": data}))
                .boxed(),
            Gen::Nullable(g) => prop_oneof![Just(Value::Null), g.value()].boxed(),
        }
    }
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn format_value(format: &str) -> BoxedStrategy<Value> {
    let ymd = (1970u32..2100, 1u32..=12, 1u32..=28);
    match format {
        "date-time" => (ymd, 0u32..24, 0u32..60, 0u32..61, any::<bool>())
            .prop_map(|((y, mo, d), h, mi, s, utc)| {
                let tz = if utc {
                    "Z".to_string()
                } else {
                    "+05:30".to_string()
                };
                json!(format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.5{tz}"))
            })
            .boxed(),
        "date" => ymd
            .prop_map(|(y, mo, d)| json!(format!("{y:04}-{mo:02}-{d:02}")))
            .boxed(),
        "uuid" => any::<[u8; 16]>()
            .prop_map(|b| {
                let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
                json!(format!(
                    "{}-{}-{}-{}-{}",
                    &h[..8],
                    &h[8..12],
                    &h[12..16],
                    &h[16..20],
                    &h[20..]
                ))
            })
            .boxed(),
        "ipv4" => any::<[u8; 4]>()
            .prop_map(|b| json!(format!("{}.{}.{}.{}", b[0], b[1], b[2], b[3])))
            .boxed(),
        "ipv6" => any::<[u16; 8]>()
            .prop_map(|w| {
                json!(
                    w.iter()
                        .map(|x| format!("{x:x}"))
                        .collect::<Vec<_>>()
                        .join(":")
                )
            })
            .boxed(),
        "cidr" => (any::<[u8; 4]>(), 0u8..=32)
            .prop_map(|(b, p)| json!(format!("{}.{}.{}.{}/{p}", b[0], b[1], b[2], b[3])))
            .boxed(),
        "byte" => vec(any::<u8>(), 0..20)
            .prop_map(|b| json!(base64(&b)))
            .boxed(),
        "email" => "[a-z]{1,8}(\\.[a-z0-9]{1,4})?@[a-z]{1,8}\\.(com|org)"
            .prop_map(Value::String)
            .boxed(),
        "hostname" => "[a-z]([a-z0-9-]{0,8}[a-z0-9])?(\\.[a-z]{1,8}){0,2}"
            .prop_map(Value::String)
            .boxed(),
        _ => "https://[a-z]{1,8}\\.com/[a-z0-9]{0,6}"
            .prop_map(Value::String)
            .boxed(),
    }
}

fn schema_and_valid_object() -> impl Strategy<Value = (Value, Value)> {
    arb_gen().prop_flat_map(|g| {
        let schema = root_of(g.schema());
        (Just(schema), g.value().prop_map(|spec| json!({"apiVersion": "v1", "kind": "K", "metadata": {"name": "n"}, "spec": spec})))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// (c) An object generated to satisfy a simple schema survives the whole pipeline untouched and valid.
    #[test]
    fn generated_objects_validate((schema, object) in schema_and_valid_object()) {
        prop_assert_eq!(validate_structural(&schema), Vec::<String>::new());
        let s = compiled(&schema)?;
        let errors = s.validate(&object);
        prop_assert!(errors.is_empty(), "{:?}", errors);
        let mut processed = object.clone();
        s.default(&mut processed);
        prop_assert_eq!(s.prune(&mut processed), Vec::<String>::new());
        prop_assert_eq!(&processed, &object);
        let text = serde_json::to_vec(&object).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(duplicate_fields(&text), Ok(vec![]));
    }
}
