//! For tests: real etcd clusters of the installed `etcd` binary, on 127.0.0.1 at free ports
//! with temporary data directories (in `/dev/shm` when there is one, since etcd fsyncs every
//! write). [`EtcdCluster::shared`] is one 3-member cluster per test process, stopped by a
//! watchdog when the process exits however it ends; [`EtcdCluster::start`] gives a private
//! one, stopped when dropped, for tests that kill members; [`EtcdCluster::start_tls`] one
//! serving its clients over TLS and demanding client certificates. Panics when etcd cannot
//! start: it is test support only.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use oxplane_testing::Watchdog;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::{EtcdOptions, EtcdStore};
use crate::CompactionPolicy;

/// One member of a test cluster.
struct Member {
    name: String,
    client_port: u16,
    peer_port: u16,
    /// Plain-HTTP `/health` and `/metrics`, whether clients are served over TLS or not.
    metrics_port: u16,
    child: Option<Child>,
}

/// The PEM files an etcd serves its clients with over TLS: its certificate and key, and the CA
/// client certificates must be signed by (`--client-cert-auth`).
#[derive(Clone, Debug)]
pub struct ServerTls {
    /// The serving certificate (for 127.0.0.1).
    pub cert: PathBuf,
    /// Its private key.
    pub key: PathBuf,
    /// The CA that signs client certificates.
    pub client_ca: PathBuf,
}

/// A running etcd cluster.
pub struct EtcdCluster {
    dir: PathBuf,
    members: Mutex<Vec<Member>>,
    token: String,
    /// Whether dropping the cluster stops it (the shared one is stopped by its watchdog).
    owned: bool,
    /// TLS for clients, when served over it.
    tls: Option<ServerTls>,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn temp_root() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() { shm.to_path_buf() } else { std::env::temp_dir() }
}

