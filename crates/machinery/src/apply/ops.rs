//! The two write operations: [`apply`] (server-side apply: conflicts, force, merge, removal
//! of dropped fields, ownership) and [`update`] (ownership bookkeeping for every other write).

use serde_json::{Map, Value};

use super::conflict::{Conflict, Conflicts};
use super::extract::{
    diff_root, field_set_of_scoped, present_set_of, restrict_to_scope, validate_config,
};
use super::managed::{ManagedFieldsEntry, Operation, normalize, trim};
use super::merge::{merge_root, remove_fields};
use super::path::path_string;
use super::types::TypeNode;
use super::{ApplyError, Scope};

/// The outcome of a successful apply.
#[derive(Clone, Debug, PartialEq)]
pub struct Applied {
    /// The merged object. Server-owned metadata is live's; `metadata.managedFields` is left as
    /// it was in live: the caller writes `managed` back.
    pub object: Value,
    /// The new managedFields entries.
    pub managed: Vec<ManagedFieldsEntry>,
}

/// Server-side apply of `config` by `manager`.
///
/// 1. The config is validated (object; well-formed map/set lists, else
///    [`ApplyError::InvalidListMapItem`] and friends) and its field set taken.
/// 2. It is merged into `live` (or `{}` when absent: create-if-absent).
/// 3. Conflicts: every field another entry owns (any manager, operation or subresource other
///    than this manager's own Apply entry for `scope`) whose value the merge changes — a
///    different leaf value, an added/removed item, or a node replaced by one of another kind.
///    Equal values are shared, not conflicts; claims on fields live lacks are ignored (and
///    later trimmed). Without `force` they are returned as
///    [`ApplyError::Conflicts`] and nothing changes; with `force` the other entries lose them.
/// 4. Fields this manager applied last time but not now are removed from the object unless
///    some other entry (or the new config) still owns them or something beneath them.
/// 5. This manager's Apply entry becomes the config's fields (time `now`); every entry is
///    trimmed to the nodes present in the result and dropped when empty. Existing entries keep
///    their order; a new entry is appended.
#[allow(clippy::too_many_arguments)] // the server-facing signature is fixed
pub fn apply<T: TypeNode>(
    live: Option<&Value>,
    managed: &[ManagedFieldsEntry],
    config: &Value,
    manager: &str,
    api_version: &str,
    force: bool,
    scope: Scope,
    types: Option<&T>,
    now: &str,
) -> Result<Applied, ApplyError> {
    validate_config(config, scope, types)?;
    let empty = Value::Object(Map::new());
    let live = match live {
        Some(v @ Value::Object(_)) => v,
        Some(_) => {
            return Err(ApplyError::NotAnObject {
                what: "the live object".into(),
            });
        }
        None => &empty,
    };
    let subresource = scope.subresource();
    let config_set = field_set_of_scoped(config, scope, types);
    let mut object = merge_root(live, config, scope, types);

    // What the merge changes: changed/added nodes plus nodes it made disappear (a subtree
    // replaced by a value of another kind, or an atomic value replaced whole).
    let live_present = present_set_of(live, types);
    let merged_present = present_set_of(&object, types);
    let changed = diff_root(live, &object, Scope::WholeObject, types)
        .take
        .union(&live_present.difference(&merged_present));

    // Stale claims on fields live does not have must not turn into conflicts.
    let mut entries = normalize(managed);
    for e in &mut entries {
        e.fields = e.fields.intersection(&live_present);
    }
    let is_self = |e: &ManagedFieldsEntry| e.is_for(manager, Operation::Apply, subresource);
    let mut conflicts = Vec::new();
    for e in entries.iter().filter(|e| !is_self(e)) {
        for path in e.fields.intersection(&changed).paths() {
            conflicts.push(Conflict {
                manager: e.manager.clone(),
                operation: e.operation,
                api_version: e.api_version.clone(),
                subresource: e.subresource.clone(),
                path: path_string(&path),
            });
        }
    }
    if !conflicts.is_empty() {
        if !force {
            return Err(ApplyError::Conflicts(Conflicts(conflicts)));
        }
        for e in entries.iter_mut().filter(|e| !is_self(e)) {
            e.fields = e.fields.difference(&changed);
        }
    }

    // Remove what this manager dropped from its configuration, unless someone else (after
    // forcing) or the new configuration still claims it.
    let previous = entries
        .iter()
        .find(|e| is_self(e))
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    let to_remove = previous.difference(&config_set);
    if !to_remove.is_empty() {
        let protected = entries
            .iter()
            .filter(|e| !is_self(e))
            .fold(config_set.clone(), |acc, e| acc.union(&e.fields));
        remove_fields(&mut object, &to_remove, &protected, types);
    }

    match entries.iter_mut().find(|e| is_self(e)) {
        Some(e) => {
            e.fields = config_set;
            e.api_version = api_version.to_string();
            e.time = Some(now.to_string());
        }
        None => entries.push(ManagedFieldsEntry {
            manager: manager.to_string(),
            operation: Operation::Apply,
            api_version: api_version.to_string(),
            time: Some(now.to_string()),
            fields: config_set,
            subresource: subresource.map(str::to_string),
        }),
    }
    let managed = trim(entries, &present_set_of(&object, types));
    Ok(Applied { object, managed })
}

/// Ownership bookkeeping for a non-apply write (create with `old` None, update, patch) by
/// `manager`, returning the new managedFields entries. Non-object values count as empty.
///
/// Fields the write added or changed within `scope` (a created map or list item includes its
/// `.` member; a struct, per [`TypeNode::is_struct`], does not) join this manager's Update
/// entry and leave every other entry: an Update takes ownership silently. Fields no longer
/// in `new` leave every entry. Unchanged fields keep their owners. The writer's entry gets
/// time `now` only when its set changed or it is new; entries left empty are dropped.
#[allow(clippy::too_many_arguments)] // the server-facing signature is fixed
pub fn update<T: TypeNode>(
    old: Option<&Value>,
    new: &Value,
    managed: &[ManagedFieldsEntry],
    manager: &str,
    api_version: &str,
    scope: Scope,
    types: Option<&T>,
    now: &str,
) -> Vec<ManagedFieldsEntry> {
    let empty = Value::Object(Map::new());
    // Changes anywhere end the old owners' claims (even out of scope, should a caller not
    // have reset them), but the writer only comes to own what is in its scope.
    let diff = diff_root(old.unwrap_or(&empty), new, Scope::WholeObject, types);
    let own = restrict_to_scope(&diff.own, scope);
    let subresource = scope.subresource();
    let mut entries = normalize(managed);
    let is_self = |e: &ManagedFieldsEntry| e.is_for(manager, Operation::Update, subresource);
    for e in entries.iter_mut().filter(|e| !is_self(e)) {
        e.fields = e.fields.difference(&diff.take);
    }
    let present = present_set_of(new, types);
    let own = own.intersection(&present);
    match entries.iter_mut().find(|e| is_self(e)) {
        Some(e) => {
            let fields = e.fields.union(&own).intersection(&present);
            if fields != e.fields {
                e.fields = fields;
                e.time = Some(now.to_string());
            }
            e.api_version = api_version.to_string();
        }
        None if !own.is_empty() => entries.push(ManagedFieldsEntry {
            manager: manager.to_string(),
            operation: Operation::Update,
            api_version: api_version.to_string(),
            time: Some(now.to_string()),
            fields: own,
            subresource: subresource.map(str::to_string),
        }),
        None => {}
    }
    trim(entries, &present)
}
