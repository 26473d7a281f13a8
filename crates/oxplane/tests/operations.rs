//! Crossplane's Operations end to end with the real kubectl, on a server started with
//! `--enable-operations`: an Operation whose function applies a ConfigMap succeeds and says
//! what it applied and output; a failing one is retried `retryLimit` times and then fails; a
//! function without the `operation` capability fails it at once; a CronOperation on
//! `*/1 * * * *` creates Operations named `<name>-<unix time>` and keeps its history limit (the
//! schedule's clock runs 60 times faster here, so a minute passes in a second); a
//! WatchOperation runs once per change of a watched ConfigMap; concurrency policies decide
//! about Operations still running; failures are worded as Crossplane's Operation controller
//! words them. Without the flag, the kinds are not served.

use crate::support;

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::Value;
use support::{Server, condition, is_true, within};

const T: Duration = Duration::from_secs(60);

const FUNCTIONS: &str = "
apiVersion: pkg.crossplane.io/v1
kind: Function
metadata: {name: function-dummy}
spec: {package: xpkg.crossplane.io/crossplane-contrib/function-dummy:v0.4.1}
---
apiVersion: pkg.crossplane.io/v1
kind: Function
metadata: {name: function-auto-ready}
spec: {package: xpkg.crossplane.io/crossplane-contrib/function-auto-ready:v0.5.0}
";

/// An Operation whose one step (function-dummy) applies a ConfigMap and returns an output.
const CONFIGURE: &str = r#"
apiVersion: ops.crossplane.io/v1alpha1
kind: Operation
metadata: {name: configure}
spec:
  mode: Pipeline
  pipeline:
  - step: write-config
    functionRef: {name: function-dummy}
    input:
      apiVersion: dummy.fn.crossplane.io/v1beta1
      kind: Response
      response:
        desired:
          resources:
            config:
              resource:
                apiVersion: v1
                kind: ConfigMap
                metadata: {name: from-operation, namespace: default}
                data: {greeting: hello}
        output:
          configured: from-operation
        results:
        - severity: SEVERITY_NORMAL
          message: wrote the config
"#;

/// An Operation spec whose one step returns a fatal result, retried up to `retry_limit` times,
/// indented by `indent` spaces.
fn failing_spec(retry_limit: u32, message: &str, indent: usize) -> String {
    let spec = format!(
        "mode: Pipeline
retryLimit: {retry_limit}
pipeline:
- step: fail
  functionRef: {{name: function-dummy}}
  input:
    apiVersion: dummy.fn.crossplane.io/v1beta1
    kind: Response
    response:
      results:
      - severity: SEVERITY_FATAL
        message: {message}
"
    );
    spec.lines().map(|line| format!("{:indent$}{line}\n", "")).collect()
}

fn failing() -> String {
    format!("apiVersion: ops.crossplane.io/v1alpha1\nkind: Operation\nmetadata: {{name: always-fails}}\nspec:\n{}", failing_spec(2, "the database is read-only", 2))
}

const NOT_AN_OPERATION_FUNCTION: &str = r#"
apiVersion: ops.crossplane.io/v1alpha1
kind: Operation
metadata: {name: wrong-function}
spec:
  mode: Pipeline
  pipeline:
  - step: ready
    functionRef: {name: function-auto-ready}
"#;

fn pipeline_writing(config: &str) -> String {
    format!(
        r#"
      mode: Pipeline
      pipeline:
      - step: write
        functionRef: {{name: function-dummy}}
        input:
          apiVersion: dummy.fn.crossplane.io/v1beta1
          kind: Response
          response:
            desired:
              resources:
                config:
                  resource:
                    apiVersion: v1
                    kind: ConfigMap
                    metadata: {{name: {config}, namespace: default}}
                    data: {{written: "yes"}}
"#
    )
}

fn items(server: &Server, args: &[&str]) -> Vec<Value> {
    server.get(args).and_then(|l| l["items"].as_array().cloned()).unwrap_or_default()
}

fn names(list: &[Value]) -> BTreeSet<String> {
    list.iter().filter_map(|o| o["metadata"]["name"].as_str().map(str::to_string)).collect()
}

fn start() -> Server {
    let server = Server::start_with(&["--enable-operations", "--operations-clock-rate", "60"]);
    server.apply(FUNCTIONS);
    within(T, "functions installed", || {
        let functions = items(&server, &["functions"]);
        functions.len() == 2 && functions.iter().all(|f| is_true(f, "Healthy"))
    });
    server
}

