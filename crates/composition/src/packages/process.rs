//! Supervising the local process of a pulled Provider or Function package: started in its
//! image's root filesystem with the environment it was given, its output appended to a log
//! file, started again after a backoff whenever it exits (1 s doubling to 60 s, reset after a
//! minute up), and stopped with SIGTERM, then SIGKILL after a grace period.
//!
//! No process outlives oxplane: each runs in a process group of its own (stopping kills the
//! group, so what the package's entrypoint forked goes too), is killed by the kernel when
//! oxplane dies, even by SIGKILL (`PR_SET_PDEATHSIG`), and whatever survived an earlier run
//! (a grandchild the death signal does not reach) is found at start by its working directory,
//! which is inside the runtime folder, and killed ([`reap_orphans`]).

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a stopped process may take to exit after SIGTERM before it is killed.
const GRACE: Duration = Duration::from_secs(5);

/// How to start a package's process.
pub(super) struct Process {
    /// The package's name, for logs.
    pub name: String,
    /// `provider` or `function`, for messages.
    pub noun: &'static str,
    /// The program (a path inside `root`).
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Its whole environment.
    pub env: Vec<(String, String)>,
    /// The image's unpacked root filesystem: the working directory.
    pub root: PathBuf,
    /// Where its output goes.
    pub log: PathBuf,
    /// The network namespace it runs in (none: oxplane's own network), kept while it may be
    /// started again.
    pub sandbox: Option<Arc<super::sandbox::Sandbox>>,
    /// Files or folders it sees at other paths (ours, its path), read-only, in a mount
    /// namespace of its own (none: the host's mounts, as they are).
    pub mounts: Vec<(PathBuf, PathBuf)>,
}

/// Why a process is down, shared between its supervisor and whoever reports its health:
/// `Some("starting")` before its first start, `None` while it runs.
pub(super) type Down = Arc<Mutex<Option<String>>>;

/// What `down` says now.
pub(super) fn down_now(down: &Down) -> Option<String> {
    down.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// A program path of the image: absolute paths inside its root filesystem, bare names on the
/// image's `PATH` there.
pub(super) fn program_in(root: &Path, program: &str, env: &[String]) -> Option<PathBuf> {
    if let Some(inside) = program.strip_prefix('/') {
        let path = root.join(inside);
        return path.exists().then_some(path);
    }
    let path = env.iter().find_map(|e| e.strip_prefix("PATH=")).unwrap_or("/usr/local/bin:/usr/bin:/bin");
    path.split(':').map(|dir| root.join(dir.trim_start_matches('/')).join(program)).find(|p| p.exists())
}

/// The last lines of a log file (at most 2 KiB of its end).
pub(super) fn last_lines(log: &Path) -> String {
    let mut text = String::new();
    if let Ok(mut file) = std::fs::File::open(log) {
        let length = file.metadata().map(|m| m.len()).unwrap_or(0);
        let _ = file.seek(SeekFrom::Start(length.saturating_sub(2048)));
        let _ = file.read_to_string(&mut text);
    }
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(5)..].join("\n")
}

/// Sends `signal` to `target`: a process, or the process group `-target`.
// The one call of kill(2) here: no safe wrapper of it is among the workspace's crates.
#[allow(unsafe_code)]
fn send_signal(target: i32, signal: i32) {
    // SAFETY: kill(2) takes plain integers and touches no memory of ours.
    unsafe {
        libc::kill(target, signal);
    }
}

/// Sends `signal` to the process group `group`.
fn signal_group(group: u32, signal: i32) {
    match i32::try_from(group) {
        Ok(group) if group > 1 => send_signal(-group, signal),
        _ => {}
    }
}

/// Asks the kernel to kill the calling process when its parent (oxplane's thread that
/// started it) dies, even by SIGKILL, when no code of oxplane's runs. For a forked child
/// before exec: one async-signal-safe system call, allocating nothing.
#[allow(unsafe_code)]
pub(super) fn die_with_parent() -> std::io::Result<()> {
    // SAFETY: prctl(2) with PR_SET_PDEATHSIG takes plain integers.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Kills a process group when dropped: a supervisor cancelled with the runtime (oxplane
/// stopping) leaves nothing running.
struct GroupGuard(u32);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        signal_group(self.0, libc::SIGKILL);
    }
}

