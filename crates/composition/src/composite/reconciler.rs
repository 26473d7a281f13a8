//! The composite resource (XR) reconciler, as Crossplane's: select a Composition and a
//! revision, run its function pipeline over what exists, record the composed resources it
//! wants in `resourceRefs` before creating any of them, apply them, delete what is no longer
//! desired, and say what happened in `Synced`, `Ready` and events. The status is written on
//! every exit when it changed.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use oxplane_functions::protocol::{ConditionStatus, Ready, Severity, State, Target};
use oxplane_runtime::Runtime;
use oxplane_runtime::circuit;
use oxplane_runtime::conditions::{self, Condition};
use oxplane_runtime::controller::{Action, ReconcileError, Reconciler};
use oxplane_runtime::drift;
use oxplane_runtime::events::EventRecorder;
use oxplane_runtime::kinds::{Gvk, Kind, KindError};
use oxplane_runtime::managed::annotations;
use oxplane_runtime::object::{self, ObjectKey};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::compose::{self, LABEL_COMPOSITE, MANAGER_COMPOSITE};
use super::dependencies::Dependencies;
pub use super::observe::{ObserveError, observe};
use super::pipeline::{self, Step};
use super::select;
use super::shape::XrType;
use crate::packages::FunctionRegistry;

/// The finalizer of composite resources.
pub const FINALIZER: &str = "composite.apiextensions.crossplane.io";
/// The condition types functions may not set.
pub const SYSTEM_CONDITIONS: [&str; 5] = ["Ready", "Synced", "Healthy", "UpToDate", "Responsive"];

/// `a`, `a, b`, `a, b, and c`, `a, b, c, and N more` (sorted), as crossplane-runtime's
/// `StableNAndSomeMore` with its default of three names.
pub fn name_list(names: &[String]) -> String {
    let mut sorted = names.to_vec();
    sorted.sort();
    match sorted.len() {
        3 => format!("{}, {}, and {}", sorted[0], sorted[1], sorted[2]),
        n if n > 3 => format!("{}, {}, {}, and {} more", sorted[0], sorted[1], sorted[2], n - 3),
        _ => sorted.join(", "),
    }
}

/// One XRD's composite resources.
pub struct XrReconciler {
    runtime: Runtime,
    xr_type: XrType,
    functions: Arc<FunctionRegistry>,
    recorder: EventRecorder,
    dependencies: Arc<Dependencies>,
    /// Per (composite uid, resource name): hash of the object last applied and the
    /// resourceVersion the apply produced — an unchanged desired object whose resource is
    /// still at that version needs no request.
    applied: Mutex<HashMap<(String, String), (String, String)>>,
}

/// Why a composed resource of a deleting composite is still there, as its own status and
/// metadata say.
pub fn why_not_gone(composed: &Value) -> String {
    if !object::is_deleting(composed) {
        if object::annotation(composed, "usage.crossplane.io/deletion-attempt-with-policy").is_some() {
            return "its deletion is blocked by a Usage".to_string();
        }
        return "not deleted yet".to_string();
    }
    if let Some(ready) = conditions::get(composed, "Ready").filter(|c| c.reason == "Deleting" && !c.message.is_empty()) {
        return ready.message;
    }
    let finalizers = object::finalizers(composed);
    if finalizers.is_empty() { "being deleted".to_string() } else { format!("finalizers: {}", finalizers.join(", ")) }
}

/// The Usage that still protects a composed resource whose deletion it refused: `Kind/name`,
/// with the namespace of a namespaced Usage.
fn refusing_usage(usages: &[(Kind, Value)], composed: &Value) -> Option<String> {
    let (kind, usage) = usages.iter().find(|(_, u)| crate::usage::uses(u, composed))?;
    let name = object::name(usage).unwrap_or_default();
    Some(match object::namespace(usage) {
        Some(namespace) => format!("{}/{name} in namespace {namespace}", kind.gvk.kind),
        None => format!("{}/{name}", kind.gvk.kind),
    })
}

/// Changes to the composite's machinery and labels made while selecting, written in one patch.
#[derive(Default)]
struct Staged {
    machinery: serde_json::Map<String, Value>,
    labels: serde_json::Map<String, Value>,
    events: Vec<(&'static str, String)>,
}

impl Staged {
    /// Applies a selection to the composite in memory and remembers it for the patch.
    fn add(&mut self, xr_type: &XrType, xr: &mut Value, selected: select::Selected) {
        if let Some(fields) = selected.patch.as_object() {
            for (key, value) in fields {
                self.machinery.insert(key.clone(), value.clone());
                if let Some(machinery) = machinery_mut(xr_type, xr) {
                    machinery.insert(key.clone(), value.clone());
                }
            }
        }
        self.events.extend(selected.events);
    }

