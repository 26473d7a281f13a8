//! `oxplane render` as a user runs it: the YAML stream Crossplane's `crossplane render` prints
//! for a patch-and-transform Composition and for one with function-auto-ready (our own files of
//! the shape those functions' examples ship), the same resources the server composes from the
//! same files, errors in Crossplane's words, and a function reached through the development
//! annotations instead of in-process.

use crate::support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use support::Server;

fn fixture(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/render").join(path).to_str().unwrap().to_string()
}

fn oxplane() -> Command {
    Command::new(env!("CARGO_BIN_EXE_oxplane"))
}

/// Runs `oxplane <args>`: (success, stdout, stderr).
fn run(args: &[&str]) -> (bool, String, String) {
    let out = oxplane().args(args).output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn render(args: &[&str]) -> String {
    let mut all = vec!["render"];
    all.extend(args);
    let (ok, stdout, stderr) = run(&all);
    assert!(ok, "render {args:?} failed: {stderr}");
    stdout
}

fn documents(stream: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(stream).unwrap().into_iter().filter(|d| !d.is_null()).collect()
}

const PATCH_AND_TRANSFORM: &str = r#"---
apiVersion: example.org/v1
kind: XStorage
metadata:
  name: team-storage
  namespace: default
status:
  conditions:
  - lastTransitionTime: "2024-01-01T00:00:00Z"
    message: 'Unready resources: bucket, queue'
    reason: Creating
    status: "False"
    type: Ready
---
apiVersion: nop.crossplane.io/v1alpha1
kind: NopResource
metadata:
  annotations:
    crossplane.io/composition-resource-name: bucket
  generateName: team-storage-
  labels:
    crossplane.io/composite: team-storage
  namespace: default
  ownerReferences:
  - apiVersion: example.org/v1
    blockOwnerDeletion: true
    controller: true
    kind: XStorage
    name: team-storage
    uid: ""
spec:
  forProvider:
    conditionAfter:
    - conditionStatus: "True"
      conditionType: Ready
      time: 1s
    fields:
      region: storage-eu-central
      storageClass: STANDARD
---
apiVersion: nop.crossplane.io/v1alpha1
kind: NopResource
metadata:
  annotations:
    crossplane.io/composition-resource-name: queue
  generateName: team-storage-
  labels:
    crossplane.io/composite: team-storage
    purpose: events
  namespace: default
  ownerReferences:
  - apiVersion: example.org/v1
    blockOwnerDeletion: true
    controller: true
    kind: XStorage
    name: team-storage
    uid: ""
spec:
  forProvider:
    conditionAfter:
    - conditionStatus: "True"
      conditionType: Ready
      time: 1s
    fields:
      queueName: platform-eu-central-events
"#;

#[test]
fn patch_and_transform_renders_as_crossplane_render_prints_it() {
    let stream = render(&[&fixture("patch-and-transform/xr.yaml"), &fixture("patch-and-transform/composition.yaml"), &fixture("patch-and-transform/functions.yaml")]);
    assert_eq!(stream, PATCH_AND_TRANSFORM);
    // The alias prints the same; -r adds nothing here (patch-and-transform returns no
    // results for this input) and -c the context.
    let (ok, alias, _) = run(&[
        "composition",
        "render",
        &fixture("patch-and-transform/xr.yaml"),
        &fixture("patch-and-transform/composition.yaml"),
        &fixture("patch-and-transform/functions.yaml"),
        "-r",
        "-c",
        "--context-values",
        r#"example.org/team={"name": "platform"}"#,
    ]);
    assert!(ok);
    let docs = documents(&alias);
    assert_eq!(docs.len(), 4, "{alias}");
    assert_eq!(docs[3]["kind"], "Context");
    assert_eq!(docs[3]["apiVersion"], "render.crossplane.io/v1beta1");
    assert_eq!(docs[3]["fields"]["example.org/team"]["name"], "platform");
}

#[test]
fn auto_ready_marks_the_composite_ready_from_observed_resources() {
    let xr = fixture("patch-and-transform/xr.yaml");
    let (composition, functions) = (fixture("auto-ready/composition.yaml"), fixture("auto-ready/functions.yaml"));
    let first = documents(&render(&[&xr, &composition, &functions]));
    let ready = &first[0]["status"]["conditions"][0];
    assert_eq!((&ready["reason"], &ready["message"]), (&Value::from("Creating"), &Value::from("Unready resources: bucket")));
    assert!(first[1]["metadata"].get("name").is_none());

    let observed = fixture("auto-ready/observed.yaml");
    let later = documents(&render(&[&xr, &composition, &functions, "--observed-resources", &observed, "--include-full-xr"]));
    let ready = &later[0]["status"]["conditions"][0];
    assert_eq!((&ready["type"], &ready["status"], &ready["reason"]), (&Value::from("Ready"), &Value::from("True"), &Value::from("Available")));
    assert!(ready.get("message").is_none());
    assert_eq!(later[0]["status"]["bucketRegion"], "eu-central");
    assert_eq!(later[0]["spec"]["owner"], "platform", "-x copies the XR's spec");
    assert_eq!(later[1]["metadata"]["name"], "team-storage-0a1b2c3d4e5f", "the observed name is kept");
    assert!(later[1]["metadata"].get("generateName").is_some());
}

/// The composed resource of `items` with the composition resource name `name`.
fn by_resource_name<'a>(items: &'a [Value], name: &str) -> &'a Value {
    items
        .iter()
        .find(|i| i["metadata"]["annotations"]["crossplane.io/composition-resource-name"] == name)
        .unwrap_or_else(|| panic!("no composed resource {name}"))
}

