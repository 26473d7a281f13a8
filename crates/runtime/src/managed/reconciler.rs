//! The managed-resource reconciler: crossplane-runtime's contract (observe, then create,
//! update or delete as the management policies allow, with Crossplane's conditions, events,
//! annotations and finalizer), plus what makes duplicate external resources impossible:
//!
//! - The create intent (`external-create-pending`) is saved with a conflict-checked update
//!   before the external create, so a stale view can never create.
//! - The identifier a create returns, or one Observe finds, is saved at once by a write of the
//!   critical annotations alone, whatever the management policies say about late
//!   initialization.
//! - A create whose outcome is unknown (a crash, a dropped response, a timeout) is never
//!   repeated blindly: Observe looks the resource up by the managed resource's uid when the
//!   provider can, and otherwise the resource fails closed with a message saying what to do.
//!   For that, a new intent is always stamped in a later second than the last outcome.
//!
//! Every reconcile ends in one place that writes the status if it changed, whatever path it
//! took, so conditions always say what the last reconcile found.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;


use super::annotations::{self, CREATE_FAILED, CREATE_PENDING, CREATE_SUCCEEDED, EXTERNAL_NAME};
use super::connection;
use super::external::{ConnectContext, ErrorKind, ExternalClient, ExternalConnector, ExternalError, ExternalNaming, ExternalObservation, Managed};
use super::fault;
use super::policy::ManagementPolicies;
use super::usage::ProviderConfigKinds;
use crate::client::Kube;
use crate::conditions::{self, Condition};
use crate::controller::{Action, ReconcileError, Reconciler};
use crate::events::EventRecorder;
use crate::kinds::Kind;
use crate::object::{self, ObjectKey};

/// The finalizer every managed resource carries while its external resource may exist.
pub const FINALIZER: &str = "finalizer.managedresource.crossplane.io";

/// How long a create that just succeeded (or whose outcome is unknown) may go unseen by
/// Observe before the reconciler believes it (crossplane-runtime's creation grace period).
pub const DEFAULT_CREATION_GRACE: Duration = Duration::from_secs(30);
/// How long one external call may take.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// The shortest poll interval the `crossplane.io/poll-interval` annotation may ask for.
pub const MIN_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// The message of a create whose outcome cannot be known.
pub const CREATION_RESULT_UNKNOWN: &str = "cannot determine creation result - set the crossplane.io/external-name annotation to the identifier of the external resource if it exists, or remove the crossplane.io/external-create-pending annotation if it is safe to proceed";

/// Settings of one managed kind's reconciler.
#[derive(Clone)]
pub struct ManagedSettings {
    /// The managed kind.
    pub kind: Kind,
    /// How clients for it are made.
    pub connector: Arc<dyn ExternalConnector>,
    /// How often an external resource is observed.
    pub poll_interval: Duration,
    /// The provider's config kinds, when its resources reference ProviderConfigs.
    pub provider_configs: Option<Arc<ProviderConfigKinds>>,
    /// See [`DEFAULT_CREATION_GRACE`].
    pub creation_grace: Duration,
    /// See [`DEFAULT_CALL_TIMEOUT`].
    pub call_timeout: Duration,
}

impl ManagedSettings {
    /// Settings with the default grace period and call timeout.
    pub fn new(kind: Kind, connector: Arc<dyn ExternalConnector>, poll_interval: Duration) -> Self {
        ManagedSettings {
            kind,
            connector,
            poll_interval,
            provider_configs: None,
            creation_grace: DEFAULT_CREATION_GRACE,
            call_timeout: DEFAULT_CALL_TIMEOUT,
        }
    }

    /// The controller name Crossplane gives this kind: `managed/<lowercase kind>.<group>`.
    pub fn controller_name(&self) -> String {
        format!("managed/{}.{}", self.kind.gvk.kind.to_lowercase(), self.kind.gvk.group)
    }
}

/// The reconciler of one managed kind.
pub struct ManagedReconciler {
    kube: Kube,
    settings: ManagedSettings,
    recorder: EventRecorder,
    /// The watch registry, to read the kind's other resources from memory.
    watches: Option<crate::watches::Watches>,
    /// Where reverted drift is counted.
    metrics: Option<Arc<crate::metrics::Metrics>>,
    /// Per resource uid, the generation at which Observe last found the external resource up
    /// to date: found out of date at that same generation, it was changed outside the control
    /// plane (drift), not by a spec change. Kept in memory only: after a restart the first
    /// drift of a resource is corrected without being called drift.
    in_sync: Mutex<HashMap<String, i64>>,
}

