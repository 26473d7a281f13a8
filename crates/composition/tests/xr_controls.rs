//! What steers an XR's reconciles besides its spec, on an in-process server: the
//! `crossplane.io/paused` annotation (no composing, not even deletion, while it is "true";
//! `Synced=False/ReconcilePaused`), the pipeline's TTL (the XR is reconciled again after the
//! shortest TTL a step returned, with no watch event), and step `credentials` (the function
//! receives the Secret's data; a missing Secret is named in `Synced=False`).
//!
//! The credentials and the TTL are seen through a test-only function registered in the core's
//! `FunctionRegistry`: it composes a ConfigMap holding the credentials it was given. Nothing
//! watches a credentials Secret, so a change to the Secret reaching that ConfigMap proves a
//! reconcile that no watch event caused.

use crate::support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use oxplane_functions::protocol::{Credentials, Resource, RunFunctionRequest, RunFunctionResponse, response_to};
use oxplane_functions::{Function, FunctionError};
use oxplane_runtime::kinds::Kind;
use oxplane_runtime::managed::connection;
use oxplane_runtime::object;
use serde_json::{Value, json};
use support::{Plane, XAPP_XRD as XRD, compositions, condition, config_maps, is_true};


const CONTROLLER: &str = "composite/xapps.example.org";

fn xapps() -> Kind {
    Kind::new("example.org", "v1", "XApp", "xapps", true)
}

/// A test function: composes the ConfigMap `echo` whose data are the credentials it received
/// (`<credential>.<key>`), and remembers every set of credentials it was called with.
#[derive(Default)]
struct EchoCredentials {
    seen: Mutex<Vec<BTreeMap<String, Credentials>>>,
}

#[async_trait::async_trait]
impl Function for EchoCredentials {
    async fn run(&self, request: RunFunctionRequest) -> Result<RunFunctionResponse, FunctionError> {
        self.seen.lock().unwrap().push(request.credentials.clone());
        // A long TTL of its own: the pipeline's TTL is whatever the other steps say.
        let mut rsp = response_to(&request, Duration::from_secs(3600));
        let mut data = serde_json::Map::new();
        for (name, Credentials::CredentialData(values)) in &request.credentials {
            for (key, value) in values {
                data.insert(format!("{name}.{key}"), json!(String::from_utf8_lossy(value)));
            }
        }
        rsp.desired.resources.insert("echo".into(), Resource { resource: json!({"apiVersion": "v1", "kind": "ConfigMap", "data": data}), ..Default::default() });
        Ok(rsp)
    }
}

/// A Composition `name` running the echo function with the credential `db` from the Secret
/// `default/<secret>`, then auto-ready with `ttl` (none: its default).
fn echo_composition(name: &str, secret: &str, ttl: Option<&str>) -> String {
    let input = ttl.map(|t| format!("\n    input: {{apiVersion: autoready.fn.crossplane.io/v1beta1, kind: Input, ttl: {t}}}")).unwrap_or_default();
    format!(
        "apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: {name}
spec:
  compositeTypeRef: {{apiVersion: example.org/v1, kind: XApp}}
  mode: Pipeline
  pipeline:
  - step: echo
    functionRef: {{name: function-echo-credentials}}
    credentials:
    - name: db
      source: Secret
      secretRef: {{namespace: default, name: {secret}}}
  - step: ready
    functionRef: {{name: function-auto-ready}}{input}
"
    )
}

/// Starts a plane with the XRD and the echo function, returning the function to inspect.
async fn plane_with_echo() -> (Plane, Arc<EchoCredentials>) {
    let plane = Plane::start().await;
    let echo = Arc::new(EchoCredentials::default());
    plane.core.functions.register("function-echo-credentials", echo.clone());
    plane.apply_yaml(XRD).await;
    (plane, echo)
}

/// Writes the Secret `default/<name>` with exactly `data` (values in plain text, as `stringData`).
async fn write_secret(plane: &Plane, name: &str, data: &[(&str, &str)]) {
    let string_data: serde_json::Map<String, Value> = data.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    let kube = &plane.runtime.kube;
    match kube.get(&connection::secret_kind(), Some("default"), name).await.unwrap() {
        Some(mut existing) => {
            existing["data"] = json!({});
            existing["stringData"] = Value::Object(string_data);
            kube.replace(&connection::secret_kind(), &existing).await.unwrap();
        }
        None => {
            let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "default"}, "stringData": string_data});
            kube.create(&connection::secret_kind(), &secret).await.unwrap();
        }
    }
}

/// Creates the XR `name` using Composition `composition`.
async fn create_xr(plane: &Plane, name: &str, composition: &str) {
    let xr = json!({
        "apiVersion": "example.org/v1", "kind": "XApp", "metadata": {"name": name, "namespace": "default"},
        "spec": {"color": "red", "crossplane": {"compositionRef": {"name": composition}}}
    });
    plane.kind_of(&xr).await;
    plane.runtime.kube.create(&xapps(), &xr).await.unwrap();
}

