//! Running a composition's function pipeline: the observed state (the composite and the
//! composed resources it references), each step called in order with what the previous step
//! desired, requirements fetched and the step called again until they settle, results,
//! conditions and the shortest TTL collected.
//!
//! Where functions, credentials and required resources come from is a [`PipelineEnv`]: the
//! cluster ([`Live`], for the XR controller) or files (`oxplane render`), so both run the same
//! loop with the same request rules.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use oxplane_functions::Function;
use oxplane_functions::protocol::{
    Capability, Condition, Credentials, FnResult, Match, Requirements, Resource, ResourceSelector, Resources, RunFunctionRequest,
    RunFunctionResponse, Schema, SchemaSelector, Severity, State,
};
use oxplane_runtime::Runtime;
use oxplane_runtime::kinds::Gvk;
use oxplane_runtime::managed::connection;
use serde_json::Value;

use crate::packages::FunctionRegistry;

/// How often a step may be called again because its requirements changed (Crossplane's
/// `MaxRequirementsIterations`).
pub const MAX_REQUIREMENT_ITERATIONS: usize = 5;

/// One pipeline step.
#[derive(Clone)]
pub struct Step {
    /// `step`.
    pub name: String,
    /// The Function it calls: the name it is installed under (`functionRef.name`).
    pub function: String,
    /// `input`.
    pub input: Option<Value>,
    /// `credentials`: name → `(namespace, name)` of a Secret.
    pub credentials: Vec<(String, Option<(String, String)>)>,
    /// `requirements.requiredResources`, fetched before the first call.
    pub required: BTreeMap<String, ResourceSelector>,
    /// `requirements.requiredSchemas`, fetched before the first call.
    pub required_schemas: BTreeMap<String, SchemaSelector>,
}

impl Step {
    /// Reads a Composition pipeline step.
    pub fn parse(step: &Value) -> Result<Step, String> {
        let name = step.get("step").and_then(Value::as_str).ok_or("a pipeline step has no name")?.to_string();
        let function =
            step.pointer("/functionRef/name").and_then(Value::as_str).ok_or_else(|| format!("pipeline step {name:?} has no functionRef.name"))?;
        let credentials = step
            .get("credentials")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| {
                let credential = c.get("name")?.as_str()?.to_string();
                let secret = (c.get("source").and_then(Value::as_str) == Some("Secret")).then(|| {
                    let field = |f: &str| c.pointer(&format!("/secretRef/{f}")).and_then(Value::as_str).unwrap_or_default().to_string();
                    (field("namespace"), field("name"))
                });
                Some((credential, secret))
            })
            .collect();
        let mut required = BTreeMap::new();
        for requirement in step.pointer("/requirements/requiredResources").and_then(Value::as_array).into_iter().flatten() {
            let Some(key) = requirement.get("requirementName").and_then(Value::as_str) else { continue };
            let text = |f: &str| requirement.get(f).and_then(Value::as_str).unwrap_or_default().to_string();
            let matching = match requirement.get("name").and_then(Value::as_str) {
                Some(name) => Match::Name(name.to_string()),
                None => Match::Labels(
                    requirement
                        .get("matchLabels")
                        .and_then(Value::as_object)
                        .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect())
                        .unwrap_or_default(),
                ),
            };
            required.insert(
                key.to_string(),
                ResourceSelector {
                    api_version: text("apiVersion"),
                    kind: text("kind"),
                    matching,
                    namespace: requirement.get("namespace").and_then(Value::as_str).map(str::to_string),
                },
            );
        }
        let mut required_schemas = BTreeMap::new();
        for requirement in step.pointer("/requirements/requiredSchemas").and_then(Value::as_array).into_iter().flatten() {
            let Some(key) = requirement.get("requirementName").and_then(Value::as_str) else { continue };
            let text = |f: &str| requirement.get(f).and_then(Value::as_str).unwrap_or_default().to_string();
            required_schemas.insert(key.to_string(), SchemaSelector { api_version: text("apiVersion"), kind: text("kind") });
        }
        Ok(Step { name, function: function.to_string(), input: step.get("input").cloned(), credentials, required, required_schemas })
    }
}

