//! Plans: what applying a composite resource (or a claim) would do, computed by the XR
//! controller's own steps with nothing written. The object is server-side applied in dry run
//! (so defaults and merging are the server's), its Composition and revision selected, its
//! composed resources observed, the function pipeline run, each desired resource rendered
//! with the composer's metadata and applied in dry run; the plan lists what would be created,
//! changed (field by field) and deleted, and the plans of nested composites.

use oxplane_runtime::Runtime;
use oxplane_runtime::kinds::{Gvk, Kind};
use oxplane_runtime::object::ObjectKey;
use oxplane_runtime::object;
use serde_json::{Value, json};

use super::compose::{self, LABEL_CLAIM_NAME, LABEL_CLAIM_NAMESPACE, LABEL_COMPOSITE};
use super::pipeline;
use super::reconciler::{observe, steps_of};
use super::select;
use super::shape::XrType;
use crate::packages::FunctionRegistry;
use crate::xrd::controller::xrd_kind;

/// How deep nested composites are planned.
pub const MAX_NESTING: usize = 8;

/// The field manager a planned composite is applied with (in dry run only).
pub const PLAN_MANAGER: &str = "oxplane-diff";

/// Why no plan could be made at all (a plan of an object whose composition fails is a plan
/// with an error, not this).
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The object is not a composite resource or claim any XRD defines.
    #[error("{0}")]
    NotComposite(String),
    /// The server refused the object.
    #[error("{0}")]
    Refused(String),
}

/// What would happen to one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// It would be created.
    Create,
    /// It would change.
    Update,
    /// It would be deleted.
    Delete,
    /// Nothing would change.
    Unchanged,
}

impl Action {
    /// `create`, `update`, `delete`, `unchanged`.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Create => "create",
            Action::Update => "update",
            Action::Delete => "delete",
            Action::Unchanged => "unchanged",
        }
    }
}

/// Plans `object`, a composite resource or a claim, as JSON: `{apiVersion, kind, name,
/// namespace, action, changes, error?, resources: [...]}`, each composed resource with its
/// `resourceName` and, when it is a composite itself, its own `resources`.
pub async fn plan(runtime: &Runtime, functions: &FunctionRegistry, object: &Value) -> Result<Value, PlanError> {
    let gvk = Gvk::of(object).ok_or_else(|| PlanError::NotComposite("the object has no apiVersion or kind".into()))?;
    if object::name(object).is_none_or(str::is_empty) {
        return Err(PlanError::NotComposite("the object has no metadata.name".into()));
    }
    let types = xr_types(runtime).await?;
    if let Some(xr_type) = types.iter().find(|t| same_kind(&t.kind, &gvk)) {
        return Ok(plan_composite(runtime, functions, &types, xr_type, object, 0).await?.to_json());
    }
    if let Some(xr_type) = types.iter().find(|t| t.claim.as_ref().is_some_and(|c| same_kind(c, &gvk))) {
        return plan_claim(runtime, functions, &types, xr_type, object).await.map(|p| p.to_json());
    }
    Err(PlanError::NotComposite(format!(
        "no CompositeResourceDefinition defines {} {}: a plan is made for composite resources and claims",
        gvk.api_version(),
        gvk.kind
    )))
}

fn same_kind(kind: &Kind, gvk: &Gvk) -> bool {
    kind.gvk.group == gvk.group && kind.gvk.kind == gvk.kind
}

/// The composite types of every XRD.
async fn xr_types(runtime: &Runtime) -> Result<Vec<XrType>, PlanError> {
    let xrds = runtime.kube.list(&xrd_kind(), None, None).await.map_err(|e| PlanError::Refused(format!("cannot list CompositeResourceDefinitions: {e}")))?;
    Ok(xrds.iter().filter_map(XrType::of).collect())
}

/// One object of a plan.
#[derive(Debug, Clone)]
struct Planned {
    resource_name: Option<String>,
    object: Value,
    action: Action,
    changes: Vec<Change>,
    error: Option<String>,
    resources: Vec<Planned>,
}

impl Planned {
    fn new(object: &Value, action: Action) -> Self {
        Planned { resource_name: None, object: object.clone(), action, changes: Vec::new(), error: None, resources: Vec::new() }
    }

