//! Kinds by `apiVersion` and `kind`, and how they are served: the plural in URLs and the
//! scope, found through discovery and cached. A kind that is not served is a first-class
//! answer ([`KindError::NotServed`]) with a message naming the kind, never a timeout.

use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;

use serde_json::Value;

use crate::client::{ApiError, Kube};

/// A group, version and kind.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Gvk {
    /// The API group (`""` for the core group).
    pub group: String,
    /// The version.
    pub version: String,
    /// The kind.
    pub kind: String,
}

impl Gvk {
    /// A kind from its parts.
    pub fn new(group: impl Into<String>, version: impl Into<String>, kind: impl Into<String>) -> Self {
        Gvk { group: group.into(), version: version.into(), kind: kind.into() }
    }

    /// A kind from an object's `apiVersion` (`group/version` or `version`) and `kind`.
    pub fn from_api_version(api_version: &str, kind: &str) -> Self {
        match api_version.split_once('/') {
            Some((group, version)) => Gvk::new(group, version, kind),
            None => Gvk::new("", api_version, kind),
        }
    }

    /// The kind of a JSON object, if it says.
    pub fn of(object: &Value) -> Option<Self> {
        let api_version = object.get("apiVersion")?.as_str()?;
        let kind = object.get("kind")?.as_str()?;
        Some(Gvk::from_api_version(api_version, kind))
    }

    /// `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }
}

/// Printed the way Kubernetes prints a GroupVersionKind: `nop.crossplane.io/v1alpha1, Kind=NopResource`.
impl fmt::Display for Gvk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}, Kind={}", self.api_version(), self.kind)
    }
}

/// A served kind: where it lives in URLs and whether its objects live in namespaces.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Kind {
    /// Group, version and kind.
    pub gvk: Gvk,
    /// The resource name in URLs.
    pub plural: String,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
}

impl Kind {
    /// A kind whose plural and scope are known (built-in kinds, kinds a controller defines).
    pub fn new(group: &str, version: &str, kind: &str, plural: &str, namespaced: bool) -> Self {
        Kind { gvk: Gvk::new(group, version, kind), plural: plural.to_string(), namespaced }
    }

    /// The URL path of the collection: in `namespace`, or across all namespaces when `None`
    /// (and always for cluster-scoped kinds).
    pub fn collection_path(&self, namespace: Option<&str>) -> String {
        let base = if self.gvk.group.is_empty() {
            format!("/api/{}", self.gvk.version)
        } else {
            format!("/apis/{}/{}", self.gvk.group, self.gvk.version)
        };
        match namespace.filter(|_| self.namespaced) {
            Some(ns) => format!("{base}/namespaces/{ns}/{}", self.plural),
            None => format!("{base}/{}", self.plural),
        }
    }

    /// `apiVersion` of the kind.
    pub fn api_version(&self) -> String {
        self.gvk.api_version()
    }

    /// The kind a CustomResourceDefinition serves at its storage version.
    pub fn of_crd(crd: &Value) -> Option<Kind> {
        let spec = crd.get("spec")?;
        let version = spec.get("versions")?.as_array()?.iter().find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))?;
        Some(Kind::new(
            spec.get("group")?.as_str()?,
            version.get("name")?.as_str()?,
            spec.pointer("/names/kind")?.as_str()?,
            spec.pointer("/names/plural")?.as_str()?,
            spec.get("scope")?.as_str()? == "Namespaced",
        ))
    }
}

/// Why a kind could not be resolved.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KindError {
    /// Discovery does not list the kind: its CRD is missing or not established.
    #[error("{gvk} is not served (CRD not found)")]
    NotServed {
        /// The kind asked for.
        gvk: Gvk,
    },
    /// Discovery itself failed.
    #[error("cannot discover {gvk}: {error}")]
    Discovery {
        /// The kind asked for.
        gvk: Gvk,
        /// What went wrong.
        error: ApiError,
    },
}

/// Resolves kinds through discovery, caching what it finds.
pub struct KindResolver {
    kube: Kube,
    cache: Mutex<HashMap<Gvk, Kind>>,
}

impl KindResolver {
    /// A resolver over a client.
    pub fn new(kube: Kube) -> Self {
        KindResolver { kube, cache: Mutex::new(HashMap::new()) }
    }

    /// Remembers a kind whose plural and scope are known, so it is never discovered.
    pub fn insert(&self, kind: Kind) {
        self.lock().insert(kind.gvk.clone(), kind);
    }

    /// The served kind, from the cache or from discovery.
    pub async fn resolve(&self, gvk: &Gvk) -> Result<Kind, KindError> {
        if let Some(kind) = self.lock().get(gvk) {
            return Ok(kind.clone());
        }
        let path = if gvk.group.is_empty() {
            format!("/api/{}", gvk.version)
        } else {
            format!("/apis/{}/{}", gvk.group, gvk.version)
        };
        let list = match self.kube.get_path(&path).await {
            Ok(list) => list,
            Err(error) if error.is_not_found() => return Err(KindError::NotServed { gvk: gvk.clone() }),
            Err(error) => return Err(KindError::Discovery { gvk: gvk.clone(), error }),
        };
        let found = list["resources"].as_array().into_iter().flatten().find(|r| {
            r["kind"].as_str() == Some(gvk.kind.as_str()) && r["name"].as_str().is_some_and(|n| !n.contains('/'))
        });
        let Some(resource) = found else {
            return Err(KindError::NotServed { gvk: gvk.clone() });
        };
        let kind = Kind {
            gvk: gvk.clone(),
            plural: resource["name"].as_str().unwrap_or_default().to_string(),
            namespaced: resource["namespaced"].as_bool().unwrap_or(false),
        };
        self.lock().insert(gvk.clone(), kind.clone());
        Ok(kind)
    }

    /// Forgets a kind, so the next [`KindResolver::resolve`] asks discovery again (after the
    /// kind was found not to be served, or may have changed).
    pub fn forget(&self, gvk: &Gvk) {
        self.lock().remove(gvk);
    }

    /// Forgets every kind of a group (its CRDs changed).
    pub fn forget_group(&self, group: &str) {
        self.lock().retain(|gvk, _| gvk.group != group);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Gvk, Kind>> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_names() {
        let nop = Kind::new("nop.crossplane.io", "v1alpha1", "NopResource", "nopresources", false);
        assert_eq!(nop.collection_path(Some("ignored")), "/apis/nop.crossplane.io/v1alpha1/nopresources");
        let cm = Kind::new("", "v1", "ConfigMap", "configmaps", true);
        assert_eq!(cm.collection_path(Some("a")), "/api/v1/namespaces/a/configmaps");
        assert_eq!(cm.collection_path(None), "/api/v1/configmaps");
        assert_eq!(nop.gvk.to_string(), "nop.crossplane.io/v1alpha1, Kind=NopResource");
        assert_eq!(Gvk::from_api_version("v1", "Secret"), Gvk::new("", "v1", "Secret"));
        assert_eq!(Gvk::from_api_version("a.b/v2", "X").api_version(), "a.b/v2");
    }
}
