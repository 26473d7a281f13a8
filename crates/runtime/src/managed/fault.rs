//! Fault points for crash tests: when `OXPLANE_FAULT_KILL_AT` names a point (or several,
//! separated by commas), the process kills itself with SIGKILL the moment it reaches one — no
//! cleanup, no flushing, exactly as a crash. Unset, every point is a no-op.
//!
//! With `OXPLANE_FAULT_STATE_DIR` set, a point fires once per key (a managed resource's uid):
//! a marker file written before the kill makes the same point pass for that key after the
//! restart, so one process can be killed once for each of many resources — and, with several
//! points named, once at each of them (a crash during the recovery from a crash).

use std::sync::OnceLock;

/// The environment variable naming the points to die at (comma-separated).
pub const FAULT_KILL_AT: &str = "OXPLANE_FAULT_KILL_AT";
/// The environment variable naming a directory that remembers which keys already died.
pub const FAULT_STATE_DIR: &str = "OXPLANE_FAULT_STATE_DIR";

/// Before the create intent (`external-create-pending`) is saved.
pub const BEFORE_CREATE_INTENT: &str = "managed.create.before-intent";
/// After the create intent is saved, before the external create is called.
pub const AFTER_CREATE_INTENT: &str = "managed.create.after-intent";
/// After the external create request reached the external system (its answer has begun to
/// arrive, so the create is committed), before the answer with the identifier is read. The
/// provider's client calls this one, since only it knows when that is.
pub const CREATE_RESPONSE_UNREAD: &str = "managed.create.response-unread";
/// After the external create returned (with its identifier), before it is saved.
pub const AFTER_EXTERNAL_CREATE: &str = "managed.create.after-external-create";
/// After the identifier and the create outcome are saved.
pub const AFTER_CREATE_SAVED: &str = "managed.create.after-saved";
/// After Observe found the external resource ready, before `Ready=True` is written.
pub const BEFORE_READY_WRITE: &str = "managed.status.before-ready-write";

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn targets() -> &'static [String] {
    static TARGETS: OnceLock<Vec<String>> = OnceLock::new();
    TARGETS.get_or_init(|| {
        env(FAULT_KILL_AT).map(|list| list.split(',').map(str::trim).filter(|p| !p.is_empty()).map(str::to_string).collect()).unwrap_or_default()
    })
}

fn state_dir() -> Option<&'static std::path::Path> {
    static DIR: OnceLock<Option<std::path::PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| env(FAULT_STATE_DIR).map(std::path::PathBuf::from)).as_deref()
}

/// Dies here if this is a configured point (once per `key` when a state directory is set).
pub fn point(name: &str, key: &str) {
    if !targets().iter().any(|t| t == name) {
        return;
    }
    if let Some(dir) = state_dir() {
        let marker = dir.join(format!("{name}@{key}"));
        if marker.exists() {
            return;
        }
        // The marker must outlive the kill: write it durably first.
        let written = std::fs::File::create(&marker).and_then(|file| file.sync_all());
        if written.is_err() {
            return;
        }
    }
    tracing::error!(point = name, key, "fault point reached: killing the process");
    let pid = std::process::id().to_string();
    let _ = std::process::Command::new("kill").args(["-9", &pid]).status();
    // SIGKILL cannot be caught; should `kill` be missing, never go past the point.
    std::process::abort();
}
