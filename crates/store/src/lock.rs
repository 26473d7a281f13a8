//! Exclusive ownership of a data directory by one process, through an advisory lock file.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};

use crate::{StoreError, StoreResult};

/// Name of the lock file inside a data directory.
pub const LOCK_FILE: &str = "oxplane.lock";

/// Holds the data directory's lock until dropped. The operating system releases it if the
/// process dies, so a crash never leaves a stale lock behind.
#[derive(Debug)]
pub struct DirLock {
    _file: File,
    path: PathBuf,
}

impl DirLock {
    /// Takes the lock of `dir` (created if missing), or fails with [`StoreError::Locked`]
    /// naming the pid of the process that holds it.
    pub fn acquire(dir: &Path) -> StoreResult<DirLock> {
        create_private_dir(dir)?;
        let path = dir.join(LOCK_FILE);
        let mut file = OpenOptions::new()
            .mode(0o600)
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| StoreError::io(format!("opening lock file {}", path.display()), e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = holder.trim();
                return Err(StoreError::Locked {
                    path: dir.to_path_buf(),
                    holder: (!holder.is_empty()).then(|| holder.to_string()),
                });
            }
            Err(TryLockError::Error(e)) => {
                return Err(StoreError::io(format!("locking {}", path.display()), e));
            }
        }
        // Record who holds the lock so a refused second process can name it.
        let pid = std::process::id().to_string();
        file.set_len(0)
            .and_then(|()| file.seek(SeekFrom::Start(0)))
            .and_then(|_| file.write_all(pid.as_bytes()))
            .map_err(|e| StoreError::io(format!("writing lock file {}", path.display()), e))?;
        Ok(DirLock { _file: file, path })
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Creates a data directory (and missing parents) readable by its owner only (0700). A
/// directory that already exists keeps the mode its owner gave it.
pub fn create_private_dir(dir: &Path) -> StoreResult<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| StoreError::io(format!("creating data directory {}", dir.display()), e))
}
