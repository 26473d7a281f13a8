//! The XRD controller: for each CompositeResourceDefinition, the CRD of its composite
//! resource (and of its claim) applied and established, its XR controller started (restarted
//! when the XRD's spec changes), `Established` and `Offered` as Crossplane shows them. Deleting
//! an XRD deletes its claims and composites first, then its CRDs, then stops its controllers
//! — locally, with nothing that can fail half-way.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use oxplane_runtime::Runtime;
use oxplane_runtime::client::DeleteOptions;
use oxplane_runtime::conditions::{self, Condition};
use oxplane_runtime::controller::{Action, Controller, ControllerConfig, ReconcileError, Reconciler, spec_or_metadata_changed};
use oxplane_runtime::events::EventRecorder;
use oxplane_runtime::kinds::Kind;
use oxplane_runtime::object::{self, ObjectKey};
use oxplane_runtime::watches::WatchEvent;
use serde_json::{Value, json};

use super::render;
use crate::composite::{self, XrController, shape::XrType};
use crate::packages::{FunctionRegistry, crd_kind};

/// The finalizer of an XRD's composite side.
pub const FINALIZER_DEFINED: &str = "defined.apiextensions.crossplane.io";
/// The finalizer of an XRD's claim side.
pub const FINALIZER_OFFERED: &str = "offered.apiextensions.crossplane.io";
/// The field manager XRD-generated CRDs are applied with.
pub const FIELD_MANAGER: &str = "apiextensions.crossplane.io/definition";

/// `CompositeResourceDefinition`, read and written at its storage version.
pub fn xrd_kind() -> Kind {
    Kind::new("apiextensions.crossplane.io", "v1", "CompositeResourceDefinition", "compositeresourcedefinitions", false)
}

/// What a started XRD runs, and for which spec.
struct Running {
    generation: i64,
    crd_uid: String,
    composite: XrController,
    claim: Option<Arc<Controller>>,
}

/// Settings of the XRD controller: those of the XR controllers it starts.
pub type XrdSettings = crate::composite::Settings;

/// Reconciles XRDs.
pub struct XrdReconciler {
    runtime: Runtime,
    functions: Arc<FunctionRegistry>,
    settings: XrdSettings,
    recorder: EventRecorder,
    running: Mutex<HashMap<String, Running>>,
}

type Outcome = Result<Action, ReconcileError>;

