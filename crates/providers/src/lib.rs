//! oxplane's built-in providers: managed-resource kinds and their external clients, run by
//! the runtime's managed-resource reconciler.
//!
//! - [`nop`]: provider-nop, resources that drive nothing (conditions and connection details on
//!   a timer); what composition tests compose.
//! - [`fakecloud`]: provider-fakecloud, things in a local fake cloud with random identifiers
//!   and asynchronous creates, and the fake cloud itself; what fault-injection tests use.
//! - [`sql`]: provider-sql, databases, roles and grants in a real PostgreSQL server.
//! - [`http`]: provider-http, resources of any HTTP API (`Request`) and one-shot requests
//!   (`DisposableRequest`).
//! - [`kubernetes`]: provider-kubernetes, any Kubernetes object (`Object`) in another cluster
//!   reached through a kubeconfig, or in the control plane itself.
//! - [`subset`]: whether an observed object holds what a desired one says, shared by both.
//!
//! [`catalog`] lists every built-in provider by package name.

pub mod fakecloud;
pub mod http;
pub mod kubernetes;
pub mod nop;
pub mod sql;
pub mod subset;

use std::sync::Arc;

use oxplane_runtime::provider::BuiltinProvider;

/// Every built-in provider.
pub fn catalog() -> Vec<Arc<dyn BuiltinProvider>> {
    catalog_with(&CatalogOptions::default())
}

/// What the built-in providers need from the process that runs them.
#[derive(Clone, Debug, Default)]
pub struct CatalogOptions {
    /// Where provider-kubernetes' Object conversion webhook is served (see
    /// [`conversion_review`]).
    pub kubernetes_conversion: Option<kubernetes::schemas::ConversionWebhook>,
}

/// Every built-in provider, with `options`.
pub fn catalog_with(options: &CatalogOptions) -> Vec<Arc<dyn BuiltinProvider>> {
    vec![
        Arc::new(nop::NopProvider),
        Arc::new(fakecloud::FakeCloudProvider::default()),
        Arc::new(sql::SqlProvider::default()),
        Arc::new(http::HttpProvider::default()),
        Arc::new(kubernetes::KubernetesProvider { conversion: options.kubernetes_conversion.clone(), ..Default::default() }),
    ]
}

/// Answers a CRD conversion webhook call (a `ConversionReview` body) for the built-in
/// providers' kinds by the path it was made to: (status code, JSON body).
pub fn conversion_review(path: &str, body: &[u8]) -> (u16, Vec<u8>) {
    match path {
        kubernetes::CONVERSION_PATH => (200, kubernetes::conversion::review(body).to_string().into_bytes()),
        other => (404, format!("no conversion webhook is served at {other}").into_bytes()),
    }
}
