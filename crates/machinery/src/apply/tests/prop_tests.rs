//! Property tests: convergence under force, ownership invariants over random write
//! sequences, FieldsV1 round trips, apply idempotence, and no panics on arbitrary input.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use crate::apply::merge::merge_value;
use crate::apply::*;

const NOW: &str = "2024-01-01T00:00:00Z";
const MANAGERS: &[&str] = &["m0", "m1", "m2"];

fn schema() -> crate::schema::Node {
    crate::apply::types::schema_node(&json!({"properties": {
        "metadata": {"properties": {
            "labels": {"additionalProperties": {}},
            "finalizers": {"x-kubernetes-list-type": "set"}
        }},
        "spec": {"properties": {
            "tags": {"x-kubernetes-list-type": "set"},
            "items": {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"properties": {"name": {}, "v": {}, "w": {}}}},
            "sel": {"x-kubernetes-map-type": "atomic"},
            "args": {"x-kubernetes-list-type": "atomic"}
        }, "additionalProperties": {}},
        "status": {"additionalProperties": {}}
    }}))
    .unwrap()
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        (0i64..3).prop_map(Value::from),
        prop::sample::select(vec!["a", "b"]).prop_map(Value::from),
    ]
}

fn key(pool: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop::sample::select(pool).prop_map(String::from)
}

