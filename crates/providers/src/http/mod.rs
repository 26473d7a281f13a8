//! provider-http (`xpkg.crossplane.io/crossplane-contrib/provider-http`): `Request` manages a
//! resource of any HTTP API through mappings of its actions (CREATE, OBSERVE, UPDATE,
//! REMOVE) to requests; `DisposableRequest` sends one request (or one every `nextReconcile`).
//!
//! Kinds, as upstream names them: `http.crossplane.io/v1alpha2` (cluster-scoped `Request`,
//! `DisposableRequest`, also served as `v1alpha1` through a conversion webhook;
//! `ProviderConfig` and `ProviderConfigUsage` in `v1alpha1`) and
//! `http.m.crossplane.io/v1alpha2` (the same kinds namespaced, a namespaced `ProviderConfig`
//! and a cluster-scoped `ClusterProviderConfig`).
//!
//! - `schemas.rs`: the CRDs.
//! - `conversion.rs`: the cluster-scoped kinds' v1alpha1 ↔ v1alpha2 conversion webhooks.
//! - `jq.rs`: jq expressions (jaq).
//! - `secrets.rs`: `{{ name:namespace:key }}` injection and masking, `secretInjectionConfigs`.
//! - `send.rs`: the HTTP client (TLS settings, `waitTimeout`, failure classification).
//! - `request.rs`, `disposable.rs`: the two kinds' external clients.
//! - `testing.rs`: a small REST service for tests.
//!
//! At most one object per Request on the server, across crashes: the runtime saves the create
//! intent before the POST; the POST's answer is written to the status before the create is
//! recorded as done. After a crash in between, the next reconcile may look the object up only
//! where that cannot create a second one: when the OBSERVE request can be built without the
//! POST's answer (the URL comes from the payload), or when the answer was saved. Otherwise
//! (the server assigns the identifier and the answer was lost) the resource stops with
//! `Synced=False` and the runtime's message saying what to do; nothing is sent again.

pub mod conversion;
pub mod disposable;
pub mod jq;
pub mod request;
pub mod schemas;
pub mod secrets;
pub mod send;
pub mod testing;

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use oxplane_runtime::Runtime;
use oxplane_runtime::client::Kube;
use oxplane_runtime::kinds::Kind;
use oxplane_runtime::managed::usage::ProviderConfigKinds;
use oxplane_runtime::managed::{self, ConnectContext, ExternalClient, ExternalConnector, ExternalError, Managed, ManagedSettings};
use oxplane_runtime::provider::{BuiltinProvider, ProviderHandle};
use serde_json::{Map, Value, json};

use send::{Sender, Tls};

/// The cluster-scoped group.
pub const CLUSTER_GROUP: &str = "http.crossplane.io";
/// The namespaced group.
pub const NAMESPACED_GROUP: &str = "http.m.crossplane.io";
/// The version of the managed kinds (and of the namespaced group's configs).
pub const VERSION: &str = "v1alpha2";
/// The cluster-scoped managed kinds' older version, also served (through the conversion
/// webhook).
pub const OLDER_VERSION: &str = "v1alpha1";
/// The version of the cluster group's ProviderConfig.
pub const CLUSTER_CONFIG_VERSION: &str = "v1alpha1";
/// How often resources are observed, by default.
pub const POLL_INTERVAL: Duration = Duration::from_secs(60);
/// How long a request may take when `waitTimeout` is not set.
pub const DEFAULT_WAIT_TIMEOUT: Duration = Duration::from_secs(30);

/// provider-http.
#[derive(Clone, Debug)]
pub struct HttpProvider {
    /// How often resources are observed.
    pub poll_interval: Duration,
    /// Where the Request and DisposableRequest conversion webhooks are served; without one,
    /// v1alpha1 is not served.
    pub conversion: Option<crate::conversion::ConversionWebhook>,
}

impl Default for HttpProvider {
    fn default() -> Self {
        HttpProvider { poll_interval: POLL_INTERVAL, conversion: None }
    }
}

fn config_kinds(namespaced: bool) -> ProviderConfigKinds {
    if namespaced {
        let kind = |kind: &str, plural: &str, namespaced: bool| Kind::new(NAMESPACED_GROUP, VERSION, kind, plural, namespaced);
        ProviderConfigKinds {
            config: kind("ProviderConfig", "providerconfigs", true),
            cluster_config: Some(kind("ClusterProviderConfig", "clusterproviderconfigs", false)),
            usage: kind("ProviderConfigUsage", "providerconfigusages", true),
        }
    } else {
        let kind = |kind: &str, plural: &str| Kind::new(CLUSTER_GROUP, CLUSTER_CONFIG_VERSION, kind, plural, false);
        ProviderConfigKinds { config: kind("ProviderConfig", "providerconfigs"), cluster_config: None, usage: kind("ProviderConfigUsage", "providerconfigusages") }
    }
}

