//! DELETE: preconditions, the propagation policy turned into the garbage collector's
//! finalizers, and graceful deletion: an object held by finalizers gets a `deletionTimestamp`
//! and stays until the last one is removed; an object held by nothing leaves the store at once.

use oxplane_store::{Write, WriteResult};
use serde_json::{Value, json};

use super::admission::{AdmissionRequest, Operation};
use super::prepare::is_crd;
use super::update::removed;
use super::{ObjectTarget, lifecycle};
use crate::objects;
use crate::registry::ResourceDef;
use crate::state::{AppState, store_error};
use crate::status::{ApiError, Reason};

/// What happens to an object's dependents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Propagation {
    /// The owner goes now; the garbage collector deletes dependents afterwards.
    Background,
    /// Dependents that block owner deletion go first (the `foregroundDeletion` finalizer).
    Foreground,
    /// Dependents stay, with this owner removed from them (the `orphan` finalizer).
    Orphan,
}

impl Propagation {
    /// The policy's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Propagation::Background => "Background",
            Propagation::Foreground => "Foreground",
            Propagation::Orphan => "Orphan",
        }
    }

    /// Parses `propagationPolicy`.
    pub fn parse(value: &str) -> Result<Propagation, ApiError> {
        match value {
            "Background" => Ok(Propagation::Background),
            "Foreground" => Ok(Propagation::Foreground),
            "Orphan" => Ok(Propagation::Orphan),
            other => Err(ApiError::bad_request(format!(
                "propagationPolicy: Unsupported value: \"{other}\": supported values: \"Foreground\", \"Background\", \"Orphan\""
            ))),
        }
    }
}

/// `DeleteOptions`, from the request body and query.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    /// The propagation policy asked for (`None`: keep what the object has, else Background).
    pub propagation: Option<Propagation>,
    /// `preconditions.uid`.
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub resource_version: Option<String>,
    /// `dryRun=All`.
    pub dry_run: bool,
    /// Who asks; `None` for the server's own deletes.
    pub user: Option<crate::authn::UserInfo>,
}

impl DeleteOptions {
    /// Reads a `DeleteOptions` body (may be empty) and the query's `propagationPolicy`,
    /// `orphanDependents` and `dryRun`; the body wins where both speak.
    pub fn parse(body: &[u8], query_propagation: Option<&str>, query_orphan: Option<bool>, query_dry_run: Option<&str>) -> Result<Self, ApiError> {
        let mut options = DeleteOptions { dry_run: super::parse_dry_run(query_dry_run)?, ..Default::default() };
        options.propagation = match (query_propagation.filter(|p| !p.is_empty()), query_orphan) {
            (Some(policy), _) => Some(Propagation::parse(policy)?),
            (None, Some(true)) => Some(Propagation::Orphan),
            (None, Some(false)) => Some(Propagation::Background),
            (None, None) => None,
        };
        let text = std::str::from_utf8(body).map(str::trim).unwrap_or("x");
        if text.is_empty() {
            return Ok(options);
        }
        let body: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("the DeleteOptions body is not valid JSON: {e}")))?;
        if !body.is_object() {
            return Err(ApiError::bad_request("the DeleteOptions body must be a JSON object"));
        }
        if let Some(kind) = body.get("kind").and_then(Value::as_str)
            && kind != "DeleteOptions"
        {
            return Err(ApiError::bad_request(format!("expected a DeleteOptions body, got kind {kind:?}")));
        }
        match body.get("propagationPolicy") {
            Some(Value::String(policy)) => options.propagation = Some(Propagation::parse(policy)?),
            Some(Value::Null) | None => {
                if let Some(orphan) = body.get("orphanDependents").and_then(Value::as_bool) {
                    options.propagation = Some(if orphan { Propagation::Orphan } else { Propagation::Background });
                }
            }
            Some(other) => return Err(ApiError::bad_request(format!("propagationPolicy must be a string, got {other}"))),
        }
        let text_field = |value: &Value| value.as_str().map(String::from);
        options.uid = body["preconditions"].get("uid").and_then(text_field);
        options.resource_version = body["preconditions"].get("resourceVersion").and_then(text_field);
        if let Some(list) = body.get("dryRun").and_then(Value::as_array) {
            for entry in list {
                options.dry_run |= super::parse_dry_run(entry.as_str())?;
            }
        }
        Ok(options)
    }
}

