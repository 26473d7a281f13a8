//! `metadata.managedFields` on every write: which field manager owns which fields. Creates,
//! updates and patches record `Update` ownership of what they change; server-side apply
//! computes its own (see `apply.rs`) and the result is stored as computed.
//!
//! A client may send `managedFields` itself (kubectl does, to move ownership from
//! `kubectl-client-side-apply` to `kubectl`): a non-empty list different from the stored one
//! replaces it, `[{}]` clears it, and anything that does not parse is ignored in favour of the
//! stored list, as Kubernetes does so that clients unaware of the field cannot wipe it.

use serde_json::Value;

use crate::apply::{self, ManagedFieldsEntry, Scope};
use crate::objects;
use crate::registry::ResourceDef;
use crate::status::{ApiError, Reason};

/// How a write's ownership is recorded.
#[derive(Clone, Copy, Debug)]
pub(super) enum Ownership<'a> {
    /// Record `Update` ownership for this manager.
    Record(&'a str),
    /// `managedFields` in the object are already right (server-side apply computed them).
    Computed,
}

/// Longest field manager name Kubernetes accepts.
const MAX_MANAGER: usize = 128;

/// Checks a field manager name.
pub(super) fn check_manager(manager: &str) -> Result<(), ApiError> {
    if manager.len() > MAX_MANAGER {
        return Err(ApiError::new(
            Reason::Invalid,
            format!("PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Too long: may not be longer than {MAX_MANAGER}"),
        ));
    }
    Ok(())
}

/// Which part of the object a write through `subresource` may own.
pub(super) fn scope(resource: &ResourceDef, subresource: Option<&str>) -> Scope {
    let has_status = resource.subresources.iter().any(|s| s == "status");
    match (has_status, subresource) {
        (false, _) => Scope::WholeObject,
        (true, Some("status")) => Scope::Status,
        (true, _) => Scope::Main,
    }
}

/// The stored entries, or none when they do not parse.
pub(super) fn entries_of(object: Option<&Value>) -> Vec<ManagedFieldsEntry> {
    object.and_then(|o| apply::parse_managed_fields(o).ok()).unwrap_or_default()
}

/// The entries a write starts from: the client's own list when it sent a different, valid,
/// non-empty one (`[{}]` meaning none), else the stored list.
fn base_entries(old: Option<&Value>, new: &Value) -> Vec<ManagedFieldsEntry> {
    let sent = new["metadata"].get("managedFields");
    let stored = old.and_then(|o| o["metadata"].get("managedFields"));
    match sent {
        Some(Value::Array(list)) if list.len() == 1 && list[0].as_object().is_some_and(|o| o.is_empty()) => Vec::new(),
        Some(list @ Value::Array(items)) if !items.is_empty() && Some(list) != stored => {
            apply::parse_managed_fields(new).unwrap_or_else(|_| entries_of(old))
        }
        _ => entries_of(old),
    }
}

/// Writes `entries` into the object's metadata (removing the field when there are none).
pub(super) fn store_entries(object: &mut Value, entries: &[ManagedFieldsEntry]) -> Result<(), ApiError> {
    let meta = objects::metadata_mut(object)?;
    if entries.is_empty() {
        meta.remove("managedFields");
    } else {
        meta.insert("managedFields".into(), apply::managed_fields_to_json(entries));
    }
    Ok(())
}

/// Records `manager`'s `Update` ownership of what changed from `old` (none for a create) to
/// `new` (both in the client's view).
pub(super) fn record_update(
    resource: &ResourceDef,
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    subresource: Option<&str>,
) -> Result<(), ApiError> {
    let base = base_entries(old, new);
    let types = resource.apply_types.root(resource);
    let entries = apply::update(
        old,
        new,
        &base,
        manager,
        &resource.api_version(),
        scope(resource, subresource),
        types.as_deref(),
        &objects::now_rfc3339(),
    );
    store_entries(new, &entries)
}
