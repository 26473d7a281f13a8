//! `oxplane diff` end to end on the getting-started App: a new App lists what it would compose,
//! a changed size shows exactly the changed field on the database, an App moved to a
//! Composition revision without the cache shows the cache's deletion; nothing is ever written
//! (the App and its resources keep their resourceVersions). The plan endpoint answers other
//! clients too, refuses what is not a composite, and users who may not write the object.

use crate::support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use support::{Server, composed_nops, is_true, within};

fn example(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/getting-started").join(file);
    path.to_str().unwrap().to_string()
}

/// Runs `oxplane diff` with the server's kubeconfig and `yaml` on standard input.
fn diff(server: &Server, yaml: &str, extra: &[&str]) -> (bool, String, String) {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_oxplane"))
        .args(["diff", "-f", "-"])
        .args(extra)
        .env("KUBECONFIG", server.kubeconfig())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(yaml.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

const APP: &str = "apiVersion: example.org/v1\nkind: App\nmetadata:\n  name: my-app\n  namespace: default\nspec:\n  size: SIZE\n";

/// The App's and its composed resources' resourceVersions.
fn versions(server: &Server) -> Vec<(String, String)> {
    let mut out = vec![("app".to_string(), server.get(&["app", "my-app"]).unwrap()["metadata"]["resourceVersion"].as_str().unwrap().to_string())];
    for (name, nop) in composed_nops(server, "my-app") {
        out.push((name, nop["metadata"]["resourceVersion"].as_str().unwrap().to_string()));
    }
    out
}

#[test]
fn diff_plans_creates_changes_and_deletes_without_writing() {
    let server = Server::start();
    server.kubectl(&["apply", "-f", &example("00-provider.yaml"), "-f", &example("01-functions.yaml")]);
    server.kubectl(&["wait", "--for=condition=Healthy", "provider/provider-nop", "function/function-patch-and-transform", "function/function-auto-ready", "--timeout=120s"]);
    server.kubectl(&["apply", "-f", &example("02-xrd.yaml")]);
    server.kubectl(&["wait", "--for=condition=Established", "xrd/apps.example.org", "--timeout=120s"]);
    server.kubectl(&["apply", "-f", &example("03-composition.yaml")]);

    // A new App: the App and both resources would be created; nothing is.
    let (ok, out, err) = diff(&server, &APP.replace("SIZE", "medium"), &[]);
    assert!(ok, "{out}{err}");
    assert_eq!(err, "planning App/my-app ...\n", "a progress line while the server plans");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "+ App/my-app (namespace default)", "{out}");
    assert!(lines.contains(&"  + NopResource/my-app-* (database)"), "{out}");
    assert!(lines.contains(&"  + NopResource/my-app-* (cache)"), "{out}");
    assert_eq!(server.get(&["app", "my-app"]), None, "the plan created the App");
    assert!(composed_nops(&server, "my-app").is_empty());

    // As JSON, the database would get the medium size.
    let (ok, out, err) = diff(&server, &APP.replace("SIZE", "medium"), &["-o", "json"]);
    assert!(ok, "{err}");
    let plan: Value = serde_json::from_str(out.trim()).unwrap();
    let database = plan["resources"].as_array().unwrap().iter().find(|r| r["resourceName"] == "database").unwrap();
    assert_eq!(database["action"], "create");

    server.kubectl_stdin(&["apply", "-f", "-"], &APP.replace("SIZE", "medium"));
    server.kubectl(&["wait", "--for=condition=Ready", "app/my-app", "--timeout=120s"]);
    let before = versions(&server);
    let nops = composed_nops(&server, "my-app");
    let (database, cache) = (nops["database"]["metadata"]["name"].as_str().unwrap(), nops["cache"]["metadata"]["name"].as_str().unwrap());

    // The same App: nothing would change.
    let (ok, out, err) = diff(&server, &APP.replace("SIZE", "medium"), &[]);
    assert!(ok, "{err}");
    assert_eq!(out, format!("= App/my-app (namespace default)\n  = NopResource/{cache} (cache)\n  = NopResource/{database} (database)\n"));

    // A larger App: exactly the size changes, on the App and on the database.
    let (ok, out, err) = diff(&server, &APP.replace("SIZE", "large"), &[]);
    assert!(ok, "{err}");
    assert_eq!(
        out,
        format!(
            "~ App/my-app (namespace default)\n    spec.size: \"medium\" -> \"large\"\n  = NopResource/{cache} (cache)\n  ~ NopResource/{database} (database)\n      spec.forProvider.fields.size: \"db.t3.medium\" -> \"db.t3.large\"\n"
        )
    );
    assert_eq!(server.get(&["app", "my-app"]).unwrap()["spec"]["size"], "medium");
    assert_eq!(versions(&server), before, "a plan wrote");

    // A second Composition revision without the cache, which the App (Manual) does not follow
    // yet; planning the App on Automatic shows the cache's deletion.
    server.kubectl(&["patch", "app", "my-app", "--type=merge", "-p", r#"{"spec":{"crossplane":{"compositionUpdatePolicy":"Manual"}}}"#]);
    let composition = std::fs::read_to_string(example("03-composition.yaml")).unwrap();
    let (head, tail) = composition.split_once("      - name: cache").unwrap();
    let rest = &tail[tail.find("  - step: automatically-detect-ready-composed-resources").unwrap()..];
    server.kubectl_stdin(&["apply", "-f", "-"], &format!("{head}{rest}"));
    within(Duration::from_secs(60), "a second CompositionRevision", || {
        server.get(&["compositionrevisions"]).is_some_and(|l| l["items"].as_array().is_some_and(|i| i.len() == 2))
    });
    let before = versions(&server);
    let automatic = APP.replace("SIZE", "medium") + "  crossplane:\n    compositionUpdatePolicy: Automatic\n";
    let (ok, out, err) = diff(&server, &automatic, &[]);
    assert!(ok, "{err}");
    assert!(out.starts_with("~ App/my-app (namespace default)\n"), "{out}");
    assert!(out.contains(&format!("  - NopResource/{cache} (cache)\n")), "{out}");
    assert!(out.contains(&format!("  = NopResource/{database} (database)\n")), "{out}");
    assert!(out.contains("    spec.crossplane.compositionUpdatePolicy: \"Manual\" -> \"Automatic\"\n"), "{out}");

    // Nothing was written by any plan.
    assert_eq!(versions(&server), before);
    assert!(is_true(&server.get(&["app", "my-app"]).unwrap(), "Ready"));

    // The endpoint: a kind no XRD defines is refused with a Status; so is a user who may ask
    // for plans but not create Apps.
    let (code, _, body) = server.curl("POST", "/oxplane/v1alpha1/plan", Some(r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"default"}}"#));
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("no CompositeResourceDefinition defines v1 ConfigMap"), "{body}");
    let (code, _, body) = server.curl("POST", "/oxplane/v1alpha1/plan", Some("[1]"));
    assert_eq!((code, body.contains("\"reason\":\"BadRequest\"")), (400, true), "{body}");
    server.apply(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: planner\nrules:\n- nonResourceURLs: [\"/oxplane/v1alpha1/plan\"]\n  verbs: [\"post\"]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: planner\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: planner\nsubjects:\n- apiGroup: rbac.authorization.k8s.io\n  kind: User\n  name: mallory\n",
    );
    let app_json = r#"{"apiVersion":"example.org/v1","kind":"App","metadata":{"name":"my-app","namespace":"default"},"spec":{"size":"small"}}"#;
    let out = Command::new("curl")
        .args(["-s", "-k", "-X", "POST", "-H", "Impersonate-User: mallory", "-H", "Content-Type: application/json", "--data-binary", app_json])
        .args(["-H", &format!("Authorization: Bearer {}", admin_token(&server))])
        .arg(format!("{}/oxplane/v1alpha1/plan", server.server_url()))
        .output()
        .unwrap();
    let body = String::from_utf8_lossy(&out.stdout);
    assert!(body.contains("\"code\":403") && body.contains(r#"cannot create resource \"apps\" in API group \"example.org\""#), "{body}");
    assert_eq!(versions(&server), before);
}

fn admin_token(server: &Server) -> String {
    let config: Value = serde_json::from_str(&std::fs::read_to_string(server.kubeconfig()).unwrap()).unwrap();
    config["users"][0]["user"]["token"].as_str().unwrap().to_string()
}
