//! CRD structural-schema engine: what kube-apiserver does with a
//! CustomResourceDefinition version's `schema.openAPIV3Schema` when a custom
//! resource is created or updated.
//!
//! The pipeline the server runs on every write is, in this order:
//! 1. [`Schema::default`] fills in `default` values (and drops `null`s of
//!    non-nullable fields, as Kubernetes does before defaulting),
//! 2. [`Schema::prune`] removes fields the schema does not specify and returns
//!    their paths (for `fieldValidation=Strict` / `Warn`),
//! 3. [`Schema::validate`] checks the result and returns Kubernetes-style
//!    field errors.
//!
//! Defaulting must come first so that defaults can satisfy `required`, and
//! pruning before validation so that unknown fields are reported as pruned
//! (or strict-mode errors) rather than as validation failures.
//!
//! Besides that, [`validate_structural`] tells whether a CRD schema is
//! structural (the server must refuse non-structural ones), and
//! [`duplicate_fields`] finds duplicated JSON keys for strict decoding,
//! because `serde_json::Value` silently keeps the last duplicate.
//!
//! Files: `node.rs` compiles schema JSON into [`Node`]s; `default.rs`,
//! `prune.rs` and `validate.rs` walk objects against nodes; `formats.rs`
//! checks string formats; `json.rs` holds JSON helpers (depth, equality,
//! rendering); `structural.rs` checks CRD schemas; `strict_json.rs` finds
//! duplicate keys.

pub mod cel_rules;
mod default;
mod formats;
pub(crate) mod json;
mod node;
mod prune;
mod strict_json;
mod structural;
mod validate;

#[cfg(test)]
mod tests;

use serde_json::Value;

pub use node::{JsonType, ListType, MapType, Node};
pub use strict_json::duplicate_fields;
pub use structural::validate_structural;
pub use validate::{FieldError, Reason};

/// Maximum nesting depth accepted in schemas and objects (matches serde_json's parser limit).
pub const MAX_DEPTH: usize = 128;

/// Why a CRD schema could not be compiled; messages are shown to API users.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// A place that must hold a schema holds something other than a JSON object.
    #[error("{path}: Invalid value: must be a JSON object describing a schema")]
    NotAnObject {
        /// Schema path, e.g. `openAPIV3Schema.properties[spec]`.
        path: String,
    },
    /// A keyword's value has the wrong JSON type or an unusable value.
    #[error("{path}.{keyword}: Invalid value: {message}")]
    InvalidKeyword {
        /// Schema path of the node holding the keyword.
        path: String,
        /// The offending keyword.
        keyword: String,
        /// What is wrong with it.
        message: String,
    },
    /// A `pattern` is not a valid regular expression.
    #[error(
        "{path}.pattern: Invalid value: {pattern:?}: not a valid regular expression: {message}"
    )]
    InvalidPattern {
        /// Schema path of the node holding the pattern.
        path: String,
        /// The pattern as written.
        pattern: String,
        /// The regex engine's complaint.
        message: String,
    },
    /// A keyword that CRD schemas may not use (e.g. `$ref`).
    #[error(
        "{path}.{keyword}: Forbidden: {keyword} is not supported in CustomResourceDefinition schemas"
    )]
    Unsupported {
        /// Schema path of the node holding the keyword.
        path: String,
        /// The unsupported keyword.
        keyword: String,
    },
    /// `x-kubernetes-validations` rules that do not compile (one message per rule).
    #[error("{}", .0.join(", "))]
    Cel(Vec<String>),
    /// Schema or value nesting deeper than [`MAX_DEPTH`].
    #[error("{path}: Invalid value: nesting exceeds the maximum depth of {max}")]
    TooDeep {
        /// Where the limit was crossed.
        path: String,
        /// The limit ([`MAX_DEPTH`]).
        max: usize,
    },
}

/// A compiled `openAPIV3Schema`, ready to default, prune and validate custom resources.
#[derive(Debug, Clone)]
pub struct Schema {
    root: Node,
    /// The CEL rules, when the schema has any.
    cel: Option<cel_rules::CelValidator>,
}

/// kube-apiserver's cause (field `<nil>`) when keyword errors kept the CEL rules from running.
pub const RULES_NOT_CHECKED: &str =
    "Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation";

/// Path prefix used in schema-level messages, so the server can prepend `spec.versions[i].schema.`.
pub(crate) const SCHEMA_ROOT: &str = "openAPIV3Schema";

impl Schema {
    /// Compiles a schema (regexes included, once); fails on malformed keywords or excessive depth.
    pub fn compile(schema: &Value) -> Result<Schema, SchemaError> {
        let root = Node::compile(schema, SCHEMA_ROOT, 1)?;
        let cel = cel_rules::CelValidator::compile(schema).map_err(SchemaError::Cel)?;
        Ok(Schema { root, cel })
    }

    /// Compiles only the node tree (no CEL rules): for server-side apply's list and map semantics.
    pub fn compile_structure(schema: &Value) -> Result<Node, SchemaError> {
        Node::compile(schema, SCHEMA_ROOT, 1)
    }

    /// The root node of the schema.
    pub fn root(&self) -> &Node {
        &self.root
    }

    /// Applies `default` values in place (see `default.rs` for the exact rules).
    pub fn default(&self, object: &mut Value) {
        default::default_root(&self.root, object);
    }

    /// Removes fields not specified by the schema; returns their paths like `.spec.items[0].bar`, sorted.
    pub fn prune(&self, object: &mut Value) -> Vec<String> {
        prune::prune_root(&self.root, object)
    }

