//! CRD `x-kubernetes-validations` (CEL validation rules) for custom resources.
//!
//! This module owns everything between a CRD version's raw `openAPIV3Schema`
//! and the list of `StatusCause`-shaped failures returned for one custom
//! resource write:
//!
//! * [`CelValidator::compile`] walks the schema once (per CRD version), compiles
//!   every rule with the `cel` crate and keeps a compact schema tree that tells
//!   where rules live and how JSON maps to CEL values there;
//! * [`CelValidator::validate`] walks the object (and, on update, the
//!   correlated old object) and evaluates the rules the way kube-apiserver
//!   does: per list item / map value, skipping absent and null values,
//!   skipping transition rules without a correlated old value, and rendering
//!   failures as kube-apiserver renders them.
//!
//! Message formats follow kube-apiserver up to 1.31 (`Invalid value:
//! "<schema type>": <message>`; newer releases print the scalar value or omit
//! it for objects). Rules that fail to evaluate give
//! `Invalid value: "<type>": <error> evaluating rule: <message or rule>` on the
//! node's path, as kube-apiserver does. A panic inside the `cel` crate is
//! caught and reported as such an error instead of unwinding into the server.
//!
//! Known differences from kube-apiserver (the `cel` crate has no type checker
//! and no cost model):
//! * no static type checking: a rule referencing an undeclared field compiles
//!   and fails at run time with `no such key`; a rule that does not return a
//!   bool is only detected at run time;
//! * no cost estimation or runtime cost budget;
//! * strings with `format: date-time`/`date`/`duration`/`byte` stay strings
//!   (Kubernetes exposes them as timestamp/duration/bytes);
//! * `x-kubernetes-list-type: set`/`map` lists compare order-sensitively;
//! * no validation ratcheting (kube-apiserver >= 1.30 downgrades failures of
//!   non-transition rules on unchanged values to warnings);
//! * `allOf`/`anyOf`/`oneOf`/`not` subschemas are not searched for rules.

mod convert;
mod eval;
mod schema;
#[cfg(test)]
mod tests;

use std::fmt;

pub(crate) use crate::golang::go_quote;
use std::sync::Arc;

/// Compiled CEL rules of a whole openAPIV3Schema.
#[derive(Clone)]
pub struct CelValidator {
    inner: Arc<schema::Compiled>,
}

impl fmt::Debug for CelValidator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CelValidator")
            .field("rules", &self.inner.rule_count)
            .finish_non_exhaustive()
    }
}

impl CelValidator {
    /// Walks the raw schema JSON (openAPIV3Schema of one CRD version) and compiles every
    /// `x-kubernetes-validations` entry it finds (under properties, additionalProperties and
    /// items; allOf/anyOf/oneOf/not subschemas are not walked for rules).
    /// Returns Ok(None) when the schema has no rules at all (the common case: zero cost).
    /// Errors list every bad rule as
    /// `<schema path>.x-kubernetes-validations[i].rule: Invalid value: ...: compilation failed: <detail>`
    /// where schema path looks like `openAPIV3Schema.properties[spec].properties[size]`.
    pub fn compile(schema: &serde_json::Value) -> Result<Option<CelValidator>, Vec<String>> {
        Ok(schema::compile(schema)?.map(|compiled| CelValidator {
            inner: Arc::new(compiled),
        }))
    }

    /// Evaluates all rules against `new` (the whole object after defaulting/pruning) and, for an
    /// update, `old` (the stored object). Returns every failure.
    pub fn validate(
        &self,
        new: &serde_json::Value,
        old: Option<&serde_json::Value>,
    ) -> Vec<CelError> {
        eval::validate(&self.inner, new, old)
    }

    /// Number of compiled rules in the schema.
    pub fn rule_count(&self) -> usize {
        self.inner.rule_count
    }
}

/// One failed rule, shaped like a Kubernetes StatusCause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CelError {
    /// Cause reason, from the rule's `reason` (FieldValueInvalid by default).
    pub reason: CelReason,
    /// Field path, e.g. `spec.size`; `<nil>` for the resource root, as kube-apiserver reports it.
    pub field: String,
    /// Cause message, e.g. `Invalid value: "object": must be positive`.
    pub message: String,
}

impl fmt::Display for CelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// The `reason` of a validation rule, i.e. the StatusCause type it produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CelReason {
    /// `FieldValueInvalid`: rendered `Invalid value: "<type>": <message>`.
    #[default]
    FieldValueInvalid,
    /// `FieldValueForbidden`: rendered `Forbidden: <message>`.
    FieldValueForbidden,
    /// `FieldValueRequired`: rendered `Required value: <message>`.
    FieldValueRequired,
    /// `FieldValueDuplicate`: rendered `Duplicate value: "<type>"` (Kubernetes drops the message).
    FieldValueDuplicate,
}

impl CelReason {
    /// The wire name, e.g. `FieldValueInvalid`.
    pub fn as_str(self) -> &'static str {
        match self {
            CelReason::FieldValueInvalid => "FieldValueInvalid",
            CelReason::FieldValueForbidden => "FieldValueForbidden",
            CelReason::FieldValueRequired => "FieldValueRequired",
            CelReason::FieldValueDuplicate => "FieldValueDuplicate",
        }
    }

    /// Parses a rule's `reason` field; `None` for an unsupported value.
    pub fn parse(s: &str) -> Option<CelReason> {
        match s {
            "FieldValueInvalid" => Some(CelReason::FieldValueInvalid),
            "FieldValueForbidden" => Some(CelReason::FieldValueForbidden),
            "FieldValueRequired" => Some(CelReason::FieldValueRequired),
            "FieldValueDuplicate" => Some(CelReason::FieldValueDuplicate),
            _ => None,
        }
    }
}

impl fmt::Display for CelReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

