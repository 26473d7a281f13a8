//! Usages: a Usage says that one resource (`of`) is used by another (`by`), or for a
//! `reason`, and protects it from deletion while it is. The controller resolves selectors,
//! labels the used resource `crossplane.io/in-use`, makes the Usage go with its user, and
//! releases it when deleted; [`deletion_refusal`] is the deletion check the API server runs
//! (a 409 naming the Usage).
//!
//! Why a Usage is being deleted is recorded on it, never guessed: a composite that stops
//! composing a Usage writes `oxplane.io/deletion-cause: decomposed` on it before deleting it,
//! and such a Usage lets go at once. A composed Usage (one the composer made, which carries
//! `crossplane.io/composition-resource-name`) deleted for any other reason (its composite is
//! going) keeps protecting until the user is gone, so deletion keeps its order; a standalone
//! Usage lets go at once.
//! Every path out ends with the finalizer removed.

use std::sync::Arc;
use std::time::Duration;

use oxplane_runtime::Runtime;
use oxplane_runtime::client::{DeleteOptions, Kube};
use oxplane_runtime::conditions::{self, Condition};
use oxplane_runtime::controller::{Action, Controller, ControllerConfig, ReconcileError, Reconciler, spec_or_metadata_changed};
use oxplane_runtime::events::EventRecorder;
use oxplane_runtime::kinds::{Gvk, Kind, KindError};
use oxplane_runtime::object::{self, ObjectKey};
use serde_json::{Value, json};

use crate::composite::compose::ANNOTATION_RESOURCE_NAME;

/// The finalizer of Usages (all three kinds).
pub const FINALIZER: &str = "usage.apiextensions.crossplane.io";
/// `crossplane.io/in-use`, on used resources.
pub const LABEL_IN_USE: &str = "crossplane.io/in-use";
/// `crossplane.io/usage-details`, on Usages.
pub const ANNOTATION_DETAILS: &str = "crossplane.io/usage-details";
/// `usage.crossplane.io/deletion-attempt-with-policy`, on a used resource whose deletion was refused.
pub const ANNOTATION_DELETION_ATTEMPT: &str = "usage.crossplane.io/deletion-attempt-with-policy";
/// Why an object is being deleted, when the deleter says: `decomposed` (its composite no
/// longer composes it).
pub const ANNOTATION_DELETION_CAUSE: &str = "oxplane.io/deletion-cause";
/// The cause a composite records on what it stops composing.
pub const CAUSE_DECOMPOSED: &str = "decomposed";

