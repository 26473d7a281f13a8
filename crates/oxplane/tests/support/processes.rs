//! What the package tests read of the processes oxplane runs, and the files they make for
//! package runtimes.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

/// Runs the `oxplane` binary with `args`.
pub fn oxplane(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_oxplane")).args(args).output().unwrap()
}

/// Writes `text` to `path` (its folders made), executable if asked.
pub fn write_file(path: &Path, text: &str, executable: bool) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    if executable {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

/// Whether a process runs (a zombie nobody reaped yet does not).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| stat.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z')))
}

/// The live processes, whoever their parent, working in a folder under `root` (package
/// processes run in their image's root filesystem) whose command line contains `program`,
/// in pid order.
pub fn processes_in(root: &Path, program: &str) -> Vec<u32> {
    let mut found: Vec<u32> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .filter(|pid| alive(*pid))
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd.starts_with(root))
                && std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| String::from_utf8_lossy(&c).contains(program))
        })
        .collect();
    found.sort();
    found
}
