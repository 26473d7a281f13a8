//! The kinds the server serves: built-in ones, and (as CRDs are added) custom ones. Each is a
//! [`ResourceDef`] (defined in [`oxplane_machinery::resource`]): where it lives in the URL
//! space, in discovery, and in the store.

use std::sync::{Arc, RwLock};

pub use oxplane_machinery::resource::{ApplyTypes, CompiledSchema, ResourceDef, ScalePaths, builtins, version_priority};

/// Every served resource; lookups are by group, version and plural.
#[derive(Debug)]
pub struct Registry {
    resources: RwLock<Vec<Arc<ResourceDef>>>,
    /// Bumped on every change, so derived documents (OpenAPI) know when to rebuild.
    generation: std::sync::atomic::AtomicU64,
    /// Tells watchers of changes (a watch on a kind no longer served ends).
    notify: tokio::sync::watch::Sender<u64>,
}

impl Default for Registry {
    fn default() -> Self {
        Registry { resources: RwLock::default(), generation: Default::default(), notify: tokio::sync::watch::Sender::new(0) }
    }
}

impl Registry {
    /// A registry holding the built-in kinds.
    pub fn with_builtins() -> Self {
        Registry { resources: RwLock::new(builtins().into_iter().map(Arc::new).collect()), ..Default::default() }
    }

    /// Changes whenever the served resources change.
    pub fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn changed(&self) {
        let generation = self.generation.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        self.notify.send_replace(generation);
    }

    /// A receiver that wakes on every change of the served resources.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.notify.subscribe()
    }

    /// Whether `resource` is still served as it was (same group, version, plural and CRD).
    pub fn still_serves(&self, resource: &ResourceDef) -> bool {
        self.get(&resource.group, &resource.version, &resource.plural).is_some_and(|r| r.crd == resource.crd)
    }

    /// Serves the resources of CRD `crd` (replacing what it served before), unless their
    /// plural or kind is already served in the group by something else; then returns why.
    pub fn set_custom(&self, crd: &str, defs: Vec<ResourceDef>) -> Result<(), String> {
        let mut resources = self.resources.write().unwrap_or_else(|p| p.into_inner());
        for def in &defs {
            if let Some(other) = resources.iter().find(|r| {
                r.crd.as_deref() != Some(crd) && r.group == def.group && (r.plural == def.plural || r.kind == def.kind)
            }) {
                return Err(format!("\"{}\" is already in use by {}", def.plural, other.crd.as_deref().unwrap_or("a built-in kind")));
            }
        }
        let replaced: Vec<Arc<ResourceDef>> = defs.into_iter().map(Arc::new).collect();
        let before: Vec<&Arc<ResourceDef>> = resources.iter().filter(|r| r.crd.as_deref() == Some(crd)).collect();
        if before.len() == replaced.len() && before.iter().zip(&replaced).all(|(a, b)| a == &b) {
            return Ok(());
        }
        resources.retain(|r| r.crd.as_deref() != Some(crd));
        resources.extend(replaced);
        drop(resources);
        self.changed();
        Ok(())
    }

    /// Stops serving the resources of CRD `crd`.
    pub fn remove_custom(&self, crd: &str) {
        self.resources.write().unwrap_or_else(|p| p.into_inner()).retain(|r| r.crd.as_deref() != Some(crd));
        self.changed();
    }

    /// The resource served at `group/version/plural`.
    pub fn get(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceDef>> {
        // Every request looks up its resource: search under the lock, clone only the match.
        let resources = self.resources.read().unwrap_or_else(|p| p.into_inner());
        resources.iter().find(|r| r.group == group && r.version == version && r.plural == plural).cloned()
    }

    /// The resource of objects with this `apiVersion` and `kind`; when that version is not
    /// served, any served version of the same group and kind (they share storage).
    pub fn find_kind(&self, api_version: &str, kind: &str) -> Option<Arc<ResourceDef>> {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let resources = self.resources.read().unwrap_or_else(|p| p.into_inner());
        let same_kind = |r: &&Arc<ResourceDef>| r.group == group && r.kind == kind;
        resources
            .iter()
            .filter(same_kind)
            .find(|r| r.version == version)
            .or_else(|| resources.iter().find(same_kind))
            .cloned()
    }

    /// One served resource per storage (the first served version of each); review kinds,
    /// which store nothing, are left out.
    pub fn by_storage(&self) -> Vec<Arc<ResourceDef>> {
        let mut seen = std::collections::HashSet::new();
        self.all().into_iter().filter(|r| !r.create_only && seen.insert(r.storage.clone())).collect()
    }

    /// Every served resource.
    pub fn all(&self) -> Vec<Arc<ResourceDef>> {
        self.resources.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The served groups (core, named "", first) with their versions in preference order.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut groups: Vec<(String, Vec<String>)> = Vec::new();
        for (group, version) in self.group_versions() {
            match groups.iter_mut().find(|(g, _)| *g == group) {
                Some((_, versions)) => versions.push(version),
                None => groups.push((group, vec![version])),
            }
        }
        groups
    }

    /// The served group-versions, in a stable order: core first, then by group; within a group
    /// by Kubernetes' version priority, so the first is the group's preferred version.
    pub fn group_versions(&self) -> Vec<(String, String)> {
        let mut gvs: Vec<(String, String)> = Vec::new();
        for r in self.all() {
            let gv = (r.group.clone(), r.version.clone());
            if !gvs.contains(&gv) {
                gvs.push(gv);
            }
        }
        gvs.sort_by(|a, b| (!a.0.is_empty(), &a.0).cmp(&(!b.0.is_empty(), &b.0)).then_with(|| version_priority(&a.1, &b.1)));
        gvs
    }
}
