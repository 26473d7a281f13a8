//! Validation of a custom resource against a compiled schema, producing
//! Kubernetes-style field errors (`FieldValueRequired`, `FieldValueInvalid`,
//! ...) with paths like `spec.items[2].name` and messages like
//! `Invalid value: 11: spec.size in body should be less than or equal to 10`.
//!
//! Keywords apply by the value's actual JSON kind (string keywords to
//! strings, and so on), so untyped sub-schemas inside `allOf`/`anyOf`/
//! `oneOf`/`not` work as in JSON Schema. A type mismatch stops the checks of
//! that node, as kube-apiserver does, to avoid cascades of errors.

use std::collections::HashSet;
use std::fmt;

use serde_json::{Map, Number, Value};

use super::json::{self, child_path, index_path, key_path, quote, render};
use super::node::{Additional, ListType, Node};
use super::{MAX_DEPTH, formats};

/// Kubernetes' `StatusCause` type for a field error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// A required field is missing ("Required value").
    FieldValueRequired,
    /// A value breaks a constraint ("Invalid value: ...").
    FieldValueInvalid,
    /// A value is not in the `enum` ("Unsupported value: ...").
    FieldValueNotSupported,
    /// A value has the wrong JSON type ("Invalid value: ... must be of type ...").
    FieldValueTypeInvalid,
    /// A string is longer than `maxLength` ("Too long: ...").
    FieldValueTooLong,
    /// Too many items or properties ("Too many: ...").
    FieldValueTooMany,
    /// A duplicate list item or list-map key ("Duplicate value: ...").
    FieldValueDuplicate,
    /// A property that `additionalProperties: false` forbids ("Forbidden: ...").
    FieldValueForbidden,
}

impl Reason {
    /// The cause type string as it appears in a Kubernetes `Status`.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::FieldValueRequired => "FieldValueRequired",
            Reason::FieldValueInvalid => "FieldValueInvalid",
            Reason::FieldValueNotSupported => "FieldValueNotSupported",
            Reason::FieldValueTypeInvalid => "FieldValueTypeInvalid",
            Reason::FieldValueTooLong => "FieldValueTooLong",
            Reason::FieldValueTooMany => "FieldValueTooMany",
            Reason::FieldValueDuplicate => "FieldValueDuplicate",
            Reason::FieldValueForbidden => "FieldValueForbidden",
        }
    }
}

impl Reason {
    /// Whether an error of this kind keeps the CEL rules from running (kube-apiserver's
    /// blocking errors: `Unsupported value`, `Required value`, `Too long`, `Too many`, a
    /// wrong type).
    pub fn blocks_rules(self) -> bool {
        matches!(
            self,
            Reason::FieldValueNotSupported | Reason::FieldValueRequired | Reason::FieldValueTooLong | Reason::FieldValueTooMany | Reason::FieldValueTypeInvalid
        )
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One validation failure; `message` is the body Kubernetes puts in a `StatusCause`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The kind of failure.
    pub reason: Reason,
    /// Field path such as `spec.items[2].name` (empty for the whole object).
    pub field: String,
    /// Message body such as `Required value` or `Invalid value: "x": ...`.
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.field, self.message)
        }
    }
}

impl std::error::Error for FieldError {}

impl FieldError {
    fn new(reason: Reason, field: &str, message: String) -> FieldError {
        FieldError {
            reason,
            field: field.to_string(),
            message,
        }
    }

    fn required(field: &str) -> FieldError {
        FieldError::new(Reason::FieldValueRequired, field, "Required value".into())
    }

    fn invalid(field: &str, value: &str, detail: &str) -> FieldError {
        FieldError::new(
            Reason::FieldValueInvalid,
            field,
            format!("Invalid value: {value}: {detail}"),
        )
    }

    fn type_invalid(field: &str, actual: &str, expected: &str) -> FieldError {
        let actual = quote(actual);
        FieldError::new(
            Reason::FieldValueTypeInvalid,
            field,
            format!(
                "Invalid value: {actual}: {} must be of type {expected}: {actual}",
                in_body(field)
            ),
        )
    }