#[test]
fn render_shows_what_the_server_composes_from_the_same_files() {
    let server = Server::start();
    let getting_started = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/getting-started/00-provider.yaml");
    server.kubectl(&["apply", "-f", getting_started.to_str().unwrap(), "-f", &fixture("auto-ready/functions.yaml")]);
    server.kubectl(&["wait", "--for=condition=Healthy", "provider/provider-nop", "function/function-patch-and-transform", "--timeout=60s"]);
    server.kubectl(&["apply", "-f", &fixture("patch-and-transform/xrd.yaml")]);
    server.kubectl(&["wait", "--for=condition=Established", "xrd/xstorages.example.org", "--timeout=60s"]);
    server.kubectl(&["apply", "-f", &fixture("patch-and-transform/composition.yaml"), "-f", &fixture("patch-and-transform/xr.yaml")]);
    let get = |args: &[&str]| -> Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        serde_json::from_str(&server.kubectl(&all)).unwrap()
    };
    support::within(Duration::from_secs(60), "the composite's status from its composed resources", || {
        get(&["get", "xstorage", "team-storage", "-n", "default"])["status"]["queueName"].is_string()
    });
    let xr = get(&["get", "xstorage", "team-storage", "-n", "default"]);
    let composed = get(&["get", "nopresources", "-n", "default"])["items"].as_array().unwrap().clone();
    assert_eq!(composed.len(), 2);

    let xr_file = fixture("patch-and-transform/xr.yaml");
    let (composition, functions) = (fixture("patch-and-transform/composition.yaml"), fixture("patch-and-transform/functions.yaml"));
    let rendered = documents(&render(&[&xr_file, &composition, &functions]));
    assert_eq!(rendered.len(), 3);
    for desired in &rendered[1..] {
        let name = desired["metadata"]["annotations"]["crossplane.io/composition-resource-name"].as_str().unwrap();
        let actual = by_resource_name(&composed, name);
        assert_eq!(desired["spec"]["forProvider"], actual["spec"]["forProvider"], "{name}");
        assert_eq!(desired["metadata"]["labels"], actual["metadata"]["labels"], "{name}");
        assert_eq!(desired["metadata"]["generateName"], actual["metadata"]["generateName"], "{name}");
        assert_eq!(desired["metadata"]["namespace"], actual["metadata"]["namespace"], "{name}");
        let (want, got) = (&desired["metadata"]["ownerReferences"][0], &actual["metadata"]["ownerReferences"][0]);
        for field in ["apiVersion", "kind", "name", "controller", "blockOwnerDeletion"] {
            assert_eq!(want[field], got[field], "{name} owner {field}");
        }
    }

    // With the server's objects as the observed state (and the XR as the server holds it,
    // defaults included), render gives the status the server wrote and keeps the names.
    let dir = tempfile::tempdir().unwrap();
    let observed: Vec<String> = composed.iter().map(|o| serde_json::to_string(o).unwrap()).collect();
    let observed_file = dir.path().join("observed.yaml");
    std::fs::write(&observed_file, observed.join("\n---\n")).unwrap();
    let xr_now = dir.path().join("xr.yaml");
    std::fs::write(&xr_now, serde_json::to_string(&xr).unwrap()).unwrap();
    let again = documents(&render(&[xr_now.to_str().unwrap(), &composition, &functions, "-o", observed_file.to_str().unwrap()]));
    for field in ["bucketRegion", "queueName"] {
        assert_eq!(again[0]["status"][field], xr["status"][field], "{field}");
    }
    for desired in &again[1..] {
        let name = desired["metadata"]["annotations"]["crossplane.io/composition-resource-name"].as_str().unwrap();
        assert_eq!(desired["metadata"]["name"], by_resource_name(&composed, name)["metadata"]["name"]);
        assert_eq!(desired["metadata"]["ownerReferences"][0]["uid"], xr["metadata"]["uid"]);
    }
}