/// The result of a DELETE.
#[derive(Clone, Debug)]
pub enum Deleted {
    /// The object left the store; this is its last state.
    Gone(Value),
    /// The object is held by finalizers; this is it, with its `deletionTimestamp`.
    Pending(Value),
}

/// The finalizers the garbage collector needs for `propagation`, applied to `list`.
fn with_policy(list: &mut Vec<String>, propagation: Option<Propagation>) {
    let Some(propagation) = propagation else { return };
    list.retain(|f| f != lifecycle::ORPHAN && f != lifecycle::FOREGROUND);
    match propagation {
        Propagation::Foreground => list.push(lifecycle::FOREGROUND.into()),
        Propagation::Orphan => list.push(lifecycle::ORPHAN.into()),
        Propagation::Background => {}
    }
}

fn check_preconditions(resource: &ResourceDef, name: &str, object: &Value, options: &DeleteOptions) -> Result<(), ApiError> {
    let conflict = |message: String| {
        ApiError::new(Reason::Conflict, format!("Operation cannot be fulfilled on {} \"{name}\": {message}", crate::status::qualified(&resource.group, &resource.plural)))
            .with_details(&resource.group, &resource.plural, name)
    };
    let actual_uid = objects::meta_str(object, "uid").unwrap_or_default();
    if let Some(uid) = &options.uid
        && uid != actual_uid
    {
        return Err(conflict(format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {actual_uid}")));
    }
    let actual_rv = objects::meta_str(object, "resourceVersion").unwrap_or_default();
    if let Some(rv) = &options.resource_version
        && rv != actual_rv
    {
        return Err(conflict(format!(
            "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {actual_rv}"
        )));
    }
    Ok(())
}

/// Deletes the object `target` names.
pub async fn delete(state: &AppState, target: &ObjectTarget<'_>, options: &DeleteOptions) -> Result<Deleted, ApiError> {
    let ObjectTarget { resource, namespace, name, .. } = *target;
    let key = target.key();
    for attempt in 0..super::RACE_RETRIES {
        super::after_race(attempt).await;
        let Some(kv) = state.store.get(&key).await.map_err(store_error)?.kv else {
            return Err(ApiError::not_found(&resource.group, &resource.plural, name));
        };
        let old = objects::from_store(&kv)?;
        check_preconditions(resource, name, &old, options)?;
        let request = AdmissionRequest {
            operation: Operation::Delete,
            resource,
            namespace,
            name,
            subresource: None,
            old: Some(&old),
            dry_run: options.dry_run,
            propagation: options.propagation.map(Propagation::as_str),
            user: options.user.as_ref(),
        };
        state.admission.validate(state, &request, &old).await?;
        let mut object = old.clone();
        let mut held = lifecycle::finalizers(&object);
        with_policy(&mut held, options.propagation);
        if is_crd(resource) && !held.iter().any(|f| f == lifecycle::CRD_CLEANUP) {
            held.push(lifecycle::CRD_CLEANUP.into());
        }
        let namespace_held = lifecycle::is_namespace(resource) && !lifecycle::namespace_finalizers(&object).is_empty();
        if held.is_empty() && !namespace_held {
            if !options.dry_run {
                match state.store.write(Write::Delete { key: key.clone(), expected: kv.mod_revision }).await.map_err(store_error)? {
                    WriteResult::Committed(_) => removed(state, resource, name),
                    WriteResult::Rejected { .. } => continue,
                }
            }
            crate::webhooks::conversion::present(&state.cache, resource, &mut object).await?;
            return Ok(Deleted::Gone(object));
        }
        lifecycle::set_finalizers(&mut object, &held);
        if !lifecycle::is_deleting(&object) {
            let meta = objects::metadata_mut(&mut object)?;
            meta.insert("deletionTimestamp".into(), json!(objects::now_rfc3339()));
            meta.insert("deletionGracePeriodSeconds".into(), json!(0));
            if let Some(generation) = meta.get("generation").and_then(Value::as_i64).filter(|g| *g > 0) {
                meta.insert("generation".into(), json!(generation + 1));
            }
            if lifecycle::is_namespace(resource) {
                object["status"]["phase"] = json!("Terminating");
            }
        }
        if object == old || options.dry_run {
            crate::webhooks::conversion::present(&state.cache, resource, &mut object).await?;
            return Ok(Deleted::Pending(object));
        }
        let write = Write::Update { key: key.clone(), value: objects::to_store(&object), expected: kv.mod_revision };
        match state.store.write(write).await.map_err(store_error)? {
            WriteResult::Committed(event) => {
                objects::set_resource_version(&mut object, event.revision());
                crate::webhooks::conversion::present(&state.cache, resource, &mut object).await?;
                return Ok(Deleted::Pending(object));
            }
            WriteResult::Rejected { .. } => continue,
        }
    }
    Err(ApiError::conflict(&resource.group, &resource.plural, name))
}

/// DELETE on a collection: deletes every object of `prefix` that `selected` accepts (in the
/// client's view), answering with the objects deleted or now deleting.
pub async fn delete_collection<F>(
    state: &AppState,
    resource: &ResourceDef,
    prefix: &str,
    selected: F,
    options: &DeleteOptions,
) -> Result<Vec<Value>, ApiError>
where
    F: Fn(&Value) -> bool,
{
    state.ensure_fresh(None).await?;
    let (stored, _) = state.cache.list(prefix);
    let mut deleted = Vec::new();
    for object in stored {
        let mut view = (*object).clone();
        crate::convert::present(resource, &mut view);
        if !selected(&view) {
            continue;
        }
        let name = objects::meta_str(&object, "name").unwrap_or_default().to_string();
        let namespace = objects::meta_str(&object, "namespace").map(String::from);
        let target = ObjectTarget { resource, namespace: namespace.as_deref(), name: &name, subresource: None };
        match delete(state, &target, options).await {
            Ok(Deleted::Gone(object) | Deleted::Pending(object)) => deleted.push(object),
            // Gone meanwhile: someone else deleted it.
            Err(error) if error.reason == Reason::NotFound => {}
            Err(error) => return Err(error),
        }
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delete_options_come_from_body_and_query() {
        let options = DeleteOptions::parse(b"", Some("Foreground"), None, None).unwrap();
        assert_eq!(options.propagation, Some(Propagation::Foreground));
        let options = DeleteOptions::parse(br#"{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Orphan","preconditions":{"uid":"u1"}}"#, Some("Background"), None, None).unwrap();
        assert_eq!(options.propagation, Some(Propagation::Orphan));
        assert_eq!(options.uid.as_deref(), Some("u1"));
        let options = DeleteOptions::parse(br#"{"orphanDependents":true,"dryRun":["All"]}"#, None, None, None).unwrap();
        assert_eq!(options.propagation, Some(Propagation::Orphan));
        assert!(options.dry_run);
        assert_eq!(DeleteOptions::parse(b"", None, Some(false), None).unwrap().propagation, Some(Propagation::Background));
        assert!(DeleteOptions::parse(b"", Some("Sideways"), None, None).is_err());
        assert!(DeleteOptions::parse(b"[1]", None, None, None).is_err());
        assert!(DeleteOptions::parse(b"{", None, None, None).is_err());
        assert!(DeleteOptions::parse(br#"{"kind":"Pod"}"#, None, None, None).is_err());
    }

    #[test]
    fn policies_swap_the_collector_finalizers() {
        let mut list = vec!["a".to_string(), lifecycle::ORPHAN.to_string()];
        with_policy(&mut list, Some(Propagation::Foreground));
        assert_eq!(list, vec!["a", lifecycle::FOREGROUND]);
        with_policy(&mut list, None);
        assert_eq!(list, vec!["a", lifecycle::FOREGROUND]);
        with_policy(&mut list, Some(Propagation::Background));
        assert_eq!(list, vec!["a"]);
    }
}