    /// `after` planned against what exists now (`None`: nothing, so it would be created).
    fn against(before: Option<&Value>, after: &Value) -> Self {
        let Some(before) = before else { return Planned::new(after, Action::Create) };
        let changes = changes(before, after);
        let action = if changes.is_empty() { Action::Unchanged } else { Action::Update };
        Planned { changes, ..Planned::new(after, action) }
    }

    fn to_json(&self) -> Value {
        let mut out = json!({
            "apiVersion": self.object.get("apiVersion"),
            "kind": self.object.get("kind"),
            "name": object::name(&self.object).unwrap_or_default(),
            "action": self.action.as_str(),
            "changes": self.changes.iter().map(Change::to_json).collect::<Vec<_>>(),
        });
        if let Some(namespace) = object::namespace(&self.object).filter(|n| !n.is_empty()) {
            out["namespace"] = json!(namespace);
        }
        if let Some(generate_name) = self.object.pointer("/metadata/generateName").and_then(Value::as_str) {
            out["generateName"] = json!(generate_name);
        }
        if let Some(name) = &self.resource_name {
            out["resourceName"] = json!(name);
        }
        if let Some(error) = &self.error {
            out["error"] = json!(error);
        }
        if !self.resources.is_empty() {
            out["resources"] = Value::Array(self.resources.iter().map(Planned::to_json).collect());
        }
        out
    }
}

/// One changed field: its path, and its value before and after (absent: not set).
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// `spec.forProvider.fields.size`, `spec.items[2]`.
    pub path: String,
    /// The value now.
    pub from: Option<Value>,
    /// The value the plan would leave.
    pub to: Option<Value>,
}

impl Change {
    fn to_json(&self) -> Value {
        let mut out = json!({"path": self.path});
        if let Some(from) = &self.from {
            out["from"] = from.clone();
        }
        if let Some(to) = &self.to {
            out["to"] = to.clone();
        }
        out
    }
}

/// Metadata the server owns: never a change a user makes.
const SERVER_METADATA: [&str; 7] = ["managedFields", "resourceVersion", "generation", "creationTimestamp", "uid", "selfLink", "deletionTimestamp"];

/// The fields that differ between `before` and `after`, status and server-owned metadata aside:
/// objects compared key by key, lists of the same length item by item.
pub fn changes(before: &Value, after: &Value) -> Vec<Change> {
    let strip = |object: &Value| {
        let mut object = object.clone();
        if let Some(map) = object.as_object_mut() {
            map.remove("status");
            if let Some(metadata) = map.get_mut("metadata").and_then(Value::as_object_mut) {
                for field in SERVER_METADATA {
                    metadata.remove(field);
                }
            }
        }
        object
    };
    let mut out = Vec::new();
    diff_into(&mut out, "", Some(&strip(before)), Some(&strip(after)));
    out
}

fn diff_into(out: &mut Vec<Change>, path: &str, before: Option<&Value>, after: Option<&Value>) {
    match (before, after) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                let child = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                diff_into(out, &child, a.get(key), b.get(key));
            }
        }
        (Some(Value::Array(a)), Some(Value::Array(b))) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                diff_into(out, &format!("{path}[{i}]"), Some(x), Some(y));
            }
        }
        (a, b) if a != b => out.push(Change { path: path.to_string(), from: a.cloned(), to: b.cloned() }),
        _ => {}
    }
}