type Step = Result<Action, ReconcileError>;

impl ManagedReconciler {
    /// A reconciler recording events as the kind's controller.
    pub fn new(kube: Kube, settings: ManagedSettings) -> Self {
        let recorder = EventRecorder::new(kube.clone(), &settings.controller_name());
        ManagedReconciler { kube, settings, recorder, watches: None, metrics: None, in_sync: Mutex::default() }
    }

    /// The same reconciler, counting reverted drift in `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<crate::metrics::Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    fn in_sync(&self) -> std::sync::MutexGuard<'_, HashMap<String, i64>> {
        self.in_sync.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Remembers whether Observe found the resource up to date at its generation; whether it
    /// was out of date at a generation it had been up to date at (drift).
    fn drifted(&self, managed: &Managed, up_to_date: bool) -> bool {
        let generation = object::generation(&managed.object);
        let mut in_sync = self.in_sync();
        if up_to_date {
            in_sync.insert(managed.uid().to_string(), generation);
            return false;
        }
        in_sync.get(managed.uid()) == Some(&generation)
    }

    /// The same reconciler, reading the kind's other resources from `watches` (for external
    /// name leases).
    pub fn with_watches(mut self, watches: crate::watches::Watches) -> Self {
        self.watches = Some(watches);
        self
    }

    /// Another resource of this kind that still holds `managed`'s external name while it is
    /// being deleted: an external name is a lease, released only when that resource is gone.
    /// Names equal to the resource's own name cannot be shared (object names are unique), so
    /// only names set explicitly are checked.
    fn external_name_holder(&self, managed: &Managed) -> Option<String> {
        let name = managed.external_name()?;
        if name == managed.name() || object::annotation(&managed.object, CREATE_SUCCEEDED).is_some() {
            return None;
        }
        let informer = self.watches.as_ref()?.informer(&self.settings.kind.gvk)?;
        let config = managed.object.pointer("/spec/providerConfigRef");
        informer.list().into_iter().find_map(|other| {
            (object::uid(&other) != Some(managed.uid())
                && object::is_deleting(&other)
                && object::annotation(&other, EXTERNAL_NAME) == Some(name)
                && other.pointer("/spec/providerConfigRef") == config)
                .then(|| {
                    let key = ObjectKey::of(&other).map(|k| k.to_string()).unwrap_or_default();
                    format!("{}/{key}", self.settings.kind.gvk.kind)
                })
        })
    }

    /// Writes the object (a conflict-checked update) and takes its new metadata.
    async fn update(&self, managed: &mut Managed) -> Result<(), ReconcileError> {
        let saved = self.kube.replace(&self.settings.kind, &managed.object).await?;
        for field in ["metadata", "spec"] {
            if let (Some(value), Some(root)) = (saved.get(field), managed.object.as_object_mut()) {
                root.insert(field.into(), value.clone());
            }
        }
        Ok(())
    }

    async fn save_critical(&self, managed: &mut Managed) -> Result<(), ReconcileError> {
        annotations::save_critical(&self.kube, &self.settings.kind, &mut managed.object)
            .await
            .map_err(|e| ReconcileError::new(format!("cannot save critical annotations: {e}")))
    }

    /// The poll interval for this resource: the annotation if valid (at least a second), else
    /// the kind's; shortened when Observe said a change is due.
    fn poll_interval(&self, managed: &Managed, observation: Option<&ExternalObservation>) -> Duration {
        let base = object::annotation(&managed.object, annotations::POLL_INTERVAL)
            .and_then(annotations::parse_go_duration)
            .map(|d| d.max(MIN_POLL_INTERVAL))
            .unwrap_or(self.settings.poll_interval);
        match observation.and_then(|o| o.requeue_after) {
            Some(hint) => hint.min(base),
            None => base,
        }
    }

    async fn with_timeout<T>(&self, what: &str, call: impl std::future::Future<Output = Result<T, ExternalError>>) -> Result<T, ExternalError> {
        match tokio::time::timeout(self.settings.call_timeout, call).await {
            Ok(result) => result,
            Err(_) => Err(ExternalError::ambiguous(format!("{what} timed out after {:?}", self.settings.call_timeout))),
        }
    }

