//! The on-disk format of the SQLite backend, and the checks that refuse foreign or damaged
//! files before anything is written to them.
//!
//! The database file is `oxplane.db` in the data directory, readable with the standard `sqlite3`
//! tool. It holds two tables:
//!
//! ```sql
//! -- One row per committed write: the whole history since the last compaction.
//! CREATE TABLE kv_log (
//!   revision        INTEGER PRIMARY KEY,  -- the global revision of this write (1, 2, 3, ...)
//!   key             TEXT    NOT NULL,     -- the key, e.g. /registry/configmaps/default/app
//!   create_revision INTEGER NOT NULL,     -- revision that created this incarnation of the key
//!   prev_revision   INTEGER NOT NULL,     -- revision of the value this write replaced, 0 if none
//!   deleted         INTEGER NOT NULL,     -- 1 for a deletion (value is NULL), else 0
//!   value           BLOB                  -- the value bytes (JSON for API objects)
//! );
//! CREATE INDEX kv_log_key_revision ON kv_log (key, revision);
//! -- Named integers: compacted_revision (reads and watches older than it are refused) and
//! -- compaction_done (superseded rows up to it have been removed).
//! CREATE TABLE store_meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
//! ```
//!
//! The current value of a key is its row with the highest revision, unless that row is a
//! deletion. The store's revision is the highest revision in `kv_log` (or `compacted_revision`
//! if compaction removed that row). `PRAGMA application_id` is `0x4F58504C` ("OXPL") and
//! `PRAGMA user_version` is the format version, [`FORMAT_VERSION`].
//!
//! Example: `sqlite3 oxplane.db "SELECT revision, key, deleted FROM kv_log ORDER BY revision DESC LIMIT 5"`.

use std::io::Read;
use std::path::Path;

use rusqlite::Connection;

use crate::{StoreError, StoreResult};

/// `PRAGMA application_id` of an oxplane store: "OXPL".
pub const APPLICATION_ID: i64 = 0x4F58_504C;
/// The format version in `PRAGMA user_version`.
pub const FORMAT_VERSION: i64 = 1;
/// The database file's name inside the data directory.
pub const DB_FILE: &str = "oxplane.db";

const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

const CREATE: &str = "
CREATE TABLE kv_log (
  revision        INTEGER PRIMARY KEY,
  key             TEXT    NOT NULL,
  create_revision INTEGER NOT NULL,
  prev_revision   INTEGER NOT NULL,
  deleted         INTEGER NOT NULL CHECK (deleted IN (0, 1)),
  value           BLOB
);
CREATE INDEX kv_log_key_revision ON kv_log (key, revision);
CREATE TABLE store_meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
INSERT INTO store_meta (name, value) VALUES ('compacted_revision', 0), ('compaction_done', 0);
";

/// Refuses a file that exists but is not a SQLite database, without opening it with SQLite.
pub(crate) fn check_header(path: &Path) -> StoreResult<()> {
    let mut file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(StoreError::io(format!("opening {}", path.display()), e)),
    };
    let mut header = Vec::with_capacity(16);
    file.by_ref()
        .take(16)
        .read_to_end(&mut header)
        .map_err(|e| StoreError::io(format!("reading {}", path.display()), e))?;
    if header.is_empty() {
        return Ok(());
    }
    if header.as_slice() != SQLITE_MAGIC {
        return Err(StoreError::Foreign {
            path: path.to_path_buf(),
            reason: "the file is not a SQLite database".to_string(),
        });
    }
    Ok(())
}

/// The database holds every object, Secrets among them: it and its WAL and shared-memory files
/// are readable by their owner only (0600). A missing database is created empty with that mode
/// before SQLite opens it; SQLite gives the WAL and shared-memory files the database's mode.
pub(crate) fn create_private(path: &Path) -> StoreResult<()> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(StoreError::io(format!("creating {}", path.display()), e)),
    }
}

/// Narrows the database's files to owner-only (0600) where an older version created them with
/// a wider mode. Called only once the file is known to be an oxplane store.
pub(crate) fn narrow_modes(path: &Path) -> StoreResult<()> {
    use std::os::unix::fs::PermissionsExt;
    for suffix in ["", "-wal", "-shm"] {
        let file = std::path::PathBuf::from(format!("{}{suffix}", path.display()));
        if let Ok(meta) = std::fs::metadata(&file)
            && meta.permissions().mode() & 0o077 != 0
        {
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600))
                .map_err(|e| StoreError::io(format!("making {} private", file.display()), e))?;
        }
    }
    Ok(())
}

/// Checks that `conn` is an oxplane store (or a brand-new empty file, which it initialises),
/// optionally verifies its integrity, and sets the connection up for durable writes.
pub(crate) fn prepare(conn: &Connection, path: &Path, integrity_check: bool, fsync: bool) -> StoreResult<()> {
    let corrupt = |e: rusqlite::Error| classify(e, path);
    let application_id: i64 = conn.query_row("PRAGMA application_id", [], |r| r.get(0)).map_err(corrupt)?;
    let objects: i64 = conn
        .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
        .map_err(corrupt)?;
    if application_id != APPLICATION_ID {
        if application_id != 0 || objects != 0 {
            return Err(StoreError::Foreign {
                path: path.to_path_buf(),
                reason: format!(
                    "application_id is {application_id:#x} and it holds {objects} schema objects"
                ),
            });
        }
    } else {
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(corrupt)?;
        if version != FORMAT_VERSION {
            return Err(StoreError::Foreign {
                path: path.to_path_buf(),
                reason: format!("format version {version}, this oxplane reads version {FORMAT_VERSION}"),
            });
        }
        if integrity_check {
            let verdict: String = conn.query_row("PRAGMA quick_check(1)", [], |r| r.get(0)).map_err(corrupt)?;
            if verdict != "ok" {
                return Err(StoreError::Corrupt { path: path.to_path_buf(), reason: verdict });
            }
        }
    }
    let sync = if fsync { "FULL" } else { "OFF" };
    conn.execute_batch(&format!(
        "PRAGMA journal_mode = WAL;
         PRAGMA synchronous = {sync};
         PRAGMA journal_size_limit = 67108864;
         PRAGMA busy_timeout = 10000;
         PRAGMA cache_size = -65536;
         PRAGMA mmap_size = 1073741824;
         PRAGMA wal_autocheckpoint = 0;"
    ))
    .map_err(corrupt)?;
    if application_id == 0 {
        let init = format!(
            "BEGIN IMMEDIATE; {CREATE} PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = {FORMAT_VERSION}; COMMIT;"
        );
        conn.execute_batch(&init).map_err(|e| classify(e, path))?;
    }
    Ok(())
}

/// Settings of every read connection: a large page cache and memory-mapped reads.
pub(crate) const READER_PRAGMAS: &str = "PRAGMA cache_size = -16384; PRAGMA mmap_size = 1073741824;";

/// Maps an SQLite error to the store error a user can act on.
pub(crate) fn classify(error: rusqlite::Error, path: &Path) -> StoreError {
    use rusqlite::ErrorCode;
    if let rusqlite::Error::SqliteFailure(code, _) = &error {
        match code.code {
            ErrorCode::DiskFull => return StoreError::DiskFull(error.to_string()),
            ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt => {
                return StoreError::Corrupt { path: path.to_path_buf(), reason: error.to_string() };
            }
            _ => {}
        }
    }
    StoreError::Backend(error.to_string())
}
