//! Kubernetes strategic merge patch, the `application/strategic-merge-patch+json`
//! body, for built-in kinds.
//!
//! Owns the merge itself and the [`PatchSchema`] trait that says how each list
//! merges; the built-in kinds' schemas live in the parent module and are
//! re-exported here ([`for_kind`]). A strategic merge patch is a JSON merge
//! patch in which lists with patch metadata merge instead of being replaced,
//! plus directives:
//!
//! - `$patch: replace | merge | delete` inside a map or as a list element;
//! - `$retainKeys: [..]` keeps only the listed keys of a map;
//! - `$setElementOrder/<field>: [..]` orders a merged list;
//! - `$deleteFromPrimitiveList/<field>: [..]` removes scalars from a list.
//!
//! Directive keys never reach the result.

pub use super::{BuiltinSchema, OBJECT_META_ONLY, for_kind};

use super::{MAX_DEPTH, exceeds_depth, render, type_name};
use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};
use thiserror::Error;

const PATCH: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ORDER: &str = "$setElementOrder/";
const DELETE_PRIMITIVES: &str = "$deleteFromPrimitiveList/";

/// How a list field combines with the list in a patch.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ListStrategy {
    /// The patch's list replaces the stored one; lists without patch metadata.
    #[default]
    Replace,
    /// Map elements matched by this key merge (`x-kubernetes-patch-merge-key`).
    MergeByKey(String),
    /// Scalars are unioned, stored elements first, then new ones in order.
    MergePrimitives,
}

/// Patch metadata: how the fields of one kind merge.
///
/// Paths are field names from the object root with array levels left out, so
/// `spec.containers[*].ports` is `["spec", "containers", "ports"]`.
pub trait PatchSchema: Send + Sync {
    /// How the list at `path` merges.
    fn list_strategy(&self, path: &[&str]) -> ListStrategy;

    /// Whether the map at `path` is replaced whole instead of merged.
    fn is_atomic_map(&self, path: &[&str]) -> bool {
        let _ = path;
        false
    }
}

/// A schema without metadata: every list is replaced, every map merged.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoSchema;

impl PatchSchema for NoSchema {
    fn list_strategy(&self, _path: &[&str]) -> ListStrategy {
        ListStrategy::Replace
    }
}

/// Why a strategic merge patch could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum StrategicError {
    /// The body is not a JSON object.
    #[error("a strategic merge patch must be a JSON object, not {found}")]
    NotAnObject {
        /// The JSON type the body had.
        found: &'static str,
    },
    /// The body nests deeper than [`MAX_DEPTH`].
    #[error("the strategic merge patch is nested more than {max} levels deep")]
    PatchTooDeep {
        /// The limit.
        max: usize,
    },
    /// The stored object nests deeper than [`MAX_DEPTH`].
    #[error("the object to patch is nested more than {max} levels deep")]
    ObjectTooDeep {
        /// The limit.
        max: usize,
    },
    /// A directive has a value or a place it cannot have.
    #[error("invalid {directive} at {path}: {reason}")]
    InvalidDirective {
        /// Where the directive is, as a dotted field path.
        path: String,
        /// The directive key.
        directive: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An element of a list merged by key is not an object with the key.
    #[error("invalid element in the list {path}: {reason}")]
    InvalidListElement {
        /// The list, as a dotted field path.
        path: String,
        /// What is wrong with the element.
        reason: String,
    },
}

impl StrategicError {
    /// The HTTP status a server should answer with.
    pub fn status_code(&self) -> u16 {
        match self {
            StrategicError::NotAnObject { .. } | StrategicError::PatchTooDeep { .. } => 400,
            _ => 422,
        }
    }
}