    fn is_empty(&self) -> bool {
        self.machinery.is_empty() && self.labels.is_empty()
    }
}

/// The machinery object of a composite, created if missing.
fn machinery_mut<'a>(xr_type: &XrType, xr: &'a mut Value) -> Option<&'a mut serde_json::Map<String, Value>> {
    let root = xr.as_object_mut()?;
    let spec = root.entry("spec").or_insert_with(|| json!({}));
    if !xr_type.legacy {
        let crossplane = spec.as_object_mut()?.entry("crossplane").or_insert_with(|| json!({}));
        return crossplane.as_object_mut();
    }
    spec.as_object_mut()
}

/// A reconcile that failed in a way the composite's conditions report.
struct Failure {
    reason: &'static str,
    message: String,
    /// The composed kind (and namespace) a request was refused for by RBAC, if that was it.
    refused: Option<(Kind, Option<String>)>,
}

impl Failure {
    fn new(reason: &'static str, message: impl Into<String>) -> Self {
        Failure { reason, message: message.into(), refused: None }
    }

    fn refused(mut self, refused: Option<(Kind, Option<String>)>) -> Self {
        self.refused = refused;
        self
    }
}

type ReconcileResult = Result<Action, ReconcileError>;

impl XrReconciler {
    /// A reconciler for the composites of `xr_type`.
    pub fn new(runtime: Runtime, xr_type: XrType, functions: Arc<FunctionRegistry>, dependencies: Arc<Dependencies>) -> Self {
        let recorder = EventRecorder::new(runtime.kube.clone(), "defined/compositeresourcedefinition.apiextensions.crossplane.io")
            .with_annotations(json!({"controller": xr_type.controller_name()}));
        XrReconciler { runtime, xr_type, functions, recorder, dependencies, applied: Mutex::new(HashMap::new()) }
    }

    async fn run(&self, xr: &mut Value) -> ReconcileResult {
        let key = ObjectKey::of(xr);
        if object::is_deleting(xr)
            && let Some(key) = &key
        {
            // A composite being deleted starts afresh: a new one of the same name must not
            // inherit an open circuit.
            self.dependencies.breaker.reset(key);
        }
        let open = key.as_ref().and_then(|key| Some((key, self.dependencies.breaker.open_because(key)?)));
        conditions::set(
            xr,
            match open {
                Some((key, open)) => {
                    // Come back when it closes, to say so.
                    self.dependencies.wake_after(key, open.closes_in);
                    Condition::new("Responsive", "False", "WatchCircuitOpen").with_message(circuit::open_message(&open.loudest))
                }
                None => Condition::new("Responsive", "True", "WatchCircuitClosed"),
            },
        );
        if annotations::is_paused(xr) {
            self.recorder.normal(xr, "ReconciliationPaused", "Reconciliation is paused via the pause annotation");
            conditions::set(xr, Condition::reconcile_paused().with_message("Reconciliation (including deletion) is paused via the pause annotation"));
            return Ok(Action::Done);
        }
        if annotations::take_reconcile_request(xr) {
            self.recorder.normal(xr, "ReconcileRequestHandled", "Handling reconcile request");
        }
        if object::is_deleting(xr) {
            return self.deleting(xr).await;
        }
        if object::add_finalizer(xr, FINALIZER) {
            match self.runtime.kube.replace(&self.xr_type.kind, xr).await {
                Ok(saved) => object::adopt_saved(xr, saved),
                Err(error) => {
                    self.recorder.warning(xr, "InitializeCompositeResource", format!("cannot add composite resource finalizer: {error}"));
                    return Err(error.into());
                }
            }
        }
        match self.compose(xr).await {
            Ok(action) => Ok(action),
            Err(failure) => {
                self.recorder.warning(xr, failure.reason, &failure.message);
                if let Some((kind, namespace)) = &failure.refused {
                    self.report_access(xr, kind, namespace.as_deref()).await;
                }
                conditions::set(xr, Condition::reconcile_error(&failure.message));
                Ok(Action::Requeue)
            }
        }
    }