    fn not_supported(field: &str, value: &Value, supported: &[Value]) -> FieldError {
        let list: Vec<String> = supported.iter().map(render).collect();
        FieldError::new(
            Reason::FieldValueNotSupported,
            field,
            format!(
                "Unsupported value: {}: supported values: {}",
                render(value),
                list.join(", ")
            ),
        )
    }

    fn too_long(field: &str, max: u64) -> FieldError {
        FieldError::new(
            Reason::FieldValueTooLong,
            field,
            format!("Too long: may not be longer than {max}"),
        )
    }

    fn too_many(field: &str, actual: usize, max: u64) -> FieldError {
        FieldError::new(
            Reason::FieldValueTooMany,
            field,
            format!("Too many: {actual}: must have at most {max} items"),
        )
    }

    fn duplicate(field: &str, value: &Value) -> FieldError {
        FieldError::new(
            Reason::FieldValueDuplicate,
            field,
            format!("Duplicate value: {}", render(value)),
        )
    }

    fn forbidden(field: &str, detail: &str) -> FieldError {
        FieldError::new(
            Reason::FieldValueForbidden,
            field,
            format!("Forbidden: {detail}"),
        )
    }
}

/// `spec.size in body`, or `body` for the root, as go-openapi words its messages.
fn in_body(field: &str) -> String {
    if field.is_empty() {
        "body".to_string()
    } else {
        format!("{field} in body")
    }
}

/// Top-level fields every object keeps; the CRD schema does not govern them.
pub(super) fn is_meta_key(key: &str) -> bool {
    matches!(key, "apiVersion" | "kind" | "metadata")
}

/// Validates a whole custom resource.
pub(super) fn validate_root(root: &Node, object: &Value) -> Vec<FieldError> {
    // Checked up front so that the recursive walk and deep equality below cannot overflow.
    if json::depth_exceeds(object, MAX_DEPTH) {
        return vec![FieldError::invalid(
            "",
            &quote(json::type_name(object)),
            &format!("nesting exceeds the maximum depth of {MAX_DEPTH}"),
        )];
    }
    validate_at(root, object, "")
}

/// Validates a value at field path `path` (empty means the object root); the value must be depth-checked.
pub(super) fn validate_at(node: &Node, value: &Value, path: &str) -> Vec<FieldError> {
    let mut out = Vec::new();
    Validator { out: &mut out }.node(node, value, path, path.is_empty());
    out
}

/// Accumulates errors while walking the value and the schema together.
struct Validator<'o> {
    out: &'o mut Vec<FieldError>,
}

