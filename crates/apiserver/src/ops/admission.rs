//! The admission chain: in-process hooks every write passes through, the way Kubernetes'
//! admission plugins work. Mutating hooks run first and may change the object (add an
//! annotation, say); validating hooks then see the final object and may refuse the write with
//! any `Status` (a 409 for a protected deletion, a 403 for a terminating namespace).
//!
//! Later layers register their own hooks with [`AdmissionChain::register`]; the server's own
//! come first: namespace lifecycle (content needs a live namespace; the system namespaces
//! cannot be deleted) and custom-resource lifecycle (no creates while the CRD is being
//! deleted).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, RwLock};

use serde_json::Value;

use super::lifecycle;
use crate::registry::ResourceDef;
use crate::state::AppState;
use crate::status::{ApiError, Reason};

/// What a write does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// POST.
    Create,
    /// PUT or PATCH (including apply), and server-side updates.
    Update,
    /// DELETE (the request, not the final removal when the last finalizer goes).
    Delete,
}

/// The write a hook is asked about.
#[derive(Clone, Copy, Debug)]
pub struct AdmissionRequest<'a> {
    /// What is done.
    pub operation: Operation,
    /// The kind written.
    pub resource: &'a ResourceDef,
    /// The object's namespace.
    pub namespace: Option<&'a str>,
    /// The object's name.
    pub name: &'a str,
    /// The subresource written, if any.
    pub subresource: Option<&'a str>,
    /// The stored object, for updates and deletes.
    pub old: Option<&'a Value>,
    /// Whether the write is a dry run (hooks must not change anything else then).
    pub dry_run: bool,
    /// For a delete: the propagation policy asked for (`Background`, `Foreground`, `Orphan`),
    /// if any.
    pub propagation: Option<&'static str>,
    /// Who asks; `None` for the server's own writes.
    pub user: Option<&'a crate::authn::UserInfo>,
}

/// What a hook returns.
pub type HookFuture<'a> = Pin<Box<dyn Future<Output = Result<(), ApiError>> + Send + 'a>>;

/// One admission hook. Both steps default to accepting.
pub trait AdmissionHook: Send + Sync {
    /// A name for logs.
    fn name(&self) -> &str;

    /// May change the object about to be created or updated (not called for deletes).
    fn mutate<'a>(&'a self, _state: &'a AppState, _request: &'a AdmissionRequest<'a>, _object: &'a mut Value) -> HookFuture<'a> {
        Box::pin(async { Ok(()) })
    }

    /// Accepts or refuses the write; for a delete, `object` is the stored object.
    fn validate<'a>(&'a self, _state: &'a AppState, _request: &'a AdmissionRequest<'a>, _object: &'a Value) -> HookFuture<'a> {
        Box::pin(async { Ok(()) })
    }
}

/// The hooks, in registration order, then the admission webhooks.
pub struct AdmissionChain {
    hooks: RwLock<Vec<Arc<dyn AdmissionHook>>>,
    /// Run after every in-process hook, as kube-apiserver runs its webhook plugins last.
    webhooks: Arc<dyn AdmissionHook>,
}

impl AdmissionChain {
    /// A chain holding the server's own hooks and the admission webhooks.
    pub fn with_builtins() -> Self {
        let hooks: Vec<Arc<dyn AdmissionHook>> =
            vec![Arc::new(NamespaceLifecycle), Arc::new(CustomResourceLifecycle), Arc::new(crate::authz::escalation::EscalationCheck)];
        AdmissionChain { hooks: RwLock::new(hooks), webhooks: crate::webhooks::admission::hook() }
    }

    /// Adds a hook after the other in-process ones (the webhooks still come last).
    pub fn register(&self, hook: Arc<dyn AdmissionHook>) {
        self.hooks.write().unwrap_or_else(|p| p.into_inner()).push(hook);
    }

    fn snapshot(&self) -> Vec<Arc<dyn AdmissionHook>> {
        let mut hooks = self.hooks.read().unwrap_or_else(|p| p.into_inner()).clone();
        hooks.push(self.webhooks.clone());
        hooks
    }

