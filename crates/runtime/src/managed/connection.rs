//! Publishing connection details to the Secret a managed resource names in
//! `spec.writeConnectionSecretToRef`: type `connection.crossplane.io/v1alpha1`, controlled by
//! the managed resource (so it goes when the resource goes). Publishing is additive — keys
//! are never removed — and a Secret whose data would not change is not written.

use base64::Engine;
use serde_json::{Map, Value, json};

use super::external::ConnectionDetails;
use crate::client::{ApiError, Kube};
use crate::kinds::Kind;
use crate::object;

/// The type of connection Secrets.
pub const SECRET_TYPE: &str = "connection.crossplane.io/v1alpha1";

/// The Secret kind.
pub fn secret_kind() -> Kind {
    Kind::new("", "v1", "Secret", "secrets", true)
}

/// Why details could not be published.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// The Secret exists and another object controls it.
    #[error("cannot publish connection details: secret {namespace}/{name} is controlled by another object")]
    NotControlled {
        /// The Secret's namespace.
        namespace: String,
        /// The Secret's name.
        name: String,
    },
    /// The reference names no namespace and the resource has none.
    #[error("cannot publish connection details: writeConnectionSecretToRef has no namespace")]
    NoNamespace,
    /// The API refused.
    #[error("cannot publish connection details: {0}")]
    Api(#[from] ApiError),
}

/// Where `owner` wants its connection Secret: `(namespace, name)`. Namespaced resources write
/// into their own namespace; cluster-scoped ones name the namespace in the reference.
pub fn secret_ref(owner: &Value) -> Option<Result<(String, String), PublishError>> {
    let reference = owner.pointer("/spec/writeConnectionSecretToRef")?;
    let name = reference.get("name").and_then(Value::as_str).filter(|n| !n.is_empty())?;
    let namespace = object::namespace(owner)
        .or_else(|| reference.get("namespace").and_then(Value::as_str).filter(|n| !n.is_empty()))
        .map(str::to_string);
    Some(namespace.map(|ns| (ns, name.to_string())).ok_or(PublishError::NoNamespace))
}

/// Publishes `details` for `owner`; whether the Secret changed. Does nothing when the owner
/// names no Secret.
pub async fn publish(kube: &Kube, owner: &Value, details: &ConnectionDetails) -> Result<bool, PublishError> {
    let Some(target) = secret_ref(owner) else { return Ok(false) };
    let (namespace, name) = target?;
    apply_secret(kube, owner, &namespace, &name, details, true).await
}

/// Writes `details` into the Secret `namespace/name` controlled by `owner`. With `additive`,
/// keys already in the Secret are kept; otherwise the data becomes exactly `details`.
pub async fn apply_secret(
    kube: &Kube,
    owner: &Value,
    namespace: &str,
    name: &str,
    details: &ConnectionDetails,
    additive: bool,
) -> Result<bool, PublishError> {
    let encoded: Map<String, Value> = details
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(base64::engine::general_purpose::STANDARD.encode(v))))
        .collect();
    let kind = secret_kind();
    for _ in 0..3 {
        match kube.get(&kind, Some(namespace), name).await? {
            None => {
                let secret = json!({
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {
                        "name": name,
                        "namespace": namespace,
                        "ownerReferences": [object::owner_reference(owner, true, false)],
                    },
                    "type": SECRET_TYPE,
                    "data": encoded,
                });
                match kube.create(&kind, &secret).await {
                    Ok(_) => return Ok(true),
                    Err(error) if error.is_already_exists() => continue,
                    Err(error) => return Err(error.into()),
                }
            }
            Some(mut secret) => {
                let owner_uid = object::uid(owner).unwrap_or_default();
                match object::controller_uid(&secret) {
                    Some(uid) if uid == owner_uid => {}
                    Some(_) => return Err(PublishError::NotControlled { namespace: namespace.into(), name: name.into() }),
                    None => {
                        // An uncontrolled Secret of the right name is adopted.
                        object::add_owner_reference(&mut secret, object::owner_reference(owner, true, false));
                    }
                }
                let mut data = if additive { secret.get("data").and_then(Value::as_object).cloned().unwrap_or_default() } else { Map::new() };
                for (k, v) in &encoded {
                    data.insert(k.clone(), v.clone());
                }
                let unchanged =
                    secret.get("data").and_then(Value::as_object) == Some(&data) && object::controller_uid(&secret) == Some(owner_uid);
                if unchanged {
                    return Ok(false);
                }
                secret["data"] = Value::Object(data);
                match kube.replace(&kind, &secret).await {
                    Ok(_) => return Ok(true),
                    Err(error) if error.is_conflict() => continue,
                    Err(error) => return Err(error.into()),
                }
            }
        }
    }
    Err(PublishError::Api(ApiError { code: 409, reason: "Conflict".into(), message: format!("secret {namespace}/{name} kept changing") }))
}

/// Reads a Secret's data, decoded (empty when the Secret is missing).
pub async fn read_secret(kube: &Kube, namespace: &str, name: &str) -> Result<Option<ConnectionDetails>, ApiError> {
    let Some(secret) = kube.get(&secret_kind(), Some(namespace), name).await? else { return Ok(None) };
    Ok(Some(decode_data(&secret)))
}

/// A Secret's `data`, decoded (undecodable values are skipped).
pub fn decode_data(secret: &Value) -> ConnectionDetails {
    secret
        .get("data")
        .and_then(Value::as_object)
        .map(|data| {
            data.iter()
                .filter_map(|(k, v)| Some((k.clone(), base64::engine::general_purpose::STANDARD.decode(v.as_str()?).ok()?)))
                .collect()
        })
        .unwrap_or_default()
}
