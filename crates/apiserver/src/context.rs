//! What the layers under a request's handler need to know of the request itself: who made it
//! (admission webhooks send it in `AdmissionReview.request.userInfo`), and what it collects on
//! the way (warnings from admission webhooks become `Warning` headers, audit annotations go to
//! the audit log).
//!
//! The `authenticate` middleware runs the rest of the request inside [`scope`]; anything the
//! handler awaits (the object operations, the admission chain) reads it with [`current`]. A
//! write the server makes outside any request (the garbage collector) has no context and is
//! attributed to [`system_user`]. A task-local rather than a parameter, because every write path
//! of [`crate::ops`] would otherwise carry it only to hand it to the admission chain.

use std::future::Future;
use std::sync::{Arc, Mutex};

use crate::authn::UserInfo;

tokio::task_local! {
    static CONTEXT: Arc<RequestContext>;
}

/// One request's context.
#[derive(Debug)]
pub struct RequestContext {
    /// Who the request is from.
    pub user: UserInfo,
    /// The request's audit ID (`Audit-ID` header).
    pub audit_id: String,
    warnings: Mutex<Vec<String>>,
}

impl RequestContext {
    /// A context for a request from `user`.
    pub fn new(user: UserInfo, audit_id: String) -> Self {
        RequestContext { user, audit_id, warnings: Mutex::new(Vec::new()) }
    }

    /// Adds a warning for the client (sent as a `Warning` header).
    pub fn warn(&self, text: impl Into<String>) {
        let text = text.into();
        let mut warnings = self.warnings.lock().unwrap_or_else(|p| p.into_inner());
        if !warnings.contains(&text) {
            warnings.push(text);
        }
    }

    /// The warnings collected so far, taken out.
    pub fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut *self.warnings.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// Runs `future` with `context` as the current request's.
pub async fn scope<F: Future>(context: Arc<RequestContext>, future: F) -> F::Output {
    CONTEXT.scope(context, future).await
}

/// The current request's context, if the caller runs inside one.
pub fn current() -> Option<Arc<RequestContext>> {
    CONTEXT.try_with(Arc::clone).ok()
}

/// Who the current request is from; the server itself outside any request.
pub fn current_user() -> UserInfo {
    current().map(|c| c.user.clone()).unwrap_or_else(system_user)
}

/// The user writes the server makes on its own (garbage collection, namespace cleanup) are
/// attributed to, as kube-apiserver's loopback client.
pub fn system_user() -> UserInfo {
    UserInfo::new("system:apiserver", [crate::authn::MASTERS])
}

/// Adds a warning to the current request, if any.
pub fn warn(text: impl Into<String>) {
    if let Some(context) = current() {
        context.warn(text);
    }
}