/// The data of the ConfigMap an XR composed under `resource` (composition resource name).
async fn composed_data(plane: &Plane, xr: &str, resource: &str) -> Option<Value> {
    let xr = plane.runtime.kube.get(&xapps(), Some("default"), xr).await.unwrap()?;
    let uid = object::uid(&xr).unwrap();
    let cms = plane.runtime.kube.list(&config_maps(), Some("default"), None).await.unwrap();
    cms.into_iter()
        .find(|c| object::controller_uid(c) == Some(uid) && object::annotation(c, "crossplane.io/composition-resource-name") == Some(resource))
        .map(|c| c["data"].clone())
}

#[tokio::test]
async fn a_step_receives_its_credentials_and_a_missing_secret_is_named() {
    let (plane, echo) = plane_with_echo().await;
    write_secret(&plane, "db-creds", &[("user", "alice"), ("password", "s3cret")]).await;
    plane.apply_yaml(&echo_composition("echo", "db-creds", None)).await;
    plane.apply_yaml(&echo_composition("echo-missing", "absent", None)).await;

    create_xr(&plane, "with-creds", "echo").await;
    plane.wait_object(&xapps(), Some("default"), "with-creds", "the XR Ready", |x| is_true(x, "Ready") && is_true(x, "Synced")).await;
    assert_eq!(composed_data(&plane, "with-creds", "echo").await.unwrap(), json!({"db.password": "s3cret", "db.user": "alice"}));
    let seen = echo.seen.lock().unwrap().last().cloned().unwrap();
    let expected: BTreeMap<String, Vec<u8>> = [("password".to_string(), b"s3cret".to_vec()), ("user".to_string(), b"alice".to_vec())].into();
    assert_eq!(seen, BTreeMap::from([("db".to_string(), Credentials::CredentialData(expected))]), "exactly the Secret's data, under the credential's name");

    create_xr(&plane, "without-creds", "echo-missing").await;
    let message = "cannot compose resources: cannot get Composition pipeline step \"echo\" credential \"db\" from Secret: secrets \"absent\" not found";
    let failed = plane
        .wait_object(&xapps(), Some("default"), "without-creds", "the missing Secret named", |x| {
            condition(x, "Synced").is_some_and(|c| c.status == "False" && c.reason == "ReconcileError" && c.message == message)
        })
        .await;
    plane.wait_event(&failed, "Warning", "ComposeResources", message).await;
    assert!(failed["spec"]["crossplane"]["resourceRefs"].as_array().is_none_or(Vec::is_empty), "nothing composed without credentials");

    // The Secret appears: the retry composes with it.
    write_secret(&plane, "absent", &[("user", "late")]).await;
    plane.wait_object(&xapps(), Some("default"), "without-creds", "the XR recovered", |x| is_true(x, "Synced") && is_true(x, "Ready")).await;
    assert_eq!(composed_data(&plane, "without-creds", "echo").await.unwrap(), json!({"db.user": "late"}));
}

#[tokio::test]
async fn the_shortest_ttl_brings_the_xr_back_without_a_watch_event() {
    let (plane, _echo) = plane_with_echo().await;
    write_secret(&plane, "db-creds", &[("user", "alice")]).await;
    plane.apply_yaml(&echo_composition("echo", "db-creds", Some("2s"))).await;
    create_xr(&plane, "ttl", "echo").await;
    plane.wait_object(&xapps(), Some("default"), "ttl", "the XR Ready", |x| is_true(x, "Ready") && is_true(x, "Synced")).await;
    assert_eq!(composed_data(&plane, "ttl", "echo").await.unwrap(), json!({"db.user": "alice"}));

    // Nothing watches the Secret: only a timed reconcile can carry its change to the ConfigMap.
    // The shortest TTL is auto-ready's 2 s (the echo step says 1 h, patch-and-transform is not used).
    let before = plane.reconciles(CONTROLLER);
    write_secret(&plane, "db-creds", &[("user", "bob")]).await;
    plane.wait("the Secret's change composed by a TTL reconcile", async |p| (composed_data(p, "ttl", "echo").await? == json!({"db.user": "bob"})).then_some(())).await;
    // Idle, it keeps coming back every TTL (8 s is four TTLs; allow for a loaded machine).
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle = plane.reconciles(CONTROLLER);
    assert!(idle > before, "a reconcile carried the change");
    tokio::time::sleep(Duration::from_secs(8)).await;
    let requeued = plane.reconciles(CONTROLLER) - idle;
    assert!(requeued >= 2, "{requeued} reconciles in 8 s of idling with a 2 s TTL");

    // The control: with auto-ready's TTL at one hour the XR stays idle, and the Secret's next
    // change is not picked up.
    // The revision is read before the change: the XR may move to the new one at once.
    let revision = plane.runtime.kube.get(&xapps(), Some("default"), "ttl").await.unwrap().unwrap()["spec"]["crossplane"]["compositionRevisionRef"].clone();
    let mut composition = plane.runtime.kube.get(&compositions(), None, "echo").await.unwrap().unwrap();
    composition["spec"]["pipeline"][1]["input"]["ttl"] = json!("1h");
    plane.runtime.kube.replace(&compositions(), &composition).await.unwrap();
    plane.wait_object(&xapps(), Some("default"), "ttl", "the XR on the new revision", |x| x["spec"]["crossplane"]["compositionRevisionRef"] != revision).await;
    // Let the last TTL reconcile scheduled under the old revision (2 s) pass: wait for 3 s without a reconcile.
    let mut quiet = plane.reconciles(CONTROLLER);
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_secs(3)).await;
        let now = plane.reconciles(CONTROLLER);
        if now == quiet {
            break;
        }
        quiet = now;
    }
    write_secret(&plane, "db-creds", &[("user", "carol")]).await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(plane.reconciles(CONTROLLER), quiet, "no reconcile without a TTL due or a watch event");
    assert_eq!(composed_data(&plane, "ttl", "echo").await.unwrap(), json!({"db.user": "bob"}));
}