/// What the pipeline produced.
#[derive(Default)]
pub struct Outcome {
    /// The desired state after the last step.
    pub desired: State,
    /// Results, with the step that returned them.
    pub results: Vec<(String, FnResult)>,
    /// Conditions for the composite (and claim).
    pub conditions: Vec<Condition>,
    /// The shortest TTL any step returned.
    pub ttl: Option<Duration>,
    /// A step returned a fatal result: `pipeline step "<step>" returned a fatal result: <msg>`.
    pub fatal: Option<String>,
    /// What the steps required (for realtime watches).
    pub required: Vec<ResourceSelector>,
    /// The context the last step returned.
    pub context: Option<Value>,
    /// Each step's `output`, for the steps that returned one (Operations record them).
    pub outputs: Vec<(String, Value)>,
}

/// Where a pipeline's functions, credentials and required resources come from.
#[async_trait::async_trait]
pub trait PipelineEnv: Send + Sync {
    /// The function `name` that step `step` calls, or the whole message saying why it cannot
    /// be called.
    async fn function(&self, step: &str, name: &str) -> Result<Arc<dyn Function>, String>;
    /// The data of the Secret `namespace/secret` for the credential `credential` of `step`, or
    /// the whole message saying why there is none.
    async fn credential(&self, step: &str, credential: &str, namespace: &str, secret: &str) -> Result<BTreeMap<String, Vec<u8>>, String>;
    /// The resources a selector matches, sorted; none when nothing matches.
    async fn resources(&self, selector: &ResourceSelector) -> Result<Resources, String>;
    /// The schema a selector asks for (an empty schema when the kind is unknown).
    async fn schema(&self, _selector: &SchemaSelector) -> Result<Schema, String> {
        Ok(Schema::default())
    }
    /// The message of a step whose function could not answer (or whose requirements never
    /// settled).
    fn step_failed(&self, step: &str, error: &str) -> String;
}

/// Whose pipeline runs: Crossplane words a step's failures differently for a Composition's
/// pipeline and an Operation's, and users search for those words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PipelineOf {
    /// A Composition's, run by the XR controller (and `oxplane diff`).
    Composition,
    /// An Operation's, run by the Operation controller.
    Operation,
}

/// The cluster as a pipeline sees it from a controller: installed Functions, Secrets and
/// objects read through the runtime's client.
pub struct Live<'a> {
    /// The runtime.
    pub runtime: &'a Runtime,
    /// The installed functions.
    pub functions: &'a FunctionRegistry,
    /// Whose pipeline this is, for the wording of its failures.
    pub of: PipelineOf,
}

#[async_trait::async_trait]
impl PipelineEnv for Live<'_> {
    async fn function(&self, step: &str, name: &str) -> Result<Arc<dyn Function>, String> {
        match self.functions.get(name) {
            Some(function) => Ok(function),
            // Crossplane's words for a Function with no active revision (here: no Function
            // object installed it), so what users search for matches.
            None => {
                let cause = why_not_callable(self.runtime, name).await;
                Err(self.step_failed(
                    step,
                    &format!(
                        "cannot get gRPC client connection for Function {name:?}: cannot find an active FunctionRevision (a FunctionRevision with spec.desiredState: Active): {cause}"
                    ),
                ))
            }
        }
    }

    async fn credential(&self, step: &str, credential: &str, namespace: &str, secret: &str) -> Result<BTreeMap<String, Vec<u8>>, String> {
        let pipeline = match self.of {
            PipelineOf::Composition => "Composition",
            PipelineOf::Operation => "operation",
        };
        let cannot = |e: &dyn std::fmt::Display| format!("cannot get {pipeline} pipeline step {step:?} credential {credential:?} from Secret: {e}");
        connection::read_secret(&self.runtime.kube, namespace, secret)
            .await
            .map_err(|e| cannot(&e))?
            .ok_or_else(|| cannot(&format!("secrets {secret:?} not found")))
    }

    async fn resources(&self, selector: &ResourceSelector) -> Result<Resources, String> {
        fetch(self.runtime, selector).await
    }

    /// Crossplane's XR controller says `cannot run Composition pipeline step`, its Operation
    /// controller `failed to invoke pipeline step`.
    fn step_failed(&self, step: &str, error: &str) -> String {
        match self.of {
            PipelineOf::Composition => format!("cannot run Composition pipeline step {step:?}: {error}"),
            PipelineOf::Operation => format!("failed to invoke pipeline step {step:?}: {error}"),
        }
    }

    /// From the API server's OpenAPI v3 document of the group-version, as Crossplane reads
    /// it; a group-version or kind nobody serves is an empty schema, not an error.
    async fn schema(&self, selector: &SchemaSelector) -> Result<Schema, String> {
        let path = openapi_path(&selector.api_version)?;
        match self.runtime.kube.get_path(&format!("/openapi/v3/{path}")).await {
            Ok(document) => Ok(Schema { openapi_v3: schema_in(std::slice::from_ref(&document), selector) }),
            Err(error) if error.is_not_found() => Ok(Schema::default()),
            Err(error) => Err(format!("cannot get OpenAPI schema for {path}: {error}")),
        }
    }
}

