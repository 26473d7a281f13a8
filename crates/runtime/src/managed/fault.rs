//! Fault points for crash tests: when `OXPLANE_FAULT_KILL_AT` names a point, the process
//! kills itself with SIGKILL the moment it reaches it — no cleanup, no flushing, exactly as a
//! crash. Unset, every point is a no-op.

use std::sync::OnceLock;

/// The environment variable naming the point to die at.
pub const FAULT_KILL_AT: &str = "OXPLANE_FAULT_KILL_AT";

/// Before the create intent (`external-create-pending`) is saved.
pub const BEFORE_CREATE_INTENT: &str = "managed.create.before-intent";
/// After the create intent is saved, before the external create is called.
pub const AFTER_CREATE_INTENT: &str = "managed.create.after-intent";
/// After the external create returned (with its identifier), before it is saved.
pub const AFTER_EXTERNAL_CREATE: &str = "managed.create.after-external-create";
/// After the identifier and the create outcome are saved.
pub const AFTER_CREATE_SAVED: &str = "managed.create.after-saved";
/// After an observation, before the status it produced is written.
pub const BEFORE_STATUS_WRITE: &str = "managed.status.before-write";

fn target() -> Option<&'static str> {
    static TARGET: OnceLock<Option<String>> = OnceLock::new();
    TARGET.get_or_init(|| std::env::var(FAULT_KILL_AT).ok().filter(|v| !v.is_empty())).as_deref()
}

/// Dies here if this is the configured point.
pub fn point(name: &str) {
    if target() != Some(name) {
        return;
    }
    tracing::error!(point = name, "fault point reached: killing the process");
    let pid = std::process::id().to_string();
    let _ = std::process::Command::new("kill").args(["-9", &pid]).status();
    // SIGKILL cannot be caught; should `kill` be missing, never go past the point.
    std::process::abort();
}
