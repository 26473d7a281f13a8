//! Crossplane's core controllers on the runtime: packages (providers and functions),
//! composite resource definitions, compositions and their revisions, composite resources
//! and their function pipelines, claims, usages and Operations, ManagedResourceDefinitions and
//! their activation policies, and the RBAC manager's roles.

pub mod claim;
pub mod composite;
pub mod compositions;
pub mod core;
pub mod crds;
pub mod mrd;
pub mod ops;
pub mod packages;
pub mod rbac;
pub mod usage;
pub mod xrd;