/// Where the API server serves the OpenAPI v3 document of an `apiVersion`: `api/v1` for the
/// core group, `apis/<group>/<version>` for the others. An apiVersion that is not a group and
/// a version (more than one `/`, characters no group or version has) is refused, so a
/// function's requirement can only ever name a document.
pub fn openapi_path(api_version: &str) -> Result<String, String> {
    let valid = |part: &str| {
        !part.is_empty()
            && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
            && part.split('.').all(|label| !label.is_empty() && !label.starts_with('-') && !label.ends_with('-'))
    };
    match api_version.split_once('/') {
        Some((group, version)) if valid(group) && valid(version) => Ok(format!("apis/{api_version}")),
        None if valid(api_version) => Ok(format!("api/{api_version}")),
        _ => Err(format!("cannot parse apiVersion {api_version:?}: not a group/version")),
    }
}

/// The schema of the kind a selector names among OpenAPI v3 documents (the answers of
/// `/openapi/v3/<path>`): the component whose `x-kubernetes-group-version-kind` names that
/// kind alone (components shared by several kinds, such as `DeleteOptions`, are skipped);
/// group and version compare case-insensitively, the kind exactly, as Crossplane matches them.
pub fn schema_in(documents: &[Value], selector: &SchemaSelector) -> Option<Value> {
    let (group, version) = selector.api_version.split_once('/').unwrap_or(("", selector.api_version.as_str()));
    documents.iter().find_map(|document| {
        document.pointer("/components/schemas").and_then(Value::as_object)?.values().find(|schema| {
            let Some([gvk]) = schema.get("x-kubernetes-group-version-kind").and_then(Value::as_array).map(Vec::as_slice) else {
                return false;
            };
            let field = |f: &str| gvk.get(f).and_then(Value::as_str).unwrap_or_default();
            field("group").eq_ignore_ascii_case(group) && field("version").eq_ignore_ascii_case(version) && field("kind") == selector.kind
        })
    }).cloned()
}

impl Outcome {
    /// The kinds the steps required.
    pub fn required_kinds(&self) -> impl Iterator<Item = Gvk> + '_ {
        self.required.iter().map(|s| Gvk::from_api_version(&s.api_version, &s.kind))
    }
}

/// Why the Function `name` cannot be called, in the words its own conditions use, so a
/// composite names the real cause (no such Function, a package that is not built in, a
/// failed install) rather than only the missing revision.
async fn why_not_callable(runtime: &Runtime, name: &str) -> String {
    match runtime.kube.get(&crate::packages::function_kind(), None, name).await {
        Ok(None) => format!("no Function named {name:?} exists"),
        Ok(Some(function)) => ["Installed", "Healthy"]
            .iter()
            .filter_map(|type_| oxplane_runtime::conditions::get(&function, type_))
            .find(|condition| condition.status != "True")
            .map(|condition| format!("Function {name:?} is not {}: {}", condition.type_.to_lowercase(), condition.message))
            .unwrap_or_else(|| format!("Function {name:?} is still being installed")),
        Err(error) => format!("cannot get Function {name:?}: {error}"),
    }
}