/// The three Usage kinds, with the Go type name Crossplane's refusal message shows.
pub fn kinds() -> [(Kind, &'static str); 3] {
    [
        (Kind::new("apiextensions.crossplane.io", "v1beta1", "Usage", "usages", false), "*v1beta1.Usage"),
        (Kind::new("protection.crossplane.io", "v1beta1", "Usage", "usages", true), "*v1beta1.Usage"),
        (Kind::new("protection.crossplane.io", "v1beta1", "ClusterUsage", "clusterusages", false), "*v1beta1.ClusterUsage"),
    ]
}

/// Every Usage of the three kinds, with its kind.
pub async fn list_all(kube: &Kube) -> Result<Vec<(Kind, Value)>, oxplane_runtime::client::ApiError> {
    let mut all = Vec::new();
    for (kind, _) in kinds() {
        all.extend(kube.list(&kind, None, None).await?.into_iter().map(|usage| (kind.clone(), usage)));
    }
    Ok(all)
}

/// Whether a Usage's `of` names `used` (after selectors were resolved into `resourceRef`).
/// Kinds match by group and kind: the used object may be read at another version.
pub fn uses(usage: &Value, used: &Value) -> bool {
    let of = &usage["spec"]["of"];
    let Some(name) = of.pointer("/resourceRef/name").and_then(Value::as_str) else { return false };
    let namespace = of.pointer("/resourceRef/namespace").and_then(Value::as_str).or_else(|| object::namespace(usage));
    Some(name) == object::name(used) && same_kind_and_namespace(of, namespace, used)
}

/// Whether a Usage counts as protecting `used`: it names it, or its `of` is a selector not yet
/// resolved that would pick it (so a successor Usage keeps the resource protected while its
/// predecessor lets go).
pub fn protects(usage: &Value, used: &Value) -> bool {
    if uses(usage, used) {
        return true;
    }
    let of = &usage["spec"]["of"];
    if of.pointer("/resourceRef/name").is_some() {
        return false;
    }
    let Some(selector) = of.get("resourceSelector").filter(|s| s.is_object()) else { return false };
    let namespace = selector.get("namespace").and_then(Value::as_str).or_else(|| object::namespace(usage));
    let labels_match = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .is_none_or(|labels| labels.iter().all(|(k, v)| v.as_str().is_some_and(|v| object::label(used, k) == Some(v))));
    let controller_matches = selector.get("matchControllerRef").and_then(Value::as_bool) != Some(true)
        || (object::controller_uid(used).is_some() && object::controller_uid(used) == object::controller_uid(usage));
    labels_match && controller_matches && same_kind_and_namespace(of, namespace, used)
}

/// Whether `used` is of the group and kind `of` names, in `namespace` when it is namespaced.
fn same_kind_and_namespace(of: &Value, namespace: Option<&str>, used: &Value) -> bool {
    let group = |object: &Value| object.get("apiVersion").and_then(Value::as_str).map(|v| Gvk::from_api_version(v, "").group);
    if group(of) != group(used) || of.get("kind") != used.get("kind") {
        return false;
    }
    match object::namespace(used) {
        Some(used_namespace) => namespace == Some(used_namespace),
        None => true,
    }
}

/// The refusal of a deletion of `used` while `usages` (of any kind, with their Go type names)
/// use it: Crossplane's message, or `None` when nothing uses it.
pub fn deletion_refusal(used: &Value, usages: &[(&Value, &str)]) -> Option<String> {
    if object::label(used, LABEL_IN_USE) != Some("true") {
        return None;
    }
    let using: Vec<&(&Value, &str)> = usages.iter().filter(|(u, _)| uses(u, used)).collect();
    let (first, type_name) = using.first()?;
    let name = object::name(first).unwrap_or_default();
    let at = object::namespace(first).map(|ns| format!(" (in namespace {ns:?})")).unwrap_or_default();
    let why = match (first.pointer("/spec/by/kind").and_then(Value::as_str), first.pointer("/spec/by/resourceRef/name").and_then(Value::as_str)) {
        (Some(kind), Some(by)) => format!("by resource {kind}/{by}."),
        _ => format!("with reason: {:?}.", first.pointer("/spec/reason").and_then(Value::as_str).unwrap_or_default()),
    };
    Some(format!("This resource is in-use by {} usage(s), including the {type_name} {name:?}{at} {why}", using.len()))
}

/// The `crossplane.io/usage-details` text of a Usage.
pub fn details(usage: &Value) -> String {
    if let Some(reason) = usage.pointer("/spec/reason").and_then(Value::as_str).filter(|r| !r.is_empty()) {
        return reason.to_string();
    }
    let by_kind = usage.pointer("/spec/by/kind").and_then(Value::as_str);
    let by_name = usage.pointer("/spec/by/resourceRef/name").and_then(Value::as_str);
    let of_kind = usage.pointer("/spec/of/kind").and_then(Value::as_str).unwrap_or_default();
    let of_name = usage.pointer("/spec/of/resourceRef/name").and_then(Value::as_str).unwrap_or_default();
    match (by_kind, by_name) {
        (Some(by_kind), Some(by_name)) => {
            let mut text = format!("{by_kind}/{by_name} uses {of_kind}/{of_name}");
            if let Some(other) = usage.pointer("/spec/of/resourceRef/namespace").and_then(Value::as_str).filter(|ns| Some(*ns) != object::namespace(usage)) {
                text.push_str(&format!(" in namespace {other}"));
            }
            text
        }
        _ => "undefined".to_string(),
    }
}

/// Why the kind of a Usage's side cannot be known.
enum TargetError {
    /// It never will be, as things stand: a field is missing, or the kind is not served.
    Permanent(String),
    /// Asking failed; asking again may succeed.
    Transient(String),
}

/// Reconciles Usages of one kind.
pub struct UsageReconciler {
    runtime: Runtime,
    kind: Kind,
    recorder: EventRecorder,
}

type Outcome = Result<Action, ReconcileError>;

impl UsageReconciler {
    /// A reconciler of Usages of `kind`.
    pub fn new(runtime: Runtime, kind: Kind) -> Self {
        let recorder = EventRecorder::new(runtime.kube.clone(), &format!("usage/{}.{}", kind.gvk.kind.to_lowercase(), kind.gvk.group));
        UsageReconciler { runtime, kind, recorder }
    }

    /// The kind of `of` or `by`, and the namespace its object lives in (`None` when the Usage
    /// has no such side).
    async fn target(&self, usage: &Value, side: &str) -> Result<Option<(Kind, Option<String>)>, TargetError> {
        let Some(part) = usage.pointer(&format!("/spec/{side}")).filter(|p| p.is_object()) else { return Ok(None) };
        let api_version =
            part.get("apiVersion").and_then(Value::as_str).ok_or_else(|| TargetError::Permanent(format!("spec.{side}.apiVersion is required")))?;
        let kind = part.get("kind").and_then(Value::as_str).ok_or_else(|| TargetError::Permanent(format!("spec.{side}.kind is required")))?;
        let resolved = match self.runtime.watches.kinds().resolve(&Gvk::from_api_version(api_version, kind)).await {
            Ok(resolved) => resolved,
            Err(error @ KindError::NotServed { .. }) => return Err(TargetError::Permanent(error.to_string())),
            Err(error) => return Err(TargetError::Transient(error.to_string())),
        };
        let namespace = part
            .pointer("/resourceRef/namespace")
            .or_else(|| part.pointer("/resourceSelector/namespace"))
            .and_then(Value::as_str)
            .or_else(|| object::namespace(usage))
            .filter(|_| resolved.namespaced)
            .map(str::to_string);
        Ok(Some((resolved, namespace)))
    }

    /// The object a side names (after selectors were resolved), if it exists.
    async fn fetch(&self, usage: &Value, side: &str, target: &Option<(Kind, Option<String>)>) -> Result<Option<(Kind, Value)>, ReconcileError> {
        let (Some((kind, namespace)), Some(name)) = (target, usage.pointer(&format!("/spec/{side}/resourceRef/name")).and_then(Value::as_str)) else {
            return Ok(None);
        };
        Ok(self.runtime.kube.get(kind, namespace.as_deref(), name).await?.map(|object| (kind.clone(), object)))
    }

    /// Resolves a selector of `side` into a `resourceRef`; whether it wrote one.
    async fn resolve_selector(&self, usage: &mut Value, side: &str, kind: &Kind, namespace: Option<&str>) -> Result<bool, String> {
        let part = &usage["spec"][side];
        if part.pointer("/resourceRef/name").and_then(Value::as_str).is_some() {
            return Ok(false);
        }
        let Some(selector) = part.get("resourceSelector") else { return Ok(false) };
        let labels: Vec<String> = selector
            .get("matchLabels")
            .and_then(Value::as_object)
            .map(|m| m.iter().filter_map(|(k, v)| Some(format!("{k}={}", v.as_str()?))).collect())
            .unwrap_or_default();
        let candidates = self.runtime.kube.list(kind, namespace, Some(&labels.join(","))).await.map_err(|e| e.to_string())?;
        let same_controller = selector.get("matchControllerRef").and_then(Value::as_bool) == Some(true);
        let chosen = candidates.iter().find(|c| !same_controller || (object::controller_uid(c).is_some() && object::controller_uid(c) == object::controller_uid(usage)));
        let Some(chosen) = chosen else {
            let labels = selector.get("matchLabels").cloned().unwrap_or_else(|| json!({}));
            return Err(format!("no {:?} found matching labels: {labels}", kind.gvk.kind));
        };
        let mut reference = json!({"name": object::name(chosen)});
        // Crossplane names the namespace only when it is not the Usage's own: a Usage without
        // `spec.by` may not name one at all (its own CEL rule refuses cross-namespace `of`).
        if self.kind.namespaced && side == "of" && let Some(ns) = namespace.filter(|ns| Some(*ns) != object::namespace(usage)) {
            reference["namespace"] = json!(ns);
        }
        let patch = json!({"spec": {side: {"resourceRef": reference}}});
        let (usage_namespace, usage_name) = (object::namespace(usage).map(str::to_string), object::name(usage).unwrap_or_default().to_string());
        let saved = self.runtime.kube.merge_patch(&self.kind, usage_namespace.as_deref(), &usage_name, &patch).await.map_err(|e| e.to_string())?;
        object::adopt_saved(usage, saved);
        Ok(true)
    }

    async fn run(&self, usage: &mut Value) -> Outcome {
        let kube: &Kube = &self.runtime.kube;
        let of = self.target(usage, "of").await;
        let by = self.target(usage, "by").await;
        if object::is_deleting(usage) {
            // What cannot be named or is not served cannot exist, so there is nothing to
            // protect or wait for: a Usage that is going always has a way out.
            let settle = |target| match target {
                Ok(target) => Ok(target),
                Err(TargetError::Transient(error)) => Err(ReconcileError::new(error)),
                Err(TargetError::Permanent(_)) => Ok(None),
            };
            let (of, by) = (settle(of)?, settle(by)?);
            let used = self.fetch(usage, "of", &of).await?;
            let using = self.fetch(usage, "by", &by).await?;
            return self.release(usage, used, using).await;
        }
        let (of_kind, of_namespace) = match of {
            Ok(Some(target)) => target,
            Ok(None) => return Err(ReconcileError::new("spec.of is required")),
            Err(TargetError::Permanent(error) | TargetError::Transient(error)) => {
                self.recorder.warning(usage, "GetUsedResource", &error);
                conditions::set(usage, Condition::reconcile_error(&error));
                return Ok(Action::Requeue);
            }
        };
        let by = match by {
            Ok(by) => by,
            Err(TargetError::Permanent(error) | TargetError::Transient(error)) => {
                self.recorder.warning(usage, "GetUsingResource", &error);
                conditions::set(usage, Condition::reconcile_error(&error));
                return Ok(Action::Requeue);
            }
        };
        for (side, target) in [("of", Some((of_kind.clone(), of_namespace.clone()))), ("by", by.clone())] {
            let Some((kind, namespace)) = target else { continue };
            if let Err(error) = self.resolve_selector(usage, side, &kind, namespace.as_deref()).await {
                self.recorder.warning(usage, "ResolveSelectors", &error);
                conditions::set(usage, Condition::reconcile_error(&error));
                return Ok(Action::RequeueAfter(Duration::from_secs(10)));
            }
        }
        let of_name = usage.pointer("/spec/of/resourceRef/name").and_then(Value::as_str).map(str::to_string);
        let used = self.fetch(usage, "of", &Some((of_kind.clone(), of_namespace.clone()))).await?.map(|(_, used)| used);
        let using = self.fetch(usage, "by", &by).await?;

        if object::add_finalizer(usage, FINALIZER) {
            let saved = kube.replace(&self.kind, usage).await?;
            object::adopt_saved(usage, saved);
        }
        let mut changed = false;
        let text = details(usage);
        let mut metadata_patch = serde_json::Map::new();
        if object::annotation(usage, ANNOTATION_DETAILS) != Some(text.as_str()) {
            metadata_patch.insert("annotations".into(), json!({ANNOTATION_DETAILS: text}));
        }
        // The Usage goes with its user (a non-controller owner reference to it).
        if let Some((_, using)) = &using {
            let uid = object::uid(using).unwrap_or_default();
            let owned = usage.pointer("/metadata/ownerReferences").and_then(Value::as_array).is_some_and(|r| r.iter().any(|r| r["uid"] == uid));
            if !owned {
                let mut references = usage.pointer("/metadata/ownerReferences").and_then(Value::as_array).cloned().unwrap_or_default();
                references.push(object::owner_reference(using, false, false));
                metadata_patch.insert("ownerReferences".into(), Value::Array(references));
            }
        }
        if !metadata_patch.is_empty() {
            let (namespace, name) = (object::namespace(usage).map(str::to_string), object::name(usage).unwrap_or_default().to_string());
            let saved = kube.merge_patch(&self.kind, namespace.as_deref(), &name, &json!({"metadata": metadata_patch})).await?;
            object::adopt_saved(usage, saved);
            changed = true;
        }
        let Some(used) = used else {
            let message = format!("cannot get used resource {}/{}: not found", of_kind.gvk.kind, of_name.unwrap_or_default());
            self.recorder.warning(usage, "GetUsedResource", &message);
            conditions::set(usage, Condition::reconcile_error(message));
            return Ok(Action::RequeueAfter(Duration::from_secs(10)));
        };
        if object::label(&used, LABEL_IN_USE) != Some("true") {
            let key = ObjectKey::of(&used).unwrap_or_else(|| ObjectKey::new(None, ""));
            kube.merge_patch(&of_kind, key.namespace.as_deref(), &key.name, &json!({"metadata": {"labels": {LABEL_IN_USE: "true"}}})).await?;
            changed = true;
        }
        conditions::set(usage, Condition::available());
        conditions::set(usage, Condition::reconcile_success());
        if changed {
            self.recorder.normal(usage, "UsageConfigured", "Usage configured successfully.");
        }
        Ok(Action::RequeueAfter(Duration::from_secs(60)))
    }

    /// A Usage being deleted: waits for its user when it must, then frees the used resource
    /// (and replays a refused deletion of it, if asked) and lets go.
    async fn release(&self, usage: &mut Value, used: Option<(Kind, Value)>, using: Option<(Kind, Value)>) -> Outcome {
        let kube = &self.runtime.kube;
        let decomposed = object::annotation(usage, ANNOTATION_DELETION_CAUSE) == Some(CAUSE_DECOMPOSED);
        // Composed is what the composer wrote on it when it made it (the composition resource
        // name, never removed), not an owner reference the garbage collector may have trimmed.
        let composed = object::annotation(usage, ANNOTATION_RESOURCE_NAME).is_some();
        if let Some((kind, using)) = &using
            && composed
            && !decomposed
        {
            let message = format!(
                "Waiting for the using resource (which is a {:?} named {:?}) to be deleted.",
                kind.gvk.kind,
                object::name(using).unwrap_or_default()
            );
            self.recorder.normal(usage, "WaitingUsingDeleted", &message);
            conditions::set(usage, Condition::deleting().with_message(message));
            return Ok(Action::RequeueAfter(Duration::from_secs(2)));
        }
        if let Some((of_kind, used)) = &used {
            let key = ObjectKey::of(used).unwrap_or_else(|| ObjectKey::new(None, ""));
            // Another Usage may still protect it.
            let others = list_all(kube).await?.iter().filter(|(_, u)| object::uid(u) != object::uid(usage) && protects(u, used)).count();
            if others == 0 && object::label(used, LABEL_IN_USE).is_some() {
                match kube.merge_patch(of_kind, key.namespace.as_deref(), &key.name, &json!({"metadata": {"labels": {LABEL_IN_USE: null}}})).await {
                    Ok(_) => {}
                    Err(error) if error.is_not_found() => {}
                    Err(error) => {
                        self.recorder.warning(usage, "RemoveInUseLabel", error.to_string());
                        return Err(error.into());
                    }
                }
            }
            // A deletion refused while this Usage protected it is replayed before the Usage
            // lets go (the label is gone, so it is no longer refused), so a restart between
            // the two cannot lose it.
            if others == 0
                && usage.pointer("/spec/replayDeletion").and_then(Value::as_bool) == Some(true)
                && !object::is_deleting(used)
                && let Some(policy) = object::annotation(used, ANNOTATION_DELETION_ATTEMPT).map(str::to_string)
            {
                let options = DeleteOptions { propagation: Some(policy), uid: object::uid(used).map(str::to_string), resource_version: None };
                match kube.delete(of_kind, key.namespace.as_deref(), &key.name, &options).await {
                    Ok(_) => {}
                    Err(error) if error.is_not_found() || error.code == 409 => {}
                    Err(error) => {
                        self.recorder.warning(usage, "ReplayDeletion", format!("cannot replay deletion: {error}"));
                        return Err(error.into());
                    }
                }
            }
        }
        if object::remove_finalizer(usage, FINALIZER) {
            match kube.replace(&self.kind, usage).await {
                Ok(saved) => object::adopt_saved(usage, saved),
                Err(error) if error.is_not_found() => {}
                Err(error) => return Err(error.into()),
            }
        }
        Ok(Action::Done)
    }
}

#[async_trait::async_trait]
impl Reconciler for UsageReconciler {
    async fn reconcile(&self, key: &ObjectKey) -> Outcome {
        let Some(mut usage) = self.runtime.kube.get(&self.kind, key.namespace.as_deref(), &key.name).await? else {
            return Ok(Action::Done);
        };
        let before = conditions::status_of(&usage);
        let result = self.run(&mut usage).await;
        if conditions::status_of(&usage) != before {
            match self.runtime.kube.replace_status(&self.kind, &usage).await {
                Ok(_) => {}
                Err(error) if error.is_not_found() => {}
                Err(error) => return Err(error.into()),
            }
        }
        result
    }
}

/// Starts the controllers of the three Usage kinds, named `usage/<kind>.<group>`.
pub fn start(runtime: &Runtime) -> Vec<Arc<Controller>> {
    kinds()
        .into_iter()
        .map(|(kind, _)| {
            let reconciler = Arc::new(UsageReconciler::new(runtime.clone(), kind.clone()));
            let name = format!("usage/{}.{}", kind.gvk.kind.to_lowercase(), kind.gvk.group);
            let controller = Controller::start(ControllerConfig::new(name), reconciler, runtime.metrics.clone());
            runtime.watches.kinds().insert(kind.clone());
            controller.watch_own(&runtime.watches, &kind.gvk, spec_or_metadata_changed);
            controller
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(namespace: Option<&str>, of: Value, by: Option<Value>, reason: Option<&str>) -> Value {
        let mut u = json!({"apiVersion": "protection.crossplane.io/v1beta1", "kind": "Usage", "metadata": {"name": "u1"}, "spec": {"of": of}});
        if let Some(ns) = namespace {
            u["metadata"]["namespace"] = json!(ns);
        }
        if let Some(by) = by {
            u["spec"]["by"] = by;
        }
        if let Some(reason) = reason {
            u["spec"]["reason"] = json!(reason);
        }
        u
    }

    fn nop(name: &str, namespace: Option<&str>, in_use: bool) -> Value {
        let mut n = json!({"apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource", "metadata": {"name": name}});
        if let Some(ns) = namespace {
            n["metadata"]["namespace"] = json!(ns);
        }
        if in_use {
            n["metadata"]["labels"] = json!({LABEL_IN_USE: "true"});
        }
        n
    }

    #[test]
    fn refusals_name_the_first_usage_and_count_them_all() {
        let of = json!({"apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource", "resourceRef": {"name": "db"}});
        let by = json!({"apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource", "resourceRef": {"name": "app"}});
        let a = usage(Some("team"), of.clone(), Some(by), None);
        let b = usage(Some("team"), of.clone(), None, Some("production data"));
        let used = nop("db", Some("team"), true);
        assert_eq!(
            deletion_refusal(&used, &[(&a, "*v1beta1.Usage"), (&b, "*v1beta1.Usage")]).unwrap(),
            r#"This resource is in-use by 2 usage(s), including the *v1beta1.Usage "u1" (in namespace "team") by resource NopResource/app."#
        );
        assert_eq!(
            deletion_refusal(&used, &[(&b, "*v1beta1.Usage")]).unwrap(),
            r#"This resource is in-use by 1 usage(s), including the *v1beta1.Usage "u1" (in namespace "team") with reason: "production data"."#
        );
        // Only labelled objects are checked; another namespace's object is not used.
        assert!(deletion_refusal(&nop("db", Some("team"), false), &[(&a, "*v1beta1.Usage")]).is_none());
        assert!(deletion_refusal(&nop("db", Some("other"), true), &[(&a, "*v1beta1.Usage")]).is_none());
        assert!(deletion_refusal(&nop("other", Some("team"), true), &[(&a, "*v1beta1.Usage")]).is_none());
    }

    #[test]
    fn an_unresolved_selector_protects_what_it_would_pick() {
        let mut used = nop("db", Some("team"), true);
        used["metadata"]["labels"]["role"] = json!("used");
        used["metadata"]["ownerReferences"] = json!([{"uid": "xr-1", "controller": true}]);
        let selector = |labels: Value, controller: bool| {
            json!({"apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource", "resourceSelector": {"matchLabels": labels, "matchControllerRef": controller}})
        };
        let mut pending = usage(Some("team"), selector(json!({"role": "used"}), true), None, None);
        pending["metadata"]["ownerReferences"] = json!([{"uid": "xr-1", "controller": true}]);
        assert!(protects(&pending, &used));
        assert!(!uses(&pending, &used), "not named yet");
        // Another controller, other labels, another namespace or kind: not picked.
        let mut foreign = pending.clone();
        foreign["metadata"]["ownerReferences"][0]["uid"] = json!("xr-2");
        assert!(!protects(&foreign, &used));
        assert!(protects(&usage(Some("team"), selector(json!({"role": "used"}), false), None, None), &used));
        assert!(!protects(&usage(Some("team"), selector(json!({"role": "using"}), false), None, None), &used));
        assert!(!protects(&usage(Some("other"), selector(json!({}), false), None, None), &used));
        let mut other_kind = usage(Some("team"), selector(json!({}), false), None, None);
        other_kind["spec"]["of"]["kind"] = json!("ClusterNopResource");
        assert!(!protects(&other_kind, &used));
        // Once resolved, only the named object counts.
        let mut resolved = pending.clone();
        resolved["spec"]["of"]["resourceRef"] = json!({"name": "other"});
        assert!(!protects(&resolved, &used));
        resolved["spec"]["of"]["resourceRef"] = json!({"name": "db"});
        assert!(protects(&resolved, &used));
    }

    #[test]
    fn details_read_like_crossplanes() {
        let of = json!({"apiVersion": "v1", "kind": "Instance", "resourceRef": {"name": "shared-db", "namespace": "databases"}});
        let by = json!({"apiVersion": "apps/v1", "kind": "Deployment", "resourceRef": {"name": "app"}});
        assert_eq!(details(&usage(Some("apps"), of.clone(), Some(by), None)), "Deployment/app uses Instance/shared-db in namespace databases");
        assert_eq!(details(&usage(None, of.clone(), None, Some("keep it"))), "keep it");
        assert_eq!(details(&usage(None, of, None, None)), "undefined");
    }
}
