//! The single writer thread and its group commit.
//!
//! Every write goes through one thread that owns the read-write connection. It takes the first
//! queued write, then every other write that queued up meanwhile (while the previous commit
//! was being fsync'd), applies them all in one transaction and commits once: one fsync
//! acknowledges the whole batch. Revisions are assigned in queue order, so they stay gap-free:
//! if a commit fails, the batch is rolled back, every write in it gets the error, and the
//! revisions are reused by the next batch.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};
use tokio::sync::oneshot;

use super::checkpointer::CheckpointSignal;
use super::schema::classify;
use crate::compaction::RevisionClock;
use crate::watch::Hub;
use crate::{Event, KeyValue, Revision, StoreError, StoreResult, Write, WriteResult};

/// Revisions whose superseded rows one compaction step removes; keeps each step's transaction
/// short so writes are not held up behind a large compaction.
const COMPACTION_STEP: u64 = 5_000;

/// A request to the writer thread.
pub(crate) enum Request {
    /// Apply a conditional write.
    Write(Write, oneshot::Sender<StoreResult<WriteResult>>),
    /// Compact history up to a revision; answered when the superseded rows are gone.
    Compact(Revision, oneshot::Sender<StoreResult<()>>),
}

/// Revisions shared with the async side for cheap reads.
#[derive(Debug, Default)]
pub(crate) struct Revisions {
    pub current: AtomicU64,
    pub compacted: AtomicU64,
}

/// A compaction whose rows are still being removed.
struct PendingCompaction {
    target: Revision,
    /// Rows with revisions up to here are done.
    done: Revision,
    waiters: Vec<oneshot::Sender<StoreResult<()>>>,
}

pub(crate) struct Writer {
    pub conn: Connection,
    checkpoints: Arc<CheckpointSignal>,
    pub path: PathBuf,
    pub hub: Arc<Hub>,
    pub revisions: Arc<Revisions>,
    pub clock: RevisionClock,
    pub max_batch: usize,
    /// The revision the next committed write gets.
    next: Revision,
    pending: Option<PendingCompaction>,
}

