//! The garbage collector: deletes dependents whose owners are gone, runs foreground deletion
//! (dependents with `blockOwnerDeletion` go before their owner) and orphaning (the owner is
//! removed from its dependents before it goes).
//!
//! Owner references match by uid: an owner re-created under the same name is a different
//! owner. An owner missing from the cache is looked up in the store before a dependent is
//! deleted, and every deletion carries the dependent's uid as a precondition, so a stale view
//! never deletes the wrong object. A cluster-scoped dependent naming a namespaced owner is
//! invalid, as in Kubernetes: it is never collected through that reference and gets a
//! Warning event `OwnerRefInvalidNamespace`.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::events;
use super::runner::{Queue, Reconciler};
use crate::cache::{CacheEvent, EventType};
use crate::objects;
use crate::ops::{self, DeleteOptions, ObjectTarget, Propagation, WriteOptions, lifecycle};
use crate::state::{AppState, store_error};
use crate::status::{ApiError, Reason};

/// The field manager and event source of the collector's writes.
const COMPONENT: &str = "garbage-collector";

/// One owner reference.
#[derive(Clone, Debug, PartialEq, Eq)]
struct OwnerRef {
    uid: String,
    api_version: String,
    kind: String,
    name: String,
    block: bool,
}

/// What the collector knows of one object.
#[derive(Clone, Debug)]
struct Node {
    api_version: String,
    kind: String,
    namespace: Option<String>,
    name: String,
    owners: Vec<OwnerRef>,
    deleting: bool,
    finalizers: Vec<String>,
}

