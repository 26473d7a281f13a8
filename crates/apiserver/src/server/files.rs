//! Writing the server's files (certificates, token, kubeconfig) atomically, private ones with
//! owner-only permissions.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::ServeError;

/// Writes `contents` to `path` through a temporary file and a rename, so a crash never leaves a
/// half-written file; `private` files are readable by the owner only.
pub fn write_private(path: &Path, contents: &[u8], private: bool) -> Result<(), ServeError> {
    let tmp = path.with_extension("tmp");
    let mode = if private { 0o600 } else { 0o644 };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)
        .map_err(|e| ServeError::io(format!("creating {}", tmp.display()), e))?;
    file.write_all(contents)
        .and_then(|()| file.sync_all())
        .map_err(|e| ServeError::io(format!("writing {}", tmp.display()), e))?;
    std::fs::rename(&tmp, path).map_err(|e| ServeError::io(format!("renaming to {}", path.display()), e))
}
