//! Snapshot reads from a pool of read-only connections. WAL mode lets them run alongside the
//! writer; each read runs in one read transaction, so it sees one consistent snapshot.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use bytes::Bytes;
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, OpenFlags, OptionalExtension, Transaction, params};

use super::schema::classify;
use crate::watch::History;
use crate::{Event, KeyValue, RangeRequest, RangeResponse, Revision, StoreError, StoreResult, continuation};

/// Idle read connections kept open.
const MAX_IDLE: usize = 8;

/// The pool of read connections.
pub(crate) struct Readers {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
}

/// The exclusive upper bound of keys starting with a prefix: no UTF-8 text contains byte 0xFF,
/// so `prefix + 0xFF` sorts after every key with that prefix and before every other greater
/// key. SQLite compares TEXT bytewise and does not validate it, so the bound is bound as text.
struct PrefixEnd(Vec<u8>);

impl PrefixEnd {
    fn of(prefix: &str) -> Self {
        let mut bytes = prefix.as_bytes().to_vec();
        bytes.push(0xFF);
        PrefixEnd(bytes)
    }
}

impl rusqlite::ToSql for PrefixEnd {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(ValueRef::Text(&self.0)))
    }
}

impl Readers {
    pub(crate) fn new(path: &Path) -> Self {
        Readers { path: path.to_path_buf(), idle: Mutex::new(Vec::new()) }
    }

    /// Runs `f` in a read transaction on a pooled connection.
    fn with_snapshot<T>(&self, f: impl FnOnce(&Transaction<'_>, Snapshot) -> StoreResult<T>) -> StoreResult<T> {
        let taken = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let mut conn = match taken {
            Some(conn) => conn,
            None => self.open()?,
        };
        let result = (|| {
            let tx = conn.transaction().map_err(|e| classify(e, &self.path))?;
            let snapshot = Snapshot::read(&tx, &self.path)?;
            let out = f(&tx, snapshot)?;
            tx.finish().map_err(|e| classify(e, &self.path))?;
            Ok(out)
        })();
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < MAX_IDLE {
            idle.push(conn);
        }
        result
    }

    fn open(&self) -> StoreResult<Connection> {
        let conn = Connection::open_with_flags(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| classify(e, &self.path))?;
        conn.busy_timeout(std::time::Duration::from_secs(10)).map_err(|e| classify(e, &self.path))?;
        conn.execute_batch(super::schema::READER_PRAGMAS).map_err(|e| classify(e, &self.path))?;
        Ok(conn)
    }

    /// The key's latest value and the snapshot revision.
    pub(crate) fn get(&self, key: &str) -> StoreResult<(Option<KeyValue>, Revision)> {
        self.with_snapshot(|tx, snapshot| {
            let kv = tx
                .prepare_cached(
                    "SELECT revision, create_revision, deleted, value FROM kv_log
                     WHERE key = ?1 ORDER BY revision DESC LIMIT 1",
                )
                .and_then(|mut stmt| {
                    stmt.query_row(params![key], |row| {
                        let deleted: i64 = row.get(2)?;
                        Ok((deleted == 0).then(|| -> rusqlite::Result<KeyValue> {
                            Ok(KeyValue {
                                key: key.to_string(),
                                value: Bytes::from(row.get::<_, Vec<u8>>(3)?),
                                create_revision: row.get::<_, i64>(1)? as Revision,
                                mod_revision: row.get::<_, i64>(0)? as Revision,
                            })
                        }))
                    })
                    .optional()
                })
                .map_err(|e| classify(e, &self.path))?
                .flatten()
                .transpose()
                .map_err(|e| classify(e, &self.path))?;
            Ok((kv, snapshot.current))
        })
    }

    /// A page of live keys under a prefix at a snapshot revision.
    pub(crate) fn range(&self, request: &RangeRequest) -> StoreResult<RangeResponse> {
        self.with_snapshot(|tx, snapshot| {
            let (revision, after) = match &request.continue_token {
                Some(token) => {
                    let c = continuation::decode(token, &request.prefix)?;
                    (c.revision, Some(c.last_key))
                }
                None => (request.revision.unwrap_or(snapshot.current), None),
            };
            snapshot.check_readable(revision)?;
            let lower_op = if after.is_some() { ">" } else { ">=" };
            let lower = after.as_deref().unwrap_or(&request.prefix);
            let sql = format!(
                "SELECT l.key, l.revision, l.create_revision, l.value
                 FROM (SELECT key, MAX(revision) AS revision FROM kv_log
                       WHERE key {lower_op} ?1 AND key < ?2 AND revision <= ?3 GROUP BY key) AS m
                 JOIN kv_log AS l ON l.revision = m.revision
                 WHERE l.deleted = 0
                 ORDER BY l.key LIMIT ?4"
            );
            let fetch = if request.limit == 0 { -1 } else { request.limit as i64 + 1 };
            let mut kvs = tx
                .prepare_cached(&sql)
                .and_then(|mut stmt| {
                    stmt.query_map(params![lower, PrefixEnd::of(&request.prefix), revision as i64, fetch], |row| {
                        Ok(KeyValue {
                            key: row.get(0)?,
                            value: Bytes::from(row.get::<_, Vec<u8>>(3)?),
                            create_revision: row.get::<_, i64>(2)? as Revision,
                            mod_revision: row.get::<_, i64>(1)? as Revision,
                        })
                    })?
                    .collect::<rusqlite::Result<Vec<_>>>()
                })
                .map_err(|e| classify(e, &self.path))?;
            let mut continue_token = None;
            if request.limit > 0 && kvs.len() > request.limit {
                kvs.truncate(request.limit);
                if let Some(last) = kvs.last() {
                    continue_token = Some(continuation::encode(revision, &request.prefix, &last.key));
                }
            }
            Ok(RangeResponse { kvs, revision, continue_token })
        })
    }
}

/// The revisions a read transaction sees.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Snapshot {
    pub current: Revision,
    pub compacted: Revision,
}

