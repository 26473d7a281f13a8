//! ProviderConfigs and who uses them: before connecting, a managed resource records a
//! ProviderConfigUsage (named by its uid, controlled by it, labelled with the config's name);
//! the ProviderConfig controller counts usages into `status.users` and keeps the
//! `in-use.crossplane.io` finalizer until none are left, so a config in use cannot vanish.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::client::{ApiError, Kube};
use crate::conditions::{self, Condition};
use crate::controller::{Action, ReconcileError, Reconciler};
use crate::events::EventRecorder;
use crate::kinds::Kind;
use crate::object::{self, ObjectKey};

/// `crossplane.io/provider-config`.
pub const LABEL_PROVIDER_CONFIG: &str = "crossplane.io/provider-config";
/// `crossplane.io/provider-config-kind`.
pub const LABEL_PROVIDER_CONFIG_KIND: &str = "crossplane.io/provider-config-kind";
/// The finalizer a ProviderConfig in use keeps.
pub const FINALIZER_IN_USE: &str = "in-use.crossplane.io";

/// The config kinds of a provider's API group.
#[derive(Clone, Debug)]
pub struct ProviderConfigKinds {
    /// `ProviderConfig`: cluster-scoped in legacy groups, namespaced in `.m.` groups.
    pub config: Kind,
    /// `ClusterProviderConfig` (only in `.m.` groups).
    pub cluster_config: Option<Kind>,
    /// `ProviderConfigUsage`: cluster-scoped in legacy groups, namespaced in `.m.` groups.
    pub usage: Kind,
}

/// Why the config could not be resolved or its usage recorded.
#[derive(Debug, thiserror::Error)]
pub enum UsageError {
    /// The reference names a kind the provider does not have.
    #[error("managed resource references a ProviderConfig of unknown kind {0:?}")]
    UnknownKind(String),
    /// The referenced config does not exist.
    #[error("cannot get referenced {kind} {name:?}: not found")]
    NotFound {
        /// Its kind.
        kind: String,
        /// Its name.
        name: String,
    },
    /// The API failed.
    #[error("cannot track ProviderConfig usage: {0}")]
    Api(#[from] ApiError),
}

impl ProviderConfigKinds {
    /// The config a managed resource references (`spec.providerConfigRef`, default
    /// `{name: default}`, and for namespaced resources default kind `ClusterProviderConfig`):
    /// its kind, namespace and name.
    pub fn referenced(&self, managed: &Value) -> Result<(Kind, Option<String>, String), UsageError> {
        let reference = managed.pointer("/spec/providerConfigRef");
        let name = reference.and_then(|r| r.get("name")).and_then(Value::as_str).filter(|n| !n.is_empty()).unwrap_or("default");
        if !self.config.namespaced {
            return Ok((self.config.clone(), None, name.to_string()));
        }
        let kind = reference.and_then(|r| r.get("kind")).and_then(Value::as_str).unwrap_or("ClusterProviderConfig");
        match (kind, &self.cluster_config) {
            ("ProviderConfig", _) => Ok((self.config.clone(), object::namespace(managed).map(str::to_string), name.to_string())),
            ("ClusterProviderConfig", Some(cluster)) => Ok((cluster.clone(), None, name.to_string())),
            (other, _) => Err(UsageError::UnknownKind(other.to_string())),
        }
    }

    /// The config `managed` references, without recording a usage.
    pub async fn get(&self, kube: &Kube, managed: &Value) -> Result<Value, UsageError> {
        let (config_kind, namespace, name) = self.referenced(managed)?;
        kube.get(&config_kind, namespace.as_deref(), &name).await?.ok_or(UsageError::NotFound { kind: config_kind.gvk.kind.clone(), name })
    }

