//! The contract between the managed-resource reconciler and a provider: a connector that
//! builds a client for one managed resource, and the client's Observe / Create / Update /
//! Delete. Calls must be idempotent; Observe must not change the external resource.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use crate::client::Kube;
use crate::object;

/// Connection details (secret data) by key.
pub type ConnectionDetails = BTreeMap<String, Vec<u8>>;

/// How the external resource's identifier (the `crossplane.io/external-name` annotation) is
/// known. This decides what the reconciler may do after a crash in the middle of a create.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExternalNaming {
    /// The identifier is the managed resource's name, set before anything else: the external
    /// resource can always be found again by it, so an interrupted create is never ambiguous.
    FromMetadataName,
    /// The external system assigns the identifier and the create returns it.
    Assigned {
        /// Observe can find a resource created with the managed resource's uid as idempotency
        /// token (a tag, a client token), and a miss means it does not exist. Then an
        /// interrupted create recovers by lookup; without it, it fails closed.
        lookup_by_token: bool,
    },
}

/// What Observe found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExternalObservation {
    /// The external resource exists (creating, ready or deleting).
    pub resource_exists: bool,
    /// It matches the managed resource's desired state.
    pub resource_up_to_date: bool,
    /// Observe filled unset spec fields from the external resource (persisted only when the
    /// policies include LateInitialize).
    pub resource_late_initialized: bool,
    /// Connection details to publish.
    pub connection_details: ConnectionDetails,
    /// How the external resource differs: the drifted fields, reported in an
    /// `ExternalResourceDrifted` event before an update (empty when nothing is known).
    pub diff: String,
    /// The identifier Observe found (for instance by looking up the idempotency token): saved
    /// at once, whatever the policies.
    pub external_name: Option<String>,
    /// Observe again after this long rather than after the poll interval (a change is due).
    pub requeue_after: Option<Duration>,
}

/// What Create did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExternalCreation {
    /// The identifier the external system assigned (saved at once, whatever the policies).
    pub external_name: Option<String>,
    /// Connection details to publish.
    pub connection_details: ConnectionDetails,
}

/// What Update did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExternalUpdate {
    /// Connection details to publish.
    pub connection_details: ConnectionDetails,
}

/// What Delete did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExternalDelete {}

/// Whether a failed call may have had an effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The call certainly did nothing (the external system refused it).
    Definite,
    /// The call may have taken effect (a timeout, a dropped connection): for a create, the
    /// reconciler must not create again until it knows.
    Ambiguous,
    /// A create found the resource already there (with [`ExternalNaming::FromMetadataName`],
    /// the reconciler adopts it).
    AlreadyExists,
}

/// A failed external call.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ExternalError {
    /// Whether it may have had an effect.
    pub kind: ErrorKind,
    /// What went wrong.
    pub message: String,
}

impl ExternalError {
    /// A failure that certainly had no effect.
    pub fn definite(message: impl Into<String>) -> Self {
        ExternalError { kind: ErrorKind::Definite, message: message.into() }
    }

    /// A failure that may have had an effect.
    pub fn ambiguous(message: impl Into<String>) -> Self {
        ExternalError { kind: ErrorKind::Ambiguous, message: message.into() }
    }

    /// A create that found the resource already there.
    pub fn already_exists(message: impl Into<String>) -> Self {
        ExternalError { kind: ErrorKind::AlreadyExists, message: message.into() }
    }
}

/// A managed resource as a provider's client sees it: the object, with helpers.
#[derive(Clone, Debug, PartialEq)]
pub struct Managed {
    /// The object (JSON).
    pub object: Value,
}

impl Managed {
    /// `crossplane.io/external-name`, if set and not empty.
    pub fn external_name(&self) -> Option<&str> {
        object::annotation(&self.object, super::annotations::EXTERNAL_NAME).filter(|n| !n.is_empty())
    }

    /// The uid: the idempotency token of the external create.
    pub fn uid(&self) -> &str {
        object::uid(&self.object).unwrap_or_default()
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        object::name(&self.object).unwrap_or_default()
    }