#[test]
fn render_refuses_what_crossplane_refuses_in_its_words() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: String| -> String {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };
    let xr = fixture("patch-and-transform/xr.yaml");
    let composition_text = std::fs::read_to_string(fixture("patch-and-transform/composition.yaml")).unwrap();
    let functions = fixture("patch-and-transform/functions.yaml");

    let other_kind = write("other-kind.yaml", composition_text.replace("kind: XStorage", "kind: XQueue"));
    let (ok, _, stderr) = run(&["render", &xr, &other_kind, &functions]);
    assert!(!ok);
    assert!(stderr.contains("composition's compositeTypeRef.kind (XQueue) does not match XR's kind (XStorage)"), "{stderr}");

    let resources_mode = write("resources-mode.yaml", composition_text.replace("mode: Pipeline", "mode: Resources"));
    let (ok, _, stderr) = run(&["render", &xr, &resources_mode, &functions]);
    assert!(!ok);
    assert!(stderr.contains("render only supports Composition Function pipelines: Composition \"xstorages\" must use spec.mode: Pipeline"), "{stderr}");

    let (ok, _, stderr) = run(&["render", &xr, &fixture("auto-ready/composition.yaml"), &functions]);
    assert!(!ok);
    assert!(
        stderr.contains(
            "cannot render composite resource: cannot run pipeline step \"detect-ready-resources\": unknown Function \"function-auto-ready\" - does it exist in your Functions file?"
        ),
        "{stderr}"
    );

    let image = write(
        "image.yaml",
        "apiVersion: pkg.crossplane.io/v1\nkind: Function\nmetadata:\n  name: function-patch-and-transform\nspec:\n  package: xpkg.example.org/someone/function-custom:v1\n".into(),
    );
    let (ok, _, stderr) = run(&["render", &xr, &fixture("patch-and-transform/composition.yaml"), &image]);
    assert!(!ok);
    assert!(stderr.contains("is not a built-in function") && stderr.contains("render.crossplane.io/runtime: Development"), "{stderr}");

    let not_function = write("configmap.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n".into());
    let (ok, _, stderr) = run(&["render", &xr, &fixture("patch-and-transform/composition.yaml"), &not_function]);
    assert!(!ok);
    assert!(stderr.contains("not a function: ConfigMap/settings"), "{stderr}");
}

/// `oxplane function serve NAME --insecure` on a free port; the child and its address.
fn serve(name: &str) -> (std::process::Child, String) {
    let mut child = oxplane()
        .args(["function", "serve", name, "--insecure", "--address", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap()).read_line(&mut line).unwrap();
    let address = line.split(" on ").nth(1).and_then(|rest| rest.split_whitespace().next()).unwrap_or_else(|| panic!("no address in {line:?}")).to_string();
    (child, address)
}

#[test]
fn a_function_in_development_is_called_over_grpc() {
    let (mut child, address) = serve("function-patch-and-transform");
    let dir = tempfile::tempdir().unwrap();
    let functions: PathBuf = dir.path().join("functions.yaml");
    // A package oxplane does not build in: only the annotations make it callable.
    std::fs::write(
        &functions,
        "apiVersion: pkg.crossplane.io/v1\nkind: Function\nmetadata:\n  name: function-patch-and-transform\nspec:\n  package: xpkg.example.org/someone/function-custom:v1\n",
    )
    .unwrap();
    let runtime = "render.crossplane.io/runtime=Development".to_string();
    let target = format!("render.crossplane.io/runtime-development-target={address}");
    let (ok, stdout, stderr) = run(&[
        "render",
        &fixture("patch-and-transform/xr.yaml"),
        &fixture("patch-and-transform/composition.yaml"),
        functions.to_str().unwrap(),
        "-a",
        &runtime,
        "-a",
        &target,
    ]);
    let _ = child.kill();
    let _ = child.wait();
    assert!(ok, "{stderr}");
    assert_eq!(stdout, PATCH_AND_TRANSFORM);

    // Nobody listening: the step names the function and the cause.
    let (ok, _, stderr) = run(&[
        "render",
        &fixture("patch-and-transform/xr.yaml"),
        &fixture("patch-and-transform/composition.yaml"),
        functions.to_str().unwrap(),
        "-a",
        &runtime,
        "-a",
        &target,
        "--timeout",
        "20s",
    ]);
    assert!(!ok);
    assert!(stderr.contains("cannot render composite resource: cannot run pipeline step \"patch-and-transform\""), "{stderr}");
}
