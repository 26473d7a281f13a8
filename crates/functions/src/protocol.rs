//! The composition function protocol (`apiextensions.fn.proto.v1`), as plain Rust values.
//!
//! Field names and meanings follow `RunFunctionRequest` / `RunFunctionResponse` of
//! Crossplane's function protocol; protobuf `Struct`s are [`serde_json::Value`] objects, so
//! built-in functions work on JSON directly. A gRPC transport converts these values to and
//! from the wire messages; in-process functions receive them as they are.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

/// What a function gets: the observed and desired state, its input, the pipeline context.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunFunctionRequest {
    /// The request's tag and what the caller supports.
    pub meta: RequestMeta,
    /// The composite and composed resources as they are in the cluster, as of the start of the
    /// pipeline.
    pub observed: State,
    /// What previous steps of the pipeline want.
    pub desired: State,
    /// The step's `input` (a Kubernetes-style object with `apiVersion` and `kind`).
    pub input: Option<Value>,
    /// The context passed from step to step.
    pub context: Option<Value>,
    /// Resources fetched for a deprecated `extra_resources` requirement, by requirement name.
    pub extra_resources: BTreeMap<String, Resources>,
    /// Credentials of the step, by name.
    pub credentials: BTreeMap<String, Credentials>,
    /// Resources fetched for a requirement, by requirement name (an empty entry: looked for,
    /// found nothing).
    pub required_resources: BTreeMap<String, Resources>,
    /// OpenAPI schemas fetched for a requirement, by requirement name.
    pub required_schemas: BTreeMap<String, Schema>,
}

/// `RequestMeta`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestMeta {
    /// An opaque tag identifying the request's content; the response echoes it.
    pub tag: String,
    /// What the caller supports.
    pub capabilities: Vec<Capability>,
}

/// A capability the caller advertises.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Capability {
    /// `CAPABILITY_UNSPECIFIED`.
    Unspecified,
    /// `CAPABILITY_CAPABILITIES`: the caller advertises capabilities.
    Capabilities,
    /// `CAPABILITY_REQUIRED_RESOURCES`.
    RequiredResources,
    /// `CAPABILITY_CREDENTIALS`.
    Credentials,
    /// `CAPABILITY_CONDITIONS`.
    Conditions,
    /// `CAPABILITY_REQUIRED_SCHEMAS`.
    RequiredSchemas,
}

impl Capability {
    /// Everything oxplane's composer supports, in the order Crossplane advertises it.
    pub const ALL: [Capability; 5] = [
        Capability::Capabilities,
        Capability::RequiredResources,
        Capability::Credentials,
        Capability::Conditions,
        Capability::RequiredSchemas,
    ];
}

/// Observed or desired state: the composite and the composed resources by name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct State {
    /// The composite resource (XR).
    pub composite: Option<Resource>,
    /// Composed resources, by composition resource name.
    pub resources: BTreeMap<String, Resource>,
}

/// One resource with its connection details and readiness.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Resource {
    /// The object, as JSON (`apiVersion`, `kind`, `metadata`, `spec`, `status`, ...).
    pub resource: Value,
    /// Connection details (secret data), by key.
    pub connection_details: BTreeMap<String, Vec<u8>>,
    /// Whether the resource is ready, as far as a function can tell.
    pub ready: Ready,
}

/// `Ready` of a resource.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Ready {
    /// `READY_UNSPECIFIED`: no function said.
    #[default]
    Unspecified,
    /// `READY_TRUE`.
    True,
    /// `READY_FALSE`.
    False,
}

/// A list of resources.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Resources {
    /// The resources.
    pub items: Vec<Resource>,
}

/// Credentials passed to a step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Credentials {
    /// `credential_data`: the data of a Secret.
    CredentialData(BTreeMap<String, Vec<u8>>),
}

/// An OpenAPI schema for a required kind.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Schema {
    /// The OpenAPI v3 schema, if the kind was found.
    pub openapi_v3: Option<Value>,
}

/// What a function answers.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunFunctionResponse {
    /// The echoed tag and how long the response may be cached.
    pub meta: ResponseMeta,
    /// The desired state: everything the function wants, including what previous steps wanted
    /// (a function passes through what it does not own).
    pub desired: State,
    /// Results: events, warnings, fatal errors.
    pub results: Vec<FnResult>,
    /// The context for the next step.
    pub context: Option<Value>,
    /// Resources and schemas the function needs to be called again with.
    pub requirements: Requirements,
    /// Conditions to set on the composite (and claim).
    pub conditions: Vec<Condition>,
    /// Output (operations only).
    pub output: Option<Value>,
}

/// `ResponseMeta`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResponseMeta {
    /// The request's tag.
    pub tag: String,
    /// How long the response stays valid; the composite is reconciled again after it.
    pub ttl: Option<Duration>,
}

