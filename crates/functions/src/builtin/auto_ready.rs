//! function-auto-ready: marks desired composed resources ready from their observed state.
//!
//! For each desired composed resource that exists in the observed state and whose readiness
//! no earlier step decided (`READY_UNSPECIFIED`): a standard Kubernetes kind is judged by its
//! status fields (module `health`); any other kind is ready when its `Ready` condition is `True`.
//! The function only ever sets `READY_TRUE`; a resource not ready yet is left unspecified, so
//! the XR reports it as not ready. Input (optional): `autoready.fn.crossplane.io/v1beta1`
//! `Input` with `ttl` (a Go duration, default one minute). The alpha CEL health-check
//! customisation (`celHealthCheckCustomization*`) is not implemented; as in Crossplane's
//! function without its feature flag, those fields are ignored.

mod health;

use serde::Deserialize;
use serde_json::Value;

use crate::golang::duration;
use crate::protocol::{DEFAULT_TTL, FnResult, Ready, RunFunctionRequest, RunFunctionResponse, response_to};

pub use health::is_healthy;

/// The function's input.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Input {
    /// How long the response may be cached, as a Go duration.
    #[serde(default)]
    ttl: Option<String>,
}

/// Runs the function.
pub fn run(request: &RunFunctionRequest) -> RunFunctionResponse {
    let input: Input = match &request.input {
        None | Some(Value::Null) => Input::default(),
        Some(v) => match serde_json::from_value(v.clone()) {
            Ok(input) => input,
            Err(e) => {
                return fatal(request, format!("cannot get Function input from *v1.RunFunctionRequest: {e}"));
            }
        },
    };
    let ttl = match input.ttl.as_deref().filter(|t| !t.is_empty()) {
        None => DEFAULT_TTL,
        Some(t) => match duration::parse(t) {
            Ok(ttl) => ttl,
            Err(e) => return fatal(request, format!("invalid Function input: cannot parse ttl: {e}")),
        },
    };
    let mut rsp = response_to(request, ttl);
    for (name, desired) in rsp.desired.resources.iter_mut() {
        // A resource that does not exist yet cannot be ready.
        let Some(observed) = request.observed.resources.get(name) else { continue };
        // An earlier step's opinion stands.
        if desired.ready != Ready::Unspecified {
            continue;
        }
        if is_healthy(&observed.resource) {
            desired.ready = Ready::True;
        }
    }
    rsp
}

fn fatal(request: &RunFunctionRequest, message: String) -> RunFunctionResponse {
    let mut rsp = response_to(request, DEFAULT_TTL);
    rsp.results.push(FnResult::fatal(message));
    rsp
}

#[cfg(test)]
mod tests;