impl Node {
    fn from_object(object: &Value) -> Option<(String, Node)> {
        let uid = objects::meta_str(object, "uid")?.to_string();
        let owners = object["metadata"]["ownerReferences"]
            .as_array()
            .map(|refs| {
                refs.iter()
                    .filter_map(|r| {
                        Some(OwnerRef {
                            uid: r["uid"].as_str()?.to_string(),
                            api_version: r["apiVersion"].as_str().unwrap_or_default().to_string(),
                            kind: r["kind"].as_str().unwrap_or_default().to_string(),
                            name: r["name"].as_str().unwrap_or_default().to_string(),
                            block: r["blockOwnerDeletion"].as_bool() == Some(true),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        let node = Node {
            api_version: object["apiVersion"].as_str().unwrap_or_default().to_string(),
            kind: object["kind"].as_str().unwrap_or_default().to_string(),
            namespace: objects::meta_str(object, "namespace").map(String::from),
            name: objects::meta_str(object, "name").unwrap_or_default().to_string(),
            owners,
            deleting: lifecycle::is_deleting(object),
            finalizers: lifecycle::finalizers(object),
        };
        Some((uid, node))
    }

    fn has(&self, finalizer: &str) -> bool {
        self.finalizers.iter().any(|f| f == finalizer)
    }

    fn deleting_dependents(&self) -> bool {
        self.deleting && self.has(lifecycle::FOREGROUND)
    }
}

/// Work for the collector.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Item {
    /// Check whether this dependent's owners are gone or being deleted in the foreground.
    Dependent(String),
    /// An owner being deleted in the foreground: drop its finalizer once nothing blocks it.
    Foreground(String),
    /// An owner being deleted with orphaning: free its dependents, then drop its finalizer.
    Orphan(String),
}

/// The collector's view: every object with a uid, and who depends on whom.
#[derive(Default)]
pub struct GarbageCollector {
    nodes: HashMap<String, Node>,
    dependents: HashMap<String, HashSet<String>>,
    by_key: HashMap<String, String>,
    /// Dependents already reported as invalid, so the event is recorded once.
    reported: HashSet<String>,
}

/// How a dependent's owner stands.
enum Owner {
    /// Exists and is not deleting its dependents.
    Solid,
    /// Exists, deleting in the foreground.
    Waiting,
    /// Does not exist (by uid).
    Gone,
    /// Cannot be decided (kind not served, or an invalid reference): keep the dependent.
    Unknown,
}

impl GarbageCollector {
    fn forget(&mut self, uid: &str) -> Option<Node> {
        let node = self.nodes.remove(uid)?;
        for owner in &node.owners {
            if let Some(set) = self.dependents.get_mut(&owner.uid) {
                set.remove(uid);
                if set.is_empty() {
                    self.dependents.remove(&owner.uid);
                }
            }
        }
        Some(node)
    }

    fn remember(&mut self, uid: String, node: Node) {
        for owner in &node.owners {
            self.dependents.entry(owner.uid.clone()).or_default().insert(uid.clone());
        }
        self.nodes.insert(uid, node);
    }

    /// Queues the owners of `node` that wait for their dependents.
    fn wake_waiting_owners(&self, node: &Node, queue: &mut Queue<Item>) {
        for owner in &node.owners {
            if self.nodes.get(&owner.uid).is_some_and(Node::deleting_dependents) {
                queue.add(Item::Foreground(owner.uid.clone()));
            }
        }
    }

    fn wake_dependents(&self, uid: &str, queue: &mut Queue<Item>) {
        for dependent in self.dependents.get(uid).into_iter().flatten() {
            queue.add(Item::Dependent(dependent.clone()));
        }
    }

    async fn owner_state(&mut self, state: &AppState, dependent: &Node, owner: &OwnerRef, dependent_uid: &str) -> Result<Owner, ApiError> {
        let Some(resource) = state.registry.find_kind(&owner.api_version, &owner.kind) else {
            // Kubernetes cannot resolve such an owner either and leaves the dependent alone.
            return Ok(Owner::Unknown);
        };
        if resource.namespaced && dependent.namespace.is_none() {
            if self.reported.insert(dependent_uid.to_string())
                && let Some(object) = self.stored(state, dependent).await?
            {
                let message = format!(
                    "ownerRef [{}, namespace: , name: {}, uid: {}] does not exist in namespace \"\"",
                    owner.api_version, owner.name, owner.uid
                );
                events::record(state, &object, "Warning", "OwnerRefInvalidNamespace", &message, COMPONENT).await;
            }
            return Ok(Owner::Unknown);
        }
        let namespace = if resource.namespaced { dependent.namespace.as_deref() } else { None };
        if let Some(node) = self.nodes.get(&owner.uid)
            && node.namespace.as_deref() == namespace
            && node.name == owner.name
        {
            return Ok(if node.deleting_dependents() { Owner::Waiting } else { Owner::Solid });
        }
        // Not in the collector's view: ask the store, which is never behind.
        let key = resource.key(namespace, &owner.name);
        let kv = state.store.get(&key).await.map_err(store_error)?.kv;
        let Some(kv) = kv else { return Ok(Owner::Gone) };
        let object = objects::from_store(&kv)?;
        if objects::meta_str(&object, "uid") != Some(owner.uid.as_str()) {
            return Ok(Owner::Gone);
        }
        let deleting = lifecycle::is_deleting(&object) && lifecycle::has_finalizer(&object, lifecycle::FOREGROUND);
        Ok(if deleting { Owner::Waiting } else { Owner::Solid })
    }

    /// The dependent as stored, if it still exists.
    async fn stored(&self, state: &AppState, node: &Node) -> Result<Option<Value>, ApiError> {
        let Some(resource) = state.registry.find_kind(&node.api_version, &node.kind) else { return Ok(None) };
        let key = resource.key(node.namespace.as_deref(), &node.name);
        match state.store.get(&key).await.map_err(store_error)?.kv {
            Some(kv) => Ok(Some(objects::from_store(&kv)?)),
            None => Ok(None),
        }
    }

    async fn dependent(&mut self, state: &AppState, uid: &str) -> Result<(), ApiError> {
        let Some(node) = self.nodes.get(uid).cloned() else { return Ok(()) };
        if node.owners.is_empty() || (node.deleting && !node.deleting_dependents()) {
            return Ok(());
        }
        let (mut solid, mut unknown) = (false, false);
        let mut dropped = Vec::new();
        let mut waiting = false;
        for owner in &node.owners {
            match self.owner_state(state, &node, owner, uid).await? {
                Owner::Solid => solid = true,
                Owner::Unknown => unknown = true,
                Owner::Gone => dropped.push(owner.uid.clone()),
                Owner::Waiting => {
                    waiting = true;
                    dropped.push(owner.uid.clone());
                }
            }
        }
        if dropped.is_empty() {
            return Ok(());
        }
        let Some(resource) = state.registry.find_kind(&node.api_version, &node.kind) else { return Ok(()) };
        let target = ObjectTarget { resource: &resource, namespace: node.namespace.as_deref(), name: &node.name, subresource: None };
        if solid || unknown {
            // Others still own it: only the references to gone or deleting owners go.
            let options = WriteOptions::internal(COMPONENT);
            ops::modify(state, &target, &options, |object| {
                objects::meta_str(object, "uid") == Some(uid) && remove_owner_refs(object, &dropped)
            })
            .await?;
            return Ok(());
        }
        let propagation = if node.has(lifecycle::FOREGROUND) || node.has(lifecycle::ORPHAN) {
            None
        } else if waiting && self.dependents.contains_key(uid) {
            Some(Propagation::Foreground)
        } else {
            Some(Propagation::Background)
        };
        let options = DeleteOptions { propagation, uid: Some(uid.to_string()), ..Default::default() };
        match ops::delete(state, &target, &options).await {
            Ok(_) => Ok(()),
            Err(error) if error.reason == Reason::NotFound => Ok(()),
            // The uid precondition failed: a new object took the name; nothing to collect.
            Err(error) if error.reason == Reason::Conflict && error.message.contains("Precondition failed: UID") => Ok(()),
            Err(error) => Err(error),
        }
    }

    async fn foreground(&mut self, state: &AppState, uid: &str, queue: &mut Queue<Item>) -> Result<(), ApiError> {
        let Some(node) = self.nodes.get(uid).cloned() else { return Ok(()) };
        if !node.deleting_dependents() {
            return Ok(());
        }
        let blocking = self.dependents.get(uid).into_iter().flatten().any(|dependent| {
            self.nodes
                .get(dependent)
                .is_some_and(|d| d.owners.iter().any(|o| o.uid == uid && o.block))
        });
        if blocking {
            // Each dependent is deleted in turn; their removal wakes this owner again.
            self.wake_dependents(uid, queue);
            return Ok(());
        }
        self.wake_dependents(uid, queue);
        self.drop_finalizer(state, uid, &node, lifecycle::FOREGROUND).await
    }

    async fn orphan(&mut self, state: &AppState, uid: &str) -> Result<(), ApiError> {
        let Some(node) = self.nodes.get(uid).cloned() else { return Ok(()) };
        if !(node.deleting && node.has(lifecycle::ORPHAN)) {
            return Ok(());
        }
        let dependents: Vec<String> = self.dependents.get(uid).into_iter().flatten().cloned().collect();
        let options = WriteOptions::internal(COMPONENT);
        for dependent_uid in dependents {
            let Some(dependent) = self.nodes.get(&dependent_uid).cloned() else { continue };
            let Some(resource) = state.registry.find_kind(&dependent.api_version, &dependent.kind) else { continue };
            let target =
                ObjectTarget { resource: &resource, namespace: dependent.namespace.as_deref(), name: &dependent.name, subresource: None };
            let owner = [uid.to_string()];
            ops::modify(state, &target, &options, |object| {
                objects::meta_str(object, "uid") == Some(dependent_uid.as_str()) && remove_owner_refs(object, &owner)
            })
            .await?;
        }
        self.drop_finalizer(state, uid, &node, lifecycle::ORPHAN).await
    }

    async fn drop_finalizer(&self, state: &AppState, uid: &str, node: &Node, finalizer: &str) -> Result<(), ApiError> {
        let Some(resource) = state.registry.find_kind(&node.api_version, &node.kind) else { return Ok(()) };
        let target = ObjectTarget { resource: &resource, namespace: node.namespace.as_deref(), name: &node.name, subresource: None };
        ops::modify(state, &target, &WriteOptions::internal(COMPONENT), |object| {
            if objects::meta_str(object, "uid") != Some(uid) || !lifecycle::has_finalizer(object, finalizer) {
                return false;
            }
            let rest: Vec<String> = lifecycle::finalizers(object).into_iter().filter(|f| f != finalizer).collect();
            lifecycle::set_finalizers(object, &rest);
            true
        })
        .await?;
        Ok(())
    }
}

/// Removes the owner references with these uids; says whether any was there.
fn remove_owner_refs(object: &mut Value, uids: &[String]) -> bool {
    let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) else { return false };
    let Some(refs) = meta.get_mut("ownerReferences").and_then(Value::as_array_mut) else { return false };
    let before = refs.len();
    refs.retain(|r| !r["uid"].as_str().is_some_and(|u| uids.iter().any(|x| x == u)));
    let changed = refs.len() != before;
    if refs.is_empty() {
        meta.remove("ownerReferences");
    }
    changed
}

impl Reconciler for GarbageCollector {
    type Item = Item;

    fn name(&self) -> &'static str {
        "garbage-collector"
    }

    fn reset(&mut self) {
        self.nodes.clear();
        self.dependents.clear();
        self.by_key.clear();
    }

    fn observe(&mut self, event: &CacheEvent, queue: &mut Queue<Item>) {
        if event.kind == EventType::Deleted {
            let uid = objects::meta_str(&event.object, "uid").map(String::from).or_else(|| self.by_key.remove(&event.key));
            self.by_key.remove(&event.key);
            if let Some(uid) = uid
                && let Some(node) = self.forget(&uid)
            {
                self.wake_dependents(&uid, queue);
                self.wake_waiting_owners(&node, queue);
            }
            return;
        }
        let Some((uid, node)) = Node::from_object(&event.object) else { return };
        // A re-created object under the same key replaces the old one.
        if let Some(previous) = self.by_key.insert(event.key.clone(), uid.clone())
            && previous != uid
            && let Some(old) = self.forget(&previous)
        {
            self.wake_dependents(&previous, queue);
            self.wake_waiting_owners(&old, queue);
        }
        let before = self.forget(&uid);
        let owners_changed = before.as_ref().is_none_or(|b| b.owners != node.owners);
        let deleting_changed = before.as_ref().is_none_or(|b| b.deleting != node.deleting || b.finalizers != node.finalizers);
        if !node.owners.is_empty() && (owners_changed || deleting_changed) {
            queue.add(Item::Dependent(uid.clone()));
        }
        if deleting_changed && node.deleting_dependents() {
            queue.add(Item::Foreground(uid.clone()));
        }
        if deleting_changed && node.deleting && node.has(lifecycle::ORPHAN) {
            queue.add(Item::Orphan(uid.clone()));
        }
        if let Some(before) = &before
            && (owners_changed || deleting_changed)
        {
            self.wake_waiting_owners(before, queue);
        }
        self.wake_waiting_owners(&node, queue);
        self.remember(uid, node);
    }

    async fn reconcile(&mut self, state: &AppState, item: Item, queue: &mut Queue<Item>) -> Result<(), ApiError> {
        match item {
            Item::Dependent(uid) => self.dependent(state, &uid).await,
            Item::Foreground(uid) => self.foreground(state, &uid, queue).await,
            Item::Orphan(uid) => self.orphan(state, &uid).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn owner_references_are_removed_by_uid() {
        let mut object = json!({"metadata": {"ownerReferences": [{"uid": "a"}, {"uid": "b"}]}});
        assert!(remove_owner_refs(&mut object, &["a".to_string()]));
        assert_eq!(object["metadata"]["ownerReferences"], json!([{"uid": "b"}]));
        assert!(!remove_owner_refs(&mut object, &["z".to_string()]));
        assert!(remove_owner_refs(&mut object, &["b".to_string()]));
        assert!(object["metadata"].get("ownerReferences").is_none());
    }
}