impl Writer {
    // Every argument is a distinct piece the writer owns or shares; a struct would only rename them.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        conn: Connection,
        checkpoints: Arc<CheckpointSignal>,
        path: PathBuf,
        hub: Arc<Hub>,
        revisions: Arc<Revisions>,
        clock: RevisionClock,
        max_batch: usize,
        compaction_done: Revision,
    ) -> Self {
        let current = revisions.current.load(Ordering::SeqCst);
        let compacted = revisions.compacted.load(Ordering::SeqCst);
        // Finish a compaction that a crash interrupted.
        let pending = (compaction_done < compacted).then(|| PendingCompaction {
            target: compacted,
            done: compaction_done,
            waiters: Vec::new(),
        });
        Writer { conn, checkpoints, path, hub, revisions, clock, max_batch, next: current + 1, pending }
    }

    /// Serves requests until every sender is gone.
    pub(crate) fn run(mut self, requests: Receiver<Request>) {
        let mut deferred: Vec<Request> = Vec::new();
        loop {
            let first = match deferred.pop() {
                Some(request) => request,
                None if self.pending.is_some() => match requests.try_recv() {
                    Ok(request) => request,
                    Err(TryRecvError::Empty) => {
                        self.compaction_step();
                        continue;
                    }
                    Err(TryRecvError::Disconnected) => break,
                },
                None => match requests.recv_timeout(self.idle_wait()) {
                    Ok(request) => request,
                    Err(RecvTimeoutError::Timeout) => {
                        self.maybe_auto_compact();
                        continue;
                    }
                    Err(RecvTimeoutError::Disconnected) => break,
                },
            };
            match first {
                Request::Compact(target, reply) => self.start_compaction(target, reply),
                Request::Write(write, reply) => {
                    // Give writers that are about to submit (woken by the previous commit) a
                    // moment to join this batch: on a busy machine this lets one fsync serve
                    // many more writes, and costs an idle writer nothing measurable.
                    std::thread::yield_now();
                    let mut batch = vec![(write, reply)];
                    while batch.len() < self.max_batch {
                        match requests.try_recv() {
                            Ok(Request::Write(write, reply)) => batch.push((write, reply)),
                            Ok(compact @ Request::Compact(..)) => {
                                deferred.push(compact);
                                break;
                            }
                            Err(_) => break,
                        }
                    }
                    self.commit(batch);
                }
            }
            if self.pending.is_some() {
                self.compaction_step();
            }
            self.maybe_auto_compact();
        }
        // Closing: finish nothing half-way; a pending compaction resumes at the next open.
        if let Some(pending) = self.pending.take() {
            for waiter in pending.waiters {
                let _ = waiter.send(Err(StoreError::Closed));
            }
        }
    }

    fn idle_wait(&self) -> Duration {
        // Wake up now and then to run automatic compaction.
        Duration::from_secs(1)
    }

    fn commit(&mut self, batch: Vec<(Write, oneshot::Sender<StoreResult<WriteResult>>)>) {
        let started = std::time::Instant::now();
        let writes_in_batch = batch.len();
        self.commit_batch(batch);
        oxplane_metrics::global().store_commit(writes_in_batch, started.elapsed());
    }

    fn commit_batch(&mut self, batch: Vec<(Write, oneshot::Sender<StoreResult<WriteResult>>)>) {
        let first = self.next;
        let mut next = first;
        let (writes, replies): (Vec<Write>, Vec<_>) = batch.into_iter().unzip();
        let outcome = (|| -> rusqlite::Result<Vec<WriteResult>> {
            let tx = Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)?;
            let mut results = Vec::with_capacity(writes.len());
            for write in writes {
                results.push(apply(&tx, write, &mut next)?);
            }
            tx.commit()?;
            Ok(results)
        })();
        match outcome {
            Ok(results) => {
                self.checkpoints.commits.fetch_add(1, Ordering::Release);
                self.next = next;
                self.revisions.current.store(next - 1, Ordering::SeqCst);
                let events: Vec<Event> = results
                    .iter()
                    .filter_map(|r| match r {
                        WriteResult::Committed(event) => Some(event.clone()),
                        WriteResult::Rejected { .. } => None,
                    })
                    .collect();
                self.hub.publish(events);
                for (reply, result) in replies.into_iter().zip(results) {
                    let _ = reply.send(Ok(result));
                }
            }
            Err(error) => {
                // The transaction rolled back when it was dropped: nothing of the batch is
                // stored, and its revisions are free for the next batch.
                let error = classify(error, &self.path);
                tracing::warn!(%error, writes = replies.len(), "commit failed; batch rolled back");
                for reply in replies {
                    let _ = reply.send(Err(same_error(&error)));
                }
            }
        }
    }

    fn maybe_auto_compact(&mut self) {
        let now = Instant::now();
        if self.pending.is_some() || !self.clock.due(now) {
            return;
        }
        let current = self.revisions.current.load(Ordering::SeqCst);
        let compacted = self.revisions.compacted.load(Ordering::SeqCst);
        if let Some(target) = self.clock.check(now, current, compacted) {
            tracing::debug!(target, "automatic compaction");
            self.begin_compaction(target, None);
        }
    }

    fn start_compaction(&mut self, target: Revision, reply: oneshot::Sender<StoreResult<()>>) {
        let current = self.revisions.current.load(Ordering::SeqCst);
        let compacted = self.revisions.compacted.load(Ordering::SeqCst);
        if target > current {
            let _ = reply.send(Err(StoreError::FutureRevision { requested: target, current }));
        } else if target <= compacted {
            match &mut self.pending {
                // Already compacted logically; answer once its rows are gone.
                Some(pending) => pending.waiters.push(reply),
                None => {
                    let _ = reply.send(Ok(()));
                }
            }
        } else {
            self.begin_compaction(target, Some(reply));
        }
    }

    /// Records the new compacted revision (from then on older reads are refused), then removes
    /// the superseded rows step by step between write batches.
    fn begin_compaction(&mut self, target: Revision, reply: Option<oneshot::Sender<StoreResult<()>>>) {
        let result = self
            .conn
            .execute("UPDATE store_meta SET value = ?1 WHERE name = 'compacted_revision'", params![target as i64])
            .map_err(|e| classify(e, &self.path));
        match result {
            Ok(_) => {
                let done = match self.pending.take() {
                    Some(p) => {
                        let mut waiters = p.waiters;
                        waiters.extend(reply);
                        self.pending = Some(PendingCompaction { target, done: p.done, waiters });
                        return self.revisions.compacted.store(target, Ordering::SeqCst);
                    }
                    None => self.revisions.compacted.load(Ordering::SeqCst),
                };
                self.revisions.compacted.store(target, Ordering::SeqCst);
                self.pending = Some(PendingCompaction { target, done, waiters: reply.into_iter().collect() });
            }
            Err(error) => {
                tracing::warn!(%error, target, "compaction failed");
                if let Some(reply) = reply {
                    let _ = reply.send(Err(error));
                }
            }
        }
    }

    fn compaction_step(&mut self) {
        let Some(pending) = &mut self.pending else { return };
        let hi = (pending.done + COMPACTION_STEP).min(pending.target);
        let step = (|| -> rusqlite::Result<()> {
            let tx = Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)?;
            // Each row in the step supersedes the row it replaced (its prev_revision), and a
            // deletion row also supersedes itself: nothing at or before the target needs
            // either any more. Walking the superseding rows, rather than the superseded ones,
            // also frees rows that an earlier compaction had to keep.
            tx.prepare_cached(
                "DELETE FROM kv_log WHERE revision IN (
                   SELECT prev_revision FROM kv_log WHERE revision > ?1 AND revision <= ?2 AND prev_revision != 0
                   UNION ALL
                   SELECT revision FROM kv_log WHERE revision > ?1 AND revision <= ?2 AND deleted = 1)",
            )?
            .execute(params![pending.done as i64, hi as i64])?;
            tx.execute("UPDATE store_meta SET value = ?1 WHERE name = 'compaction_done'", params![hi as i64])?;
            tx.commit()
        })();
        match step {
            Ok(()) => {
                pending.done = hi;
                if hi >= pending.target
                    && let Some(done) = self.pending.take()
                {
                    for waiter in done.waiters {
                        let _ = waiter.send(Ok(()));
                    }
                }
            }
            Err(error) => {
                let error = classify(error, &self.path);
                tracing::warn!(%error, "compaction step failed; will retry");
                // Hand the error to explicit callers, keep going for the automatic ones.
                for waiter in pending.waiters.drain(..) {
                    let _ = waiter.send(Err(same_error(&error)));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// Applies one write inside the batch transaction; sees the batch's earlier writes.
fn apply(tx: &Transaction<'_>, write: Write, next: &mut Revision) -> rusqlite::Result<WriteResult> {
    let key = write.key().to_string();
    let current = tx
        .prepare_cached(
            "SELECT revision, create_revision, deleted, value FROM kv_log
             WHERE key = ?1 ORDER BY revision DESC LIMIT 1",
        )?
        .query_row(params![key], |row| {
            let deleted: i64 = row.get(2)?;
            if deleted != 0 {
                return Ok(None);
            }
            Ok(Some(KeyValue {
                key: key.clone(),
                value: Bytes::from(row.get::<_, Vec<u8>>(3)?),
                create_revision: row.get::<_, i64>(1)? as Revision,
                mod_revision: row.get::<_, i64>(0)? as Revision,
            }))
        })
        .optional()?
        .flatten();
    let mut insert = |value: Option<&Bytes>, create: Revision, prev: Revision| -> rusqlite::Result<Revision> {
        let revision = *next;
        let create = if create == 0 { revision } else { create };
        tx.prepare_cached(
            "INSERT INTO kv_log (revision, key, create_revision, prev_revision, deleted, value)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )?
        .execute(params![
            revision as i64,
            key,
            create as i64,
            prev as i64,
            value.is_none() as i64,
            value.map(|v| v.as_ref())
        ])?;
        *next += 1;
        Ok(revision)
    };
    Ok(match write {
        Write::Create { value, .. } => match current {
            Some(_) => WriteResult::Rejected { current },
            None => {
                let revision = insert(Some(&value), 0, 0)?;
                let kv = KeyValue { key: key.clone(), value, create_revision: revision, mod_revision: revision };
                WriteResult::Committed(Event::Put { kv, prev: None })
            }
        },
        Write::Update { value, expected, .. } => match current {
            Some(prev) if prev.mod_revision == expected => {
                let revision = insert(Some(&value), prev.create_revision, prev.mod_revision)?;
                let kv = KeyValue {
                    key: key.clone(),
                    value,
                    create_revision: prev.create_revision,
                    mod_revision: revision,
                };
                WriteResult::Committed(Event::Put { kv, prev: Some(prev) })
            }
            current => WriteResult::Rejected { current },
        },
        Write::Delete { expected, .. } => match current {
            Some(prev) if prev.mod_revision == expected => {
                let revision = insert(None, prev.create_revision, prev.mod_revision)?;
                WriteResult::Committed(Event::Delete { revision, prev })
            }
            current => WriteResult::Rejected { current },
        },
    })
}

/// The same error again, for every write of a failed batch.
fn same_error(error: &StoreError) -> StoreError {
    match error {
        StoreError::DiskFull(m) => StoreError::DiskFull(m.clone()),
        StoreError::Corrupt { path, reason } => StoreError::Corrupt { path: path.clone(), reason: reason.clone() },
        other => StoreError::Backend(other.to_string()),
    }
}