/// Applies strategic merge patch `patch` to `original` using `schema`.
///
/// A non-object `original` is treated as `{}`, as for merge patches.
pub fn apply(
    original: &Value,
    patch: &Value,
    schema: &dyn PatchSchema,
) -> Result<Value, StrategicError> {
    // Every recursive step below descends one level into the patch, so this
    // check bounds the recursion.
    if exceeds_depth(patch, MAX_DEPTH) {
        return Err(StrategicError::PatchTooDeep { max: MAX_DEPTH });
    }
    let Value::Object(patch) = patch else {
        return Err(StrategicError::NotAnObject {
            found: type_name(patch),
        });
    };
    if exceeds_depth(original, MAX_DEPTH) {
        return Err(StrategicError::ObjectTooDeep { max: MAX_DEPTH });
    }
    let base = match original {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    Merger { schema }
        .map(base, patch, &mut Vec::new())
        .map(Value::Object)
}

fn is_directive(key: &str) -> bool {
    key == PATCH
        || key == RETAIN_KEYS
        || key.starts_with(SET_ORDER)
        || key.starts_with(DELETE_PRIMITIVES)
}

fn show(path: &[&str]) -> String {
    format!(".{}", path.join("."))
}

fn directive_error(path: &[&str], directive: &str, reason: String) -> StrategicError {
    StrategicError::InvalidDirective {
        path: show(path),
        directive: directive.to_string(),
        reason,
    }
}

/// What a `$patch` value asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Directive {
    Replace,
    Merge,
    Delete,
}

fn directive_of(value: &Value, path: &[&str]) -> Result<Directive, StrategicError> {
    match value.as_str() {
        Some("replace") => Ok(Directive::Replace),
        Some("merge") => Ok(Directive::Merge),
        Some("delete") => Ok(Directive::Delete),
        _ => {
            let reason = format!(
                "expected \"replace\", \"merge\" or \"delete\", not {}",
                render(value)
            );
            Err(directive_error(path, PATCH, reason))
        }
    }
}

/// A hashable identity under JSON equality with numbers compared by value, so
/// list merges stay linear even for the huge lists a hostile body can carry.
fn identity(value: &Value) -> String {
    match value {
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => format!("n{i}"),
            (_, Some(u), _) => format!("n{u}"),
            // `as` saturates; the bound keeps the conversion exact.
            (_, _, Some(f)) if f.fract() == 0.0 && f.abs() < 9.0e15 => format!("n{}", f as i64),
            _ => format!("n{n}"),
        },
        Value::String(s) => format!("s{s}"),
        other => format!("j{other}"),
    }
}

/// One merge run: the schema plus the walk's recursive steps.
struct Merger<'s> {
    schema: &'s dyn PatchSchema,
}

