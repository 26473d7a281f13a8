//! Test support: an in-process `oxplane up` on a free port in a temporary data directory, and a
//! kube-rs client built from the kubeconfig it writes, exactly as a user's client would be.

#![allow(dead_code)]

use std::time::Duration;

use oxplane_apiserver::server::{ServerConfig, run};
use tokio::sync::oneshot;

/// A running server; stopped when dropped.
pub struct TestServer {
    /// The data directory.
    pub dir: tempfile::TempDir,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl TestServer {
    /// Starts a server and waits for its kubeconfig.
    pub async fn start() -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        let config = ServerConfig { data_dir: dir.path().to_path_buf(), listen: "127.0.0.1:0".into() };
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
        let kubeconfig = kube::config::Kubeconfig::read_from(self.dir.path().join("kubeconfig")).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await.unwrap();
        kube::Client::try_from(config).unwrap()
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

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}
