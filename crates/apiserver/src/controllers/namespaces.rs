//! Namespace deletion: a deleted Namespace is `Terminating` while everything in it is deleted
//! (each object's own finalizers respected); its status conditions say what remains and which
//! finalizers hold it. When nothing is left, its `kubernetes` content finalizer is removed
//! through the `finalize` subresource and the Namespace goes.

use std::collections::{BTreeMap, HashSet};

use serde_json::{Value, json};

use super::runner::{Queue, Reconciler};
use crate::cache::CacheEvent;
use crate::objects;
use crate::ops::{self, DeleteOptions, ObjectTarget, Propagation, WriteOptions, lifecycle};
use crate::state::AppState;
use crate::status::{ApiError, Reason};

const COMPONENT: &str = "namespace-controller";
const NAMESPACES: &str = "/registry/core/namespaces/";

/// Deletes the content of terminating namespaces.
#[derive(Default)]
pub struct NamespaceController {
    terminating: HashSet<String>,
}

/// What is left in a namespace.
#[derive(Default)]
struct Remaining {
    /// Objects per resource (`plural.group`).
    by_resource: BTreeMap<String, usize>,
    /// Objects per finalizer holding them.
    by_finalizer: BTreeMap<String, usize>,
}

impl Remaining {
    fn is_empty(&self) -> bool {
        self.by_resource.is_empty()
    }

    fn conditions(&self, now: &str) -> Value {
        let condition = |kind: &str, status: bool, reason: &str, message: String| {
            json!({"type": kind, "status": if status { "True" } else { "False" }, "lastTransitionTime": now, "reason": reason, "message": message})
        };
        let resources: Vec<String> =
            self.by_resource.iter().map(|(resource, count)| format!("{resource} has {count} resource instances")).collect();
        let finalizers: Vec<String> =
            self.by_finalizer.iter().map(|(finalizer, count)| format!("{finalizer} in {count} resource instances")).collect();
        json!([
            condition("NamespaceDeletionDiscoveryFailure", false, "ResourcesDiscovered", "All resources successfully discovered".into()),
            condition("NamespaceDeletionGroupVersionParsingFailure", false, "ParsedGroupVersions", "All legacy kube types successfully parsed".into()),
            condition("NamespaceDeletionContentFailure", false, "ContentDeleted", "All content successfully deleted, may be waiting on finalization".into()),
            if resources.is_empty() {
                condition("NamespaceContentRemaining", false, "ContentRemoved", "All content successfully removed".into())
            } else {
                condition("NamespaceContentRemaining", true, "SomeResourcesRemain", format!("Some resources are remaining: {}", resources.join(", ")))
            },
            if finalizers.is_empty() {
                condition("NamespaceFinalizersRemaining", false, "ContentHasNoFinalizers", "All content-preserving finalizers finished".into())
            } else {
                condition("NamespaceFinalizersRemaining", true, "SomeFinalizersRemain", format!("Some content in the namespace has finalizers remaining: {}", finalizers.join(", ")))
            },
        ])
    }
}

/// The namespace of a store key of a namespaced object (`/registry/<storage>/<ns>/<name>`,
/// where storage is `group/plural`).
fn namespace_of_key(key: &str) -> Option<&str> {
    let parts: Vec<&str> = key.trim_start_matches("/registry/").split('/').collect();
    (parts.len() == 4).then(|| parts[2])
}

