//! An in-process server for the tests of the layers above: started in a temporary data
//! directory on a free port, reached through [`RunningServer::local_service`] (a kube-rs
//! `Client` runs on it), stopped when dropped.

use std::path::{Path, PathBuf};

use tokio::sync::oneshot;

use crate::ServeError;
use crate::server::{LocalService, Server, ServerConfig};

/// A server running in this process.
pub struct RunningServer {
    dir: Option<tempfile::TempDir>,
    path: PathBuf,
    service: LocalService,
    url: String,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<Result<(), ServeError>>>,
}

impl RunningServer {
    /// Starts a server in a fresh temporary data directory.
    pub async fn start() -> Result<RunningServer, ServeError> {
        let dir = tempfile::tempdir().map_err(|e| ServeError::io("creating a temporary directory", e))?;
        let path = dir.path().to_path_buf();
        let mut running = RunningServer::start_in(&path).await?;
        running.dir = Some(dir);
        Ok(running)
    }

    /// Starts a server on a data directory the caller owns (to restart on it later).
    pub async fn start_in(path: &Path) -> Result<RunningServer, ServeError> {
        let server = Server::start(ServerConfig::new(path.to_path_buf(), "127.0.0.1:0")).await?;
        let service = server.local_service();
        let url = server.url();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(server.serve(async {
            let _ = stopped.await;
        }));
        Ok(RunningServer { dir: None, path: path.to_path_buf(), service, url, stop: Some(stop), task: Some(task) })
    }

    /// The in-process service (admin-authenticated).
    pub fn local_service(&self) -> LocalService {
        self.service.clone()
    }

    /// The HTTPS URL the server listens on.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The data directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stops the server and waits until its store is closed.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}
