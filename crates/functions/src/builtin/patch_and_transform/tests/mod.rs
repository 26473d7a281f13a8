#![allow(clippy::unwrap_used, clippy::expect_used)]

//! Tests of function-patch-and-transform. Expected values are written by hand from
//! Crossplane's documented behaviour (see the reference in shared/reference).

mod connection;
mod patches;
mod readiness;
mod run;
mod transforms;

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::protocol::{Resource, RunFunctionRequest, RunFunctionResponse, Severity, State};

/// A resource with no connection details and unspecified readiness.
pub(super) fn res(value: Value) -> Resource {
    Resource { resource: value, ..Default::default() }
}

/// A request with this input and observed XR, and nothing else.
pub(super) fn request(input: Value, xr: Value) -> RunFunctionRequest {
    RunFunctionRequest {
        input: Some(input),
        observed: State { composite: Some(res(xr)), resources: BTreeMap::new() },
        ..Default::default()
    }
}

/// The `Resources` input with these templates (and optional extra top-level fields).
pub(super) fn resources_input(resources: Value) -> Value {
    json!({"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources", "resources": resources})
}

/// The messages of the results of a severity.
pub(super) fn messages(rsp: &RunFunctionResponse, severity: Severity) -> Vec<String> {
    rsp.results.iter().filter(|r| r.severity == severity).map(|r| r.message.clone()).collect()
}

/// A NopResource base.
pub(super) fn nop_base() -> Value {
    json!({"apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource", "spec": {"forProvider": {}}})
}