impl Snapshot {
    pub(crate) fn read(conn: &Connection, path: &Path) -> StoreResult<Snapshot> {
        let (max, compacted): (i64, i64) = conn
            .prepare_cached(
                "SELECT (SELECT ifnull(MAX(revision), 0) FROM kv_log),
                        (SELECT value FROM store_meta WHERE name = 'compacted_revision')",
            )
            .and_then(|mut stmt| stmt.query_row([], |r| Ok((r.get(0)?, r.get(1)?))))
            .map_err(|e| classify(e, path))?;
        // Compaction may remove the newest row (a deletion); the revision never goes back.
        Ok(Snapshot { current: max.max(compacted) as Revision, compacted: compacted as Revision })
    }

    fn check_readable(&self, revision: Revision) -> StoreResult<()> {
        if revision < self.compacted {
            return Err(StoreError::Compacted { requested: revision, compacted: self.compacted });
        }
        if revision > self.current {
            return Err(StoreError::FutureRevision { requested: revision, current: self.current });
        }
        Ok(())
    }
}

impl History for Readers {
    fn events(&self, prefix: &str, after: Revision, up_to: Revision, limit: usize) -> StoreResult<Vec<Event>> {
        self.with_snapshot(|tx, snapshot| {
            if after < snapshot.compacted {
                return Err(StoreError::Compacted { requested: after, compacted: snapshot.compacted });
            }
            if up_to <= after {
                return Ok(Vec::new());
            }
            let mut stmt = tx
                .prepare_cached(
                    "SELECT l.revision, l.key, l.create_revision, l.deleted, l.value,
                            p.revision, p.create_revision, p.value
                     FROM kv_log AS l LEFT JOIN kv_log AS p ON p.revision = l.prev_revision
                     WHERE l.revision > ?1 AND l.revision <= ?2 AND l.key >= ?3 AND l.key < ?4
                     ORDER BY l.revision LIMIT ?5",
                )
                .map_err(|e| classify(e, &self.path))?;
            let rows = stmt
                .query_map(
                    params![after as i64, up_to as i64, prefix, PrefixEnd::of(prefix), limit as i64],
                    |row| {
                        let key: String = row.get(1)?;
                        let prev = match row.get::<_, Option<i64>>(5)? {
                            Some(prev_revision) => Some(KeyValue {
                                key: key.clone(),
                                value: Bytes::from(row.get::<_, Vec<u8>>(7)?),
                                create_revision: row.get::<_, i64>(6)? as Revision,
                                mod_revision: prev_revision as Revision,
                            }),
                            None => None,
                        };
                        let revision = row.get::<_, i64>(0)? as Revision;
                        let deleted: i64 = row.get(3)?;
                        Ok(if deleted == 0 {
                            Ok(Event::Put {
                                kv: KeyValue {
                                    key,
                                    value: Bytes::from(row.get::<_, Vec<u8>>(4)?),
                                    create_revision: row.get::<_, i64>(2)? as Revision,
                                    mod_revision: revision,
                                },
                                prev,
                            })
                        } else {
                            match prev {
                                Some(prev) => Ok(Event::Delete { revision, prev }),
                                None => Err(StoreError::Corrupt {
                                    path: self.path.clone(),
                                    reason: format!("the deletion at revision {revision} has no previous value"),
                                }),
                            }
                        })
                    },
                )
                .map_err(|e| classify(e, &self.path))?;
            let mut events = Vec::new();
            for row in rows {
                events.push(row.map_err(|e| classify(e, &self.path))??);
            }
            Ok(events)
        })
    }
}
