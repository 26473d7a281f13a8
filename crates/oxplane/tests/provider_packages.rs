//! A Provider package that is not built in, pulled from a real registry (Debian's
//! `docker-registry` on 127.0.0.1) and run as a local process, end to end with the real kubectl.
//! The provider is `fixtures/provider-things`: a Python program on the official Kubernetes
//! client (a client other than oxplane's own, talking to it only through the kubeconfig it is
//! given), with a managed CRD of two versions converted by the webhook it serves over TLS, and a
//! validating admission webhook on the same server (its package's
//! ValidatingWebhookConfiguration, `failurePolicy: Fail`). The
//! package is built with `oxplane xpkg build` around a runtime whose entrypoint runs it. It
//! declares `safe-start`: its managed kind is an MRD the default activation policy activates.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::support::processes::{alive, processes_in, write_file};
use crate::support::function_servers::{repo_root, venv_program};
use crate::support::{Server, condition, within};

use oxplane_xpkg::testing::Registry;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/provider-things")
}

/// Builds the package in `folder` with the runtime `root` and `entrypoint`, pushes it as
/// `reference`.
fn build_and_push(folder: &Path, root: &Path, entrypoint: &str, reference: &str, out: &Path) {
    let built = Command::new(env!("CARGO_BIN_EXE_oxplane"))
        .args(["xpkg", "build", "-f", folder.to_str().unwrap(), "-o", out.to_str().unwrap(), "--runtime-root"])
        .arg(root)
        .args(["--entrypoint", entrypoint, "--env", "FIXTURE_IMAGE_ENV=kept", "--env", "PYTHONDONTWRITEBYTECODE=1"])
        .output()
        .unwrap();
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    let pushed = Command::new(env!("CARGO_BIN_EXE_oxplane")).args(["xpkg", "push", reference, "-f", out.to_str().unwrap()]).output().unwrap();
    assert!(pushed.status.success(), "{}", String::from_utf8_lossy(&pushed.stderr));
}

/// The runtime's root filesystem: the provider program and a wrapper running it with the
/// repository's Python (the image's entrypoint), and a program that fails at once.
fn runtime_root(dir: &Path) -> PathBuf {
    let root = dir.join("rootfs");
    let program = std::fs::read_to_string(fixture().join("provider.py")).unwrap();
    write_file(&root.join("usr/local/lib/provider/provider.py"), &program, false);
    let python = venv_program("bin/python");
    write_file(&root.join("usr/local/bin/provider"), &format!("#!/bin/sh\nexec {} \"$(dirname \"$0\")/../lib/provider/provider.py\" \"$@\"\n", python.display()), true);
    write_file(&root.join("usr/local/bin/broken"), "#!/bin/sh\necho \"provider-broken: missing configuration file /etc/provider.yaml\"\nexit 2\n", true);
    root
}

/// `oxplane logs ARGS` against the server's data directory: (success, stdout, stderr).
fn logs(server: &Server, args: &[&str]) -> (bool, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_oxplane")).arg("logs").args(args).arg("--data-dir").arg(server.dir()).output().unwrap();
    (output.status.success(), String::from_utf8_lossy(&output.stdout).into_owned(), String::from_utf8_lossy(&output.stderr).into_owned())
}

/// The pids of live processes running provider.py from a root filesystem in `dir`.
fn provider_processes(dir: &Path) -> Vec<u32> {
    processes_in(&dir.join("runtimes/providers/rootfs"), "provider.py")
}

fn can_i(server: &Server, user: &str, args: &[&str]) -> String {
    let mut command = server.kubectl_command(&["auth", "can-i"]);
    command.args(args).arg(format!("--as={user}"));
    String::from_utf8_lossy(&command.output().unwrap().stdout).trim().to_string()
}

fn thing_colour(server: &Server, name: &str) -> Option<String> {
    server.get(&["things.v1beta1.fixture.example.org", name]).and_then(|t| t["status"]["atProvider"]["colour"].as_str().map(str::to_string))
}