    /// A composite being deleted: `Ready=False/Deleting`, naming what its deletion waits for,
    /// kept up to date while composed resources go (their watches stay until it is gone).
    async fn deleting(&self, xr: &mut Value) -> ReconcileResult {
        let refs = self.xr_type.field(xr, "resourceRefs").and_then(Value::as_array).cloned().unwrap_or_default();
        let kinds: BTreeSet<Gvk> = refs
            .iter()
            .filter_map(|r| Some(Gvk::from_api_version(r.get("apiVersion")?.as_str()?, r.get("kind")?.as_str()?)))
            .collect();
        if let Some(key) = ObjectKey::of(xr) {
            self.dependencies.require(&key, Vec::new());
            self.dependencies.set(&key, kinds);
        }
        let blockers = self.blockers(xr, &refs).await;
        let message = match blockers.len() {
            0 => String::new(),
            1 => format!("waiting for 1 composed resource to be deleted: {}", blockers[0]),
            n => format!("waiting for {n} composed resources to be deleted: {}", blockers.join(", ")),
        };
        conditions::set(xr, Condition::deleting().with_message(message));
        conditions::set(xr, Condition::reconcile_success());
        if object::has_finalizer(xr, FINALIZER) {
            // Composed resources go through the garbage collector (they carry a controller
            // reference that blocks owner deletion), as the user's propagation policy says.
            if let Some(saved) = self.write_status(xr, &json!(null)).await?
                && let Some(version) = saved.pointer("/metadata/resourceVersion")
            {
                xr["metadata"]["resourceVersion"] = version.clone();
            }
            object::remove_finalizer(xr, FINALIZER);
            match self.runtime.kube.replace(&self.xr_type.kind, xr).await {
                Ok(saved) => object::adopt_saved(xr, saved),
                Err(error) if error.is_not_found() => return Ok(Action::Done),
                Err(error) => {
                    self.recorder.warning(xr, "DeleteCompositeResource", format!("cannot remove composite resource finalizer: {error}"));
                    return Err(error.into());
                }
            }
        }
        // Changes of the composed resources wake us; the timer refreshes what they say.
        Ok(if blockers.is_empty() { Action::Done } else { Action::RequeueAfter(std::time::Duration::from_secs(5)) })
    }

    /// What the deletion of a composite waits for: each composed resource still there, and why.
    async fn blockers(&self, xr: &Value, refs: &[Value]) -> Vec<String> {
        let uid = object::uid(xr).unwrap_or_default();
        let mut blockers = Vec::new();
        // Usages are listed once, and only if a composed resource had its deletion refused.
        let mut usages: Option<Vec<(Kind, Value)>> = None;
        for reference in refs {
            let (Some(api_version), Some(kind), Some(name)) = (
                reference.get("apiVersion").and_then(Value::as_str),
                reference.get("kind").and_then(Value::as_str),
                reference.get("name").and_then(Value::as_str),
            ) else {
                continue;
            };
            let Ok(served) = self.runtime.watches.kinds().resolve(&Gvk::from_api_version(api_version, kind)).await else { continue };
            let namespace = if self.xr_type.kind.namespaced { object::namespace(xr) } else { reference.get("namespace").and_then(Value::as_str) };
            let Ok(Some(composed)) = self.runtime.kube.get(&served, namespace.filter(|_| served.namespaced), name).await else { continue };
            if object::controller_uid(&composed) != Some(uid) {
                continue;
            }
            let refused = !object::is_deleting(&composed) && object::annotation(&composed, crate::usage::ANNOTATION_DELETION_ATTEMPT).is_some();
            if refused && usages.is_none() {
                usages = Some(crate::usage::list_all(&self.runtime.kube).await.unwrap_or_default());
            }
            let why = match refused.then(|| refusing_usage(usages.as_deref().unwrap_or_default(), &composed)).flatten() {
                Some(usage) => format!("its deletion is blocked by {usage}"),
                None => why_not_gone(&composed),
            };
            blockers.push(format!("{kind}/{name} ({why})"));
        }
        blockers.sort();
        blockers
    }

