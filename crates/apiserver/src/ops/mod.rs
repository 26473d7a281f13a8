//! Object operations: create, update, patch, delete, as every caller needs them — the HTTP
//! handlers and the controllers running inside the server (garbage collector, namespace and
//! CRD cleanup) alike, so an internal write obeys exactly the rules a client's write does.
//!
//! Every write passes, in this order: type and name checks, kind-specific normalisation, the
//! mutating admission hooks, schema defaulting/pruning/validation, kind-specific validation,
//! the lifecycle rules of finalizers and deletion, the validating admission hooks, and then a
//! compare-and-swap on the store, so concurrent writers never lose each other's changes.
//!
//! Files: `create.rs`, `update.rs` (PUT and the commit step every update shares, plus
//! [`modify`] for internal read-modify-write), `patch.rs`, `delete.rs`, `prepare.rs`
//! (kind-specific normalisation and validation), `lifecycle.rs` (finalizers and deletion
//! state), `admission.rs` (the hook chain).

pub mod admission;
mod apply;
mod create;
mod delete;
pub mod lifecycle;
mod managed;
mod patch;
mod prepare;
mod update;

use serde_json::Value;

pub use prepare::{FieldValidation, admit};
pub use apply::apply;
pub use create::create;
pub use delete::{DeleteOptions, Deleted, Propagation, delete, delete_collection};
pub use patch::{PatchType, apply_to, patch};
pub use update::{merge_for_update, modify, update};

use crate::registry::ResourceDef;
use crate::status::ApiError;

/// Options every write verb takes.
#[derive(Clone, Debug, Default)]
pub struct WriteOptions {
    /// `dryRun=All`: do everything but store.
    pub dry_run: bool,
    /// What to do about unknown and duplicate fields.
    pub field_validation: FieldValidation,
    /// `fieldManager`: who makes the change.
    pub field_manager: Option<String>,
    /// `force`: take ownership of conflicting fields (server-side apply).
    pub force: bool,
    /// Who asks (for admission hooks such as RBAC's escalation check); `None` for the server's
    /// own writes.
    pub user: Option<crate::authn::UserInfo>,
}

impl WriteOptions {
    /// From the `dryRun`, `fieldValidation`, `fieldManager` and `force` query parameters.
    pub fn from_query(query: &crate::http::query::Query) -> Result<Self, ApiError> {
        Ok(WriteOptions {
            dry_run: parse_dry_run(query.dry_run.as_deref())?,
            field_validation: FieldValidation::from_query(query.field_validation.as_deref())?,
            field_manager: query.field_manager.clone().filter(|m| !m.is_empty()),
            force: query.force,
            user: None,
        })
    }

    /// The field manager the write is recorded under (`unknown` when none was given).
    pub fn manager(&self) -> &str {
        self.field_manager.as_deref().unwrap_or("unknown")
    }

    /// Options for a write the server makes itself, recorded under `manager`.
    pub fn internal(manager: &str) -> Self {
        WriteOptions { field_manager: Some(manager.to_string()), field_validation: FieldValidation::Ignore, ..Default::default() }
    }
}

/// Parses `dryRun` (only `All` exists).
pub fn parse_dry_run(value: Option<&str>) -> Result<bool, ApiError> {
    match value {
        None | Some("") => Ok(false),
        Some("All") => Ok(true),
        Some(other) => Err(ApiError::bad_request(format!("dryRun: Unsupported value: \"{other}\": supported values: \"All\""))),
    }
}

/// One object (or one of its subresources) that a request addresses.
#[derive(Clone, Copy, Debug)]
pub struct ObjectTarget<'a> {
    /// Its resource.
    pub resource: &'a ResourceDef,
    /// Its namespace, for namespaced resources.
    pub namespace: Option<&'a str>,
    /// Its name.
    pub name: &'a str,
    /// The subresource addressed, if any.
    pub subresource: Option<&'a str>,
}

impl ObjectTarget<'_> {
    /// The store key of the object.
    pub fn key(&self) -> String {
        self.resource.key(self.namespace, self.name)
    }
}

/// A successful create or update: the object as stored (as the client sees it) and the
/// warnings to send with it.
#[derive(Clone, Debug)]
pub struct Written {
    /// The object, with its new resourceVersion.
    pub object: Value,
    /// `Warning` header texts.
    pub warnings: Vec<String>,
    /// Whether the write created the object (server-side apply may create).
    pub created: bool,
}

/// Parses a request body as a JSON object.
pub fn parse_body(body: &[u8]) -> Result<Value, ApiError> {
    let object: Value =
        serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("the request body is not valid JSON: {e}")))?;
    if !object.is_object() {
        return Err(ApiError::bad_request("the request body must be a JSON object"));
    }
    Ok(object)
}

/// How many times a server-side read-modify-write (patch, apply, delete, internal updates)
/// starts again when the object changed between its read and its compare-and-swap. As
/// kube-apiserver, which retries such writes until the request times out, this is generous:
/// with the pauses of [`after_race`] it is about a minute of contention on one object.
pub(crate) const RACE_RETRIES: usize = 1_200;

/// The pause before attempt `attempt` (counted from 0) of a read-modify-write that lost a
/// race: none for the first two, then a few jittered milliseconds growing to 50, so writers
/// racing on one hot object take turns instead of colliding in lock step.
pub(crate) async fn after_race(attempt: usize) {
    if attempt < 2 {
        return;
    }
    let ceiling = (1u64 << (attempt - 2).min(6)).min(50);
    let pause = rand::random_range(ceiling / 2..=ceiling);
    tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
}
