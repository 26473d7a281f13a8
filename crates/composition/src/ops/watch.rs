//! WatchOperations: a watch of `spec.watch` (kind, namespace, labels) per WatchOperation, and
//! for each change of a watched resource an Operation named
//! `<watchoperation>-<7 hex of sha256(apiVersion/kind/namespace/name/uid/resourceVersion)>`
//! (a deleted resource's resourceVersion is `ops.crossplane.io/synthetic-deleted`), labelled
//! `ops.crossplane.io/watchoperation=<name>` and annotated with the watched resource
//! (`ops.crossplane.io/watched-resource-*`), so its steps get that resource as a required
//! resource. `Watching` says whether the watch runs; `watchingResources` counts what it
//! matches. The finalizer `watchoperation.ops.crossplane.io` stops the watch on deletion.
//!
//! The watch's handler must not block: it only records the change and queues the
//! WatchOperation, whose reconcile creates the Operations.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use oxplane_runtime::Runtime;
use oxplane_runtime::conditions::{self, Condition};
use oxplane_runtime::controller::{Action, Controller, ControllerConfig, ReconcileError, Reconciler, spec_or_metadata_changed};
use oxplane_runtime::events::EventRecorder;
use oxplane_runtime::kinds::Gvk;
use oxplane_runtime::object::{self, ObjectKey};
use oxplane_runtime::watches::{WatchEvent, WatchHandle};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::cron::owner_key;
use super::history::{collect_garbage, delete_running, operation_from_template, owned, running_names, set_run_status};
use super::{
    ANNOTATION_WATCHED_API_VERSION, ANNOTATION_WATCHED_KIND, ANNOTATION_WATCHED_NAME, ANNOTATION_WATCHED_NAMESPACE, ANNOTATION_WATCHED_RESOURCE_VERSION,
    Clock, FINALIZER_WATCH_OPERATION, LABEL_WATCH_OPERATION, operation_kind, watch_operation_kind,
};

/// The resourceVersion a deleted watched resource is given.
pub const SYNTHETIC_DELETED: &str = "ops.crossplane.io/synthetic-deleted";

/// What a WatchOperation watches.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Target {
    gvk: Gvk,
    namespace: Option<String>,
    labels: Map<String, Value>,
}

impl Target {
    fn of(watch_operation: &Value) -> Option<Target> {
        let watch = watch_operation.pointer("/spec/watch")?;
        let text = |f: &str| watch.get(f).and_then(Value::as_str).unwrap_or_default();
        Some(Target {
            gvk: Gvk::from_api_version(text("apiVersion"), text("kind")),
            namespace: Some(text("namespace")).filter(|ns| !ns.is_empty()).map(str::to_string),
            labels: watch.get("matchLabels").and_then(Value::as_object).cloned().unwrap_or_default(),
        })
    }

    fn matches(&self, resource: &Value) -> bool {
        if self.namespace.as_deref().is_some_and(|ns| object::namespace(resource) != Some(ns)) {
            return false;
        }
        self.labels.iter().all(|(k, v)| v.as_str().is_some_and(|v| object::label(resource, k) == Some(v)))
    }
}

/// A running watch and the changes it saw that have no Operation yet.
struct Watching {
    target: Target,
    handle: WatchHandle,
    pending: Arc<Mutex<Vec<(Value, bool)>>>,
}