#[test]
fn a_pulled_provider_runs_as_a_process_with_its_own_identity_and_serves_its_conversion_webhook() {
    assert!(repo_root().join(".venv/bin/python").exists(), "run ./scripts/test once: it installs the Python client the fixture uses");
    let registry = Registry::shared();
    let dir = tempfile::tempdir().unwrap();
    let root = runtime_root(dir.path());
    let source = format!("{}/fixture/provider-things:v0.1.0", registry.host);
    build_and_push(&fixture().join("package"), &root, "/usr/local/bin/provider", &source, &dir.path().join("things.xpkg"));

    // The broken package below is pushed under the name of a built-in provider, which this
    // flag has pulled instead.
    let broken_source = format!("{}/fixture/provider-nop:v0.1.0", registry.host);
    let mut server = Server::start_with(&["--pull-package", &format!("{}/fixture/provider-nop", registry.host)]);
    server.apply(&format!("apiVersion: pkg.crossplane.io/v1\nkind: Provider\nmetadata: {{name: provider-things}}\nspec: {{package: \"{source}\"}}\n"));
    server.kubectl(&["wait", "--for=condition=Healthy", "provider/provider-things", "--timeout=120s"]);
    let provider = server.get(&["provider", "provider-things"]).unwrap();
    let revision_name = provider["status"]["currentRevision"].as_str().unwrap().to_string();
    let revision = server.get(&["providerrevision", &revision_name]).unwrap();
    assert_eq!(condition(&revision, "RuntimeHealthy").unwrap()["status"], "True", "{revision}");
    assert_eq!(revision["spec"]["tlsServerSecretName"], "provider-things-tls-server");
    assert_eq!(revision["spec"]["tlsClientSecretName"], "provider-things-tls-client");
    for secret in ["provider-things-tls-server", "provider-things-tls-client"] {
        let secret = server.get(&["secret", secret, "-n", "crossplane-system"]).unwrap();
        for key in ["tls.crt", "tls.key", "ca.crt"] {
            assert!(secret["data"][key].as_str().is_some_and(|v| !v.is_empty()), "{secret}");
        }
    }
    // Installed as a built-in provider's kinds are: the managed kind as an MRD, made Inactive
    // (safe-start) and activated by the default policy, which made its CRD.
    assert_eq!(revision["status"]["capabilities"], serde_json::json!(["safe-start"]), "{revision}");
    let refs = revision["status"]["objectRefs"].as_array().unwrap();
    assert!(refs.iter().any(|r| r["kind"] == "ManagedResourceDefinition" && r["name"] == "things.fixture.example.org"), "{revision}");
    let mrd = server.get(&["mrd", "things.fixture.example.org"]).unwrap();
    assert_eq!(mrd["spec"]["state"], "Active", "{mrd}");
    assert_eq!(condition(&mrd, "Established").unwrap()["status"], "True", "{mrd}");
    assert_eq!(mrd["metadata"]["ownerReferences"][0]["name"], revision_name.as_str(), "{mrd}");
    // An MRD the package ships is installed as shipped, its connection details kept, and
    // activated the same way.
    assert!(refs.iter().any(|r| r["kind"] == "ManagedResourceDefinition" && r["name"] == "gadgets.fixture.example.org"), "{revision}");
    let gadgets = server.get(&["mrd", "gadgets.fixture.example.org"]).unwrap();
    assert_eq!(gadgets["spec"]["state"], "Active", "{gadgets}");
    assert_eq!(gadgets["spec"]["connectionDetails"][1]["name"], "password", "{gadgets}");
    server.kubectl(&["wait", "--for=condition=Established", "crd/gadgets.fixture.example.org", "--timeout=30s"]);
    let crd = server.get(&["crd", "things.fixture.example.org"]).unwrap();
    let service = &crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"];
    assert_eq!((service["name"].as_str(), service["namespace"].as_str(), service["port"].as_i64(), service["path"].as_str()), (Some("provider-things"), Some("crossplane-system"), Some(9443), Some("/convert")));

    // A Thing written through v1alpha1 is stored (and reconciled) as v1beta1 by way of the
    // provider's webhook, and read back through both versions.
    // Healthy means the process runs (Crossplane sets no readiness probe either): the write
    // through v1alpha1 succeeds once its webhook listens.
    within(Duration::from_secs(60), "a write through v1alpha1 to be converted by the provider", || {
        server.kubectl_try(&["apply", "-f", "-"], "apiVersion: fixture.example.org/v1alpha1\nkind: Thing\nmetadata: {name: blue}\nspec: {forProvider: {color: blue}}\n").is_ok()
    });
    server.kubectl(&["wait", "--for=condition=Ready", "things.v1beta1.fixture.example.org/blue", "--timeout=60s"]);
    let beta = server.get(&["things.v1beta1.fixture.example.org", "blue"]).unwrap();
    assert_eq!(beta["spec"]["forProvider"]["colour"], "blue", "{beta}");
    let account = format!("system:serviceaccount:crossplane-system:{revision_name}");
    assert_eq!(beta["status"]["atProvider"], serde_json::json!({"colour": "blue", "identity": account}), "reconciled by the process, acting as its ServiceAccount");
    let alpha = server.get(&["things.v1alpha1.fixture.example.org", "blue"]).unwrap();
    assert_eq!(alpha["apiVersion"], "fixture.example.org/v1alpha1");
    assert_eq!((alpha["spec"]["forProvider"]["color"].as_str(), alpha["status"]["atProvider"]["color"].as_str()), (Some("blue"), Some("blue")), "{alpha}");

    // The package's ValidatingWebhookConfiguration, installed as Crossplane installs it: renamed
    // after the package, pointed at its Service with oxplane's CA (the `ca.crt` of its Secrets),
    // controlled by the revision and owned by the Provider, listed in the revision's objectRefs.
    let configuration = server.get(&["validatingwebhookconfiguration", "crossplane-provider-provider-things"]).unwrap();
    let client_config = &configuration["webhooks"][0]["clientConfig"];
    let service = &client_config["service"];
    assert_eq!(
        (service["name"].as_str(), service["namespace"].as_str(), service["port"].as_i64(), service["path"].as_str()),
        (Some("provider-things"), Some("crossplane-system"), Some(9443), Some("/validate-fixture-example-org-v1beta1-thing")),
        "{configuration}"
    );
    let server_secret = server.get(&["secret", "provider-things-tls-server", "-n", "crossplane-system"]).unwrap();
    assert_eq!(client_config["caBundle"], server_secret["data"]["ca.crt"], "{configuration}");
    let owners = &configuration["metadata"]["ownerReferences"];
    assert_eq!((owners[0]["kind"].as_str(), owners[0]["name"].as_str(), owners[0]["controller"].as_bool()), (Some("ProviderRevision"), Some(revision_name.as_str()), Some(true)), "{configuration}");
    assert_eq!((owners[1]["kind"].as_str(), owners[1]["name"].as_str()), (Some("Provider"), Some("provider-things")), "{configuration}");
    assert!(refs.iter().any(|r| r["kind"] == "ValidatingWebhookConfiguration" && r["name"] == "crossplane-provider-provider-things"), "{revision}");
    // The API server calls it: a forbidden colour is refused with the webhook's message, others pass.
    let refused = server
        .kubectl_try(&["apply", "-f", "-"], "apiVersion: fixture.example.org/v1beta1\nkind: Thing\nmetadata: {name: refused}\nspec: {forProvider: {colour: forbidden}}\n")
        .unwrap_err();
    assert!(refused.contains("admission webhook \"vthing.fixture.example.org\" denied the request: colour 'forbidden' is not a colour a Thing may have"), "{refused}");
    assert!(server.get(&["things.v1beta1.fixture.example.org", "refused"]).is_none());
    // Written through v1alpha1, which its rules do not name, it is refused all the same: the
    // webhook (matchPolicy Equivalent, the default) sees it converted to v1beta1.
    let refused = server
        .kubectl_try(&["apply", "-f", "-"], "apiVersion: fixture.example.org/v1alpha1\nkind: Thing\nmetadata: {name: refused}\nspec: {forProvider: {color: forbidden}}\n")
        .unwrap_err();
    assert!(refused.contains("denied the request: colour 'forbidden' is not a colour a Thing may have"), "{refused}");
    let refused = server.kubectl_try(&["patch", "things.v1beta1.fixture.example.org", "blue", "--type=merge", "-p", "{\"spec\":{\"forProvider\":{\"colour\":\"forbidden\"}}}"], "").unwrap_err();
    assert!(refused.contains("denied the request"), "{refused}");
    server.apply("apiVersion: fixture.example.org/v1beta1\nkind: Thing\nmetadata: {name: allowed}\nspec: {forProvider: {colour: yellow}}\n");
    within(Duration::from_secs(30), "the allowed Thing to be reconciled", || thing_colour(&server, "allowed").as_deref() == Some("yellow"));

    // Its identity may do what the RBAC manager's roles grant, and nothing else: the process
    // was refused listing namespaces, and said so in its log.
    assert_eq!(can_i(&server, &account, &["update", "things.fixture.example.org"]), "yes");
    assert_eq!(can_i(&server, &account, &["delete", "things.fixture.example.org"]), "no");
    assert_eq!(can_i(&server, &account, &["list", "namespaces"]), "no");
    let (ok, log, _) = logs(&server, &["provider/provider-things"]);
    assert!(ok);
    assert!(log.contains("may list namespaces: False"), "{log}");
    assert!(log.contains("listing namespaces: 403 Forbidden"), "{log}");
    // Crossplane's environment, and the image's own.
    for line in ["POD_NAMESPACE=crossplane-system", "PROVIDER_NAME=provider-things", &format!("REVISION_NAME={revision_name}"), "FIXTURE_IMAGE_ENV=kept"] {
        assert!(log.lines().any(|l| l == line), "{line} missing from\n{log}");
    }
    // In a network namespace of its own, as in a pod: it binds controller-runtime's fixed
    // ports, given none, and reaches the API server and serves its webhook through oxplane.
    for line in ["WEBHOOK_PORT=", "METRICS_BIND_ADDRESS=", "serving metrics on :8080"] {
        assert!(log.lines().any(|l| l == line), "{line} missing from\n{log}");
    }
    assert!(log.contains("serving conversion webhooks on 127.0.0.1:9443"), "{log}");
    let process = provider_processes(server.dir());
    let namespace = |pid: u32| std::fs::read_link(format!("/proc/{pid}/ns/net")).unwrap();
    assert_ne!(namespace(process[0]), namespace(server.pid()), "the provider shares oxplane's network");
    let uid = revision["metadata"]["uid"].as_str().unwrap();
    assert!(log.lines().any(|l| l == format!("REVISION_UID={uid}")), "{log}");
    assert!(log.contains(&format!("acting as {account}")), "{log}");
    // In-cluster clients find the API server and the ServiceAccount's token where a pod has them.
    assert!(log.lines().any(|l| l == "KUBERNETES_SERVICE_HOST=127.0.0.1"), "{log}");
    assert!(log.contains(&format!("in-cluster identity: {account}")), "{log}");
    assert!(log.lines().any(|l| l.starts_with("WEBHOOK_TLS_CERT_DIR=") && l.ends_with("/server")), "{log}");
    let (ok, _, error) = logs(&server, &["provider/absent"]);
    assert!(!ok && error.contains("no provider named \"absent\""), "{error}");

    // Killed, the process is started again: RuntimeHealthy goes False (naming the exit) and
    // back to True, and the Thing goes on being reconciled.
    let first = provider_processes(server.dir());
    assert_eq!(first.len(), 1, "{first:?}");
    let mut watch = server.kubectl_command(&["get", "providerrevision", &revision_name, "--watch", "-o", "json"]);
    let watched = dir.path().join("watched.json");
    let mut watch = watch.stdout(std::fs::File::create(&watched).unwrap()).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert!(Command::new("kill").args(["-KILL", &first[0].to_string()]).status().unwrap().success());
    within(Duration::from_secs(30), "the provider's process to be started again", || {
        let now = provider_processes(server.dir());
        now.len() == 1 && now != first
    });
    within(Duration::from_secs(30), "RuntimeHealthy to be True again", || {
        server.get(&["providerrevision", &revision_name]).is_some_and(|r| condition(&r, "RuntimeHealthy").is_some_and(|c| c["status"] == "True"))
    });
    let _ = watch.kill();
    let _ = watch.wait();
    let seen = std::fs::read_to_string(&watched).unwrap();
    assert!(seen.contains("the provider process exited (signal: 9 (SIGKILL))"), "RuntimeHealthy never said the process was down:\n{seen}");
    // Only the runtime was down: the revision itself stayed healthy.
    let states: Vec<serde_json::Value> = serde_json::Deserializer::from_str(&seen).into_iter::<serde_json::Value>().map(Result::unwrap).collect();
    let down: Vec<&serde_json::Value> = states.iter().filter(|r| condition(r, "RuntimeHealthy").is_some_and(|c| c["status"] == "False")).collect();
    assert!(!down.is_empty());
    for state in down {
        assert_eq!(condition(state, "RuntimeHealthy").unwrap()["reason"], "UnhealthyPackageRevision");
        assert_eq!(condition(state, "RevisionHealthy").unwrap()["status"], "True", "{state}");
    }
    // Its validating webhook fails closed (`failurePolicy: Fail`): writes of Things succeed once
    // the new process listens.
    within(Duration::from_secs(30), "a write admitted by the restarted process's webhook", || {
        server.kubectl_try(&["patch", "things.v1beta1.fixture.example.org", "blue", "--type=merge", "-p", "{\"spec\":{\"forProvider\":{\"colour\":\"red\"}}}"], "").is_ok()
    });
    within(Duration::from_secs(30), "the restarted process to reconcile", || thing_colour(&server, "blue").as_deref() == Some("red"));

    // oxplane killed with SIGKILL: the provider's process does not outlive it, and the next
    // start runs exactly one again, which goes on reconciling.
    let before = provider_processes(server.dir());
    server.kill();
    within(Duration::from_secs(10), "the provider's process to exit with oxplane", || before.iter().all(|p| !alive(*p)));
    server.spawn();
    // Writes through v1alpha1 need the provider's webhook: they succeed once its new process serves.
    within(Duration::from_secs(90), "a write through v1alpha1 to be converted by the new process", || {
        server.kubectl_try(&["patch", "things.v1alpha1.fixture.example.org", "blue", "--type=merge", "-p", "{\"spec\":{\"forProvider\":{\"color\":\"green\"}}}"], "").is_ok()
    });
    within(Duration::from_secs(90), "the provider of the new start to reconcile", || thing_colour(&server, "blue").as_deref() == Some("green"));
    assert_eq!(provider_processes(server.dir()).len(), 1);

    // A package whose binary exits at once: the Provider says why, with its output, and the
    // process is started again after a growing backoff. Its reference names the built-in
    // provider-nop, which `--pull-package` turned off for it: it is pulled and run.
    let broken = dir.path().join("broken");
    write_file(&broken.join("crossplane.yaml"), "apiVersion: meta.pkg.crossplane.io/v1\nkind: Provider\nmetadata: {name: provider-broken}\n", false);
    build_and_push(&broken, &root, "/usr/local/bin/broken", &broken_source, &dir.path().join("broken.xpkg"));
    server.apply(&format!("apiVersion: pkg.crossplane.io/v1\nkind: Provider\nmetadata: {{name: provider-broken}}\nspec: {{package: \"{broken_source}\"}}\n"));
    let mut message = String::new();
    within(Duration::from_secs(60), "the broken provider to back off to 4s", || {
        let healthy = server.get(&["provider", "provider-broken"]).and_then(|p| condition(&p, "Healthy"));
        message = healthy.as_ref().and_then(|c| c["message"].as_str()).unwrap_or_default().to_string();
        healthy.is_some_and(|c| c["status"] == "False" && c["reason"] == "UnhealthyPackageRevision") && message.contains("started again in 4s")
    });
    assert!(message.starts_with("Package runtime health is \"False\" with message: the provider process exited (exit status: 2)") && message.contains("missing configuration file"), "{message}");
    let (ok, log, _) = logs(&server, &["provider-broken"]);
    assert!(ok && log.contains("missing configuration file"), "{log}");

    // Uninstalled (once its managed resources are gone), the provider's objects go with it, its
    // webhook configuration too.
    server.kubectl(&["delete", "things.v1beta1.fixture.example.org", "--all", "--timeout=60s"]);
    server.kubectl(&["delete", "provider", "provider-things", "--timeout=60s"]);
    within(Duration::from_secs(60), "the webhook configuration to go with the provider", || {
        server.get(&["validatingwebhookconfiguration", "crossplane-provider-provider-things"]).is_none()
    });
}