    /// Runs every mutating hook in order; the first refusal wins.
    pub async fn mutate(&self, state: &AppState, request: &AdmissionRequest<'_>, object: &mut Value) -> Result<(), ApiError> {
        for hook in self.snapshot() {
            hook.mutate(state, request, object).await?;
        }
        Ok(())
    }

    /// Runs every validating hook in order; the first refusal wins.
    pub async fn validate(&self, state: &AppState, request: &AdmissionRequest<'_>, object: &Value) -> Result<(), ApiError> {
        for hook in self.snapshot() {
            hook.validate(state, request, object).await?;
        }
        Ok(())
    }
}

/// Namespaces Kubernetes never lets anyone delete.
const UNDELETABLE_NAMESPACES: [&str; 3] = ["default", "kube-system", "kube-public"];

/// Content needs a namespace that exists and is not terminating; system namespaces stay.
struct NamespaceLifecycle;

impl NamespaceLifecycle {
    async fn check_create(state: &AppState, namespace: &str) -> Result<(), ApiError> {
        let key = format!("/registry/core/namespaces/{namespace}");
        // The cache answers at once when it holds the namespace; only a miss waits for the
        // cache to catch up with the store, so a namespace created just before is found.
        let found = match state.cache.get(&key).0 {
            Some(found) => found,
            None => {
                state.ensure_fresh(None).await?;
                state.cache.get(&key).0.ok_or_else(|| ApiError::not_found("", "namespaces", namespace))?
            }
        };
        if lifecycle::is_deleting(&found) {
            return Err(ApiError::new(
                Reason::Forbidden,
                format!("unable to create new content in namespace {namespace} because it is being terminated"),
            )
            .with_details("", "namespaces", namespace)
            .with_cause("NamespaceTerminating", &format!("namespace {namespace} is being terminated"), "metadata.namespace"));
        }
        Ok(())
    }
}

impl AdmissionHook for NamespaceLifecycle {
    fn name(&self) -> &str {
        "NamespaceLifecycle"
    }

    fn mutate<'a>(&'a self, state: &'a AppState, request: &'a AdmissionRequest<'a>, _object: &'a mut Value) -> HookFuture<'a> {
        Box::pin(async move {
            match (request.operation, request.namespace) {
                (Operation::Create, Some(namespace)) if request.resource.namespaced => Self::check_create(state, namespace).await,
                _ => Ok(()),
            }
        })
    }

    fn validate<'a>(&'a self, _state: &'a AppState, request: &'a AdmissionRequest<'a>, _object: &'a Value) -> HookFuture<'a> {
        Box::pin(async move {
            if request.operation == Operation::Delete
                && lifecycle::is_namespace(request.resource)
                && UNDELETABLE_NAMESPACES.contains(&request.name)
            {
                return Err(ApiError::forbidden("", "namespaces", request.name, "this namespace may not be deleted"));
            }
            Ok(())
        })
    }
}

/// No custom resource may be created while its CRD is being deleted.
struct CustomResourceLifecycle;

impl AdmissionHook for CustomResourceLifecycle {
    fn name(&self) -> &str {
        "CustomResourceLifecycle"
    }

    fn mutate<'a>(&'a self, state: &'a AppState, request: &'a AdmissionRequest<'a>, _object: &'a mut Value) -> HookFuture<'a> {
        Box::pin(async move {
            let (Operation::Create, Some(crd)) = (request.operation, request.resource.crd.as_deref()) else { return Ok(()) };
            let key = format!("{}{crd}", crate::crd::CRD_PREFIX);
            if state.cache.get(&key).0.is_some_and(|crd| lifecycle::is_deleting(&crd)) {
                return Err(ApiError::new(
                    Reason::MethodNotAllowed,
                    "create not allowed while custom resource definition is terminating",
                ));
            }
            Ok(())
        })
    }
}
