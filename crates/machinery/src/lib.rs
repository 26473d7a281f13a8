//! Kubernetes' pure machinery: what the API server computes without doing any I/O, kept apart
//! (as kube-rs keeps kube-core apart from its clients) so the offline CLI commands use the very
//! same code as the server, and so a reader sees which half of the server is logic alone.
//! No module here does I/O, spawns, awaits or holds a lock across calls.
//!
//! - [`resource`]: the description of a served kind ([`resource::ResourceDef`]) and the
//!   built-in kinds.
//! - [`schema`]: structural OpenAPI schemas: validation, pruning, defaulting, CEL rules.
//! - [`patch`]: JSON patch, JSON merge patch, strategic merge patch.
//! - [`apply`]: server-side apply (field sets, managed fields, conflicts).
//! - [`selectors`]: label and field selectors.
//! - [`protobuf`]: Kubernetes' protobuf wire form of objects, lists, tables and Status.
//! - [`jsonpath`]: kubectl's JSONPath, for printer columns.
//! - [`table`]: `meta.k8s.io/v1` Tables from printer columns.
//! - [`openapi`]: OpenAPI v3 documents of the served kinds.
//! - [`names`]: DNS-1123 labels and subdomains, the rules object names follow.
//! - [`golang`]: Go's `%q` and `time.ParseDuration`, as users read them in messages.

pub mod apply;
pub mod golang;
pub mod jsonpath;
pub mod names;
pub mod openapi;
pub mod patch;
pub mod protobuf;
pub mod resource;
pub mod schema;
pub mod selectors;
pub mod table;
