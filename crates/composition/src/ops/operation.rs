//! The Operation reconciler: an Operation runs once. Each attempt marks it
//! `Succeeded=Unknown/PipelineRunning`, checks that every function has the `operation`
//! capability (a function without it fails the Operation at once: only a person can fix
//! that), runs the pipeline from an empty desired state with no observed state (a
//! watch-triggered Operation's steps get the watched resource as the required resource
//! `ops.crossplane.io/watched-resource`), records each step's `output`, applies every desired
//! resource by server-side apply (field manager `ops.crossplane.io/operation/<uid>`, forced),
//! and ends `Succeeded=True/PipelineSuccess`. A failed attempt counts in `status.failures` and
//! is retried with backoff until `spec.retryLimit` (5) failures, then the Operation ends
//! `Succeeded=False/PipelineError` "failure limit of N reached".

use std::sync::Arc;

use oxplane_functions::protocol::{Match, ResourceSelector, Severity, State};
use oxplane_runtime::Runtime;
use oxplane_runtime::conditions::{self, Condition};
use oxplane_runtime::controller::{Action, Controller, ControllerConfig, ReconcileError, Reconciler, spec_or_metadata_changed};
use oxplane_runtime::events::EventRecorder;
use oxplane_runtime::kinds::Gvk;
use oxplane_runtime::object::{self, ObjectKey};
use oxplane_runtime::queue::Backoff;
use serde_json::{Value, json};

use super::{
    ANNOTATION_WATCHED_API_VERSION, ANNOTATION_WATCHED_KIND, ANNOTATION_WATCHED_NAME, ANNOTATION_WATCHED_NAMESPACE, REQUIREMENT_WATCHED_RESOURCE,
    operation_kind,
};
use crate::composite::pipeline::{self, PipelineOf, Step};
use crate::packages::{FunctionRegistry, function_revision_kind};

/// Resources an Operation applies are owned by `ops.crossplane.io/operation/<uid>`.
pub const FIELD_OWNER_PREFIX: &str = "ops.crossplane.io/operation/";
/// Failures allowed when `spec.retryLimit` is not set.
pub const DEFAULT_RETRY_LIMIT: i64 = 5;
/// The capability a function needs to run in an Operation.
pub const CAPABILITY_OPERATION: &str = "operation";

/// `Succeeded=Unknown/PipelineRunning`.
fn running() -> Condition {
    Condition::new("Succeeded", "Unknown", "PipelineRunning")
}

/// `Succeeded=True/PipelineSuccess`.
fn complete() -> Condition {
    Condition::new("Succeeded", "True", "PipelineSuccess")
}

/// `Succeeded=False/PipelineError`.
fn failed(message: impl Into<String>) -> Condition {
    Condition::new("Succeeded", "False", "PipelineError").with_message(message)
}

/// Whether an Operation has finished (`Succeeded` is True or False).
pub fn is_complete(operation: &Value) -> bool {
    conditions::get(operation, "Succeeded").is_some_and(|c| c.status == "True" || c.status == "False")
}

/// Runs Operations.
pub struct OperationReconciler {
    runtime: Runtime,
    functions: Arc<FunctionRegistry>,
    recorder: EventRecorder,
}

impl OperationReconciler {
    /// A reconciler recording events as `operation.ops.crossplane.io`.
    pub fn new(runtime: Runtime, functions: Arc<FunctionRegistry>) -> Self {
        let recorder = EventRecorder::new(runtime.kube.clone(), "operation.ops.crossplane.io");
        OperationReconciler { runtime, functions, recorder }
    }

    async fn write_status(&self, operation: &Value) -> Result<Value, ReconcileError> {
        Ok(self.runtime.kube.replace_status(&operation_kind(), operation).await?)
    }

