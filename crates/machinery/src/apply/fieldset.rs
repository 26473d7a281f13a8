//! [`FieldSet`]: a set of field paths stored as a trie, with set algebra and the FieldsV1
//! wire codec used by `metadata.managedFields[].fieldsV1`.
//!
//! Every trie node may be a *member* (its own path is in the set) and may have children.
//! In FieldsV1 a member with no children is `{}`, a member with children carries the
//! `".": {}` marker, and a non-member node is just the object of its children.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::ApplyError;
use super::path::{Path, PathElement};

/// A set of field paths (a trie keyed by [`PathElement`]).
///
/// Invariant: no child subtree is empty, so structural equality is set equality.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSet {
    member: bool,
    children: BTreeMap<PathElement, FieldSet>,
}

impl FieldSet {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// A set containing only the node's own path (a leaf).
    pub(crate) fn leaf() -> Self {
        FieldSet {
            member: true,
            children: BTreeMap::new(),
        }
    }

    /// Whether the set has no paths.
    pub fn is_empty(&self) -> bool {
        !self.member && self.children.is_empty()
    }

    /// Whether this node's own path (relative to where the set is rooted) is a member.
    pub fn is_member(&self) -> bool {
        self.member
    }

    /// Marks or unmarks this node's own path.
    pub(crate) fn set_member(&mut self, member: bool) {
        self.member = member;
    }

    /// The subtree under one child element, if any path goes through it.
    pub fn child(&self, e: &PathElement) -> Option<&FieldSet> {
        self.children.get(e)
    }

    /// Iterates over child elements and their subtrees in sorted order.
    pub fn children(&self) -> impl Iterator<Item = (&PathElement, &FieldSet)> {
        self.children.iter()
    }

    /// Puts a non-empty subtree under `e`, unioning with what is there.
    pub(crate) fn insert_child(&mut self, e: PathElement, sub: FieldSet) {
        if sub.is_empty() {
            return;
        }
        match self.children.get_mut(&e) {
            Some(existing) => *existing = existing.union(&sub),
            None => {
                self.children.insert(e, sub);
            }
        }
    }

    /// Adds a path.
    pub fn insert(&mut self, path: &[PathElement]) {
        match path.split_first() {
            None => self.member = true,
            Some((first, rest)) => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    /// Whether `path` is a member.
    pub fn contains(&self, path: &[PathElement]) -> bool {
        match path.split_first() {
            None => self.member,
            Some((first, rest)) => self.children.get(first).is_some_and(|c| c.contains(rest)),
        }
    }

    /// Paths in both sets.
    pub fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.member |= other.member;
        for (e, sub) in &other.children {
            out.insert_child(e.clone(), sub.clone());
        }
        out
    }

    /// Paths in `self` but not in `other` (exact paths; removing a path keeps its descendants).
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && !other.member,
            children: BTreeMap::new(),
        };
        for (e, sub) in &self.children {
            let d = match other.children.get(e) {
                Some(o) => sub.difference(o),
                None => sub.clone(),
            };
            out.insert_child(e.clone(), d);
        }
        out
    }

    /// Paths in both sets.
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && other.member,
            children: BTreeMap::new(),
        };
        for (e, sub) in &self.children {
            if let Some(o) = other.children.get(e) {
                out.insert_child(e.clone(), sub.intersection(o));
            }
        }
        out
    }

    /// All member paths, depth-first in sorted order (a node before its descendants).
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        self.collect_paths(&mut Vec::new(), &mut out, false);
        out
    }

    /// Member paths with no descendants in the set (the trie's leaves).
    pub fn leaves(&self) -> Vec<Path> {
        let mut out = Vec::new();
        self.collect_paths(&mut Vec::new(), &mut out, true);
        out
    }

    /// Number of member paths.
    pub fn len(&self) -> usize {
        usize::from(self.member) + self.children.values().map(FieldSet::len).sum::<usize>()
    }

    fn collect_paths(&self, prefix: &mut Path, out: &mut Vec<Path>, leaves_only: bool) {
        if self.member && (!leaves_only || self.children.is_empty()) {
            out.push(prefix.clone());
        }
        for (e, sub) in &self.children {
            prefix.push(e.clone());
            sub.collect_paths(prefix, out, leaves_only);
            prefix.pop();
        }
    }

    /// Decodes a FieldsV1 JSON object. Malformed input (non-object nodes, unknown key
    /// prefixes, unparsable `k:`/`v:`/`i:` payloads) is an error, never a panic.
    pub fn from_fields_v1(v: &Value) -> Result<FieldSet, ApplyError> {
        let mut path = Vec::new();
        let mut set = decode_node(v, &mut path)?;
        // At the root `{}` is the empty set; only an explicit `.` makes the root a member.
        set.member = v.as_object().is_some_and(|m| m.contains_key("."));
        Ok(set)
    }

    /// Encodes as a FieldsV1 JSON object; keys are emitted in sorted order (`.` first, then
    /// `f:`, `i:`, `k:`, `v:`), which is also serde_json's default map order.
    pub fn to_fields_v1(&self) -> Value {
        self.encode(true)
    }

    fn encode(&self, root: bool) -> Value {
        let mut map = Map::new();
        // Below the root a childless member is plain `{}`; the root spells membership out.
        if self.member && (root || !self.children.is_empty()) {
            map.insert(".".to_string(), Value::Object(Map::new()));
        }
        for (e, sub) in &self.children {
            map.insert(e.to_fields_v1_key(), sub.encode(false));
        }
        Value::Object(map)
    }
}

