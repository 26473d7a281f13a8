//! The official Kubernetes Python client against `oxplane up`: the script in
//! `tests/python/client_check.py`, run with the virtualenv that `scripts/test` installs.

use crate::support;

use std::path::PathBuf;
use std::process::Command;

use support::Server;

#[test]
fn the_python_client_lists_creates_patches_and_watches() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = root.join(".venv/bin/python");
    assert!(python.exists(), "{} is missing: run ./scripts/test, which installs the Python client", python.display());
    let server = Server::start();
    let out = Command::new(&python)
        .arg(root.join("tests/python/client_check.py"))
        .env("KUBECONFIG", server.kubeconfig())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("PYTHON-CLIENT-OK"),
        "python client check failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
