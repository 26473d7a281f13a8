//! The MRAP controller (`mrap/managedresourceactivationpolicy`): every MRD whose name one of
//! a policy's `spec.activate` entries matches is made `Active` (a merge patch of `spec.state`,
//! event `ActivateManagedResourceDefinition`) and listed, sorted, in `status.activated`; the
//! policy is `Healthy` `Running`, or `EncounteredErrors` naming how many it failed to activate.
//! Activation is one-way: deleting or narrowing a policy deactivates nothing.
//!
//! The default policy: as Crossplane's Helm chart does from `provider.defaultActivations`,
//! `oxplane up` creates the policy `crossplane-default-activation-policy` from
//! `--default-activations` (default `*`) when it does not exist, and never changes an existing
//! one; an empty list creates none.

use std::sync::Arc;

use oxplane_runtime::Runtime;
use oxplane_runtime::client::{ApiError, Kube};
use oxplane_runtime::conditions::{self, Condition};
use oxplane_runtime::controller::{Action, Controller, ControllerConfig, ReconcileError, Reconciler, spec_or_metadata_changed};
use oxplane_runtime::events::EventRecorder;
use oxplane_runtime::object::{self, ObjectKey};
use oxplane_runtime::managed::annotations;
use oxplane_runtime::watches::{InformerState, WatchEvent, Watches};
use serde_json::{Value, json};

use super::{activates, is_active, mrap_kind, mrd_kind};
use crate::packages::reconciler::write_status_if_changed;

/// The controller's name, as Crossplane names it (also its events' source).
pub const CONTROLLER_NAME: &str = "mrap/managedresourceactivationpolicy";

/// The name of the default policy, as Crossplane's chart names it.
pub const DEFAULT_POLICY_NAME: &str = "crossplane-default-activation-policy";


struct PolicyReconciler {
    kube: Kube,
    recorder: EventRecorder,
    /// The controller's own watches: MRDs are read from their informer once it is synced.
    watches: Watches,
}

impl PolicyReconciler {
    /// Every MRD: from the controller's MRD informer when synced, else listed.
    async fn mrds(&self) -> Result<Vec<Value>, ApiError> {
        match self.watches.informer(&mrd_kind().gvk).filter(|i| i.state() == InformerState::Synced) {
            Some(informer) => Ok(informer.list().iter().map(|mrd| (**mrd).clone()).collect()),
            None => self.kube.list(&mrd_kind(), None, None).await,
        }
    }

    /// Activates what the policy matches: (the names activated, sorted; how many failed).
    async fn activate(&self, policy: &Value, mrds: &[Value]) -> (Vec<String>, usize) {
        let mut activated = Vec::new();
        let mut failed = 0;
        for mrd in mrds {
            let Some(name) = object::name(mrd) else { continue };
            if !activates(policy, name) {
                continue;
            }
            if !is_active(mrd) {
                match self.kube.merge_patch(&mrd_kind(), None, name, &json!({"spec": {"state": "Active"}})).await {
                    Ok(_) => self.recorder.normal(policy, "ActivateManagedResourceDefinition", "Successfully activated ManagedResourceDefinition"),
                    // Deleted meanwhile: nothing to activate.
                    Err(error) if error.is_not_found() => continue,
                    Err(error) => {
                        tracing::warn!(mrd = name, %error, "cannot activate ManagedResourceDefinition");
                        self.recorder.warning(policy, "ActivateManagedResourceDefinition", format!("cannot activate ManagedResourceDefinition {name}: {error}"));
                        failed += 1;
                        continue;
                    }
                }
            }
            activated.push(name.to_string());
        }
        activated.sort();
        (activated, failed)
    }
}

