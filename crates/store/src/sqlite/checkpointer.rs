//! WAL checkpoints on their own thread and connection.
//!
//! SQLite normally checkpoints inside the commit that crosses the WAL size threshold, which
//! stalls that commit (and, with group commit, every write queued behind it) while the main
//! file is written and fsync'd. The writer turns automatic checkpoints off; this thread runs
//! passive checkpoints, which never block the writer, whenever enough commits have piled up.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

/// Commits between checkpoints.
const COMMITS_PER_CHECKPOINT: u64 = 500;
/// How often the thread looks.
const POLL: Duration = Duration::from_millis(50);

/// Counts commits (bumped by the writer) and stops the thread.
#[derive(Default)]
pub(crate) struct CheckpointSignal {
    pub commits: AtomicU64,
    pub stop: AtomicBool,
}

/// Starts the checkpoint thread for the database at `path`.
pub(crate) fn spawn(path: PathBuf, signal: Arc<CheckpointSignal>) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name("oxplane-store-checkpoint".into()).spawn(move || {
        let conn = match Connection::open_with_flags(&path, OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX) {
            Ok(conn) => conn,
            Err(error) => {
                tracing::warn!(%error, "cannot open the checkpoint connection; the WAL is checkpointed at close only");
                return;
            }
        };
        let mut checkpointed = 0;
        let mut idle_polls = 0u32;
        while !signal.stop.load(Ordering::Acquire) {
            std::thread::sleep(POLL);
            let commits = signal.commits.load(Ordering::Acquire);
            idle_polls += 1;
            // Checkpoint after a burst of commits, or after a quiet second with any pending.
            let due = commits >= checkpointed + COMMITS_PER_CHECKPOINT || (commits > checkpointed && idle_polls >= 20);
            if due {
                if let Err(error) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
                    tracing::debug!(%error, "passive checkpoint failed; will retry");
                } else {
                    checkpointed = commits;
                }
                idle_polls = 0;
            }
        }
    })
}
