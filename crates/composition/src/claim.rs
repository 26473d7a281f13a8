//! Claims (legacy XRDs with `claimNames`): a claim binds to a composite resource it creates
//! and keeps in sync (server-side applied as `apiextensions.crossplane.io/claim`), gets the
//! composite's status and chosen conditions back, waits for it to be Ready, and receives its
//! connection Secret in the claim's namespace. Deleting a claim deletes its composite with the
//! claim's `compositeDeletePolicy`; from the moment the delete is accepted the claim shows
//! `Ready=False/Deleting`, naming what the deletion waits for.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use oxplane_runtime::Runtime;
use oxplane_runtime::client::DeleteOptions;
use oxplane_runtime::conditions::{self, Condition};
use oxplane_runtime::controller::{Action, Controller, ControllerConfig, ReconcileError, Reconciler, spec_or_metadata_changed};
use oxplane_runtime::events::EventRecorder;
use oxplane_runtime::kinds::Kind;
use oxplane_runtime::managed::{annotations, connection};
use oxplane_runtime::object::{self, ObjectKey};
use oxplane_runtime::watches::WatchEvent;
use serde_json::{Map, Value, json};

use crate::composite::compose::{LABEL_CLAIM_NAME, LABEL_CLAIM_NAMESPACE};
use crate::composite::shape::XrType;

/// The finalizer of claims.
pub const FINALIZER: &str = "finalizer.apiextensions.crossplane.io";
/// The field manager the claim applies its composite with.
pub const FIELD_MANAGER: &str = "apiextensions.crossplane.io/claim";

/// How often a claim whose deletion is blocked repeats the blocker as a Warning event.
pub const BLOCKED_WARNING_INTERVAL: Duration = Duration::from_secs(60);
/// How long the same blocker must stand before a claim warns about it.
pub const BLOCKED_SETTLE: Duration = Duration::from_secs(4);

/// Spec fields only a claim has, or only Crossplane writes on a composite: never copied from
/// the claim to its composite.
const NOT_PROPAGATED: [&str; 7] =
    ["resourceRef", "writeConnectionSecretToRef", "compositeDeletePolicy", "claimRef", "resourceRefs", "crossplane", "compositionRevisionRef"];

/// Reconciles the claims of one XRD.
pub struct ClaimReconciler {
    runtime: Runtime,
    xr_type: XrType,
    claim: Kind,
    recorder: EventRecorder,
    /// What blocks each deleting claim (by uid).
    warned: Mutex<HashMap<String, Blocked>>,
}

type Outcome = Result<Action, ReconcileError>;

impl ClaimReconciler {
    /// A reconciler of `xr_type`'s claims.
    pub fn new(runtime: Runtime, xr_type: XrType, claim: Kind) -> Self {
        let recorder = EventRecorder::new(runtime.kube.clone(), "offered/compositeresourcedefinition.apiextensions.crossplane.io")
            .with_annotations(json!({"controller": format!("claim/{}", xr_type.xrd)}));
        ClaimReconciler { runtime, xr_type, claim, recorder, warned: Mutex::new(HashMap::new()) }
    }

    async fn composite(&self, claim: &Value) -> Result<Option<Value>, ReconcileError> {
        let Some(name) = claim.pointer("/spec/resourceRef/name").and_then(Value::as_str).filter(|n| !n.is_empty()) else {
            return Ok(None);
        };
        Ok(self.runtime.kube.get(&self.xr_type.kind, None, name).await?)
    }

