//! Composite resource definitions: the CRDs an XRD defines (its composite resource) and offers (its claim).

pub mod controller;
pub mod render;
