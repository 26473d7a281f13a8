//! Server-side apply (SSA) field-ownership engine.
//!
//! Owns everything about `metadata.managedFields`: the field-path model and FieldsV1 codec
//! ([`FieldSet`]), type information that decides how nodes merge ([`TypeNode`]), deriving the
//! fields a value sets ([`field_set_of`]), merging an applied configuration into the live
//! object with conflict detection and removal of dropped fields ([`apply`]), ownership
//! bookkeeping for every other write ([`update`]), and the 409 conflict message
//! ([`conflict_status_message`]). It does not own server-written metadata (name, uid,
//! resourceVersion, ...), persistence, or writing `managedFields` back into the object.
//!
//! Model decisions:
//! - Paths render as `.spec.replicas`, `.spec.containers[name="nginx"].image` (list-map item),
//!   `.metadata.finalizers[="a"]` (set item), `[3]` (index).
//! - Without type information objects are granular maps and lists atomic. A list declared
//!   `map` that is malformed in stored data (item without a key field, duplicate keys) is
//!   treated as atomic; in an applied configuration it is rejected
//!   ([`ApplyError::InvalidListMapItem`], [`ApplyError::DuplicateListMapKey`]) because key
//!   defaults are not known here — callers should default key fields first.
//! - `null` is an ordinary scalar value (it does not delete a field).
//! - Ownership covers only nodes present in the object ([`present_set_of`]): besides the
//!   leaves and items of [`field_set_of`], a `.` member on an existing container.
//! - Entries are keyed by (manager, operation, subresource); the API version is updated, not
//!   part of the key. No limit on the number of Update entries is enforced.

mod conflict;
mod extract;
mod fieldset;
mod managed;
mod merge;
mod ops;
mod path;
mod types;

#[cfg(test)]
mod tests;

pub use conflict::{Conflict, Conflicts, conflict_status_message};
pub use extract::{field_set_of, field_set_of_scoped, present_set_of};
pub use fieldset::FieldSet;
pub use managed::{ManagedFieldsEntry, Operation, managed_fields_to_json, parse_managed_fields};
pub use ops::{Applied, apply, update};
pub use path::{Path, PathElement, canonical_json, lookup, path_string};
pub use types::{ListType, MapType, TypeNode, Untyped};

/// Which part of an object a write may touch and own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// A main-resource write to a kind with a status subresource: never touches or owns `status`.
    Main,
    /// A write through the `status` subresource: touches and owns only `status`.
    Status,
    /// A kind without a status subresource: the whole object.
    WholeObject,
}

impl Scope {
    /// The managedFields `subresource` recorded for writes in this scope.
    pub fn subresource(self) -> Option<&'static str> {
        match self {
            Scope::Status => Some("status"),
            Scope::Main | Scope::WholeObject => None,
        }
    }

    /// Whether a root-level field is inside this scope.
    pub(crate) fn tracks(self, root_field: &str) -> bool {
        match self {
            Scope::Main => root_field != "status",
            Scope::Status => root_field == "status",
            Scope::WholeObject => true,
        }
    }
}

/// Errors of the apply engine. [`ApplyError::Conflicts`] maps to HTTP 409; malformed
/// `managedFields` to 400/422; the remaining variants describe an invalid request (422).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    /// The apply would change fields other managers own.
    #[error("{0}")]
    Conflicts(Conflicts),
    /// `metadata.managedFields` (or an entry of it) is malformed.
    #[error("invalid managedFields: {0}")]
    InvalidManagedFields(String),
    /// A FieldsV1 value is malformed.
    #[error("invalid fieldsV1: {0}")]
    InvalidFieldsV1(String),
    /// A list-map item is not an object or lacks a key field.
    #[error("{path}: list item must be an object holding every key field")]
    InvalidListMapItem {
        /// The item, e.g. `.spec.containers[1]`.
        path: String,
    },
    /// Two list-map items share a key.
    #[error("{path}: duplicate entries for key")]
    DuplicateListMapKey {
        /// The duplicated item, e.g. `.spec.containers[name="a"]`.
        path: String,
    },
    /// A set list repeats a value.
    #[error("{path}: duplicate entries in set")]
    DuplicateSetItem {
        /// The duplicated item, e.g. `.metadata.finalizers[="a"]`.
        path: String,
    },
    /// A value that must be a JSON object is not.
    #[error("{what} must be a JSON object")]
    NotAnObject {
        /// What was wrong.
        what: String,
    },
    /// A schema given to the engine is malformed.
    #[error("invalid schema: {0}")]
    InvalidSchema(String),
}

impl From<Conflicts> for ApplyError {
    fn from(c: Conflicts) -> Self {
        ApplyError::Conflicts(c)
    }
}