    async fn compose(&self, xr: &mut Value) -> Result<Action, Failure> {
        let runtime = &self.runtime;
        let xr_type = &self.xr_type;
        // Selection (composition, revision selector, revision), the composite label and the
        // legacy secret reference are staged in memory and written in one patch.
        let mut staged = Staged::default();
        match select::composition(runtime, xr_type, xr).await {
            Ok(Some(selected)) => staged.add(xr_type, xr, selected),
            Ok(None) => {}
            Err(error) => return Err(Failure::new("SelectComposition", format!("cannot select Composition: {error}"))),
        }
        if let Some(selected) = select::revision_selector_default(xr_type, xr) {
            staged.add(xr_type, xr, selected);
        }
        let Some(composition) = xr_type.name_of(xr, "compositionRef") else {
            return Err(Failure::new("SelectComposition", "cannot select Composition: no Composition selected"));
        };
        let (revision, change) = select::revision(runtime, xr_type, xr, &composition)
            .await
            .map_err(|e| Failure::new("ComposeResources", format!("cannot fetch Composition: {e}")))?;
        if let Some(selected) = change {
            staged.add(xr_type, xr, selected);
        }
        let revision_name = object::name(&revision).unwrap_or_default().to_string();
        if let Some(valid) = conditions::get(&revision, "ValidPipeline").filter(|c| c.status != "True") {
            let why = if valid.message.is_empty() { "pipeline status unknown".to_string() } else { valid.message };
            return Err(Failure::new(
                "ComposeResources",
                format!("selected CompositionRevision {revision_name} does not have a valid function pipeline: {why}"),
            ));
        }
        if object::label(xr, LABEL_COMPOSITE).is_none() {
            let name = object::name(xr).unwrap_or_default().to_string();
            object::set_label(xr, LABEL_COMPOSITE, &name);
            staged.labels.insert(LABEL_COMPOSITE.to_string(), json!(name));
        }
        if xr_type.legacy {
            let api_version = revision.pointer("/spec/compositeTypeRef/apiVersion");
            let kind = revision.pointer("/spec/compositeTypeRef/kind");
            if api_version != xr.get("apiVersion") || kind != xr.get("kind") {
                return Err(Failure::new("ComposeResources", "cannot compose resources: referenced composition is not compatible with this composite resource"));
            }
            if xr_type.field(xr, "writeConnectionSecretToRef").is_none()
                && let Some(namespace) = revision.pointer("/spec/writeConnectionSecretsToNamespace").and_then(Value::as_str)
            {
                let uid = object::uid(xr).unwrap_or_default().to_string();
                let fields = json!({"writeConnectionSecretToRef": {"name": uid, "namespace": namespace}});
                staged.add(xr_type, xr, select::Selected { patch: fields, events: Vec::new() });
            }
        }
        if !staged.is_empty() {
            let mut patch = xr_type.patch(Value::Object(staged.machinery.clone()));
            if !staged.labels.is_empty() {
                patch["metadata"] = json!({"labels": staged.labels});
            }
            let (namespace, name) = (object::namespace(xr).map(str::to_string), object::name(xr).unwrap_or_default().to_string());
            let saved = runtime
                .kube
                .merge_patch(&xr_type.kind, namespace.as_deref(), &name, &patch)
                .await
                .map_err(|e| Failure::new("SelectComposition", format!("cannot select Composition: {e}")))?;
            object::adopt_saved(xr, saved);
            for (reason, message) in staged.events {
                self.recorder.normal(xr, reason, message);
            }
        }

        let steps = steps_of(&revision).map_err(|e| Failure::new("ComposeResources", format!("cannot compose resources: {e}")))?;
        let (observed, observed_objects) =
            self.observe(xr).await.map_err(|e| Failure::new("ComposeResources", format!("cannot compose resources: {e}")).refused(e.refused))?;
        let env = pipeline::Live { runtime, functions: &self.functions, of: pipeline::PipelineOf::Composition };
        let outcome = pipeline::run(&env, &steps, observed, json!({}))
            .await
            .map_err(|e| Failure::new("ComposeResources", format!("cannot compose resources: {e}")))?;

        // Results become events; function conditions (not system ones) are set.
        for (step, result) in &outcome.results {
            let reason = result.reason.clone().filter(|r| !r.is_empty()).unwrap_or_else(|| "ComposeResources".to_string());
            match result.severity {
                Severity::Normal => self.recorder.normal(xr, &reason, format!("Pipeline step {step:?}: {}", result.message)),
                Severity::Warning | Severity::Fatal => self.recorder.warning(xr, &reason, format!("Pipeline step {step:?}: {}", result.message)),
                Severity::Unspecified => self.recorder.warning(
                    xr,
                    &reason,
                    format!("Pipeline step {step:?} returned a result of unknown severity (assuming warning): {}", result.message),
                ),
            }
        }
        let mut claim_conditions = BTreeSet::new();
        for condition in &outcome.conditions {
            if SYSTEM_CONDITIONS.contains(&condition.type_.as_str()) {
                continue;
            }
            let status = match condition.status {
                ConditionStatus::True => "True",
                ConditionStatus::False => "False",
                _ => "Unknown",
            };
            conditions::set(xr, Condition::new(&condition.type_, status, &condition.reason).with_message(condition.message.clone().unwrap_or_default()));
            if condition.target == Some(Target::CompositeAndClaim) {
                claim_conditions.insert(condition.type_.clone());
            }
        }
        if xr_type.legacy && !claim_conditions.is_empty() {
            object::set_status_field(xr, "claimConditionTypes", json!(claim_conditions));
        }
        if let Some(fatal) = &outcome.fatal {
            if let Some(key) = ObjectKey::of(xr) {
                self.dependencies.require(&key, outcome.required.clone());
                self.dependencies.extend(&key, outcome.required_kinds().collect());
            }
            self.mark_undetermined(xr, &outcome);
            return Err(Failure::new("ComposeResources", format!("cannot compose resources: {fatal}")));
        }

        // The composed resources, rendered.
        let xr_snapshot = xr.clone();
        let mut rendered = Vec::new();
        for (name, resource) in &outcome.desired.resources {
            let observed = observed_objects.get(name);
            let one = compose::render(runtime, &xr_snapshot, xr_type.kind.namespaced, name, &resource.resource, observed)
                .await
                .map_err(|e| Failure::new("ComposeResources", format!("cannot compose resources: {e}")))?;
            if let Some(warning) = &one.warning {
                self.recorder.warning(xr, "NamespaceOverridden", warning);
            }
            rendered.push((one, resource.ready));
        }

        // Composed resources no longer desired: they stay referenced until they are collected,
        // which happens after the desired ones are applied (make before break: a replaced
        // Usage protects its resource until its successor does).
        let mut undesired = Vec::new();
        for (name, composed) in &observed_objects {
            if outcome.desired.resources.contains_key(name) {
                continue;
            }
            let Some(gvk) = Gvk::of(composed) else { continue };
            let Ok(kind) = runtime.watches.kinds().resolve(&gvk).await else { continue };
            undesired.push((kind, composed));
        }

        // resourceRefs first: nothing is created before the composite records it.
        let desired_refs: Vec<Value> = rendered.iter().map(|(one, _)| self.reference(&one.kind, &one.object)).collect();
        let undesired_refs = undesired.iter().map(|(kind, composed)| self.reference(kind, composed));
        self.write_refs(xr, desired_refs.iter().cloned().chain(undesired_refs).collect()).await?;
        // Watches of every kind it composes or requires exist before anything is applied.
        let mut kinds: BTreeSet<Gvk> = rendered.iter().map(|(one, _)| one.kind.gvk.clone()).collect();
        kinds.extend(outcome.required_kinds());
        kinds.extend(undesired.iter().map(|(kind, _)| kind.gvk.clone()));
        if let Some(key) = ObjectKey::of(xr) {
            self.dependencies.require(&key, outcome.required.clone());
            self.dependencies.set(&key, kinds);
        }

        let manager_for = |kind| compose::composed_manager(object::name(xr).unwrap_or_default(), kind);
        let mut unsynced = Vec::new();
        let mut unready = Vec::new();
        for (one, ready) in &rendered {
            let applied = self.apply(xr, one, &manager_for(&one.kind), observed_objects.get(&one.resource_name)).await;
            match applied {
                Ok(()) => {}
                Err(error) if error.is_invalid() => {
                    self.recorder.warning(xr, "ComposeResources", format!("cannot apply composed resource {:?}: {error}", one.resource_name));
                    unsynced.push(one.resource_name.clone());
                }
                Err(error) if error.is_not_found() => {
                    let served = runtime.watches.kinds().resolve(&one.kind.gvk).await;
                    let message = match served {
                        Err(not_served @ KindError::NotServed { .. }) => not_served.to_string(),
                        _ => error.to_string(),
                    };
                    return Err(Failure::new("ComposeResources", format!("cannot compose resources: cannot apply composed resource {:?}: {message}", one.resource_name)));
                }
                Err(error) => {
                    let refused = error.is_forbidden().then(|| (one.kind.clone(), object::namespace(&one.object).map(str::to_string)));
                    return Err(Failure::new(
                        "ComposeResources",
                        format!("cannot compose resources: cannot apply composed resource {:?}: {error}", one.resource_name),
                    )
                    .refused(refused));
                }
            }
            if *ready != Ready::True {
                unready.push(one.resource_name.clone());
            }
        }

        // Then what is no longer desired goes, and its references after it.
        if !undesired.is_empty() {
            for (kind, composed) in &undesired {
                compose::collect(runtime, xr, kind, composed)
                    .await
                    .map_err(|e| Failure::new("ComposeResources", format!("cannot compose resources: {e}")))?;
            }
            self.write_refs(xr, desired_refs).await?;
        }

        // A legacy composite publishes its connection details (filtered by the XRD's keys).
        if xr_type.legacy
            && let Some(target) = oxplane_runtime::managed::connection::secret_ref(xr)
        {
            let (namespace, secret) = target.map_err(|e| Failure::new("PublishConnectionSecret", e.to_string()))?;
            let mut details = outcome.desired.composite.as_ref().map(|c| c.connection_details.clone()).unwrap_or_default();
            if !xr_type.connection_secret_keys.is_empty() {
                details.retain(|k, _| xr_type.connection_secret_keys.contains(k));
            }
            match oxplane_runtime::managed::connection::apply_secret(&runtime.kube, xr, &namespace, &secret, &details, true).await {
                Ok(true) => {
                    object::set_status_field(xr, "connectionDetails", json!({"lastPublishedTime": object::now_rfc3339()}));
                    self.recorder.normal(xr, "PublishConnectionSecret", "Successfully published connection details");
                }
                Ok(false) => {}
                Err(error) => return Err(Failure::new("PublishConnectionSecret", format!("cannot publish connection details: {error}"))),
            }
        }

        // The status functions desire for the composite (only its status is honoured).
        if let Some(status) = outcome.desired.composite.as_ref().and_then(|c| c.resource.get("status")).and_then(Value::as_object) {
            for (key, value) in status {
                if key != "conditions" {
                    object::set_status_field(xr, key, value.clone());
                }
            }
        }

        for name in &unsynced {
            self.recorder.normal(xr, "ComposeResources", format!("Composed resource {name:?} is not yet valid"));
        }
        if unsynced.is_empty() {
            conditions::set(xr, Condition::reconcile_success());
        } else {
            conditions::set(xr, Condition::reconcile_error(format!("Unsynced resources: {}", name_list(&unsynced))));
        }
        for name in &unready {
            self.recorder.normal(xr, "ComposeResources", format!("Composed resource {name:?} is not yet ready"));
        }
        let composite_ready = outcome.desired.composite.as_ref().map(|c| c.ready).unwrap_or_default();
        let ready = match composite_ready {
            Ready::True => Condition::available(),
            Ready::False => Condition::creating(),
            Ready::Unspecified if unready.is_empty() => Condition::available(),
            Ready::Unspecified => Condition::creating().with_message(format!("Unready resources: {}", name_list(&unready))),
        };
        conditions::set(xr, ready);
        Ok(match outcome.ttl {
            Some(ttl) => Action::RequeueAfter(ttl),
            None => Action::Done,
        })
    }

