//! Installing a function: the Function object's name becomes callable from composition
//! pipelines (`functionRef.name`). Where its calls go:
//!
//! - `render.crossplane.io/runtime: Development` (Crossplane's annotation, so the same YAML
//!   works with `crossplane render`): plain-text gRPC to
//!   `render.crossplane.io/runtime-development-target` (default `localhost:9443`), a function
//!   the user started themselves;
//! - `oxplane.io/function-endpoint: HOST:PORT`: gRPC with mutual TLS to a function the user
//!   runs elsewhere, with the server certificate directory `oxplane function certs` wrote from
//!   oxplane's CA;
//! - a built-in function, in-process;
//! - otherwise (a package oxplane has not built in) the package pulled from its registry and
//!   run as a local process with mutual TLS (`function_runtime.rs`), where `oxplane up` runs.
//!
//! A function reached over gRPC is Healthy while a connection to it can be made; the
//! revision's `status.endpoint` says where calls go.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;

use oxplane_functions::Function;
use oxplane_functions::cache::ResponseCache;
use oxplane_functions::grpc::client::DEFAULT_CALL_TIMEOUT;
use oxplane_functions::grpc::tls::CertificateAuthority;
use oxplane_functions::grpc::{FunctionEndpoint, GrpcFunction};
use oxplane_runtime::kinds::Kind;
use oxplane_runtime::object;
use oxplane_runtime::provider::package_name;
use serde_json::{Map, Value, json};

use super::function_runtime::FunctionRuntimes;
use super::reconciler::{Installer, Progress, revision_name};
use super::{function_kind, function_revision_kind};

/// The functions pipelines can call now, by Function object name.
#[derive(Default)]
pub struct FunctionRegistry {
    functions: RwLock<HashMap<String, Arc<dyn Function>>>,
}

impl FunctionRegistry {
    /// An empty registry.
    pub fn new() -> Arc<Self> {
        Arc::new(FunctionRegistry::default())
    }

    /// The function installed under `name`.
    pub fn get(&self, name: &str) -> Option<Arc<dyn Function>> {
        self.functions.read().unwrap_or_else(|p| p.into_inner()).get(name).cloned()
    }

    /// Makes `function` callable as `name`.
    pub fn register(&self, name: &str, function: Arc<dyn Function>) {
        self.functions.write().unwrap_or_else(|p| p.into_inner()).insert(name.to_string(), function);
    }

    /// Makes `name` uncallable.
    pub fn unregister(&self, name: &str) {
        self.functions.write().unwrap_or_else(|p| p.into_inner()).remove(name);
    }
}

/// `render.crossplane.io/runtime`: `Development` means the user runs the function.
pub const ANNOTATION_RUNTIME: &str = "render.crossplane.io/runtime";
/// `render.crossplane.io/runtime-development-target`: where a Development function listens.
pub const ANNOTATION_DEVELOPMENT_TARGET: &str = "render.crossplane.io/runtime-development-target";
/// `oxplane.io/function-endpoint`: `HOST:PORT` of a function served with mutual TLS.
pub const ANNOTATION_ENDPOINT: &str = "oxplane.io/function-endpoint";
/// Where a Development function listens when no target is given (as `crossplane render`).
pub const DEFAULT_DEVELOPMENT_TARGET: &str = "localhost:9443";

/// Where a Function's calls go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// A built-in function, in-process.
    Builtin,
    /// Plain-text gRPC to `HOST:PORT` (the development annotations).
    Insecure(String),
    /// gRPC with mutual TLS to `HOST:PORT`.
    MutualTls(String),
}

/// Where the Function object's calls go, from its annotations.
pub fn placement(package: &Value) -> Placement {
    let annotation = |key: &str| object::annotation(package, key).map(str::trim).filter(|v| !v.is_empty());
    if annotation(ANNOTATION_RUNTIME) == Some("Development") {
        return Placement::Insecure(annotation(ANNOTATION_DEVELOPMENT_TARGET).unwrap_or(DEFAULT_DEVELOPMENT_TARGET).to_string());
    }
    match annotation(ANNOTATION_ENDPOINT) {
        Some(endpoint) => Placement::MutualTls(endpoint.to_string()),
        None => Placement::Builtin,
    }
}

/// What a built-in function's package declares (`spec.capabilities` of its `crossplane.yaml`,
/// copied to its revision's `status.capabilities`): function-go-templating and function-dummy
/// also run in Operations; the others compose only.
pub fn builtin_capabilities(package: &str) -> &'static [&'static str] {
    match package {
        oxplane_functions::builtin::GO_TEMPLATING | oxplane_functions::builtin::DUMMY => &["composition", "operation"],
        _ => &["composition"],
    }
}

