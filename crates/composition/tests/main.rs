//! Core controllers' integration tests on an in-process API server. One test binary, so the
//! suite links once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;
mod bad_input;
mod claims;
mod composite;
mod core_crds;
mod environment;
mod grpc_faults;
mod grpc_functions;
mod rbac_roles;
mod selection;
mod usages;
mod xr_controls;
mod xrd_lifecycle;
