//! Structural-schema checks for a CRD's `openAPIV3Schema`, so the server can
//! refuse a non-structural CRD with messages in kube-apiserver's style
//! (`openAPIV3Schema.properties[spec].type: Required value: ...`; the server
//! prepends `spec.versions[i].schema.`).
//!
//! Checked: a non-empty `type` at every node (except int-or-string and
//! preserve-unknown-fields nodes) and `object` at the root; `properties`
//! together with `additionalProperties`; `additionalProperties: false`;
//! `items` for arrays; keywords that only make sense for one type; the
//! list/map-type extensions; value-validation-only junctors (`allOf`,
//! `anyOf`, `oneOf`, `not` may not set type/default/nullable/
//! additionalProperties or the Kubernetes extensions, nor introduce fields
//! absent from the structural part); `metadata` restricted to `name` and
//! `generateName`; and `default` values, which must survive pruning and
//! validate against their own schema.

use serde_json::Value;

use super::default::default_value;
use super::json::{child_path, quote};
use super::node::{Additional, JsonType, ListType, Node};
use super::prune::prune_value;
use super::validate::validate_at;
use super::{SCHEMA_ROOT, Schema};

/// Structural-schema violations of a CRD schema, one message each; empty means structural.
///
/// A schema that does not even compile yields the compile error as its only message.
pub fn validate_structural(schema: &Value) -> Vec<String> {
    let compiled = match Schema::compile(schema) {
        Ok(s) => s,
        Err(e) => return vec![e.to_string()],
    };
    let root = compiled.root();
    let mut out = Vec::new();
    if root.json_type.is_some_and(|t| t != JsonType::Object) {
        out.push(format!(
            "{SCHEMA_ROOT}.type: Invalid value: {}: must be object at the root",
            quote(type_str(root))
        ));
    }
    if let Some(meta) = root.properties.get("metadata") {
        check_metadata(meta, &mut out);
    }
    walk(root, SCHEMA_ROOT, "", &mut out);
    out
}

fn type_str(node: &Node) -> &'static str {
    node.json_type.map_or("", JsonType::as_str)
}

/// Checks one structural node (not inside a junctor) and recurses; `field` is the object path it describes.
fn walk(node: &Node, path: &str, field: &str, out: &mut Vec<String>) {
    let t = node.json_type;
    if t.is_none() && !node.preserve_unknown && !node.int_or_string {
        let what =
            if !node.properties.is_empty() || !matches!(node.additional, Additional::Unspecified) {
                "must not be empty for specified object fields"
            } else if node.items.is_some() {
                "must not be empty for specified array items"
            } else {
                "must not be empty"
            };
        out.push(format!("{path}.type: Required value: {what}"));
    }
    if node.int_or_string && t.is_some() {
        out.push(format!(
            "{path}.type: Invalid value: {}: must be empty if x-kubernetes-int-or-string is true",
            quote(type_str(node))
        ));
    }
    let has_props = !node.properties.is_empty();
    match &node.additional {
        Additional::Unspecified => {}
        Additional::Bool(false) => {
            out.push(format!("{path}.additionalProperties: Forbidden: additionalProperties cannot be set to false"))
        }
        _ if has_props => out.push(format!(
            "{path}.additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"
        )),
        _ => {}
    }
    let scalar = t.is_some_and(|t| !matches!(t, JsonType::Object | JsonType::Array));
    if scalar && (has_props || !matches!(node.additional, Additional::Unspecified)) {
        out.push(format!(
            "{path}.properties: Forbidden: must only be used with type object"
        ));
    }
    if t == Some(JsonType::Array) && node.items.is_none() {
        out.push(format!(
            "{path}.items: Required value: must be specified for type array"
        ));
    }
    if node.items.is_some() && t.is_some_and(|t| t != JsonType::Array) {
        out.push(format!(
            "{path}.items: Forbidden: must only be used with type array"
        ));
    }
    if node.embedded && t != Some(JsonType::Object) {
        out.push(format!(
            "{path}.type: Invalid value: {}: must be object if x-kubernetes-embedded-resource is true",
            quote(type_str(node))
        ));
    }
    check_list_and_map_types(node, path, out);
    if let Some(d) = &node.default {
        check_default(node, d, path, field, out);
    }
    for (name, prop) in &node.properties {
        walk(
            prop,
            &format!("{path}.properties[{name}]"),
            &child_path(field, name),
            out,
        );
    }
    if let Additional::Schema(s) = &node.additional {
        walk(
            s,
            &format!("{path}.additionalProperties"),
            &format!("{field}[*]"),
            out,
        );
    }
    if let Some(items) = node.items() {
        walk(items, &format!("{path}.items"), &format!("{field}[*]"), out);
    }
    for (kw, subs) in [
        ("allOf", &node.all_of),
        ("anyOf", &node.any_of),
        ("oneOf", &node.one_of),
    ] {
        for (i, sub) in subs.iter().enumerate() {
            check_junctor(
                sub,
                Some(node),
                node.int_or_string,
                &format!("{path}.{kw}[{i}]"),
                out,
            );
        }
    }
    if let Some(not) = node.not.as_deref() {
        check_junctor(
            not,
            Some(node),
            node.int_or_string,
            &format!("{path}.not"),
            out,
        );
    }
}