#[async_trait::async_trait]
impl Reconciler for PolicyReconciler {
    async fn reconcile(&self, key: &ObjectKey) -> Result<Action, ReconcileError> {
        let kind = mrap_kind();
        let Some(mut policy) = self.kube.get(&kind, None, &key.name).await? else {
            return Ok(Action::Done);
        };
        let before = conditions::status_of(&policy);
        let mut result = Ok(Action::Done);
        if object::is_deleting(&policy) {
            conditions::set(&mut policy, Condition::new("Established", "False", "TerminatingManagedResourceActivationPolicy"));
        } else if annotations::is_paused(&policy) {
            self.recorder.normal(&policy, "ReconciliationPaused", "Reconciliation is paused via the pause annotation");
            return Ok(Action::Done);
        } else {
            match self.mrds().await {
                Ok(mrds) => {
                    let (activated, failed) = self.activate(&policy, &mrds).await;
                    let matched = activated.len() + failed;
                    if activated.is_empty() {
                        // Left out when empty, as Crossplane's `omitempty` leaves it.
                        if let Some(status) = policy.get_mut("status").and_then(Value::as_object_mut) {
                            status.remove("activated");
                        }
                    } else {
                        object::set_status_field(&mut policy, "activated", json!(activated));
                    }
                    if failed == 0 {
                        conditions::set(&mut policy, Condition::new("Healthy", "True", "Running"));
                    } else {
                        let message = format!("failed to activate {failed} of {matched} ManagedResourceDefinitions");
                        conditions::set(&mut policy, Condition::new("Healthy", "False", "EncounteredErrors").with_message(&message));
                        result = Err(ReconcileError::new(message));
                    }
                }
                Err(error) => {
                    let message = format!("cannot list ManagedResourceDefinition: {error}");
                    conditions::set(&mut policy, Condition::new("Healthy", "False", "EncounteredErrors").with_message(&message));
                    result = Err(ReconcileError::new(message));
                }
            }
        }
        if !write_status_if_changed(&self.kube, &kind, &policy, &before).await? {
            return Ok(Action::Done);
        }
        result
    }
}

/// Starts the MRAP controller: policies, woken by their own changes and by every new or
/// changed MRD their entries match.
pub fn start_controller(runtime: &Runtime) -> Arc<Controller> {
    let reconciler = Arc::new(PolicyReconciler {
        kube: runtime.kube.clone(),
        recorder: EventRecorder::new(runtime.kube.clone(), CONTROLLER_NAME),
        watches: runtime.watches.clone(),
    });
    let controller = Controller::start(ControllerConfig::new(CONTROLLER_NAME), reconciler, runtime.metrics.clone());
    let (policy_kind, definition_kind) = (mrap_kind(), mrd_kind());
    runtime.watches.kinds().insert(policy_kind.clone());
    runtime.watches.kinds().insert(definition_kind.clone());
    controller.watch_own(&runtime.watches, &policy_kind.gvk, spec_or_metadata_changed);
    // Policies are read from their own informer (the controller's watch of them, held here):
    // a handler must not call into the registry.
    let policies = runtime.watches.informer(&policy_kind.gvk);
    controller.watch_mapped(&runtime.watches, &definition_kind.gvk, move |event| {
        let mrd = match event {
            // A status write (the MRD controller's) changes nothing a policy looks at.
            WatchEvent::Applied { old, new } if old.as_ref().is_none_or(|old| old.get("spec") != new.get("spec")) => new,
            WatchEvent::Deleted(old) => old,
            _ => return Vec::new(),
        };
        let name = object::name(mrd).unwrap_or_default();
        let policies = policies.as_ref().map(|i| i.list()).unwrap_or_default();
        policies.iter().filter(|p| activates(p, name)).filter_map(|p| ObjectKey::of(p)).collect()
    });
    controller
}

/// Creates the default policy activating `activations` unless it exists (a user's edits to it
/// are kept, as Crossplane keeps them); with no activations, nothing.
pub async fn install_default_policy(kube: &Kube, activations: &[String]) -> Result<(), ApiError> {
    let activations: Vec<&str> = activations.iter().map(String::as_str).filter(|a| !a.is_empty()).collect();
    if activations.is_empty() {
        return Ok(());
    }
    let policy = json!({
        "apiVersion": mrap_kind().api_version(),
        "kind": "ManagedResourceActivationPolicy",
        "metadata": {"name": DEFAULT_POLICY_NAME},
        "spec": {"activate": activations},
    });
    match kube.create(&mrap_kind(), &policy).await {
        Ok(_) => Ok(()),
        Err(error) if error.is_already_exists() => Ok(()),
        Err(error) => Err(error),
    }
}
