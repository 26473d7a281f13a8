//! CRD conversion webhooks (`spec.conversion.strategy: Webhook`): custom resources are stored
//! in the CRD's storage version and converted by the CRD's webhook (a `ConversionReview` v1)
//! to the version a client reads or writes through, and back. Writes are admitted and
//! validated in the version they were made through (as kube-apiserver handles custom resources)
//! and converted to the storage version just before they are stored.
//!
//! Errors read as kube-apiserver's: `conversion webhook for <group/version>, Kind=<Kind>
//! failed: <cause>` (500), the cause being the call's error, the webhook's own
//! `result.message`, or what is wrong with its answer. Converted objects keep the original's
//! metadata but for labels and annotations, as kube-apiserver restores them.

use std::sync::Arc;

use serde_json::{Value, json};

use super::client;
use super::config::{ClientConfig, Webhook};
use crate::registry::ResourceDef;
use crate::cache::WatchCache;
use crate::status::{ApiError, Cause};

/// Timeout of a conversion call (kube-apiserver's webhook client default).
const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// A CRD's conversion webhook.
#[derive(Clone, Debug)]
pub struct Conversion {
    /// The CRD's group.
    pub group: String,
    /// The kind converted.
    pub kind: String,
    /// The version objects are stored in.
    pub storage_version: String,
    /// Where the webhook is served.
    pub client_config: ClientConfig,
}

impl Conversion {
    /// `group/version` of the storage version.
    pub fn storage_api_version(&self) -> String {
        format!("{}/{}", self.group, self.storage_version)
    }
}

/// The conversion webhook of `resource`'s CRD, when it has one.
pub fn for_resource(cache: &WatchCache, resource: &ResourceDef) -> Option<Conversion> {
    let crd = resource.crd.as_deref()?;
    let stored = cache.get(&format!("{}{crd}", crate::crd::CRD_PREFIX)).0?;
    of_crd(&stored)
}

/// The conversion webhook a CRD object configures, if its strategy is `Webhook`.
pub fn of_crd(crd: &Value) -> Option<Conversion> {
    let conversion = &crd["spec"]["conversion"];
    if conversion["strategy"].as_str() != Some("Webhook") {
        return None;
    }
    let client_config: ClientConfig = serde_json::from_value(conversion["webhook"]["clientConfig"].clone()).ok()?;
    let storage_version = crd["spec"]["versions"]
        .as_array()?
        .iter()
        .find(|v| v["storage"].as_bool() == Some(true))?
        .get("name")?
        .as_str()?
        .to_string();
    Some(Conversion {
        group: crd["spec"]["group"].as_str()?.to_string(),
        kind: crd["spec"]["names"]["kind"].as_str()?.to_string(),
        storage_version,
        client_config,
    })
}

/// What kube-apiserver refuses in a CRD's `spec.conversion`; empty when fine.
pub fn validate_crd(crd: &Value) -> Vec<Cause> {
    let conversion = &crd["spec"]["conversion"];
    let cause = |reason: &str, field: &str, message: String| Cause { reason: reason.into(), message, field: field.into() };
    let mut causes = Vec::new();
    match conversion["strategy"].as_str() {
        None | Some("None") => {
            if !conversion["webhook"].is_null() {
                causes.push(cause("FieldValueForbidden", "spec.conversion.webhook", "Forbidden: should not be set when strategy is not set to Webhook".into()));
            }
        }
        Some("Webhook") => {
            let webhook = &conversion["webhook"];
            let versions = webhook["conversionReviewVersions"].as_array().cloned().unwrap_or_default();
            if versions.is_empty() {
                causes.push(cause(
                    "FieldValueRequired",
                    "spec.conversion.webhook.conversionReviewVersions",
                    "Required value: must include at least one of v1, v1beta1".into(),
                ));
            } else if !versions.iter().any(|v| v == "v1" || v == "v1beta1") {
                causes.push(cause(
                    "FieldValueInvalid",
                    "spec.conversion.webhook.conversionReviewVersions",
                    format!("Invalid value: {}: must include at least one of v1, v1beta1", Value::Array(versions)),
                ));
            }
            if webhook["clientConfig"].is_null() {
                causes.push(cause("FieldValueRequired", "spec.conversion.webhook.clientConfig", "Required value: required when strategy is set to Webhook".into()));
            } else {
                // The clientConfig is an admission webhook's: check it the same way.
                let as_admission = json!({"webhooks": [{"name": "conversion.oxplane.io", "sideEffects": "None", "admissionReviewVersions": ["v1"], "clientConfig": webhook["clientConfig"]}]});
                for mut found in super::config::validate(&as_admission, false) {
                    found.field = found.field.replace("webhooks[0].clientConfig", "spec.conversion.webhook.clientConfig");
                    causes.push(found);
                }
            }
        }
        Some(other) => causes.push(cause("FieldValueNotSupported", "spec.conversion.strategy", format!("Unsupported value: \"{other}\": supported values: \"None\", \"Webhook\""))),
    }
    causes
}

