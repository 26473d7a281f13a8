//! CRD deletion: a deleted CustomResourceDefinition stays served while every custom resource
//! of it is deleted (their finalizers respected), with the condition `Terminating`; then its
//! `customresourcecleanup.apiextensions.k8s.io` finalizer is removed, the CRD goes, and with it
//! the kind from discovery and OpenAPI.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::runner::{Queue, Reconciler};
use crate::cache::{CacheEvent, EventType};
use crate::crd::CRD_PREFIX;
use crate::objects;
use crate::ops::{self, DeleteOptions, ObjectTarget, Propagation, WriteOptions, lifecycle};
use crate::state::AppState;
use crate::status::{ApiError, Reason};

const COMPONENT: &str = "apiextensions-cleanup";

/// Deletes the custom resources of deleted CRDs.
#[derive(Default)]
pub struct CrdCleanup {
    /// Terminating CRD name → the store prefix of its objects.
    terminating: HashMap<String, String>,
}

/// The store prefix of a CRD's custom resources (`/registry/<group>/<plural>/`).
fn storage_prefix(crd: &Value) -> Option<String> {
    let group = crd["spec"]["group"].as_str()?;
    let plural = crd["spec"]["names"]["plural"].as_str()?;
    Some(format!("/registry/{group}/{plural}/"))
}

fn terminating_condition(now: &str, remaining: usize) -> Value {
    json!({
        "type": "Terminating",
        "status": "True",
        "lastTransitionTime": now,
        "reason": "InstanceDeletionInProgress",
        "message": format!("CustomResource deletion is in progress: {remaining} remaining"),
    })
}

impl CrdCleanup {
    async fn clean(&self, state: &AppState, name: &str) -> Result<(), ApiError> {
        let Some(crd) = state.cache.get(&format!("{CRD_PREFIX}{name}")).0 else { return Ok(()) };
        if !lifecycle::is_deleting(&crd) || !lifecycle::has_finalizer(&crd, lifecycle::CRD_CLEANUP) {
            return Ok(());
        }
        let Some(crd_resource) = state.registry.find_kind("apiextensions.k8s.io/v1", "CustomResourceDefinition") else { return Ok(()) };
        let served = state.registry.all().into_iter().find(|r| r.crd.as_deref() == Some(name));
        let remaining = match (&served, storage_prefix(&crd)) {
            (Some(resource), Some(prefix)) => {
                let (instances, _) = state.cache.list(&prefix);
                let options = DeleteOptions { propagation: Some(Propagation::Background), ..Default::default() };
                for object in &instances {
                    if lifecycle::is_deleting(object) {
                        continue;
                    }
                    let object_name = objects::meta_str(object, "name").unwrap_or_default().to_string();
                    let namespace = objects::meta_str(object, "namespace").map(String::from);
                    let target = ObjectTarget { resource, namespace: namespace.as_deref(), name: &object_name, subresource: None };
                    let options = DeleteOptions { uid: objects::meta_str(object, "uid").map(String::from), ..options.clone() };
                    match ops::delete(state, &target, &options).await {
                        Ok(_) => {}
                        Err(error) if matches!(error.reason, Reason::NotFound | Reason::Conflict) => {}
                        Err(error) => return Err(error),
                    }
                }
                instances.len()
            }
            // Nothing served (an invalid CRD, or never established): nothing to clean.
            _ => 0,
        };
        let write = WriteOptions::internal(COMPONENT);
        if remaining > 0 {
            let target = ObjectTarget { resource: &crd_resource, namespace: None, name, subresource: Some("status") };
            let condition = terminating_condition(&objects::now_rfc3339(), remaining);
            ops::modify(state, &target, &write, |object| {
                let conditions = object["status"]["conditions"].as_array().cloned().unwrap_or_default();
                if conditions.iter().any(|c| c["type"] == "Terminating" && c["message"] == condition["message"]) {
                    return false;
                }
                let mut kept: Vec<Value> = conditions.into_iter().filter(|c| c["type"] != "Terminating").collect();
                kept.push(condition.clone());
                object["status"]["conditions"] = json!(kept);
                true
            })
            .await?;
            return Ok(());
        }
        let target = ObjectTarget { resource: &crd_resource, namespace: None, name, subresource: None };
        ops::modify(state, &target, &write, |object| {
            let rest: Vec<String> = lifecycle::finalizers(object).into_iter().filter(|f| f != lifecycle::CRD_CLEANUP).collect();
            lifecycle::set_finalizers(object, &rest);
            true
        })
        .await?;
        Ok(())
    }
}

impl Reconciler for CrdCleanup {
    type Item = String;

    fn name(&self) -> &'static str {
        "crd-cleanup"
    }

    fn reset(&mut self) {
        self.terminating.clear();
    }

    fn observe(&mut self, event: &CacheEvent, queue: &mut Queue<String>) {
        if let Some(name) = event.key.strip_prefix(CRD_PREFIX) {
            if event.kind != EventType::Deleted && lifecycle::is_deleting(&event.object) {
                if let Some(prefix) = storage_prefix(&event.object) {
                    self.terminating.insert(name.to_string(), prefix);
                }
                queue.add(name.to_string());
            } else {
                self.terminating.remove(name);
            }
            return;
        }
        // A custom resource of a terminating CRD changed: maybe the last one went.
        for (name, prefix) in &self.terminating {
            if event.key.starts_with(prefix.as_str()) {
                queue.add(name.clone());
            }
        }
    }

    async fn reconcile(&mut self, state: &AppState, name: String, queue: &mut Queue<String>) -> Result<(), ApiError> {
        self.clean(state, &name).await?;
        if self.terminating.contains_key(&name) {
            queue.add_after(name, std::time::Duration::from_secs(5));
        }
        Ok(())
    }
}
