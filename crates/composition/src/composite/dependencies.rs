//! Realtime composition: which kinds each composite depends on (what it composes and what
//! its functions require), and a watch per kind, counted. A composite records its kinds
//! before it creates anything of them, so the watch exists before the first change it must
//! see; a kind's watch is released only when no composite of this controller depends on it
//! any more. The index is rebuilt from the composites' persisted `resourceRefs` on a timer,
//! so a missed update heals itself without a restart — nothing is ever stopped on a guess.
//!
//! A change wakes the composite that controls the changed object, and every composite whose
//! functions required it last time (by name or by labels), so a changed EnvironmentConfig or
//! other required resource is seen at once — through each composite's watch circuit breaker
//! (Crossplane's `Responsive` condition), which holds back a flood of events from a fight over
//! a watched object and wakes the composite for the held ones at its next probe. Deletions and
//! changes to objects being deleted always go through: they are one-way and may be the last
//! event the composite gets. An event for a composite already waiting in the queue is not
//! charged either: it costs no reconcile, so a composite whose many resources report in at
//! once (a large composition coming up) is not mistaken for a fight.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, Weak};

use oxplane_functions::protocol::{Match, ResourceSelector};
use oxplane_runtime::circuit::{Breaker, Verdict};
use oxplane_runtime::controller::Controller;
use oxplane_runtime::kinds::{Gvk, Kind};
use oxplane_runtime::object::{self, ObjectKey};
use oxplane_runtime::watches::{Informer, WatchEvent, WatchHandle, Watches};
use serde_json::Value;

#[derive(Default)]
struct Index {
    by_composite: HashMap<ObjectKey, BTreeSet<Gvk>>,
    counts: HashMap<Gvk, usize>,
    handles: HashMap<Gvk, WatchHandle>,
    /// What each composite's functions required in its last reconcile.
    required: HashMap<ObjectKey, Vec<ResourceSelector>>,
}

/// The dependency index and the watches it holds, for one XR controller.
pub struct Dependencies {
    watches: Watches,
    xr_kind: Kind,
    /// The composites' watch circuit breaker.
    pub breaker: Breaker,
    controller: Mutex<Weak<Controller>>,
    index: Mutex<Index>,
}

impl Dependencies {
    /// An empty index for composites of `xr_kind`, whose watch events pass `breaker`.
    pub fn new(watches: Watches, xr_kind: Kind, breaker: Breaker) -> Arc<Self> {
        Arc::new(Dependencies { watches, xr_kind, breaker, controller: Mutex::new(Weak::new()), index: Mutex::new(Index::default()) })
    }