    async fn run(&self, managed: &mut Managed) -> Step {
        let policies = ManagementPolicies::of(&managed.object, !self.settings.kind.namespaced);
        if annotations::is_paused(&managed.object) || policies.is_paused() {
            self.recorder.normal(
                &managed.object,
                "ReconciliationPaused",
                "Reconciliation is paused either through the `spec.managementPolicies` or the pause annotation",
            );
            managed.set_condition(Condition::reconcile_paused());
            return Ok(Action::Done);
        }
        self.handle_reconcile_request(managed);
        if let Some(message) = policies.validate() {
            self.recorder.warning(&managed.object, "CannotUseInvalidManagementPolicy", &message);
            managed.set_condition(Condition::reconcile_error(message));
            return Ok(Action::Done);
        }
        let deleting = object::is_deleting(&managed.object);
        if deleting && !policies.should_delete() {
            // Orphaned: the external resource stays; the connection Secret goes with the
            // managed resource it is controlled by.
            if object::remove_finalizer(&mut managed.object, FINALIZER) {
                self.update(managed).await?;
            }
            return Ok(Action::Done);
        }
        let config = match &self.settings.provider_configs {
            Some(kinds) => match kinds.track(&self.kube, &managed.object).await {
                Ok(config) => Some(config),
                Err(error) => return Ok(self.connect_failed(managed, error.to_string())),
            },
            None => None,
        };
        let context = ConnectContext { kube: &self.kube, provider_config: config.as_ref() };
        let mut client = match self.with_timeout("connect", self.settings.connector.connect(&context, managed)).await {
            Ok(client) => client,
            Err(error) => return Ok(self.connect_failed(managed, error.to_string())),
        };
        let result = self.with_client(managed, &policies, client.as_mut()).await;
        client.disconnect().await;
        result
    }

    /// Names the external resource after the managed resource where that is how it is found,
    /// and refuses to go on when an interrupted create can never be settled. `Some` ends the
    /// reconcile.
    async fn identify(&self, managed: &mut Managed, naming: ExternalNaming) -> Option<Step> {
        let deleting = object::is_deleting(&managed.object);
        if !deleting
            && naming == ExternalNaming::FromMetadataName
            && managed.external_name().is_none()
        {
            let name = managed.name().to_string();
            object::set_annotation(&mut managed.object, EXTERNAL_NAME, &name);
            // A name derived from the resource's own name can always be derived again: a new
            // resource saves it with the finalizer, in one write.
            if !object::has_finalizer(&managed.object, FINALIZER) {
                return None;
            }
            if let Err(error) = self.save_critical(managed).await {
                self.recorder.warning(&managed.object, "CannotInitializeManagedResource", error.to_string());
                managed.set_condition(Condition::reconcile_error(&error));
                return Some(Err(error));
            }
        }
        if annotations::create_outcome_unknown(&managed.object)
            && let ExternalNaming::Assigned { lookup_by_token: false } = naming
            && managed.external_name().is_none()
        {
            // Nothing can tell whether the interrupted create happened: never create again.
            self.recorder.warning(&managed.object, "CannotInitializeManagedResource", CREATION_RESULT_UNKNOWN);
            managed.set_condition(Condition::creating());
            managed.set_condition(Condition::reconcile_error(CREATION_RESULT_UNKNOWN));
            return Some(Ok(Action::Done));
        }

        None
    }

    fn connect_failed(&self, managed: &mut Managed, error: String) -> Action {
        let message = format!("connect failed: {error}");
        self.recorder.warning(&managed.object, "CannotConnectToProvider", &message);
        managed.set_condition(Condition::reconcile_error(message));
        Action::Requeue
    }

    /// `crossplane.io/reconcile-requested-at`: a new token is acknowledged with an event.
    fn handle_reconcile_request(&self, managed: &mut Managed) {
        if annotations::take_reconcile_request(&mut managed.object) {
            self.recorder.normal(&managed.object, "ReconcileRequestHandled", "Handling reconcile request");
        }
    }

