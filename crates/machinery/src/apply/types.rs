//! Type information consumed by the engine: the [`TypeNode`] trait the server implements
//! for its schemas, [`Untyped`] for schema-less callers, the implementation for the server's compiled schema nodes, and the classification of a
//! JSON value into the merge/ownership [`Kind`] the rest of the engine works with.

use std::collections::BTreeSet;

use serde_json::Value;

#[cfg(test)]
use super::ApplyError;
use super::path::item_key;

pub use crate::schema::{ListType, MapType};

/// Type information for one node of an object's schema. The server implements this for its
/// compiled CRD-schema node type and for the built-in kinds' schemas.
pub trait TypeNode {
    /// The schema of object field `name` (a named property, or else the additionalProperties schema).
    fn field(&self, name: &str) -> Option<&Self>;
    /// The schema of list items.
    fn items(&self) -> Option<&Self>;
    /// The list type, if declared.
    fn list_type(&self) -> Option<ListType>;
    /// The key field names of a `Map` list.
    fn list_map_keys(&self) -> &[String];
    /// The map type, if declared.
    fn map_type(&self) -> Option<MapType>;
    /// Whether this object node is a struct with fixed named properties rather than a map with
    /// arbitrary keys. Only affects bookkeeping of Update operations: like Kubernetes, a map
    /// created by an Update is owned with a `.` marker, a struct is not. Default: false.
    fn is_struct(&self) -> bool {
        false
    }
}

/// Type information for callers with no schema: objects are granular maps, lists atomic.
#[derive(Clone, Copy, Debug, Default)]
pub struct Untyped;

impl TypeNode for Untyped {
    fn field(&self, _name: &str) -> Option<&Self> {
        None
    }
    fn items(&self) -> Option<&Self> {
        None
    }
    fn list_type(&self) -> Option<ListType> {
        None
    }
    fn list_map_keys(&self) -> &[String] {
        &[]
    }
    fn map_type(&self) -> Option<MapType> {
        None
    }
}

impl TypeNode for crate::schema::Node {
    fn field(&self, name: &str) -> Option<&Self> {
        self.property(name).or(self.additional_properties())
    }
    fn items(&self) -> Option<&Self> {
        crate::schema::Node::items(self)
    }
    fn list_type(&self) -> Option<ListType> {
        crate::schema::Node::list_type(self)
    }
    fn list_map_keys(&self) -> &[String] {
        crate::schema::Node::list_map_keys(self)
    }
    fn map_type(&self) -> Option<MapType> {
        crate::schema::Node::map_type(self)
    }
    fn is_struct(&self) -> bool {
        self.properties().next().is_some()
    }
}

/// A compiled schema node from JSON, for tests.
#[cfg(test)]
pub(crate) fn schema_node(v: &Value) -> Result<crate::schema::Node, ApplyError> {
    crate::schema::Schema::compile(v).map(|s| s.root().clone()).map_err(|e| ApplyError::InvalidSchema(e.to_string()))
}

/// How the engine treats one JSON value, given its (optional) schema node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind<'k> {
    /// Scalars, atomic objects, atomic lists: a single leaf compared and replaced whole.
    Leaf,
    /// A granular object: children are merged and owned per field.
    Object,
    /// A set list: items owned per value.
    Set,
    /// A well-formed map list: items owned per key.
    Map(&'k [String]),
}

/// Classifies `v`. Lists declared `map` fall back to [`Kind::Leaf`] (atomic) when they are not
/// well formed (an item that is not an object, lacks a key field, or repeats a key), and
/// `map` lists without declared keys are atomic too: ownership of such a list can only be
/// tracked as a whole. Apply rejects such configs up front (see `validate_config`).
pub(crate) fn classify<'k, T: TypeNode>(v: &Value, t: Option<&'k T>) -> Kind<'k> {
    match v {
        Value::Object(_) => match t.and_then(TypeNode::map_type) {
            Some(MapType::Atomic) => Kind::Leaf,
            _ => Kind::Object,
        },
        Value::Array(items) => match t {
            Some(t) => match t.list_type() {
                Some(ListType::Set) => Kind::Set,
                Some(ListType::Map) if !t.list_map_keys().is_empty() => {
                    let keys = t.list_map_keys();
                    if well_formed_map_list(items, keys) {
                        Kind::Map(keys)
                    } else {
                        Kind::Leaf
                    }
                }
                _ => Kind::Leaf,
            },
            None => Kind::Leaf,
        },
        _ => Kind::Leaf,
    }
}

/// Whether every item has all key fields and no two items share a key.
pub(crate) fn well_formed_map_list(items: &[Value], keys: &[String]) -> bool {
    let mut seen = BTreeSet::new();
    items.iter().all(|item| match item_key(item, keys) {
        Some(k) => seen.insert(super::path::PathElement::Key(k)),
        None => false,
    })
}

/// The schema node of object field `name`.
pub(crate) fn field_type<'t, T: TypeNode>(t: Option<&'t T>, name: &str) -> Option<&'t T> {
    t.and_then(|t| t.field(name))
}

/// The schema node of list items.
pub(crate) fn item_type<T: TypeNode>(t: Option<&T>) -> Option<&T> {
    t.and_then(TypeNode::items)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_schema_extensions() {
        let s = schema_node(&json!({
            "type": "object",
            "properties": {
                "ports": {"type": "array", "x-kubernetes-list-type": "map",
                          "x-kubernetes-list-map-keys": ["name"], "items": {"type": "object"}},
                "sel": {"type": "object", "x-kubernetes-map-type": "atomic"}
            },
            "additionalProperties": {"type": "string"}
        }))
        .unwrap();
        let ports = s.field("ports").unwrap();
        assert_eq!(ports.list_type(), Some(ListType::Map));
        assert_eq!(ports.list_map_keys(), ["name".to_string()]);
        assert!(ports.items().is_some());
        assert_eq!(s.field("sel").unwrap().map_type(), Some(MapType::Atomic));
        assert!(
            s.field("other").is_some(),
            "falls back to additionalProperties"
        );
        assert!(s.is_struct());
        assert!(schema_node(&json!({"x-kubernetes-list-type": "bag"})).is_err());
        assert!(schema_node(&json!({"x-kubernetes-list-map-keys": [1]})).is_err());
        assert!(schema_node(&json!([])).is_err());
    }

    #[test]
    fn classifies_values() {
        let s = schema_node(
            &json!({"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]}),
        )
        .unwrap();
        assert!(matches!(
            classify(&json!([{"name": "a"}]), Some(&s)),
            Kind::Map(_)
        ));
        assert_eq!(
            classify(&json!([{"name": "a"}, {"name": "a"}]), Some(&s)),
            Kind::Leaf
        );
        assert_eq!(classify(&json!([{"x": "a"}]), Some(&s)), Kind::Leaf);
        assert_eq!(classify(&json!([1]), None::<&Untyped>), Kind::Leaf);
        assert_eq!(classify(&json!({}), Some(&Untyped)), Kind::Object);
        assert_eq!(classify(&json!(null), Some(&Untyped)), Kind::Leaf);
    }
}