    /// A `resourceRefs` entry for a composed object (legacy composites name the namespace of
    /// namespaced resources; modern ones compose only into their own namespace).
    fn reference(&self, kind: &Kind, composed: &Value) -> Value {
        let mut reference = json!({"apiVersion": kind.api_version(), "kind": kind.gvk.kind, "name": object::name(composed)});
        if !self.xr_type.kind.namespaced && let Some(namespace) = object::namespace(composed) {
            reference["namespace"] = json!(namespace);
        }
        reference
    }

    /// Writes `resourceRefs` (sorted, server-side applied) when they differ from the composite's.
    async fn write_refs(&self, xr: &mut Value, mut refs: Vec<Value>) -> Result<(), Failure> {
        refs.sort_by_key(|r| (r["apiVersion"].to_string(), r["kind"].to_string(), r["namespace"].to_string(), r["name"].to_string()));
        refs.dedup();
        if self.xr_type.field(xr, "resourceRefs").cloned().unwrap_or_else(|| json!([])) == json!(refs) {
            return Ok(());
        }
        let apply = self.xr_type.apply_object(xr, json!({"resourceRefs": refs}));
        let saved = self
            .runtime
            .kube
            .apply(&self.xr_type.kind, &apply, MANAGER_COMPOSITE, true)
            .await
            .map_err(|e| Failure::new("ComposeResources", format!("cannot compose resources: cannot update composed resource references: {e}")))?;
        object::adopt_saved(xr, saved);
        Ok(())
    }