fn decode_error(path: &[PathElement], msg: impl std::fmt::Display) -> ApplyError {
    let at = super::path::path_string(path);
    ApplyError::InvalidFieldsV1(if at.is_empty() {
        msg.to_string()
    } else {
        format!("{at}: {msg}")
    })
}

fn decode_node(v: &Value, path: &mut Path) -> Result<FieldSet, ApplyError> {
    let Value::Object(map) = v else {
        return Err(decode_error(path, "expected a JSON object"));
    };
    // A node that is `{}` is a leaf: its own path is in the set.
    let mut set = FieldSet {
        member: map.is_empty(),
        children: BTreeMap::new(),
    };
    for (k, child) in map {
        if k == "." {
            if !child.as_object().is_some_and(Map::is_empty) {
                return Err(decode_error(
                    path,
                    "the \".\" marker must be an empty object",
                ));
            }
            set.member = true;
            continue;
        }
        let e = parse_key(k).map_err(|m| decode_error(path, m))?;
        path.push(e.clone());
        let sub = decode_node(child, path)?;
        path.pop();
        set.insert_child(e, sub);
    }
    Ok(set)
}

fn parse_key(k: &str) -> Result<PathElement, String> {
    let (prefix, rest) = k
        .split_at_checked(2)
        .ok_or_else(|| format!("invalid key {k:?}"))?;
    match prefix {
        "f:" => Ok(PathElement::Field(rest.to_string())),
        "k:" => match serde_json::from_str::<Value>(rest) {
            Ok(Value::Object(obj)) => Ok(PathElement::Key(obj.into_iter().collect())),
            Ok(_) => Err(format!("key {k:?} is not a JSON object")),
            Err(e) => Err(format!("key {k:?}: {e}")),
        },
        "v:" => serde_json::from_str::<Value>(rest)
            .map(PathElement::Value)
            .map_err(|e| format!("key {k:?}: {e}")),
        "i:" => rest
            .parse::<usize>()
            .map(PathElement::Index)
            .map_err(|e| format!("key {k:?}: {e}")),
        _ => Err(format!("invalid key {k:?}: unknown prefix")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn f(n: &str) -> PathElement {
        PathElement::Field(n.to_string())
    }

    fn roundtrip(v: Value) {
        let set = FieldSet::from_fields_v1(&v).unwrap();
        assert_eq!(set.to_fields_v1(), v, "round trip of {v}");
        // Also the serialized text is stable.
        assert_eq!(set.to_fields_v1().to_string(), v.to_string());
    }

    #[test]
    fn fields_v1_round_trips_realistic_samples() {
        roundtrip(
            json!({"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"nginx\"}":{".":{},"f:image":{},"f:name":{}}}}}),
        );
        roundtrip(json!({"f:metadata":{"f:finalizers":{"v:\"a\"":{}}}}));
        roundtrip(json!({"f:data":{".":{},"f:key":{}}}));
        roundtrip(
            json!({"f:spec":{"f:ports":{"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:protocol":{}}},"f:replicas":{}},"f:status":{"f:conditions":{"i:0":{}}}}),
        );
        roundtrip(json!({}));
    }

    #[test]
    fn key_json_is_canonicalized() {
        let set = FieldSet::from_fields_v1(
            &json!({"k:{ \"protocol\": \"TCP\", \"containerPort\": 80 }": {}}),
        )
        .unwrap();
        assert_eq!(
            set.to_fields_v1(),
            json!({"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {}})
        );
    }

    #[test]
    fn malformed_fields_v1_is_an_error() {
        for bad in [
            json!([]),
            json!("f:a"),
            json!({"f:a": 1}),
            json!({"f:a": {"x:b": {}}}),
            json!({"k:{not json": {}}),
            json!({"k:[1]": {}}),
            json!({"v:": {}}),
            json!({"i:-1": {}}),
            json!({"f": {}}),
            json!({"": {}}),
            json!({".": {"f:a": {}}}),
            json!({".": 1}),
        ] {
            assert!(
                matches!(
                    FieldSet::from_fields_v1(&bad),
                    Err(ApplyError::InvalidFieldsV1(_))
                ),
                "{bad}"
            );
        }
        let err = FieldSet::from_fields_v1(&json!({"f:spec": {"f:x": []}})).unwrap_err();
        assert!(err.to_string().contains(".spec.x"), "{err}");
    }

    #[test]
    fn set_algebra() {
        let mut a = FieldSet::new();
        a.insert(&[f("spec"), f("a")]);
        a.insert(&[f("spec"), f("b")]);
        let mut b = FieldSet::new();
        b.insert(&[f("spec"), f("b")]);
        b.insert(&[f("spec")]);
        let u = a.union(&b);
        assert_eq!(u.len(), 3);
        assert!(u.contains(&[f("spec")]));
        let d = a.difference(&b);
        assert_eq!(d.paths(), vec![vec![f("spec"), f("a")]]);
        let i = a.intersection(&b);
        assert_eq!(i.paths(), vec![vec![f("spec"), f("b")]]);
        assert!(a.difference(&a).is_empty());
        assert_eq!(d.difference(&d), FieldSet::new());
        assert_eq!(u.leaves().len(), 2);
        assert_eq!(u.paths()[0], vec![f("spec")]);
    }
}