impl NamespaceController {
    async fn finish(&self, state: &AppState, name: &str) -> Result<(), ApiError> {
        let Some(namespace) = state.cache.get(&format!("{NAMESPACES}{name}")).0 else { return Ok(()) };
        if !lifecycle::is_deleting(&namespace) || !lifecycle::namespace_finalizers(&namespace).iter().any(|f| f == lifecycle::NAMESPACE_CONTENT) {
            return Ok(());
        }
        let mut remaining = Remaining::default();
        let options = DeleteOptions { propagation: Some(Propagation::Background), ..Default::default() };
        for resource in state.registry.by_storage() {
            if !resource.namespaced {
                continue;
            }
            let (objects_in, _) = state.cache.list(&resource.namespace_prefix(name));
            for object in objects_in {
                let object_name = objects::meta_str(&object, "name").unwrap_or_default().to_string();
                let holders = lifecycle::finalizers(&object);
                *remaining.by_resource.entry(crate::status::qualified(&resource.group, &resource.plural)).or_default() += 1;
                for holder in holders {
                    *remaining.by_finalizer.entry(holder).or_default() += 1;
                }
                if lifecycle::is_deleting(&object) {
                    continue;
                }
                let target = ObjectTarget { resource: &resource, namespace: Some(name), name: &object_name, subresource: None };
                let options = DeleteOptions { uid: objects::meta_str(&object, "uid").map(String::from), ..options.clone() };
                match ops::delete(state, &target, &options).await {
                    Ok(_) => {}
                    Err(error) if matches!(error.reason, Reason::NotFound | Reason::Conflict) => {}
                    Err(error) => return Err(error),
                }
            }
        }
        let Some(resource) = state.registry.find_kind("v1", "Namespace") else { return Ok(()) };
        let write = WriteOptions::internal(COMPONENT);
        if remaining.is_empty() {
            let target = ObjectTarget { resource: &resource, namespace: None, name, subresource: Some("finalize") };
            ops::modify(state, &target, &write, |object| {
                let rest: Vec<String> =
                    lifecycle::namespace_finalizers(object).into_iter().filter(|f| f != lifecycle::NAMESPACE_CONTENT).collect();
                object["spec"]["finalizers"] = json!(rest);
                true
            })
            .await?;
            return Ok(());
        }
        let target = ObjectTarget { resource: &resource, namespace: None, name, subresource: Some("status") };
        let conditions = remaining.conditions(&objects::now_rfc3339());
        ops::modify(state, &target, &write, |object| {
            // Only the messages matter; rewriting the same ones with a new time would churn.
            let same = |a: &Value, b: &Value| {
                a.as_array().zip(b.as_array()).is_some_and(|(a, b)| {
                    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x["status"] == y["status"] && x["message"] == y["message"])
                })
            };
            if same(&object["status"]["conditions"], &conditions) {
                return false;
            }
            object["status"]["phase"] = json!("Terminating");
            object["status"]["conditions"] = conditions.clone();
            true
        })
        .await?;
        Ok(())
    }
}

impl Reconciler for NamespaceController {
    type Item = String;

    fn name(&self) -> &'static str {
        "namespace-controller"
    }

    fn reset(&mut self) {
        self.terminating.clear();
    }

    fn observe(&mut self, event: &CacheEvent, queue: &mut Queue<String>) {
        if let Some(name) = event.key.strip_prefix(NAMESPACES) {
            let deleting = event.kind != crate::cache::EventType::Deleted && lifecycle::is_deleting(&event.object);
            if deleting {
                self.terminating.insert(name.to_string());
                queue.add(name.to_string());
            } else {
                self.terminating.remove(name);
            }
            return;
        }
        // A change inside a terminating namespace may be the last object going.
        if let Some(namespace) = namespace_of_key(&event.key)
            && self.terminating.contains(namespace)
        {
            queue.add(namespace.to_string());
        }
    }

    async fn reconcile(&mut self, state: &AppState, name: String, queue: &mut Queue<String>) -> Result<(), ApiError> {
        self.finish(state, &name).await?;
        // Objects held by finalizers are waited for; look again in a while in case no event
        // arrives (a finalizer removed elsewhere always brings one, this is a safety net).
        if self.terminating.contains(&name) {
            queue.add_after(name, std::time::Duration::from_secs(5));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_their_namespace() {
        assert_eq!(namespace_of_key("/registry/core/configmaps/ns1/cm"), Some("ns1"));
        assert_eq!(namespace_of_key("/registry/example.com/widgets/ns2/w"), Some("ns2"));
        assert_eq!(namespace_of_key("/registry/core/namespaces/ns1"), None);
    }

    #[test]
    fn conditions_name_what_remains() {
        let mut remaining = Remaining::default();
        remaining.by_resource.insert("widgets.example.com".into(), 2);
        remaining.by_finalizer.insert("example.com/hold".into(), 1);
        let conditions = remaining.conditions("t");
        let text = conditions.to_string();
        assert!(text.contains("Some resources are remaining: widgets.example.com has 2 resource instances"));
        assert!(text.contains("Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances"));
    }
}