    /// Counts a failed attempt: a Warning event, `Synced=False` with the cause, and a retry.
    async fn fail_attempt(&self, mut operation: Value, reason: &str, message: String) -> Result<Action, ReconcileError> {
        let failures = operation.pointer("/status/failures").and_then(Value::as_i64).unwrap_or(0) + 1;
        object::set_status_field(&mut operation, "failures", json!(failures));
        self.recorder.warning(&operation, reason, message.clone());
        conditions::set(&mut operation, Condition::reconcile_error(&message));
        self.write_status(&operation).await?;
        Ok(Action::Requeue)
    }

    /// The capabilities of the active revision of the Function `name` (none: it has no
    /// active revision).
    async fn capabilities(&self, name: &str) -> Result<Option<Vec<String>>, ReconcileError> {
        let revisions = self.runtime.kube.list(&function_revision_kind(), None, Some(&format!("pkg.crossplane.io/package={name}"))).await?;
        Ok(revisions.iter().find(|r| r.pointer("/spec/desiredState").and_then(Value::as_str) == Some("Active")).map(|r| {
            let listed: Vec<String> =
                r.pointer("/status/capabilities").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).map(normalise_capability).collect();
            // Crossplane: a function that declares no capabilities is a composition function.
            if listed.is_empty() { vec!["composition".to_string()] } else { listed }
        }))
    }
}

/// Crossplane matches capabilities lowercased with non-alphanumerics removed.
fn normalise_capability(capability: &str) -> String {
    capability.chars().filter(char::is_ascii_alphanumeric).map(|c| c.to_ascii_lowercase()).collect()
}

/// The pipeline steps of an Operation; a watch-triggered one gives every step the watched
/// resource.
fn steps_of(operation: &Value) -> Result<Vec<Step>, String> {
    let watched = match (object::annotation(operation, ANNOTATION_WATCHED_API_VERSION), object::annotation(operation, ANNOTATION_WATCHED_KIND)) {
        (Some(api_version), Some(kind)) => object::annotation(operation, ANNOTATION_WATCHED_NAME).map(|name| ResourceSelector {
            api_version: api_version.to_string(),
            kind: kind.to_string(),
            matching: Match::Name(name.to_string()),
            namespace: object::annotation(operation, ANNOTATION_WATCHED_NAMESPACE).filter(|ns| !ns.is_empty()).map(str::to_string),
        }),
        _ => None,
    };
    let mut steps = Vec::new();
    for raw in operation.pointer("/spec/pipeline").and_then(Value::as_array).into_iter().flatten() {
        let mut step = Step::parse(raw)?;
        if let Some(selector) = &watched {
            step.required.insert(REQUIREMENT_WATCHED_RESOURCE.to_string(), selector.clone());
        }
        steps.push(step);
    }
    Ok(steps)
}

/// Adds a reference to an applied resource, keeping the list deduplicated and sorted by
/// apiVersion, kind, namespace and name.
fn add_resource_ref(refs: &mut Vec<Value>, applied: &Value) {
    let mut reference = json!({
        "apiVersion": applied.get("apiVersion").cloned().unwrap_or(Value::Null),
        "kind": applied.get("kind").cloned().unwrap_or(Value::Null),
        "name": object::name(applied).unwrap_or_default(),
    });
    if let Some(namespace) = object::namespace(applied).filter(|ns| !ns.is_empty()) {
        reference["namespace"] = json!(namespace);
    }
    if refs.contains(&reference) {
        return;
    }
    refs.push(reference);
    let key = |r: &Value| {
        ["apiVersion", "kind", "namespace", "name"].iter().map(|f| r.get(*f).and_then(Value::as_str).unwrap_or_default()).collect::<String>()
    };
    refs.sort_by_key(key);
}

