//! OpenAPI v3 as served: `/openapi/v3` (an index of group-versions, each with a content hash)
//! and one document per group-version, built by [`oxplane_machinery::openapi`] and cached per
//! registry generation, so a hash only changes when a served kind changes.

pub use oxplane_machinery::openapi::{builtin, component_name, gv_path, v2};

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use oxplane_machinery::openapi::build;
use serde_json::{Map, Value, json};

use crate::registry::{Registry, ResourceDef};

/// Cached documents, keyed by `api/v1` or `apis/<group>/<version>`.
#[derive(Default)]
pub struct OpenApi {
    cache: Mutex<HashMap<String, (u64, Bytes, String)>>,
}

fn hash_of(bytes: &[u8]) -> String {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut hasher);
    format!("{:016X}", hasher.finish())
}

impl OpenApi {
    /// The document of one group-version, and its hash; `None` if nothing is served there.
    pub fn document(&self, registry: &Registry, group: &str, version: &str) -> Option<(Bytes, String)> {
        let path = gv_path(group, version);
        let generation = registry.generation();
        if let Some((cached_generation, bytes, hash)) = self.cache.lock().unwrap_or_else(|p| p.into_inner()).get(&path)
            && *cached_generation == generation
        {
            return Some((bytes.clone(), hash.clone()));
        }
        let resources: Vec<Arc<ResourceDef>> =
            registry.all().into_iter().filter(|r| r.group == group && r.version == version).collect();
        if resources.is_empty() {
            return None;
        }
        let bytes = Bytes::from(build(&resources).to_string());
        let hash = hash_of(&bytes);
        self.cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(path, (generation, bytes.clone(), hash.clone()));
        Some((bytes, hash))
    }

    /// The index: every served group-version with the URL of its current document.
    pub fn index(&self, registry: &Registry) -> Value {
        let mut paths = Map::new();
        for (group, version) in registry.group_versions() {
            if let Some((_, hash)) = self.document(registry, &group, &version) {
                let path = gv_path(&group, &version);
                paths.insert(path.clone(), json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={hash}")}));
            }
        }
        json!({"paths": paths})
    }
}