/// Runs the steps over the observed state, starting from `context`.
pub async fn run(env: &dyn PipelineEnv, steps: &[Step], observed: State, context: Value) -> Result<Outcome, String> {
    let mut outcome = Outcome::default();
    let mut desired = State::default();
    let mut context: Option<Value> = Some(context);
    for step in steps {
        let function = env.function(&step.name, &step.function).await?;
        let mut credentials = BTreeMap::new();
        for (name, secret) in &step.credentials {
            let Some((namespace, secret_name)) = secret else { continue };
            let data = env.credential(&step.name, name, namespace, secret_name).await?;
            credentials.insert(name.clone(), Credentials::CredentialData(data));
        }
        let mut required_resources = BTreeMap::new();
        for (key, selector) in &step.required {
            required_resources.insert(key.clone(), require(env, selector, &mut outcome.required).await?);
        }
        let mut required_schemas = BTreeMap::new();
        for (key, selector) in &step.required_schemas {
            required_schemas.insert(key.clone(), env.schema(selector).await?);
        }
        let mut request = RunFunctionRequest {
            observed: observed.clone(),
            desired: desired.clone(),
            input: step.input.clone(),
            context: context.clone(),
            credentials,
            required_resources,
            required_schemas,
            ..Default::default()
        };
        request.meta.capabilities = Capability::ALL.to_vec();
        let mut last_requirements: Option<Requirements> = None;
        let mut calls = 0;
        let response: RunFunctionResponse = loop {
            request.meta.tag = oxplane_functions::grpc::tag(&request);
            let started = std::time::Instant::now();
            let called = function.run(request.clone()).await;
            let function_name = step.function.as_str();
            oxplane_metrics::global().function_call(function_name, called.is_ok(), started.elapsed());
            let response = called.map_err(|e| env.step_failed(&step.name, &e.to_string()))?;
            calls += 1;
            if response.results.iter().any(|r| r.severity == Severity::Fatal) || response.requirements.is_empty() {
                break response;
            }
            if last_requirements.as_ref() == Some(&response.requirements) {
                break response;
            }
            if calls > MAX_REQUIREMENT_ITERATIONS {
                return Err(env.step_failed(
                    &step.name,
                    &format!("requirements didn't stabilize after the maximum number of iterations ({MAX_REQUIREMENT_ITERATIONS})"),
                ));
            }
            let mut fetched = BTreeMap::new();
            for (key, selector) in &response.requirements.resources {
                fetched.insert(key.clone(), require(env, selector, &mut outcome.required).await?);
            }
            let mut extra = BTreeMap::new();
            for (key, selector) in &response.requirements.extra_resources {
                extra.insert(key.clone(), require(env, selector, &mut outcome.required).await?);
            }
            let mut schemas = BTreeMap::new();
            for (key, selector) in &response.requirements.schemas {
                schemas.insert(key.clone(), env.schema(selector).await?);
            }
            // First-call shortcut: nothing new to send.
            if fetched.iter().all(|(k, v)| request.required_resources.get(k) == Some(v))
                && extra == request.extra_resources
                && schemas.iter().all(|(k, v)| request.required_schemas.get(k) == Some(v))
                && calls == 1
                && !fetched.is_empty()
            {
                break response;
            }
            for (key, resources) in fetched {
                request.required_resources.insert(key, resources);
            }
            request.extra_resources = extra;
            request.required_schemas.extend(schemas);
            request.context = response.context.clone().or(request.context.take());
            last_requirements = Some(response.requirements.clone());
        };
        if let Some(ttl) = response.meta.ttl.filter(|t| !t.is_zero()) {
            outcome.ttl = Some(outcome.ttl.map_or(ttl, |t| t.min(ttl)));
        }
        outcome.conditions.extend(response.conditions.iter().cloned());
        if let Some(output) = &response.output {
            outcome.outputs.push((step.name.clone(), output.clone()));
        }
        let fatal = response.results.iter().find(|r| r.severity == Severity::Fatal).map(|r| r.message.clone());
        outcome.results.extend(response.results.into_iter().map(|r| (step.name.clone(), r)));
        if let Some(message) = fatal {
            outcome.fatal = Some(format!("pipeline step {:?} returned a fatal result: {message}", step.name));
            outcome.desired = desired;
            outcome.context = context;
            return Ok(outcome);
        }
        desired = response.desired;
        context = response.context.or(context);
    }
    outcome.desired = desired;
    outcome.context = context;
    Ok(outcome)
}

/// Fetches what a selector names through `env`, recording the selector in `required`.
async fn require(env: &dyn PipelineEnv, selector: &ResourceSelector, required: &mut Vec<ResourceSelector>) -> Result<Resources, String> {
    if !required.contains(selector) {
        required.push(selector.clone());
    }
    env.resources(selector).await
}