    /// Marks every non-system condition the pipeline did not report as undetermined (a fatal
    /// error cut the pipeline short).
    fn mark_undetermined(&self, xr: &mut Value, outcome: &pipeline::Outcome) {
        let reported: BTreeSet<&str> = outcome.conditions.iter().map(|c| c.type_.as_str()).collect();
        let existing: Vec<String> = xr
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| c.get("type").and_then(Value::as_str).map(str::to_string))
            .collect();
        for type_ in existing {
            if !SYSTEM_CONDITIONS.contains(&type_.as_str()) && !reported.contains(type_.as_str()) {
                conditions::set(
                    xr,
                    Condition::new(&type_, "Unknown", "FatalError").with_message("A fatal error occurred before the status of this condition could be determined."),
                );
            }
        }
    }

    /// The observed state, composed resources read from the dependency watches' caches where
    /// they are synced.
    async fn observe(&self, xr: &Value) -> Result<(State, BTreeMap<String, Value>), ObserveError> {
        let cached = |gvk: &Gvk, key: &ObjectKey| {
            self.dependencies
                .informer(gvk)
                .filter(|i| i.state() == oxplane_runtime::watches::InformerState::Synced)
                .and_then(|i| i.get(key))
                .map(|object| (*object).clone())
        };
        observe(&self.runtime, &self.xr_type, xr, &cached).await
    }

    /// Applies one composed resource, unless the same object was applied already and the
    /// resource has not changed since. When the same object was applied before and the
    /// resource no longer holds it, someone changed it behind the composite's back: the apply
    /// reverts that, and a `DriftCorrected` event on the resource names the fields and who
    /// changed them.
    async fn apply(&self, xr: &Value, one: &compose::Rendered, manager: &str, observed: Option<&Value>) -> Result<(), oxplane_runtime::client::ApiError> {
        let hash: String = Sha256::digest(one.object.to_string().as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
        let key = (object::uid(xr).unwrap_or_default().to_string(), one.resource_name.clone());
        let current_version = observed.and_then(object::resource_version).map(str::to_string);
        let reapplied = {
            let applied = self.applied.lock().unwrap_or_else(|p| p.into_inner());
            match (applied.get(&key), &current_version) {
                (Some((last_hash, last_version)), Some(current)) if *last_hash == hash => {
                    if last_version == current {
                        return Ok(());
                    }
                    // A view older than our own last apply is stale, not drifted.
                    !matches!((current.parse::<u64>(), last_version.parse::<u64>()), (Ok(current), Ok(last)) if current < last)
                }
                _ => false,
            }
        };
        let drift = match observed {
            Some(observed) if reapplied && !drift::changed_fields(&one.object, observed).is_empty() => self.drifted(one, manager).await,
            _ => None,
        };
        let saved = self.runtime.kube.apply(&one.kind, &one.object, manager, true).await?;
        if let Some((version, fields)) = drift
            && object::resource_version(&saved) != Some(version.as_str())
        {
            self.recorder.warning(&saved, drift::REASON, drift::message(&fields));
            self.runtime.metrics.drift_corrected(&one.kind.gvk.group, &one.kind.gvk.kind);
        }
        if let Some(version) = object::resource_version(&saved) {
            self.applied.lock().unwrap_or_else(|p| p.into_inner()).insert(key, (hash, version.to_string()));
        }
        Ok(())
    }

    /// The resource as it is now (with `managedFields`, which the caches leave out): its
    /// resourceVersion and the fields of `one` it no longer holds, with who changed them;
    /// `None` when it holds them all (or cannot be read: the apply says what is wrong).
    async fn drifted(&self, one: &compose::Rendered, manager: &str) -> Option<(String, Vec<drift::DriftedField>)> {
        let name = object::name(&one.object)?;
        let live = self.runtime.kube.get(&one.kind, object::namespace(&one.object), name).await.ok()??;
        let paths = drift::changed_fields(&one.object, &live);
        if paths.is_empty() {
            return None;
        }
        Some((object::resource_version(&live)?.to_string(), drift::attribute(&live, &paths, manager)))
    }

    /// After RBAC refused a request about a composed kind: whether Crossplane may use that
    /// kind at all, asked of the API server's RBAC for the identity the core acts as; if not,
    /// a Warning `RoleBasedAccessControl` naming what it may not do, as Crossplane's.
    async fn report_access(&self, xr: &Value, kind: &Kind, namespace: Option<&str>) {
        match self.runtime.kube.access_denied(kind, namespace, &oxplane_runtime::identity::COMPOSE_VERBS).await {
            Ok(Some(message)) => self.recorder.warning(xr, "RoleBasedAccessControl", message),
            Ok(None) => {}
            Err(error) => tracing::debug!(%error, kind = %kind.gvk, "cannot review Crossplane's access to a composed kind"),
        }
    }

    /// Writes the composite's status if it differs from `before`; the saved object, if written.
    async fn write_status(&self, xr: &Value, before: &Value) -> Result<Option<Value>, ReconcileError> {
        let status = conditions::status_of(xr);
        if &status == before {
            return Ok(None);
        }
        let mut object = json!({
            "apiVersion": xr.get("apiVersion"),
            "kind": xr.get("kind"),
            "metadata": {"name": object::name(xr)},
            "status": status,
        });
        if let Some(namespace) = object::namespace(xr) {
            object["metadata"]["namespace"] = json!(namespace);
        }
        match self.runtime.kube.apply_status(&self.xr_type.kind, &object, MANAGER_COMPOSITE, true).await {
            Ok(saved) => Ok(Some(saved)),
            Err(error) if error.is_not_found() => Ok(None),
            Err(error) => Err(error.into()),
        }
    }
}



