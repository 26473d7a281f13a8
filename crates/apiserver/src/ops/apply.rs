//! Server-side apply (`application/apply-patch+yaml`): the applied configuration is merged
//! into the live object by the apply engine in [`crate::apply`] — conflicts with other field
//! managers refused with 409 unless `force`, fields the manager stopped applying removed — and
//! the result goes through the same create or commit step as every other write. An object
//! that does not exist is created from the configuration.

use serde_json::Value;

use super::create::create_with;
use super::managed::{Ownership, check_manager, entries_of, scope, store_entries};
use super::update::{Commit, commit};
use super::{ObjectTarget, WriteOptions, Written};
use crate::apply::{self, ApplyError};
use crate::objects;
use crate::state::{AppState, store_error};
use crate::status::{ApiError, Reason};

/// Parses an apply body: JSON, or YAML (one document).
pub(super) fn parse_config(body: &[u8]) -> Result<Value, ApiError> {
    let parsed = match serde_json::from_slice::<Value>(body) {
        Ok(value) => value,
        Err(_) => {
            let text = std::str::from_utf8(body).map_err(|_| ApiError::bad_request("the apply body is neither JSON nor UTF-8 YAML"))?;
            serde_saphyr::from_str::<Value>(text)
                .map_err(|e| ApiError::bad_request(format!("the apply body is neither valid JSON nor valid YAML: {e}")))?
        }
    };
    if !parsed.is_object() {
        return Err(ApiError::bad_request("the apply body must be an object"));
    }
    Ok(parsed)
}

fn apply_error(error: ApplyError, target: &ObjectTarget<'_>) -> ApiError {
    let resource = target.resource;
    match error {
        ApplyError::Conflicts(conflicts) => {
            let (message, causes) = apply::conflict_status_message(&conflicts);
            let mut error = ApiError::new(Reason::Conflict, message).with_details(&resource.group, &resource.plural, target.name);
            for (message, field) in causes {
                error = error.with_cause("FieldManagerConflict", &message, &field);
            }
            error
        }
        other => ApiError::new(Reason::Invalid, format!("{} \"{}\" is invalid: {other}", resource.kind, target.name))
            .with_details(&resource.group, &resource.kind, target.name),
    }
}

/// Applies `body` as `options.field_manager`'s configuration of the object `target` names.
pub async fn apply(state: &AppState, target: &ObjectTarget<'_>, body: &[u8], options: &WriteOptions) -> Result<Written, ApiError> {
    let ObjectTarget { resource, namespace, name, subresource } = *target;
    let manager = options.field_manager.as_deref().filter(|m| !m.is_empty()).ok_or_else(|| {
        ApiError::new(Reason::Invalid, "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch")
    })?;
    check_manager(manager)?;
    let config = parse_config(body)?;
    let found = (config["apiVersion"].as_str().unwrap_or_default(), config["kind"].as_str().unwrap_or_default());
    if found.0.is_empty() || found.1.is_empty() {
        return Err(ApiError::bad_request("apiVersion and kind must be set in an applied configuration"));
    }
    if found != (resource.api_version().as_str(), resource.kind.as_str()) {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({}) does not match the expected API version ({}) or the kind ({}) does not match the expected kind ({})",
            found.0,
            resource.api_version(),
            found.1,
            resource.kind
        )));
    }
    if let Some(body_name) = objects::meta_str(&config, "name")
        && body_name != name
    {
        return Err(ApiError::bad_request(format!("the name of the object ({body_name}) does not match the name on the URL ({name})")));
    }
    let scope = scope(resource, subresource);
    let types = resource.apply_types.root(resource);
    for attempt in 0..super::RACE_RETRIES {
        super::after_race(attempt).await;
        let kv = state.store.get(&target.key()).await.map_err(store_error)?.kv;
        // A resourceVersion in the configuration is a precondition, as kube-apiserver makes it:
        // applied against another version of the object, it is a 409 Conflict.
        if let (Some(pinned), Some(kv)) = (objects::meta_str(&config, "resourceVersion").filter(|v| !v.is_empty()), kv.as_ref())
            && pinned != kv.mod_revision.to_string()
        {
            return Err(ApiError::conflict(&resource.group, &resource.plural, name));
        }
        let old = kv.as_ref().map(objects::from_store).transpose()?;
        // The configuration speaks the client's version of the object.
        let live = match old.clone() {
            Some(mut view) => {
                crate::webhooks::conversion::present(&state.cache, resource, &mut view).await?;
                Some(view)
            }
            None => None,
        };
        let managed = entries_of(live.as_ref());
        let applied = apply::apply(
            live.as_ref(),
            &managed,
            &config,
            manager,
            &resource.api_version(),
            options.force,
            scope,
            types.as_deref(),
            &objects::now_rfc3339(),
        )
        .map_err(|e| apply_error(e, target))?;
        let mut object = applied.object;
        store_entries(&mut object, &applied.managed)?;
        objects::metadata_mut(&mut object)?.insert("name".into(), Value::String(name.to_string()));
        let (Some(kv), Some(old)) = (kv, old) else {
            if subresource.is_some() {
                return Err(ApiError::not_found(&resource.group, &resource.plural, name));
            }
            match create_with(state, resource, namespace, object, None, options, Ownership::Computed).await {
                Err(error) if error.reason == Reason::AlreadyExists => continue,
                other => return other,
            }
        };
        crate::convert::to_storage(resource, &mut object);
        match commit(state, target, &kv, &old, object, None, options, Ownership::Computed).await? {
            Commit::Written(written) => return Ok(written),
            Commit::Raced => continue,
        }
    }
    Err(ApiError::conflict(&resource.group, &resource.plural, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apply_bodies_are_json_or_yaml_objects() {
        assert_eq!(parse_config(br#"{"a": 1}"#).unwrap()["a"], 1);
        let yaml = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  k: v\n";
        let parsed = parse_config(yaml).unwrap();
        assert_eq!(parsed["metadata"]["name"], "x");
        assert_eq!(parsed["data"]["k"], "v");
        assert!(parse_config(b"- a\n- b\n").is_err());
        assert!(parse_config(b"a: [").is_err());
        assert!(parse_config(&[0xff, 0xfe]).is_err());
    }
}