/// A function served over gRPC ships no package metadata oxplane reads; it may be used both in
/// Compositions and in Operations (the function itself answers whether it can).
const REMOTE_CAPABILITIES: &[&str] = &["composition", "operation"];

/// Installs functions into a registry.
pub struct FunctionInstaller {
    registry: Arc<FunctionRegistry>,
    catalog: BTreeMap<&'static str, Arc<dyn Function>>,
    /// oxplane's CA directory for mutual TLS (none: only plain-text endpoints work).
    tls_dir: Option<PathBuf>,
    /// Clients of functions reached over gRPC, by Function name, kept while the endpoint
    /// stays the same so every call reuses one channel.
    remotes: Mutex<HashMap<String, Arc<GrpcFunction>>>,
    /// The response cache functions reached over gRPC answer from, when enabled.
    cache: Option<Arc<ResponseCache>>,
    /// The processes of pulled Function packages (none: only built-ins and endpoints).
    runtimes: Option<Arc<FunctionRuntimes>>,
    /// Which references are served by a built-in function.
    sources: super::PackageSources,
}

impl FunctionInstaller {
    /// An installer of the given built-in functions (by package name) into `registry`.
    pub fn new(registry: Arc<FunctionRegistry>, catalog: Vec<(&'static str, Arc<dyn Function>)>) -> Self {
        FunctionInstaller {
            registry,
            catalog: catalog.into_iter().collect(),
            tls_dir: None,
            remotes: Mutex::new(HashMap::new()),
            cache: None,
            runtimes: None,
            sources: super::PackageSources::default(),
        }
    }

    /// Answers functions reached over gRPC from `cache` when it holds a live response to the
    /// same request (`--enable-function-response-cache`). Built-in functions are not cached:
    /// they run in-process in less time than a cache file takes to read.
    pub fn with_response_cache(mut self, cache: Option<Arc<ResponseCache>>) -> Self {
        self.cache = cache;
        self
    }

    /// Serves with a built-in function only the references `sources` leaves built in (the
    /// others are pulled).
    pub fn with_sources(mut self, sources: super::PackageSources) -> Self {
        self.sources = sources;
        self
    }

    /// Whether `reference` is served by one of the built-in functions.
    fn is_builtin(&self, reference: &str) -> bool {
        self.sources.is_builtin(&self.builtin_names(), reference)
    }

    /// Pulls Function packages that are not built in and runs them with `runtimes`.
    pub fn with_runtimes(mut self, runtimes: Option<Arc<FunctionRuntimes>>) -> Self {
        self.runtimes = runtimes;
        self
    }

    /// Runs a pulled Function package's process and reaches it with mutual TLS.
    async fn install_pulled(&self, package: &Value, reference: &str, pull: &oxplane_xpkg::registry::ProgressSender) -> Result<Option<String>, String> {
        let name = object::name(package).unwrap_or_default();
        let Some(runtimes) = &self.runtimes else {
            return Err(format!("{reference:?} is not a built-in function, and this oxplane runs no function packages"));
        };
        let started = runtimes.ensure(package, reference, &revision_name(name, reference), pull).await?;
        match started.down.as_deref() {
            None => {}
            Some("starting") => return Ok(Some(format!("waiting for the function's process to start on {}", started.address))),
            Some(why) => return Err(why.to_string()),
        }
        match self.install_remote(name, &started.address, true).await {
            Ok(done) => Ok(done),
            // Up, not serving yet: a new process takes a moment to listen.
            Err(cause) => Ok(Some(format!("waiting for the function's process to serve: {cause}"))),
        }
    }

    /// Uses oxplane's CA in `dir` (created on first use) for functions served with mutual TLS.
    pub fn with_tls_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.tls_dir = dir;
        self
    }

    async fn install_remote(&self, name: &str, address: &str, mutual_tls: bool) -> Result<Option<String>, String> {
        let tls = if mutual_tls {
            let dir = self.tls_dir.as_deref().ok_or_else(|| format!("cannot call function {name:?} at {address} with mutual TLS: no certificate authority is configured"))?;
            let ca = CertificateAuthority::load_or_create(dir).map_err(|e| format!("cannot load oxplane's certificate authority: {e}"))?;
            Some(ca.client_tls(SystemTime::now()).map_err(|e| format!("cannot issue oxplane's client certificate: {e}"))?)
        } else {
            None
        };
        let endpoint = FunctionEndpoint { address: address.to_string(), tls };
        let function = {
            let mut remotes = self.remotes.lock().unwrap_or_else(|p| p.into_inner());
            match remotes.get(name) {
                // Same endpoint and certificate: keep the client and its channel.
                Some(existing) if existing.endpoint() == &endpoint => existing.clone(),
                _ => {
                    let function = Arc::new(GrpcFunction::new(name, endpoint, DEFAULT_CALL_TIMEOUT).map_err(|e| e.to_string())?);
                    remotes.insert(name.to_string(), function.clone());
                    let callable: Arc<dyn Function> = function.clone();
                    self.registry.register(name, match &self.cache {
                        Some(cache) => cache.wrap(name, callable),
                        None => callable,
                    });
                    function
                }
            }
        };
        function.probe().await.map_err(|cause| format!("cannot reach function {name:?} at {address}: {cause}"))?;
        Ok(None)
    }
}

