//! The observed state of a composite resource, as its functions are told it: the composite,
//! and each composed resource its references name that it controls, with connection details.

use std::collections::BTreeMap;

use oxplane_functions::protocol::{Ready, Resource, State};
use oxplane_runtime::Runtime;
use oxplane_runtime::kinds::{Gvk, Kind, KindError};
use oxplane_runtime::object::{self, ObjectKey};
use serde_json::Value;

use super::compose::ANNOTATION_RESOURCE_NAME;
use super::shape::XrType;

/// Why the observed state could not be read: the message, and the composed kind (and
/// namespace) a read was refused for by RBAC, if that was it.
#[derive(Debug)]
pub struct ObserveError {
    pub(crate) message: String,
    pub(crate) refused: Option<(Kind, Option<String>)>,
}

impl std::fmt::Display for ObserveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<String> for ObserveError {
    fn from(message: String) -> Self {
        ObserveError { message, refused: None }
    }
}

/// The observed state of `xr`: the composite, and each composed resource its references name
/// that it controls (from `cached` when it has it, else read), with their connection details;
/// also the composed objects by composition resource name.
pub async fn observe(
runtime: &Runtime,
xr_type: &XrType,
xr: &Value,
cached: &(dyn Fn(&Gvk, &ObjectKey) -> Option<Value> + Sync),
) -> Result<(State, BTreeMap<String, Value>), ObserveError> {
    let mut resources = BTreeMap::new();
    let mut objects = BTreeMap::new();
    let uid = object::uid(xr).unwrap_or_default();
    for reference in xr_type.field(xr, "resourceRefs").and_then(Value::as_array).into_iter().flatten() {
        let (Some(api_version), Some(kind), Some(name)) = (
            reference.get("apiVersion").and_then(Value::as_str),
            reference.get("kind").and_then(Value::as_str),
            reference.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()),
        ) else {
            continue;
        };
        let gvk = Gvk::from_api_version(api_version, kind);
        let namespace = if xr_type.kind.namespaced {
            object::namespace(xr).map(str::to_string)
        } else {
            reference.get("namespace").and_then(Value::as_str).map(str::to_string)
        };
        let kind = match runtime.watches.kinds().resolve(&gvk).await {
            Ok(kind) => kind,
            Err(error @ KindError::NotServed { .. }) => return Err(format!("cannot observe composed resource {name:?}: {error}").into()),
            Err(error) => return Err(error.to_string().into()),
        };
        let key = ObjectKey::new(namespace.as_deref().filter(|_| kind.namespaced), name);
        let composed = match cached(&gvk, &key) {
            Some(object) => object,
            // Read while its cache syncs: observed as the cache would hold it.
            None => match runtime.kube.get(&kind, key.namespace.as_deref(), name).await {
                Ok(Some(mut object)) => {
                    object::strip_managed_fields(&mut object);
                    object
                }
                Ok(None) => continue,
                Err(error) => {
                    let refused = error.is_forbidden().then(|| (kind.clone(), key.namespace.clone()));
                    return Err(ObserveError { message: format!("cannot get composed resource {name:?}: {error}"), refused });
                }
            },
        };
        if object::controller_uid(&composed) != Some(uid) {
            continue;
        }
        let Some(resource_name) = object::annotation(&composed, ANNOTATION_RESOURCE_NAME).map(str::to_string) else {
            return Err(format!("encountered composed resource without required {ANNOTATION_RESOURCE_NAME:?} annotation").into());
        };
        let details = match oxplane_runtime::managed::connection::secret_ref(&composed) {
            Some(Ok((namespace, secret))) => {
                oxplane_runtime::managed::connection::read_secret(&runtime.kube, &namespace, &secret).await.ok().flatten().unwrap_or_default()
            }
            _ => Default::default(),
        };
        resources.insert(resource_name.clone(), Resource { resource: composed.clone(), connection_details: details, ready: Ready::Unspecified });
        objects.insert(resource_name, composed);
    }
    // A legacy composite's own connection details are what its Secret holds.
    let composite_details = match xr_type.legacy.then(|| oxplane_runtime::managed::connection::secret_ref(xr)).flatten() {
        Some(Ok((namespace, secret))) => {
            oxplane_runtime::managed::connection::read_secret(&runtime.kube, &namespace, &secret).await.ok().flatten().unwrap_or_default()
        }
        _ => Default::default(),
    };
    let state = State { composite: Some(Resource { resource: xr.clone(), connection_details: composite_details, ..Default::default() }), resources };
    Ok((state, objects))
}
