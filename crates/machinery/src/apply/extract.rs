//! Deriving field sets from JSON values: the fields a value sets ([`field_set_of`]), the
//! nodes present in a value ([`present_set_of`], used to trim ownership), the per-field
//! difference between two versions of an object (Update bookkeeping and apply conflict
//! detection), and validation of applied configurations.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::fieldset::FieldSet;
use super::path::{Path, PathElement, item_key, path_string};
use super::types::{Kind, TypeNode, classify, field_type, item_type};
use super::{ApplyError, Scope};

/// Metadata fields the server owns; they are never tracked in field sets.
pub(crate) const SERVER_METADATA: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "managedFields",
    "selfLink",
];

/// Which memberships a walk records.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// The fields a value sets: leaves and list items (`field_set_of`).
    Fields,
    /// Every node that exists (containers included): what ownership may cover.
    Nodes,
    /// What an Update that created this subtree owns: `Fields` plus `.` on created maps.
    Owned,
}

/// The root fields tracked under `scope`, with `metadata` stripped of server-owned fields
/// (and dropped when nothing else is left in it).
pub(crate) fn tracked_root(root: &Value, scope: Scope) -> Vec<(&str, Cow<'_, Value>)> {
    let Value::Object(map) = root else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (k, v) in map {
        if k == "apiVersion" || k == "kind" || !scope.tracks(k) {
            continue;
        }
        if k == "metadata"
            && let Value::Object(meta) = v
        {
            let stripped: Map<String, Value> = meta
                .iter()
                .filter(|(mk, _)| !SERVER_METADATA.contains(&mk.as_str()))
                .map(|(mk, mv)| (mk.clone(), mv.clone()))
                .collect();
            if !stripped.is_empty() {
                out.push((k.as_str(), Cow::Owned(Value::Object(stripped))));
            }
            continue;
        }
        out.push((k.as_str(), Cow::Borrowed(v)));
    }
    out
}

/// The fields `value` sets, for the whole object. See [`field_set_of_scoped`].
pub fn field_set_of<T: TypeNode>(value: &Value, types: Option<&T>) -> FieldSet {
    field_set_of_scoped(value, Scope::WholeObject, types)
}

/// The fields `value` sets within `scope`: scalars, atomic objects/lists and empty
/// containers are leaves; granular objects recurse; set lists yield `v:` items; map lists
/// yield `k:` items (with `.`) and their fields. Server-owned metadata is never included.
pub fn field_set_of_scoped<T: TypeNode>(
    value: &Value,
    scope: Scope,
    types: Option<&T>,
) -> FieldSet {
    root_set(value, scope, types, Mode::Fields)
}

/// Every node present in `value` (containers included), i.e. the paths ownership may cover.
/// Always a superset of [`field_set_of`].
pub fn present_set_of<T: TypeNode>(value: &Value, types: Option<&T>) -> FieldSet {
    root_set(value, Scope::WholeObject, types, Mode::Nodes)
}

fn root_set<T: TypeNode>(value: &Value, scope: Scope, t: Option<&T>, mode: Mode) -> FieldSet {
    let mut set = FieldSet::new();
    for (k, v) in tracked_root(value, scope) {
        // ObjectMeta is a struct even when the caller has no schema for it.
        let sub = collect(&v, field_type(t, k), mode, k == "metadata");
        set.insert_child(PathElement::Field(k.to_string()), sub);
    }
    set
}

fn is_struct<T: TypeNode>(t: Option<&T>, forced: bool) -> bool {
    forced || t.is_some_and(TypeNode::is_struct)
}

/// The subtree for one node (its own membership included).
fn collect<T: TypeNode>(v: &Value, t: Option<&T>, mode: Mode, struct_node: bool) -> FieldSet {
    let mut set = FieldSet::new();
    match (classify(v, t), v) {
        (Kind::Object, Value::Object(map)) if !map.is_empty() => {
            set.set_member(match mode {
                Mode::Fields => false,
                Mode::Nodes => true,
                Mode::Owned => !is_struct(t, struct_node),
            });
            for (k, c) in map {
                set.insert_child(
                    PathElement::Field(k.clone()),
                    collect(c, field_type(t, k), mode, false),
                );
            }
        }
        (Kind::Set, Value::Array(items)) if !items.is_empty() => {
            set.set_member(mode == Mode::Nodes);
            for item in items {
                set.insert_child(PathElement::Value(item.clone()), FieldSet::leaf());
            }
        }
        (Kind::Map(keys), Value::Array(items)) if !items.is_empty() => {
            set.set_member(mode == Mode::Nodes);
            for item in items {
                if let Some(key) = item_key(item, keys) {
                    set.insert_child(PathElement::Key(key), item_set(item, item_type(t), mode));
                }
            }
        }
        // Scalars, atomic nodes and empty containers are leaves.
        _ => set.set_member(true),
    }
    set
}