/// The steps of a revision: its pipeline. Crossplane v2 has no other mode; a revision in the
/// legacy `mode: Resources` (stored before the Composition CRD refused it) is an error naming
/// the mode, not composed.
pub fn steps_of(revision: &Value) -> Result<Vec<Step>, String> {
    let spec = revision.get("spec").cloned().unwrap_or_else(|| json!({}));
    match spec.get("mode").and_then(Value::as_str) {
        Some("Pipeline") | None => {}
        Some(other) => return Err(format!("unsupported Composition mode {other:?}: only Pipeline mode is supported")),
    }
    if spec.get("pipeline").is_none() {
        return Err("an array of pipeline steps is required in Pipeline mode".to_string());
    }
    spec.get("pipeline").and_then(Value::as_array).into_iter().flatten().map(Step::parse).collect()
}

#[async_trait::async_trait]
impl Reconciler for XrReconciler {
    async fn reconcile(&self, key: &ObjectKey) -> ReconcileResult {
        let Some(mut xr) = self.runtime.kube.get(&self.xr_type.kind, key.namespace.as_deref(), &key.name).await? else {
            self.dependencies.forget(key);
            return Ok(Action::Done);
        };
        let before = conditions::status_of(&xr);
        let result = self.run(&mut xr).await;
        self.write_status(&xr, &before).await?;
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_listed_as_crossplane_lists_them() {
        let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(name_list(&names(&["b"])), "b");
        assert_eq!(name_list(&names(&["b", "a"])), "a, b");
        assert_eq!(name_list(&names(&["c", "a", "b"])), "a, b, and c");
        assert_eq!(name_list(&names(&["e", "d", "c", "a", "b"])), "a, b, c, and 2 more");
    }

    #[test]
    fn only_pipelines_are_run() {
        let legacy = json!({"spec": {"mode": "Resources", "resources": [{"name": "a", "base": {"apiVersion": "v1", "kind": "ConfigMap"}}]}});
        assert_eq!(steps_of(&legacy).err().as_deref(), Some(r#"unsupported Composition mode "Resources": only Pipeline mode is supported"#));
        let unmoded = json!({"spec": {"resources": [{"name": "a", "base": {"apiVersion": "v1", "kind": "ConfigMap"}}]}});
        assert_eq!(steps_of(&unmoded).err().as_deref(), Some("an array of pipeline steps is required in Pipeline mode"));
        let pipeline = json!({"spec": {"mode": "Pipeline", "pipeline": [
            {"step": "pt", "functionRef": {"name": "function-patch-and-transform"}, "input": {"kind": "Resources"}},
            {"step": "ready", "functionRef": {"name": "function-auto-ready"}}
        ]}});
        let steps = steps_of(&pipeline).unwrap();
        assert_eq!(steps.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["pt", "ready"]);
        assert!(steps_of(&json!({"spec": {"pipeline": [{"functionRef": {"name": "x"}}]}})).is_err());
    }
}