    /// Validates an object (normally after defaulting and pruning) and returns every field error.
    pub fn validate(&self, object: &Value) -> Vec<FieldError> {
        self.validate_update(object, None)
    }

    /// Validates an object against the schema's keywords only, without its CEL rules (offline
    /// validation reports the two apart).
    pub fn validate_keywords(&self, object: &Value) -> Vec<FieldError> {
        validate::validate_root(&self.root, object)
    }

    /// Runs only the schema's CEL rules (none: no errors); `old` as in [`Schema::validate_update`].
    pub fn validate_rules(&self, object: &Value, old: Option<&Value>) -> Vec<cel_rules::CelError> {
        self.cel.as_ref().map(|cel| cel.validate(object, old)).unwrap_or_default()
    }

    /// Validates an object against its keywords and then, as kube-apiserver does, runs its CEL
    /// rules unless a keyword error blocks them (a wrong type, a missing required field, a value
    /// outside the `enum`, or over `maxLength`, `maxItems` or `maxProperties`: the rules could
    /// not be evaluated on such an object). Blocked rules are reported by one cause without a
    /// field, kube-apiserver's words; other keyword errors (a pattern, a minimum, ...) come
    /// with the rules' own errors. `old` is the stored object for an update (transition rules
    /// need it).
    pub fn validate_update(&self, object: &Value, old: Option<&Value>) -> Vec<FieldError> {
        let mut errors = validate::validate_root(&self.root, object);
        let Some(cel) = &self.cel else { return errors };
        if errors.iter().any(|e| e.reason.blocks_rules()) {
            errors.push(FieldError { reason: Reason::FieldValueInvalid, field: "<nil>".to_string(), message: RULES_NOT_CHECKED.to_string() });
            return errors;
        }
        errors.extend(cel.validate(object, old).into_iter().map(|e| FieldError {
                reason: match e.reason {
                    cel_rules::CelReason::FieldValueInvalid => Reason::FieldValueInvalid,
                    cel_rules::CelReason::FieldValueForbidden => Reason::FieldValueForbidden,
                    cel_rules::CelReason::FieldValueRequired => Reason::FieldValueRequired,
                    cel_rules::CelReason::FieldValueDuplicate => Reason::FieldValueDuplicate,
                },
            field: e.field,
            message: e.message,
        }));
        errors
    }

    /// The node at a field path such as `spec.conditions`, `spec.items[0].name` or `spec.labels[key]`.
    ///
    /// Brackets step into array items or `additionalProperties` values; a leading
    /// `.` (pruning's path form) is accepted. `""` is the root.
    pub fn node_at(&self, path: &str) -> Option<&Node> {
        let mut node = &self.root;
        for seg in parse_path(path) {
            node = step(node, &seg)?;
        }
        Some(node)
    }

    /// The `x-kubernetes-list-type` at a field path, if any (server-side apply merges lists by it).
    pub fn list_type_at(&self, path: &str) -> Option<ListType> {
        self.node_at(path).and_then(Node::list_type)
    }

    /// The `x-kubernetes-list-map-keys` at a field path (empty if none).
    pub fn list_map_keys_at(&self, path: &str) -> &[String] {
        self.node_at(path).map(Node::list_map_keys).unwrap_or(&[])
    }

    /// The `x-kubernetes-map-type` at a field path, if any.
    pub fn map_type_at(&self, path: &str) -> Option<MapType> {
        self.node_at(path).and_then(Node::map_type)
    }

    /// Whether the value at a field path is kept whole by pruning.
    ///
    /// True when the node there has `x-kubernetes-preserve-unknown-fields`, or when
    /// the path leaves the schema below a node that keeps unknown fields (anything
    /// under an unknown-but-preserved field is preserved too).
    pub fn preserves_unknown_fields_at(&self, path: &str) -> bool {
        let mut node = &self.root;
        for seg in parse_path(path) {
            match step(node, &seg) {
                Some(next) => node = next,
                None => return node.keeps_unknown_fields(),
            }
        }
        node.preserves_unknown_fields()
    }
}

/// Checks that a value nests no deeper than [`MAX_DEPTH`]; the server can call it before anything else.
pub fn check_depth(value: &Value) -> Result<(), SchemaError> {
    if json::depth_exceeds(value, MAX_DEPTH) {
        Err(SchemaError::TooDeep {
            path: "body".to_string(),
            max: MAX_DEPTH,
        })
    } else {
        Ok(())
    }
}

/// One step of a field path: a dotted name or a bracketed index/key.
enum Segment<'a> {
    Name(&'a str),
    Bracket(&'a str),
}

/// Splits `a.b[0].c[key]` into segments; tolerant of a leading dot and of any bracket content.
fn parse_path(path: &str) -> Vec<Segment<'_>> {
    let mut out = Vec::new();
    let mut rest = path.strip_prefix('.').unwrap_or(path);
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']').unwrap_or(after.len());
            out.push(Segment::Bracket(&after[..end]));
            rest = after.get(end + 1..).unwrap_or("");
        } else {
            let end = rest.find(['.', '[']).unwrap_or(rest.len());
            if end > 0 {
                out.push(Segment::Name(&rest[..end]));
            }
            rest = &rest[end..];
        }
        rest = rest.strip_prefix('.').unwrap_or(rest);
    }
    out
}

/// Resolves one path segment against a node.
fn step<'n>(node: &'n Node, seg: &Segment<'_>) -> Option<&'n Node> {
    match seg {
        Segment::Name(name) => node.child(name),
        Segment::Bracket(key) => node.items().or_else(|| node.child(key)),
    }
}