impl EtcdCluster {
    /// The process's shared 3-member cluster, started on first use.
    pub fn shared() -> &'static EtcdCluster {
        static CLUSTER: OnceLock<EtcdCluster> = OnceLock::new();
        CLUSTER.get_or_init(|| {
            let mut cluster = EtcdCluster::start(3);
            cluster.owned = false;
            cluster.watchdog();
            cluster
        })
    }

    /// A private cluster of `members` members, stopped and removed when dropped.
    pub fn start(members: usize) -> EtcdCluster {
        EtcdCluster::start_in(&temp_root(), members)
    }

    /// A private cluster with its data in a new directory under `root` (benchmarks put it on
    /// the disk they measure).
    pub fn start_in(root: &Path, members: usize) -> EtcdCluster {
        EtcdCluster::launch(root, members, None)
    }

    /// A private cluster serving clients over TLS only, with client certificates required.
    pub fn start_tls(members: usize, tls: ServerTls) -> EtcdCluster {
        EtcdCluster::launch(&temp_root(), members, Some(tls))
    }

    /// Like [`EtcdCluster::shared`] for [`EtcdCluster::start_tls`]: `tls` is used by the first
    /// call, which starts it; stopped when the process exits.
    pub fn shared_tls(tls: impl FnOnce() -> ServerTls) -> &'static EtcdCluster {
        static CLUSTER: OnceLock<EtcdCluster> = OnceLock::new();
        CLUSTER.get_or_init(|| {
            let mut cluster = EtcdCluster::start_tls(1, tls());
            cluster.owned = false;
            cluster.watchdog();
            cluster
        })
    }

    fn launch(root: &Path, members: usize, tls: Option<ServerTls>) -> EtcdCluster {
        let dir = tempfile::Builder::new().prefix("oxplane-etcd-").tempdir_in(root).unwrap().keep();
        static COUNT: AtomicU64 = AtomicU64::new(0);
        let token = format!("oxplane-test-{}-{}", std::process::id(), COUNT.fetch_add(1, Ordering::Relaxed));
        let members = (0..members)
            .map(|i| Member {
                name: format!("m{i}"),
                client_port: free_port(),
                peer_port: free_port(),
                metrics_port: free_port(),
                child: None,
            })
            .collect();
        let cluster = EtcdCluster { dir, members: Mutex::new(members), token, owned: true, tls };
        let count = cluster.members.lock().unwrap().len();
        for i in 0..count {
            cluster.spawn(i, "new");
        }
        for i in 0..count {
            cluster.wait_healthy(i);
        }
        cluster
    }

    fn initial_cluster(members: &[Member]) -> String {
        members.iter().map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer_port)).collect::<Vec<_>>().join(",")
    }

    fn spawn(&self, index: usize, state: &str) {
        let mut members = self.members.lock().unwrap();
        let initial = Self::initial_cluster(&members);
        let member = &mut members[index];
        let log = std::fs::File::create(self.dir.join(format!("{}.log", member.name))).unwrap();
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let mut command = Command::new("etcd");
        if let Some(tls) = &self.tls {
            command
                .arg(format!("--cert-file={}", tls.cert.display()))
                .arg(format!("--key-file={}", tls.key.display()))
                .arg(format!("--trusted-ca-file={}", tls.client_ca.display()))
                .arg("--client-cert-auth");
        }
        let child = command
            .arg("--name")
            .arg(&member.name)
            .arg("--data-dir")
            .arg(self.dir.join(&member.name))
            .arg(format!("--listen-client-urls={scheme}://127.0.0.1:{}", member.client_port))
            .arg(format!("--advertise-client-urls={scheme}://127.0.0.1:{}", member.client_port))
            .arg(format!("--listen-metrics-urls=http://127.0.0.1:{}", member.metrics_port))
            .arg(format!("--listen-peer-urls=http://127.0.0.1:{}", member.peer_port))
            .arg(format!("--initial-advertise-peer-urls=http://127.0.0.1:{}", member.peer_port))
            .arg(format!("--initial-cluster={initial}"))
            .arg(format!("--initial-cluster-state={state}"))
            .arg(format!("--initial-cluster-token={}", self.token))
            .args(["--heartbeat-interval=50", "--election-timeout=500", "--logger=zap", "--log-level=warn"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("etcd is not installed (scripts/test installs etcd-server)");
        member.child = Some(child);
    }

    /// Waits until member `index` reports itself healthy (it has a leader).
    fn wait_healthy(&self, index: usize) {
        let port = self.members.lock().unwrap()[index].metrics_port;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if health(port) {
                return;
            }
            assert!(Instant::now() < deadline, "etcd member {index} not healthy within 60 s; logs in {}", self.dir.display());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The members' client URLs.
    pub fn endpoints(&self) -> Vec<String> {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        self.members.lock().unwrap().iter().map(|m| format!("{scheme}://127.0.0.1:{}", m.client_port)).collect()
    }

    /// Store options for this cluster under `prefix`, with automatic compaction off.
    pub fn options(&self, prefix: &str) -> EtcdOptions {
        let mut options = EtcdOptions::new(self.endpoints());
        options.prefix = prefix.to_string();
        options.compaction = CompactionPolicy::disabled();
        options
    }

    /// Kills member `index` with SIGKILL.
    pub fn kill(&self, index: usize) {
        let mut members = self.members.lock().unwrap();
        if let Some(mut child) = members[index].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts member `index` again on its data directory and waits until it is healthy.
    pub fn restart(&self, index: usize) {
        self.spawn(index, "existing");
        self.wait_healthy(index);
    }

    /// Kills every member with SIGKILL: the whole cluster is gone.
    pub fn kill_all(&self) {
        let count = self.members.lock().unwrap().len();
        for i in 0..count {
            self.kill(i);
        }
    }

    /// Starts every killed member again and waits until all are healthy (one member alone has
    /// no quorum, so they start together).
    pub fn restart_all(&self) {
        let stopped: Vec<usize> =
            self.members.lock().unwrap().iter().enumerate().filter(|(_, m)| m.child.is_none()).map(|(i, _)| i).collect();
        for &i in &stopped {
            self.spawn(i, "existing");
        }
        for &i in &stopped {
            self.wait_healthy(i);
        }
    }

    /// Stops the members with SIGKILL when this test process is gone, and removes the data.
    fn watchdog(&self) {
        let watchdog = self.members.lock().unwrap().iter().filter_map(|m| m.child.as_ref()).fold(Watchdog::new(), |w, c| w.kill(c.id()));
        watchdog.remove(&self.dir).arm().unwrap();
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        self.kill_all();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Whether etcd's `/health` on `port` says the member is healthy.
fn health(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(500)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream.write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").is_err() {
        return false;
    }
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.contains("\"health\":\"true\"")
}

/// A prefix no other test of this process uses.
pub fn unique_prefix(name: &str) -> String {
    static COUNT: AtomicU64 = AtomicU64::new(0);
    format!("/test-{}-{name}-{}", std::process::id(), COUNT.fetch_add(1, Ordering::Relaxed))
}

/// Serialises the tests that assert exact revisions: etcd has one revision counter for the
/// whole cluster, so a store's revisions are gap-free only while nothing else writes to it.
pub async fn exclusive() -> OwnedSemaphorePermit {
    static GATE: OnceLock<Arc<Semaphore>> = OnceLock::new();
    GATE.get_or_init(|| Arc::new(Semaphore::new(1))).clone().acquire_owned().await.unwrap()
}

/// A fresh store under a new prefix of the shared cluster, holding [`exclusive`] until the
/// returned permit is dropped. For `conformance_suite!`, which builds stores synchronously
/// inside a multi-threaded runtime.
pub fn fresh_store(name: &str) -> (EtcdStore, OwnedSemaphorePermit) {
    let cluster = EtcdCluster::shared();
    tokio::task::block_in_place(|| {
        tokio::runtime::Handle::current().block_on(async {
            let permit = exclusive().await;
            let store = EtcdStore::open(cluster.options(&unique_prefix(name))).await.expect("open the etcd store");
            (store, permit)
        })
    })
}
