//! Merging an applied configuration into the live object, and removing the fields an
//! applier stopped applying.
//!
//! Merge rules, per node kind (see [`Kind`]):
//! - granular objects merge field by field;
//! - leaves (scalars, atomic objects, atomic lists) and nodes whose kind differs between live
//!   and config are replaced by the config's value;
//! - set lists: live items keep their order, config items not yet present are appended in
//!   config order;
//! - map lists: items are matched by key and merged recursively. Ordering rule: the result
//!   contains the config's items in config order; live items the config does not name keep
//!   their place relative to the config items around them. Concretely, live items are walked
//!   in order; a live item the config does not name is emitted as is, and reaching a live
//!   item the config names first emits every not-yet-emitted config item up to it (in
//!   config order). Remaining config items (new ones) are appended. So new items land just
//!   before the next config item that already existed, or at the end; re-applying the same
//!   configuration never reorders anything (idempotent).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::Scope;
use super::fieldset::FieldSet;
use super::path::{PathElement, item_key, item_matches};
use super::types::{Kind, TypeNode, classify, field_type, item_type};

/// Metadata fields only the server writes; an applied configuration cannot change them.
const UNMERGED_METADATA: &[&str] = &[
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "managedFields",
    "selfLink",
];

/// Merges `config` into `live` (an object; anything else counts as `{}`) within `scope`.
/// `apiVersion`, `kind`, `metadata.name` and `metadata.namespace` are copied from the config
/// (outside the status scope) so a created object is complete; the caller validates them.
pub(crate) fn merge_root<T: TypeNode>(
    live: &Value,
    config: &Value,
    scope: Scope,
    t: Option<&T>,
) -> Value {
    let mut out = match live {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    let Value::Object(cfg) = config else {
        return Value::Object(out);
    };
    for (k, cv) in cfg {
        if k == "apiVersion" || k == "kind" {
            if scope != Scope::Status {
                out.insert(k.clone(), cv.clone());
            }
            continue;
        }
        if !scope.tracks(k) {
            continue;
        }
        if k == "metadata" {
            let Value::Object(cmeta) = cv else { continue };
            let mt = field_type(t, k);
            let mut meta = match out.get(k) {
                Some(Value::Object(m)) => m.clone(),
                _ => Map::new(),
            };
            for (mk, mv) in cmeta {
                if UNMERGED_METADATA.contains(&mk.as_str()) {
                    continue;
                }
                let merged = merge_value(meta.get(mk), mv, field_type(mt, mk));
                meta.insert(mk.clone(), merged);
            }
            out.insert(k.clone(), Value::Object(meta));
            continue;
        }
        let merged = merge_value(out.get(k), cv, field_type(t, k));
        out.insert(k.clone(), merged);
    }
    Value::Object(out)
}

/// Merges one config node into the live node at the same path.
pub(crate) fn merge_value<T: TypeNode>(
    live: Option<&Value>,
    config: &Value,
    t: Option<&T>,
) -> Value {
    let Some(live) = live else {
        return config.clone();
    };
    match (classify(live, t), classify(config, t), live, config) {
        (Kind::Object, Kind::Object, Value::Object(lm), Value::Object(cm)) => {
            let mut out = lm.clone();
            for (k, cv) in cm {
                let merged = merge_value(lm.get(k), cv, field_type(t, k));
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        (Kind::Set, Kind::Set, Value::Array(li), Value::Array(ci)) => {
            // Membership by canonical value (the same identity `v:` paths use), in O(n log n).
            let mut seen: BTreeSet<PathElement> =
                li.iter().cloned().map(PathElement::Value).collect();
            let mut out = li.clone();
            for item in ci {
                if seen.insert(PathElement::Value(item.clone())) {
                    out.push(item.clone());
                }
            }
            Value::Array(out)
        }
        (Kind::Map(keys), Kind::Map(_), Value::Array(li), Value::Array(ci)) => {
            Value::Array(merge_map_list(li, ci, keys, item_type(t)))
        }
        _ => config.clone(),
    }
}

/// Map-list merge; see the module docs for the ordering rule. Both lists are well formed.
fn merge_map_list<T: TypeNode>(
    live: &[Value],
    config: &[Value],
    keys: &[String],
    it: Option<&T>,
) -> Vec<Value> {
    let key_of = |v: &Value| item_key(v, keys).map(PathElement::Key);
    let mut config_pos = BTreeMap::new();
    for (i, c) in config.iter().enumerate() {
        if let Some(k) = key_of(c) {
            config_pos.entry(k).or_insert(i);
        }
    }
    let mut live_by_key = BTreeMap::new();
    for l in live {
        if let Some(k) = key_of(l) {
            live_by_key.entry(k).or_insert(l);
        }
    }
    let emit = |c: &Value| match key_of(c).and_then(|k| live_by_key.get(&k).copied()) {
        Some(l) => merge_value(Some(l), c, it),
        None => c.clone(),
    };
    let mut out = Vec::with_capacity(live.len() + config.len());
    let mut next = 0;
    for l in live {
        match key_of(l).and_then(|k| config_pos.get(&k).copied()) {
            Some(pos) => {
                while next <= pos {
                    out.push(emit(&config[next]));
                    next += 1;
                }
            }
            None => out.push(l.clone()),
        }
    }
    for c in &config[next.min(config.len())..] {
        out.push(emit(c));
    }
    out
}

/// Removes a key keeping the order of the others, also under serde_json's `preserve_order`
/// (where plain `remove` would swap the last entry into its place).
fn remove_key(map: &mut Map<String, Value>, name: &str) {
    map.retain(|k, _| k != name);
}

fn is_empty_container(v: &Value) -> bool {
    matches!(v, Value::Object(m) if m.is_empty()) || matches!(v, Value::Array(a) if a.is_empty())
}

/// Removes from `root` the paths in `to_remove`, except those where `protected` holds the
/// path itself or anything beneath it (a node someone still owns, or that holds something
/// someone owns, stays; only the unowned parts under it are removed).
///
/// Empty-parent rule: a container (object or list) that this removal emptied is dropped too
/// when nothing at or beneath it is protected; containers that were already empty, and the
/// root, are never dropped. List-map key fields are never removed on their own: they go with
/// their item. Atomic nodes are removed whole or not at all.
pub(crate) fn remove_fields<T: TypeNode>(
    root: &mut Value,
    to_remove: &FieldSet,
    protected: &FieldSet,
    t: Option<&T>,
) {
    remove_in(root, to_remove, Some(protected), t, &[]);
}

fn remove_in<T: TypeNode>(
    v: &mut Value,
    r: &FieldSet,
    p: Option<&FieldSet>,
    t: Option<&T>,
    key_fields: &[String],
) {
    match classify(v, t) {
        Kind::Object => {
            let Value::Object(map) = v else { return };
            for (e, rsub) in r.children() {
                let PathElement::Field(name) = e else {
                    continue;
                };
                if key_fields.contains(name) {
                    continue;
                }
                let psub = p.and_then(|p| p.child(e));
                let Some(child) = map.get_mut(name) else {
                    continue;
                };
                if rsub.is_member() && psub.is_none() {
                    remove_key(map, name);
                    continue;
                }
                let was_filled = !is_empty_container(child);
                remove_in(child, rsub, psub, field_type(t, name), &[]);
                if was_filled && is_empty_container(child) && psub.is_none() {
                    remove_key(map, name);
                }
            }
        }
        Kind::Set => {
            let Value::Array(items) = v else { return };
            for (e, rsub) in r.children() {
                if matches!(e, PathElement::Value(_))
                    && rsub.is_member()
                    && p.and_then(|p| p.child(e)).is_none()
                {
                    // Compare as path elements: the same identity `v:` paths use.
                    items.retain(|i| PathElement::Value(i.clone()) != *e);
                }
            }
        }
        Kind::Map(keys) => {
            let keys = keys.to_vec();
            let Value::Array(items) = v else { return };
            for (e, rsub) in r.children() {
                let PathElement::Key(key) = e else { continue };
                let psub = p.and_then(|p| p.child(e));
                if rsub.is_member() && psub.is_none() {
                    items.retain(|i| !item_matches(i, key));
                } else if let Some(item) = items.iter_mut().find(|i| item_matches(i, key)) {
                    remove_in(item, rsub, psub, item_type(t), &keys);
                }
            }
        }
        Kind::Leaf => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply::types::{Untyped, schema_node};
    use serde_json::json;

    fn list_schema(kind: &str) -> crate::schema::Node {
        schema_node(
            &json!({"x-kubernetes-list-type": kind, "x-kubernetes-list-map-keys": ["name"]}),
        )
        .unwrap()
    }

    fn names(v: &Value) -> Vec<&str> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|i| i["name"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn granular_objects_merge_and_leaves_replace() {
        let live = json!({"a": {"b": 1, "c": [1, 2]}, "d": 1});
        let cfg = json!({"a": {"c": [3], "e": {}}, "d": {"x": 1}});
        let m = merge_value(Some(&live), &cfg, None::<&Untyped>);
        assert_eq!(m, json!({"a": {"b": 1, "c": [3], "e": {}}, "d": {"x": 1}}));
    }

    #[test]
    fn set_union_keeps_live_order() {
        let s = list_schema("set");
        let m = merge_value(Some(&json!(["b", "a"])), &json!(["c", "a", "d"]), Some(&s));
        assert_eq!(m, json!(["b", "a", "c", "d"]));
    }

    #[test]
    fn map_list_ordering_rule() {
        let s = list_schema("map");
        let l = |ns: &[&str]| Value::Array(ns.iter().map(|n| json!({"name": n})).collect());
        let cases: &[(&[&str], &[&str], &[&str])] = &[
            (&["a", "b"], &["a", "c"], &["a", "b", "c"]), // new item appended
            (&["a", "b"], &["c", "b"], &["a", "c", "b"]), // new item before the next known config item
            (&["a", "b"], &["b", "a"], &["b", "a"]),      // config order wins for config items
            (&["y", "x"], &["x"], &["y", "x"]),           // others keep their place
            (&["a", "z", "b"], &["b", "n", "a"], &["b", "n", "a", "z"]),
            (&[], &["a", "b"], &["a", "b"]),
        ];
        for (live, cfg, want) in cases {
            let m = merge_value(Some(&l(live)), &l(cfg), Some(&s));
            assert_eq!(names(&m), *want, "live {live:?} config {cfg:?}");
            // Idempotent.
            assert_eq!(merge_value(Some(&m), &l(cfg), Some(&s)), m);
        }
        let m = merge_value(
            Some(&json!([{"name": "a", "x": 1}])),
            &json!([{"name": "a", "y": 2}]),
            Some(&s),
        );
        assert_eq!(m, json!([{"name": "a", "x": 1, "y": 2}]));
    }

    #[test]
    fn malformed_live_map_list_is_replaced_atomically() {
        let s = list_schema("map");
        let m = merge_value(
            Some(&json!([{"name": "a"}, {"name": "a"}])),
            &json!([{"name": "b"}]),
            Some(&s),
        );
        assert_eq!(m, json!([{"name": "b"}]));
    }

    #[test]
    fn merge_root_respects_scope_and_server_metadata() {
        let live =
            json!({"metadata": {"name": "n", "uid": "u"}, "spec": {"a": 1}, "status": {"s": 1}});
        let cfg = json!({"apiVersion": "v1", "kind": "K", "metadata": {"name": "n", "uid": "other", "labels": {"l": "1"}},
                         "spec": {"b": 2}, "status": {"s": 2}});
        let m = merge_root(&live, &cfg, Scope::Main, None::<&Untyped>);
        assert_eq!(
            m,
            json!({"apiVersion": "v1", "kind": "K", "metadata": {"name": "n", "uid": "u", "labels": {"l": "1"}},
                             "spec": {"a": 1, "b": 2}, "status": {"s": 1}})
        );
        let m = merge_root(&live, &cfg, Scope::Status, None::<&Untyped>);
        assert_eq!(
            m,
            json!({"metadata": {"name": "n", "uid": "u"}, "spec": {"a": 1}, "status": {"s": 2}})
        );
    }

    #[test]
    fn removal_respects_protection_and_empty_parents() {
        let s = schema_node(
            &json!({"properties": {"c": {"x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"]}, "t": {"x-kubernetes-list-type": "set"}}}),
        )
        .unwrap();
        let fs = |v: Value| FieldSet::from_fields_v1(&v).unwrap();
        let mut obj = json!({"a": {"b": {"c": 1}}, "k": {"x": 1, "y": 2},
                             "c": [{"name": "p", "port": 1, "img": "i"}, {"name": "q"}], "t": ["u", "v"]});
        let remove = fs(json!({"f:a": {"f:b": {"f:c": {}}}, "f:k": {"f:x": {}},
                               "f:c": {"k:{\"name\":\"p\"}": {".": {}, "f:name": {}, "f:img": {}}, "k:{\"name\":\"q\"}": {".": {}, "f:name": {}}},
                               "f:t": {"v:\"u\"": {}, "v:\"v\"": {}}}));
        let protected =
            fs(json!({"f:k": {"f:y": {}}, "f:c": {"k:{\"name\":\"p\"}": {"f:port": {}}}}));
        remove_fields(&mut obj, &remove, &protected, Some(&s));
        // a.b.c gone and the emptied a.b and a dropped; k keeps y; item p keeps its key and
        // the protected port; q and the whole set are gone.
        assert_eq!(obj, json!({"k": {"y": 2}, "c": [{"name": "p", "port": 1}]}));

        // A protected (owned) empty parent stays.
        let mut obj = json!({"a": {"b": 1}});
        remove_fields(
            &mut obj,
            &fs(json!({"f:a": {"f:b": {}}})),
            &fs(json!({"f:a": {}})),
            None::<&Untyped>,
        );
        assert_eq!(obj, json!({"a": {}}));
    }
}