    async fn write_status(&self, claim: &mut Value) -> Result<(), ReconcileError> {
        match self.runtime.kube.replace_status(&self.claim, claim).await {
            Ok(saved) => {
                if let Some(version) = saved.pointer("/metadata/resourceVersion") {
                    claim["metadata"]["resourceVersion"] = version.clone();
                }
                Ok(())
            }
            Err(error) if error.is_not_found() => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    async fn run(&self, claim: &mut Value) -> Outcome {
        if annotations::is_paused(claim) {
            self.recorder.normal(claim, "ReconciliationPaused", "Reconciliation is paused via the pause annotation");
            conditions::set(claim, Condition::reconcile_paused().with_message("Reconciliation (including deletion) is paused via the pause annotation"));
            return Ok(Action::Done);
        }
        if annotations::take_reconcile_request(claim) {
            self.recorder.normal(claim, "ReconcileRequestHandled", "Handling reconcile request");
        }
        let composite = self.composite(claim).await?;
        let claim_namespace = object::namespace(claim).unwrap_or_default().to_string();
        let claim_name = object::name(claim).unwrap_or_default().to_string();
        if let Some(xr) = &composite {
            let bound_to = (xr.pointer("/spec/claimRef/namespace").and_then(Value::as_str), xr.pointer("/spec/claimRef/name").and_then(Value::as_str));
            if let (Some(namespace), Some(name)) = bound_to
                && (namespace != claim_namespace || name != claim_name)
            {
                let message = format!(
                    "refusing to operate on composite resource {:?} that is not bound to this claim: bound to claim {:?}",
                    object::name(xr).unwrap_or_default(),
                    format!("{namespace}/{name}")
                );
                self.recorder.warning(claim, "BindCompositeResource", &message);
                conditions::set(claim, Condition::reconcile_error(message));
                return Ok(Action::Done);
            }
        }
        if object::is_deleting(claim) {
            return self.delete(claim, composite).await;
        }
        if object::add_finalizer(claim, FINALIZER) {
            let saved = self.runtime.kube.replace(&self.claim, claim).await?;
            object::adopt_saved(claim, saved);
        }
        let xr = self.sync(claim, composite.as_ref()).await?;

        let bound = claim.pointer("/status/conditions").is_some_and(|_| conditions::get(claim, "Synced").is_some_and(|c| c.status == "True"));
        if !bound {
            self.recorder.normal(claim, "BindCompositeResource", "Successfully bound composite resource");
        }
        conditions::set(claim, Condition::reconcile_success());
        // Conditions functions aimed at the claim too.
        for type_ in xr.pointer("/status/claimConditionTypes").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
            if let Some(condition) = conditions::get(&xr, type_) {
                conditions::set(claim, condition);
            }
        }
        if !conditions::is_true(&xr, "Ready") {
            self.recorder.normal(claim, "BindCompositeResource", "Composite resource is not yet ready");
            conditions::set(claim, Condition::new("Ready", "False", "Waiting").with_message("Claim is waiting for composite resource to become Ready"));
            return Ok(Action::Done);
        }
        self.propagate_secret(claim, &xr).await?;
        conditions::set(claim, Condition::available());
        Ok(Action::Done)
    }

    /// Creates or updates the composite from the claim, the claim's own references first.
    async fn sync(&self, claim: &mut Value, composite: Option<&Value>) -> Result<Value, ReconcileError> {
        let xr_type = &self.xr_type;
        let xr_name = match composite.and_then(object::name) {
            Some(name) => name.to_string(),
            None => claim
                .pointer("/spec/resourceRef/name")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
                .map(str::to_string)
                .unwrap_or_else(|| generated_name(object::name(claim).unwrap_or("claim"))),
        };
        let claim_spec = claim.get("spec").and_then(Value::as_object).cloned().unwrap_or_default();
        let manual = claim_spec.get("compositionUpdatePolicy").and_then(Value::as_str) == Some("Manual");
        let mut spec: Map<String, Value> =
            claim_spec.iter().filter(|(k, _)| !NOT_PROPAGATED.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone())).collect();
        if xr_type.enforced_composition.is_some() {
            spec.remove("compositionRef");
        }
        if manual && let Some(revision) = claim_spec.get("compositionRevisionRef") {
            spec.insert("compositionRevisionRef".into(), revision.clone());
        }
        spec.insert(
            "claimRef".into(),
            json!({"apiVersion": claim.get("apiVersion"), "kind": claim.get("kind"), "namespace": object::namespace(claim), "name": object::name(claim)}),
        );
        let mut labels: Map<String, Value> = object::labels(claim).into_iter().filter(|(k, _)| !k.contains("kubernetes.io/")).collect();
        labels.insert(LABEL_CLAIM_NAME.into(), json!(object::name(claim)));
        labels.insert(LABEL_CLAIM_NAMESPACE.into(), json!(object::namespace(claim)));
        let mut annotations: Map<String, Value> = claim
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
            .map(|a| a.iter().filter(|(k, _)| !k.contains("kubernetes.io/")).map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default();
        if let Some(existing) = composite.and_then(|xr| object::annotation(xr, annotations::EXTERNAL_NAME)) {
            annotations.insert(annotations::EXTERNAL_NAME.into(), json!(existing));
        }
        let desired = json!({
            "apiVersion": xr_type.kind.api_version(),
            "kind": xr_type.kind.gvk.kind,
            "metadata": {"name": xr_name, "labels": labels, "annotations": annotations},
            "spec": spec,
        });

        // The claim names its composite before the composite exists, so it can never leak.
        let mut claim_fields = Map::new();
        claim_fields.insert("resourceRef".into(), json!({"apiVersion": xr_type.kind.api_version(), "kind": xr_type.kind.gvk.kind, "name": xr_name}));
        if let Some(xr) = composite {
            if (!claim_spec.contains_key("compositionRef") || xr_type.enforced_composition.is_some())
                && let Some(reference) = xr_type.field(xr, "compositionRef")
            {
                claim_fields.insert("compositionRef".into(), reference.clone());
            }
            if !claim_spec.contains_key("compositionRevisionSelector")
                && let Some(selector) = xr_type.field(xr, "compositionRevisionSelector")
            {
                claim_fields.insert("compositionRevisionSelector".into(), selector.clone());
            }
            if !manual && let Some(revision) = xr_type.field(xr, "compositionRevisionRef") {
                claim_fields.insert("compositionRevisionRef".into(), revision.clone());
            }
        }
        let changed = claim_fields.iter().any(|(k, v)| claim_spec.get(k) != Some(v));
        let external_name = composite.and_then(|xr| object::annotation(xr, annotations::EXTERNAL_NAME)).map(str::to_string);
        let name_changed = external_name.as_deref().is_some_and(|n| object::annotation(claim, annotations::EXTERNAL_NAME) != Some(n));
        if changed || name_changed {
            let mut patch = json!({"spec": claim_fields});
            if let Some(name) = external_name.filter(|_| name_changed) {
                patch["metadata"] = json!({"annotations": {annotations::EXTERNAL_NAME: name}});
            }
            let (namespace, name) = (object::namespace(claim).map(str::to_string), object::name(claim).unwrap_or_default().to_string());
            let saved = self.runtime.kube.merge_patch(&self.claim, namespace.as_deref(), &name, &patch).await?;
            object::adopt_saved(claim, saved);
        }
        let xr = self.runtime.kube.apply(&xr_type.kind, &desired, FIELD_MANAGER, true).await?;

        // The composite's status, minus what the claim keeps for itself.
        if let Some(status) = xr.get("status").and_then(Value::as_object) {
            for (key, value) in status {
                if !matches!(key.as_str(), "conditions" | "connectionDetails" | "claimConditionTypes") {
                    object::set_status_field(claim, key, value.clone());
                }
            }
        }
        Ok(xr)
    }

    /// Copies the composite's connection Secret into the claim's namespace.
    async fn propagate_secret(&self, claim: &mut Value, xr: &Value) -> Result<(), ReconcileError> {
        let Some(claim_secret) = claim.pointer("/spec/writeConnectionSecretToRef/name").and_then(Value::as_str).map(str::to_string) else {
            return Ok(());
        };
        let Some(Ok((namespace, name))) = connection::secret_ref(xr) else { return Ok(()) };
        let Some(secret) = self.runtime.kube.get(&connection::secret_kind(), Some(&namespace), &name).await? else { return Ok(()) };
        if object::controller_uid(&secret) != object::uid(xr) {
            return Err(ReconcileError::new(format!("cannot propagate connection details: secret {namespace}/{name} is not controlled by the composite resource")));
        }
        let details = connection::decode_data(&secret);
        let claim_namespace = object::namespace(claim).unwrap_or_default().to_string();
        match connection::apply_secret(&self.runtime.kube, claim, &claim_namespace, &claim_secret, &details, false).await {
            Ok(true) => {
                object::set_status_field(claim, "connectionDetails", json!({"lastPublishedTime": object::now_rfc3339()}));
                self.recorder.normal(claim, "PropagateConnectionSecret", "Successfully propagated connection details from composite resource");
                Ok(())
            }
            Ok(false) => Ok(()),
            Err(error) => Err(ReconcileError::new(error.to_string())),
        }
    }

    /// Deletes the claim's composite with its policy; `Ready=False/Deleting` from the first
    /// moment, naming what it waits for.
    async fn delete(&self, claim: &mut Value, composite: Option<Value>) -> Outcome {
        let foreground = claim.pointer("/spec/compositeDeletePolicy").and_then(Value::as_str) == Some("Foreground");
        conditions::set(claim, Condition::deleting());
        if let Some(xr) = composite {
            let xr_name = object::name(&xr).unwrap_or_default().to_string();
            if foreground {
                if !object::is_deleting(&xr) {
                    let options = DeleteOptions { propagation: Some("Foreground".into()), uid: object::uid(&xr).map(str::to_string), ..Default::default() };
                    self.runtime.kube.delete(&self.xr_type.kind, None, &xr_name, &options).await?;
                    self.recorder.normal(
                        claim,
                        "DeleteCompositeResource",
                        format!("Deleting composite resource {}/{xr_name} in the foreground", self.xr_type.kind.gvk.kind),
                    );
                }
                let waiting = conditions::get(&xr, "Ready").filter(|c| c.reason == "Deleting" && !c.message.is_empty()).map(|c| c.message);
                let message = match &waiting {
                    Some(why) => format!("waiting for composite resource {}/{xr_name} to be deleted: {why}", self.xr_type.kind.gvk.kind),
                    None => format!("waiting for composite resource {}/{xr_name} to be deleted", self.xr_type.kind.gvk.kind),
                };
                if let Some(why) = &waiting {
                    self.warn_blocked(claim, why);
                }
                conditions::set(claim, Condition::deleting().with_message(message));
                conditions::set(claim, Condition::reconcile_success());
                // The composite's changes wake us; the timer refreshes the message regardless.
                return Ok(Action::RequeueAfter(Duration::from_secs(5)));
            }
            let options = DeleteOptions { uid: object::uid(&xr).map(str::to_string), ..Default::default() };
            self.runtime.kube.delete(&self.xr_type.kind, None, &xr_name, &options).await?;
        }
        // Written before the finalizer goes, so the claim said Deleting while it existed.
        self.write_status(claim).await?;
        self.recorder.normal(claim, "DeleteCompositeResource", "Successfully deleted composite resource");
        if let Some(uid) = object::uid(claim) {
            self.warned.lock().unwrap_or_else(|p| p.into_inner()).remove(uid);
        }
        if object::remove_finalizer(claim, FINALIZER) {
            match self.runtime.kube.replace(&self.claim, claim).await {
                Ok(saved) => object::adopt_saved(claim, saved),
                Err(error) if error.is_not_found() => {}
                Err(error) => return Err(error.into()),
            }
        }
        conditions::set(claim, Condition::reconcile_success());
        Ok(Action::Done)
    }
}

impl ClaimReconciler {
    /// A Warning event naming what blocks the claim's deletion, once the same blocker has stood
    /// for [`BLOCKED_SETTLE`] (passing states of a deletion are not worth a warning), and then
    /// at most every [`BLOCKED_WARNING_INTERVAL`].
    fn warn_blocked(&self, claim: &Value, why: &str) {
        let Some(uid) = object::uid(claim) else { return };
        let now = Instant::now();
        let mut warned = self.warned.lock().unwrap_or_else(|p| p.into_inner());
        let entry = warned.entry(uid.to_string()).or_insert_with(|| Blocked { since: now, said: why.to_string(), warned: None });
        if entry.said != why {
            *entry = Blocked { since: now, said: why.to_string(), warned: None };
        }
        let due = now.duration_since(entry.since) >= BLOCKED_SETTLE && entry.warned.is_none_or(|at| now.duration_since(at) >= BLOCKED_WARNING_INTERVAL);
        if due {
            entry.warned = Some(now);
            drop(warned);
            self.recorder.warning(claim, "DeleteCompositeResource", format!("Deletion is blocked: {why}"));
        }
    }
}

/// What blocks a claim's deletion, since when, and when it was last warned about.
struct Blocked {
    since: Instant,
    said: String,
    warned: Option<Instant>,
}

/// `<claim>-<5 random lowercase letters and digits>`, as the API server generates names.
fn generated_name(claim: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let suffix: String = (0..5).map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char).collect();
    let prefix: String = claim.chars().take(57).collect();
    format!("{prefix}-{suffix}")
}