/// Converts `objects` to `desired` (`group/version`) through the webhook; objects already in
/// that version are left alone and no call is made when none needs converting.
pub async fn convert(cache: &WatchCache, conversion: &Conversion, objects: &mut [Value], desired: &str) -> Result<(), ApiError> {
    let pending: Vec<usize> = (0..objects.len()).filter(|i| objects[*i]["apiVersion"].as_str() != Some(desired)).collect();
    let Some(first) = pending.first() else { return Ok(()) };
    let from = objects[*first]["apiVersion"].as_str().unwrap_or_default().to_string();
    let failed = |cause: String| ApiError::internal(format!("conversion webhook for {from}, Kind={} failed: {cause}", conversion.kind));
    let uid = uuid::Uuid::new_v4().to_string();
    let sent: Vec<Value> = pending.iter().map(|i| objects[*i].clone()).collect();
    let review = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "request": {"uid": uid, "desiredAPIVersion": desired, "objects": sent}});
    let hook = Webhook { name: String::new(), client_config: conversion.client_config.clone(), ..serde_json::from_value(json!({"name": ""})).map_err(|e| failed(e.to_string()))? };
    let target = client::resolve(cache, &hook.client_config).map_err(&failed)?;
    let ca = hook.ca_pem().map_err(&failed)?;
    let body = serde_json::to_vec(&review).map_err(|e| failed(e.to_string()))?;
    let answer = client::post(&target, ca.as_deref(), body, TIMEOUT).await.map_err(&failed)?;
    let (api_version, kind) = (answer["apiVersion"].as_str().unwrap_or_default(), answer["kind"].as_str().unwrap_or_default());
    if (api_version, kind) != ("apiextensions.k8s.io/v1", "ConversionReview") {
        return Err(failed(format!("expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got {api_version}, Kind={kind}")));
    }
    let response = answer.get("response").filter(|r| r.is_object()).ok_or_else(|| failed("no response provided".into()))?;
    let got = response["uid"].as_str().unwrap_or_default();
    if got != uid {
        return Err(failed(format!("expected response.uid=\"{uid}\", got \"{got}\"")));
    }
    let status = response["result"]["status"].as_str().unwrap_or_default();
    if status != "Success" {
        return Err(match response["result"]["message"].as_str().filter(|m| !m.is_empty()) {
            Some(message) => failed(message.to_string()),
            None => failed(format!("response.result.status was '{status}', not 'Success'")),
        });
    }
    let converted = response["convertedObjects"].as_array().cloned().unwrap_or_default();
    if converted.len() != pending.len() {
        return Err(ApiError::internal(format!(
            "conversion webhook for {from}, Kind={} returned {} objects, expected {}",
            conversion.kind,
            converted.len(),
            pending.len()
        )));
    }
    for (index, mut object) in pending.into_iter().zip(converted) {
        let original = &objects[index];
        let invalid = |why: String| failed(format!("invalid converted object: {why}"));
        if object["apiVersion"].as_str() != Some(desired) {
            return Err(invalid(format!("expected apiVersion \"{desired}\", got {}", object["apiVersion"])));
        }
        if object["kind"] != original["kind"] {
            return Err(invalid(format!("expected kind {}, got {}", original["kind"], object["kind"])));
        }
        if !object.is_object() || (!object["metadata"].is_object() && !object["metadata"].is_null()) {
            return Err(invalid("metadata must be an object".into()));
        }
        // Only labels and annotations may change: the rest of metadata stays the original's.
        let mut metadata = original["metadata"].clone();
        for field in ["labels", "annotations"] {
            match object["metadata"].get(field) {
                Some(value) if !value.is_null() => metadata[field] = value.clone(),
                _ => {
                    if let Some(map) = metadata.as_object_mut() {
                        map.remove(field);
                    }
                }
            }
        }
        object["metadata"] = metadata;
        objects[index] = object;
    }
    Ok(())
}

