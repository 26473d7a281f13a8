//! `oxplane controllers --kubeconfig`: the controllers, built-in providers and functions in a
//! process of their own, against another server that serves only the API
//! (`oxplane up --controllers=false`): the getting-started example converges through the API
//! alone, and Usage deletion protection works through the validating webhook the controllers
//! serve and register (`crossplane-no-usages`), failing closed while they are gone. The
//! built-in providers' conversion webhooks are served from the same server, and the CRDs
//! pointed at it (again when the controllers start anew).

use crate::support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use support::{Server, sigterm, within};

fn example(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/getting-started").join(file);
    path.to_str().unwrap().to_string()
}

struct Controllers(std::process::Child);

impl Controllers {
    /// `oxplane controllers --kubeconfig` against `server`, logging into `log` in its directory.
    fn start(server: &Server, log: &str) -> Controllers {
        Controllers::start_with(server, log, &[])
    }

    /// [`Controllers::start`] with extra arguments.
    fn start_with(server: &Server, log: &str, args: &[&str]) -> Controllers {
        let log = std::fs::File::create(server.dir().join(log)).unwrap();
        Controllers(
            Command::new(env!("CARGO_BIN_EXE_oxplane"))
                .args(["controllers", "--kubeconfig"])
                .arg(server.kubeconfig())
                .args(args)
                .env("OXPLANE_LOG", "info,kube=warn")
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap(),
        )
    }
}

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

    let _controllers = Controllers::start(&server, "controllers.log");
    within(Duration::from_secs(60), "the controllers install Crossplane's CRDs", || {
        server.kubectl(&["get", "crds", "-o", "name"]).contains("compositions.apiextensions.crossplane.io")
    });
    // Listed is not yet served: the first apply may find no Provider kind.
    within(Duration::from_secs(30), "the package kinds served", || {
        server.kubectl_try(&["apply", "-f", &example("00-provider.yaml"), "-f", &example("01-functions.yaml")], "").is_ok()
    });
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

const WEBHOOK: &str = "nousages.protection.crossplane.io";

/// A namespaced Usage with a reason, protecting the ConfigMap `config`.
fn usage(name: &str, config: &str) -> String {
    format!(
        "apiVersion: protection.crossplane.io/v1beta1\nkind: Usage\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  of: {{apiVersion: v1, kind: ConfigMap, resourceRef: {{name: {config}}}}}\n  reason: the database reads {config}\n"
    )
}

/// POSTs `body` to the webhook at `url` with curl, trusting only `ca_bundle`: status, body.
fn call_webhook(url: &str, ca_bundle: &str, body: &str) -> (u16, String) {
    use base64::Engine;
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, base64::engine::general_purpose::STANDARD.decode(ca_bundle).unwrap()).unwrap();
    let output = Command::new("curl")
        .args(["-sS", "-X", "POST", "-H", "Content-Type: application/json", "--data-binary", body, "-w", "\n%{http_code}", "--cacert"])
        .arg(&ca)
        .arg(url)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap();
    (code.trim().parse().unwrap(), body.to_string())
}

fn in_use(server: &Server, config: &str) -> bool {
    server.get(&["configmap", config]).is_some_and(|c| c["metadata"]["labels"]["crossplane.io/in-use"] == "true")
}

