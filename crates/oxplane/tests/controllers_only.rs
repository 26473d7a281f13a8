//! `oxplane controllers --kubeconfig`: the controllers, built-in providers and functions in a
//! process of their own, against another server that serves only the API
//! (`oxplane up --controllers=false`): the getting-started example converges through the API
//! alone.

use crate::support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use support::{Server, within};

fn example(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/getting-started").join(file);
    path.to_str().unwrap().to_string()
}

struct Controllers(std::process::Child);

impl Drop for Controllers {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_getting_started_example_converges_with_controllers_in_another_process() {
    let server = Server::start_with(&["--controllers=false"]);
    // Nothing reconciles yet: the API server alone has no Crossplane CRDs.
    let crds = server.kubectl(&["get", "crds", "-o", "name"]);
    assert!(!crds.contains("compositions.apiextensions.crossplane.io"), "{crds}");

    let log = std::fs::File::create(server.dir().join("controllers.log")).unwrap();
    let _controllers = Controllers(
        Command::new(env!("CARGO_BIN_EXE_oxplane"))
            .args(["controllers", "--kubeconfig"])
            .arg(server.kubeconfig())
            .env("OXPLANE_LOG", "info,kube=warn")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    within(Duration::from_secs(60), "the controllers install Crossplane's CRDs", || {
        server.kubectl(&["get", "crds", "-o", "name"]).contains("compositions.apiextensions.crossplane.io")
    });
    server.kubectl(&["apply", "-f", &example("00-provider.yaml"), "-f", &example("01-functions.yaml")]);
    server.kubectl(&["wait", "--for=condition=Healthy", "provider/provider-nop", "--timeout=60s"]);
    server.kubectl(&["wait", "--for=condition=Healthy", "function", "--all", "--timeout=60s"]);
    server.kubectl(&["apply", "-f", &example("02-xrd.yaml")]);
    server.kubectl(&["wait", "--for=condition=Established", "xrd/apps.example.org", "--timeout=60s"]);
    server.kubectl(&["apply", "-f", &example("03-composition.yaml"), "-f", &example("04-app.yaml")]);
    server.kubectl(&["wait", "--for=condition=Ready", "app/my-app", "--timeout=90s"]);
    let nops = server.kubectl(&["get", "nopresources", "-o", "name"]);
    assert_eq!(nops.lines().count(), 2, "{nops}");
    let size = server.kubectl(&["get", "app", "my-app", "-o", "jsonpath={.status.databaseSize}"]);
    assert_eq!(size, "db.t3.medium");
}