/// Plans a claim: the claim itself, and the composite it is (or would be) bound to.
async fn plan_claim(runtime: &Runtime, functions: &FunctionRegistry, types: &[XrType], xr_type: &XrType, claim: &Value) -> Result<Planned, PlanError> {
    let Some(claim_kind) = xr_type.claim.clone() else { return Err(PlanError::NotComposite("the XRD offers no claim".into())) };
    let claim_kind = with_version(&claim_kind, claim);
    let (namespace, name) = (object::namespace(claim).unwrap_or("default").to_string(), object::name(claim).unwrap_or_default().to_string());
    let mut claim = claim.clone();
    claim["metadata"]["namespace"] = json!(namespace);
    let existing = runtime.kube.get(&claim_kind, Some(&namespace), &name).await.map_err(|e| PlanError::Refused(e.to_string()))?;
    let after = runtime.kube.apply_dry_run(&claim_kind, &claim, PLAN_MANAGER, true).await.map_err(|e| PlanError::Refused(e.to_string()))?;
    let mut planned = Planned::against(existing.as_ref(), &after);
    // The composite the claim is bound to, or the one it would get.
    let bound = after.pointer("/spec/resourceRef/name").and_then(Value::as_str).map(str::to_string);
    let xr_name = bound.unwrap_or_else(|| format!("{name}-{}", &super::names::composed_name("", object::uid(&after).unwrap_or(&name), "claim")[1..6]));
    let mut spec = after.get("spec").cloned().unwrap_or_else(|| json!({}));
    if let Some(map) = spec.as_object_mut() {
        for claim_only in ["compositeDeletePolicy", "resourceRef", "writeConnectionSecretToRef"] {
            map.remove(claim_only);
        }
        map.insert("claimRef".into(), json!({"apiVersion": after.get("apiVersion"), "kind": after.get("kind"), "name": name, "namespace": namespace}));
    }
    let xr = json!({
        "apiVersion": xr_type.kind.api_version(),
        "kind": xr_type.kind.gvk.kind,
        "metadata": {"name": xr_name, "labels": {LABEL_CLAIM_NAME: name, LABEL_CLAIM_NAMESPACE: namespace}},
        "spec": spec,
    });
    planned.resources.push(plan_composite(runtime, functions, types, xr_type, &xr, 0).await?);
    Ok(planned)
}

/// The kind with the object's own version (the server converts between served versions).
fn with_version(kind: &Kind, object: &Value) -> Kind {
    let version = Gvk::of(object).map(|g| g.version).unwrap_or_else(|| kind.gvk.version.clone());
    Kind::new(&kind.gvk.group, &version, &kind.gvk.kind, &kind.plural, kind.namespaced)
}

/// Plans a composite: its own change, then what composing it would do.
async fn plan_composite(
    runtime: &Runtime,
    functions: &FunctionRegistry,
    types: &[XrType],
    xr_type: &XrType,
    input: &Value,
    depth: usize,
) -> Result<Planned, PlanError> {
    let kind = with_version(&xr_type.kind, input);
    let namespace = object::namespace(input).map(str::to_string);
    let name = object::name(input).unwrap_or_default().to_string();
    let existing = runtime.kube.get(&kind, namespace.as_deref(), &name).await.map_err(|e| PlanError::Refused(e.to_string()))?;
    let after = runtime.kube.apply_dry_run(&kind, input, PLAN_MANAGER, true).await.map_err(|e| PlanError::Refused(format!("{} {name:?}: {e}", kind.gvk.kind)))?;
    let mut planned = Planned::against(existing.as_ref(), &after);
    if depth >= MAX_NESTING {
        planned.error = Some(format!("composites nested deeper than {MAX_NESTING} are not planned"));
        return Ok(planned);
    }
    // The XR as its controller would see it: the stored status, the applied spec.
    let mut xr = after.clone();
    if let Some(status) = existing.as_ref().and_then(|e| e.get("status")) {
        xr["status"] = status.clone();
    }
    match compose_plan(runtime, functions, types, xr_type, &mut xr, existing.is_none(), depth).await {
        Ok(resources) => planned.resources = resources,
        Err(error) => planned.error = Some(error),
    }
    Ok(planned)
}