#[test]
fn operations_run_their_pipeline_once_and_retry_failures() {
    let server = start();
    let revisions = items(&server, &["functionrevisions", "-l", "pkg.crossplane.io/package=function-dummy"]);
    assert_eq!(revisions[0]["status"]["capabilities"], serde_json::json!(["composition", "operation"]));

    server.apply(CONFIGURE);
    within(T, "the Operation succeeds", || server.get(&["operation", "configure"]).is_some_and(|o| is_true(&o, "Succeeded")));
    let op = server.get(&["operation", "configure"]).unwrap();
    assert_eq!(condition(&op, "Succeeded").unwrap()["reason"], "PipelineSuccess");
    assert!(is_true(&op, "Synced") && is_true(&op, "ValidPipeline"), "{op:#}");
    assert_eq!(op["status"]["pipeline"], serde_json::json!([{"step": "write-config", "output": {"configured": "from-operation"}}]));
    assert_eq!(
        op["status"]["appliedResourceRefs"],
        serde_json::json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "from-operation", "namespace": "default"}])
    );
    let config = server.get(&["configmap", "from-operation", "-n", "default", "--show-managed-fields"]).unwrap();
    assert_eq!(config["data"]["greeting"], "hello");
    let manager = format!("ops.crossplane.io/operation/{}", op["metadata"]["uid"].as_str().unwrap());
    assert!(config["metadata"]["managedFields"].as_array().unwrap().iter().any(|m| m["manager"] == manager.as_str() && m["operation"] == "Apply"));
    let table = server.kubectl(&["get", "ops"]);
    assert!(table.starts_with("NAME") && table.lines().next().unwrap().split_whitespace().collect::<Vec<_>>() == ["NAME", "SYNCED", "SUCCEEDED", "AGE"], "{table}");
    assert!(table.lines().any(|l| l.split_whitespace().take(3).collect::<Vec<_>>() == ["configure", "True", "True"]), "{table}");
    let described = server.kubectl(&["describe", "operation", "configure"]);
    assert!(described.contains("Pipeline step \"write-config\": wrote the config"), "{described}");

    // A pipeline that fails: retried until it failed retryLimit times, then it fails for good.
    server.apply(&failing());
    within(T, "the Operation fails for good", || {
        server.get(&["operation", "always-fails"]).is_some_and(|o| condition(&o, "Succeeded").is_some_and(|c| c["status"] == "False"))
    });
    let op = server.get(&["operation", "always-fails"]).unwrap();
    let succeeded = condition(&op, "Succeeded").unwrap();
    assert_eq!(succeeded["reason"], "PipelineError");
    assert_eq!(succeeded["message"], "failure limit of 2 reached");
    assert_eq!(op["status"]["failures"], 2);
    let events = server.kubectl(&["get", "events", "--field-selector", "involvedObject.name=always-fails", "-o", "json"]);
    assert!(events.contains("FunctionInvocation") && events.contains("the database is read-only"), "{events}");

    // A function that cannot run in Operations fails the Operation without retries.
    server.apply(NOT_AN_OPERATION_FUNCTION);
    within(T, "the Operation is refused", || {
        server.get(&["operation", "wrong-function"]).is_some_and(|o| condition(&o, "Succeeded").is_some_and(|c| c["status"] == "False"))
    });
    let op = server.get(&["operation", "wrong-function"]).unwrap();
    let valid = condition(&op, "ValidPipeline").unwrap();
    assert_eq!(valid["status"], "False");
    assert_eq!(valid["reason"], "MissingCapabilities");
    assert!(valid["message"].as_str().unwrap().contains("\"function-auto-ready\" does not have the \"operation\" capability"), "{valid}");
    assert!(op["status"].get("failures").is_none(), "{op:#}");

    // Invalid objects are refused by the CRD.
    let error = server.kubectl_fails(
        &["apply", "-f", "-"],
        "apiVersion: ops.crossplane.io/v1alpha1\nkind: Operation\nmetadata: {name: empty}\nspec: {mode: Pipeline, pipeline: []}\n",
    );
    assert!(error.contains("spec.pipeline: Invalid value") && error.contains("should have at least 1 items"), "{error}");
}