impl Merger<'_> {
    /// Merges patch map `patch` into `original`, the map found at `path`.
    fn map<'p>(
        &self,
        mut original: Map<String, Value>,
        patch: &'p Map<String, Value>,
        path: &mut Vec<&'p str>,
    ) -> Result<Map<String, Value>, StrategicError> {
        match patch
            .get(PATCH)
            .map(|d| directive_of(d, path))
            .transpose()?
        {
            // Kubernetes empties the map rather than dropping its key; `null`
            // is the way to drop the key.
            Some(Directive::Delete) => return Ok(Map::new()),
            Some(Directive::Replace) => original = Map::new(),
            Some(Directive::Merge) | None => {}
        }
        if let Some(keys) = patch.get(RETAIN_KEYS) {
            let keep = retained_keys(keys, patch, path)?;
            original.retain(|key, _| keep.contains(key.as_str()));
        }
        for (key, doomed) in patch {
            if let Some(field) = key.strip_prefix(DELETE_PRIMITIVES) {
                delete_primitives(&mut original, field, doomed, path)?;
            }
        }
        let mut deleted = false;
        for (key, value) in patch {
            if is_directive(key) {
                continue;
            }
            path.push(key);
            let current = original.get_mut(key).map(Value::take);
            let merged = self.field(current, value, path)?;
            path.pop();
            match merged {
                Some(v) => {
                    original.insert(key.clone(), v);
                }
                None => deleted = true,
            }
        }
        if deleted {
            // One retain pass: Map::remove reorders the remaining keys when
            // serde_json is built with preserve_order.
            original.retain(|key, _| !patch.get(key).is_some_and(Value::is_null));
        }
        for (key, order) in patch {
            if let Some(field) = key.strip_prefix(SET_ORDER) {
                path.push(field);
                let strategy = self.schema.list_strategy(path);
                let result = match original.get_mut(field) {
                    Some(Value::Array(items)) => reorder(items, order, &strategy, path),
                    _ => Ok(()),
                };
                path.pop();
                result?;
            }
        }
        Ok(original)
    }

    /// Merges one field's patch value; `None` means the key goes away.
    fn field<'p>(
        &self,
        original: Option<Value>,
        patch: &'p Value,
        path: &mut Vec<&'p str>,
    ) -> Result<Option<Value>, StrategicError> {
        Ok(Some(match patch {
            Value::Null => return Ok(None),
            Value::Object(p) => {
                let base = match original {
                    Some(Value::Object(m)) if !self.schema.is_atomic_map(path) => m,
                    // New, atomic or of another type: the patch is applied to
                    // nothing, which still strips its directives and nulls.
                    _ => Map::new(),
                };
                Value::Object(self.map(base, p, path)?)
            }
            Value::Array(p) => {
                let base = match original {
                    Some(Value::Array(items)) => items,
                    _ => Vec::new(),
                };
                let strategy = self.schema.list_strategy(path);
                Value::Array(self.list(base, p, &strategy, path)?)
            }
            scalar => scalar.clone(),
        }))
    }

    /// A list element applied to nothing: directives and nulls stripped.
    fn element<'p>(
        &self,
        value: &'p Value,
        path: &mut Vec<&'p str>,
    ) -> Result<Value, StrategicError> {
        Ok(match value {
            Value::Object(m) => Value::Object(self.map(Map::new(), m, path)?),
            // A list directly inside a list has no metadata of its own.
            Value::Array(items) => {
                Value::Array(self.list(Vec::new(), items, &ListStrategy::Replace, path)?)
            }
            scalar => scalar.clone(),
        })
    }

    /// Merges patch list `patch` into `original`, the list found at `path`.
    fn list<'p>(
        &self,
        mut original: Vec<Value>,
        patch: &'p [Value],
        strategy: &ListStrategy,
        path: &mut Vec<&'p str>,
    ) -> Result<Vec<Value>, StrategicError> {
        let mut content: Vec<&'p Value> = Vec::with_capacity(patch.len());
        let mut deletions: HashSet<String> = HashSet::new();
        for element in patch {
            let Some((map, directive)) = element
                .as_object()
                .and_then(|m| m.get(PATCH).map(|d| (m, d)))
            else {
                content.push(element);
                continue;
            };
            match directive_of(directive, path)? {
                // Like Kubernetes, a replace marker anywhere in the list
                // replaces the whole list with its other elements.
                Directive::Replace => original.clear(),
                // Merging is what happens anyway; a bare marker carries nothing.
                Directive::Merge if map.len() == 1 => {}
                Directive::Merge => content.push(element),
                Directive::Delete => {
                    let ListStrategy::MergeByKey(key) = strategy else {
                        return Err(directive_error(
                            path,
                            PATCH,
                            "\"delete\" in a list needs a list merged by key, and this one is not"
                                .to_string(),
                        ));
                    };
                    let value = map
                        .get(key)
                        .ok_or_else(|| missing_key(path, key, element))?;
                    deletions.insert(identity(value));
                }
            }
        }
        match strategy {
            ListStrategy::Replace => content.into_iter().map(|e| self.element(e, path)).collect(),
            ListStrategy::MergePrimitives => {
                let mut seen = HashSet::new();
                original.retain(|v| seen.insert(identity(v)));
                for element in content {
                    let value = self.element(element, path)?;
                    if seen.insert(identity(&value)) {
                        original.push(value);
                    }
                }
                Ok(original)
            }
            ListStrategy::MergeByKey(key) => {
                let key_of = |v: &Value| v.as_object().and_then(|m| m.get(key)).map(identity);
                if !deletions.is_empty() {
                    original.retain(|v| !key_of(v).is_some_and(|id| deletions.contains(&id)));
                }
                let mut index: HashMap<String, usize> = HashMap::new();
                for (i, v) in original.iter().enumerate() {
                    if let Some(id) = key_of(v) {
                        index.entry(id).or_insert(i);
                    }
                }
                for element in content {
                    let Value::Object(map) = element else {
                        return Err(StrategicError::InvalidListElement {
                            path: show(path),
                            reason: format!(
                                "it is {}, but this list merges objects by key {key:?}",
                                type_name(element)
                            ),
                        });
                    };
                    let id = map
                        .get(key)
                        .map(identity)
                        .ok_or_else(|| missing_key(path, key, element))?;
                    match index.get(&id).and_then(|&i| original.get_mut(i)) {
                        Some(slot) => {
                            let base = match slot.take() {
                                Value::Object(m) => m,
                                _ => Map::new(),
                            };
                            *slot = Value::Object(self.map(base, map, path)?);
                        }
                        None => {
                            index.insert(id, original.len());
                            original.push(Value::Object(self.map(Map::new(), map, path)?));
                        }
                    }
                }
                Ok(original)
            }
        }
    }
}