#[async_trait::async_trait]
impl Reconciler for OperationReconciler {
    async fn reconcile(&self, key: &ObjectKey) -> Result<Action, ReconcileError> {
        let kube = &self.runtime.kube;
        let Some(mut operation) = kube.get(&operation_kind(), None, &key.name).await? else {
            return Ok(Action::Done);
        };
        if object::is_deleting(&operation) || is_complete(&operation) {
            return Ok(Action::Done);
        }
        let limit = operation.pointer("/spec/retryLimit").and_then(Value::as_i64).unwrap_or(DEFAULT_RETRY_LIMIT);
        let failures = operation.pointer("/status/failures").and_then(Value::as_i64).unwrap_or(0);
        if failures >= limit {
            conditions::set(&mut operation, Condition::reconcile_success());
            conditions::set(&mut operation, failed(format!("failure limit of {limit} reached")));
            self.write_status(&operation).await?;
            return Ok(Action::Done);
        }
        // Written every attempt: a stale copy of the Operation is refused here, before any
        // function runs.
        conditions::set(&mut operation, running());
        let mut operation = self.write_status(&operation).await?;

        let steps = match steps_of(&operation) {
            Ok(steps) => steps,
            Err(error) => {
                conditions::set(&mut operation, Condition::reconcile_success());
                conditions::set(&mut operation, failed(error));
                self.write_status(&operation).await?;
                return Ok(Action::Done);
            }
        };
        let mut missing = Vec::new();
        for raw in operation.pointer("/spec/pipeline").and_then(Value::as_array).into_iter().flatten() {
            let name = raw.pointer("/functionRef/name").and_then(Value::as_str).unwrap_or_default();
            match self.capabilities(name).await? {
                Some(capabilities) if capabilities.iter().any(|c| c == CAPABILITY_OPERATION) => {}
                Some(_) => missing.push(format!("function {name:?} does not have the {CAPABILITY_OPERATION:?} capability")),
                None => missing.push(format!(
                    "function {name:?}: cannot find an active FunctionRevision (a FunctionRevision with spec.desiredState: Active)"
                )),
            }
        }
        if !missing.is_empty() {
            // Only a person can fix a pipeline of the wrong functions: fail now, no retries.
            let message = format!("function capability check failed: {}", missing.join("; "));
            self.recorder.warning(&operation, "InvalidPipeline", message.clone());
            conditions::set(&mut operation, Condition::new("ValidPipeline", "False", "MissingCapabilities").with_message(message.clone()));
            conditions::set(&mut operation, Condition::reconcile_success());
            conditions::set(&mut operation, failed(message));
            self.write_status(&operation).await?;
            return Ok(Action::Done);
        }
        conditions::set(&mut operation, Condition::new("ValidPipeline", "True", "ValidPipeline"));

        let env = pipeline::Live { runtime: &self.runtime, functions: &self.functions, of: PipelineOf::Operation };
        let outcome = match pipeline::run(&env, &steps, State::default(), json!({})).await {
            Ok(outcome) => outcome,
            Err(error) => return self.fail_attempt(operation, "FunctionInvocation", error).await,
        };
        for (step, result) in &outcome.results {
            match result.severity {
                Severity::Fatal => {}
                Severity::Normal => self.recorder.normal(&operation, "RunPipelineStep", format!("Pipeline step {step:?}: {}", result.message)),
                Severity::Warning => self.recorder.warning(&operation, "RunPipelineStep", format!("Pipeline step {step:?}: {}", result.message)),
                Severity::Unspecified => self.recorder.warning(
                    &operation,
                    "RunPipelineStep",
                    format!("Pipeline step {step:?} returned a result of unknown severity (assuming warning): {}", result.message),
                ),
            }
        }
        if let Some(fatal) = outcome.fatal {
            return self.fail_attempt(operation, "FunctionInvocation", fatal).await;
        }
        let outputs: Vec<Value> = outcome.outputs.iter().map(|(step, output)| json!({"step": step, "output": output})).collect();
        if !outputs.is_empty() {
            object::set_status_field(&mut operation, "pipeline", Value::Array(outputs));
        }

        let manager = format!("{FIELD_OWNER_PREFIX}{}", object::uid(&operation).unwrap_or_default());
        let mut refs: Vec<Value> = operation.pointer("/status/appliedResourceRefs").and_then(Value::as_array).cloned().unwrap_or_default();
        for (name, desired) in &outcome.desired.resources {
            let resource = &desired.resource;
            let applied = match Gvk::of(resource) {
                // Crossplane's prefix; the API server's errors after it name the object.
                None => Err(format!("cannot apply desired resource: desired resource {name:?} has no apiVersion and kind")),
                Some(gvk) => match self.runtime.watches.kinds().resolve(&gvk).await {
                    Err(error) => Err(format!("cannot apply desired resource: {error}")),
                    Ok(kind) => kube.apply(&kind, resource, &manager, true).await.map_err(|e| format!("cannot apply desired resource: {e}")),
                },
            };
            match applied {
                Ok(applied) => add_resource_ref(&mut refs, &applied),
                Err(message) => {
                    object::set_status_field(&mut operation, "appliedResourceRefs", Value::Array(refs));
                    return self.fail_attempt(operation, "InvalidResource", message).await;
                }
            }
        }
        if !refs.is_empty() {
            object::set_status_field(&mut operation, "appliedResourceRefs", Value::Array(refs));
        }
        conditions::set(&mut operation, Condition::reconcile_success());
        conditions::set(&mut operation, complete());
        self.write_status(&operation).await?;
        Ok(Action::Done)
    }
}

