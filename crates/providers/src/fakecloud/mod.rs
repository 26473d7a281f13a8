//! provider-fakecloud: `FakeThing` managed resources in the local fake cloud of [`cloud`],
//! for fault-injection tests of the managed-resource runtime. The cloud assigns random
//! identifiers and creates asynchronously, like the APIs that made Crossplane create
//! duplicates after a restart.
//!
//! Kinds: `fakecloud.oxplane.io/v1alpha1` (cluster-scoped `FakeThing`, `ProviderConfig`,
//! `ProviderConfigUsage`) and `fakecloud.m.oxplane.io/v1alpha1` (namespaced `FakeThing`,
//! `ProviderConfig`, `ProviderConfigUsage`, and cluster-scoped `ClusterProviderConfig`).
//! A ProviderConfig names the cloud (`spec.endpoint`), whether it can look things up by tag
//! (`spec.lookup`, default true) and whether things are named after their managed resource
//! (`spec.deterministicNames`, default false).

pub mod cloud;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use oxplane_runtime::Runtime;
use oxplane_runtime::conditions::Condition;
use oxplane_runtime::managed::crd::{ManagedCrd, provider_config_crd, provider_config_usage_crd};
use oxplane_runtime::managed::fault;
use oxplane_runtime::managed::usage::ProviderConfigKinds;
use oxplane_runtime::managed::{
    self, ConnectContext, ExternalClient, ExternalConnector, ExternalCreation, ExternalDelete, ExternalError, ExternalNaming,
    ExternalObservation, ExternalUpdate, Managed, ManagedSettings,
};
use oxplane_runtime::provider::{BuiltinProvider, ProviderHandle};
use serde_json::{Value, json};

/// The cluster-scoped API group.
pub const GROUP: &str = "fakecloud.oxplane.io";
/// The namespaced API group.
pub const NAMESPACED_GROUP: &str = "fakecloud.m.oxplane.io";
/// The version of both groups.
pub const VERSION: &str = "v1alpha1";
/// How often things are observed, by default.
pub const POLL_INTERVAL: Duration = Duration::from_secs(10);

/// provider-fakecloud.
#[derive(Clone, Copy, Debug)]
pub struct FakeCloudProvider {
    /// How often things are observed: [`POLL_INTERVAL`], or shorter for tests that wait for
    /// an external change to be noticed.
    pub poll_interval: Duration,
}

impl Default for FakeCloudProvider {
    fn default() -> Self {
        FakeCloudProvider { poll_interval: POLL_INTERVAL }
    }
}

fn thing_crd(namespaced: bool) -> ManagedCrd {
    ManagedCrd {
        group: if namespaced { NAMESPACED_GROUP } else { GROUP }.into(),
        version: VERSION.into(),
        kind: "FakeThing".into(),
        plural: "fakethings".into(),
        namespaced,
        categories: vec!["fakecloud".into()],
        for_provider: json!({"type": "object", "properties": {
            "size": {"type": "integer"},
            "color": {"type": "string"},
            "tags": {"type": "object", "additionalProperties": {"type": "string"}}
        }}),
        at_provider: json!({"type": "object", "properties": {
            "id": {"type": "string"},
            "state": {"type": "string"},
            "size": {"type": "integer"},
            "color": {"type": "string"}
        }}),
        extra_columns: vec![json!({"name": "STATE", "type": "string", "jsonPath": ".status.atProvider.state"})],
        for_provider_required: false,
    }
}

fn config_spec() -> Value {
    json!({"type": "object", "required": ["endpoint"], "properties": {
        "endpoint": {"type": "string", "description": "The fake cloud's URL."},
        "lookup": {"type": "boolean", "default": true, "description": "Whether the cloud can find things by tag."},
        "deterministicNames": {"type": "boolean", "default": false, "description": "Whether things are named after their managed resource."}
    }})
}

fn config_kinds(namespaced: bool) -> ProviderConfigKinds {
    let kind = |group: &str, kind: &str, plural: &str, namespaced: bool| oxplane_runtime::kinds::Kind::new(group, VERSION, kind, plural, namespaced);
    if namespaced {
        ProviderConfigKinds {
            config: kind(NAMESPACED_GROUP, "ProviderConfig", "providerconfigs", true),
            cluster_config: Some(kind(NAMESPACED_GROUP, "ClusterProviderConfig", "clusterproviderconfigs", false)),
            usage: kind(NAMESPACED_GROUP, "ProviderConfigUsage", "providerconfigusages", true),
        }
    } else {
        ProviderConfigKinds {
            config: kind(GROUP, "ProviderConfig", "providerconfigs", false),
            cluster_config: None,
            usage: kind(GROUP, "ProviderConfigUsage", "providerconfigusages", false),
        }
    }
}

