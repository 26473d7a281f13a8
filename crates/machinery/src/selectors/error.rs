//! The single error type returned by every selector constructor.

use thiserror::Error;

/// Why a selector was rejected; the text is meant to be returned verbatim to API clients.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SelectorError {
    /// A `labelSelector` string, or a label requirement built in code, is malformed or invalid.
    #[error("{0}")]
    InvalidLabelSelector(String),
    /// A structured `{matchLabels, matchExpressions}` selector is malformed or invalid.
    #[error("{0}")]
    InvalidStructuredSelector(String),
    /// A `fieldSelector` string is malformed.
    #[error("{0}")]
    InvalidFieldSelector(String),
    /// A field selector names a field that the resource cannot be filtered by.
    #[error("field label not supported: {0}")]
    UnsupportedField(String),
}

impl SelectorError {
    /// The user-facing message, identical to the `Display` output.
    pub fn message(&self) -> String {
        self.to_string()
    }
}
