//! An `oxplane up` child process for the benchmarks: what users run, measured from outside.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// An `oxplane up` child process.
pub struct ServerProcess {
    child: Child,
    /// The data directory.
    pub dir: PathBuf,
}

impl ServerProcess {
    /// Starts `oxplane up` in `dir` and waits for its kubeconfig.
    pub fn start(dir: &Path) -> anyhow::Result<ServerProcess> {
        ServerProcess::start_with(dir, &[])
    }

    /// Starts `oxplane up` in `dir` with extra arguments.
    pub fn start_with(dir: &Path, args: &[&str]) -> anyhow::Result<ServerProcess> {
        let exe = std::env::current_exe()?;
        let child = Command::new(exe)
            .args(["up", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting oxplane up")?;
        let server = ServerProcess { child, dir: dir.to_path_buf() };
        let deadline = Instant::now() + Duration::from_secs(60);
        while !dir.join("kubeconfig").exists() {
            if Instant::now() > deadline {
                bail!("the server did not start");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(server)
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A kube-rs client from the server's kubeconfig.
    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        let kubeconfig = kube::config::Kubeconfig::read_from(self.dir.join("kubeconfig"))?;
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
        Ok(kube::Client::try_from(config)?)
    }

    /// CPU time the server process has used so far (user and system), in seconds, from
    /// `/proc/<pid>/stat` (kept in USER_HZ ticks, 100 a second on Linux).
    pub fn cpu_seconds(&self) -> anyhow::Result<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id()))?;
        // The command name may hold spaces: the fields that follow start after its `)`.
        let fields: Vec<&str> = stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default();
        let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).context("a malformed /proc stat line");
        // Fields 14 and 15 (utime, stime) of proc(5), counted from the state (field 3).
        Ok((ticks(11)? + ticks(12)?) / 100.0)
    }

    /// Resident memory of the server process, in MiB.
    pub fn rss_mb(&self) -> anyhow::Result<f64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        let kb: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .context("VmRSS not found")?;
        Ok(kb / 1024.0)
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        let _ = self.child.wait();
    }
}

