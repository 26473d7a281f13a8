//! Pruning: removing fields the schema does not specify, as kube-apiserver
//! does for structural schemas, and reporting their paths (`.spec.foo`,
//! `.spec.items[0].bar`) for `fieldValidation=Strict` and `Warn`.
//!
//! Rules:
//! - the top-level `apiVersion`, `kind` and `metadata` are never pruned:
//!   they are not the CRD author's to describe (metadata is `ObjectMeta`,
//!   handled by the generic object machinery), so the CRD schema says
//!   nothing authoritative about them;
//! - under `x-kubernetes-preserve-unknown-fields: true` (or
//!   `additionalProperties: true`) unknown fields stay, whole; declared
//!   properties below are still pruned by their own schemas;
//! - an `x-kubernetes-embedded-resource` object always keeps `apiVersion`,
//!   `kind` and `metadata` (its metadata is kept whole);
//! - `allOf`/`anyOf`/`oneOf`/`not` never declare fields for pruning;
//! - below a field that has no schema at all, objects lose all their fields.
//!
//! Map entries (`additionalProperties` values) are reported with dots,
//! `.spec.labels.key.foo`, as Kubernetes' pruning does.

use serde_json::{Map, Value};

use super::MAX_DEPTH;
use super::node::{Additional, Node};
use super::validate::is_meta_key;

/// Prunes a whole custom resource; returns the removed paths, sorted and deduplicated.
pub(super) fn prune_root(root: &Node, object: &mut Value) -> Vec<String> {
    let mut out = Vec::new();
    prune_value(Some(root), object, "", true, 1, &mut out);
    out.sort();
    out.dedup();
    out
}

/// Prunes a value at field path `path` (in pruning's `.a.b` form) against an optional node.
///
/// Depth is bounded: below [`MAX_DEPTH`] the value is left alone, and
/// validation (which runs afterwards) reports the excessive nesting.
pub(super) fn prune_value(
    node: Option<&Node>,
    value: &mut Value,
    path: &str,
    root: bool,
    depth: usize,
    out: &mut Vec<String>,
) {
    if depth > MAX_DEPTH {
        return;
    }
    match value {
        Value::Object(map) => prune_object(node, map, path, root, depth, out),
        Value::Array(items) => {
            let item_node = match node {
                Some(n) if n.items.is_none() && n.keeps_unknown_fields() => return,
                Some(n) => n.items(),
                None => None,
            };
            for (i, item) in items.iter_mut().enumerate() {
                prune_value(
                    item_node,
                    item,
                    &format!("{path}[{i}]"),
                    false,
                    depth + 1,
                    out,
                );
            }
        }
        _ => {}
    }
}

fn prune_object(
    node: Option<&Node>,
    map: &mut Map<String, Value>,
    path: &str,
    root: bool,
    depth: usize,
    out: &mut Vec<String>,
) {
    let mut removed = Vec::new();
    for (key, value) in map.iter_mut() {
        if root && is_meta_key(key) {
            continue;
        }
        let Some(n) = node else {
            removed.push(key.clone());
            continue;
        };
        // An embedded resource's metadata is ObjectMeta, not described by this schema.
        if n.embedded && key == "metadata" {
            continue;
        }
        let child = format!("{path}.{key}");
        if let Some(prop) = n.properties.get(key) {
            prune_value(Some(prop), value, &child, false, depth + 1, out);
        } else if let Additional::Schema(s) = &n.additional {
            prune_value(Some(s), value, &child, false, depth + 1, out);
        } else if !(n.keeps_unknown_fields() || (n.embedded && is_meta_key(key))) {
            removed.push(key.clone());
        }
    }
    for key in removed {
        map.remove(&key);
        out.push(format!("{path}.{key}"));
    }
}