impl BuiltinProvider for HttpProvider {
    fn name(&self) -> &'static str {
        "provider-http"
    }

    fn crds(&self, _package: &str) -> Vec<Value> {
        schemas::crds(self.conversion.as_ref())
    }

    fn start(&self, runtime: &Runtime, _package: &str) -> ProviderHandle {
        let mut controllers = Vec::new();
        for namespaced in [false, true] {
            let configs = Arc::new(config_kinds(namespaced));
            controllers.extend(managed::start_config_controllers(runtime, &configs));
        }
        for (crd, disposable) in schemas::managed_kinds() {
            let kind = crd.kind();
            let configs = Arc::new(config_kinds(kind.namespaced));
            let connector: Arc<dyn ExternalConnector> = Arc::new(HttpConnector { kind: kind.clone(), disposable });
            let mut settings = ManagedSettings::new(kind, connector, self.poll_interval);
            settings.provider_configs = Some(configs);
            // The request's own waitTimeout bounds each call; this only guards against a
            // client that never returns.
            settings.call_timeout = Duration::from_secs(15 * 60);
            controllers.push(managed::start_controller(runtime, settings));
        }
        ProviderHandle::new(controllers)
    }
}

/// Builds Request and DisposableRequest clients.
pub struct HttpConnector {
    /// The managed kind.
    pub kind: Kind,
    /// DisposableRequest rather than Request.
    pub disposable: bool,
}

/// A Go duration field (`30s`, `1m30s`), if set and valid.
pub(crate) fn duration_field(for_provider: &Value, field: &str) -> Result<Option<Duration>, ExternalError> {
    match for_provider.get(field).and_then(Value::as_str) {
        None | Some("") => Ok(None),
        Some(text) => managed::annotations::parse_go_duration_or_zero(text)
            .map(Some)
            .ok_or_else(|| ExternalError::definite(format!("spec.forProvider.{field}: {text:?} is not a duration"))),
    }
}

async fn selector_bytes(kube: &Kube, selector: Option<&Value>, own_namespace: Option<&str>) -> Result<Option<Vec<u8>>, ExternalError> {
    let Some(selector) = selector else { return Ok(None) };
    let field = |f: &str| selector.get(f).and_then(Value::as_str).unwrap_or_default().to_string();
    let (name, key) = (field("name"), field("key"));
    let namespace = selector.get("namespace").and_then(Value::as_str).or(own_namespace).unwrap_or("default").to_string();
    let injector = secrets::Injector::new(kube, own_namespace);
    injector.read(&namespace, &name, &key).await.map(Some).map_err(|e| ExternalError::definite(format!("TLS: {e}")))
}

/// The TLS settings of a resource: its `tlsConfig` over its ProviderConfig's `tls`, and
/// `insecureSkipTLSVerify` over both.
async fn tls_settings(kube: &Kube, for_provider: &Value, config: Option<&Value>, own_namespace: Option<&str>) -> Result<Tls, ExternalError> {
    let empty = json!({});
    let config_tls = config.and_then(|c| c.pointer("/spec/tls")).unwrap_or(&empty);
    let own_tls = for_provider.get("tlsConfig").unwrap_or(&empty);
    let pick = |field: &str| own_tls.get(field).or_else(|| config_tls.get(field));
    let mut tls = Tls::default();
    if let Some(bundle) = pick("caBundle").and_then(Value::as_str).filter(|b| !b.is_empty()) {
        let pem = base64::engine::general_purpose::STANDARD.decode(bundle).map_err(|e| ExternalError::definite(format!("TLS: caBundle is not base64: {e}")))?;
        tls.ca_pem = Some(pem);
    } else {
        tls.ca_pem = selector_bytes(kube, pick("caCertSecretRef"), own_namespace).await?;
    }
    tls.client_cert_pem = selector_bytes(kube, pick("clientCertSecretRef"), own_namespace).await?;
    tls.client_key_pem = selector_bytes(kube, pick("clientKeySecretRef"), own_namespace).await?;
    tls.insecure_skip_verify =
        pick("insecureSkipVerify").and_then(Value::as_bool).unwrap_or(false) || for_provider.get("insecureSkipTLSVerify").and_then(Value::as_bool).unwrap_or(false);
    Ok(tls)
}

