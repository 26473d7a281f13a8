//! The audit log file: one JSON event per line, appended, rotated as kube-apiserver's
//! (lumberjack's) rotation does: when a line would take the file past `--audit-log-maxsize`
//! megabytes it is renamed `NAME-<UTC time>.EXT` and a new file started; backups beyond
//! `--audit-log-maxbackup` (the newest kept) and older than `--audit-log-maxage` days go.
//! Written here rather than with a crate because the rotated names and limits must be
//! kube-apiserver's, so tools that read its audit logs read ours.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Where events go and how the file rotates.
#[derive(Clone, Debug)]
pub struct FileOptions {
    /// The file (`-` for standard output).
    pub path: PathBuf,
    /// Rotate past this many bytes (0: never).
    pub max_bytes: u64,
    /// Rotated files kept (0: all).
    pub max_backups: usize,
    /// Days rotated files are kept (0: forever).
    pub max_age_days: u64,
}

/// An open audit log.
pub struct AuditFile {
    options: FileOptions,
    state: Mutex<Option<(std::fs::File, u64)>>,
}

impl AuditFile {
    /// Opens (creating, private to the user) the file.
    pub fn open(options: FileOptions) -> std::io::Result<AuditFile> {
        let file = AuditFile { options, state: Mutex::new(None) };
        if !file.is_stdout() {
            let mut state = file.state.lock().unwrap_or_else(|p| p.into_inner());
            *state = Some(file.open_file()?);
        }
        Ok(file)
    }

    fn is_stdout(&self) -> bool {
        self.options.path.as_os_str() == "-"
    }

    fn open_file(&self) -> std::io::Result<(std::fs::File, u64)> {
        use std::os::unix::fs::OpenOptionsExt;
        if let Some(parent) = self.options.path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        let file = std::fs::OpenOptions::new().create(true).append(true).mode(0o600).open(&self.options.path)?;
        let size = file.metadata()?.len();
        Ok((file, size))
    }

    /// Appends one line (a newline is added).
    pub fn write_line(&self, line: &[u8]) -> std::io::Result<()> {
        if self.is_stdout() {
            let mut out = std::io::stdout().lock();
            out.write_all(line)?;
            return out.write_all(b"\n");
        }
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let needed = line.len() as u64 + 1;
        if let Some((_, size)) = state.as_ref()
            && self.options.max_bytes > 0
            && *size > 0
            && size + needed > self.options.max_bytes
        {
            *state = None;
            self.rotate()?;
        }
        if state.is_none() {
            *state = Some(self.open_file()?);
        }
        let Some((file, size)) = state.as_mut() else { return Ok(()) };
        file.write_all(line)?;
        file.write_all(b"\n")?;
        *size += needed;
        Ok(())
    }

    /// Renames the file to its backup name and removes the backups past the limits.
    fn rotate(&self) -> std::io::Result<()> {
        let path = &self.options.path;
        let stamp = jiff::Timestamp::now().strftime("%Y-%m-%dT%H-%M-%S%.3f").to_string();
        std::fs::rename(path, backup_name(path, &stamp))?;
        let mut backups = backups(path);
        // Newest first (the stamp sorts by time).
        backups.sort_by(|a, b| b.0.cmp(&a.0));
        let now = std::time::SystemTime::now();
        for (index, (_, backup)) in backups.iter().enumerate() {
            let too_many = self.options.max_backups > 0 && index >= self.options.max_backups;
            let too_old = self.options.max_age_days > 0
                && std::fs::metadata(backup)
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|m| now.duration_since(m).ok())
                    .is_some_and(|age| age.as_secs() > self.options.max_age_days * 86_400);
            if too_many || too_old {
                let _ = std::fs::remove_file(backup);
            }
        }
        Ok(())
    }
}

/// `dir/audit.log` + stamp → `dir/audit-<stamp>.log`.
fn backup_name(path: &Path, stamp: &str) -> PathBuf {
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let name = match path.extension() {
        Some(ext) => format!("{stem}-{stamp}.{}", ext.to_string_lossy()),
        None => format!("{stem}-{stamp}"),
    };
    path.with_file_name(name)
}

/// The rotated files of `path`, with their stamps.
fn backups(path: &Path) -> Vec<(String, PathBuf)> {
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let ext = path.extension().map(|e| format!(".{}", e.to_string_lossy())).unwrap_or_default();
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let stamp = name.strip_prefix(&format!("{stem}-"))?.strip_suffix(ext.as_str())?.to_string();
            (stamp.len() == "2006-01-02T15-04-05.000".len()).then(|| (stamp, entry.path()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn files_rotate_past_their_size_and_keep_the_newest_backups() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let log = AuditFile::open(FileOptions { path: path.clone(), max_bytes: 100, max_backups: 2, max_age_days: 0 }).unwrap();
        let line = [b'x'; 39];
        for _ in 0..9 {
            log.write_line(&line).unwrap();
            // Backups are named to the millisecond.
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        // Two lines of 40 bytes fit in 100: 9 lines make 4 rotations, 2 backups kept.
        let mut names: Vec<String> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        assert_eq!(names.len(), 3, "{names:?}");
        assert_eq!(names[2], "audit.log");
        assert!(names[0].starts_with("audit-") && names[0].ends_with(".log"), "{names:?}");
        assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 1);
        for backup in &names[..2] {
            assert_eq!(std::fs::read_to_string(dir.path().join(backup)).unwrap().lines().count(), 2);
        }
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    }
}