impl Validator<'_> {
    fn node(&mut self, node: &Node, value: &Value, path: &str, root: bool) {
        if value.is_null() && node.nullable {
            return;
        }
        if let Some(expected) = type_mismatch(node, value) {
            self.out.push(FieldError::type_invalid(
                path,
                json::type_name(value),
                &expected,
            ));
            return;
        }
        if let Some(allowed) = &node.enum_values
            && !allowed.iter().any(|a| json::json_equal(a, value))
        {
            self.out
                .push(FieldError::not_supported(path, value, allowed));
        }
        match value {
            Value::Number(n) => self.number(node, n, path),
            Value::String(s) => self.string(node, s, path),
            Value::Array(items) => self.array(node, items, path),
            Value::Object(map) => self.object(node, map, path, root),
            Value::Null | Value::Bool(_) => {}
        }
        self.junctors(node, value, path, root);
    }

    fn number(&mut self, node: &Node, n: &Number, path: &str) {
        let shown = json::render_number(n);
        let fail = |detail: String| {
            FieldError::invalid(path, &shown, &format!("{} {detail}", in_body(path)))
        };
        if let Some(max) = &node.maximum {
            let ord = json::cmp_numbers(n, max);
            let bound = json::render_number(max);
            if node.exclusive_maximum && ord.is_none_or(|o| o.is_ge()) {
                self.out.push(fail(format!("should be less than {bound}")));
            } else if !node.exclusive_maximum && ord.is_none_or(|o| o.is_gt()) {
                self.out
                    .push(fail(format!("should be less than or equal to {bound}")));
            }
        }
        if let Some(min) = &node.minimum {
            let ord = json::cmp_numbers(n, min);
            let bound = json::render_number(min);
            if node.exclusive_minimum && ord.is_none_or(|o| o.is_le()) {
                self.out
                    .push(fail(format!("should be greater than {bound}")));
            } else if !node.exclusive_minimum && ord.is_none_or(|o| o.is_lt()) {
                self.out
                    .push(fail(format!("should be greater than or equal to {bound}")));
            }
        }
        if let Some(m) = &node.multiple_of
            && !json::is_multiple_of(n, m)
        {
            self.out.push(fail(format!(
                "should be a multiple of {}",
                json::render_number(m)
            )));
        }
        if let Some(format) = &node.format
            && !formats::number_matches(format, n)
        {
            self.out
                .push(fail(format!("must be of type {format}: {}", quote(&shown))));
        }
    }

    fn string(&mut self, node: &Node, s: &str, path: &str) {
        let shown = quote(s);
        if node.min_length.is_some() || node.max_length.is_some() {
            // Lengths count characters (code points), not bytes, as Kubernetes does.
            let len = s.chars().count() as u64;
            if let Some(max) = node.max_length.filter(|m| len > *m) {
                self.out.push(FieldError::too_long(path, max));
            }
            if let Some(min) = node.min_length.filter(|m| len < *m) {
                let detail = format!("{} should be at least {min} chars long", in_body(path));
                self.out.push(FieldError::invalid(path, &shown, &detail));
            }
        }
        if let Some(p) = &node.pattern
            && !p.regex.is_match(s)
        {
            let detail = format!("{} should match '{}'", in_body(path), p.source);
            self.out.push(FieldError::invalid(path, &shown, &detail));
        }
        if let Some(format) = &node.format
            && !formats::string_matches(format, s)
        {
            let detail = format!("{} must be of type {format}: {shown}", in_body(path));
            self.out.push(FieldError::invalid(path, &shown, &detail));
        }
    }

    fn array(&mut self, node: &Node, items: &[Value], path: &str) {
        if let Some(min) = node.min_items.filter(|m| (items.len() as u64) < *m) {
            let detail = format!("{} should have at least {min} items", in_body(path));
            self.out
                .push(FieldError::invalid(path, &items.len().to_string(), &detail));
        }
        if let Some(max) = node.max_items.filter(|m| items.len() as u64 > *m) {
            self.out.push(FieldError::too_many(path, items.len(), max));
        }
        if node.unique_items || node.list_type == Some(ListType::Set) {
            let mut seen = HashSet::new();
            for (i, item) in items.iter().enumerate() {
                if !seen.insert(json::canonical(item)) {
                    self.out
                        .push(FieldError::duplicate(&index_path(path, i), item));
                }
            }
        }
        if node.list_type == Some(ListType::Map) {
            self.list_map(node, items, path);
        }
        if let Some(item_node) = node.items() {
            for (i, item) in items.iter().enumerate() {
                self.node(item_node, item, &index_path(path, i), false);
            }
        }
    }

    /// `x-kubernetes-list-type: map`: every key present, and no two items with the same key tuple.
    fn list_map(&mut self, node: &Node, items: &[Value], path: &str) {
        let mut seen = HashSet::new();
        for (i, item) in items.iter().enumerate() {
            // Non-object items are reported by the items schema's type check.
            let Value::Object(map) = item else { continue };
            let item_path = index_path(path, i);
            let mut key = Map::new();
            for k in &node.list_map_keys {
                match map.get(k) {
                    Some(v) => {
                        key.insert(k.clone(), v.clone());
                    }
                    // If the items schema requires the key, its own check reports it once.
                    None if node.items().is_some_and(|it| it.required.contains(k)) => {}
                    None => self
                        .out
                        .push(FieldError::required(&child_path(&item_path, k))),
                }
            }
            if key.len() == node.list_map_keys.len() {
                let key = Value::Object(key);
                if !seen.insert(json::canonical(&key)) {
                    self.out.push(FieldError::duplicate(&item_path, &key));
                }
            }
        }
    }

    fn object(&mut self, node: &Node, map: &Map<String, Value>, path: &str, root: bool) {
        for r in &node.required {
            if !map.contains_key(r) {
                self.out.push(FieldError::required(&child_path(path, r)));
            }
        }
        if let Some(min) = node.min_properties.filter(|m| (map.len() as u64) < *m) {
            let detail = format!("{} should have at least {min} properties", in_body(path));
            self.out
                .push(FieldError::invalid(path, &map.len().to_string(), &detail));
        }
        if let Some(max) = node.max_properties.filter(|m| map.len() as u64 > *m) {
            self.out.push(FieldError::too_many(path, map.len(), max));
        }
        if node.embedded {
            self.embedded(node, map, path);
        }
        for (k, v) in map {
            if let Some(prop) = node.properties.get(k) {
                self.node(prop, v, &child_path(path, k), false);
                continue;
            }
            match &node.additional {
                Additional::Schema(s) => self.node(s, v, &key_path(path, k), false),
                // Only where pruning would have kept the field: elsewhere the pruner
                // removes it (and reports it) before validation ever sees it.
                Additional::Bool(false)
                    if node.keeps_unknown_fields()
                        && !((root || node.embedded) && is_meta_key(k)) =>
                {
                    let field = child_path(path, k);
                    let detail = format!("{} is a forbidden property", in_body(&field));
                    self.out.push(FieldError::forbidden(&field, &detail));
                }
                _ => {}
            }
        }
    }

    /// `x-kubernetes-embedded-resource`: a nested object must look like a Kubernetes object.
    fn embedded(&mut self, node: &Node, map: &Map<String, Value>, path: &str) {
        for key in ["apiVersion", "kind"] {
            let field = child_path(path, key);
            match map.get(key) {
                Some(Value::String(s)) if !s.is_empty() => {}
                Some(Value::String(_)) | None => {
                    if !node.preserve_unknown {
                        self.out.push(FieldError::required(&field));
                    }
                }
                Some(other) if !node.properties.contains_key(key) => {
                    self.out.push(FieldError::type_invalid(
                        &field,
                        json::type_name(other),
                        "string",
                    ));
                }
                Some(_) => {}
            }
        }
        match map.get("metadata") {
            Some(Value::Object(_)) | None => {}
            Some(other) => self.out.push(FieldError::type_invalid(
                &child_path(path, "metadata"),
                json::type_name(other),
                "object",
            )),
        }
    }

    fn junctors(&mut self, node: &Node, value: &Value, path: &str, root: bool) {
        for sub in &node.all_of {
            self.node(sub, value, path, root);
        }
        let passes = |sub: &Node| {
            let mut errs = Vec::new();
            Validator { out: &mut errs }.node(sub, value, path, root);
            errs.is_empty()
        };
        let shown = || quote(json::type_name(value));
        if !node.any_of.is_empty() && !node.any_of.iter().any(passes) {
            let detail = format!(
                "{} must validate at least one schema (anyOf)",
                in_body(path)
            );
            self.out.push(FieldError::invalid(path, &shown(), &detail));
        }
        if !node.one_of.is_empty() && node.one_of.iter().filter(|s| passes(s)).count() != 1 {
            let detail = format!(
                "{} must validate one and only one schema (oneOf)",
                in_body(path)
            );
            self.out.push(FieldError::invalid(path, &shown(), &detail));
        }
        if node.not.as_deref().is_some_and(passes) {
            let detail = format!("{} must not validate the schema (not)", in_body(path));
            self.out.push(FieldError::invalid(path, &shown(), &detail));
        }
    }
}

/// The expected type if `value` does not have the node's type (`null` counts as a mismatch when typed).
fn type_mismatch(node: &Node, value: &Value) -> Option<String> {
    if node.int_or_string {
        let ok = value.is_string() || matches!(value, Value::Number(n) if json::is_integer(n));
        return (!ok).then(|| "integer or string".to_string());
    }
    let expected = node.json_type?;
    use super::node::JsonType as T;
    let ok = match expected {
        T::Object => value.is_object(),
        T::Array => value.is_array(),
        T::String => value.is_string(),
        T::Boolean => value.is_boolean(),
        T::Number => value.is_number(),
        T::Integer => matches!(value, Value::Number(n) if json::is_integer(n)),
    };
    (!ok).then(|| expected.as_str().to_string())
}