#[async_trait::async_trait]
impl Reconciler for ClaimReconciler {
    async fn reconcile(&self, key: &ObjectKey) -> Outcome {
        let Some(mut claim) = self.runtime.kube.get(&self.claim, key.namespace.as_deref(), &key.name).await? else {
            return Ok(Action::Done);
        };
        let before = conditions::status_of(&claim);
        let result = self.run(&mut claim).await;
        if let Err(error) = &result
            && !error.quiet
        {
            conditions::set(&mut claim, Condition::reconcile_error(&error.message));
        }
        if conditions::status_of(&claim) != before {
            self.write_status(&mut claim).await?;
        }
        result
    }
}

/// Starts the claim controller of an XRD, named `claim/<xrd-name>`.
pub fn start(runtime: &Runtime, xr_type: XrType, claim: Kind) -> Arc<Controller> {
    let name = format!("claim/{}", xr_type.xrd);
    let xr_kind = xr_type.kind.clone();
    let reconciler = Arc::new(ClaimReconciler::new(runtime.clone(), xr_type, claim.clone()));
    let controller = Controller::start(ControllerConfig::new(name), reconciler, runtime.metrics.clone());
    runtime.watches.kinds().insert(claim.clone());
    controller.watch_own(&runtime.watches, &claim.gvk, spec_or_metadata_changed);
    // A composite's every change (its status above all) goes to the claim it is bound to.
    controller.watch_mapped(&runtime.watches, &xr_kind.gvk, |event| {
        let xr = match event {
            WatchEvent::Applied { new, .. } => new,
            WatchEvent::Deleted(old) => old,
            WatchEvent::State(_) => return Vec::new(),
        };
        match (xr.pointer("/spec/claimRef/namespace").and_then(Value::as_str), xr.pointer("/spec/claimRef/name").and_then(Value::as_str)) {
            (Some(namespace), Some(name)) => vec![ObjectKey::new(Some(namespace), name)],
            _ => Vec::new(),
        }
    });
    controller
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_names_look_like_the_api_servers() {
        let name = generated_name("my-db");
        assert!(name.starts_with("my-db-") && name.len() == "my-db-".len() + 5, "{name}");
        assert_ne!(generated_name("my-db"), generated_name("my-db"));
        assert!(generated_name(&"x".repeat(80)).len() <= 63);
    }
}