    /// The controller whose queue watch events feed.
    pub fn attach(&self, controller: &Arc<Controller>) {
        *self.controller.lock().unwrap_or_else(|p| p.into_inner()) = Arc::downgrade(controller);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records that `composite` depends on exactly `kinds`, starting watches for new kinds
    /// (before this returns) and releasing kinds nothing depends on any more.
    pub fn set(self: &Arc<Self>, composite: &ObjectKey, kinds: BTreeSet<Gvk>) {
        let Some(controller) = self.controller.lock().unwrap_or_else(|p| p.into_inner()).upgrade() else { return };
        let mut index = self.lock();
        let old = index.by_composite.remove(composite).unwrap_or_default();
        for gvk in kinds.difference(&old) {
            *index.counts.entry(gvk.clone()).or_insert(0) += 1;
        }
        for gvk in old.difference(&kinds) {
            if let Some(count) = index.counts.get_mut(gvk) {
                *count = count.saturating_sub(1);
            }
        }
        if !kinds.is_empty() {
            index.by_composite.insert(composite.clone(), kinds);
        }
        self.reconcile_watches(index, &controller);
    }

    /// Adds kinds `composite` depends on, keeping those it has (a pipeline that failed still
    /// watches what it required, so the change that heals it is seen).
    pub fn extend(self: &Arc<Self>, composite: &ObjectKey, kinds: BTreeSet<Gvk>) {
        let mut all = self.lock().by_composite.get(composite).cloned().unwrap_or_default();
        if kinds.is_subset(&all) {
            return;
        }
        all.extend(kinds);
        self.set(composite, all);
    }

    /// Records what `composite`'s functions required (their kinds must be in its `set` too).
    pub fn require(&self, composite: &ObjectKey, selectors: Vec<ResourceSelector>) {
        let mut index = self.lock();
        if selectors.is_empty() {
            index.required.remove(composite);
        } else {
            index.required.insert(composite.clone(), selectors);
        }
    }

    /// Forgets a composite that is gone.
    pub fn forget(self: &Arc<Self>, composite: &ObjectKey) {
        self.require(composite, Vec::new());
        self.set(composite, BTreeSet::new());
        self.breaker.reset(composite);
    }

    /// Queues `composite` for a reconcile after `delay`.
    pub fn wake_after(&self, composite: &ObjectKey, delay: std::time::Duration) {
        if let Some(controller) = self.controller.lock().unwrap_or_else(|p| p.into_inner()).upgrade() {
            controller.queue().add_after(composite.clone(), delay);
        }
    }

    /// The composites an event on `object` wakes now; those whose circuit is open are queued
    /// for their next probe instead.
    fn through_breaker(&self, keys: Vec<ObjectKey>, object: &Value) -> Vec<ObjectKey> {
        if object::is_deleting(object) {
            return keys;
        }
        let source = event_source(object);
        let pending = |key: &ObjectKey| {
            let controller = self.controller.lock().unwrap_or_else(|p| p.into_inner()).upgrade();
            controller.is_some_and(|c| c.queue().is_pending(key))
        };
        keys.into_iter()
            .filter(|key| pending(key) || match self.breaker.admit(key, &source) {
                Verdict::Allowed | Verdict::Probe => true,
                Verdict::Held(after) => {
                    self.wake_after(key, after);
                    false
                }
            })
            .collect()
    }

    /// Composites whose last reconcile required `object` (of kind `gvk`).
    fn requiring(&self, gvk: &Gvk, object: &Value) -> Vec<ObjectKey> {
        let index = self.lock();
        index
            .required
            .iter()
            .filter(|(_, selectors)| selectors.iter().any(|selector| selects(selector, gvk, object)))
            .map(|(key, _)| key.clone())
            .collect()
    }

    /// Starts the watches counted kinds need and drops those of kinds counted zero. Takes the
    /// index lock's guard and releases it before subscribing: a new subscription replays what
    /// its informer knows into our mapper, which reads the index.
    fn reconcile_watches(self: &Arc<Self>, mut index: std::sync::MutexGuard<'_, Index>, controller: &Arc<Controller>) {
        index.counts.retain(|_, count| *count > 0);
        let Index { counts, handles, .. } = &mut *index;
        let released: Vec<WatchHandle> = {
            let gone: Vec<Gvk> = handles.keys().filter(|g| !counts.contains_key(*g)).cloned().collect();
            gone.iter().filter_map(|g| handles.remove(g)).collect()
        };
        let missing: Vec<Gvk> = counts.keys().filter(|g| !handles.contains_key(*g)).cloned().collect();
        drop(index);
        drop(released);
        for gvk in missing {
            let weak = Arc::downgrade(self);
            let xr_kind = self.xr_kind.clone();
            let watched = gvk.clone();
            let handle = controller.subscribe_mapped(&self.watches, &gvk, move |event| {
                let Some(dependencies) = weak.upgrade() else { return Vec::new() };
                match event {
                    WatchEvent::Applied { new, old } => {
                        let mut keys: Vec<ObjectKey> = owner_key(&xr_kind, new).into_iter().collect();
                        keys.extend(dependencies.requiring(&watched, new));
                        // A label change can move an object out of a selection.
                        if let Some(old) = old {
                            keys.extend(dependencies.requiring(&watched, old));
                        }
                        keys.sort();
                        keys.dedup();
                        dependencies.through_breaker(keys, new)
                    }
                    WatchEvent::Deleted(old) => {
                        let mut keys: Vec<ObjectKey> = owner_key(&xr_kind, old).into_iter().collect();
                        keys.extend(dependencies.requiring(&watched, old));
                        keys
                    }
                    // The kind stopped (or started) being served: every dependent must say so.
                    WatchEvent::State(_) => dependencies.dependents(&watched),
                }
            });
            let mut index = self.lock();
            if index.counts.contains_key(&gvk) && !index.handles.contains_key(&gvk) {
                index.handles.insert(gvk, handle);
            }
        }
    }

    /// Drops every watch and forgets every composite.
    pub fn clear(&self) {
        let handles = {
            let mut index = self.lock();
            index.by_composite.clear();
            index.counts.clear();
            std::mem::take(&mut index.handles)
        };
        drop(handles);
    }

    /// Composites that depend on a kind.
    pub fn dependents(&self, gvk: &Gvk) -> Vec<ObjectKey> {
        self.lock().by_composite.iter().filter(|(_, kinds)| kinds.contains(gvk)).map(|(key, _)| key.clone()).collect()
    }

    /// The informer of a watched kind (to read composed resources from memory).
    pub fn informer(&self, gvk: &Gvk) -> Option<Arc<Informer>> {
        self.lock().handles.get(gvk).map(|h| h.informer().clone())
    }

    /// Kinds watched, with how many composites depend on each.
    pub fn counts(&self) -> Vec<(Gvk, usize)> {
        let mut counts: Vec<(Gvk, usize)> = self.lock().counts.iter().map(|(g, c)| (g.clone(), *c)).collect();
        counts.sort();
        counts
    }

    /// Rebuilds the index from composites as stored (their `resourceRefs` are written before
    /// anything they name is created), keeping the required kinds each already recorded.
    pub fn reassert(self: &Arc<Self>, composites: &[Arc<Value>], refs_pointer: &str) {
        let Some(controller) = self.controller.lock().unwrap_or_else(|p| p.into_inner()).upgrade() else { return };
        let mut rebuilt: HashMap<ObjectKey, BTreeSet<Gvk>> = HashMap::new();
        for composite in composites {
            let Some(key) = ObjectKey::of(composite) else { continue };
            let kinds: BTreeSet<Gvk> = composite
                .pointer(refs_pointer)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|r| Some(Gvk::from_api_version(r.get("apiVersion")?.as_str()?, r.get("kind")?.as_str()?)))
                .collect();
            rebuilt.insert(key, kinds);
        }
        let mut index = self.lock();
        for (key, kinds) in index.by_composite.iter() {
            if let Some(entry) = rebuilt.get_mut(key) {
                // Required kinds are not in resourceRefs: keep what the last reconcile found.
                entry.extend(kinds.iter().cloned());
            }
        }
        rebuilt.retain(|_, kinds| !kinds.is_empty());
        let mut counts: HashMap<Gvk, usize> = HashMap::new();
        for kinds in rebuilt.values() {
            for gvk in kinds {
                *counts.entry(gvk.clone()).or_insert(0) += 1;
            }
        }
        index.required.retain(|key, _| rebuilt.contains_key(key));
        index.by_composite = rebuilt;
        index.counts = counts;
        self.reconcile_watches(index, &controller);
    }
}