#[tokio::test]
async fn a_paused_xr_is_left_alone_until_unpaused() {
    let (plane, _echo) = plane_with_echo().await;
    plane
        .apply_yaml(
            r#"
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: colors
spec:
  compositeTypeRef: {apiVersion: example.org/v1, kind: XApp}
  mode: Pipeline
  pipeline:
  - step: compose
    functionRef: {name: function-patch-and-transform}
    input:
      apiVersion: pt.fn.crossplane.io/v1beta1
      kind: Resources
      resources:
      - name: settings
        base: {apiVersion: v1, kind: ConfigMap, data: {role: settings}}
        patches:
        - {fromFieldPath: spec.color, toFieldPath: data.color}
  - step: ready
    functionRef: {name: function-auto-ready}
"#,
        )
        .await;
    create_xr(&plane, "shop", "colors").await;
    plane.wait_object(&xapps(), Some("default"), "shop", "the XR Ready", |x| is_true(x, "Ready") && is_true(x, "Synced")).await;
    assert_eq!(composed_data(&plane, "shop", "settings").await.unwrap()["color"], "red");
    let kube = &plane.runtime.kube;

    let pause = |value: Value| json!({"metadata": {"annotations": {"crossplane.io/paused": value}}});
    kube.merge_patch(&xapps(), Some("default"), "shop", &pause(json!("true"))).await.unwrap();
    let paused = plane
        .wait_object(&xapps(), Some("default"), "shop", "Synced=False/ReconcilePaused", |x| {
            condition(x, "Synced").is_some_and(|c| {
                c.status == "False" && c.reason == "ReconcilePaused" && c.message == "Reconciliation (including deletion) is paused via the pause annotation"
            })
        })
        .await;
    plane.wait_event(&paused, "Normal", "ReconciliationPaused", "Reconciliation is paused via the pause annotation").await;

    // A change to the spec is not composed while paused.
    kube.merge_patch(&xapps(), Some("default"), "shop", &json!({"spec": {"color": "blue"}})).await.unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(composed_data(&plane, "shop", "settings").await.unwrap()["color"], "red");
    assert_eq!(condition(&kube.get(&xapps(), Some("default"), "shop").await.unwrap().unwrap(), "Synced").unwrap().reason, "ReconcilePaused");

    // Any other value than "true" does not pause: unpausing resumes at once.
    kube.merge_patch(&xapps(), Some("default"), "shop", &pause(json!("false"))).await.unwrap();
    plane.wait("the change composed after unpausing", async |p| (composed_data(p, "shop", "settings").await?["color"] == "blue").then_some(())).await;
    let xr = plane.wait_object(&xapps(), Some("default"), "shop", "Synced again", |x| is_true(x, "Synced")).await;
    assert_eq!(condition(&xr, "Synced").unwrap().reason, "ReconcileSuccess");

    // Deletion is paused too: the XR and what it composed stay until it is unpaused.
    kube.merge_patch(&xapps(), Some("default"), "shop", &pause(json!("true"))).await.unwrap();
    plane.wait_object(&xapps(), Some("default"), "shop", "paused again", |x| condition(x, "Synced").is_some_and(|c| c.reason == "ReconcilePaused")).await;
    kube.delete(&xapps(), Some("default"), "shop", &Default::default()).await.unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let held = kube.get(&xapps(), Some("default"), "shop").await.unwrap().expect("a paused XR is not let go");
    assert!(object::is_deleting(&held));
    assert!(composed_data(&plane, "shop", "settings").await.is_some());
    kube.merge_patch(&xapps(), Some("default"), "shop", &json!({"metadata": {"annotations": {"crossplane.io/paused": null}}})).await.unwrap();
    plane.wait("the XR gone once unpaused", async |p| p.runtime.kube.get(&xapps(), Some("default"), "shop").await.unwrap().is_none().then_some(())).await;
}