/// A list-map item: always a member (`.`) plus its fields.
fn item_set<T: TypeNode>(item: &Value, it: Option<&T>, mode: Mode) -> FieldSet {
    let mut sub = collect(item, it, mode, false);
    sub.set_member(true);
    sub
}

/// The part of `set` under root fields inside `scope`.
pub(crate) fn restrict_to_scope(set: &FieldSet, scope: Scope) -> FieldSet {
    let mut out = FieldSet::new();
    for (e, sub) in set.children() {
        if matches!(e, PathElement::Field(name) if scope.tracks(name)) {
            out.insert_child(e.clone(), sub.clone());
        }
    }
    out
}

/// The result of diffing two versions of a subtree.
#[derive(Default)]
pub(crate) struct Diff {
    /// What the writer comes to own (changed/added fields; `.` on maps it created).
    pub own: FieldSet,
    /// What changed, with every created or re-kinded node included: taken from other owners.
    pub take: FieldSet,
}

/// Per-field difference from `old` to `new` within `scope` (non-object roots count as empty).
pub(crate) fn diff_root<T: TypeNode>(
    old: &Value,
    new: &Value,
    scope: Scope,
    t: Option<&T>,
) -> Diff {
    let old_fields = tracked_root(old, scope);
    let mut diff = Diff::default();
    for (k, v) in tracked_root(new, scope) {
        let before = old_fields
            .iter()
            .find(|(ok, _)| *ok == k)
            .map(|(_, ov)| ov.as_ref());
        let d = diff_node(before, &v, field_type(t, k), k == "metadata");
        diff.own
            .insert_child(PathElement::Field(k.to_string()), d.own);
        diff.take
            .insert_child(PathElement::Field(k.to_string()), d.take);
    }
    diff
}

fn same_kind(a: Kind<'_>, b: Kind<'_>) -> bool {
    std::mem::discriminant(&a) == std::mem::discriminant(&b)
}

fn is_empty_container(v: &Value) -> bool {
    matches!(v, Value::Object(m) if m.is_empty()) || matches!(v, Value::Array(a) if a.is_empty())
}

fn diff_node<T: TypeNode>(
    old: Option<&Value>,
    new: &Value,
    t: Option<&T>,
    struct_node: bool,
) -> Diff {
    let created = || Diff {
        own: collect(new, t, Mode::Owned, struct_node),
        take: collect(new, t, Mode::Nodes, struct_node),
    };
    let Some(old) = old else {
        return created();
    };
    let (ko, kn) = (classify(old, t), classify(new, t));
    if !same_kind(ko, kn) {
        return created();
    }
    // A container emptied by this write: the writer owns the now-empty leaf.
    if is_empty_container(new) && !is_empty_container(old) && kn != Kind::Leaf {
        return Diff {
            own: FieldSet::leaf(),
            take: FieldSet::leaf(),
        };
    }
    let mut d = Diff::default();
    match (kn, old, new) {
        (Kind::Object, Value::Object(om), Value::Object(nm)) => {
            for (k, c) in nm {
                let sub = diff_node(om.get(k), c, field_type(t, k), false);
                d.own.insert_child(PathElement::Field(k.clone()), sub.own);
                d.take.insert_child(PathElement::Field(k.clone()), sub.take);
            }
        }
        (Kind::Set, Value::Array(oi), Value::Array(ni)) => {
            let before: BTreeSet<PathElement> =
                oi.iter().cloned().map(PathElement::Value).collect();
            for item in ni
                .iter()
                .filter(|i| !before.contains(&PathElement::Value((*i).clone())))
            {
                d.own
                    .insert_child(PathElement::Value(item.clone()), FieldSet::leaf());
                d.take
                    .insert_child(PathElement::Value(item.clone()), FieldSet::leaf());
            }
        }
        (Kind::Map(keys), Value::Array(oi), Value::Array(ni)) => {
            let it = item_type(t);
            let before_by_key: BTreeMap<PathElement, &Value> = oi
                .iter()
                .filter_map(|o| item_key(o, keys).map(|k| (PathElement::Key(k), o)))
                .collect();
            for item in ni {
                let Some(key) = item_key(item, keys) else {
                    continue;
                };
                let before = before_by_key.get(&PathElement::Key(key.clone())).copied();
                let sub = match before {
                    Some(b) => diff_node(Some(b), item, it, false),
                    None => Diff {
                        own: item_set(item, it, Mode::Owned),
                        take: item_set(item, it, Mode::Nodes),
                    },
                };
                d.own.insert_child(PathElement::Key(key.clone()), sub.own);
                d.take.insert_child(PathElement::Key(key), sub.take);
            }
        }
        _ => {
            if old != new {
                d.own.set_member(true);
                d.take.set_member(true);
            }
        }
    }
    d
}

