//! Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`).
//!
//! kubectl 1.32+ sends built-in kinds as protobuf: the 4 magic bytes `k8s\0`, then a
//! `runtime.Unknown` message whose `typeMeta` names the kind and whose `raw` holds the
//! protobuf-encoded object. [`decode_object`] turns such a body into the JSON object Kubernetes
//! would produce for the same Go value; [`encode_object`] does the reverse for the supported kinds.
//!
//! # JSON mapping
//!
//! Fields follow the Go API types and their `json` tags:
//! - Go value fields (`string`, integers) are omitted when empty or zero, since Go's protobuf
//!   encoder always writes them (kubectl's bodies are full of `""` and `0`).
//! - Go pointer fields (`*bool`, `*int32`, `*string`, ...) are emitted whenever present.
//! - Nested structs are emitted whenever present, possibly as `{}` (as Go prints them).
//! - `Time` is RFC 3339 with seconds precision, `MicroTime` has 6 fraction digits; an unset or
//!   zero time (which Go prints as `null`) is omitted, including `creationTimestamp`.
//! - `[]byte` map values are standard base64; `FieldsV1` is embedded as parsed JSON.
//! - Maps and lists are omitted when empty.
//!
//! The only deviation from Go's `encoding/json` output is therefore that `null` timestamps and
//! non-`omitempty` empty strings (e.g. core/v1 Event `reportingComponent: ""`) are left out,
//! which decodes to the same Go value.
//!
//! # Safety against hostile input
//!
//! Decoding uses `prost`, which checks every declared length against the remaining input (so a
//! huge length cannot make it allocate beyond the body size), limits message nesting, and
//! rejects invalid UTF-8; every failure is returned as a [`ProtobufError`], never a panic.
//!
//! # Types
//!
//! The message types come from the `k8s-pb` crate (prost types generated from the upstream
//! `generated.proto` files), so field numbers and proto2 presence match upstream exactly.

mod access;
mod json;
mod kinds;
mod meta;
#[cfg(test)]
mod tests;

use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use prost::Message;
use serde_json::Value;

use json::{In, JsonMap};

/// The media type of Kubernetes protobuf bodies.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The prefix of every Kubernetes protobuf body.
pub const MAGIC: &[u8; 4] = b"k8s\0";

/// Why a protobuf body could not be decoded, or an object could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtobufError {
    /// The body does not start with the `k8s\0` prefix.
    #[error(
        "body is not a Kubernetes protobuf message: it does not start with the prefix \"k8s\\x00\""
    )]
    BadMagic,
    /// The `runtime.Unknown` envelope after the prefix is not valid protobuf.
    #[error("invalid Kubernetes protobuf envelope: {0}")]
    Envelope(String),
    /// The envelope does not say which kind it carries.
    #[error("Kubernetes protobuf envelope has no kind in its typeMeta")]
    MissingKind,
    /// The envelope's payload is compressed or otherwise encoded.
    #[error("unsupported contentEncoding {0:?} in Kubernetes protobuf envelope")]
    UnsupportedContentEncoding(String),
    /// The envelope's payload is not protobuf.
    #[error("unsupported contentType {0:?} in Kubernetes protobuf envelope")]
    UnsupportedContentType(String),
    /// The kind is not one this module can convert.
    #[error(
        "protobuf is not supported for kind {kind:?} of apiVersion {api_version:?}; send application/json instead"
    )]
    UnsupportedKind {
        /// The `apiVersion` named by the body or object.
        api_version: String,
        /// The `kind` named by the body or object.
        kind: String,
    },
    /// The object inside the envelope could not be decoded or converted to JSON.
    #[error("cannot decode {kind} from protobuf: {detail}")]
    Decode {
        /// The kind being decoded.
        kind: String,
        /// What went wrong, with the field path where known.
        detail: String,
    },
    /// The JSON object is not a valid instance of its kind.
    #[error("cannot encode {kind} as protobuf: {detail}")]
    Encode {
        /// The kind being encoded.
        kind: String,
        /// What went wrong, with the field path where known.
        detail: String,
    },
    /// The value to encode is not an object with string `apiVersion` and `kind`.
    #[error("cannot encode as protobuf: {0}")]
    InvalidObject(String),
}

/// The kinds this module converts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    ConfigMap,
    Secret,
    Namespace,
    ServiceAccount,
    CoreEvent,
    Lease,
    EventsEvent,
    DeleteOptions,
    Role,
    ClusterRole,
    RoleBinding,
    ClusterRoleBinding,
    SelfSubjectAccessReview,
    SubjectAccessReview,
    LocalSubjectAccessReview,
    SelfSubjectRulesReview,
    TokenRequest,
    TokenReview,
}