#[async_trait::async_trait]
impl Installer for FunctionInstaller {
    fn package_kind(&self) -> Kind {
        function_kind()
    }

    fn revision_kind(&self) -> Kind {
        function_revision_kind()
    }

    fn noun(&self) -> &'static str {
        "function"
    }

    fn builtin_names(&self) -> Vec<&'static str> {
        self.catalog.keys().copied().collect()
    }

    fn pulls(&self) -> bool {
        self.runtimes.is_some()
    }

    fn accepts(&self, package: &Value, reference: &str) -> bool {
        placement(package) != Placement::Builtin || self.is_builtin(reference) || self.runtimes.is_some()
    }

    async fn install(&self, package: &Value, reference: &str, pull: &oxplane_xpkg::registry::ProgressSender) -> Result<Progress, String> {
        let name = object::name(package).unwrap_or_default();
        match placement(package) {
            Placement::Insecure(address) => return self.install_remote(name, &address, false).await.map(Progress::from),
            Placement::MutualTls(address) => return self.install_remote(name, &address, true).await.map(Progress::from),
            Placement::Builtin if !self.is_builtin(reference) => return self.install_pulled(package, reference, pull).await.map(Progress::from),
            Placement::Builtin => {}
        }
        if let Some(runtimes) = &self.runtimes {
            runtimes.stop(name);
        }
        self.remotes.lock().unwrap_or_else(|p| p.into_inner()).remove(name);
        let Some(function) = self.catalog.get(package_name(reference)) else {
            return Err(format!("{reference:?} is not a built-in function"));
        };
        self.registry.register(object::name(package).unwrap_or_default(), function.clone());
        Ok(Progress::Installed)
    }

    async fn uninstall_blockers(&self, _package: &Value) -> Result<Vec<String>, String> {
        Ok(Vec::new())
    }

    async fn uninstall(&self, package: &Value) -> Result<Option<String>, String> {
        self.deactivate(package).await;
        Ok(None)
    }

    async fn deactivate(&self, package: &Value) {
        if let Some(runtimes) = &self.runtimes {
            runtimes.stop(object::name(package).unwrap_or_default());
        }
        self.remotes.lock().unwrap_or_else(|p| p.into_inner()).remove(object::name(package).unwrap_or_default());
        self.registry.unregister(object::name(package).unwrap_or_default());
    }

    fn dependencies(&self, package: &Value) -> Vec<super::configurations::dependencies::Dependency> {
        self.runtimes.as_ref().map(|r| r.dependencies(object::name(package).unwrap_or_default())).unwrap_or_default()
    }

    fn revision_status(&self, package: &Value) -> Map<String, Value> {
        let reference = package.pointer("/spec/package").and_then(Value::as_str).unwrap_or_default();
        let endpoint = match placement(package) {
            Placement::Builtin => format!("in-process:///{}", package_name(reference)),
            Placement::Insecure(address) | Placement::MutualTls(address) => address,
        };
        let capabilities = match placement(package) {
            Placement::Builtin => builtin_capabilities(package_name(reference)),
            Placement::Insecure(_) | Placement::MutualTls(_) => REMOTE_CAPABILITIES,
        };
        let mut status = Map::new();
        if let Some(runtimes) = &self.runtimes {
            runtimes.dependency_status(object::name(package).unwrap_or_default(), &mut status);
        }
        if let Some((address, capabilities)) = self.runtimes.as_ref().and_then(|r| r.status(object::name(package).unwrap_or_default())) {
            status.insert("endpoint".into(), json!(address));
            status.insert("capabilities".into(), json!(capabilities));
            return status;
        }
        if placement(package) == Placement::Builtin && !self.is_builtin(reference) {
            // Pulled, its process not started yet: no endpoint to name.
            return status;
        }
        status.insert("endpoint".into(), json!(endpoint));
        status.insert("capabilities".into(), json!(capabilities));
        status
    }
}
