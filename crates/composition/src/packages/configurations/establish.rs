//! Installing the objects a revision's package holds, as Crossplane's establisher does: an
//! active revision creates what is missing and takes control of what exists (owner
//! references: the revision as controller, the package beside it, so the garbage collector
//! removes an object once both are gone), an inactive one creates nothing and changes nothing
//! but adds a plain owner reference to what exists. `commonLabels` and `commonAnnotations` are merged into every object.

use oxplane_runtime::client::Kube;
use oxplane_runtime::kinds::Kind;
use oxplane_runtime::object;
use serde_json::{Map, Value, json};

/// The kind (with its plural) of an object a Configuration may install.
pub fn kind_of(object: &Value) -> Option<Kind> {
    let api_version = object.get("apiVersion")?.as_str()?;
    let (group, version) = api_version.split_once('/')?;
    let kind = object.get("kind")?.as_str()?;
    let plural = match (group, kind) {
        ("apiextensions.crossplane.io", "CompositeResourceDefinition") => "compositeresourcedefinitions",
        ("apiextensions.crossplane.io", "Composition") => "compositions",
        ("apiextensions.crossplane.io", "ManagedResourceActivationPolicy") => "managedresourceactivationpolicies",
        ("ops.crossplane.io", "Operation") => "operations",
        ("ops.crossplane.io", "CronOperation") => "cronoperations",
        ("ops.crossplane.io", "WatchOperation") => "watchoperations",
        _ => return None,
    };
    Some(Kind::new(group, version, kind, plural, false))
}

/// Merges `extra` string pairs into `metadata.<field>` (the object's own values win).
fn merge_into(object: &mut Value, field: &str, extra: Option<&Value>) {
    let Some(extra) = extra.and_then(Value::as_object).filter(|e| !e.is_empty()) else { return };
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else { return };
    let map = metadata.entry(field).or_insert_with(|| json!({}));
    if let Some(map) = map.as_object_mut() {
        for (key, value) in extra {
            map.entry(key.clone()).or_insert_with(|| value.clone());
        }
    }
}

/// What establishing found out about an object: its reference for `status.objectRefs`.
pub type ObjectRef = Value;

/// Installs (or, for an inactive revision, updates) one object; `Ok(None)` when an inactive
/// revision meets an object that does not exist (it creates nothing).
pub async fn establish(kube: &Kube, package: &Value, revision: &Value, sibling_revisions: &[String], desired: &Value, control: bool) -> Result<Option<ObjectRef>, String> {
    // Another writer (the XRD controller adding its finalizer) may update the object between
    // the read and the write: read again and retry rather than report a transient conflict.
    let mut attempts = 0;
    loop {
        match establish_once(kube, package, revision, sibling_revisions, desired, control).await {
            Err(Conflict::Conflict(_)) if attempts < 5 => attempts += 1,
            Err(Conflict::Conflict(message) | Conflict::Other(message)) => return Err(message),
            Ok(reference) => return Ok(reference),
        }
    }
}

/// A failed establish: a write conflict (worth a retry) or anything else.
enum Conflict {
    Conflict(String),
    Other(String),
}

impl From<String> for Conflict {
    fn from(message: String) -> Self {
        Conflict::Other(message)
    }
}