fn missing_key(path: &[&str], key: &str, element: &Value) -> StrategicError {
    StrategicError::InvalidListElement {
        path: show(path),
        reason: format!("{} has no merge key {key:?}", render(element)),
    }
}

/// Reads `$retainKeys`, checking that it names every field the patch sets,
/// since a set field that the same patch then drops is a contradiction.
fn retained_keys<'v>(
    keys: &'v Value,
    patch: &Map<String, Value>,
    path: &[&str],
) -> Result<HashSet<&'v str>, StrategicError> {
    let not_strings = || {
        directive_error(
            path,
            RETAIN_KEYS,
            "it must be a list of strings".to_string(),
        )
    };
    let Value::Array(items) = keys else {
        return Err(not_strings());
    };
    let keep = items
        .iter()
        .map(|v| v.as_str().ok_or_else(not_strings))
        .collect::<Result<HashSet<&str>, _>>()?;
    for (key, value) in patch {
        if !is_directive(key) && !value.is_null() && !keep.contains(key.as_str()) {
            return Err(directive_error(
                path,
                RETAIN_KEYS,
                format!("it does not list {key:?}, which the patch sets"),
            ));
        }
    }
    Ok(keep)
}

/// Applies `$deleteFromPrimitiveList/<field>` to the stored list.
fn delete_primitives(
    original: &mut Map<String, Value>,
    field: &str,
    doomed: &Value,
    path: &[&str],
) -> Result<(), StrategicError> {
    let directive = || format!("{DELETE_PRIMITIVES}{field}");
    let Value::Array(doomed) = doomed else {
        return Err(directive_error(
            path,
            &directive(),
            "it must be a list".to_string(),
        ));
    };
    match original.get_mut(field) {
        Some(Value::Array(items)) => {
            let doomed: HashSet<String> = doomed.iter().map(identity).collect();
            items.retain(|v| !doomed.contains(&identity(v)));
            Ok(())
        }
        None | Some(Value::Null) => Ok(()),
        Some(other) => Err(directive_error(
            path,
            &directive(),
            format!("the field {field:?} is {}, not a list", type_name(other)),
        )),
    }
}