/// Starts the process: in a process group of its own, killed by the kernel when oxplane dies.
#[allow(unsafe_code)]
fn spawn(process: &Process) -> std::io::Result<tokio::process::Child> {
    let out = std::fs::OpenOptions::new().create(true).append(true).open(&process.log)?;
    let err = out.try_clone()?;
    let mut command = tokio::process::Command::new(&process.program);
    command
        .args(&process.args)
        .env_clear()
        .envs(process.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&process.root)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0)
        .kill_on_drop(true);
    let parent = std::process::id();
    let namespace = process.sandbox.as_ref().map(|s| s.fd());
    // Made before the fork: the child may not allocate.
    let c_path = |path: &Path| std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).map_err(std::io::Error::other);
    let mounts = process.mounts.iter().map(|(source, target)| Ok((c_path(source)?, c_path(target)?))).collect::<std::io::Result<Vec<_>>>()?;
    // SAFETY: the closure runs in the forked child before exec and calls only prctl(2),
    // getppid(2), setns(2), unshare(2) and mount(2), all async-signal-safe, allocating nothing. The death signal is
    // what makes the kernel end the process when oxplane is killed with SIGKILL (no code of
    // ours runs then); the parent check closes the race of oxplane dying before prctl.
    unsafe {
        command.pre_exec(move || {
            die_with_parent()?;
            if libc::getppid() as u32 != parent {
                return Err(std::io::Error::other("oxplane exited while starting the process"));
            }
            if let Some(namespace) = namespace {
                super::sandbox::Sandbox::join(namespace)?;
            }
            if !mounts.is_empty() {
                super::sandbox::Sandbox::mount_at(&mounts)?;
            }
            Ok(())
        });
    }
    command.spawn()
}

/// Runs the process until stopped (`stopped` changes or its sender is dropped), starting it
/// again after a backoff whenever it exits; `down` says why it is down, and `changed` is called
/// whenever that changes.
pub(super) async fn supervise(process: Process, down: Down, mut stopped: tokio::sync::watch::Receiver<bool>, changed: Arc<dyn Fn() + Send + Sync>) {
    let set_down = |why: Option<String>| {
        *down.lock().unwrap_or_else(|p| p.into_inner()) = why;
        changed();
    };
    let mut backoff = Duration::from_secs(1);
    loop {
        match spawn(&process) {
            Err(error) => set_down(Some(format!("cannot start {}: {error}", process.program.display()))),
            Ok(mut child) => {
                let guard = child.id().map(GroupGuard);
                set_down(None);
                let started = Instant::now();
                tokio::select! {
                    status = child.wait() => {
                        drop(guard);
                        let status = status.map_or_else(|e| e.to_string(), |s| s.to_string());
                        let why = format!("the {} process exited ({status}); its last output: {}", process.noun, last_lines(&process.log));
                        tracing::warn!(package = %process.name, %why, "package process exited; starting it again after {backoff:?}");
                        if started.elapsed() > Duration::from_secs(60) {
                            backoff = Duration::from_secs(1);
                        }
                        set_down(Some(format!("{why} (started again in {}s)", backoff.as_secs())));
                    }
                    _ = stopped.changed() => {
                        if let Some(group) = child.id() {
                            signal_group(group, libc::SIGTERM);
                        }
                        if tokio::time::timeout(GRACE, child.wait()).await.is_err() {
                            let _ = child.kill().await;
                        }
                        drop(guard);
                        return;
                    }
                }
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = stopped.changed() => return,
        }
        backoff = (backoff * 2).min(Duration::from_secs(60));
    }
}

/// Kills every process whose working directory is inside `dir` (a runtime folder, where each
/// package process runs in its root filesystem): what an earlier run of oxplane left behind.
/// Returns how many were killed.
pub(super) fn reap_orphans(dir: &Path) -> usize {
    let Ok(dir) = dir.canonicalize() else { return 0 };
    let own = std::process::id();
    let mut killed = 0;
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        if pid == own {
            continue;
        }
        let Ok(cwd) = std::fs::read_link(entry.path().join("cwd")) else { continue };
        if cwd.starts_with(&dir) {
            tracing::warn!(pid, cwd = %cwd.display(), "killing a package process an earlier run of oxplane left behind");
            kill_pid(pid);
            killed += 1;
        }
    }
    killed
}