impl Kind {
    /// Finds the kind for an `apiVersion`/`kind` pair.
    ///
    /// `DeleteOptions` is registered in every group version (client-go labels it with the group
    /// version of the resource being deleted), so it is accepted under any `apiVersion`.
    fn lookup(api_version: &str, kind: &str) -> Option<Self> {
        Some(match (api_version, kind) {
            ("v1", "ConfigMap") => Self::ConfigMap,
            ("v1", "Secret") => Self::Secret,
            ("v1", "Namespace") => Self::Namespace,
            ("v1", "ServiceAccount") => Self::ServiceAccount,
            ("v1", "Event") => Self::CoreEvent,
            ("coordination.k8s.io/v1", "Lease") => Self::Lease,
            ("events.k8s.io/v1", "Event") => Self::EventsEvent,
            (_, "DeleteOptions") => Self::DeleteOptions,
            ("rbac.authorization.k8s.io/v1", "Role") => Self::Role,
            ("rbac.authorization.k8s.io/v1", "ClusterRole") => Self::ClusterRole,
            ("rbac.authorization.k8s.io/v1", "RoleBinding") => Self::RoleBinding,
            ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => Self::ClusterRoleBinding,
            ("authorization.k8s.io/v1", "SelfSubjectAccessReview") => Self::SelfSubjectAccessReview,
            ("authorization.k8s.io/v1", "SubjectAccessReview") => Self::SubjectAccessReview,
            ("authorization.k8s.io/v1", "LocalSubjectAccessReview") => Self::LocalSubjectAccessReview,
            ("authorization.k8s.io/v1", "SelfSubjectRulesReview") => Self::SelfSubjectRulesReview,
            ("authentication.k8s.io/v1", "TokenRequest") => Self::TokenRequest,
            ("authentication.k8s.io/v1", "TokenReview") => Self::TokenReview,
            _ => return None,
        })
    }

    /// Decodes the protobuf object and converts it to JSON fields.
    fn decode(self, raw: &[u8]) -> Result<JsonMap, String> {
        match self {
            Self::ConfigMap => decode_with(raw, kinds::config_map_to_json),
            Self::Secret => decode_with(raw, kinds::secret_to_json),
            Self::Namespace => decode_with(raw, kinds::namespace_to_json),
            Self::ServiceAccount => decode_with(raw, kinds::service_account_to_json),
            Self::CoreEvent => decode_with(raw, kinds::core_event_to_json),
            Self::Lease => decode_with(raw, kinds::lease_to_json),
            Self::EventsEvent => decode_with(raw, kinds::events_event_to_json),
            Self::DeleteOptions => decode_with(raw, meta::delete_options_to_json),
            Self::Role => decode_with(raw, access::role_to_json),
            Self::ClusterRole => decode_with(raw, access::cluster_role_to_json),
            Self::RoleBinding => decode_with(raw, access::role_binding_to_json),
            Self::ClusterRoleBinding => decode_with(raw, access::cluster_role_binding_to_json),
            Self::SelfSubjectAccessReview => decode_with(raw, access::self_subject_access_review_to_json),
            Self::SubjectAccessReview => decode_with(raw, access::subject_access_review_to_json),
            Self::LocalSubjectAccessReview => decode_with(raw, access::local_subject_access_review_to_json),
            Self::SelfSubjectRulesReview => decode_with(raw, access::self_subject_rules_review_to_json),
            Self::TokenRequest => decode_with(raw, access::token_request_to_json),
            Self::TokenReview => decode_with(raw, access::token_review_to_json),
        }
    }

    /// Converts JSON fields to the protobuf object and encodes it.
    fn encode(self, r: &In<'_>) -> Result<Vec<u8>, String> {
        match self {
            Self::ConfigMap => encode_with(r, kinds::config_map_from_json),
            Self::Secret => encode_with(r, kinds::secret_from_json),
            Self::Namespace => encode_with(r, kinds::namespace_from_json),
            Self::ServiceAccount => encode_with(r, kinds::service_account_from_json),
            Self::CoreEvent => encode_with(r, kinds::core_event_from_json),
            Self::Lease => encode_with(r, kinds::lease_from_json),
            Self::EventsEvent => encode_with(r, kinds::events_event_from_json),
            Self::DeleteOptions => encode_with(r, meta::delete_options_from_json),
            Self::Role => encode_with(r, access::role_from_json),
            Self::ClusterRole => encode_with(r, access::cluster_role_from_json),
            Self::RoleBinding => encode_with(r, access::role_binding_from_json),
            Self::ClusterRoleBinding => encode_with(r, access::cluster_role_binding_from_json),
            Self::SelfSubjectAccessReview => encode_with(r, access::self_subject_access_review_from_json),
            Self::SubjectAccessReview => encode_with(r, access::subject_access_review_from_json),
            Self::LocalSubjectAccessReview => encode_with(r, access::local_subject_access_review_from_json),
            Self::SelfSubjectRulesReview => encode_with(r, access::self_subject_rules_review_from_json),
            Self::TokenRequest => encode_with(r, access::token_request_from_json),
            Self::TokenReview => encode_with(r, access::token_review_from_json),
        }
    }
}

