//! From what the pipeline desires to what the cluster holds: the metadata every composed
//! resource carries (deterministic name, composite and claim labels, the
//! `crossplane.io/composition-resource-name` annotation, the controller owner reference), the
//! namespace rules of namespaced composites, and the deletion of composed resources no longer
//! desired.

use oxplane_machinery::names::is_dns1123_subdomain;
use oxplane_runtime::Runtime;
use oxplane_runtime::client::{ApiError, DeleteOptions};
use oxplane_runtime::kinds::{Gvk, Kind, KindError};
use oxplane_runtime::object;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::names::composed_name;

/// `crossplane.io/composite`.
pub const LABEL_COMPOSITE: &str = "crossplane.io/composite";
/// `crossplane.io/claim-name`.
pub const LABEL_CLAIM_NAME: &str = "crossplane.io/claim-name";
/// `crossplane.io/claim-namespace`.
pub const LABEL_CLAIM_NAMESPACE: &str = "crossplane.io/claim-namespace";
/// `crossplane.io/composition-resource-name`.
pub const ANNOTATION_RESOURCE_NAME: &str = "crossplane.io/composition-resource-name";
/// The field manager of composite-level writes (resource references, status).
pub const MANAGER_COMPOSITE: &str = "apiextensions.crossplane.io/composite";

/// The field manager composed resources of one composite are applied with:
/// `apiextensions.crossplane.io/composed/<hex sha256(name + GroupKind)>`.
pub fn composed_manager(xr_name: &str, kind: &Kind) -> String {
    let group_kind = if kind.gvk.group.is_empty() { kind.gvk.kind.clone() } else { format!("{}.{}", kind.gvk.kind, kind.gvk.group) };
    let digest = Sha256::digest(format!("{xr_name}{group_kind}").as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("apiextensions.crossplane.io/composed/{hex}")
}

/// A composed resource ready to apply.
pub struct Rendered {
    /// Its composition resource name.
    pub resource_name: String,
    /// Its kind.
    pub kind: Kind,
    /// The object to apply.
    pub object: Value,
    /// A warning to record (a namespace the function asked for was overridden).
    pub warning: Option<String>,
}

/// Renders one desired composed resource of `xr` (whose kind is namespaced or not as
/// `xr_namespaced` says). `observed` is the composed resource as it exists, if it does.
pub async fn render(
    runtime: &Runtime,
    xr: &Value,
    xr_namespaced: bool,
    resource_name: &str,
    desired: &Value,
    observed: Option<&Value>,
) -> Result<Rendered, String> {
    let mut object = desired.clone();
    if !object.is_object() {
        return Err(format!("desired composed resource {resource_name:?} is not an object"));
    }
    let gvk = Gvk::of(&object).ok_or_else(|| format!("desired composed resource {resource_name:?} has no apiVersion or kind"))?;
    let kind = runtime.watches.kinds().resolve(&gvk).await.map_err(|error| match error {
        KindError::NotServed { .. } => format!("cannot compose resource {resource_name:?}: {error}"),
        other => format!("cannot compose resource {resource_name:?}: {other}"),
    })?;
    // Only metadata and spec of a composed resource are the function's to say.
    if let Some(map) = object.as_object_mut() {
        map.remove("status");
        if let Some(metadata) = map.get_mut("metadata").and_then(Value::as_object_mut) {
            for server_owned in ["uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "deletionTimestamp", "selfLink"] {
                metadata.remove(server_owned);
            }
        }
    }
    let xr_name = object::name(xr).unwrap_or_default();
    let xr_uid = object::uid(xr).unwrap_or_default();
    let prefix = object::label(xr, LABEL_COMPOSITE).unwrap_or(xr_name).to_string();
    if let Some(observed) = observed {
        for field in ["name", "namespace", "generateName"] {
            match observed.pointer(&format!("/metadata/{field}")) {
                Some(value) => set_metadata(&mut object, field, value.clone()),
                None => remove_metadata(&mut object, field),
            }
        }
    }
    let mut warning = None;
    if xr_namespaced {
        let xr_namespace = object::namespace(xr).unwrap_or_default().to_string();
        match object::namespace(&object).map(str::to_string) {
            None if !kind.namespaced => {
                return Err(format!(
                    "cannot apply cluster scoped composed resource {resource_name:?} ({}) for a namespaced composite resource.",
                    kind.gvk
                ));
            }
            Some(other) if other != xr_namespace => {
                warning = Some(format!(
                    "composed resource {resource_name:?} asked for namespace {other:?}; a namespaced composite resource composes only in its own namespace {xr_namespace:?}"
                ));
            }
            _ => {}
        }
        set_metadata(&mut object, "namespace", json!(xr_namespace));
    }
    if !kind.namespaced {
        remove_metadata(&mut object, "namespace");
    }
    set_metadata(&mut object, "generateName", json!(format!("{prefix}-")));
    object::set_label(&mut object, LABEL_COMPOSITE, &prefix);
    if let (Some(claim), Some(claim_namespace)) = (object::label(xr, LABEL_CLAIM_NAME), object::label(xr, LABEL_CLAIM_NAMESPACE)) {
        let (claim, claim_namespace) = (claim.to_string(), claim_namespace.to_string());
        object::set_label(&mut object, LABEL_CLAIM_NAME, &claim);
        object::set_label(&mut object, LABEL_CLAIM_NAMESPACE, &claim_namespace);
    }
    object::set_annotation(&mut object, ANNOTATION_RESOURCE_NAME, resource_name);
    if object::name(&object).is_none_or(str::is_empty) {
        set_metadata(&mut object, "name", json!(composed_name(&prefix, xr_uid, resource_name)));
    }
    let name = object::name(&object).unwrap_or_default().to_string();
    if !is_dns1123_subdomain(&name) {
        return Err(format!(
            "cannot apply composed resource {resource_name:?} because it has an invalid name {name:?}: it must be a lowercase RFC 1123 subdomain"
        ));
    }
    if let Some(existing) = observed.and_then(object::controller_ref)
        && existing.get("uid").and_then(Value::as_str) != Some(xr_uid)
    {
        return Err(format!("cannot apply composed resource {resource_name:?}: it is controlled by another object"));
    }
    // The controller reference replaces any other controller reference the desired state has.
    let mut owners: Vec<Value> = object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r.get("controller").and_then(Value::as_bool) != Some(true) && r.get("uid").and_then(Value::as_str) != Some(xr_uid))
        .collect();
    owners.push(object::owner_reference(xr, true, true));
    set_metadata(&mut object, "ownerReferences", Value::Array(owners));
    Ok(Rendered { resource_name: resource_name.to_string(), kind, object, warning })
}

