//! Crossplane's composition function protocol and oxplane's built-in functions.
//!
//! - [`protocol`]: `RunFunctionRequest` / `RunFunctionResponse` as Rust values (JSON for the
//!   protobuf `Struct`s), and the [`Function`] trait every function — built in or reached
//!   over gRPC — is called through.
//!
//! This crate does no Kubernetes I/O: a function sees only its request and answers with a
//! response; anything it needs from the cluster it asks for through `requirements`.

pub mod protocol;

pub use protocol::{Function, FunctionError};