#[test]
fn cron_operations_run_on_schedule_and_keep_their_history() {
    let server = start();
    server.apply(&format!(
        "apiVersion: ops.crossplane.io/v1alpha1
kind: CronOperation
metadata: {{name: tick}}
spec:
  schedule: \"*/1 * * * *\"
  successfulHistoryLimit: 2
  operationTemplate:
    spec:{}",
        pipeline_writing("from-cron")
    ));
    let mut seen = BTreeSet::new();
    within(T, "four scheduled runs", || {
        seen.extend(names(&items(&server, &["operations", "-l", "ops.crossplane.io/cronoperation=tick"])));
        seen.len() >= 4
    });
    for name in &seen {
        let at: i64 = name.strip_prefix("tick-").and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("{name}"));
        assert_eq!(at % 60, 0, "{name} is named after a whole minute");
    }
    within(T, "the history limit is kept", || {
        let ops = items(&server, &["operations", "-l", "ops.crossplane.io/cronoperation=tick"]);
        let succeeded = ops.iter().filter(|o| is_true(o, "Succeeded")).count();
        (1..=2).contains(&succeeded)
    });
    let ops = items(&server, &["operations", "-l", "ops.crossplane.io/cronoperation=tick"]);
    assert_eq!(ops[0]["metadata"]["ownerReferences"][0]["kind"], "CronOperation");
    assert_eq!(ops[0]["metadata"]["ownerReferences"][0]["name"], "tick");
    let cron = server.get(&["cronoperation", "tick"]).unwrap();
    assert_eq!(condition(&cron, "Scheduling").unwrap()["reason"], "ScheduleActive");
    assert!(cron["status"]["lastScheduleTime"].is_string() && cron["status"]["lastSuccessfulTime"].is_string(), "{cron:#}");
    assert_eq!(server.get(&["configmap", "from-cron", "-n", "default"]).unwrap()["data"]["written"], "yes");
    let header = server.kubectl(&["get", "cronops"]);
    assert_eq!(
        header.lines().next().unwrap().split("  ").map(str::trim).filter(|c| !c.is_empty()).collect::<Vec<_>>(),
        ["NAME", "SCHEDULE", "SYNCED", "SCHEDULING", "LAST SCHEDULE", "LAST SUCCESS", "AGE"]
    );

    server.apply(&format!(
        "apiVersion: ops.crossplane.io/v1alpha1
kind: CronOperation
metadata: {{name: broken}}
spec:
  schedule: \"whenever\"
  operationTemplate:
    spec:{}",
        pipeline_writing("never")
    ));
    within(T, "an invalid schedule is reported", || {
        server.get(&["cronoperation", "broken"]).and_then(|c| condition(&c, "Scheduling")).is_some_and(|c| c["reason"] == "ScheduleInvalid")
    });
    assert!(items(&server, &["operations", "-l", "ops.crossplane.io/cronoperation=broken"]).is_empty());
}