fn kill_pid(pid: u32) {
    if let Ok(pid) = i32::try_from(pid) {
        send_signal(pid, libc::SIGKILL);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn programs_are_found_inside_the_image() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("usr/local/bin")).unwrap();
        std::fs::write(dir.path().join("usr/local/bin/function"), "").unwrap();
        assert_eq!(program_in(dir.path(), "/usr/local/bin/function", &[]), Some(dir.path().join("usr/local/bin/function")));
        assert_eq!(program_in(dir.path(), "function", &["PATH=/bin:/usr/local/bin".into()]), Some(dir.path().join("usr/local/bin/function")));
        assert_eq!(program_in(dir.path(), "/bin/sh", &[]), None, "never the host's");
    }

    #[test]
    fn the_last_lines_of_a_log_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("x.log");
        std::fs::write(&log, (1..=9).map(|i| format!("line {i}\n")).collect::<String>()).unwrap();
        assert_eq!(last_lines(&log), "line 5\nline 6\nline 7\nline 8\nline 9");
    }

    fn sleeper(dir: &Path) -> Process {
        let root = dir.join("root");
        std::fs::create_dir_all(&root).unwrap();
        // A shell that forks a child of its own: stopping must end both.
        Process {
            name: "p".into(),
            noun: "provider",
            program: "/bin/sh".into(),
            args: vec!["-c".into(), "sleep 300 & echo started; wait".into()],
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            root,
            log: dir.join("p.log"),
            sandbox: None,
            mounts: Vec::new(),
        }
    }

    fn processes_in(dir: &Path) -> Vec<u32> {
        let dir = dir.canonicalize().unwrap();
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
            .filter(|pid| std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|c| c.starts_with(&dir)))
            .filter(|pid| std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.rsplit_once(") ").is_some_and(|(_, r)| r.starts_with('Z'))))
            .collect()
    }

    async fn until(what: &str, mut check: impl FnMut() -> bool) {
        for _ in 0..200 {
            if check() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("timed out waiting for {what}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn stopping_ends_the_process_and_what_it_forked() {
        let dir = tempfile::tempdir().unwrap();
        let down: Down = Arc::new(Mutex::new(Some("starting".into())));
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(supervise(sleeper(dir.path()), down.clone(), stopped, Arc::new(|| {})));
        until("both processes", || processes_in(dir.path()).len() == 2).await;
        assert_eq!(down_now(&down), None);
        drop(stop);
        task.await.unwrap();
        until("no process left", || processes_in(dir.path()).is_empty()).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_process_that_exits_is_reported_down_with_its_output_and_started_again() {
        let dir = tempfile::tempdir().unwrap();
        let mut process = sleeper(dir.path());
        process.args = vec!["-c".into(), "echo cannot find my config; exit 3".into()];
        let down: Down = Arc::new(Mutex::new(Some("starting".into())));
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let changes = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = changes.clone();
        let task = tokio::spawn(supervise(process, down.clone(), stopped, Arc::new(move || {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        })));
        until("the exit to be reported", || down_now(&down).is_some_and(|d| d.contains("exited"))).await;
        let why = down_now(&down).unwrap();
        assert!(why.contains("exit status: 3") && why.contains("cannot find my config"), "{why}");
        // Started again after a second: two starts, two exits at least.
        until("a second start", || std::fs::read_to_string(dir.path().join("p.log")).unwrap().matches("cannot find").count() >= 2).await;
        assert!(changes.load(std::sync::atomic::Ordering::SeqCst) >= 3);
        drop(stop);
        task.await.unwrap();
    }

    #[test]
    fn orphans_in_the_runtime_folder_are_reaped() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("rootfs/abc");
        std::fs::create_dir_all(&root).unwrap();
        let mut orphan = std::process::Command::new("/bin/sleep").arg("300").current_dir(&root).spawn().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let mut other = std::process::Command::new("/bin/sleep").arg("300").current_dir(elsewhere.path()).spawn().unwrap();
        assert_eq!(reap_orphans(dir.path()), 1);
        assert!(orphan.wait().unwrap().code().is_none(), "killed by a signal");
        assert!(other.try_wait().unwrap().is_none(), "a process elsewhere is left alone");
        other.kill().unwrap();
        other.wait().unwrap();
    }
}