impl BuiltinProvider for FakeCloudProvider {
    fn name(&self) -> &'static str {
        "provider-fakecloud"
    }

    fn crds(&self, _package: &str) -> Vec<Value> {
        let categories = ["crossplane", "provider", "fakecloud"];
        vec![
            thing_crd(false).render(),
            provider_config_crd(GROUP, VERSION, "ProviderConfig", "providerconfigs", false, config_spec(), &categories),
            provider_config_usage_crd(GROUP, VERSION, "ProviderConfigUsage", "providerconfigusages", false, false, &categories),
            thing_crd(true).render(),
            provider_config_crd(NAMESPACED_GROUP, VERSION, "ProviderConfig", "providerconfigs", true, config_spec(), &categories),
            provider_config_crd(NAMESPACED_GROUP, VERSION, "ClusterProviderConfig", "clusterproviderconfigs", false, config_spec(), &categories),
            provider_config_usage_crd(NAMESPACED_GROUP, VERSION, "ProviderConfigUsage", "providerconfigusages", true, true, &categories),
        ]
    }

    fn start(&self, runtime: &Runtime, _package: &str) -> ProviderHandle {
        let connector: Arc<dyn ExternalConnector> = Arc::new(FakeCloudConnector { http: http_client() });
        let mut controllers = Vec::new();
        for namespaced in [false, true] {
            let configs = config_kinds(namespaced);
            controllers.extend(managed::start_config_controllers(runtime, &configs));
            let mut settings = ManagedSettings::new(thing_crd(namespaced).kind(), connector.clone(), self.poll_interval);
            settings.provider_configs = Some(Arc::new(configs));
            controllers.push(managed::start_controller(runtime, settings));
        }
        ProviderHandle::new(controllers)
    }
}

type HttpClient = Client<HttpConnector, Full<Bytes>>;

fn http_client() -> HttpClient {
    let mut connector = HttpConnector::new();
    // Requests are small: send them at once rather than waiting on Nagle's algorithm.
    connector.set_nodelay(true);
    Client::builder(TokioExecutor::new()).build(connector)
}

/// Builds clients from a FakeThing's ProviderConfig.
pub struct FakeCloudConnector {
    http: HttpClient,
}

#[async_trait::async_trait]
impl ExternalConnector for FakeCloudConnector {
    async fn connect(&self, context: &ConnectContext<'_>, _managed: &Managed) -> Result<Box<dyn ExternalClient>, ExternalError> {
        let config = context.provider_config.ok_or_else(|| ExternalError::definite("no ProviderConfig"))?;
        let endpoint = config
            .pointer("/spec/endpoint")
            .and_then(Value::as_str)
            .ok_or_else(|| ExternalError::definite("ProviderConfig has no spec.endpoint"))?
            .trim_end_matches('/')
            .to_string();
        Ok(Box::new(FakeCloudClient {
            http: self.http.clone(),
            endpoint,
            lookup: config.pointer("/spec/lookup").and_then(Value::as_bool).unwrap_or(true),
            deterministic: config.pointer("/spec/deterministicNames").and_then(Value::as_bool).unwrap_or(false),
        }))
    }
}

/// Talks to the fake cloud about one FakeThing.
pub struct FakeCloudClient {
    http: HttpClient,
    endpoint: String,
    lookup: bool,
    deterministic: bool,
}

/// An answer from the cloud: status code and JSON body.
type Answer = (u16, Value);

impl FakeCloudClient {
    /// Sends a request. A failure before a complete answer is ambiguous: the cloud may have
    /// acted on it.
    async fn call(&self, method: http::Method, path: &str, body: Option<Value>) -> Result<Answer, ExternalError> {
        self.call_then(method, path, body, |_| {}).await
    }

    /// [`Self::call`], running `answered` with the status code once the answer has begun to
    /// arrive (the cloud has acted on the request) and before its body is read.
    async fn call_then(&self, method: http::Method, path: &str, body: Option<Value>, answered: impl FnOnce(u16) + Send) -> Result<Answer, ExternalError> {
        let bytes = body.map(|b| Bytes::from(b.to_string())).unwrap_or_default();
        let request = http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.endpoint))
            .header("content-type", "application/json")
            .body(Full::new(bytes))
            .map_err(|e| ExternalError::definite(format!("cannot build request: {e}")))?;
        let call = async {
            let response = self.http.request(request).await.map_err(|e| ExternalError::ambiguous(format!("request failed: {e}")))?;
            let code = response.status().as_u16();
            answered(code);
            let body = response.into_body().collect().await.map_err(|e| ExternalError::ambiguous(format!("response lost: {e}")))?;
            Ok((code, serde_json::from_slice(&body.to_bytes()).unwrap_or(Value::Null)))
        };
        tokio::time::timeout(Duration::from_secs(10), call).await.map_err(|_| ExternalError::ambiguous("the cloud did not answer in 10s"))?
    }

    fn failure(code: u16, body: &Value) -> ExternalError {
        let message = body.get("error").and_then(Value::as_str).unwrap_or("unknown error").to_string();
        match code {
            409 => ExternalError::already_exists(message),
            400..=499 => ExternalError::definite(message),
            _ => ExternalError::ambiguous(format!("cloud error {code}: {message}")),
        }
    }

    async fn find(&self, managed: &Managed) -> Result<Option<Value>, ExternalError> {
        if let Some(id) = managed.external_name() {
            let (code, body) = self.call(http::Method::GET, &format!("/things/{id}"), None).await?;
            return match code {
                200 => Ok(Some(body)),
                404 => Ok(None),
                _ => Err(Self::failure(code, &body)),
            };
        }
        if !self.lookup || self.deterministic {
            return Ok(None);
        }
        let (code, body) = self.call(http::Method::GET, &format!("/things?tag={}={}", cloud::UID_TAG, managed.uid()), None).await?;
        match code {
            200 => Ok(body.as_array().and_then(|found| found.first().cloned())),
            _ => Err(Self::failure(code, &body)),
        }
    }
}