/// Shows stored objects as `resource` (the version asked for): through the webhook when the
/// CRD has one, else as [`crate::convert::present`] does.
pub async fn present_all(cache: &WatchCache, resource: &ResourceDef, objects: &mut [Value]) -> Result<(), ApiError> {
    match for_resource(cache, resource) {
        Some(conversion) => convert(cache, &conversion, objects, &resource.api_version()).await,
        None => {
            for object in objects.iter_mut() {
                crate::convert::present(resource, object);
            }
            Ok(())
        }
    }
}

/// [`present_all`] for one object.
pub async fn present(cache: &WatchCache, resource: &ResourceDef, object: &mut Value) -> Result<(), ApiError> {
    present_all(cache, resource, std::slice::from_mut(object)).await
}

/// [`present_all`] for shared objects: only those needing conversion are copied.
pub async fn present_shared(cache: &WatchCache, resource: &ResourceDef, objects: Vec<Arc<Value>>) -> Result<Vec<Arc<Value>>, ApiError> {
    let Some(conversion) = for_resource(cache, resource) else { return Ok(objects) };
    let desired = resource.api_version();
    let pending: Vec<usize> = (0..objects.len()).filter(|i| objects[*i]["apiVersion"].as_str() != Some(desired.as_str())).collect();
    if pending.is_empty() {
        return Ok(objects);
    }
    let mut copies: Vec<Value> = pending.iter().map(|i| (*objects[*i]).clone()).collect();
    convert(cache, &conversion, &mut copies, &desired).await?;
    let mut objects = objects;
    for (index, object) in pending.into_iter().zip(copies) {
        objects[index] = Arc::new(object);
    }
    Ok(objects)
}

/// Turns an object written through `resource` into the storage version, when its CRD converts
/// through a webhook.
pub async fn to_storage(cache: &WatchCache, resource: &ResourceDef, object: &mut Value) -> Result<(), ApiError> {
    if let Some(conversion) = for_resource(cache, resource) {
        convert(cache, &conversion, std::slice::from_mut(object), &conversion.storage_api_version()).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn webhook_strategy_needs_a_client_and_review_versions() {
        let crd = |conversion: Value| json!({"spec": {"conversion": conversion}});
        assert!(validate_crd(&crd(json!({"strategy": "None"}))).is_empty());
        let fields = |c: Vec<Cause>| c.into_iter().map(|c| c.field).collect::<Vec<_>>();
        assert_eq!(fields(validate_crd(&crd(json!({"strategy": "Webhook"})))), [
            "spec.conversion.webhook.conversionReviewVersions",
            "spec.conversion.webhook.clientConfig"
        ]);
        assert_eq!(
            fields(validate_crd(&crd(json!({"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {"url": "http://x/y"}}})))),
            ["spec.conversion.webhook.clientConfig.url"]
        );
        assert_eq!(fields(validate_crd(&crd(json!({"strategy": "Magic"})))), ["spec.conversion.strategy"]);
        let ok = crd(json!({"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {"url": "https://127.0.0.1:1/convert"}}}));
        assert!(validate_crd(&ok).is_empty());
    }
}
