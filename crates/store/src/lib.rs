//! The bottom layer of oxplane: a durable, revisioned key-value store with etcd's semantics.
//!
//! Every object of the API lives here under a string key. The store owns:
//! - one global, gap-free revision counter: every committed write takes the next revision;
//! - per-key `create_revision` and `mod_revision`;
//! - compare-and-swap writes (create-if-absent, update/delete-if-mod-revision-is);
//! - consistent snapshot reads, optionally at a past revision, with pagination;
//! - watches that replay every change after a revision, in order, with no gap and no duplicate;
//! - compaction of superseded history, manual and automatic.
//!
//! Backends: [`sqlite::SqliteStore`] (durable, the embedded default), [`etcd::EtcdStore`]
//! (an etcd v3 cluster, shared by several processes) and [`memory::MemoryStore`] (for unit
//! tests of the layers above and demos). [`conformance`] is the test
//! suite every backend must pass.

pub mod compaction;
pub mod conformance;
mod continuation;
mod error;
pub mod etcd;
mod lock;
pub mod memory;
pub mod sqlite;
mod types;
mod watch;

pub use compaction::CompactionPolicy;
pub use error::{StoreError, StoreResult};
pub use lock::{DirLock, create_private_dir};
pub use types::{
    Event, GetResponse, KeyValue, RangeRequest, RangeResponse, Revision, Write, WriteResult,
};
pub use watch::{EventTransform, Watcher};

use async_trait::async_trait;

/// The storage contract every layer above relies on; see the crate docs for the semantics.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Reads one key at the latest revision.
    async fn get(&self, key: &str) -> StoreResult<GetResponse>;

    /// Reads every live key under a prefix, in key order, from one consistent snapshot.
    async fn range(&self, request: RangeRequest) -> StoreResult<RangeResponse>;

    /// Applies one conditional write; a failed condition is [`WriteResult::Rejected`], not an error.
    async fn write(&self, write: Write) -> StoreResult<WriteResult>;

    /// Streams every change under `prefix` with a revision greater than `after`.
    ///
    /// Fails with [`StoreError::Compacted`] when `after` is older than the compacted revision.
    async fn watch(&self, prefix: &str, after: Revision) -> StoreResult<Watcher>;

    /// Frees every version superseded at or before `revision`; reads and watches older than
    /// the new compacted revision then fail with [`StoreError::Compacted`]. A backend may stop
    /// short of `revision` to keep an event a watch still needs (etcd never compacts onto a
    /// delete); [`Store::compacted_revision`] says where it got to. Compacting to an already
    /// compacted revision does nothing.
    async fn compact(&self, revision: Revision) -> StoreResult<()>;

    /// The revision of the newest committed write (0 for an empty store).
    async fn current_revision(&self) -> StoreResult<Revision>;

    /// The oldest revision still readable and watchable from (0 if never compacted).
    async fn compacted_revision(&self) -> StoreResult<Revision>;
}
