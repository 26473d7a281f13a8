//! Connection details: taking them from observed composed resources into the XR's, and, for
//! a modern XR (which has no connection secret of its own), composing the `Secret` that holds
//! them.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde_json::{Map, Value, json};

use super::compile::{ConnectionDetail, SecretRef};
use super::patches;
use crate::fieldpath::FieldPath;
use crate::golang::json::marshal;
use crate::golang::value::as_float64;
use crate::protocol::Resource;

/// The `type` of a composed connection secret.
pub const CONNECTION_SECRET_TYPE: &str = "connection.crossplane.io/v1alpha1";

/// The XR connection details `details` take from an observed composed resource. A key that
/// is not there yet is left out: it may be written later.
pub(crate) fn extract(observed: &Resource, details: &[ConnectionDetail]) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for detail in details {
        match detail {
            ConnectionDetail::FromValue { name, value } => {
                out.insert(name.clone(), value.as_bytes().to_vec());
            }
            ConnectionDetail::FromConnectionSecretKey { name, key } => {
                if let Some(v) = observed.connection_details.get(key) {
                    out.insert(name.clone(), v.clone());
                }
            }
            ConnectionDetail::FromFieldPath { name, path } => {
                let found = FieldPath::parse(path).ok().and_then(|p| p.get(&observed.resource).ok().cloned());
                match found {
                    Some(Value::String(s)) => {
                        out.insert(name.clone(), s.into_bytes());
                    }
                    // Anything else is written as Go's JSON of the value.
                    Some(other) => {
                        out.insert(name.clone(), marshal(&as_float64(other)).into_bytes());
                    }
                    None => {}
                }
            }
        }
    }
    out
}

/// Whether the XR is a modern (v2) one: its Crossplane fields live under `spec.crossplane`.
pub(crate) fn is_modern(xr: &Value) -> bool {
    xr.pointer("/spec/crossplane").is_some()
}

/// The composition resource name of a modern XR's connection secret.
pub(crate) fn secret_resource_name(xr: &Value) -> String {
    format!("{}-connection-secret", string_at(xr, "/metadata/name").unwrap_or_default())
}

fn string_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// The `Secret` holding a modern XR's connection details. Its name is the XR's own
/// `spec.writeConnectionSecretToRef.name`, else the input's `writeConnectionSecretToRef`
/// (after its patches), else `<xr-name>-connection`; it lives in the XR's namespace (for a
/// cluster-scoped XR, the namespace of the reference used).
pub(crate) fn compose_secret(
    xr: &Value,
    details: &BTreeMap<String, Vec<u8>>,
    input_ref: Option<&SecretRef>,
) -> Result<Value, String> {
    let xr_name = string_at(xr, "/metadata/name").unwrap_or_default();
    let (name, ref_namespace) = if let Some(name) = string_at(xr, "/spec/writeConnectionSecretToRef/name") {
        (name.to_string(), string_at(xr, "/spec/writeConnectionSecretToRef/namespace").map(str::to_string))
    } else {
        let from_input = match input_ref {
            Some(r) => patched_ref(xr, r)?,
            None => (None, None),
        };
        match from_input {
            (Some(name), namespace) => (name, namespace),
            (None, namespace) => (format!("{xr_name}-connection"), namespace),
        }
    };
    let namespace = string_at(xr, "/metadata/namespace").map(str::to_string).or(ref_namespace);
    let mut metadata = Map::new();
    metadata.insert("name".into(), Value::String(name));
    if let Some(ns) = namespace {
        metadata.insert("namespace".into(), Value::String(ns));
    }
    let data: Map<String, Value> = details
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(base64::engine::general_purpose::STANDARD.encode(v))))
        .collect();
    Ok(json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata,
        "type": CONNECTION_SECRET_TYPE,
        "data": data,
    }))
}

/// The input's reference after its patches from the XR: (name, namespace), empty as none.
fn patched_ref(xr: &Value, r: &SecretRef) -> Result<(Option<String>, Option<String>), String> {
    let mut object = Map::new();
    if let Some(name) = &r.name {
        object.insert("name".into(), Value::String(name.clone()));
    }
    if let Some(ns) = &r.namespace {
        object.insert("namespace".into(), Value::String(ns.clone()));
    }
    let mut object = Value::Object(object);
    for (index, patch) in r.patches.iter().enumerate() {
        match patches::apply(patch, xr, &mut object) {
            Ok(()) => {}
            // A missing source leaves the reference as it is, whatever the policy: there is
            // no resource whose creation a Required policy could hold back.
            Err(e) if e.is_not_found() => {}
            Err(e) => {
                return Err(format!(
                    "cannot render connection secret reference {:?} patch at index {index}: {e}",
                    patch.patch_type.name()
                ));
            }
        }
    }
    let get =
        |key: &str| object.get(key).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string);
    Ok((get("name"), get("namespace")))
}