#[test]
fn watch_operations_run_once_per_change() {
    let server = start();
    server.apply("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: watched, namespace: default, labels: {app: demo}}\ndata: {v: \"1\"}\n");
    server.apply("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ignored, namespace: default}\ndata: {v: \"1\"}\n");
    server.apply(&format!(
        "apiVersion: ops.crossplane.io/v1alpha1
kind: WatchOperation
metadata: {{name: on-change}}
spec:
  watch:
    apiVersion: v1
    kind: ConfigMap
    namespace: default
    matchLabels: {{app: demo}}
  operationTemplate:
    spec:{}",
        pipeline_writing("from-watch")
    ));
    let ops = || items(&server, &["operations", "-l", "ops.crossplane.io/watchoperation=on-change"]);
    within(T, "one Operation for the watched ConfigMap", || ops().len() == 1 && ops().iter().all(|o| is_true(o, "Succeeded")));
    let watched = server.get(&["configmap", "watched", "-n", "default"]).unwrap();
    let op = &ops()[0];
    let annotations = &op["metadata"]["annotations"];
    assert_eq!(annotations["ops.crossplane.io/watched-resource-name"], "watched");
    assert_eq!(annotations["ops.crossplane.io/watched-resource-namespace"], "default");
    assert_eq!(annotations["ops.crossplane.io/watched-resource-kind"], "ConfigMap");
    assert_eq!(annotations["ops.crossplane.io/watched-resource-apiversion"], "v1");
    assert_eq!(annotations["ops.crossplane.io/watched-resource-resourceversion"], watched["metadata"]["resourceVersion"]);
    assert!(op["metadata"]["name"].as_str().unwrap().starts_with("on-change-"));
    let wo = server.get(&["watchoperation", "on-change"]).unwrap();
    assert_eq!(wo["status"]["watchingResources"], 1);
    assert_eq!(condition(&wo, "Watching").unwrap()["reason"], "WatchActive");
    assert_eq!(wo["metadata"]["finalizers"], serde_json::json!(["watchoperation.ops.crossplane.io"]));

    server.kubectl(&["patch", "configmap", "watched", "-n", "default", "--type=merge", "-p", r#"{"data":{"v":"2"}}"#]);
    within(T, "a second Operation for the change", || ops().len() == 2);
    // The ConfigMap nobody watches changes: no Operation.
    server.kubectl(&["patch", "configmap", "ignored", "-n", "default", "--type=merge", "-p", r#"{"data":{"v":"2"}}"#]);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(ops().len(), 2, "{:?}", names(&ops()));
    let columns = server.kubectl(&["get", "watchops"]);
    assert!(columns.lines().nth(1).unwrap().split_whitespace().take(3).collect::<Vec<_>>() == ["on-change", "ConfigMap", "1"], "{columns}");

    server.kubectl(&["delete", "watchoperation", "on-change", "--wait=true", "--timeout=60s"]);
    assert!(server.get(&["watchoperation", "on-change"]).is_none());
}

#[test]
fn operations_are_served_only_when_enabled() {
    let server = Server::start();
    let error = server.kubectl_fails(&["get", "operations.ops.crossplane.io"], "");
    assert!(error.contains("the server doesn't have a resource type"), "{error}");
}

/// An Operation failing before its function runs: a credential Secret that does not exist.
const MISSING_CREDENTIAL: &str = r#"
apiVersion: ops.crossplane.io/v1alpha1
kind: Operation
metadata: {name: missing-credential}
spec:
  mode: Pipeline
  retryLimit: 1
  pipeline:
  - step: write
    functionRef: {name: function-dummy}
    credentials:
    - name: db
      source: Secret
      secretRef: {namespace: default, name: absent}
"#;

/// An Operation's failures are worded as Crossplane's Operation controller words them, never
/// as a Composition's (`internal/controller/ops/operation/reconciler.go`: `cannot get
/// operation pipeline step %q credential %q from Secret`, `cannot apply desired resource`).
#[test]
fn operation_failures_are_worded_as_crossplanes() {
    let server = start();
    server.apply(MISSING_CREDENTIAL);
    // A desired resource the API server refuses.
    let invalid = pipeline_writing("Not_A_Name").replacen("mode: Pipeline", "mode: Pipeline\n      retryLimit: 1", 1);
    server.apply(&format!("apiVersion: ops.crossplane.io/v1alpha1\nkind: Operation\nmetadata: {{name: invalid-resource}}\nspec:{invalid}"));
    for name in ["missing-credential", "invalid-resource"] {
        within(T, "the Operation fails for good", || {
            server.get(&["operation", name]).is_some_and(|o| condition(&o, "Succeeded").is_some_and(|c| c["status"] == "False"))
        });
    }
    let events = |name: &str| -> Vec<(String, String)> {
        items(&server, &["events", "--field-selector", &format!("involvedObject.name={name}")])
            .iter()
            .map(|e| (e["reason"].as_str().unwrap_or_default().to_string(), e["message"].as_str().unwrap_or_default().to_string()))
            .collect()
    };
    let credential = events("missing-credential");
    assert!(
        credential.contains(&(
            "FunctionInvocation".to_string(),
            r#"cannot get operation pipeline step "write" credential "db" from Secret: secrets "absent" not found"#.to_string()
        )),
        "{credential:?}"
    );
    let invalid = events("invalid-resource");
    assert!(
        invalid.iter().any(|(reason, message)| reason == "InvalidResource"
            && message.starts_with(r#"cannot apply desired resource: ConfigMap "Not_A_Name" is invalid: metadata.name: Invalid value: "Not_A_Name""#)),
        "{invalid:?}"
    );
    for name in ["missing-credential", "invalid-resource"] {
        let op = server.get(&["operation", name]).unwrap();
        let said = format!("{:?} {op}", events(name));
        assert!(!said.contains("Composition"), "{said}");
    }
}

/// A CronOperation every minute whose Operations never finish (a fatal result, retried up to
/// 1000 times), under `policy`.
fn never_finishing(name: &str, policy: &str) -> String {
    format!(
        "apiVersion: ops.crossplane.io/v1alpha1\nkind: CronOperation\nmetadata: {{name: {name}}}\nspec:\n  schedule: \"*/1 * * * *\"\n  concurrencyPolicy: {policy}\n  operationTemplate:\n    spec:\n{}",
        failing_spec(1000, "still busy", 6)
    )
}

/// `concurrencyPolicy` with Operations still running at the next scheduled time: `Allow` runs
/// the next beside them, `Forbid` skips it, `Replace` deletes the running one first.
#[test]
fn cron_concurrency_policies_decide_about_running_operations() {
    let server = start();
    for (name, policy) in [("allow", "Allow"), ("forbid", "Forbid"), ("replace", "Replace")] {
        server.apply(&never_finishing(name, policy));
    }
    let of = |name: &str| names(&items(&server, &["operations", "-l", &format!("ops.crossplane.io/cronoperation={name}")]));
    let mut replaced = BTreeSet::new();
    within(T, "three runs beside each other, and two replaced", || {
        let current = of("replace");
        assert!(current.len() <= 1, "Replace keeps one running Operation: {current:?}");
        replaced.extend(current);
        of("allow").len() >= 3 && replaced.len() >= 2
    });
    let forbidden = of("forbid");
    assert_eq!(forbidden.len(), 1, "Forbid runs nothing beside a running Operation: {forbidden:?}");
    let running = server.get(&["operation", forbidden.iter().next().unwrap()]).unwrap();
    assert!(!is_true(&running, "Succeeded"), "{running:#}");
}
