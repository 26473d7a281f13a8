//! The store's error type. Expected outcomes (a failed compare) are not errors: see
//! [`crate::WriteResult::Rejected`].

use std::path::PathBuf;

use crate::Revision;

/// Shorthand for results of store operations.
pub type StoreResult<T> = Result<T, StoreError>;

/// Everything that can go wrong in the store, each with what the user can do about it.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The requested revision was compacted away.
    #[error("revision {requested} has been compacted; the oldest available revision is {compacted}")]
    Compacted {
        /// The revision that was asked for.
        requested: Revision,
        /// The oldest revision still available.
        compacted: Revision,
    },
    /// The requested revision has not been written yet.
    #[error("revision {requested} is in the future; the current revision is {current}")]
    FutureRevision {
        /// The revision that was asked for.
        requested: Revision,
        /// The newest committed revision.
        current: Revision,
    },
    /// A continue token could not be decoded or does not belong to this read.
    #[error("invalid continue token: {0}")]
    InvalidContinue(String),
    /// Another process holds the data directory.
    #[error(
        "data directory {path} is in use by another oxplane process{holder}; stop it or choose another --data-dir",
        holder = holder.as_ref().map(|p| format!(" (pid {p})")).unwrap_or_default()
    )]
    Locked {
        /// The directory.
        path: PathBuf,
        /// The pid written by the holder, if readable.
        holder: Option<String>,
    },
    /// The database file exists but is not an oxplane store; it is left untouched.
    #[error("{path} is not an oxplane store ({reason}); refusing to open or modify it")]
    Foreign {
        /// The file.
        path: PathBuf,
        /// What was found instead.
        reason: String,
    },
    /// The database file is damaged; it is left untouched.
    #[error("{path} is corrupt ({reason}); restore it from a backup or move it aside")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What the integrity check reported.
        reason: String,
    },
    /// The disk is full: the write was not applied; everything acknowledged before is intact.
    #[error("disk full: the write was not applied ({0}); free space and retry")]
    DiskFull(String),
    /// The store's server (etcd) cannot be reached or did not answer in time; nothing is
    /// known to have been written. Retrying later may succeed.
    #[error("etcd at {endpoints} is unavailable: {cause}")]
    Unavailable {
        /// The endpoints tried.
        endpoints: String,
        /// What failed.
        cause: String,
    },
    /// The store has been closed.
    #[error("the store is closed")]
    Closed,
    /// Any other failure of the underlying storage engine.
    #[error("storage engine error: {0}")]
    Backend(String),
    /// A file-system operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl StoreError {
    /// Wraps an I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        StoreError::Io { context: context.into(), source }
    }
}