/// How an event's object is named in the `Responsive` condition: `Kind/name`, with
/// ` (namespace)` for a namespaced one.
fn event_source(object: &Value) -> String {
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or_default();
    let name = object::name(object).unwrap_or_default();
    match object::namespace(object) {
        Some(namespace) => format!("{kind}/{name} ({namespace})"),
        None => format!("{kind}/{name}"),
    }
}

/// Whether a requirement selects `object` of kind `gvk`: same group and kind, in the asked
/// namespace (any when none), with the asked name or all the asked labels.
fn selects(selector: &ResourceSelector, gvk: &Gvk, object: &Value) -> bool {
    let wanted = Gvk::from_api_version(&selector.api_version, &selector.kind);
    if wanted.group != gvk.group || wanted.kind != gvk.kind {
        return false;
    }
    if let Some(namespace) = selector.namespace.as_deref().filter(|ns| !ns.is_empty())
        && object::namespace(object) != Some(namespace)
    {
        return false;
    }
    match &selector.matching {
        Match::Name(name) => object::name(object) == Some(name.as_str()),
        Match::Labels(labels) => labels.iter().all(|(key, value)| object::label(object, key) == Some(value.as_str())),
    }
}

/// The key of the composite of `xr_kind` that controls `composed`, if any.
fn owner_key(xr_kind: &Kind, composed: &Value) -> Option<ObjectKey> {
    let owner = object::controller_ref(composed)?;
    if owner.get("kind").and_then(Value::as_str) != Some(xr_kind.gvk.kind.as_str()) {
        return None;
    }
    let owner_group = owner.get("apiVersion").and_then(Value::as_str).map(|v| Gvk::from_api_version(v, "").group)?;
    if owner_group != xr_kind.gvk.group {
        return None;
    }
    let name = owner.get("name").and_then(Value::as_str)?;
    // A namespaced composite composes only in its own namespace.
    let namespace = if xr_kind.namespaced { object::namespace(composed) } else { None };
    Some(ObjectKey::new(namespace, name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn event_sources_are_named_as_crossplane_names_them() {
        assert_eq!(event_source(&json!({"kind": "NopResource", "metadata": {"name": "a"}})), "NopResource/a");
        assert_eq!(event_source(&json!({"kind": "ConfigMap", "metadata": {"name": "b", "namespace": "team"}})), "ConfigMap/b (team)");
    }
}