impl XrdReconciler {
    /// A reconciler starting XR controllers that call `functions`.
    pub fn new(runtime: Runtime, functions: Arc<FunctionRegistry>, settings: XrdSettings) -> Self {
        let recorder = EventRecorder::new(runtime.kube.clone(), "defined/compositeresourcedefinition.apiextensions.crossplane.io");
        XrdReconciler { runtime, functions, settings, recorder, running: Mutex::new(HashMap::new()) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Running>> {
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Stops an XRD's controllers (local; cannot fail).
    fn stop(&self, xrd: &str) {
        if let Some(running) = self.lock().remove(xrd) {
            running.composite.stop();
            if let Some(claim) = running.claim {
                claim.stop();
            }
        }
    }

    /// Names of XRDs whose controllers run.
    pub fn running(&self) -> Vec<String> {
        let mut names: Vec<String> = self.lock().keys().cloned().collect();
        names.sort();
        names
    }

    /// Applies a rendered CRD unless another object controls the existing one; returns it, and
    /// whether the apply changed it (its resourceVersion moved, or it was created).
    async fn apply_crd(&self, xrd: &Value, crd: &Value) -> Result<Option<(Value, bool)>, String> {
        let name = object::name(crd).unwrap_or_default().to_string();
        let existing = self.runtime.kube.get(&crd_kind(), None, &name).await.map_err(|e| e.to_string())?;
        if let Some(existing) = &existing
            && object::controller_uid(existing) != object::uid(xrd)
        {
            if object::is_deleting(existing) {
                // The CRD of an earlier XRD of this name is still going: wait for it.
                return Ok(None);
            }
            return Err(format!("cannot apply rendered CustomResourceDefinition {name}: existing object is not controlled by UID {:?}", object::uid(xrd).unwrap_or_default()));
        }
        let applied =
            self.runtime.kube.apply(&crd_kind(), crd, FIELD_MANAGER, true).await.map_err(|e| format!("cannot apply rendered CustomResourceDefinition {name}: {e}"))?;
        let changed = existing.as_ref().and_then(object::resource_version) != object::resource_version(&applied);
        Ok(Some((applied, changed)))
    }

    async fn run(&self, xrd: &mut Value) -> Outcome {
        let name = object::name(xrd).unwrap_or_default().to_string();
        let xr_crd = match render::xr_crd(xrd) {
            Ok(crd) => crd,
            Err(error) => {
                let message = format!("cannot render composite resource CustomResourceDefinition: {error}");
                self.recorder.warning(xrd, "RenderCRD", &message);
                conditions::set(xrd, Condition::new("Established", "False", "TerminatingCompositeResource").with_message(&message));
                return Ok(Action::Done);
            }
        };
        let claim_crd = render::claim_crd(xrd).ok().flatten();
        if object::is_deleting(xrd) {
            return self.delete(xrd, &name, &xr_crd, claim_crd.as_ref()).await;
        }
        let mut finalizers_changed = object::add_finalizer(xrd, FINALIZER_DEFINED);
        if claim_crd.is_some() {
            finalizers_changed |= object::add_finalizer(xrd, FINALIZER_OFFERED);
        }
        if finalizers_changed {
            let saved = self.runtime.kube.replace(&xrd_kind(), xrd).await?;
            object::adopt_saved(xrd, saved);
        }

        let Some((applied, _)) = self.apply_crd(xrd, &xr_crd).await.map_err(|e| self.warn(xrd, "EstablishComposite", e))? else {
            self.recorder.normal(xrd, "EstablishComposite", "waiting for the previous composite resource CustomResourceDefinition to be deleted");
            return Ok(Action::RequeueAfter(Duration::from_secs(1)));
        };
        let crd_name = object::name(&applied).unwrap_or_default().to_string();
        let crd_uid = object::uid(&applied).unwrap_or_default().to_string();
        let changed = self.lock().get(&name).is_none_or(|r| r.crd_uid != crd_uid);
        if changed {
            self.recorder.normal(xrd, "EstablishComposite", format!("Applied composite resource CustomResourceDefinition: {crd_name}"));
        }
        if !conditions::is_true(&applied, "Established") {
            self.recorder.normal(xrd, "EstablishComposite", "waiting for composite resource CustomResourceDefinition to be established");
            return Ok(Action::RequeueAfter(Duration::from_millis(250)));
        }
        if let Some(claim_crd) = &claim_crd {
            let Some((claim, claim_changed)) = self.apply_crd(xrd, claim_crd).await.map_err(|e| self.warn(xrd, "OfferClaim", e))? else {
                return Ok(Action::RequeueAfter(Duration::from_secs(1)));
            };
            if claim_changed {
                let claim_name = object::name(&claim).unwrap_or_default();
                self.recorder.normal(xrd, "OfferClaim", format!("Applied composite resource claim CustomResourceDefinition: {claim_name}"));
            }
            if !conditions::is_true(&claim, "Established") {
                self.recorder.normal(xrd, "OfferClaim", "waiting for composite resource claim CustomResourceDefinition to be established");
                return Ok(Action::RequeueAfter(Duration::from_millis(250)));
            }
        }

        let generation = object::generation(xrd);
        let restart = self.lock().get(&name).map(|r| r.generation != generation || r.crd_uid != crd_uid);
        if restart == Some(true) {
            self.recorder.normal(xrd, "RestartComposite", "XRD specification changed; restarting controller to apply updates");
            self.stop(&name);
        }
        if restart != Some(false) {
            let Some(xr_type) = XrType::of(xrd) else {
                return Err(ReconcileError::new("the XRD has no referenceable version"));
            };
            let claim = xr_type.claim.clone().map(|claim_kind| crate::claim::start(&self.runtime, xr_type.clone(), claim_kind));
            let composite = composite::start(&self.runtime, xr_type, self.functions.clone(), self.settings);
            self.lock().insert(name.clone(), Running { generation, crd_uid, composite, claim });
        }

        let version = render::referenceable_version(xrd).unwrap_or_default();
        let group = xrd.pointer("/spec/group").and_then(Value::as_str).unwrap_or_default().to_string();
        let kind = xrd.pointer("/spec/names/kind").cloned().unwrap_or(Value::Null);
        object::set_status_field(xrd, "controllers", json!({"compositeResourceType": {"apiVersion": format!("{group}/{version}"), "kind": kind}}));
        if claim_crd.is_some() {
            let claim_kind = xrd.pointer("/spec/claimNames/kind").cloned().unwrap_or(Value::Null);
            object::set_status_field(
                xrd,
                "controllers",
                json!({
                    "compositeResourceType": {"apiVersion": format!("{group}/{version}"), "kind": kind},
                    "compositeResourceClaimType": {"apiVersion": format!("{group}/{version}"), "kind": claim_kind},
                }),
            );
            conditions::set(xrd, Condition::new("Offered", "True", "WatchingCompositeResourceClaim"));
        }
        conditions::set(xrd, Condition::new("Established", "True", "WatchingCompositeResource"));
        Ok(Action::RequeueAfter(Duration::from_secs(60)))
    }

    fn warn(&self, xrd: &Value, reason: &str, message: String) -> ReconcileError {
        self.recorder.warning(xrd, reason, &message);
        ReconcileError::new(message)
    }

    async fn delete(&self, xrd: &mut Value, name: &str, xr_crd: &Value, claim_crd: Option<&Value>) -> Outcome {
        conditions::set(xrd, Condition::new("Established", "False", "TerminatingCompositeResource"));
        if claim_crd.is_some() || object::has_finalizer(xrd, FINALIZER_OFFERED) {
            conditions::set(xrd, Condition::new("Offered", "False", "TerminatingCompositeResourceClaim"));
        }
        // Claims first, then composites: each kind's objects, then its CRD.
        for (crd, reason, waiting) in [
            (claim_crd, "RedactClaim", "waiting for defined composite resource claims to be deleted"),
            (Some(xr_crd), "TerminateComposite", "waiting for defined composite resources to be deleted"),
        ] {
            let Some(crd) = crd else { continue };
            let crd_name = object::name(crd).unwrap_or_default();
            let Some(existing) = self.runtime.kube.get(&crd_kind(), None, crd_name).await? else { continue };
            if object::controller_uid(&existing) != object::uid(xrd) {
                continue;
            }
            if let Some(kind) = Kind::of_crd(&existing) {
                let remaining = match self.runtime.kube.list(&kind, None, None).await {
                    Ok(items) => items,
                    Err(error) if error.is_not_found() => Vec::new(),
                    Err(error) => return Err(error.into()),
                };
                if !remaining.is_empty() {
                    for item in remaining.iter().filter(|i| !object::is_deleting(i)) {
                        let key = ObjectKey::of(item).unwrap_or_else(|| ObjectKey::new(None, ""));
                        self.runtime.kube.delete(&kind, key.namespace.as_deref(), &key.name, &DeleteOptions::default()).await?;
                    }
                    self.recorder.normal(xrd, reason, waiting);
                    return Ok(Action::RequeueAfter(Duration::from_secs(1)));
                }
            }
            if !object::is_deleting(&existing) {
                self.runtime.kube.delete(&crd_kind(), None, crd_name, &DeleteOptions::default()).await?;
                let what = if reason == "RedactClaim" { "composite resource claim" } else { "composite resource" };
                self.recorder.normal(xrd, reason, format!("Deleted {what} CustomResourceDefinition: {crd_name}"));
            }
            return Ok(Action::RequeueAfter(Duration::from_millis(250)));
        }
        // Both CRDs are gone: nothing is left for the controllers to do.
        self.stop(name);
        let mut changed = object::remove_finalizer(xrd, FINALIZER_DEFINED);
        changed |= object::remove_finalizer(xrd, FINALIZER_OFFERED);
        if changed {
            match self.runtime.kube.replace(&xrd_kind(), xrd).await {
                Ok(saved) => object::adopt_saved(xrd, saved),
                Err(error) if error.is_not_found() => {}
                Err(error) => return Err(error.into()),
            }
        }
        Ok(Action::Done)
    }
}




#[async_trait::async_trait]
impl Reconciler for XrdReconciler {
    async fn reconcile(&self, key: &ObjectKey) -> Outcome {
        let Some(mut xrd) = self.runtime.kube.get(&xrd_kind(), None, &key.name).await? else {
            self.stop(&key.name);
            return Ok(Action::Done);
        };
        let before = conditions::status_of(&xrd);
        let result = self.run(&mut xrd).await;
        if conditions::status_of(&xrd) != before {
            match self.runtime.kube.replace_status(&xrd_kind(), &xrd).await {
                Ok(_) => {}
                Err(error) if error.is_not_found() => {}
                Err(error) => return Err(error.into()),
            }
        }
        result
    }
}

/// Starts the XRD controller, named `defined/compositeresourcedefinition.apiextensions.crossplane.io`.
pub fn start_controller(runtime: &Runtime, functions: Arc<FunctionRegistry>, settings: XrdSettings) -> (Arc<Controller>, Arc<XrdReconciler>) {
    let reconciler = Arc::new(XrdReconciler::new(runtime.clone(), functions, settings));
    let controller = Controller::start(
        ControllerConfig::new("defined/compositeresourcedefinition.apiextensions.crossplane.io"),
        reconciler.clone(),
        runtime.metrics.clone(),
    );
    runtime.watches.kinds().insert(xrd_kind());
    controller.watch_own(&runtime.watches, &xrd_kind().gvk, spec_or_metadata_changed);
    controller.watch_mapped(&runtime.watches, &crd_kind().gvk, |event| {
        let crd = match event {
            WatchEvent::Applied { new, .. } => new,
            WatchEvent::Deleted(old) => old,
            WatchEvent::State(_) => return Vec::new(),
        };
        object::controller_ref(crd)
            .filter(|owner| owner.get("kind").and_then(Value::as_str) == Some("CompositeResourceDefinition"))
            .and_then(|owner| owner.get("name").and_then(Value::as_str))
            .map(|name| vec![ObjectKey::new(None, name)])
            .unwrap_or_default()
    });
    (controller, reconciler)
}
