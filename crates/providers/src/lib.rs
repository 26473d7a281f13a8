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
//! - [`conversion`]: the CRD conversion webhooks of provider-kubernetes and provider-http.
//!
//! [`catalog`] lists every built-in provider by package name.

pub mod conversion;
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
    /// Where the providers' conversion webhooks are served (see [`conversion::review`]);
    /// without it, the versions that need converting are not served.
    pub conversion: Option<conversion::ConversionWebhook>,
}

/// Every built-in provider, with `options`.
pub fn catalog_with(options: &CatalogOptions) -> Vec<Arc<dyn BuiltinProvider>> {
    vec![
        Arc::new(nop::NopProvider),
        Arc::new(fakecloud::FakeCloudProvider::default()),
        Arc::new(sql::SqlProvider::default()),
        Arc::new(http::HttpProvider { conversion: options.conversion.clone(), ..Default::default() }),
        Arc::new(kubernetes::KubernetesProvider { conversion: options.conversion.clone(), ..Default::default() }),
    ]
}