    /// Resolves the config `managed` references and records its usage; returns the config.
    pub async fn track(&self, kube: &Kube, managed: &Value) -> Result<Value, UsageError> {
        let (config_kind, namespace, name) = self.referenced(managed)?;
        let Some(config) = kube.get(&config_kind, namespace.as_deref(), &name).await? else {
            return Err(UsageError::NotFound { kind: config_kind.gvk.kind.clone(), name });
        };
        let uid = object::uid(managed).unwrap_or_default();
        let mut labels = json!({ LABEL_PROVIDER_CONFIG: name });
        let mut config_ref = json!({"name": name});
        if self.config.namespaced {
            labels[LABEL_PROVIDER_CONFIG_KIND] = json!(config_kind.gvk.kind);
            config_ref["kind"] = json!(config_kind.gvk.kind);
        }
        let mut usage = json!({
            "apiVersion": self.usage.api_version(),
            "kind": self.usage.gvk.kind,
            "metadata": {
                "name": uid,
                "labels": labels,
                "ownerReferences": [object::owner_reference(managed, true, true)],
            },
            "providerConfigRef": config_ref,
            "resourceRef": {
                "apiVersion": managed.get("apiVersion").cloned().unwrap_or(Value::Null),
                "kind": managed.get("kind").cloned().unwrap_or(Value::Null),
                "name": object::name(managed).unwrap_or_default(),
                "uid": uid,
            },
        });
        if self.usage.namespaced {
            usage["metadata"]["namespace"] = json!(object::namespace(managed));
        }
        let usage_namespace = object::namespace(&usage).map(str::to_string);
        match kube.get(&self.usage, usage_namespace.as_deref(), uid).await? {
            None => match kube.create(&self.usage, &usage).await {
                Ok(_) => {}
                Err(error) if error.is_already_exists() => {}
                Err(error) => return Err(error.into()),
            },
            Some(mut existing) => {
                // Updated only when the referenced config changed.
                if existing.get("providerConfigRef") != usage.get("providerConfigRef")
                    || object::labels(&existing) != usage["metadata"]["labels"].as_object().cloned().unwrap_or_default()
                {
                    existing["providerConfigRef"] = usage["providerConfigRef"].clone();
                    existing["metadata"]["labels"] = usage["metadata"]["labels"].clone();
                    kube.replace(&self.usage, &existing).await?;
                }
            }
        }
        Ok(config)
    }
}

/// The controller of one ProviderConfig kind: counts usages and guards deletion.
pub struct ProviderConfigReconciler {
    /// The API client.
    pub kube: Kube,
    /// The config kind reconciled (ProviderConfig or ClusterProviderConfig).
    pub config: Kind,
    /// The usage kind counted.
    pub usage: Kind,
    /// Events on configs.
    pub recorder: EventRecorder,
}

#[async_trait::async_trait]
impl Reconciler for ProviderConfigReconciler {
    async fn reconcile(&self, key: &ObjectKey) -> Result<Action, ReconcileError> {
        let Some(mut config) = self.kube.get(&self.config, key.namespace.as_deref(), &key.name).await? else {
            return Ok(Action::Done);
        };
        let mut selector = format!("{LABEL_PROVIDER_CONFIG}={}", key.name);
        if self.usage.namespaced {
            selector.push_str(&format!(",{LABEL_PROVIDER_CONFIG_KIND}={}", self.config.gvk.kind));
        }
        // A namespaced ProviderConfig is used from its own namespace only; a cluster-scoped
        // one from anywhere.
        let usage_namespace = if self.config.namespaced { key.namespace.as_deref() } else { None };
        let users = self.kube.list(&self.usage, usage_namespace, Some(&selector)).await?.len();
        let before = conditions::status_of(&config);
        if let Some(status) = config.as_object_mut().map(|o| o.entry("status").or_insert_with(|| json!({}))) {
            if !status.is_object() {
                *status = json!({});
            }
            status["users"] = json!(users);
        }
        if object::is_deleting(&config) {
            if users > 0 {
                conditions::set(&mut config, Condition::new("Terminating", "True", "InUse"));
                self.recorder.warning(&config, "UsageAccounting", "Blocking deletion while usages still exist");
                self.write_status(&config, &before).await?;
                return Ok(Action::RequeueAfter(Duration::from_secs(30)));
            }
            if object::remove_finalizer(&mut config, FINALIZER_IN_USE) {
                self.kube.replace(&self.config, &config).await?;
            }
            return Ok(Action::Done);
        }
        if object::add_finalizer(&mut config, FINALIZER_IN_USE) {
            let saved = self.kube.replace(&self.config, &config).await?;
            if let Some(metadata) = saved.get("metadata") {
                config["metadata"] = metadata.clone();
            }
        }
        conditions::remove(&mut config, "Terminating");
        self.write_status(&config, &before).await?;
        Ok(Action::Done)
    }
}

impl ProviderConfigReconciler {
    async fn write_status(&self, config: &Value, before: &Value) -> Result<(), ReconcileError> {
        if &conditions::status_of(config) != before {
            self.kube.replace_status(&self.config, config).await?;
        }
        Ok(())
    }

    /// Maps a usage event to the key of the config it counts towards.
    pub fn usage_to_config(config: &Kind) -> impl Fn(&crate::watches::WatchEvent) -> Vec<ObjectKey> + Send + Sync + 'static {
        let config = config.clone();
        move |event| {
            let usage = match event {
                crate::watches::WatchEvent::Applied { new, .. } => new.clone(),
                crate::watches::WatchEvent::Deleted(old) => old.clone(),
                crate::watches::WatchEvent::State(_) => return Vec::new(),
            };
            let Some(name) = object::label(&usage, LABEL_PROVIDER_CONFIG) else { return Vec::new() };
            if config.namespaced {
                if object::label(&usage, LABEL_PROVIDER_CONFIG_KIND) != Some(config.gvk.kind.as_str()) {
                    return Vec::new();
                }
                vec![ObjectKey::new(object::namespace(&usage), name)]
            } else {
                if object::label(&usage, LABEL_PROVIDER_CONFIG_KIND).is_some_and(|k| k != config.gvk.kind) {
                    return Vec::new();
                }
                vec![ObjectKey::new(None, name)]
            }
        }
    }
}

/// A shared handle to config kinds.
pub type SharedConfigKinds = Arc<ProviderConfigKinds>;