/// Checks an applied configuration: it must be an object (with an object `metadata`, if
/// any), and every list declared as a map or set must be well formed, because ownership of
/// its items could not be expressed otherwise.
pub(crate) fn validate_config<T: TypeNode>(
    config: &Value,
    scope: Scope,
    t: Option<&T>,
) -> Result<(), ApplyError> {
    let Value::Object(map) = config else {
        return Err(ApplyError::NotAnObject {
            what: "the applied configuration".into(),
        });
    };
    if map.get("metadata").is_some_and(|m| !m.is_object()) {
        return Err(ApplyError::NotAnObject {
            what: "metadata".into(),
        });
    }
    for (k, v) in tracked_root(config, scope) {
        let mut path = vec![PathElement::Field(k.to_string())];
        validate_node(&v, field_type(t, k), &mut path)?;
    }
    Ok(())
}

fn validate_node<T: TypeNode>(v: &Value, t: Option<&T>, path: &mut Path) -> Result<(), ApplyError> {
    match v {
        Value::Object(map) => {
            if classify(v, t) == Kind::Leaf {
                return Ok(()); // atomic: anything inside is replaced whole
            }
            for (k, c) in map {
                path.push(PathElement::Field(k.clone()));
                validate_node(c, field_type(t, k), path)?;
                path.pop();
            }
        }
        Value::Array(items) => {
            let Some(tn) = t else { return Ok(()) };
            match (tn.list_type(), tn.list_map_keys()) {
                (Some(super::ListType::Set), _) => {
                    let mut seen = BTreeSet::new();
                    for item in items {
                        let e = PathElement::Value(item.clone());
                        if !seen.insert(e.clone()) {
                            path.push(e);
                            return Err(ApplyError::DuplicateSetItem {
                                path: path_string(path),
                            });
                        }
                    }
                }
                (Some(super::ListType::Map), keys) if !keys.is_empty() => {
                    let mut seen = BTreeSet::new();
                    for (i, item) in items.iter().enumerate() {
                        let Some(key) = item_key(item, keys) else {
                            path.push(PathElement::Index(i));
                            return Err(ApplyError::InvalidListMapItem {
                                path: path_string(path),
                            });
                        };
                        let e = PathElement::Key(key);
                        path.push(e.clone());
                        if !seen.insert(e) {
                            return Err(ApplyError::DuplicateListMapKey {
                                path: path_string(path),
                            });
                        }
                        validate_node(item, tn.items(), path)?;
                        path.pop();
                    }
                }
                _ => {}
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply::types::Untyped;
    use serde_json::json;

    fn schema() -> crate::schema::Node {
        crate::apply::types::schema_node(&json!({"properties": {"spec": {"properties": {
            "containers": {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                           "items": {"properties": {"name": {}, "image": {}}}},
            "tags": {"x-kubernetes-list-type": "set"},
            "sel": {"x-kubernetes-map-type": "atomic"},
            "args": {}
        }}}}))
        .unwrap()
    }

    #[test]
    fn field_set_of_follows_the_rules() {
        let obj = json!({
            "apiVersion": "v1", "kind": "X",
            "metadata": {"name": "n", "uid": "u", "labels": {"app": "a"}, "finalizers": ["f"]},
            "spec": {"containers": [{"name": "nginx", "image": "i"}], "tags": ["a", "b"],
                     "sel": {"x": 1}, "args": [1, 2], "empty": {}, "n": null}
        });
        let s = field_set_of(&obj, Some(&schema()));
        assert_eq!(
            s.to_fields_v1(),
            json!({
                "f:metadata": {"f:finalizers": {}, "f:labels": {"f:app": {}}},
                "f:spec": {
                    "f:args": {},
                    "f:containers": {"k:{\"name\":\"nginx\"}": {".": {}, "f:image": {}, "f:name": {}}},
                    "f:empty": {}, "f:n": {}, "f:sel": {},
                    "f:tags": {"v:\"a\"": {}, "v:\"b\"": {}}
                }
            })
        );
        // Only server-owned metadata: metadata is dropped entirely.
        let s = field_set_of(
            &json!({"metadata": {"name": "x", "resourceVersion": "1"}}),
            None::<&Untyped>,
        );
        assert!(s.is_empty());
    }

    #[test]
    fn scopes_filter_status() {
        let obj = json!({"spec": {"a": 1}, "status": {"b": 2}});
        let main = field_set_of_scoped(&obj, Scope::Main, None::<&Untyped>);
        assert_eq!(main.to_fields_v1(), json!({"f:spec": {"f:a": {}}}));
        let status = field_set_of_scoped(&obj, Scope::Status, None::<&Untyped>);
        assert_eq!(status.to_fields_v1(), json!({"f:status": {"f:b": {}}}));
        assert_eq!(field_set_of(&obj, None::<&Untyped>).len(), 2);
    }

    #[test]
    fn present_set_covers_containers() {
        let obj = json!({"spec": {"a": {"b": 1}, "containers": [{"name": "x"}]}});
        let p = present_set_of(&obj, Some(&schema()));
        assert_eq!(
            p.to_fields_v1(),
            json!({"f:spec": {".": {}, "f:a": {".": {}, "f:b": {}},
            "f:containers": {".": {}, "k:{\"name\":\"x\"}": {".": {}, "f:name": {}}}}})
        );
    }

    #[test]
    fn diff_reports_changes_and_created_maps() {
        let d = diff_root(
            &json!({}),
            &json!({"metadata": {"name": "c", "labels": {"a": "1"}}, "data": {"k": "v"}}),
            Scope::WholeObject,
            None::<&Untyped>,
        );
        assert_eq!(
            d.own.to_fields_v1(),
            json!({"f:data": {".": {}, "f:k": {}}, "f:metadata": {"f:labels": {".": {}, "f:a": {}}}})
        );
        let d = diff_root(
            &json!({"data": {"k": "v", "j": 1}}),
            &json!({"data": {"k": "w", "j": 1}}),
            Scope::WholeObject,
            None::<&Untyped>,
        );
        assert_eq!(d.own.to_fields_v1(), json!({"f:data": {"f:k": {}}}));
        // Scalar turned into a struct-less map: the node itself is taken.
        let d = diff_root(
            &json!({"x": 1}),
            &json!({"x": {"y": 1}}),
            Scope::WholeObject,
            None::<&Untyped>,
        );
        assert_eq!(d.take.to_fields_v1(), json!({"f:x": {".": {}, "f:y": {}}}));
    }

    #[test]
    fn validation_rejects_malformed_lists() {
        let s = schema();
        let ok = json!({"spec": {"containers": [{"name": "a"}], "tags": ["a"]}});
        assert!(validate_config(&ok, Scope::WholeObject, Some(&s)).is_ok());
        let missing = json!({"spec": {"containers": [{"name": "a"}, {"image": "x"}]}});
        assert_eq!(
            validate_config(&missing, Scope::WholeObject, Some(&s)),
            Err(ApplyError::InvalidListMapItem {
                path: ".spec.containers[1]".into()
            })
        );
        let not_obj = json!({"spec": {"containers": ["a"]}});
        assert!(matches!(
            validate_config(&not_obj, Scope::WholeObject, Some(&s)),
            Err(ApplyError::InvalidListMapItem { .. })
        ));
        let dup = json!({"spec": {"containers": [{"name": "a"}, {"name": "a"}]}});
        assert_eq!(
            validate_config(&dup, Scope::WholeObject, Some(&s)),
            Err(ApplyError::DuplicateListMapKey {
                path: ".spec.containers[name=\"a\"]".into()
            })
        );
        let dup = json!({"spec": {"tags": ["a", "a"]}});
        assert!(matches!(
            validate_config(&dup, Scope::WholeObject, Some(&s)),
            Err(ApplyError::DuplicateSetItem { .. })
        ));
        assert!(validate_config(&json!([]), Scope::WholeObject, Some(&s)).is_err());
        assert!(validate_config(&json!({"metadata": 1}), Scope::WholeObject, Some(&s)).is_err());
        // Out-of-scope parts are not validated (they are ignored).
        assert!(
            validate_config(
                &json!({"spec": {"tags": ["a", "a"]}}),
                Scope::Status,
                Some(&s)
            )
            .is_ok()
        );
    }
}