    async fn with_client(&self, managed: &mut Managed, policies: &ManagementPolicies, client: &mut dyn ExternalClient) -> Step {
        let naming = client.naming();
        if let Some(done) = self.identify(managed, naming).await {
            return done;
        }
        let deleting = object::is_deleting(&managed.object);
        if !deleting && let Some(holder) = self.external_name_holder(managed) {
            let message = format!("waiting for external name {:?} to be released by {holder} (deleting)", managed.external_name().unwrap_or_default());
            managed.set_condition(Condition::creating().with_message(message));
            managed.set_condition(Condition::reconcile_success());
            return Ok(Action::RequeueAfter(Duration::from_secs(1)));
        }
        let spec_before = managed.object.get("spec").cloned();
        let metadata_before = managed.object.get("metadata").cloned();
        let observation = match self.with_timeout("observe", client.observe(managed)).await {
            Ok(observation) => observation,
            Err(error) => {
                let message = format!("observe failed: {error}");
                self.recorder.warning(&managed.object, "CannotObserveExternalResource", &message);
                managed.set_condition(Condition::reconcile_error(message));
                return Ok(Action::Requeue);
            }
        };
        // Observe may fill the spec (late initialization); that is kept only if the policies
        // allow it. Metadata is ours to write.
        let late_initialize = observation.resource_late_initialized && policies.should_late_initialize() && !deleting;
        if let Some(root) = managed.object.as_object_mut() {
            if !late_initialize && let Some(spec) = spec_before {
                root.insert("spec".into(), spec);
            }
            if let Some(metadata) = metadata_before {
                root.insert("metadata".into(), metadata);
            }
        }
        self.save_identity(managed, &observation).await?;

        if !observation.resource_exists && policies.should_only_observe() && !deleting {
            // An observe-only resource never gets the finalizer, so save a derived name here.
            if !object::has_finalizer(&managed.object, FINALIZER) && managed.external_name().is_some() {
                self.save_critical(managed).await?;
            }
            let message = "observe failed: external resource does not exist";
            self.recorder.warning(&managed.object, "CannotObserveExternalResource", message);
            managed.set_condition(Condition::unavailable().with_message("external resource does not exist"));
            managed.set_condition(Condition::reconcile_error(message));
            return Ok(Action::RequeueAfter(self.poll_interval(managed, None)));
        }
        if !observation.resource_exists && !deleting && self.within_creation_grace(managed) {
            self.recorder.normal(&managed.object, "PendingExternalResource", "Waiting for external resource existence to be confirmed");
            return Ok(Action::RequeueAfter(Duration::from_secs(1)));
        }
        if deleting {
            self.in_sync().remove(managed.uid());
            return self.delete(managed, policies, client, &observation).await;
        }

        if let Err(error) = connection::publish(&self.kube, &managed.object, &observation.connection_details).await {
            self.recorder.warning(&managed.object, "CannotPublishConnectionDetails", error.to_string());
            managed.set_condition(Condition::reconcile_error(&error));
            return Ok(Action::Requeue);
        }
        if object::add_finalizer(&mut managed.object, FINALIZER) {
            self.update(managed).await?;
        }

        if !observation.resource_exists {
            if policies.should_create() {
                return self.create(managed, client, naming).await;
            }
            let message = "external resource does not exist and the management policies do not allow creating it";
            managed.set_condition(Condition::unavailable().with_message("external resource does not exist"));
            managed.set_condition(Condition::reconcile_error(message));
            return Ok(Action::RequeueAfter(self.poll_interval(managed, None)));
        }
        if late_initialize && let Err(error) = self.update(managed).await {
            self.recorder.warning(&managed.object, "CannotUpdateManagedResource", error.to_string());
            managed.set_condition(Condition::reconcile_error(&error));
            return Err(error);
        }
        let drifted = self.drifted(managed, observation.resource_up_to_date);
        if observation.resource_up_to_date || !policies.should_update() {
            managed.set_condition(Condition::reconcile_success());
            return Ok(Action::RequeueAfter(self.poll_interval(managed, Some(&observation))));
        }
        if !observation.diff.is_empty() {
            // Drift (a change made outside, or a spec change not applied yet): say which fields.
            self.recorder.normal(&managed.object, "ExternalResourceDrifted", format!("external resource differs from the desired state in: {}", observation.diff));
        }
        match self.with_timeout("update", client.update(managed)).await {
            Err(error) => {
                let message = format!("update failed: {error}");
                self.recorder.warning(&managed.object, "CannotUpdateExternalResource", &message);
                managed.set_condition(Condition::reconcile_error(message));
                Ok(Action::Requeue)
            }
            Ok(update) => {
                if let Err(error) = connection::publish(&self.kube, &managed.object, &update.connection_details).await {
                    self.recorder.warning(&managed.object, "CannotPublishConnectionDetails", error.to_string());
                    managed.set_condition(Condition::reconcile_error(&error));
                    return Ok(Action::Requeue);
                }
                self.recorder.normal(&managed.object, "UpdatedExternalResource", "Successfully requested update of external resource");
                if drifted {
                    // Reported once: until Observe finds it up to date again, it is not in sync.
                    self.in_sync().remove(managed.uid());
                    self.recorder.warning(&managed.object, crate::drift::REASON, crate::drift::external_message(&observation.diff));
                    if let Some(metrics) = &self.metrics {
                        metrics.drift_corrected(&self.settings.kind.gvk.group, &self.settings.kind.gvk.kind);
                    }
                }
                managed.set_condition(Condition::reconcile_success());
                Ok(Action::RequeueAfter(self.poll_interval(managed, Some(&observation))))
            }
        }
    }

