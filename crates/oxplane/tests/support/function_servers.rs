//! Function servers started as their own processes for end-to-end tests: the third-party
//! Python functions that `scripts/test` installs into the repository's `.venv`, and
//! `oxplane function serve`. Each listens on a free port of 127.0.0.1, insecure or with the
//! certificate directory given, and is killed when dropped.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The repository's root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A program installed by `scripts/test` under the repository's `.venv`.
pub fn venv_program(relative: &str) -> PathBuf {
    let path = repo_root().join(".venv").join(relative);
    assert!(path.exists(), "{} is missing: run ./scripts/test, which installs the Python functions", path.display());
    path
}

/// A port of 127.0.0.1 nobody listens on (free when this returns).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A running function server, killed when dropped.
pub struct FunctionServer {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub address: String,
    log: PathBuf,
}

impl FunctionServer {
    /// Starts `program args... --address 127.0.0.1:PORT` plus `--insecure` or
    /// `--tls-certs-dir DIR`, logging to `log_dir`, and waits until it accepts connections.
    pub fn start(program: &Path, args: &[&str], tls_certs_dir: Option<&Path>, log_dir: &Path) -> FunctionServer {
        let address = format!("127.0.0.1:{}", free_port());
        let name = program.file_name().and_then(|n| n.to_str()).unwrap_or("function");
        let log = log_dir.join(format!("{name}-{}.log", address.replace([':', '.'], "-")));
        let mut command = Command::new(program);
        command.args(args).args(["--address", &address]);
        match tls_certs_dir {
            Some(dir) => command.arg("--tls-certs-dir").arg(dir),
            None => command.arg("--insecure"),
        };
        let file = std::fs::File::create(&log).unwrap();
        let child = command.stdin(Stdio::null()).stdout(file.try_clone().unwrap()).stderr(file).spawn().unwrap();
        let mut server = FunctionServer { child, address, log };
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect(&server.address).is_err() {
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("{} exited with {status} before listening:\n{}", program.display(), server.log());
            }
            assert!(Instant::now() < deadline, "{} did not listen on {}:\n{}", program.display(), server.address, server.log());
            std::thread::sleep(Duration::from_millis(100));
        }
        server
    }

    /// crossplane-function-pythonic (its own virtualenv: it pins its own SDK version).
    pub fn pythonic(tls_certs_dir: Option<&Path>, log_dir: &Path) -> FunctionServer {
        FunctionServer::start(&venv_program("pythonic/bin/function-pythonic"), &[], tls_certs_dir, log_dir)
    }

    /// The test function written with crossplane-function-sdk-python.
    pub fn sdk_function(tls_certs_dir: Option<&Path>, log_dir: &Path) -> FunctionServer {
        FunctionServer::sdk_function_counting(tls_certs_dir, log_dir, None)
    }

    /// The test function written with crossplane-function-sdk-python, writing one line per
    /// call into `calls_file` when one is given; its responses live ten minutes (so a cached
    /// one outlives a slow restart).
    pub fn sdk_function_counting(tls_certs_dir: Option<&Path>, log_dir: &Path, calls_file: Option<&Path>) -> FunctionServer {
        let script = repo_root().join("crates/oxplane/tests/python/sdk_function.py");
        let mut args = vec![script.to_str().unwrap().to_string()];
        if let Some(file) = calls_file {
            args.extend(["--calls-file".to_string(), file.to_str().unwrap().to_string(), "--ttl-seconds".to_string(), "600".to_string()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        FunctionServer::start(&venv_program("bin/python"), &args, tls_certs_dir, log_dir)
    }

    /// `oxplane function serve NAME`.
    pub fn oxplane(name: &str, tls_certs_dir: Option<&Path>, log_dir: &Path) -> FunctionServer {
        FunctionServer::start(Path::new(env!("CARGO_BIN_EXE_oxplane")), &["function", "serve", name], tls_certs_dir, log_dir)
    }

    /// What the server logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for FunctionServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes a function's server certificate directory with the real `oxplane function certs`,
/// from the CA in the data directory `data_dir`.
pub fn oxplane_certs(data_dir: &Path, out: &Path) {
    let output = Command::new(env!("CARGO_BIN_EXE_oxplane"))
        .args(["function", "certs", "--out"])
        .arg(out)
        .arg("--data-dir")
        .arg(data_dir)
        .output()
        .unwrap();
    assert!(output.status.success(), "oxplane function certs failed: {}", String::from_utf8_lossy(&output.stderr));
}
