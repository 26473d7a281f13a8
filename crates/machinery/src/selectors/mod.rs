//! Kubernetes label and field selectors, as kube-apiserver parses and evaluates them.
//!
//! This module owns the `labelSelector` and `fieldSelector` query-parameter languages, the
//! structured `{matchLabels, matchExpressions}` selector embedded in objects, their validation
//! and error wording, their canonical string form, and their evaluation against objects. It
//! knows nothing about resources: which fields a resource supports is decided by the caller.

mod error;
mod field;
mod label;
mod label_parser;
mod validation;

#[cfg(test)]
mod label_tests;
#[cfg(test)]
mod proptests;

pub use error::SelectorError;
pub use field::{
    FieldOperator, FieldRequirement, FieldSelector, escape_value, field_value, unescape_value,
};
pub use label::{LabelOperator, LabelRequirement, LabelSelector};
pub use validation::{label_key_problems, label_value_problems};