fn decode_with<M: Message + Default>(
    raw: &[u8],
    to_json: fn(M) -> Result<JsonMap, String>,
) -> Result<JsonMap, String> {
    to_json(M::decode(raw).map_err(|e| e.to_string())?)
}

fn encode_with<M: Message>(
    r: &In<'_>,
    from_json: fn(&In<'_>) -> Result<M, String>,
) -> Result<Vec<u8>, String> {
    Ok(from_json(r)?.encode_to_vec())
}

/// Decodes a protobuf request body into the Kubernetes JSON object (with apiVersion and kind set).
pub fn decode_object(body: &[u8]) -> Result<Value, ProtobufError> {
    let payload = body
        .strip_prefix(MAGIC.as_slice())
        .ok_or(ProtobufError::BadMagic)?;
    let envelope = Unknown::decode(payload).map_err(|e| ProtobufError::Envelope(e.to_string()))?;
    let type_meta = envelope.type_meta.unwrap_or_default();
    let api_version = type_meta.api_version.unwrap_or_default();
    let kind = type_meta.kind.unwrap_or_default();
    if kind.is_empty() {
        return Err(ProtobufError::MissingKind);
    }
    if let Some(encoding) = envelope.content_encoding.filter(|e| !e.is_empty()) {
        return Err(ProtobufError::UnsupportedContentEncoding(encoding));
    }
    if let Some(content_type) = envelope.content_type.filter(|t| !is_protobuf_media_type(t)) {
        return Err(ProtobufError::UnsupportedContentType(content_type));
    }
    let Some(k) = Kind::lookup(&api_version, &kind) else {
        return Err(ProtobufError::UnsupportedKind { api_version, kind });
    };
    let fields = k
        .decode(envelope.raw.as_deref().unwrap_or_default())
        .map_err(|detail| ProtobufError::Decode {
            kind: kind.clone(),
            detail,
        })?;
    let mut object = JsonMap::new();
    object.insert("apiVersion".to_owned(), Value::String(api_version));
    object.insert("kind".to_owned(), Value::String(kind));
    object.extend(fields);
    Ok(Value::Object(object))
}

/// Whether an envelope's `contentType` denotes protobuf (empty means the default, protobuf).
fn is_protobuf_media_type(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or_default().trim();
    essence.is_empty() || essence.eq_ignore_ascii_case(MEDIA_TYPE)
}

/// Encodes a JSON object of a supported kind as a protobuf envelope (used by tests to produce
/// bodies like kubectl's, and possibly by the server later for protobuf responses).
///
/// Fields that the kind's protobuf message does not have are dropped, as Kubernetes does.
pub fn encode_object(object: &Value) -> Result<Vec<u8>, ProtobufError> {
    let map = object
        .as_object()
        .ok_or_else(|| ProtobufError::InvalidObject("expected a JSON object".to_owned()))?;
    let type_field = |key: &str| match map.get(key) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        _ => Err(ProtobufError::InvalidObject(format!(
            "{key} must be a non-empty string"
        ))),
    };
    let api_version = type_field("apiVersion")?;
    let kind = type_field("kind")?;
    let Some(k) = Kind::lookup(&api_version, &kind) else {
        return Err(ProtobufError::UnsupportedKind { api_version, kind });
    };
    let raw = k
        .encode(&In::new(map, String::new()))
        .map_err(|detail| ProtobufError::Encode {
            kind: kind.clone(),
            detail,
        })?;
    // Like Go's serializer, always write the (empty) contentEncoding and contentType.
    let envelope = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version),
            kind: Some(kind),
        }),
        raw: Some(raw),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut body = MAGIC.to_vec();
    body.extend_from_slice(&envelope.encode_to_vec());
    Ok(body)
}
