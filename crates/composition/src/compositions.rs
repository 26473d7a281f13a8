//! Compositions and their revisions: every distinct Composition (spec, labels and
//! annotations) gets a numbered, immutable CompositionRevision named
//! `<composition>-<7 hex of its hash>`; going back to an earlier spec renumbers that revision
//! as the newest. Composites compose from revisions, so editing a Composition rolls out
//! through their update policy.

use std::sync::Arc;

use oxplane_runtime::Runtime;
use oxplane_runtime::conditions::{self, Condition};
use oxplane_runtime::controller::{Action, Controller, ControllerConfig, ReconcileError, Reconciler, spec_or_metadata_changed};
use oxplane_runtime::events::EventRecorder;
use oxplane_runtime::kinds::Kind;
use oxplane_runtime::object::{self, ObjectKey};
use oxplane_runtime::watches::WatchEvent;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// `crossplane.io/composition-name` on revisions.
pub const LABEL_COMPOSITION_NAME: &str = "crossplane.io/composition-name";
/// `crossplane.io/composition-hash` on revisions.
pub const LABEL_COMPOSITION_HASH: &str = "crossplane.io/composition-hash";

/// `Composition`.
pub fn composition_kind() -> Kind {
    Kind::new("apiextensions.crossplane.io", "v1", "Composition", "compositions", false)
}

/// `CompositionRevision`.
pub fn revision_kind() -> Kind {
    Kind::new("apiextensions.crossplane.io", "v1", "CompositionRevision", "compositionrevisions", false)
}

