//! Admission webhooks (`admissionregistration.k8s.io/v1`): the configurations served as kinds
//! and checked as kube-apiserver checks them (`config.rs`), their `matchConditions`
//! (`conditions.rs`), the HTTPS client and how a `service` reference finds a local address
//! (`client.rs`), CRD conversion webhooks (`conversion.rs`), the admission hook that calls them (`admission.rs`), and an HTTPS server
//! webhooks are served from (`serve.rs`).

pub mod admission;
pub mod client;
pub mod conditions;
pub mod config;
pub mod conversion;
pub mod serve;