/// List-type, list-map-keys and map-type must fit the node's type and items.
fn check_list_and_map_types(node: &Node, path: &str, out: &mut Vec<String>) {
    let t = node.json_type;
    if let Some(lt) = node.list_type {
        if t != Some(JsonType::Array) {
            out.push(format!(
                "{path}.x-kubernetes-list-type: Invalid value: {}: must only be used on type=array",
                quote(type_str(node))
            ));
        }
        if lt == ListType::Map {
            check_list_map(node, path, out);
        }
    }
    if !node.list_map_keys.is_empty() && node.list_type != Some(ListType::Map) {
        out.push(format!("{path}.x-kubernetes-list-map-keys: Forbidden: must only be used if x-kubernetes-list-type is map"));
    }
    if node.map_type.is_some() && t != Some(JsonType::Object) {
        out.push(format!(
            "{path}.x-kubernetes-map-type: Invalid value: {}: must only be used on type=object",
            quote(type_str(node))
        ));
    }
}

/// A list-map needs object items whose key fields exist, are scalars, and are required or defaulted.
fn check_list_map(node: &Node, path: &str, out: &mut Vec<String>) {
    let keys_path = format!("{path}.x-kubernetes-list-map-keys");
    if node.list_map_keys.is_empty() {
        out.push(format!(
            "{keys_path}: Required value: must not be empty if x-kubernetes-list-type is map"
        ));
    }
    let Some(items) = node.items() else { return };
    if items.json_type != Some(JsonType::Object) {
        out.push(format!("{path}.items.type: Invalid value: {}: must be object if parent array's x-kubernetes-list-type is map", quote(type_str(items))));
        return;
    }
    for key in &node.list_map_keys {
        match items.properties.get(key) {
            None => out.push(format!(
                "{keys_path}: Invalid value: {}: entries must all be names of item properties",
                quote(key)
            )),
            Some(p) => {
                if p.json_type
                    .is_some_and(|t| matches!(t, JsonType::Object | JsonType::Array))
                {
                    out.push(format!("{path}.items.properties[{key}].type: Invalid value: {}: must be a scalar type if parent array's x-kubernetes-list-type is map", quote(type_str(p))));
                }
                if p.default.is_none() && !items.required.contains(key) {
                    out.push(format!("{path}.items.properties[{key}]: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"));
                }
            }
        }
    }
}

/// Only `name` and `generateName` of `metadata` may be restricted, since ObjectMeta is not the CRD's to describe.
fn check_metadata(meta: &Node, out: &mut Vec<String>) {
    let extra = meta
        .properties
        .keys()
        .any(|k| k != "name" && k != "generateName");
    if extra || !matches!(meta.additional, Additional::Unspecified) || meta.default.is_some() {
        out.push(format!(
            "{SCHEMA_ROOT}.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified"
        ));
    }
}

/// A junctor sub-schema may only add value validations on fields the structural part already declares.
fn check_junctor(
    sub: &Node,
    parent: Option<&Node>,
    int_or_string: bool,
    path: &str,
    out: &mut Vec<String>,
) {
    let ios_type =
        int_or_string && matches!(sub.json_type, Some(JsonType::Integer | JsonType::String));
    if sub.json_type.is_some() && !ios_type {
        out.push(format!(
            "{path}.type: Forbidden: must be empty to be structural"
        ));
    }
    let flags = [
        (sub.default.is_some(), "default"),
        (sub.nullable, "nullable"),
        (
            !matches!(sub.additional, Additional::Unspecified),
            "additionalProperties",
        ),
        (sub.preserve_unknown, "x-kubernetes-preserve-unknown-fields"),
        (sub.embedded, "x-kubernetes-embedded-resource"),
        (sub.int_or_string, "x-kubernetes-int-or-string"),
        (sub.list_type.is_some(), "x-kubernetes-list-type"),
        (sub.map_type.is_some(), "x-kubernetes-map-type"),
    ];
    for (set, kw) in flags {
        if set {
            out.push(format!(
                "{path}.{kw}: Forbidden: must be undefined to be structural"
            ));
        }
    }
    for (name, p) in &sub.properties {
        let declared = parent.and_then(|n| n.child(name));
        let p_path = format!("{path}.properties[{name}]");
        if declared.is_none() && !parent.is_some_and(Node::keeps_unknown_fields) {
            out.push(format!("{p_path}: Forbidden: must not be specified in a value validation unless declared in the structural schema"));
        }
        check_junctor(p, declared, false, &p_path, out);
    }
    if let Some(items) = sub.items() {
        let declared = parent.and_then(Node::items);
        if declared.is_none() {
            out.push(format!("{path}.items: Forbidden: must not be specified in a value validation unless declared in the structural schema"));
        }
        check_junctor(items, declared, false, &format!("{path}.items"), out);
    }
    for (kw, subs) in [
        ("allOf", &sub.all_of),
        ("anyOf", &sub.any_of),
        ("oneOf", &sub.one_of),
    ] {
        for (i, s) in subs.iter().enumerate() {
            check_junctor(s, parent, int_or_string, &format!("{path}.{kw}[{i}]"), out);
        }
    }
    if let Some(not) = sub.not.as_deref() {
        check_junctor(not, parent, int_or_string, &format!("{path}.not"), out);
    }
}

/// A default must have no unknown fields (after its own nested defaults) and must validate.
fn check_default(node: &Node, default: &Value, path: &str, field: &str, out: &mut Vec<String>) {
    let mut value = default.clone();
    default_value(node, &mut value, false, 1);
    let mut pruned = Vec::new();
    prune_value(Some(node), &mut value, "", false, 1, &mut pruned);
    pruned.sort();
    for p in pruned {
        let rel = p.trim_start_matches('.');
        let full = if field.is_empty() || rel.starts_with('[') {
            format!("{field}{rel}")
        } else {
            format!("{field}.{rel}")
        };
        out.push(format!(
            "{path}.default: Invalid value: unknown field {}",
            quote(&full)
        ));
    }
    for e in validate_at(node, &value, field) {
        out.push(format!("{path}.default: {e}"));
    }
}
