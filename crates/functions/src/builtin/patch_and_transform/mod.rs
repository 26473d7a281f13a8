//! function-patch-and-transform: input `pt.fn.crossplane.io/v1beta1` `Resources`.
//!
//! Composes resources from templates: each template's `base` is patched with values from the
//! observed XR or the composition environment, values from observed composed resources are
//! patched back into the desired XR (its status) and the environment, readiness comes from
//! readiness checks on the observed resources, and connection details are gathered for the
//! XR (as a composed `Secret` for a modern XR).
//!
//! - `input`: the input as written; `compile`: checking it (Crossplane's messages) into
//!   typed patches; `transforms` and `quantity`: transforms; `patches`: applying one
//!   patch; `readiness` and `connection`: readiness checks and connection details;
//!   `engine`: the run.

mod compile;
mod connection;
mod engine;
mod input;
mod patches;
mod quantity;
mod readiness;
mod transforms;

pub use connection::CONNECTION_SECRET_TYPE;
pub use engine::{ENVIRONMENT_KEY, run};

#[cfg(test)]
mod tests;