/// Fetches the resources a selector names (sorted by namespace and name); an empty list when
/// nothing matches or the kind is not served.
async fn fetch(runtime: &Runtime, selector: &ResourceSelector) -> Result<Resources, String> {
    let gvk = Gvk::from_api_version(&selector.api_version, &selector.kind);
    let kind = match runtime.watches.kinds().resolve(&gvk).await {
        Ok(kind) => kind,
        Err(oxplane_runtime::kinds::KindError::NotServed { .. }) => return Ok(Resources::default()),
        Err(error) => return Err(format!("cannot fetch required resources: {error}")),
    };
    let namespace = selector.namespace.as_deref().filter(|ns| !ns.is_empty());
    let mut items = match &selector.matching {
        Match::Name(name) => runtime
            .kube
            .get(&kind, namespace, name)
            .await
            .map_err(|e| format!("cannot get required resource {gvk} {name:?}: {e}"))?
            .into_iter()
            .collect::<Vec<_>>(),
        Match::Labels(labels) => {
            let selector: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let selector = selector.join(",");
            runtime
                .kube
                .list(&kind, namespace, (!selector.is_empty()).then_some(selector.as_str()))
                .await
                .map_err(|e| format!("cannot list required resources {gvk}: {e}"))?
        }
    };
    items.sort_by(|a, b| {
        let key = |o: &Value| (oxplane_runtime::object::namespace(o).unwrap_or_default().to_string(), oxplane_runtime::object::name(o).unwrap_or_default().to_string());
        key(a).cmp(&key(b))
    });
    Ok(Resources { items: items.into_iter().map(|resource| Resource { resource, ..Default::default() }).collect() })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use serde_json::json;

    use super::*;

    fn selector(api_version: &str, kind: &str) -> SchemaSelector {
        SchemaSelector { api_version: api_version.into(), kind: kind.into() }
    }

    #[test]
    fn schemas_are_found_by_the_one_group_version_kind_they_name() {
        let document = json!({"components": {"schemas": {
            "org.example.v1.Config": {"type": "object", "x-kubernetes-group-version-kind": [{"group": "example.org", "version": "v1", "kind": "Config"}]},
            "io.k8s.DeleteOptions": {"type": "string", "x-kubernetes-group-version-kind": [
                {"group": "example.org", "version": "v1", "kind": "DeleteOptions"},
                {"group": "other.org", "version": "v1", "kind": "DeleteOptions"},
            ]},
            "v1.Pod": {"type": "array", "x-kubernetes-group-version-kind": [{"group": "", "version": "v1", "kind": "Pod"}]},
        }}});
        let documents = [document];
        assert_eq!(schema_in(&documents, &selector("example.org/v1", "Config")).unwrap()["type"], "object");
        assert_eq!(schema_in(&documents, &selector("Example.ORG/V1", "Config")).unwrap()["type"], "object");
        assert_eq!(schema_in(&documents, &selector("v1", "Pod")).unwrap()["type"], "array");
        assert!(schema_in(&documents, &selector("example.org/v1", "config")).is_none());
        assert!(schema_in(&documents, &selector("example.org/v2", "Config")).is_none());
        assert!(schema_in(&documents, &selector("example.org/v1", "DeleteOptions")).is_none());
    }

    #[test]
    fn openapi_paths_name_a_group_version_document_only() {
        assert_eq!(openapi_path("v1").unwrap(), "api/v1");
        assert_eq!(openapi_path("example.org/v1alpha1").unwrap(), "apis/example.org/v1alpha1");
        for bad in ["", "a/b/c", "../v1", "example.org/", "/v1", "example.org/v1?x=1", "a b/v1"] {
            assert!(openapi_path(bad).unwrap_err().contains("cannot parse apiVersion"), "{bad}");
        }
    }

    #[test]
    fn required_schemas_of_a_step_are_read() {
        let step = Step::parse(&json!({
            "step": "s",
            "functionRef": {"name": "f"},
            "requirements": {"requiredSchemas": [{"requirementName": "xr", "apiVersion": "example.org/v1", "kind": "XThing"}]},
        }))
        .unwrap();
        assert_eq!(step.required_schemas, BTreeMap::from([("xr".to_string(), selector("example.org/v1", "XThing"))]));
    }
}
