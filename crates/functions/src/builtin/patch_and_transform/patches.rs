//! Applying one patch: read the source (one field path, or several combined with a Go format
//! string), run the transforms, and write the result at `toFieldPath` under the merge policy,
//! into every match when the path has `[*]` wildcards.
//!
//! Which objects are source and destination is the caller's business ([`super::engine`]):
//! Crossplane always patches from observed state to desired state.

use serde_json::{Map, Value};

use super::compile::{Patch, Source};
use super::transforms::{TransformError, resolve_all};
use crate::fieldpath::{FieldPath, FieldPathError, expand_wildcards};
use crate::golang::fmt::sprintf;
use crate::golang::value::{as_float64, as_kubernetes};

/// Why a patch was not applied.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PatchError {
    /// A source field path does not exist (skipped, unless the policy says `Required`).
    #[error("{0}")]
    NotFound(FieldPathError),
    /// A source field path is malformed or crosses a value of the wrong type.
    #[error("{0}")]
    Source(FieldPathError),
    /// A transform failed.
    #[error("{0}")]
    Transform(#[from] TransformError),
    /// The value could not be written.
    #[error("cannot patch to object: {0}")]
    Destination(FieldPathError),
    /// A `toFieldPath` with wildcards matched nothing.
    #[error("cannot expand ToFieldPath {0}")]
    NoExpansion(String),
}

impl PatchError {
    /// Whether the patch failed only because its source does not exist (yet).
    pub(crate) fn is_not_found(&self) -> bool {
        matches!(self, PatchError::NotFound(_))
    }
}

/// Reads a source value as a function sees it: every number a float64. A missing object
/// (null) reads as an empty one.
pub(crate) fn read(from: &Value, path: &str) -> Result<Value, PatchError> {
    let path = FieldPath::parse(path).map_err(PatchError::Source)?;
    let empty = Value::Object(Map::new());
    let from = if from.is_null() { &empty } else { from };
    match path.get(from) {
        Ok(v) => Ok(as_float64(v.clone())),
        Err(e) if e.is_not_found() => Err(PatchError::NotFound(e)),
        Err(e) => Err(PatchError::Source(e)),
    }
}

/// Applies `patch` from `from` to `to`.
pub(crate) fn apply(patch: &Patch, from: &Value, to: &mut Value) -> Result<(), PatchError> {
    let value = match &patch.source {
        Source::Field(path) => read(from, path)?,
        Source::Combine { variables, format } => {
            // Every variable must exist: a format expecting three values must not get two.
            let args = variables.iter().map(|v| read(from, v)).collect::<Result<Vec<_>, _>>()?;
            Value::String(sprintf(format, &args))
        }
    };
    let value = as_kubernetes(resolve_all(&patch.transforms, value)?);
    write(to, &patch.to, value, patch)
}

fn write(to: &mut Value, path: &str, value: Value, patch: &Patch) -> Result<(), PatchError> {
    let path = FieldPath::parse(path).map_err(PatchError::Destination)?;
    if to.is_null() {
        *to = Value::Object(Map::new());
    }
    if !path.has_wildcard() {
        return path.merge(to, value, patch.merge.as_ref()).map_err(PatchError::Destination);
    }
    let expanded = expand_wildcards(to, &path).map_err(PatchError::Destination)?;
    if expanded.is_empty() {
        return Err(PatchError::NoExpansion(path.to_string()));
    }
    for concrete in expanded {
        concrete.merge(to, value.clone(), patch.merge.as_ref()).map_err(PatchError::Destination)?;
    }
    Ok(())
}