/// Starts the Operation controller, named `operation.ops.crossplane.io`. Failed attempts back
/// off from one second up to a minute.
pub fn start_controller(runtime: &Runtime, functions: Arc<FunctionRegistry>) -> Arc<Controller> {
    let reconciler = Arc::new(OperationReconciler::new(runtime.clone(), functions));
    let mut config = ControllerConfig::new("operation.ops.crossplane.io");
    config.backoff = Backoff { base: std::time::Duration::from_secs(1), max: std::time::Duration::from_secs(60) };
    let controller = Controller::start(config, reconciler, runtime.metrics.clone());
    controller.watch_own(&runtime.watches, &operation_kind().gvk, spec_or_metadata_changed);
    controller
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn applied_references_are_sorted_and_deduplicated() {
        let mut refs = Vec::new();
        let cm = |ns: &str, name: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": ns, "name": name}});
        add_resource_ref(&mut refs, &cm("b", "x"));
        add_resource_ref(&mut refs, &cm("a", "y"));
        add_resource_ref(&mut refs, &cm("b", "x"));
        add_resource_ref(&mut refs, &json!({"apiVersion": "example.org/v1", "kind": "Thing", "metadata": {"name": "t"}}));
        assert_eq!(
            refs,
            vec![
                json!({"apiVersion": "example.org/v1", "kind": "Thing", "name": "t"}),
                json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "y", "namespace": "a"}),
                json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "namespace": "b"}),
            ]
        );
    }

    #[test]
    fn capabilities_match_as_crossplane_matches_them() {
        assert_eq!(normalise_capability("Operation"), "operation");
        assert_eq!(normalise_capability("safe-start"), normalise_capability("SafeStart"));
    }

    #[test]
    fn watch_triggered_operations_give_every_step_the_watched_resource() {
        let operation = json!({
            "metadata": {"name": "w-abc", "annotations": {
                ANNOTATION_WATCHED_API_VERSION: "v1", ANNOTATION_WATCHED_KIND: "ConfigMap",
                ANNOTATION_WATCHED_NAME: "cm", ANNOTATION_WATCHED_NAMESPACE: "default"}},
            "spec": {"pipeline": [{"step": "a", "functionRef": {"name": "f"}}, {"step": "b", "functionRef": {"name": "g"}}]},
        });
        let steps = steps_of(&operation).unwrap();
        assert_eq!(steps.len(), 2);
        for step in steps {
            let selector = &step.required[REQUIREMENT_WATCHED_RESOURCE];
            assert_eq!(selector.kind, "ConfigMap");
            assert_eq!(selector.matching, Match::Name("cm".into()));
            assert_eq!(selector.namespace.as_deref(), Some("default"));
        }
    }
}
