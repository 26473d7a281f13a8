//! Installing a built-in function: the Function object's name becomes callable from
//! composition pipelines (`functionRef.name`), served in-process.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use oxplane_functions::Function;
use oxplane_runtime::kinds::Kind;
use oxplane_runtime::object;
use oxplane_runtime::provider::package_name;
use serde_json::{Map, Value, json};

use super::reconciler::Installer;
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

/// Installs built-in functions into a registry.
pub struct FunctionInstaller {
    registry: Arc<FunctionRegistry>,
    catalog: BTreeMap<&'static str, Arc<dyn Function>>,
}

impl FunctionInstaller {
    /// An installer of the given built-in functions (by package name) into `registry`.
    pub fn new(registry: Arc<FunctionRegistry>, catalog: Vec<(&'static str, Arc<dyn Function>)>) -> Self {
        FunctionInstaller { registry, catalog: catalog.into_iter().collect() }
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

    async fn install(&self, package: &Value, reference: &str) -> Result<Option<String>, String> {
        let Some(function) = self.catalog.get(package_name(reference)) else {
            return Err(format!("{reference:?} is not a built-in function"));
        };
        self.registry.register(object::name(package).unwrap_or_default(), function.clone());
        Ok(None)
    }

    async fn uninstall_blockers(&self, _package: &Value) -> Result<Vec<String>, String> {
        Ok(Vec::new())
    }

    async fn uninstall(&self, package: &Value) -> Result<Option<String>, String> {
        self.registry.unregister(object::name(package).unwrap_or_default());
        Ok(None)
    }

    fn revision_status(&self, package: &Value) -> Map<String, Value> {
        let reference = package.pointer("/spec/package").and_then(Value::as_str).unwrap_or_default();
        let mut status = Map::new();
        status.insert("endpoint".into(), json!(format!("in-process:///{}", package_name(reference))));
        status
    }
}