/// One result of a function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FnResult {
    /// How severe.
    pub severity: Severity,
    /// What happened.
    pub message: String,
    /// A PascalCase reason, used as the event reason.
    pub reason: Option<String>,
    /// Whom the result is for.
    pub target: Option<Target>,
}

impl FnResult {
    /// A fatal result: the pipeline stops.
    pub fn fatal(message: impl Into<String>) -> Self {
        FnResult { severity: Severity::Fatal, message: message.into(), reason: None, target: None }
    }

    /// A warning: recorded as a Warning event, the pipeline goes on.
    pub fn warning(message: impl Into<String>) -> Self {
        FnResult { severity: Severity::Warning, message: message.into(), reason: None, target: None }
    }

    /// A normal result: recorded as a Normal event.
    pub fn normal(message: impl Into<String>) -> Self {
        FnResult { severity: Severity::Normal, message: message.into(), reason: None, target: None }
    }
}

/// `Severity` of a result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// `SEVERITY_UNSPECIFIED` (treated as a warning).
    Unspecified,
    /// `SEVERITY_FATAL`.
    Fatal,
    /// `SEVERITY_WARNING`.
    Warning,
    /// `SEVERITY_NORMAL`.
    Normal,
}

/// `Target` of a result or condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// `TARGET_UNSPECIFIED` (the composite).
    Unspecified,
    /// `TARGET_COMPOSITE`.
    Composite,
    /// `TARGET_COMPOSITE_AND_CLAIM`.
    CompositeAndClaim,
}

/// What a function needs to be called again with.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Requirements {
    /// Deprecated form of `resources`.
    pub extra_resources: BTreeMap<String, ResourceSelector>,
    /// Resources to fetch, by requirement name.
    pub resources: BTreeMap<String, ResourceSelector>,
    /// Schemas to fetch, by requirement name.
    pub schemas: BTreeMap<String, SchemaSelector>,
}

impl Requirements {
    /// Whether nothing is required.
    pub fn is_empty(&self) -> bool {
        self.extra_resources.is_empty() && self.resources.is_empty() && self.schemas.is_empty()
    }
}

/// Which resources a requirement selects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceSelector {
    /// `apiVersion` of the kind.
    pub api_version: String,
    /// The kind.
    pub kind: String,
    /// By name or by labels.
    pub matching: Match,
    /// The namespace to look in (none: cluster-scoped, or all namespaces for labels).
    pub namespace: Option<String>,
}

/// How a [`ResourceSelector`] matches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Match {
    /// `match_name`.
    Name(String),
    /// `match_labels`.
    Labels(BTreeMap<String, String>),
}

/// Which schema a requirement asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaSelector {
    /// `apiVersion` of the kind.
    pub api_version: String,
    /// The kind.
    pub kind: String,
}

/// A condition a function sets on the composite (and claim).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    /// The condition type.
    pub type_: String,
    /// Its status.
    pub status: ConditionStatus,
    /// A PascalCase reason.
    pub reason: String,
    /// A human-readable message.
    pub message: Option<String>,
    /// Whom it is for.
    pub target: Option<Target>,
}

/// `Status` of a function condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConditionStatus {
    /// `STATUS_CONDITION_UNSPECIFIED`.
    Unspecified,
    /// `STATUS_CONDITION_UNKNOWN`.
    Unknown,
    /// `STATUS_CONDITION_TRUE`.
    True,
    /// `STATUS_CONDITION_FALSE`.
    False,
}

/// Why a function could not answer at all (as opposed to a fatal result, which is an answer).
#[derive(Debug, thiserror::Error)]
pub enum FunctionError {
    /// The function could not be reached or failed in transport.
    #[error("cannot run function: {0}")]
    Unavailable(String),
    /// The function answered something that is not a valid response.
    #[error("invalid function response: {0}")]
    InvalidResponse(String),
    /// A function served elsewhere could not be called, or its answer was not usable.
    #[error("cannot run Function {function:?}: {cause}")]
    Remote {
        /// The Function's name.
        function: String,
        /// What went wrong.
        cause: String,
    },
}

/// A composition function, built in or remote.
#[async_trait::async_trait]
pub trait Function: Send + Sync {
    /// Runs the function once.
    async fn run(&self, request: RunFunctionRequest) -> Result<RunFunctionResponse, FunctionError>;
}

/// The response a function starts from: the request's tag, desired state and context passed
/// through unchanged, and a TTL (as function-sdk-go's `response.To`).
pub fn response_to(request: &RunFunctionRequest, ttl: Duration) -> RunFunctionResponse {
    RunFunctionResponse {
        meta: ResponseMeta { tag: request.meta.tag.clone(), ttl: Some(ttl) },
        desired: request.desired.clone(),
        context: request.context.clone(),
        ..Default::default()
    }
}

/// The default TTL of a function response (function-sdk-go's `DefaultTTL`).
pub const DEFAULT_TTL: Duration = Duration::from_secs(60);