    /// Saves an identifier Observe found, and settles a create whose outcome was unknown once
    /// the resource is seen.
    async fn save_identity(&self, managed: &mut Managed, observation: &ExternalObservation) -> Result<(), ReconcileError> {
        let mut changed = false;
        if let Some(found) = observation.external_name.as_deref().filter(|n| !n.is_empty())
            && managed.external_name() != Some(found)
        {
            object::set_annotation(&mut managed.object, EXTERNAL_NAME, found);
            changed = true;
        }
        if observation.resource_exists && annotations::create_outcome_unknown(&managed.object) {
            annotations::stamp_outcome(&mut managed.object, CREATE_SUCCEEDED);
            changed = true;
        }
        if changed {
            self.save_critical(managed).await?;
        }
        Ok(())
    }

    /// A create succeeded (or was started with unknown outcome) so recently that Observe may
    /// not see it yet.
    fn within_creation_grace(&self, managed: &Managed) -> bool {
        let recent = |key| {
            object::annotation(&managed.object, key)
                .and_then(object::parse_time)
                .is_some_and(|t| jiff::Timestamp::now().duration_since(t) < jiff::SignedDuration::try_from(self.settings.creation_grace).unwrap_or_default())
        };
        recent(CREATE_SUCCEEDED) || (annotations::create_outcome_unknown(&managed.object) && recent(CREATE_PENDING))
    }

    async fn delete(&self, managed: &mut Managed, policies: &ManagementPolicies, client: &mut dyn ExternalClient, observation: &ExternalObservation) -> Step {
        managed.set_condition(Condition::deleting());
        let others: Vec<String> = object::finalizers(&managed.object).into_iter().filter(|f| f != FINALIZER).collect();
        if !others.is_empty() && object::has_finalizer(&managed.object, FINALIZER) {
            // Other finalizers go first (they may need the external resource).
            managed.set_condition(Condition::deleting().with_message(format!("waiting for finalizers to be removed: {}", others.join(", "))));
            managed.set_condition(Condition::reconcile_success());
            return Ok(Action::RequeueAfter(self.poll_interval(managed, None)));
        }
        if observation.resource_exists && policies.should_delete() {
            return match self.with_timeout("delete", client.delete(managed)).await {
                Err(error) => {
                    let message = format!("delete failed: {error}");
                    self.recorder.warning(&managed.object, "CannotDeleteExternalResource", &message);
                    managed.set_condition(Condition::deleting().with_message(format!("cannot delete external resource: {error}")));
                    managed.set_condition(Condition::reconcile_error(message));
                    Ok(Action::Requeue)
                }
                Ok(_) => {
                    self.recorder.normal(&managed.object, "DeletedExternalResource", "Successfully requested deletion of external resource");
                    managed.set_condition(Condition::deleting().with_message("waiting for the external resource to be deleted"));
                    managed.set_condition(Condition::reconcile_success());
                    Ok(Action::RequeueAfter(observation.requeue_after.unwrap_or(Duration::from_secs(1)).min(self.settings.poll_interval)))
                }
            };
        }
        if object::remove_finalizer(&mut managed.object, FINALIZER) {
            self.update(managed).await?;
        }
        managed.set_condition(Condition::reconcile_success());
        Ok(Action::Done)
    }

