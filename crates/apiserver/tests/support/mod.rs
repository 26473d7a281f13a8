//! Test support: an in-process `oxplane up` on a free port in a temporary data directory, and a
//! kube-rs client built from the kubeconfig it writes, exactly as a user's client would be.

#![allow(dead_code)]

use std::time::Duration;

use oxplane_apiserver::server::{ServerConfig, run};
use tokio::sync::oneshot;

/// A running server; stopped when dropped.
pub struct TestServer {
    /// The data directory (kept alive as long as the server).
    pub dir: DataDir,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl TestServer {
    /// Starts a server in a fresh data directory and waits for its kubeconfig.
    pub async fn start() -> TestServer {
        TestServer::start_with(DataDir::Temp(tempfile::tempdir().unwrap())).await
    }

    /// Starts a server on an existing data directory (owned by the caller).
    pub async fn start_in(path: &std::path::Path) -> TestServer {
        TestServer::start_with(DataDir::Path(path.to_path_buf())).await
    }

    /// Starts a server on an existing data directory with settings changed by `configure`.
    pub async fn start_in_configured(path: &std::path::Path, configure: impl FnOnce(&mut ServerConfig)) -> TestServer {
        TestServer::start_with_dir(DataDir::Path(path.to_path_buf()), configure).await
    }

    /// Stops the server and moves its data directory to `to`, for a later `start_in`.
    pub async fn stop_keeping(mut self, from: &std::path::Path, to: &std::path::Path) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        copy_dir(from, to);
    }

    /// Starts a server whose watch cache keeps only `window` events.
    pub async fn start_with_window(window: usize) -> TestServer {
        TestServer::start_configured(|config| config.watch_cache_window = window).await
    }

    /// Starts a server in a fresh data directory with settings changed by `configure`.
    pub async fn start_configured(configure: impl FnOnce(&mut ServerConfig)) -> TestServer {
        TestServer::start_with_dir(DataDir::Temp(tempfile::tempdir().unwrap()), configure).await
    }

    async fn start_with(dir: DataDir) -> TestServer {
        TestServer::start_with_dir(dir, |_| {}).await
    }

    async fn start_with_dir(dir: DataDir, configure: impl FnOnce(&mut ServerConfig)) -> TestServer {
        let _ = std::fs::remove_file(dir.path().join("kubeconfig"));
        let mut config = ServerConfig::new(dir.path().to_path_buf(), "127.0.0.1:0");
        configure(&mut config);
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            run(config, async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
        });
        let kubeconfig = dir.path().join("kubeconfig");
        for _ in 0..600 {
            if kubeconfig.exists() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(kubeconfig.exists(), "the server did not write its kubeconfig");
        TestServer { dir, stop: Some(stop), task: Some(task) }
    }

    /// A kube-rs client from the server's kubeconfig.
    pub async fn client(&self) -> kube::Client {
        kube::Client::try_from(self.client_config().await).unwrap()
    }

    /// As [`TestServer::client`], without kube-rs's retries of 429, 503 and 504 (to see them).
    pub async fn client_without_retries(&self) -> kube::Client {
        let mut config = self.client_config().await;
        config.default_retry = false;
        kube::Client::try_from(config).unwrap()
    }

    async fn client_config(&self) -> kube::Config {
        let kubeconfig = kube::config::Kubeconfig::read_from(self.dir.path().join("kubeconfig")).unwrap();
        kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await.unwrap()
    }

    /// Stops the server and waits for it to close its store.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

/// A server started in this process and reached through its in-process service, for tests
/// that need its state (admission hooks, the store); stopped when dropped.
pub struct InProcess {
    /// The shared server state.
    pub state: std::sync::Arc<oxplane_apiserver::http::AppState>,
    /// A kube-rs client on the in-process service.
    pub client: kube::Client,
    _dir: tempfile::TempDir,
    stop: Option<oneshot::Sender<()>>,
}

impl InProcess {
    /// Starts a server in a fresh data directory; `prepare` runs before it serves.
    pub async fn start(prepare: impl FnOnce(&oxplane_apiserver::server::Server)) -> InProcess {
        let dir = tempfile::tempdir().unwrap();
        let server = oxplane_apiserver::server::Server::start(ServerConfig::new(dir.path().to_path_buf(), "127.0.0.1:0")).await.unwrap();
        prepare(&server);
        let state = server.state().clone();
        let client = kube::Client::new(server.local_service(), "default");
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(server.serve(async {
            let _ = stopped.await;
        }));
        InProcess { state, client, _dir: dir, stop: Some(stop) }
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// A data directory: temporary (removed with the server) or the caller's.
pub enum DataDir {
    /// Removed when dropped.
    Temp(tempfile::TempDir),
    /// Left alone.
    Path(std::path::PathBuf),
}

impl DataDir {
    /// Its path.
    pub fn path(&self) -> &std::path::Path {
        match self {
            DataDir::Temp(dir) => dir.path(),
            DataDir::Path(path) => path,
        }
    }
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}
