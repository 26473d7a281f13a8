//! What every crate's test support shares, below every layer and depending on nothing: the
//! [`Watchdog`] that stops a test's servers (PostgreSQL, MariaDB, etcd, an OCI registry) and
//! removes their data once the test process is gone, however it ends. A test binary is not
//! unwound when it exits (nor when it is killed), so no `Drop` runs for a server shared by
//! every test of the process: a detached shell outlives the process, waits for it to go, and
//! cleans up.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// What to do once a process is gone: processes to kill (SIGKILL), a command to run, a
/// directory to remove, in that order.
#[derive(Debug, Clone)]
pub struct Watchdog {
    parent: u32,
    kill: Vec<u32>,
    command: Vec<OsString>,
    remove: Option<PathBuf>,
}

/// Waits for `$1` to be gone, then kills `$3` (a space-separated list of pids, split on
/// purpose), runs the command in the remaining arguments, and removes `$2`. Every value comes
/// in as an argument, so paths need no shell quoting.
const SCRIPT: &str = r#"parent=$1; dir=$2; pids=$3; shift 3
while kill -0 "$parent" 2>/dev/null; do sleep 1; done
if [ -n "$pids" ]; then kill -9 $pids 2>/dev/null; sleep 1; fi
if [ $# -gt 0 ]; then "$@" >/dev/null 2>&1; fi
if [ -n "$dir" ]; then rm -rf -- "$dir"; fi"#;

impl Default for Watchdog {
    fn default() -> Self {
        Watchdog::new()
    }
}

impl Watchdog {
    /// A watchdog of this process, doing nothing yet.
    pub fn new() -> Self {
        Watchdog::of(std::process::id())
    }

    /// A watchdog of the process `pid` (tests of the watchdog watch a process of their own).
    pub fn of(pid: u32) -> Self {
        Watchdog { parent: pid, kill: Vec::new(), command: Vec::new(), remove: None }
    }

    /// Kills `pid` with SIGKILL (its data is removed, so a clean shutdown would serve nothing).
    pub fn kill(mut self, pid: u32) -> Self {
        self.kill.push(pid);
        self
    }

    /// Runs `program` with `args` (its output discarded), for a server stopped by a command of
    /// its own, such as `pg_ctl stop`.
    pub fn run<I, S>(mut self, program: impl Into<OsString>, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.command = std::iter::once(program.into()).chain(args.into_iter().map(Into::into)).collect();
        self
    }

    /// Removes `dir` and everything in it, last.
    pub fn remove(mut self, dir: &Path) -> Self {
        self.remove = Some(dir.to_path_buf());
        self
    }

    /// Starts the watchdog: a shell in a session of its own (so a signal to the test's process
    /// group does not reach it), detached from this process' standard streams.
    // The watchdog outlives this process by design: nobody is left to wait for it.
    #[allow(clippy::zombie_processes)]
    pub fn arm(self) -> io::Result<()> {
        let pids: Vec<String> = self.kill.iter().map(u32::to_string).collect();
        Command::new("setsid")
            .args(["sh", "-c", SCRIPT, "watchdog"])
            .arg(self.parent.to_string())
            .arg(self.remove.map(PathBuf::into_os_string).unwrap_or_default())
            .arg(pids.join(" "))
            .args(self.command)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use std::process::Child;
    use std::time::{Duration, Instant};

    fn sleeper() -> Child {
        Command::new("sleep").arg("300").spawn().unwrap()
    }

    /// Waits up to 15 s for `done`.
    fn eventually(mut done: impl FnMut() -> bool) -> bool {
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if done() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }

    #[test]
    fn kills_runs_and_removes_once_the_watched_process_is_gone() {
        let mut parent = sleeper();
        let mut server = sleeper();
        let dir = tempfile::Builder::new().prefix("watchdog test 'quoted' $dir").tempdir().unwrap().keep();
        std::fs::write(dir.join("data"), "x").unwrap();
        let marker = dir.with_extension("ran");
        Watchdog::of(parent.id()).kill(server.id()).run("touch", [&marker]).remove(&dir).arm().unwrap();

        // Nothing happens while the watched process lives.
        std::thread::sleep(Duration::from_secs(2));
        assert!(server.try_wait().unwrap().is_none(), "the server was killed while the watched process lived");
        assert!(dir.join("data").exists());
        assert!(!marker.exists());

        parent.kill().unwrap();
        parent.wait().unwrap();
        assert!(eventually(|| server.try_wait().unwrap().is_some()), "the server outlived the watched process");
        assert!(eventually(|| !dir.exists()), "the directory outlived the watched process");
        assert!(marker.exists(), "the command did not run");
        std::fs::remove_file(&marker).unwrap();
    }

    #[test]
    fn a_command_alone_runs() {
        let mut parent = sleeper();
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        Watchdog::of(parent.id()).run("touch", [&marker]).arm().unwrap();
        parent.kill().unwrap();
        parent.wait().unwrap();
        assert!(eventually(|| marker.exists()), "the command did not run");
    }
}