    async fn create(&self, managed: &mut Managed, client: &mut dyn ExternalClient, naming: ExternalNaming) -> Step {
        if !annotations::intent_would_be_newest(&managed.object) {
            // A retry in the second of the last outcome would be indistinguishable from it:
            // back off until the clock has moved on.
            return Ok(Action::Requeue);
        }
        fault::point(fault::BEFORE_CREATE_INTENT, managed.uid());
        // The intent, with a conflict-checked update: a stale view of the resource fails
        // here instead of creating a second external resource.
        object::set_annotation(&mut managed.object, CREATE_PENDING, &object::now_rfc3339());
        self.update(managed).await?;
        fault::point(fault::AFTER_CREATE_INTENT, managed.uid());

        match self.with_timeout("create", client.create(managed)).await {
            Ok(creation) => {
                fault::point(fault::AFTER_EXTERNAL_CREATE, managed.uid());
                if let Some(id) = creation.external_name.as_deref().filter(|id| !id.is_empty()) {
                    object::set_annotation(&mut managed.object, EXTERNAL_NAME, id);
                }
                annotations::stamp_outcome(&mut managed.object, CREATE_SUCCEEDED);
                self.save_critical(managed).await?;
                fault::point(fault::AFTER_CREATE_SAVED, managed.uid());
                if let Err(error) = connection::publish(&self.kube, &managed.object, &creation.connection_details).await {
                    self.recorder.warning(&managed.object, "CannotPublishConnectionDetails", error.to_string());
                }
                self.recorder.normal(&managed.object, "CreatedExternalResource", "Successfully requested creation of external resource");
                managed.set_condition(Condition::creating());
                managed.set_condition(Condition::reconcile_success());
                Ok(Action::RequeueAfter(Duration::ZERO))
            }
            Err(error) => {
                let message = format!("create failed: {error}");
                match error.kind {
                    ErrorKind::AlreadyExists if naming == ExternalNaming::FromMetadataName => {
                        // Our name is taken by the resource we meant to create: adopt it.
                        annotations::stamp_outcome(&mut managed.object, CREATE_SUCCEEDED);
                        self.save_critical(managed).await?;
                        managed.set_condition(Condition::creating());
                        managed.set_condition(Condition::reconcile_success());
                        return Ok(Action::RequeueAfter(Duration::ZERO));
                    }
                    ErrorKind::Ambiguous => {
                        // The create may have happened: the intent stays unresolved, and the
                        // next reconcile settles it from what Observe finds.
                        self.recorder.warning(&managed.object, "CannotCreateExternalResource", &message);
                        managed.set_condition(Condition::creating());
                        managed.set_condition(Condition::reconcile_error(format!("{message} (the outcome is unknown; it is checked before any retry)")));
                        return Ok(Action::Requeue);
                    }
                    ErrorKind::Definite | ErrorKind::AlreadyExists => {}
                }
                annotations::stamp_outcome(&mut managed.object, CREATE_FAILED);
                self.save_critical(managed).await?;
                self.recorder.warning(&managed.object, "CannotCreateExternalResource", &message);
                managed.set_condition(Condition::creating());
                managed.set_condition(Condition::reconcile_error(message));
                Ok(Action::Requeue)
            }
        }
    }
}

#[async_trait::async_trait]
impl Reconciler for ManagedReconciler {
    async fn reconcile(&self, key: &ObjectKey) -> Step {
        let Some(object) = self.kube.get(&self.settings.kind, key.namespace.as_deref(), &key.name).await? else {
            return Ok(Action::Done);
        };
        let before = conditions::status_of(&object);
        let was_ready = conditions::is_true(&object, conditions::READY);
        let mut managed = Managed { object };
        let result = self.run(&mut managed).await;
        if conditions::status_of(&managed.object) != before {
            if !was_ready && conditions::is_true(&managed.object, conditions::READY) {
                fault::point(fault::BEFORE_READY_WRITE, managed.uid());
            }
            match self.kube.replace_status(&self.settings.kind, &managed.object).await {
                Ok(_) => {}
                Err(error) if error.is_not_found() => return Ok(Action::Done),
                Err(error) => return Err(error.into()),
            }
        }
        result
    }
}
