//! oxplane's Kubernetes-compatible API server: Kubernetes REST semantics over the revisioned
//! store, served over HTTPS to kubectl, kube-rs and the Python client.
//!
//! - [`authn`]: who a request is from ([`authn::UserInfo`] in each request's extensions).
//! - [`authz`]: what they may do (RBAC, impersonation, access reviews).
//! - [`server`]: `oxplane up`: certificates, token, kubeconfig, the HTTPS listener, shutdown.
//! - [`registry`]: the kinds served and where they live in URLs, discovery and the store.
//! - [`state`]: what handlers and in-server controllers share.
//! - [`ops`]: create, update, patch, delete with every rule a write obeys.
//! - [`http`]: the request handlers.
//! - [`status`]: Kubernetes `Status` errors.
//! - [`encryption`]: Secrets (and any configured resource) encrypted at rest.
//!
//! The pure machinery (patches, server-side apply, schemas and CEL, selectors, protobuf,
//! JSONPath, tables, OpenAPI documents) lives in `oxplane-machinery` and is re-exported here
//! under its old paths.

pub mod audit;
pub mod authn;
pub mod authz;
pub mod cache;
pub mod context;
pub mod controllers;
pub mod convert;
pub mod crd;
pub mod encryption;
pub mod http;
pub mod objects;
pub mod openapi;
pub mod ops;
pub mod registry;
pub mod server;
pub mod state;
pub mod status;
pub mod store_health;
pub mod testing;
pub mod webhooks;

pub use oxplane_machinery::{apply, jsonpath, patch, protobuf, schema, selectors, table};

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The store failed to open or to serve.
    #[error(transparent)]
    Store(#[from] oxplane_store::StoreError),
    /// Certificates could not be made or loaded.
    #[error("TLS setup failed: {0}")]
    Tls(String),
    /// The listen address could not be bound.
    #[error("cannot listen on {address}: {source}")]
    Bind {
        /// The address asked for.
        address: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A start-up step failed.
    #[error("start-up failed: {0}")]
    Startup(String),
}

impl ServeError {
    /// Wraps an I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        ServeError::Io { context: context.into(), source }
    }
}
