//! The SQLite backend: the embedded default. One file in the data directory, WAL mode, every
//! acknowledged write fsync'd, concurrent writes group-committed. See [`schema`] for the format.

mod checkpointer;
pub mod schema;
mod reader;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Instant;

use async_trait::async_trait;
use rusqlite::{Connection, OpenFlags};
use tokio::sync::oneshot;

use self::reader::{Readers, Snapshot};
use self::schema::classify;
use self::writer::{Request, Revisions, Writer};
use crate::compaction::RevisionClock;
use crate::watch::{self, Hub};
use crate::{
    CompactionPolicy, DirLock, GetResponse, RangeRequest, RangeResponse, Revision, Store, StoreError,
    StoreResult, Watcher, Write, WriteResult,
};

/// How the SQLite backend is opened.
#[derive(Clone, Debug)]
pub struct SqliteOptions {
    /// Automatic compaction.
    pub compaction: CompactionPolicy,
    /// Fsync every commit (the default). Turning it off is for tests that do not test
    /// durability: a crash may then lose acknowledged writes.
    pub fsync: bool,
    /// Run SQLite's integrity check when opening an existing store.
    pub integrity_check: bool,
    /// The most writes one group commit takes.
    pub max_batch: usize,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            compaction: CompactionPolicy::default(),
            fsync: true,
            integrity_check: true,
            max_batch: 1024,
        }
    }
}

/// The durable store. Cloning shares the same store; it closes when the last clone is dropped.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

struct Inner {
    requests: Option<mpsc::Sender<Request>>,
    writer: Option<JoinHandle<()>>,
    checkpoints: Arc<checkpointer::CheckpointSignal>,
    checkpointer: Option<JoinHandle<()>>,
    readers: Arc<Readers>,
    hub: Arc<Hub>,
    revisions: Arc<Revisions>,
    path: PathBuf,
    // Released last, after the writer has closed the database.
    _lock: DirLock,
}

impl SqliteStore {
    /// Opens (or creates) the store in the data directory `dir`, taking its lock.
    pub fn open(dir: &Path, options: SqliteOptions) -> StoreResult<SqliteStore> {
        let lock = DirLock::acquire(dir)?;
        let path = dir.join(schema::DB_FILE);
        schema::check_header(&path)?;
        schema::create_private(&path)?;
        let conn = Connection::open_with_flags(
            &path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| classify(e, &path))?;
        schema::prepare(&conn, &path, options.integrity_check, options.fsync)?;
        schema::narrow_modes(&path)?;
        // Make the database and WAL files' directory entries durable too.
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| StoreError::io(format!("syncing {}", dir.display()), e))?;

        let snapshot = Snapshot::read(&conn, &path)?;
        let compaction_done: i64 = conn
            .query_row("SELECT value FROM store_meta WHERE name = 'compaction_done'", [], |r| r.get(0))
            .map_err(|e| classify(e, &path))?;
        let revisions = Arc::new(Revisions::default());
        revisions.current.store(snapshot.current, Ordering::SeqCst);
        revisions.compacted.store(snapshot.compacted, Ordering::SeqCst);
        let hub = Arc::new(Hub::new(snapshot.current));
        let clock = RevisionClock::new(options.compaction.clone(), Instant::now(), snapshot.current);
        let checkpoints = Arc::new(checkpointer::CheckpointSignal::default());
        let writer = Writer::new(
            conn,
            checkpoints.clone(),
            path.clone(),
            hub.clone(),
            revisions.clone(),
            clock,
            options.max_batch.max(1),
            compaction_done as Revision,
        );
        let (tx, rx) = mpsc::channel();
        let handle = std::thread::Builder::new()
            .name("oxplane-store-writer".into())
            .spawn(move || writer.run(rx))
            .map_err(|e| StoreError::io("starting the store writer thread", e))?;
        let checkpointer = checkpointer::spawn(path.clone(), checkpoints.clone())
            .map_err(|e| StoreError::io("starting the store checkpoint thread", e))?;
        tracing::info!(path = %path.display(), revision = snapshot.current, "store opened");
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                requests: Some(tx),
                writer: Some(handle),
                checkpoints,
                checkpointer: Some(checkpointer),
                readers: Arc::new(Readers::new(&path)),
                hub,
                revisions,
                path,
                _lock: lock,
            }),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    fn send(&self, request: Request) -> StoreResult<()> {
        self.inner
            .requests
            .as_ref()
            .ok_or(StoreError::Closed)?
            .send(request)
            .map_err(|_| StoreError::Closed)
    }

    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Readers) -> StoreResult<T> + Send + 'static,
    ) -> StoreResult<T> {
        let readers = self.inner.readers.clone();
        tokio::task::spawn_blocking(move || f(&readers))
            .await
            .map_err(|e| StoreError::Backend(format!("reader task failed: {e}")))?
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Let the writer drain what is queued and close the database, then end all watches.
        self.requests.take();
        self.checkpoints.stop.store(true, Ordering::Release);
        if let Some(handle) = self.checkpointer.take() {
            let _ = handle.join();
        }
        if let Some(handle) = self.writer.take() {
            let _ = handle.join();
        }
        self.hub.close();
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn get(&self, key: &str) -> StoreResult<GetResponse> {
        let key = key.to_string();
        let (kv, revision) = self.read(move |r| r.get(&key)).await?;
        Ok(GetResponse { kv, revision })
    }

    async fn range(&self, request: RangeRequest) -> StoreResult<RangeResponse> {
        self.read(move |r| r.range(&request)).await
    }

    async fn write(&self, write: Write) -> StoreResult<WriteResult> {
        let (tx, rx) = oneshot::channel();
        self.send(Request::Write(write, tx))?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    async fn watch(&self, prefix: &str, after: Revision) -> StoreResult<Watcher> {
        watch::start(&self.inner.hub, self.inner.readers.clone(), prefix, after).await
    }

    async fn compact(&self, revision: Revision) -> StoreResult<()> {
        let (tx, rx) = oneshot::channel();
        self.send(Request::Compact(revision, tx))?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    async fn current_revision(&self) -> StoreResult<Revision> {
        Ok(self.inner.revisions.current.load(Ordering::SeqCst))
    }

    async fn compacted_revision(&self) -> StoreResult<Revision> {
        Ok(self.inner.revisions.compacted.load(Ordering::SeqCst))
    }
}