    /// `metadata.namespace`.
    pub fn namespace(&self) -> Option<&str> {
        object::namespace(&self.object)
    }

    /// `spec.forProvider` (an empty object when absent).
    pub fn for_provider(&self) -> Value {
        self.object.pointer("/spec/forProvider").cloned().unwrap_or_else(|| Value::Object(Default::default()))
    }

    /// What to create with: `spec.initProvider` merged under `spec.forProvider` (forProvider
    /// wins). `initProvider` is used at create only and never enforced afterwards.
    pub fn desired_for_create(&self) -> Value {
        let mut desired = self.object.pointer("/spec/initProvider").cloned().unwrap_or_else(|| Value::Object(Default::default()));
        merge_under(&mut desired, &self.for_provider());
        desired
    }

    /// Sets `status.atProvider`.
    pub fn set_at_provider(&mut self, at_provider: Value) {
        if let Some(root) = self.object.as_object_mut() {
            let status = root.entry("status").or_insert_with(|| Value::Object(Default::default()));
            if let Some(status) = status.as_object_mut() {
                status.insert("atProvider".into(), at_provider);
            }
        }
    }

    /// Sets a status condition (see [`crate::conditions::set`]).
    pub fn set_condition(&mut self, condition: crate::conditions::Condition) {
        crate::conditions::set(&mut self.object, condition);
    }
}

/// Merges `over` into `base`: objects key by key (recursively), anything else replaced.
pub fn merge_under(base: &mut Value, over: &Value) {
    match (base, over) {
        (Value::Object(base), Value::Object(over)) => {
            for (key, value) in over {
                match base.get_mut(key) {
                    Some(existing) if existing.is_object() && value.is_object() => merge_under(existing, value),
                    _ => {
                        base.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (base, over) => *base = over.clone(),
    }
}

/// What a connector gets to build a client.
pub struct ConnectContext<'a> {
    /// The API client (to read secrets a ProviderConfig references).
    pub kube: &'a Kube,
    /// The ProviderConfig (or ClusterProviderConfig) the managed resource references, when the
    /// provider has them.
    pub provider_config: Option<&'a Value>,
}

/// Builds clients for managed resources of one kind.
#[async_trait::async_trait]
pub trait ExternalConnector: Send + Sync + 'static {
    /// A client for one managed resource.
    async fn connect(&self, context: &ConnectContext<'_>, managed: &Managed) -> Result<Box<dyn ExternalClient>, ExternalError>;
}

/// Talks to the external system about one managed resource.
#[async_trait::async_trait]
pub trait ExternalClient: Send {
    /// How external identifiers are known for this resource (it may depend on the
    /// ProviderConfig: whether the external system can look resources up by token).
    fn naming(&self) -> ExternalNaming {
        ExternalNaming::FromMetadataName
    }

    /// What exists. May fill `status.atProvider` and set `Ready`; may fill unset spec fields
    /// (late initialization); must not change the external resource.
    async fn observe(&mut self, managed: &mut Managed) -> Result<ExternalObservation, ExternalError>;

    /// Creates the external resource, passing `managed.uid()` as idempotency token where the
    /// external system supports one.
    async fn create(&mut self, managed: &mut Managed) -> Result<ExternalCreation, ExternalError>;

    /// Brings the external resource to the desired state.
    async fn update(&mut self, managed: &mut Managed) -> Result<ExternalUpdate, ExternalError>;

    /// Deletes the external resource (or starts deleting it).
    async fn delete(&mut self, managed: &mut Managed) -> Result<ExternalDelete, ExternalError>;

    /// Releases what the client holds.
    async fn disconnect(&mut self) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn init_provider_is_merged_under_for_provider() {
        let managed = Managed {
            object: json!({"spec": {
                "forProvider": {"size": 2, "tags": {"a": "x"}},
                "initProvider": {"size": 1, "zone": "z1", "tags": {"b": "y"}}
            }}),
        };
        assert_eq!(managed.desired_for_create(), json!({"size": 2, "zone": "z1", "tags": {"a": "x", "b": "y"}}));
        assert_eq!(managed.for_provider(), json!({"size": 2, "tags": {"a": "x"}}));
    }
}
