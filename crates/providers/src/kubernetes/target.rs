//! Target clusters: a kube client and its discovery for each kubeconfig (or the control
//! plane's own client for `InjectedIdentity`), kept while the kubeconfig is unchanged so a
//! reconcile does not open a new connection. Each has a watch registry for realtime
//! `spec.watch`: the control plane's is the runtime's own, another cluster's is made the first
//! time an Object asks to watch something there.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use oxplane_runtime::client::{ApiError, Kube};
use oxplane_runtime::kinds::{Gvk, Kind, KindResolver};
use oxplane_runtime::managed::{ConnectContext, ExternalError};
use oxplane_runtime::watches::Watches;
use serde_json::Value;

use crate::http::secrets::Injector;

/// A cluster objects are applied to.
#[derive(Clone)]
pub struct Target {
    /// Its API.
    pub kube: Kube,
    /// Its kinds.
    pub kinds: Arc<KindResolver>,
    /// How messages name it (`cluster https://127.0.0.1:6443`, `the control plane`).
    pub name: String,
    /// Tells targets apart (two kubeconfigs may name one URL with different users).
    pub id: u64,
    watches: Arc<OnceLock<Watches>>,
}

/// How long a target cluster's informer outlives its last subscription.
const WATCH_GRACE: Duration = Duration::from_secs(30);

fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl Target {
    /// A target whose watch registry is made when first needed.
    pub fn new(kube: Kube, name: String) -> Target {
        Target { kinds: Arc::new(KindResolver::new(kube.clone())), kube, name, id: next_id(), watches: Arc::default() }
    }

    /// The control plane, watched through the runtime's own registry (the one composition's
    /// watches count in).
    pub fn local(kube: Kube, watches: Watches) -> Target {
        let cell = OnceLock::new();
        let kinds = watches.kinds().clone();
        let _ = cell.set(watches);
        Target { kube, kinds, name: "the control plane".into(), id: next_id(), watches: Arc::new(cell) }
    }

    /// The target's watch registry.
    pub fn watches(&self) -> Watches {
        self.watches.get_or_init(|| Watches::new(self.kube.clone(), self.kinds.clone(), WATCH_GRACE)).clone()
    }

    /// The kind of a manifest's `apiVersion` and `kind`.
    pub async fn kind_of(&self, object: &Value) -> Result<Kind, ExternalError> {
        let gvk = Gvk::of(object).ok_or_else(|| ExternalError::definite("the manifest has no apiVersion and kind"))?;
        self.kinds.resolve(&gvk).await.map_err(|e| ExternalError::definite(format!("{}: {e}", self.name)))
    }

    /// An API error, naming the target.
    pub fn error(&self, what: &str, error: &ApiError) -> ExternalError {
        let message = format!("{}: {what}: {error}", self.name);
        if error.code == 0 { ExternalError::ambiguous(message) } else { ExternalError::definite(message) }
    }
}

/// Targets by kubeconfig.
#[derive(Default)]
pub struct Targets {
    by_kubeconfig: Mutex<HashMap<String, Target>>,
}

impl Targets {
    /// The target a ProviderConfig names.
    pub async fn of(&self, context: &ConnectContext<'_>, local: &Target, own_namespace: Option<&str>) -> Result<Target, ExternalError> {
        let Some(config) = context.provider_config else { return Ok(local.clone()) };
        let credentials = config.pointer("/spec/credentials").cloned().unwrap_or(Value::Null);
        match credentials.get("source").and_then(Value::as_str).unwrap_or("InjectedIdentity") {
            "InjectedIdentity" => Ok(local.clone()),
            "Secret" => {
                let field = |f: &str| credentials.pointer(&format!("/secretRef/{f}")).and_then(Value::as_str).unwrap_or_default().to_string();
                let namespace = credentials.pointer("/secretRef/namespace").and_then(Value::as_str).or(own_namespace).unwrap_or("default").to_string();
                let bytes = Injector::new(context.kube, None)
                    .read(&namespace, &field("name"), &field("key"))
                    .await
                    .map_err(|e| ExternalError::definite(format!("cannot read the kubeconfig: {e}")))?;
                self.of_kubeconfig(bytes).await
            }
            // crossplane-runtime's other common sources: the kubeconfig in an environment
            // variable of the provider's process, or in a file it can read.
            "Environment" => {
                let name = credentials.pointer("/env/name").and_then(Value::as_str).unwrap_or_default();
                let text = std::env::var(name).map_err(|e| ExternalError::definite(format!("cannot read the kubeconfig from environment variable {name:?}: {e}")))?;
                self.of_kubeconfig(text.into_bytes()).await
            }
            "Filesystem" => {
                let path = credentials.pointer("/fs/path").and_then(Value::as_str).unwrap_or_default();
                let bytes = tokio::fs::read(path).await.map_err(|e| ExternalError::definite(format!("cannot read the kubeconfig from {path:?}: {e}")))?;
                self.of_kubeconfig(bytes).await
            }
            other => Err(ExternalError::definite(format!(
                "credentials source {other:?} is not supported: use Secret, Environment or Filesystem (a kubeconfig) or InjectedIdentity"
            ))),
        }
    }

    /// The target a kubeconfig names, built once per kubeconfig.
    async fn of_kubeconfig(&self, bytes: Vec<u8>) -> Result<Target, ExternalError> {
        let text = String::from_utf8(bytes).map_err(|_| ExternalError::definite("the kubeconfig is not UTF-8"))?;
        if let Some(target) = self.by_kubeconfig.lock().unwrap_or_else(|p| p.into_inner()).get(&text) {
            return Ok(target.clone());
        }
        let target = build(&text).await?;
        self.by_kubeconfig.lock().unwrap_or_else(|p| p.into_inner()).insert(text, target.clone());
        Ok(target)
    }
}

async fn build(kubeconfig: &str) -> Result<Target, ExternalError> {
    let bad = |e: &dyn std::fmt::Display| ExternalError::definite(format!("cannot use the kubeconfig: {e}"));
    let parsed = kube::config::Kubeconfig::from_yaml(kubeconfig).map_err(|e| bad(&e))?;
    let config = kube::Config::from_custom_kubeconfig(parsed, &kube::config::KubeConfigOptions::default()).await.map_err(|e| bad(&e))?;
    let name = format!("cluster {}", config.cluster_url);
    let client = kube::Client::try_from(config).map_err(|e| bad(&e))?;
    Ok(Target::new(Kube::new(client), name))
}