#[async_trait::async_trait]
impl ExternalConnector for HttpConnector {
    async fn connect(&self, context: &ConnectContext<'_>, managed: &Managed) -> Result<Box<dyn ExternalClient>, ExternalError> {
        let for_provider = managed.for_provider();
        let timeout = duration_field(&for_provider, "waitTimeout")?.filter(|d| !d.is_zero()).unwrap_or(DEFAULT_WAIT_TIMEOUT);
        let tls = tls_settings(context.kube, &for_provider, context.provider_config, managed.namespace()).await?;
        let sender = Sender::new(&tls, timeout).map_err(|e| ExternalError::definite(e.to_string()))?;
        let status = StatusWriter { kube: context.kube.clone(), kind: self.kind.clone() };
        if self.disposable {
            Ok(Box::new(disposable::DisposableClient::new(status, sender, managed)))
        } else {
            Ok(Box::new(request::RequestClient::new(status, sender, managed)))
        }
    }
}

/// Writes status fields at once (a merge patch of the status), so what a request did is
/// saved before the runtime records its outcome.
pub struct StatusWriter {
    /// The API client.
    pub kube: Kube,
    /// The managed kind.
    pub kind: Kind,
}

impl StatusWriter {
    /// Sets `fields` in the resource's status in memory only: Observe's findings, written
    /// by the runtime with the conditions at the end of the reconcile.
    pub fn set(managed: &mut Managed, fields: Map<String, Value>) {
        if let Some(root) = managed.object.as_object_mut() {
            let status = root.entry("status").or_insert_with(|| json!({}));
            if let Some(status) = status.as_object_mut() {
                status.extend(fields);
            }
        }
    }

    /// Sets `fields` in the resource's status, in memory and on the server at once: what a
    /// create, update or delete did is saved before the runtime records its outcome.
    pub async fn write(&self, managed: &mut Managed, fields: Map<String, Value>) -> Result<(), ExternalError> {
        Self::set(managed, fields.clone());
        let namespace = managed.namespace().map(str::to_string);
        let name = managed.name().to_string();
        let saved = self
            .kube
            .merge_patch_status(&self.kind, namespace.as_deref(), &name, &json!({"status": fields}))
            .await
            .map_err(|e| ExternalError::ambiguous(format!("cannot save the status: {e}")))?;
        if let (Some(version), Some(metadata)) = (saved.pointer("/metadata/resourceVersion").cloned(), managed.object.get_mut("metadata").and_then(Value::as_object_mut)) {
            metadata.insert("resourceVersion".into(), version);
        }
        Ok(())
    }

    /// The API client.
    pub fn kube(&self) -> &Kube {
        &self.kube
    }
}

/// `status.response`. The `Date` header is left out: it changes with every answer, and the
/// status would be rewritten at every observation for nothing.
pub(crate) fn response_json(answer: &send::Answer, mask: &dyn Fn(&str) -> String) -> Value {
    let headers: Map<String, Value> =
        answer.headers.iter().filter(|(name, _)| name.as_str() != "Date").map(|(name, values)| (name.clone(), Value::Array(values.iter().map(|v| Value::String(mask(v))).collect()))).collect();
    json!({"statusCode": answer.status, "body": mask(&answer.body), "headers": headers})
}

/// A short, masked excerpt of a body for messages.
pub(crate) fn excerpt(body: &str) -> String {
    let trimmed = body.trim();
    if trimmed.chars().count() <= 200 { trimmed.to_string() } else { trimmed.chars().take(200).collect::<String>() + "…" }
}

/// `allowedStatusCodes`.
pub(crate) fn allowed_codes(for_provider: &Value) -> Vec<u16> {
    for_provider
        .get("allowedStatusCodes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_u64)
        .filter_map(|c| u16::try_from(c).ok())
        .collect()
}

/// `secretInjectionConfigs`.
pub(crate) fn injection_configs(for_provider: &Value) -> Vec<Value> {
    for_provider.get("secretInjectionConfigs").and_then(Value::as_array).cloned().unwrap_or_default()
}

/// Headers from a JSON map of string lists.
pub(crate) fn headers_of(value: Option<&Value>) -> send::Headers {
    value
        .and_then(Value::as_object)
        .map(|map| {
            map.iter()
                .map(|(name, values)| (name.clone(), values.as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect()))
                .collect()
        })
        .unwrap_or_default()
}

/// Headers as JSON.
pub(crate) fn headers_json(headers: &send::Headers) -> Value {
    json!(headers)
}
