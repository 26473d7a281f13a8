//! Composition functions built into oxplane, called in-process through the same
//! [`Function`] trait as functions reached over gRPC, and found by package name with
//! [`builtin`]: a Composition step whose `functionRef` names one of these runs it without a
//! Function package or a network hop.
//!
//! - [`patch_and_transform`]: `function-patch-and-transform` ([`PatchAndTransform`]).
//! - [`auto_ready`]: `function-auto-ready` ([`AutoReady`]).
//! - [`environment_configs`]: `function-environment-configs` ([`EnvironmentConfigs`]).
//! - [`extra_resources`]: `function-extra-resources` ([`ExtraResources`]).
//! - [`go_templating`]: `function-go-templating` ([`go_templating::GoTemplating`]).
//! - [`cel_filter`]: `function-cel-filter` ([`CelFilter`]).
//! - [`dummy`]: `function-dummy` ([`Dummy`]).
//!
//! The last two share `selection` (sources by reference or label selector, requirements,
//! sorting, merging).

pub mod auto_ready;
pub mod cel_filter;
pub mod dummy;
pub mod environment_configs;
pub mod extra_resources;
pub mod go_templating;
pub mod patch_and_transform;
mod selection;

use std::sync::Arc;

use crate::protocol::{Function, FunctionError, RunFunctionRequest, RunFunctionResponse};

/// The package name of function-patch-and-transform.
pub const PATCH_AND_TRANSFORM: &str = "function-patch-and-transform";

/// The package name of function-auto-ready.
pub const AUTO_READY: &str = "function-auto-ready";

/// The package name of function-environment-configs.
pub const ENVIRONMENT_CONFIGS: &str = "function-environment-configs";

/// The package name of function-extra-resources.
pub const EXTRA_RESOURCES: &str = "function-extra-resources";

/// The package name of function-go-templating.
pub const GO_TEMPLATING: &str = "function-go-templating";

/// The package name of function-cel-filter.
pub const CEL_FILTER: &str = "function-cel-filter";

/// The package name of function-dummy.
pub const DUMMY: &str = "function-dummy";

/// function-cel-filter.
#[derive(Clone, Copy, Debug, Default)]
pub struct CelFilter;

#[async_trait::async_trait]
impl Function for CelFilter {
    async fn run(&self, request: RunFunctionRequest) -> Result<RunFunctionResponse, FunctionError> {
        Ok(cel_filter::run(&request))
    }
}

/// function-dummy.
#[derive(Clone, Copy, Debug, Default)]
pub struct Dummy;

#[async_trait::async_trait]
impl Function for Dummy {
    async fn run(&self, request: RunFunctionRequest) -> Result<RunFunctionResponse, FunctionError> {
        Ok(dummy::run(&request))
    }
}

/// function-patch-and-transform.
#[derive(Clone, Copy, Debug, Default)]
pub struct PatchAndTransform;

#[async_trait::async_trait]
impl Function for PatchAndTransform {
    async fn run(&self, request: RunFunctionRequest) -> Result<RunFunctionResponse, FunctionError> {
        Ok(patch_and_transform::run(&request))
    }
}

/// function-auto-ready.
#[derive(Clone, Copy, Debug, Default)]
pub struct AutoReady;

#[async_trait::async_trait]
impl Function for AutoReady {
    async fn run(&self, request: RunFunctionRequest) -> Result<RunFunctionResponse, FunctionError> {
        Ok(auto_ready::run(&request))
    }
}

/// function-environment-configs.
#[derive(Clone, Copy, Debug, Default)]
pub struct EnvironmentConfigs;

#[async_trait::async_trait]
impl Function for EnvironmentConfigs {
    async fn run(&self, request: RunFunctionRequest) -> Result<RunFunctionResponse, FunctionError> {
        Ok(environment_configs::run(&request))
    }
}

/// function-extra-resources.
#[derive(Clone, Copy, Debug, Default)]
pub struct ExtraResources;

#[async_trait::async_trait]
impl Function for ExtraResources {
    async fn run(&self, request: RunFunctionRequest) -> Result<RunFunctionResponse, FunctionError> {
        Ok(extra_resources::run(&request))
    }
}

/// The built-in function with this package name, if there is one.
pub fn builtin(name: &str) -> Option<Arc<dyn Function>> {
    match name {
        PATCH_AND_TRANSFORM => Some(Arc::new(PatchAndTransform)),
        AUTO_READY => Some(Arc::new(AutoReady)),
        ENVIRONMENT_CONFIGS => Some(Arc::new(EnvironmentConfigs)),
        EXTRA_RESOURCES => Some(Arc::new(ExtraResources)),
        GO_TEMPLATING => Some(Arc::new(go_templating::GoTemplating::default())),
        CEL_FILTER => Some(Arc::new(CelFilter)),
        DUMMY => Some(Arc::new(Dummy)),
        _ => None,
    }
}

/// What built-in functions are started with.
#[derive(Clone, Debug, Default)]
pub struct BuiltinOptions {
    /// The directory function-go-templating's `FileSystem` sources read under (none: such
    /// sources are refused).
    pub go_templating_dir: Option<std::path::PathBuf>,
}

/// Every built-in function by package name, configured with `options`.
pub fn catalog(options: &BuiltinOptions) -> Vec<(&'static str, Arc<dyn Function>)> {
    builtin_names()
        .into_iter()
        .filter_map(|name| {
            let function: Arc<dyn Function> = match name {
                GO_TEMPLATING => Arc::new(go_templating::GoTemplating::with_root(options.go_templating_dir.clone())),
                _ => builtin(name)?,
            };
            Some((name, function))
        })
        .collect()
}

/// The package names of every built-in function.
pub fn builtin_names() -> Vec<&'static str> {
    vec![PATCH_AND_TRANSFORM, AUTO_READY, ENVIRONMENT_CONFIGS, EXTRA_RESOURCES, GO_TEMPLATING, CEL_FILTER, DUMMY]
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn catalog_knows_every_function_by_package_name() {
        assert_eq!(
            builtin_names(),
            vec![
                "function-patch-and-transform",
                "function-auto-ready",
                "function-environment-configs",
                "function-extra-resources",
                "function-go-templating",
                "function-cel-filter",
                "function-dummy"
            ]
        );
        for name in builtin_names() {
            assert!(builtin(name).is_some(), "{name}");
        }
        assert!(builtin("function-kcl").is_none());
    }

    #[tokio::test]
    async fn catalog_entries_run_through_the_function_trait() {
        // With no input, patch-and-transform answers a fatal result (it needs resources);
        // auto-ready answers the desired state it was given.
        let pt = builtin(PATCH_AND_TRANSFORM).unwrap();
        let rsp = pt.run(RunFunctionRequest::default()).await.unwrap();
        assert_eq!(rsp.results.len(), 1);
        assert_eq!(
            rsp.results[0].message,
            "invalid Function input: resources: Required value: resources or environment patches are required"
        );
        let ar = builtin(AUTO_READY).unwrap();
        let rsp = ar.run(RunFunctionRequest::default()).await.unwrap();
        assert!(rsp.results.is_empty());
        assert_eq!(rsp.meta.ttl, Some(crate::protocol::DEFAULT_TTL));
        // Without input, environment-configs and extra-resources have nothing to do.
        for name in [ENVIRONMENT_CONFIGS, EXTRA_RESOURCES] {
            let rsp = builtin(name).unwrap().run(RunFunctionRequest::default()).await.unwrap();
            assert!(rsp.results.is_empty(), "{name}");
            assert!(rsp.requirements.is_empty(), "{name}");
            assert_eq!(rsp.context, None, "{name}");
        }
    }
}