/// Applies `$setElementOrder/<field>` to the merged list at `path`.
///
/// Elements named in the order list take the positions such elements already
/// hold, in the order given; elements it does not name (ones only the server
/// knows about) keep their positions.
fn reorder(
    items: &mut [Value],
    order: &Value,
    strategy: &ListStrategy,
    path: &[&str],
) -> Result<(), StrategicError> {
    let Value::Array(order) = order else {
        let (field, parent) = path.split_last().map_or(("", path), |(f, p)| (*f, p));
        let reason = "it must be a list".to_string();
        return Err(directive_error(
            parent,
            &format!("{SET_ORDER}{field}"),
            reason,
        ));
    };
    let mut rank: HashMap<String, usize> = HashMap::new();
    for (i, entry) in order.iter().enumerate() {
        let id = match (strategy, entry) {
            (ListStrategy::MergeByKey(key), Value::Object(m)) => m
                .get(key)
                .map(identity)
                .ok_or_else(|| missing_key(path, key, entry))?,
            // A list without merge metadata is replaced by the patch, which
            // already carries the order the client wants.
            (ListStrategy::Replace, _) => return Ok(()),
            (_, scalar) => identity(scalar),
        };
        rank.entry(id).or_insert(i);
    }
    let id_of = |v: &Value| match strategy {
        ListStrategy::MergeByKey(key) => v.as_object().and_then(|m| m.get(key)).map(identity),
        _ => Some(identity(v)),
    };
    let slots: Vec<(usize, usize)> = items
        .iter()
        .enumerate()
        .filter_map(|(i, v)| Some((i, *rank.get(&id_of(v)?)?)))
        .collect();
    let mut ordered: Vec<(usize, Value)> = slots
        .iter()
        .filter_map(|&(i, r)| Some((r, items.get_mut(i)?.take())))
        .collect();
    ordered.sort_by_key(|(r, _)| *r);
    for (&(slot, _), (_, value)) in slots.iter().zip(ordered) {
        if let Some(target) = items.get_mut(slot) {
            *target = value;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::test_support::nested_objects;
    use super::*;
    use serde_json::json;

    /// Applies `patch` with the schema of `kind`, or [`NoSchema`] for "".
    fn run(kind: &str, original: &Value, patch: &Value) -> Result<Value, StrategicError> {
        apply(original, patch, for_kind(kind).unwrap_or(&NoSchema))
    }

    #[test]
    #[rustfmt::skip]
    fn merges_like_a_merge_patch_outside_merge_lists() {
        // (kind, original, patch, expected)
        let cases = [
            ("", json!({"a":1,"b":{"c":1,"d":2}}), json!({"b":{"c":null,"e":3},"f":[1]}), json!({"a":1,"b":{"d":2,"e":3},"f":[1]})),
            ("", json!({"spec":{"list":[1,2,3]}}), json!({"spec":{"list":[4]}}), json!({"spec":{"list":[4]}})),
            ("", json!({"a":[1]}), json!({"a":null}), json!({})),
            ("", json!({"a":"x"}), json!({"a":{"b":1,"c":null}}), json!({"a":{"b":1}})),
            ("ConfigMap", json!({"data":{"a":"1","b":"2"}}), json!({"data":{"a":null,"c":"3"}}), json!({"data":{"b":"2","c":"3"}})),
            ("Secret", json!({"data":{"a":"MQ=="}, "type":"Opaque"}), json!({"data":{"b":"Mg=="}}), json!({"data":{"a":"MQ==","b":"Mg=="},"type":"Opaque"})),
            ("Event", json!({"count":1,"reason":"x"}), json!({"count":2}), json!({"count":2,"reason":"x"})),
            // managedFields has no merge metadata: replaced whole.
            ("ConfigMap", json!({"metadata":{"managedFields":[{"manager":"a"},{"manager":"b"}]}}), json!({"metadata":{"managedFields":[{"manager":"c"}]}}), json!({"metadata":{"managedFields":[{"manager":"c"}]}})),
            // Elements of a replaced list are still stripped of nulls.
            ("", json!({}), json!({"l":[{"a":1,"b":null},[{"c":null}],null]}), json!({"l":[{"a":1},[{}],null]})),
        ];
        for (kind, original, patch, expected) in cases {
            assert_eq!(run(kind, &original, &patch), Ok(expected), "{kind}: {patch} on {original}");
        }
    }

    #[test]
    #[rustfmt::skip]
    fn merges_lists_with_metadata() {
        let owners = json!({"metadata":{"ownerReferences":[{"uid":"1","name":"a"},{"uid":"2","name":"b"}]}});
        // (kind, original, patch, expected)
        let cases = [
            // By key: matching elements merge in place, new ones are appended.
            ("ConfigMap", owners.clone(), json!({"metadata":{"ownerReferences":[{"uid":"3","name":"c"},{"uid":"1","controller":true}]}}),
             json!({"metadata":{"ownerReferences":[{"uid":"1","name":"a","controller":true},{"uid":"2","name":"b"},{"uid":"3","name":"c"}]}})),
            ("ConfigMap", owners.clone(), json!({"metadata":{"ownerReferences":[{"uid":"1","name":null}]}}),
             json!({"metadata":{"ownerReferences":[{"uid":"1"},{"uid":"2","name":"b"}]}})),
            ("ConfigMap", owners.clone(), json!({"metadata":{"ownerReferences":[{"uid":"2","$patch":"delete"},{"uid":"9","$patch":"delete"}]}}),
             json!({"metadata":{"ownerReferences":[{"uid":"1","name":"a"}]}})),
            ("ConfigMap", owners.clone(), json!({"metadata":{"ownerReferences":[{"uid":"3"},{"$patch":"replace"}]}}),
             json!({"metadata":{"ownerReferences":[{"uid":"3"}]}})),
            ("ConfigMap", owners.clone(), json!({"metadata":{"ownerReferences":[{"$patch":"merge"},{"uid":"2","name":"z","$patch":"merge"}]}}),
             json!({"metadata":{"ownerReferences":[{"uid":"1","name":"a"},{"uid":"2","name":"z"}]}})),
            ("ConfigMap", owners.clone(), json!({"metadata":{"ownerReferences":[]}}), owners.clone()),
            ("ConfigMap", owners.clone(), json!({"metadata":{"ownerReferences":null}}), json!({"metadata":{}})),
            ("", owners.clone(), json!({"metadata":{"ownerReferences":[{"uid":"3"}]}}), json!({"metadata":{"ownerReferences":[{"uid":"3"}]}})),
            // Primitives: union in order, without duplicates.
            ("Secret", json!({"metadata":{"finalizers":["a","b"]}}), json!({"metadata":{"finalizers":["c","a","c"]}}), json!({"metadata":{"finalizers":["a","b","c"]}})),
            ("Secret", json!({"metadata":{}}), json!({"metadata":{"finalizers":["x"]}}), json!({"metadata":{"finalizers":["x"]}})),
            ("Secret", json!({"metadata":{"finalizers":["a","b","c"]}}), json!({"metadata":{"$deleteFromPrimitiveList/finalizers":["b","z"]}}), json!({"metadata":{"finalizers":["a","c"]}})),
            ("Secret", json!({"metadata":{"finalizers":["a","b"]}}), json!({"metadata":{"$deleteFromPrimitiveList/finalizers":["a"],"finalizers":["d"]}}), json!({"metadata":{"finalizers":["b","d"]}})),
            ("Secret", json!({"metadata":{"finalizers":["a","b"]}}), json!({"metadata":{"finalizers":[{"$patch":"replace"},"c"]}}), json!({"metadata":{"finalizers":["c"]}})),
            ("Secret", json!({"metadata":{}}), json!({"metadata":{"$deleteFromPrimitiveList/finalizers":["a"]}}), json!({"metadata":{}})),
            ("Namespace", json!({"spec":{"finalizers":["kubernetes"]}}), json!({"spec":{"finalizers":["x"]}}), json!({"spec":{"finalizers":["kubernetes","x"]}})),
            ("Namespace", json!({"status":{"phase":"Active"}}), json!({"status":{"phase":"Terminating"}}), json!({"status":{"phase":"Terminating"}})),
            ("ServiceAccount", json!({"secrets":[{"name":"a"}],"imagePullSecrets":[{"name":"p"}]}), json!({"secrets":[{"name":"b"}],"imagePullSecrets":[{"name":"p","$patch":"delete"}]}),
             json!({"secrets":[{"name":"a"},{"name":"b"}],"imagePullSecrets":[]})),
            ("ServiceAccount", json!({"automountServiceAccountToken":true}), json!({"secrets":[{"name":"b","x":null}]}), json!({"automountServiceAccountToken":true,"secrets":[{"name":"b"}]})),
        ];
        for (kind, original, patch, expected) in cases {
            assert_eq!(run(kind, &original, &patch), Ok(expected), "{kind}: {patch} on {original}");
        }
    }

    #[test]
    #[rustfmt::skip]
    fn applies_map_directives() {
        // (original, patch, expected), with the ConfigMap schema.
        let cases = [
            (json!({"data":{"a":"1","b":"2"}}), json!({"data":{"$patch":"replace","c":"3","d":null}}), json!({"data":{"c":"3"}})),
            (json!({"data":{"a":"1"},"x":1}), json!({"data":{"$patch":"delete"}}), json!({"data":{},"x":1})),
            (json!({"data":{"a":"1"}}), json!({"data":{"$patch":"merge","b":"2"}}), json!({"data":{"a":"1","b":"2"}})),
            (json!({"a":1,"b":2}), json!({"$patch":"replace","c":3}), json!({"c":3})),
            (json!({"a":1}), json!({"$patch":"delete"}), json!({})),
            (json!({}), json!({"new":{"$patch":"replace","k":{"$patch":"merge","v":1}}}), json!({"new":{"k":{"v":1}}})),
            (json!({"spec":{"a":1,"b":2,"c":3}}), json!({"spec":{"$retainKeys":["a","d"],"d":4}}), json!({"spec":{"a":1,"d":4}})),
            (json!({"spec":{"a":1,"b":2}}), json!({"spec":{"$retainKeys":["a"],"b":null}}), json!({"spec":{"a":1}})),
            (json!({"metadata":{"ownerReferences":[{"uid":"1"},{"uid":"x"},{"uid":"2"}]}}),
             json!({"metadata":{"$setElementOrder/ownerReferences":[{"uid":"3"},{"uid":"2"},{"uid":"1"}],"ownerReferences":[{"uid":"3"}]}}),
             json!({"metadata":{"ownerReferences":[{"uid":"3"},{"uid":"x"},{"uid":"2"},{"uid":"1"}]}})),
            (json!({"metadata":{"finalizers":["a","b","c"]}}), json!({"metadata":{"$setElementOrder/finalizers":["c","a"]}}), json!({"metadata":{"finalizers":["c","b","a"]}})),
            (json!({"metadata":{}}), json!({"metadata":{"$setElementOrder/finalizers":["c"]}}), json!({"metadata":{}})),
            (json!({"l":[3,1]}), json!({"$setElementOrder/l":[1,3]}), json!({"l":[3,1]})),
        ];
        for (original, patch, expected) in cases {
            assert_eq!(run("ConfigMap", &original, &patch), Ok(expected), "{patch} on {original}");
        }
    }

    #[test]
    #[rustfmt::skip]
    fn reports_bad_patches() {
        let owners = json!({"metadata":{"ownerReferences":[{"uid":"1"}]}});
        // (kind, original, patch, status, message)
        let cases = [
            ("", json!({}), json!([1]), 400, "a strategic merge patch must be a JSON object, not an array"),
            ("", json!({}), json!(null), 400, "a strategic merge patch must be a JSON object, not null"),
            ("", json!({}), json!({"a":{"$patch":"remove"}}), 422, "invalid $patch at .a: expected \"replace\", \"merge\" or \"delete\", not \"remove\""),
            ("", json!({}), json!({"$patch":1}), 422, "invalid $patch at .: expected \"replace\", \"merge\" or \"delete\", not 1"),
            ("", json!({}), json!({"l":[{"$patch":"delete","name":"x"}]}), 422, "invalid $patch at .l: \"delete\" in a list needs a list merged by key, and this one is not"),
            ("ConfigMap", owners.clone(), json!({"metadata":{"ownerReferences":[{"name":"x"}]}}), 422, "invalid element in the list .metadata.ownerReferences: {\"name\":\"x\"} has no merge key \"uid\""),
            ("ConfigMap", owners.clone(), json!({"metadata":{"ownerReferences":[{"$patch":"delete"}]}}), 422, "invalid element in the list .metadata.ownerReferences: {\"$patch\":\"delete\"} has no merge key \"uid\""),
            ("ConfigMap", owners.clone(), json!({"metadata":{"ownerReferences":["1"]}}), 422, "invalid element in the list .metadata.ownerReferences: it is a string, but this list merges objects by key \"uid\""),
            ("", json!({}), json!({"spec":{"$retainKeys":"a"}}), 422, "invalid $retainKeys at .spec: it must be a list of strings"),
            ("", json!({}), json!({"spec":{"$retainKeys":["a"],"b":1}}), 422, "invalid $retainKeys at .spec: it does not list \"b\", which the patch sets"),
            ("", json!({"f":"x"}), json!({"$deleteFromPrimitiveList/f":["x"]}), 422, "invalid $deleteFromPrimitiveList/f at .: the field \"f\" is a string, not a list"),
            ("", json!({}), json!({"$deleteFromPrimitiveList/f":"x"}), 422, "invalid $deleteFromPrimitiveList/f at .: it must be a list"),
            ("", json!({"metadata":{"finalizers":[]}}), json!({"metadata":{"$setElementOrder/finalizers":{}}}), 422, "invalid $setElementOrder/finalizers at .metadata: it must be a list"),
            ("Secret", owners.clone(), json!({"metadata":{"$setElementOrder/ownerReferences":[{"name":"1"}]}}), 422, "invalid element in the list .metadata.ownerReferences: {\"name\":\"1\"} has no merge key \"uid\""),
        ];
        for (kind, original, patch, status, message) in cases {
            let e = run(kind, &original, &patch).expect_err("patch should fail");
            assert_eq!((e.status_code(), e.to_string().as_str()), (status, message), "{patch}");
        }
    }

    #[test]
    fn limits_depth() {
        let deep = nested_objects(MAX_DEPTH + 1);
        let e = apply(&json!({}), &deep, &NoSchema);
        assert_eq!(e, Err(StrategicError::PatchTooDeep { max: MAX_DEPTH }));
        let e = apply(&deep, &json!({}), &NoSchema);
        assert_eq!(e, Err(StrategicError::ObjectTooDeep { max: MAX_DEPTH }));
        // The deepest accepted patch merges within a worker-sized stack.
        let patch = nested_objects(MAX_DEPTH);
        let merged = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || apply(&patch, &patch, &NoSchema).map(|v| v == patch))
            .map(|handle| handle.join());
        assert!(matches!(merged, Ok(Ok(Ok(true)))));
    }

    #[test]
    #[rustfmt::skip]
    fn follows_a_custom_schema() {
        /// A Pod-like schema: paths skip array levels, so container ports
        /// are at spec.containers.ports; spec.selector is an atomic map. The
        /// patch's 80.0 finds the stored 80, and the patch's value wins.
        struct PodLike;
        impl PatchSchema for PodLike {
            fn list_strategy(&self, path: &[&str]) -> ListStrategy {
                match path {
                    ["spec", "containers"] => ListStrategy::MergeByKey("name".into()),
                    ["spec", "containers", "ports"] => ListStrategy::MergeByKey("containerPort".into()),
                    _ => ListStrategy::Replace,
                }
            }
            fn is_atomic_map(&self, path: &[&str]) -> bool {
                path == ["spec", "selector"]
            }
        }
        let original = json!({"spec":{"selector":{"a":"1"},"other":{"a":"1"},"containers":[
            {"name":"app","image":"v1","ports":[{"containerPort":80,"protocol":"TCP"}],"args":["x"]}]}});
        let patch = json!({"spec":{"selector":{"b":"2","c":null},"other":{"b":"2"},"containers":[
            {"name":"app","image":"v2","ports":[{"containerPort":80.0,"name":"http"},{"containerPort":443}],"args":["y"]}]}});
        let expected = json!({"spec":{"selector":{"b":"2"},"other":{"a":"1","b":"2"},"containers":[
            {"name":"app","image":"v2","ports":[{"containerPort":80.0,"protocol":"TCP","name":"http"},{"containerPort":443}],"args":["y"]}]}});
        assert_eq!(apply(&original, &patch, &PodLike), Ok(expected));
    }
}