/// What composing `xr` would do to its composed resources.
async fn compose_plan(
    runtime: &Runtime,
    functions: &FunctionRegistry,
    types: &[XrType],
    xr_type: &XrType,
    xr: &mut Value,
    new: bool,
    depth: usize,
) -> Result<Vec<Planned>, String> {
    if object::label(xr, LABEL_COMPOSITE).is_none() {
        let name = object::name(xr).unwrap_or_default().to_string();
        object::set_label(xr, LABEL_COMPOSITE, &name);
    }
    let merge = |xr: &mut Value, selected: select::Selected| *xr = merged(xr, &xr_type.patch(selected.patch));
    if let Some(selected) = select::composition(runtime, xr_type, xr).await.map_err(|e| format!("cannot select Composition: {e}"))? {
        merge(xr, selected);
    }
    if let Some(selected) = select::revision_selector_default(xr_type, xr) {
        merge(xr, selected);
    }
    let composition = xr_type.name_of(xr, "compositionRef").ok_or("cannot select Composition: no Composition selected")?;
    let (revision, change) = select::revision(runtime, xr_type, xr, &composition).await.map_err(|e| format!("cannot fetch Composition: {e}"))?;
    if let Some(selected) = change {
        merge(xr, selected);
    }
    let steps = steps_of(&revision).map_err(|e| format!("cannot compose resources: {e}"))?;
    let nothing_cached = |_: &Gvk, _: &ObjectKey| None;
    let (observed, observed_objects) = observe(runtime, xr_type, xr, &nothing_cached).await.map_err(|e| format!("cannot compose resources: {e}"))?;
    let env = pipeline::Live { runtime, functions, of: pipeline::PipelineOf::Composition };
    let outcome = pipeline::run(&env, &steps, observed, json!({})).await.map_err(|e| format!("cannot compose resources: {e}"))?;
    if let Some(fatal) = outcome.fatal {
        return Err(format!("cannot compose resources: {fatal}"));
    }
    let mut planned = Vec::new();
    let xr_snapshot = xr.clone();
    for (resource_name, desired) in &outcome.desired.resources {
        let observed = observed_objects.get(resource_name);
        let rendered = compose::render(runtime, &xr_snapshot, xr_type.kind.namespaced, resource_name, &desired.resource, observed)
            .await
            .map_err(|e| format!("cannot compose resources: {e}"))?;
        let manager = compose::composed_manager(object::name(&xr_snapshot).unwrap_or_default(), &rendered.kind);
        let nested = types.iter().find(|t| same_kind(&t.kind, &rendered.kind.gvk));
        let mut one = match nested {
            // A nested composite is planned as a composite, with what it composes.
            Some(nested) => match Box::pin(plan_composite(runtime, functions, types, nested, &rendered.object, depth + 1)).await {
                Ok(one) => one,
                Err(error) => Planned { error: Some(error.to_string()), ..Planned::new(&rendered.object, if observed.is_some() { Action::Update } else { Action::Create }) },
            },
            None => match runtime.kube.apply_dry_run(&rendered.kind, &rendered.object, &manager, true).await {
                Ok(after) => Planned::against(observed, &after),
                Err(error) => Planned {
                    error: Some(format!("cannot apply composed resource {resource_name:?}: {error}")),
                    ..Planned::new(&rendered.object, if observed.is_some() { Action::Update } else { Action::Create })
                },
            },
        };
        if new && one.action == Action::Create {
            // A composite that does not exist yet has no uid its resources' names derive from.
            strip_name(&mut one.object);
        }
        one.resource_name = Some(resource_name.clone());
        planned.push(one);
    }
    for (resource_name, composed) in &observed_objects {
        if !outcome.desired.resources.contains_key(resource_name) {
            planned.push(Planned { resource_name: Some(resource_name.clone()), ..Planned::new(composed, Action::Delete) });
        }
    }
    Ok(planned)
}

fn strip_name(object: &mut Value) {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("name");
    }
}

/// `patch` merged into `target` (RFC 7386).
fn merged(target: &Value, patch: &Value) -> Value {
    oxplane_machinery::patch::merge::apply(target, patch)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn changes_are_field_paths_with_before_and_after() {
        let before = json!({"apiVersion": "v1", "metadata": {"name": "a", "resourceVersion": "5", "labels": {"x": "1"}},
            "spec": {"size": "small", "items": [1, 2], "tags": ["a"], "gone": true}, "status": {"ready": true}});
        let after = json!({"apiVersion": "v1", "metadata": {"name": "a", "resourceVersion": "9", "labels": {"x": "1", "y": "2"}},
            "spec": {"size": "large", "items": [1, 3], "tags": ["a", "b"]}, "status": {"ready": false}});
        let found = changes(&before, &after);
        let paths: Vec<&str> = found.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(paths, ["metadata.labels.y", "spec.gone", "spec.items[1]", "spec.size", "spec.tags"]);
        assert_eq!(found[0], Change { path: "metadata.labels.y".into(), from: None, to: Some(json!("2")) });
        assert_eq!(found[1].to, None);
        assert_eq!(found[3], Change { path: "spec.size".into(), from: Some(json!("small")), to: Some(json!("large")) });
        assert!(changes(&before, &before).is_empty());
    }
}