#[test]
fn usage_protection_is_a_validating_webhook_of_the_controllers() {
    let server = Server::start_with(&["--controllers=false"]);
    let mut controllers = Controllers::start(&server, "controllers.log");
    within(Duration::from_secs(60), "the controllers register crossplane-no-usages", || {
        server.kubectl(&["get", "validatingwebhookconfigurations", "-o", "name"]).contains("/crossplane-no-usages")
    });
    // Crossplane's configuration, pointing at this process's server over loopback with its CA.
    let config = server.get(&["validatingwebhookconfiguration", "crossplane-no-usages"]).unwrap();
    let webhook = &config["webhooks"][0];
    assert_eq!(config["webhooks"].as_array().unwrap().len(), 1, "{config}");
    assert_eq!(webhook["name"], WEBHOOK);
    assert_eq!(webhook["failurePolicy"], "Fail");
    assert_eq!(webhook["sideEffects"], "None");
    assert_eq!(webhook["admissionReviewVersions"], serde_json::json!(["v1"]));
    assert_eq!(webhook["rules"], serde_json::json!([{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["DELETE"], "resources": ["*"]}]));
    assert_eq!(webhook["objectSelector"], serde_json::json!({"matchLabels": {"crossplane.io/in-use": "true"}}));
    let url = webhook["clientConfig"]["url"].as_str().unwrap();
    assert!(url.starts_with("https://127.0.0.1:") && url.ends_with("/validate-no-usages"), "{url}");
    assert!(!webhook["clientConfig"]["caBundle"].as_str().unwrap_or_default().is_empty(), "{config}");

    within(Duration::from_secs(60), "the Usage CRDs installed", || {
        server.kubectl(&["get", "crds", "-o", "name"]).contains("usages.protection.crossplane.io")
    });
    server.kubectl(&["create", "configmap", "db-config", "--from-literal=size=small"]);
    server.kubectl(&["create", "configmap", "cache-config"]);
    within(Duration::from_secs(30), "the Usage kind served", || server.kubectl_try(&["apply", "-f", "-"], &usage("keep-db-config", "db-config")).is_ok());
    server.kubectl(&["wait", "--for=condition=Ready", "usage.protection.crossplane.io/keep-db-config", "--timeout=60s"]);
    within(Duration::from_secs(10), "db-config labelled in use", || in_use(&server, "db-config"));

    // The API server has no hook of its own: the webhook refuses, with Crossplane's message;
    // a dry run is refused too and records nothing (sideEffects: None).
    let refused = server.kubectl_fails(&["delete", "configmap", "db-config", "--dry-run=server"], "");
    assert!(refused.contains("This resource is in-use by 1 usage(s)"), "{refused}");
    let kept = server.get(&["configmap", "db-config"]).unwrap();
    assert!(kept["metadata"]["annotations"]["usage.crossplane.io/deletion-attempt-with-policy"].is_null(), "{kept}");
    let refused = server.kubectl_fails(&["delete", "configmap", "db-config"], "");
    assert!(
        refused.contains(&format!(
            r#"admission webhook "{WEBHOOK}" denied the request: This resource is in-use by 1 usage(s), including the *v1beta1.Usage "keep-db-config" (in namespace "default") with reason: "the database reads db-config"."#
        )),
        "{refused}"
    );
    let (code, _, answer) = server.curl("DELETE", "/api/v1/namespaces/default/configmaps/db-config?propagationPolicy=Foreground", None);
    assert_eq!(code, 409, "{answer}");
    let kept = server.get(&["configmap", "db-config"]).expect("a refused deletion keeps the object");
    assert!(kept["metadata"]["deletionTimestamp"].is_null(), "{kept}");
    assert_eq!(kept["metadata"]["annotations"]["usage.crossplane.io/deletion-attempt-with-policy"], "Foreground");
    // Called directly (trusting only the caBundle): other operations are refused with 400, and
    // what is not an AdmissionReview is a bad request.
    let (status, answer) = call_webhook(url, webhook["clientConfig"]["caBundle"].as_str().unwrap(), r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-1","operation":"CREATE","kind":{"group":"","version":"v1","kind":"ConfigMap"},"object":{}}}"#);
    let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
    assert_eq!((status, &answer["response"]["uid"], &answer["response"]["allowed"], &answer["response"]["status"]["code"]), (200, &serde_json::json!("u-1"), &serde_json::json!(false), &serde_json::json!(400)), "{answer}");
    assert_eq!(call_webhook(url, webhook["clientConfig"]["caBundle"].as_str().unwrap(), "not json").0, 400);
    // Objects not in use are not sent to the webhook at all.
    server.kubectl(&["create", "configmap", "scratch"]);
    server.kubectl(&["delete", "configmap", "scratch"]);

    // Once the Usage is gone, the deletion goes through.
    server.kubectl(&["delete", "usage.protection.crossplane.io", "keep-db-config", "--timeout=30s"]);
    within(Duration::from_secs(10), "db-config no longer in use", || !in_use(&server, "db-config"));
    server.kubectl(&["delete", "configmap", "db-config"]);

    // Controllers gone: failurePolicy Fail keeps what is in use protected (deleting it fails,
    // naming the webhook), while objects not in use are deleted as usual.
    server.apply(&usage("keep-cache-config", "cache-config"));
    within(Duration::from_secs(30), "cache-config labelled in use", || in_use(&server, "cache-config"));
    assert!(sigterm(&mut controllers.0, Duration::from_secs(20)).is_some(), "the controllers stop on SIGTERM");
    assert!(server.get(&["validatingwebhookconfiguration", "crossplane-no-usages"]).is_some(), "the configuration stays");
    let failed = server.kubectl_fails(&["delete", "configmap", "cache-config"], "");
    assert!(failed.contains(&format!(r#"Internal error occurred: failed calling webhook "{WEBHOOK}""#)), "{failed}");
    assert!(server.get(&["configmap", "cache-config"]).is_some());
    server.kubectl(&["create", "configmap", "unused"]);
    server.kubectl(&["delete", "configmap", "unused"]);

    // Started again (another port, another CA): the configuration is pointed at the new
    // server, and the Usage protects again with its message.
    let _controllers = Controllers::start(&server, "controllers-again.log");
    within(Duration::from_secs(60), "the configuration re-pointed", || {
        let config = server.get(&["validatingwebhookconfiguration", "crossplane-no-usages"]).unwrap();
        config["webhooks"][0]["clientConfig"]["url"].as_str() != Some(url)
    });
    let refused = server.kubectl_fails(&["delete", "configmap", "cache-config"], "");
    assert!(refused.contains(r#"including the *v1beta1.Usage "keep-cache-config" (in namespace "default") with reason: "the database reads cache-config"."#), "{refused}");
    server.kubectl(&["delete", "usage.protection.crossplane.io", "keep-cache-config", "--timeout=30s"]);
    within(Duration::from_secs(10), "cache-config no longer in use", || !in_use(&server, "cache-config"));
    server.kubectl(&["delete", "configmap", "cache-config"]);
}

fn conversion_url(server: &Server) -> String {
    let crd = server.get(&["crd", "objects.kubernetes.crossplane.io"]).unwrap();
    assert_eq!(crd["spec"]["conversion"]["strategy"], "Webhook", "{crd:#}");
    crd["spec"]["conversion"]["webhook"]["clientConfig"]["url"].as_str().unwrap().to_string()
}

#[test]
fn provider_kinds_convert_through_the_controllers_webhook() {
    let server = Server::start_with(&["--controllers=false"]);
    let mut controllers = Controllers::start_with(&server, "controllers.log", &["--provider", "provider-kubernetes"]);
    within(Duration::from_secs(90), "provider-kubernetes healthy", || {
        server.kubectl_try(&["get", "provider.pkg.crossplane.io", "provider-kubernetes", "-o", "json"], "").is_ok_and(|p| {
            serde_json::from_str::<serde_json::Value>(&p).is_ok_and(|p| support::is_true(&p, "Healthy"))
        })
    });
    // The CRD calls this process's webhook server, the one the Usage webhook is served from.
    let url = conversion_url(&server);
    assert!(url.starts_with("https://127.0.0.1:") && url.ends_with("/convert/objects.kubernetes.crossplane.io"), "{url}");
    within(Duration::from_secs(60), "the controllers register crossplane-no-usages", || {
        server.kubectl(&["get", "validatingwebhookconfigurations", "-o", "name"]).contains("/crossplane-no-usages")
    });
    let usage = server.get(&["validatingwebhookconfiguration", "crossplane-no-usages"]).unwrap();
    let usage_url = usage["webhooks"][0]["clientConfig"]["url"].as_str().unwrap().to_string();
    assert_eq!(url.split("/convert/").next(), usage_url.split("/validate-no-usages").next(), "one server: {url} {usage_url}");

    // Written through v1alpha1 with kubectl, read through v1alpha2 (the API server converts
    // through the webhook), and imported by the controllers.
    server.apply(
        "apiVersion: kubernetes.crossplane.io/v1alpha1\nkind: ProviderConfig\nmetadata:\n  name: default\nspec:\n  credentials:\n    source: InjectedIdentity\n---\n\
         apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: existing\n  namespace: default\ndata:\n  owner: ops\n",
    );
    within(Duration::from_secs(30), "the v1alpha1 Object accepted", || {
        server
            .kubectl_try(&["apply", "-f", "-"], "apiVersion: kubernetes.crossplane.io/v1alpha1\nkind: Object\nmetadata:\n  name: imported\nspec:\n  managementPolicy: Observe\n  forProvider:\n    manifest:\n      apiVersion: v1\n      kind: ConfigMap\n      metadata:\n        name: existing\n        namespace: default\n")
            .is_ok()
    });
    let newer = server.get(&["objects.v1alpha2.kubernetes.crossplane.io", "imported"]).unwrap();
    assert_eq!(newer["spec"]["managementPolicies"], serde_json::json!(["Observe"]), "{newer:#}");
    within(Duration::from_secs(60), "the import Ready", || {
        server.get(&["objects.v1alpha2.kubernetes.crossplane.io", "imported"]).is_some_and(|o| support::is_true(&o, "Ready"))
    });
    let older = server.get(&["objects.v1alpha1.kubernetes.crossplane.io", "imported"]).unwrap();
    assert_eq!(older["spec"]["managementPolicy"], "Observe");
    assert_eq!(older["status"]["atProvider"]["manifest"]["data"]["owner"], "ops");

    // Controllers gone: nothing converts (the storage version still reads).
    assert!(sigterm(&mut controllers.0, Duration::from_secs(20)).is_some(), "the controllers stop on SIGTERM");
    let failed = server.kubectl_fails(&["get", "objects.v1alpha1.kubernetes.crossplane.io", "imported"], "");
    assert!(failed.contains("conversion webhook for kubernetes.crossplane.io/v1alpha2, Kind=Object failed"), "{failed}");
    assert!(server.get(&["objects.v1alpha2.kubernetes.crossplane.io", "imported"]).is_some());
    // Started again (another port, another CA): the CRD is pointed at the new server.
    let _controllers = Controllers::start_with(&server, "controllers-again.log", &["--provider", "provider-kubernetes"]);
    within(Duration::from_secs(60), "the CRD re-pointed", || conversion_url(&server) != url);
    let older = server.get(&["objects.v1alpha1.kubernetes.crossplane.io", "imported"]).unwrap();
    assert_eq!(older["spec"]["managementPolicy"], "Observe");
}

/// Runs `oxplane controllers` with `args` against a kubeconfig naming a server nobody listens
/// on, which must make it exit: its stderr.
fn controllers_fail(args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: gone, cluster: {{server: 'https://127.0.0.1:{port}', insecure-skip-tls-verify: true}}}}]\nusers: [{{name: u, user: {{token: t}}}}]\ncontexts: [{{name: c, context: {{cluster: gone, user: u}}}}]\ncurrent-context: c\n"
        ),
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_oxplane")).arg("controllers").arg("--kubeconfig").arg(&kubeconfig).args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!output.status.success(), "{stderr}");
    stderr
}

#[test]
fn the_controllers_refuse_an_unreachable_api_server_and_an_unreachable_webhook_address() {
    let stderr = controllers_fail(&[]);
    assert!(stderr.contains("the API server does not answer"), "{stderr}");
    // Listening on every interface names no address the API server could be given.
    let stderr = controllers_fail(&["--webhook-address", "0.0.0.0:0"]);
    assert!(stderr.contains("--webhook-address 0.0.0.0:0 listens on every interface: give --webhook-host"), "{stderr}");
    let stderr = controllers_fail(&["--webhook-address", "localhost"]);
    assert!(stderr.contains("--webhook-address localhost: expected IP:PORT"), "{stderr}");
}