fn set_metadata(object: &mut Value, field: &str, value: Value) {
    if let Some(root) = object.as_object_mut() {
        let metadata = root.entry("metadata").or_insert_with(|| json!({}));
        if !metadata.is_object() {
            *metadata = json!({});
        }
        metadata[field] = value;
    }
}

fn remove_metadata(object: &mut Value, field: &str) {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove(field);
    }
}

/// Why a composed resource could not be garbage-collected.
#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    /// Another object controls it.
    #[error("refusing to delete composed resource {name:?} that is controlled by {kind} {owner:?}")]
    ControlledByOther {
        /// The composed resource.
        name: String,
        /// The controller's kind.
        kind: String,
        /// The controller's name.
        owner: String,
    },
    /// The API refused.
    #[error("cannot delete composed resource {name:?}: {error}")]
    Api {
        /// The composed resource.
        name: String,
        /// Why.
        error: ApiError,
    },
}

/// Deletes a composed resource the composite no longer desires: resources without a
/// controller are left alone; the composite's labels are removed and the cause
/// (`oxplane.io/deletion-cause: decomposed`) is recorded first, then it is deleted in the
/// foreground, only if it is still the same object (uid precondition).
pub async fn collect(runtime: &Runtime, xr: &Value, kind: &Kind, composed: &Value) -> Result<(), CollectError> {
    let name = object::name(composed).unwrap_or_default().to_string();
    let Some(controller) = object::controller_ref(composed) else { return Ok(()) };
    if controller.get("uid").and_then(Value::as_str) != object::uid(xr) {
        return Err(CollectError::ControlledByOther {
            name,
            kind: controller.get("kind").and_then(Value::as_str).unwrap_or_default().to_string(),
            owner: controller.get("name").and_then(Value::as_str).unwrap_or_default().to_string(),
        });
    }
    let namespace = object::namespace(composed).map(str::to_string);
    let api = |error| CollectError::Api { name: name.clone(), error };
    let mut stripped = composed.clone();
    let mut changed = false;
    for label in [LABEL_COMPOSITE, LABEL_CLAIM_NAME, LABEL_CLAIM_NAMESPACE] {
        changed |= object::remove_label(&mut stripped, label);
    }
    // Why it goes is written down before it goes (a Usage lets go at once when decomposed).
    if object::annotation(&stripped, crate::usage::ANNOTATION_DELETION_CAUSE) != Some(crate::usage::CAUSE_DECOMPOSED) {
        object::set_annotation(&mut stripped, crate::usage::ANNOTATION_DELETION_CAUSE, crate::usage::CAUSE_DECOMPOSED);
        changed = true;
    }
    if changed && !object::is_deleting(composed) {
        match runtime.kube.replace(kind, &stripped).await {
            Ok(_) => {}
            Err(error) if error.is_not_found() => return Ok(()),
            Err(error) => return Err(api(error)),
        }
    }
    let options = DeleteOptions { propagation: Some("Foreground".into()), uid: object::uid(composed).map(str::to_string), resource_version: None };
    match runtime.kube.delete(kind, namespace.as_deref(), &name, &options).await {
        Ok(_) => Ok(()),
        Err(error) if error.code == 409 => Ok(()),
        Err(error) => Err(api(error)),
    }
}