async fn establish_once(kube: &Kube, package: &Value, revision: &Value, sibling_revisions: &[String], desired: &Value, control: bool) -> Result<Option<ObjectRef>, Conflict> {
    let kind = kind_of(desired).ok_or_else(|| format!("a Configuration cannot install {}", describe(desired)))?;
    let name = object::name(desired).ok_or_else(|| format!("{} has no name", describe(desired)))?.to_string();
    let mut desired = desired.clone();
    if !desired.get("metadata").is_some_and(Value::is_object) {
        desired["metadata"] = json!({});
    }
    merge_into(&mut desired, "labels", revision.pointer("/spec/commonLabels"));
    merge_into(&mut desired, "annotations", revision.pointer("/spec/commonAnnotations"));
    let cannot = |e: oxplane_runtime::client::ApiError| {
        let message = format!("cannot establish control of object: {} {name}: {e}", kind.gvk.kind);
        if e.is_conflict() { Conflict::Conflict(message) } else { Conflict::Other(message) }
    };
    let existing = kube.get(&kind, None, &name).await.map_err(cannot)?;
    let saved = match existing {
        None if !control => return Ok(None),
        None => {
            desired["metadata"]["ownerReferences"] = json!([object::owner_reference(revision, true, true), object::owner_reference(package, false, true)]);
            kube.create(&kind, &desired).await.map_err(cannot)?
        }
        Some(existing) => {
            let mut references: Vec<Value> = existing.pointer("/metadata/ownerReferences").and_then(Value::as_array).cloned().unwrap_or_default();
            let revision_uid = object::uid(revision).unwrap_or_default();
            if control {
                // Another controller may hold it only if it is a revision of the same package
                // (an older one, being replaced); anyone else's object is not taken.
                for reference in &mut references {
                    let is_controller = reference.get("controller").and_then(Value::as_bool) == Some(true);
                    let uid = reference.get("uid").and_then(Value::as_str).unwrap_or_default();
                    if !is_controller || uid == revision_uid {
                        continue;
                    }
                    let owner = reference.get("name").and_then(Value::as_str).unwrap_or_default();
                    let owner_kind = reference.get("kind").and_then(Value::as_str).unwrap_or_default();
                    if owner_kind == "ConfigurationRevision" && sibling_revisions.iter().any(|s| s == owner) {
                        reference["controller"] = json!(false);
                    } else {
                        return Err(Conflict::Other(format!("cannot establish control of object: {} {name} is already controlled by {owner_kind} {owner}", kind.gvk.kind)));
                    }
                }
            }
            references.retain(|r| r.get("uid").and_then(Value::as_str) != Some(revision_uid));
            references.insert(0, object::owner_reference(revision, control, true));
            if !references.iter().any(|r| r.get("uid").and_then(Value::as_str) == object::uid(package)) {
                references.push(object::owner_reference(package, false, true));
            }
            let mut metadata: Map<String, Value> = existing.get("metadata").and_then(Value::as_object).cloned().unwrap_or_default();
            for field in ["labels", "annotations"].into_iter().filter(|_| control) {
                if let Some(values) = desired.pointer(&format!("/metadata/{field}")).and_then(Value::as_object) {
                    let map = metadata.entry(field).or_insert_with(|| json!({}));
                    if let Some(map) = map.as_object_mut() {
                        map.extend(values.clone());
                    }
                }
            }
            metadata.insert("ownerReferences".into(), Value::Array(references));
            // An inactive revision changes nothing of the object but its owner references.
            let mut updated = if control { desired.clone() } else { existing.clone() };
            updated["metadata"] = Value::Object(metadata);
            if updated == existing {
                existing
            } else {
                kube.replace(&kind, &updated).await.map_err(cannot)?
            }
        }
    };
    Ok(Some(json!({
        "apiVersion": kind.api_version(),
        "kind": kind.gvk.kind,
        "name": name,
        "uid": object::uid(&saved).unwrap_or_default(),
    })))
}

/// Flips a deactivated revision's controller reference on what it installed to a plain one
/// (Crossplane's release), so the next revision can take control.
pub async fn release(kube: &Kube, revision: &Value) -> Result<(), String> {
    let Some(uid) = object::uid(revision) else { return Ok(()) };
    for reference in revision.pointer("/status/objectRefs").and_then(Value::as_array).into_iter().flatten() {
        let Some(kind) = kind_of(reference) else { continue };
        let Some(name) = reference.get("name").and_then(Value::as_str) else { continue };
        let Some(mut existing) = kube.get(&kind, None, name).await.map_err(|e| format!("cannot release {} {name}: {e}", kind.gvk.kind))? else {
            continue;
        };
        let mut changed = false;
        if let Some(references) = existing.pointer_mut("/metadata/ownerReferences").and_then(Value::as_array_mut) {
            for reference in references.iter_mut().filter(|r| r.get("uid").and_then(Value::as_str) == Some(uid)) {
                if reference.get("controller").and_then(Value::as_bool) == Some(true) {
                    reference["controller"] = json!(false);
                    changed = true;
                }
            }
        }
        if changed {
            kube.replace(&kind, &existing).await.map_err(|e| format!("cannot release {} {name}: {e}", kind.gvk.kind))?;
        }
    }
    Ok(())
}

/// `Kind name` of an object, for messages.
fn describe(object: &Value) -> String {
    format!(
        "{} {:?} of {:?}",
        object.get("kind").and_then(Value::as_str).unwrap_or_default(),
        object::name(object).unwrap_or_default(),
        object.get("apiVersion").and_then(Value::as_str).unwrap_or_default()
    )
}

/// `status.objectRefs` order: descending by `<apiVersion>/<kind>/<name>`, as Crossplane sorts
/// them.
pub fn sort_refs(refs: &mut [ObjectRef]) {
    let key = |r: &Value| {
        ["apiVersion", "kind", "name"].map(|f| r.get(f).and_then(Value::as_str).unwrap_or_default().to_string()).join("/")
    };
    refs.sort_by_key(|r| std::cmp::Reverse(key(r)));
}