#[async_trait::async_trait]
impl ExternalClient for FakeCloudClient {
    fn naming(&self) -> ExternalNaming {
        if self.deterministic { ExternalNaming::FromMetadataName } else { ExternalNaming::Assigned { lookup_by_token: self.lookup } }
    }

    async fn observe(&mut self, managed: &mut Managed) -> Result<ExternalObservation, ExternalError> {
        let Some(thing) = self.find(managed).await? else {
            return Ok(ExternalObservation::default());
        };
        let id = thing.get("id").and_then(Value::as_str).unwrap_or_default().to_string();
        let state = thing.get("state").and_then(Value::as_str).unwrap_or_default().to_string();
        let observed = thing.get("spec").cloned().unwrap_or(json!({}));
        managed.set_at_provider(json!({"id": id, "state": state, "size": observed.get("size"), "color": observed.get("color")}));
        managed.set_condition(match state.as_str() {
            "ready" => Condition::available(),
            "deleting" => Condition::deleting(),
            _ => Condition::creating(),
        });
        let desired = managed.for_provider();
        let mut late_initialized = false;
        if desired.get("color").is_none()
            && let Some(color) = observed.get("color").filter(|c| !c.is_null())
            && let Some(spec) = managed.object.get_mut("spec").and_then(Value::as_object_mut)
        {
            let for_provider = spec.entry("forProvider").or_insert_with(|| json!({}));
            for_provider["color"] = color.clone();
            late_initialized = true;
        }
        let drifted: Vec<&str> =
            ["size", "color"].into_iter().filter(|field| desired.get(*field).is_some_and(|want| observed.get(*field) != Some(want))).collect();
        let up_to_date = drifted.is_empty();
        let connection_details =
            [("endpoint".to_string(), self.endpoint.clone().into_bytes()), ("id".to_string(), id.clone().into_bytes())].into_iter().collect();
        Ok(ExternalObservation {
            resource_exists: true,
            resource_up_to_date: up_to_date,
            resource_late_initialized: late_initialized,
            connection_details,
            diff: drifted.join(", "),
            external_name: Some(id),
            requeue_after: (state != "ready").then_some(Duration::from_millis(250)),
            ..Default::default()
        })
    }

    async fn create(&mut self, managed: &mut Managed) -> Result<ExternalCreation, ExternalError> {
        let desired = managed.desired_for_create();
        let mut tags = desired.get("tags").cloned().unwrap_or(json!({}));
        tags[cloud::UID_TAG] = json!(managed.uid());
        let mut body = json!({"tags": tags, "spec": {"size": desired.get("size"), "color": desired.get("color")}});
        if self.deterministic {
            body["id"] = json!(managed.external_name().unwrap_or(managed.name()));
        }
        let uid = managed.uid().to_string();
        // A crash point: the thing is made, and the answer saying so is not read yet.
        let answered = move |code| {
            if code == 201 {
                fault::point(fault::CREATE_RESPONSE_UNREAD, &uid);
            }
        };
        let (code, answer) = self.call_then(http::Method::POST, "/things", Some(body), answered).await?;
        if code != 201 {
            return Err(Self::failure(code, &answer));
        }
        let id = answer.get("id").and_then(Value::as_str).ok_or_else(|| ExternalError::ambiguous("the cloud answered without an id"))?;
        Ok(ExternalCreation { external_name: Some(id.to_string()), ..Default::default() })
    }

    async fn update(&mut self, managed: &mut Managed) -> Result<ExternalUpdate, ExternalError> {
        let id = managed.external_name().ok_or_else(|| ExternalError::definite("no external name to update"))?.to_string();
        let desired = managed.for_provider();
        let body = json!({"spec": {"size": desired.get("size"), "color": desired.get("color")}});
        let (code, answer) = self.call(http::Method::PUT, &format!("/things/{id}"), Some(body)).await?;
        if code != 200 {
            return Err(Self::failure(code, &answer));
        }
        Ok(ExternalUpdate::default())
    }

    async fn delete(&mut self, managed: &mut Managed) -> Result<ExternalDelete, ExternalError> {
        let Some(id) = managed.external_name().map(str::to_string) else { return Ok(ExternalDelete {}) };
        let (code, answer) = self.call(http::Method::DELETE, &format!("/things/{id}"), None).await?;
        match code {
            202 | 404 => Ok(ExternalDelete {}),
            _ => Err(Self::failure(code, &answer)),
        }
    }
}