/// The name of the Operation for one change of a watched resource.
pub fn operation_name(watch_operation: &str, resource: &Value, deleted: bool) -> String {
    let text = |p: &str| resource.pointer(p).and_then(Value::as_str).unwrap_or_default().to_string();
    let version = if deleted { SYNTHETIC_DELETED.to_string() } else { text("/metadata/resourceVersion") };
    let key = [text("/apiVersion"), text("/kind"), text("/metadata/namespace"), text("/metadata/name"), text("/metadata/uid"), version].join("/");
    let digest = hex_of(&Sha256::digest(key.as_bytes()));
    format!("{watch_operation}-{}", &digest[..7])
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Runs WatchOperations.
pub struct WatchReconciler {
    runtime: Runtime,
    clock: Clock,
    recorder: EventRecorder,
    watching: Mutex<HashMap<String, Watching>>,
    controller: OnceLock<Weak<Controller>>,
}

impl WatchReconciler {
    fn stop_watch(&self, name: &str) {
        self.watching.lock().unwrap_or_else(|p| p.into_inner()).remove(name);
    }

    /// Starts (or restarts, if the target changed) the watch of `name`; its pending changes.
    fn ensure_watch(&self, name: &str, target: &Target) -> Option<Arc<Mutex<Vec<(Value, bool)>>>> {
        let mut watching = self.watching.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(existing) = watching.get(name)
            && &existing.target == target
        {
            return Some(existing.pending.clone());
        }
        let controller = self.controller.get()?.upgrade()?;
        let pending: Arc<Mutex<Vec<(Value, bool)>>> = Arc::default();
        let (for_handler, owner, filter) = (pending.clone(), name.to_string(), target.clone());
        let handle = controller.subscribe_mapped(&self.runtime.watches, &target.gvk, move |event| {
            let change = match event {
                WatchEvent::Applied { new, .. } => Some(((**new).clone(), false)),
                WatchEvent::Deleted(old) => Some(((**old).clone(), true)),
                WatchEvent::State(_) => None,
            };
            match change {
                Some((resource, deleted)) if filter.matches(&resource) => {
                    for_handler.lock().unwrap_or_else(|p| p.into_inner()).push((resource, deleted));
                    vec![ObjectKey::new(None, &owner)]
                }
                // A change of the informer's state (synced, kind not served) is shown in Watching.
                None => vec![ObjectKey::new(None, &owner)],
                Some(_) => Vec::new(),
            }
        });
        watching.insert(name.to_string(), Watching { target: target.clone(), handle, pending: pending.clone() });
        Some(pending)
    }

    /// How many resources the watch of `name` matches now, or why it cannot watch.
    fn watched_count(&self, name: &str) -> Result<usize, String> {
        let watching = self.watching.lock().unwrap_or_else(|p| p.into_inner());
        let Some(watch) = watching.get(name) else { return Err("the watch is not running".into()) };
        let informer = watch.handle.informer();
        match informer.state() {
            oxplane_runtime::watches::InformerState::NotServed(message) | oxplane_runtime::watches::InformerState::Failing(message) => Err(message),
            _ => Ok(informer.list().iter().filter(|r| watch.target.matches(r)).count()),
        }
    }
}

#[async_trait::async_trait]
impl Reconciler for WatchReconciler {
    async fn reconcile(&self, key: &ObjectKey) -> Result<Action, ReconcileError> {
        let kube = &self.runtime.kube;
        let Some(mut wo) = kube.get(&watch_operation_kind(), None, &key.name).await? else {
            self.stop_watch(&key.name);
            return Ok(Action::Done);
        };
        if object::is_deleting(&wo) {
            self.stop_watch(&key.name);
            if object::remove_finalizer(&mut wo, FINALIZER_WATCH_OPERATION) {
                kube.replace(&watch_operation_kind(), &wo).await?;
            }
            return Ok(Action::Done);
        }
        if object::add_finalizer(&mut wo, FINALIZER_WATCH_OPERATION) {
            wo = kube.replace(&watch_operation_kind(), &wo).await?;
        }
        let before = conditions::status_of(&wo);
        if object::annotation(&wo, "crossplane.io/paused") == Some("true") {
            self.stop_watch(&key.name);
            conditions::set(&mut wo, Condition::new("Watching", "False", "WatchPaused"));
            conditions::set(&mut wo, Condition::reconcile_paused());
            if conditions::status_of(&wo) != before {
                kube.replace_status(&watch_operation_kind(), &wo).await?;
            }
            return Ok(Action::Done);
        }
        let Some(target) = Target::of(&wo) else {
            return Ok(Action::Done);
        };
        let Some(pending) = self.ensure_watch(&key.name, &target) else {
            return Ok(Action::Requeue);
        };
        let changes: Vec<(Value, bool)> = std::mem::take(&mut *pending.lock().unwrap_or_else(|p| p.into_inner()));
        let mut operations = collect_garbage(kube, &wo, owned(kube, LABEL_WATCH_OPERATION, &key.name).await?).await?;
        let policy = wo.pointer("/spec/concurrencyPolicy").and_then(Value::as_str).unwrap_or("Allow").to_string();
        for (resource, deleted) in changes {
            let name = operation_name(&key.name, &resource, deleted);
            if operations.iter().any(|o| object::name(o) == Some(name.as_str())) {
                continue;
            }
            if policy == "Forbid" && !running_names(&operations).is_empty() {
                self.recorder.normal(&wo, "ScheduleOperation", format!("Skipped a change of {}: an Operation is still running (concurrencyPolicy: Forbid)", object::name(&resource).unwrap_or_default()));
                continue;
            }
            if policy == "Replace" {
                delete_running(kube, &mut operations).await?;
            }
            let text = |p: &str| resource.pointer(p).and_then(Value::as_str).unwrap_or_default().to_string();
            let mut annotations = Map::new();
            annotations.insert(ANNOTATION_WATCHED_API_VERSION.into(), json!(text("/apiVersion")));
            annotations.insert(ANNOTATION_WATCHED_KIND.into(), json!(text("/kind")));
            annotations.insert(ANNOTATION_WATCHED_NAME.into(), json!(text("/metadata/name")));
            annotations.insert(ANNOTATION_WATCHED_NAMESPACE.into(), json!(text("/metadata/namespace")));
            let version = if deleted { SYNTHETIC_DELETED.to_string() } else { text("/metadata/resourceVersion") };
            annotations.insert(ANNOTATION_WATCHED_RESOURCE_VERSION.into(), json!(version));
            let operation = operation_from_template(&wo, LABEL_WATCH_OPERATION, &name, &annotations);
            match kube.create(&operation_kind(), &operation).await {
                Ok(created) => {
                    self.recorder.normal(&wo, "ScheduleOperation", format!("Created Operation {name}"));
                    operations.insert(0, created);
                }
                Err(error) if error.is_already_exists() => {}
                Err(error) => {
                    // Keep the change for the retry.
                    pending.lock().unwrap_or_else(|p| p.into_inner()).push((resource, deleted));
                    return Err(error.into());
                }
            }
            object::set_status_field(&mut wo, "lastScheduleTime", json!(self.clock.now().round(jiff::Unit::Second).unwrap_or(self.clock.now()).to_string()));
        }
        set_run_status(&mut wo, &operations);
        match self.watched_count(&key.name) {
            Ok(count) => {
                object::set_status_field(&mut wo, "watchingResources", json!(count));
                conditions::set(&mut wo, Condition::new("Watching", "True", "WatchActive"));
                conditions::set(&mut wo, Condition::reconcile_success());
            }
            Err(message) => {
                conditions::set(&mut wo, Condition::new("Watching", "False", "WatchFailed").with_message(message.clone()));
                conditions::set(&mut wo, Condition::reconcile_error(message));
            }
        }
        if conditions::status_of(&wo) != before {
            kube.replace_status(&watch_operation_kind(), &wo).await?;
        }
        Ok(Action::Done)
    }
}

/// Starts the WatchOperation controller, named `watchoperation.ops.crossplane.io`.
pub fn start_controller(runtime: &Runtime, clock: Clock) -> Arc<Controller> {
    let recorder = EventRecorder::new(runtime.kube.clone(), "watchoperation.ops.crossplane.io");
    let reconciler = Arc::new(WatchReconciler {
        runtime: runtime.clone(),
        clock,
        recorder,
        watching: Mutex::new(HashMap::new()),
        controller: OnceLock::new(),
    });
    let controller = Controller::start(ControllerConfig::new("watchoperation.ops.crossplane.io"), reconciler.clone(), runtime.metrics.clone());
    let _ = reconciler.controller.set(Arc::downgrade(&controller));
    controller.watch_own(&runtime.watches, &watch_operation_kind().gvk, spec_or_metadata_changed);
    controller.watch_mapped(&runtime.watches, &operation_kind().gvk, |event| owner_key(event, LABEL_WATCH_OPERATION));
    controller
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn each_change_gets_its_own_operation_name() {
        let cm = |rv: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "default", "name": "cm", "uid": "u", "resourceVersion": rv}});
        let first = operation_name("wo", &cm("1"), false);
        assert!(first.starts_with("wo-") && first.len() == "wo-".len() + 7, "{first}");
        assert_eq!(first, operation_name("wo", &cm("1"), false));
        assert_ne!(first, operation_name("wo", &cm("2"), false));
        assert_ne!(first, operation_name("wo", &cm("1"), true));
    }

    #[test]
    fn targets_match_namespace_and_labels() {
        let wo = json!({"spec": {"watch": {"apiVersion": "v1", "kind": "ConfigMap", "namespace": "a", "matchLabels": {"x": "1"}}}});
        let target = Target::of(&wo).unwrap();
        assert_eq!(target.gvk, Gvk::new("", "v1", "ConfigMap"));
        let cm = |ns: &str, labels: Value| json!({"metadata": {"namespace": ns, "name": "n", "labels": labels}});
        assert!(target.matches(&cm("a", json!({"x": "1", "y": "2"}))));
        assert!(!target.matches(&cm("b", json!({"x": "1"}))));
        assert!(!target.matches(&cm("a", json!({"x": "2"}))));
        let all = Target::of(&json!({"spec": {"watch": {"apiVersion": "v1", "kind": "ConfigMap"}}})).unwrap();
        assert!(all.matches(&cm("z", json!({}))));
    }
}