/// Arbitrary nested JSON of maps, lists and scalars (schema-less below its field).
fn untyped_json() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(3, 16, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map(key(&["p", "q", "r"]), inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn unique(pool: &'static [&'static str]) -> impl Strategy<Value = Vec<Value>> {
    prop::sample::subsequence(pool, 0..=pool.len())
        .prop_shuffle()
        .prop_map(|v| v.into_iter().map(Value::from).collect())
}

fn map_items() -> impl Strategy<Value = Value> {
    prop::sample::subsequence(&["n1", "n2", "n3"][..], 0..=3)
        .prop_shuffle()
        .prop_flat_map(|names| {
            names
                .into_iter()
                .map(|n| {
                    (prop::option::of(scalar()), prop::option::of(untyped_json())).prop_map(
                        move |(v, w)| {
                            let mut item = Map::new();
                            item.insert("name".into(), Value::from(n));
                            if let Some(v) = v {
                                item.insert("v".into(), v);
                            }
                            if let Some(w) = w {
                                item.insert("w".into(), w);
                            }
                            Value::Object(item)
                        },
                    )
                })
                .collect::<Vec<_>>()
        })
        .prop_map(Value::Array)
}

fn small_map() -> impl Strategy<Value = Value> {
    prop::collection::btree_map(key(&["k1", "k2"]), scalar(), 0..3)
        .prop_map(|m| Value::Object(m.into_iter().collect()))
}

fn insert_opt(m: &mut Map<String, Value>, k: &str, v: Option<Value>) {
    if let Some(v) = v {
        m.insert(k.into(), v);
    }
}

/// A valid applied configuration for [`schema`].
fn config() -> impl Strategy<Value = Value> {
    let spec = (
        prop::option::of(untyped_json()),
        prop::option::of(untyped_json()),
        prop::option::of(unique(&["a", "b", "c", "d"])),
        prop::option::of(map_items()),
        prop::option::of(small_map()),
        prop::option::of(prop::collection::vec(scalar(), 0..3).prop_map(Value::Array)),
    )
        .prop_map(|(x, y, tags, items, sel, args)| {
            let mut m = Map::new();
            insert_opt(&mut m, "x", x);
            insert_opt(&mut m, "y", y);
            insert_opt(&mut m, "tags", tags.map(Value::Array));
            insert_opt(&mut m, "items", items);
            insert_opt(&mut m, "sel", sel);
            insert_opt(&mut m, "args", args);
            Value::Object(m)
        });
    (
        prop::option::of(spec),
        prop::option::of(small_map()),
        prop::option::of(unique(&["f1", "f2", "f3"])),
        prop::option::of((scalar(), prop::option::of(untyped_json()))),
    )
        .prop_map(|(spec, labels, finalizers, status)| {
            let mut meta = Map::new();
            meta.insert("name".into(), json!("obj"));
            insert_opt(&mut meta, "labels", labels);
            insert_opt(&mut meta, "finalizers", finalizers.map(Value::Array));
            let mut root = Map::new();
            root.insert("apiVersion".into(), json!("v1"));
            root.insert("kind".into(), json!("Thing"));
            root.insert("metadata".into(), Value::Object(meta));
            insert_opt(&mut root, "spec", spec);
            if let Some((ready, obs)) = status {
                let mut st = Map::new();
                st.insert("ready".into(), ready);
                insert_opt(&mut st, "obs", obs);
                root.insert("status".into(), Value::Object(st));
            }
            Value::Object(root)
        })
}

#[derive(Clone, Debug)]
enum Op {
    Apply {
        mgr: usize,
        config: Value,
        force: bool,
        status: bool,
    },
    Update {
        mgr: usize,
        config: Value,
        replace: bool,
        status: bool,
    },
}

fn op(apply_only: bool) -> BoxedStrategy<Op> {
    let apply = (0..MANAGERS.len(), config(), any::<bool>(), any::<bool>()).prop_map(
        |(mgr, config, force, status)| Op::Apply {
            mgr,
            config,
            force,
            status,
        },
    );
    if apply_only {
        return apply.boxed();
    }
    let update = (0..MANAGERS.len(), config(), any::<bool>(), any::<bool>()).prop_map(
        |(mgr, config, replace, status)| Op::Update {
            mgr,
            config,
            replace,
            status,
        },
    );
    prop_oneof![apply, update].boxed()
}

/// Object state plus managed fields, and each applier's last configuration.
#[derive(Clone, Debug, Default, PartialEq)]
struct State {
    object: Option<Value>,
    managed: Vec<ManagedFieldsEntry>,
    applied: BTreeMap<(String, Option<String>), Value>,
}

/// Scope of an op: with `split` the kind has a status subresource.
fn scope_of(split: bool, status: bool) -> Scope {
    match (split, status) {
        (false, _) => Scope::WholeObject,
        (true, false) => Scope::Main,
        (true, true) => Scope::Status,
    }
}

fn run(state: &mut State, op: &Op, split: bool) -> Result<(), TestCaseError> {
    let s = schema();
    match op {
        Op::Apply {
            mgr,
            config,
            force,
            status,
        } => {
            let scope = scope_of(split, *status);
            let r = apply(
                state.object.as_ref(),
                &state.managed,
                config,
                MANAGERS[*mgr],
                "v1",
                *force,
                scope,
                Some(&s),
                NOW,
            );
            match r {
                Ok(a) => {
                    state.object = Some(a.object);
                    state.managed = a.managed;
                    let key = (
                        MANAGERS[*mgr].to_string(),
                        scope.subresource().map(String::from),
                    );
                    state.applied.insert(key, config.clone());
                }
                Err(ApplyError::Conflicts(c)) => {
                    prop_assert!(!force, "force never conflicts");
                    prop_assert!(!c.is_empty());
                }
                Err(e) => return Err(TestCaseError::fail(format!("unexpected error {e}"))),
            }
        }
        Op::Update {
            mgr,
            config,
            replace,
            status,
        } => {
            let new = match (&state.object, replace) {
                (Some(old), false) => merge_value(Some(old), config, Some(&s)),
                _ => config.clone(),
            };
            state.managed = update(
                state.object.as_ref(),
                &new,
                &state.managed,
                MANAGERS[*mgr],
                "v1",
                scope_of(split, *status),
                Some(&s),
                NOW,
            );
            state.object = Some(new);
        }
    }
    Ok(())
}

fn check_invariants(state: &State, split: bool, apply_only: bool) -> Result<(), TestCaseError> {
    let s = schema();
    let Some(obj) = &state.object else {
        return Ok(());
    };
    let present = present_set_of(obj, Some(&s));
    let mut owned = FieldSet::new();
    for (i, e) in state.managed.iter().enumerate() {
        prop_assert!(!e.fields.is_empty(), "empty entry {e:?}");
        prop_assert!(
            e.fields.difference(&present).is_empty(),
            "{} owns absent fields {:?}",
            e.manager,
            e.fields.difference(&present).to_fields_v1()
        );
        let dup = state.managed[..i]
            .iter()
            .any(|o| o.is_for(&e.manager, e.operation, e.subresource.as_deref()));
        prop_assert!(!dup, "duplicate entry for {}", e.manager);
        let status_only = e
            .fields
            .children()
            .all(|(p, _)| *p == PathElement::Field("status".into()));
        if split {
            prop_assert_eq!(
                e.subresource.is_some(),
                status_only,
                "scope leak in {:?}",
                e.fields.to_fields_v1()
            );
        }
        owned = owned.union(&e.fields);
        // An applier only owns values it applied: anyone changing them took them away.
        if e.operation == Operation::Apply {
            let key = (e.manager.clone(), e.subresource.clone());
            let cfg = state
                .applied
                .get(&key)
                .ok_or_else(|| TestCaseError::fail("apply entry without apply"))?;
            for p in e.fields.leaves() {
                let want = lookup(cfg, &p);
                let empty_container = want.is_some_and(|w| {
                    w.as_object().is_some_and(Map::is_empty)
                        || w.as_array().is_some_and(Vec::is_empty)
                });
                if !empty_container {
                    prop_assert_eq!(
                        lookup(obj, &p),
                        want,
                        "{} owns {} with another value",
                        &e.manager,
                        path_string(&p)
                    );
                }
            }
        }
        // FieldsV1 survives the wire.
        prop_assert_eq!(&ManagedFieldsEntry::from_json(&e.to_json()).unwrap(), e);
    }
    if apply_only {
        let leaves = field_set_of(obj, Some(&s));
        let unowned = leaves.difference(&owned);
        prop_assert!(
            unowned.is_empty(),
            "unowned fields {} in {}",
            unowned.to_fields_v1(),
            obj
        );
    }
    Ok(())
}

fn path_element() -> impl Strategy<Value = PathElement> {
    prop_oneof![
        key(&["a", "b", "spec", "with.dot", "", "k:x"]).prop_map(PathElement::Field),
        (key(&["name", "port"]), scalar())
            .prop_map(|(k, v)| PathElement::Key([(k, v)].into_iter().collect())),
        untyped_json().prop_map(PathElement::Value),
        (0usize..12).prop_map(PathElement::Index),
    ]
}

fn field_set() -> impl Strategy<Value = FieldSet> {
    prop::collection::vec(prop::collection::vec(path_element(), 0..4), 0..6).prop_map(|paths| {
        let mut s = FieldSet::new();
        for p in paths {
            s.insert(&p);
        }
        s
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// (a) After A by m1, B by m2 (forced), A by m1 (forced), every leaf of A has A's value
    /// (an empty container leaf only has to still be a container of that kind: granular
    /// merges of empty containers add nothing); every leaf of B that A neither sets nor
    /// nests under nor above keeps B's value and stays m2's; m2 owns nothing B did not
    /// apply; and the ownership invariants hold.
    #[test]
    fn forced_reapply_converges(a in config(), b in config()) {
        let s = schema();
        let r1 = apply(None, &[], &a, "m1", "v1", false, Scope::WholeObject, Some(&s), NOW).unwrap();
        let r2 = apply(Some(&r1.object), &r1.managed, &b, "m2", "v1", true, Scope::WholeObject, Some(&s), NOW).unwrap();
        let r3 = apply(Some(&r2.object), &r2.managed, &a, "m1", "v1", true, Scope::WholeObject, Some(&s), NOW).unwrap();
        for leaf in field_set_of(&a, Some(&s)).leaves() {
            let want = lookup(&a, &leaf);
            let got = lookup(&r3.object, &leaf);
            match want {
                Some(Value::Object(m)) if m.is_empty() => prop_assert!(got.is_some_and(Value::is_object), "{}", path_string(&leaf)),
                Some(Value::Array(v)) if v.is_empty() => prop_assert!(got.is_some_and(Value::is_array), "{}", path_string(&leaf)),
                _ => prop_assert_eq!(got, want, "at {}", path_string(&leaf)),
            }
        }
        let a_leaves = field_set_of(&a, Some(&s)).leaves();
        let b_set = field_set_of(&b, Some(&s));
        let m2 = r3.managed.iter().find(|e| e.manager == "m2");
        for leaf in b_set.leaves() {
            if a_leaves.iter().any(|l| l.starts_with(&leaf) || leaf.starts_with(l)) {
                continue;
            }
            prop_assert_eq!(
                lookup(&r3.object, &leaf),
                lookup(&b, &leaf),
                "B's {} lost its value",
                path_string(&leaf)
            );
            prop_assert!(
                m2.is_some_and(|e| e.fields.contains(&leaf)),
                "m2 no longer owns {}",
                path_string(&leaf)
            );
        }
        if let Some(m2) = m2 {
            prop_assert!(
                m2.fields.difference(&b_set).is_empty(),
                "m2 owns fields it never applied: {}",
                m2.fields.difference(&b_set).to_fields_v1()
            );
        }
        let state = State {
            object: Some(r3.object),
            managed: r3.managed,
            applied: [
                (("m1".to_string(), None), a),
                (("m2".to_string(), None), b),
            ]
            .into(),
        };
        check_invariants(&state, false, true)?;
    }

    /// (b) Ownership covers only present nodes, scopes never leak, entries are unique and
    /// non-empty; for apply-only sequences every leaf of the object is owned.
    #[test]
    fn ownership_invariants_mixed(ops in prop::collection::vec(op(false), 1..7), split in any::<bool>()) {
        let mut state = State::default();
        for o in &ops {
            run(&mut state, o, split)?;
            check_invariants(&state, split, false)?;
        }
    }

    /// (b) for apply-only sequences.
    #[test]
    fn ownership_invariants_apply_only(ops in prop::collection::vec(op(true), 1..7), split in any::<bool>()) {
        let mut state = State::default();
        for o in &ops {
            run(&mut state, o, split)?;
            check_invariants(&state, split, true)?;
        }
    }

    /// (c) FieldsV1 round trips for generated sets, and its text is stable.
    #[test]
    fn fields_v1_round_trip(set in field_set()) {
        let wire = set.to_fields_v1();
        let back = FieldSet::from_fields_v1(&wire).unwrap();
        prop_assert_eq!(&back, &set);
        prop_assert_eq!(back.to_fields_v1().to_string(), wire.to_string());
        prop_assert_eq!(set.len(), set.paths().len());
        prop_assert!(set.union(&set).difference(&set).is_empty());
        prop_assert_eq!(set.intersection(&set), set);
    }

    /// (d) Applying the same configuration twice by the same manager changes nothing the
    /// second time, whatever came before.
    #[test]
    fn apply_is_idempotent(ops in prop::collection::vec(op(false), 0..5), cfg in config(), mgr in 0..MANAGERS.len(), split in any::<bool>(), status in any::<bool>()) {
        let s = schema();
        let mut state = State::default();
        for o in &ops {
            run(&mut state, o, split)?;
        }
        let scope = scope_of(split, status);
        let first = apply(state.object.as_ref(), &state.managed, &cfg, MANAGERS[mgr], "v1", true, scope, Some(&s), NOW).unwrap();
        let second = apply(Some(&first.object), &first.managed, &cfg, MANAGERS[mgr], "v1", false, scope, Some(&s), NOW).unwrap();
        prop_assert_eq!(&second, &first);
    }

    /// Arbitrary (often invalid) configurations and live objects never panic.
    #[test]
    fn arbitrary_input_never_panics(live in prop::option::of(untyped_json()), spec in untyped_json(), items in untyped_json(), force in any::<bool>()) {
        let s = schema();
        let cfg = json!({"spec": {"items": items, "tags": spec.clone(), "sel": spec.clone(), "x": spec}});
        let live = live.map(|l| json!({"spec": {"items": l.clone(), "tags": l}}));
        let _ = apply(live.as_ref(), &[], &cfg, "m", "v1", force, Scope::WholeObject, Some(&s), NOW);
        let _ = update(live.as_ref(), &cfg, &[], "m", "v1", Scope::WholeObject, Some(&s), NOW);
        let _ = FieldSet::from_fields_v1(&cfg);
        let _ = parse_managed_fields(&json!({"metadata": {"managedFields": [cfg]}}));
    }

    /// Malformed FieldsV1 built from FieldsV1-like keys never panics.
    #[test]
    fn fields_v1_decoder_never_panics(keys in prop::collection::vec(key(&["f:a", "k:{\"a\":1}", "k:{", "k:1", "v:", "v:\"x\"", "i:1", "i:x", ".", "x", "", "é"]), 0..4), leaf in untyped_json()) {
        let mut v = leaf;
        for k in keys {
            let mut m = Map::new();
            m.insert(k, v);
            v = Value::Object(m);
        }
        let _ = FieldSet::from_fields_v1(&v);
    }
}
