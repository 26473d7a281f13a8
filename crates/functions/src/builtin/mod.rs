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
//!
//! The last two share `selection` (sources by reference or label selector, requirements,
//! sorting, merging).

pub mod auto_ready;
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
        _ => None,
    }
}

/// The package names of every built-in function.
pub fn builtin_names() -> Vec<&'static str> {
    vec![PATCH_AND_TRANSFORM, AUTO_READY, ENVIRONMENT_CONFIGS, EXTRA_RESOURCES, GO_TEMPLATING]
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
                "function-go-templating"
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
