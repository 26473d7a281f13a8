//! Crossplane's composition function protocol and oxplane's built-in functions.
//!
//! - [`protocol`]: `RunFunctionRequest` / `RunFunctionResponse` as Rust values (JSON for the
//!   protobuf `Struct`s), and the [`Function`] trait every function — built in or reached
//!   over gRPC — is called through.
//! - [`mod@builtin`]: functions that run in-process, found by package name ([`fn@builtin`]):
//!   function-patch-and-transform, function-auto-ready, function-environment-configs, function-extra-resources,
//!   function-go-templating, function-cel-filter and function-dummy.
//! - [`gotemplate`]: Go's `text/template` with Sprig's functions.
//! - [`fieldpath`]: Crossplane field paths (`spec.items[0].name`), read, written, deleted and
//!   merged into JSON values.
//! - [`grpc`]: the protocol over gRPC: the `.proto` messages, a client for functions served
//!   elsewhere, a server for any function, and the CA that secures both with mutual TLS.
//! - [`cache`]: the function response cache (`--enable-function-response-cache`): responses
//!   with a TTL kept on disk by request tag.
//! - [`golang`]: Go's renderings users see in Crossplane's output (`fmt.Sprintf`,
//!   `encoding/json`, durations).
//!
//! This crate does no Kubernetes I/O (its only network I/O is gRPC to and from functions; its
//! only files are the CA's and the response cache's): a
//! function sees only its request and answers with a response; anything it needs from the
//! cluster it asks for through `requirements`.

pub mod builtin;
pub mod cache;
pub mod fieldpath;
pub mod golang;
pub mod gotemplate;
pub mod grpc;
pub mod protocol;

pub use builtin::{AutoReady, EnvironmentConfigs, ExtraResources, PatchAndTransform, builtin, builtin_names};
pub use protocol::{Function, FunctionError};
