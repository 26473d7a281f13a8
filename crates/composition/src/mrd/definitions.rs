//! The MRD controller (`mrd/managedresourcedefinition`): an active MRD's CRD is applied with
//! server-side apply (field manager `apiextensions.crossplane.io/managed`), and the MRD's
//! `Established` condition says where that stands: `InactiveManagedResource` while inactive,
//! `PendingManagedResource` until the CRD is established, `EstablishedManagedResource` after,
//! `BlockedManagedResourceActivationPolicy` when the CRD cannot be applied, and
//! `TerminatingManagedResource` while the MRD is deleted (its CRD goes with it, through the
//! owner reference).

use std::sync::Arc;
use std::time::Duration;

use oxplane_runtime::Runtime;
use oxplane_runtime::client::Kube;
use oxplane_runtime::conditions::{self, Condition};
use oxplane_runtime::controller::{Action, Controller, ControllerConfig, ReconcileError, Reconciler, spec_or_metadata_changed};
use oxplane_runtime::events::EventRecorder;
use oxplane_runtime::object::{self, ObjectKey};
use oxplane_runtime::managed::annotations;
use oxplane_runtime::watches::{InformerState, WatchEvent, Watches};
use serde_json::Value;

use super::{FIELD_MANAGER, crd_of, is_active, mrd_kind};
use crate::packages::crd_kind;
use crate::packages::reconciler::write_status_if_changed;

/// The controller's name, as Crossplane names it (also its events' source).
pub const CONTROLLER_NAME: &str = "mrd/managedresourcedefinition";

const ESTABLISHED: &str = "Established";

struct MrdReconciler {
    kube: Kube,
    recorder: EventRecorder,
    /// The controller's own watches: the CRD is read from their informer once it is synced.
    watches: Watches,
}

impl MrdReconciler {
    /// Applies the CRD of an active MRD: the applied CRD, or why it cannot be.
    async fn apply_crd(&self, mrd: &Value) -> Result<Value, String> {
        let name = object::name(mrd).unwrap_or_default();
        let cached = self.watches.informer(&crd_kind().gvk).filter(|i| i.state() == InformerState::Synced);
        let existing = match cached {
            Some(informer) => informer.get(&ObjectKey::new(None, name)).map(|crd| (*crd).clone()),
            None => self.kube.get(&crd_kind(), None, name).await.map_err(|e| format!("cannot get CustomResourceDefinition: {e}"))?,
        };
        if existing.as_ref().is_some_and(object::is_deleting) {
            return Err(format!("CustomResourceDefinition {name} is being deleted"));
        }
        let applied = self.kube.apply(&crd_kind(), &crd_of(mrd), FIELD_MANAGER, true).await.map_err(|e| format!("cannot apply CustomResourceDefinition: {e}"))?;
        let changed = existing.as_ref().and_then(object::resource_version) != object::resource_version(&applied);
        if changed {
            self.recorder.normal(mrd, "ApplyCustomResourceDefinition", "Successfully applied CustomResourceDefinition");
        }
        Ok(applied)
    }
}

#[async_trait::async_trait]
impl Reconciler for MrdReconciler {
    async fn reconcile(&self, key: &ObjectKey) -> Result<Action, ReconcileError> {
        let kind = mrd_kind();
        let Some(mut mrd) = self.kube.get(&kind, None, &key.name).await? else {
            return Ok(Action::Done);
        };
        let before = conditions::status_of(&mrd);
        let mut result = Ok(Action::Done);
        if object::is_deleting(&mrd) {
            conditions::set(&mut mrd, Condition::new(ESTABLISHED, "False", "TerminatingManagedResource"));
        } else if annotations::is_paused(&mrd) {
            self.recorder.normal(&mrd, "ReconciliationPaused", "Reconciliation is paused via the pause annotation");
            return Ok(Action::Done);
        } else if !is_active(&mrd) {
            conditions::set(&mut mrd, Condition::new(ESTABLISHED, "False", "InactiveManagedResource"));
        } else {
            match self.apply_crd(&mrd).await {
                Ok(crd) if conditions::is_true(&crd, "Established") => {
                    conditions::set(&mut mrd, Condition::new(ESTABLISHED, "True", "EstablishedManagedResource"));
                }
                Ok(_) => {
                    conditions::set(&mut mrd, Condition::new(ESTABLISHED, "False", "PendingManagedResource"));
                    // The CRD's own watch wakes this MRD too; the requeue covers a missed event.
                    result = Ok(Action::RequeueAfter(Duration::from_secs(1)));
                }
                Err(error) => {
                    self.recorder.warning(&mrd, "ApplyCustomResourceDefinition", &error);
                    conditions::set(
                        &mut mrd,
                        Condition::new(ESTABLISHED, "False", "BlockedManagedResourceActivationPolicy").with_message("unable to apply CustomResourceDefinition, see events"),
                    );
                    result = Err(ReconcileError::new(format!("cannot reconcile CustomResourceDefinition: {error}")));
                }
            }
        }
        if !write_status_if_changed(&self.kube, &kind, &mrd, &before).await? {
            return Ok(Action::Done);
        }
        result
    }
}

/// The MRD a CRD's watch event wakes: the one owning it (of the same name).
fn mrd_of_crd(event: &WatchEvent) -> Vec<ObjectKey> {
    let crd = match event {
        WatchEvent::Applied { new, .. } => new,
        WatchEvent::Deleted(old) => old,
        WatchEvent::State(_) => return Vec::new(),
    };
    let owned = crd
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|owners| owners.iter().any(|o| o.get("kind").and_then(Value::as_str) == Some("ManagedResourceDefinition")));
    if !owned {
        return Vec::new();
    }
    object::name(crd).map(|name| vec![ObjectKey::new(None, name)]).unwrap_or_default()
}

/// What makes an MRD's CRD out of date: the usual changes, and its owners (an upgrade moves
/// the controller reference to the new revision, and the CRD follows the MRD's owners).
fn spec_metadata_or_owners_changed(old: Option<&Value>, new: &Value) -> bool {
    spec_or_metadata_changed(old, new) || old.and_then(|o| o.pointer("/metadata/ownerReferences")) != new.pointer("/metadata/ownerReferences")
}

/// Starts the MRD controller: MRDs and the CRDs they own.
pub fn start_controller(runtime: &Runtime) -> Arc<Controller> {
    let reconciler = Arc::new(MrdReconciler {
        kube: runtime.kube.clone(),
        recorder: EventRecorder::new(runtime.kube.clone(), CONTROLLER_NAME),
        watches: runtime.watches.clone(),
    });
    let controller = Controller::start(ControllerConfig::new(CONTROLLER_NAME), reconciler, runtime.metrics.clone());
    let kind = mrd_kind();
    runtime.watches.kinds().insert(kind.clone());
    runtime.watches.kinds().insert(crd_kind());
    controller.watch_own(&runtime.watches, &kind.gvk, spec_metadata_or_owners_changed);
    controller.watch_mapped(&runtime.watches, &crd_kind().gvk, mrd_of_crd);
    controller
}