/// The hash of a Composition: sha256 over its labels, annotations and spec (as canonical JSON,
/// keys sorted), hex.
pub fn hash(composition: &Value) -> String {
    let part = |pointer: &str| composition.pointer(pointer).cloned().unwrap_or(Value::Null).to_string();
    let mut hasher = Sha256::new();
    for text in [part("/metadata/labels"), part("/metadata/annotations"), part("/spec")] {
        hasher.update(text.as_bytes());
        hasher.update([0u8]);
    }
    hasher.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Makes revisions of Compositions.
pub struct CompositionReconciler {
    runtime: Runtime,
    recorder: EventRecorder,
}

impl CompositionReconciler {
    /// A reconciler recording events as `revisions/compositions.apiextensions.crossplane.io`.
    pub fn new(runtime: Runtime) -> Self {
        let recorder = EventRecorder::new(runtime.kube.clone(), "revisions/compositions.apiextensions.crossplane.io");
        CompositionReconciler { runtime, recorder }
    }

    async fn mark_valid(&self, mut revision: Value) -> Result<(), ReconcileError> {
        let before = conditions::status_of(&revision);
        conditions::set(&mut revision, Condition::reconcile_success());
        conditions::set(&mut revision, Condition::new("ValidPipeline", "True", "ValidPipeline"));
        if conditions::status_of(&revision) != before {
            self.runtime.kube.replace_status(&revision_kind(), &revision).await?;
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl Reconciler for CompositionReconciler {
    async fn reconcile(&self, key: &ObjectKey) -> Result<Action, ReconcileError> {
        let kube = &self.runtime.kube;
        let Some(composition) = kube.get(&composition_kind(), None, &key.name).await? else {
            return Ok(Action::Done);
        };
        if object::is_deleting(&composition) {
            // Revisions go with their Composition (they are owned by it).
            return Ok(Action::Done);
        }
        let hash = hash(&composition);
        let short: String = hash.chars().take(63).collect();
        let mut revisions = kube.list(&revision_kind(), None, Some(&format!("{LABEL_COMPOSITION_NAME}={}", key.name))).await?;
        // A revision that lost its owner (after a backup and restore) is adopted again.
        for revision in revisions.iter_mut() {
            if object::controller_uid(revision).is_none() {
                object::add_owner_reference(revision, object::owner_reference(&composition, true, true));
                *revision = kube.replace(&revision_kind(), revision).await?;
            }
        }
        let latest = revisions.iter().filter_map(|r| r.pointer("/spec/revision").and_then(Value::as_i64)).max().unwrap_or(0);
        if let Some(existing) = revisions.iter().find(|r| object::label(r, LABEL_COMPOSITION_HASH) == Some(short.as_str())) {
            let number = existing.pointer("/spec/revision").and_then(Value::as_i64).unwrap_or(0);
            let existing = if number < latest {
                // The Composition went back to an earlier spec: that revision is the newest again.
                let name = object::name(existing).unwrap_or_default().to_string();
                kube.merge_patch(&revision_kind(), None, &name, &json!({"spec": {"revision": latest + 1}})).await?
            } else {
                existing.clone()
            };
            self.mark_valid(existing).await?;
            return Ok(Action::Done);
        }
        let number = latest + 1;
        let mut labels = object::labels(&composition);
        labels.insert(LABEL_COMPOSITION_NAME.into(), json!(key.name));
        labels.insert(LABEL_COMPOSITION_HASH.into(), json!(short));
        let mut spec = composition.get("spec").cloned().unwrap_or_else(|| json!({}));
        spec["revision"] = json!(number);
        let revision = json!({
            "apiVersion": "apiextensions.crossplane.io/v1",
            "kind": "CompositionRevision",
            "metadata": {
                "name": format!("{}-{}", key.name, &hash[..7]),
                "labels": labels,
                "annotations": composition.pointer("/metadata/annotations").cloned().unwrap_or_else(|| json!({})),
                "ownerReferences": [object::owner_reference(&composition, true, true)],
            },
            "spec": spec,
        });
        let created = match kube.create(&revision_kind(), &revision).await {
            Ok(created) => created,
            Err(error) if error.is_already_exists() => return Ok(Action::Requeue),
            Err(error) => {
                self.recorder.warning(&composition, "CreateRevision", format!("cannot create CompositionRevision: {error}"));
                return Err(error.into());
            }
        };
        // Crossplane annotates the event with the number of the revision it created.
        let recorder = self.recorder.clone().with_annotations(json!({"revision": number.to_string()}));
        recorder.normal(&composition, "CreateRevision", "Created new revision");
        self.mark_valid(created).await?;
        Ok(Action::Done)
    }
}

/// Starts the Composition controller, named `revisions/compositions.apiextensions.crossplane.io`.
pub fn start_controller(runtime: &Runtime) -> Arc<Controller> {
    let reconciler = Arc::new(CompositionReconciler::new(runtime.clone()));
    let controller = Controller::start(ControllerConfig::new("revisions/compositions.apiextensions.crossplane.io"), reconciler, runtime.metrics.clone());
    runtime.watches.kinds().insert(composition_kind());
    runtime.watches.kinds().insert(revision_kind());
    controller.watch_own(&runtime.watches, &composition_kind().gvk, spec_or_metadata_changed);
    controller.watch_mapped(&runtime.watches, &revision_kind().gvk, |event| match event {
        WatchEvent::Applied { new, .. } => object::label(new, LABEL_COMPOSITION_NAME).map(|n| vec![ObjectKey::new(None, n)]).unwrap_or_default(),
        WatchEvent::Deleted(old) => object::label(old, LABEL_COMPOSITION_NAME).map(|n| vec![ObjectKey::new(None, n)]).unwrap_or_default(),
        WatchEvent::State(_) => Vec::new(),
    });
    controller
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_follows_spec_labels_and_annotations_only() {
        let a = json!({"metadata": {"name": "a", "labels": {"x": "1"}, "resourceVersion": "5"}, "spec": {"mode": "Pipeline"}});
        let mut b = a.clone();
        b["metadata"]["resourceVersion"] = json!("9");
        b["metadata"]["name"] = json!("other");
        assert_eq!(hash(&a), hash(&b));
        let mut c = a.clone();
        c["spec"]["mode"] = json!("Resources");
        assert_ne!(hash(&a), hash(&c));
        let mut d = a.clone();
        d["metadata"]["annotations"] = json!({"note": "y"});
        assert_ne!(hash(&a), hash(&d));
        assert_eq!(hash(&a).len(), 64);
    }
}
