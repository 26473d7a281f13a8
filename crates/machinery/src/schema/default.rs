//! Defaulting: filling in `default` values the way kube-apiserver does
//! before pruning and validation.
//!
//! For each object node, every declared property that is absent gets a deep
//! copy of its `default`; defaults apply equally to objects inside arrays and
//! inside `additionalProperties` maps, and then to the inserted values
//! themselves (nested defaults), which makes defaulting idempotent.
//!
//! `null` handling follows Kubernetes: a `null` in a non-nullable field is
//! replaced by the field's default, or dropped if it has none (kube-apiserver
//! prunes such nulls before defaulting). `nullable: true` keeps `null`.
//! Array items are never dropped (that would shift indices); a `null` item
//! only gets the items' default.
//!
//! The top-level `metadata` (and an embedded resource's `metadata`) is not
//! the CRD schema's business and is left untouched.

use serde_json::{Map, Value};

use super::MAX_DEPTH;
use super::node::{Additional, Node};

/// Defaults a whole custom resource in place.
pub(super) fn default_root(root: &Node, object: &mut Value) {
    default_value(root, object, true, 1);
}

/// Defaults a value in place against `node`; `root` marks the top of a custom resource.
pub(super) fn default_value(node: &Node, value: &mut Value, root: bool, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match value {
        Value::Object(map) => default_object(node, map, root, depth),
        Value::Array(items) => {
            let Some(item_node) = node.items() else {
                return;
            };
            for item in items.iter_mut() {
                if item.is_null()
                    && !item_node.nullable
                    && let Some(d) = &item_node.default
                {
                    *item = d.clone();
                }
                default_value(item_node, item, false, depth + 1);
            }
        }
        _ => {}
    }
}

fn default_object(node: &Node, map: &mut Map<String, Value>, root: bool, depth: usize) {
    let skip = |key: &str| (root || node.embedded) && key == "metadata";
    for (key, prop) in &node.properties {
        if skip(key) {
            continue;
        }
        fill(map, key, prop);
    }
    if let Additional::Schema(s) = &node.additional {
        // Only entries not claimed by `properties` belong to additionalProperties.
        let nulls: Vec<String> = map
            .iter()
            .filter(|(k, v)| v.is_null() && !node.properties.contains_key(*k) && !skip(k))
            .map(|(k, _)| k.clone())
            .collect();
        for key in nulls {
            fill(map, &key, s);
        }
    }
    for (key, value) in map.iter_mut() {
        if skip(key) {
            continue;
        }
        if let Some(prop) = node.properties.get(key) {
            default_value(prop, value, false, depth + 1);
        } else if let Additional::Schema(s) = &node.additional {
            default_value(s, value, false, depth + 1);
        }
    }
}

/// Applies one field's default: absent or non-nullable `null` gets the default; a non-nullable `null` without one is dropped.
fn fill(map: &mut Map<String, Value>, key: &str, schema: &Node) {
    match map.get(key) {
        None => {
            if let Some(d) = &schema.default {
                map.insert(key.to_string(), d.clone());
            }
        }
        Some(Value::Null) if !schema.nullable => match &schema.default {
            Some(d) => {
                map.insert(key.to_string(), d.clone());
            }
            None => {
                map.remove(key);
            }
        },
        Some(_) => {}
    }
}
