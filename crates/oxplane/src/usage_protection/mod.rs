//! The deletion protection of Usages, as an admission hook of the embedded API server (what
//! Crossplane runs as the `nousages.protection.crossplane.io` webhook): deleting an object
//! labelled `crossplane.io/in-use` that a Usage names is refused with 409, and the attempt
//! and its propagation policy are recorded on the object so the Usage can replay it. The
//! hook runs in every `oxplane up`, also one that serves only the API beside replicas running
//! the controllers; `webhook.rs` serves the same check as an admission webhook for `oxplane
//! controllers`, and where that webhook is registered the hook leaves the decision to it.

pub mod webhook;

use oxplane_apiserver::ops::admission::{AdmissionHook, AdmissionRequest, HookFuture, Operation};
use oxplane_apiserver::ops::{ObjectTarget, WriteOptions};
use oxplane_apiserver::state::AppState;
use oxplane_apiserver::status::{ApiError, Reason};
use oxplane_composition::usage;
use serde_json::Value;

/// The hook.
pub struct UsageProtection;

/// The store prefixes of the three Usage kinds.
fn prefixes() -> Vec<(String, &'static str)> {
    usage::kinds().into_iter().map(|(kind, type_name)| (format!("/registry/{}/{}/", kind.gvk.group, kind.plural), type_name)).collect()
}

impl AdmissionHook for UsageProtection {
    fn name(&self) -> &str {
        "nousages.protection.crossplane.io"
    }

    fn validate<'a>(&'a self, state: &'a AppState, request: &'a AdmissionRequest<'a>, object: &'a Value) -> HookFuture<'a> {
        Box::pin(async move {
            if request.operation != Operation::Delete || object.pointer("/metadata/labels/crossplane.io~1in-use").and_then(Value::as_str) != Some("true") {
                return Ok(());
            }
            // `oxplane controllers` registered Crossplane's webhook: the API server calls it, and
            // its failure policy (not this hook) decides while it cannot be reached.
            let registered = format!("{}{}", oxplane_apiserver::webhooks::config::VALIDATING_PREFIX, webhook::CONFIGURATION);
            if state.cache.get(&registered).0.is_some() {
                return Ok(());
            }
            let mut found = Vec::new();
            for (prefix, type_name) in prefixes() {
                for usage in state.cache.list(&prefix).0 {
                    found.push((usage, type_name));
                }
            }
            let usages: Vec<(&Value, &str)> = found.iter().map(|(u, t)| (u.as_ref(), *t)).collect();
            let mut used = object.clone();
            fill_type(&mut used, &request.resource.group, &request.resource.version, &request.resource.kind);
            let Some(message) = usage::deletion_refusal(&used, &usages) else { return Ok(()) };
            if !request.dry_run {
                let policy = request.propagation.unwrap_or("Background");
                let target = ObjectTarget { resource: request.resource, namespace: request.namespace, name: request.name, subresource: None };
                let recorded = oxplane_apiserver::ops::modify(state, &target, &WriteOptions::internal("usage-protection"), |stored| {
                    let current = stored.pointer("/metadata/annotations").and_then(|a| a.get(usage::ANNOTATION_DELETION_ATTEMPT)).and_then(Value::as_str);
                    if current == Some(policy) {
                        return false;
                    }
                    if let Some(metadata) = stored.get_mut("metadata").and_then(Value::as_object_mut) {
                        let annotations = metadata.entry("annotations").or_insert_with(|| Value::Object(Default::default()));
                        if let Some(annotations) = annotations.as_object_mut() {
                            annotations.insert(usage::ANNOTATION_DELETION_ATTEMPT.to_string(), Value::String(policy.to_string()));
                            return true;
                        }
                    }
                    false
                })
                .await;
                if let Err(error) = recorded {
                    tracing::info!(%error, object = request.name, "cannot record the refused deletion attempt");
                }
            }
            Err(ApiError::new(Reason::Conflict, format!("admission webhook \"nousages.protection.crossplane.io\" denied the request: {message}")))
        })
    }
}

/// Gives `object` the `apiVersion` and `kind` of the request when it has none: stored objects
/// carry their storage version; they are compared with Usages as the client sees them.
fn fill_type(object: &mut Value, group: &str, version: &str, kind: &str) {
    if object.get("apiVersion").is_none() {
        object["apiVersion"] = Value::String(if group.is_empty() { version.to_string() } else { format!("{group}/{version}") });
        object["kind"] = Value::String(kind.to_string());
    }
}
