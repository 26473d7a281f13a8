//! Limits on requests in flight, as kube-apiserver's `--max-requests-inflight` and
//! `--max-mutating-requests-inflight`: past the limit a request is answered at once with 429
//! `TooManyRequests` and `Retry-After: 1`, so clients back off instead of piling up work the
//! server cannot finish. Long-running requests (watches) are not counted: they hold no CPU
//! while idle. Requests from the server's own controllers (marked [`InProcess`]) are not
//! counted either: they are the work the server exists to do.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::Semaphore;

use crate::status::{ApiError, Reason};

/// Default for read-only requests (kube-apiserver's default).
pub const DEFAULT_READONLY: usize = 400;
/// Default for mutating requests (kube-apiserver's default).
pub const DEFAULT_MUTATING: usize = 200;

/// A request extension marking a request made in-process by the server's own controllers.
#[derive(Clone, Copy, Debug)]
pub struct InProcess;

/// The two budgets; a limit of 0 means unlimited.
pub struct InflightLimits {
    readonly: Option<Arc<Semaphore>>,
    mutating: Option<Arc<Semaphore>>,
}

impl InflightLimits {
    /// Budgets of `readonly` and `mutating` requests (0 = unlimited).
    pub fn new(readonly: usize, mutating: usize) -> Self {
        let budget = |n: usize| (n > 0).then(|| Arc::new(Semaphore::new(n)));
        InflightLimits { readonly: budget(readonly), mutating: budget(mutating) }
    }
}

impl Default for InflightLimits {
    fn default() -> Self {
        InflightLimits::new(DEFAULT_READONLY, DEFAULT_MUTATING)
    }
}

/// Whether a request stays open for long by design (a watch), and so is not limited.
fn long_running(request: &Request) -> bool {
    let uri = request.uri();
    if uri.path().contains("/watch/") {
        return true;
    }
    uri.query().is_some_and(|q| q.split('&').any(|pair| matches!(pair, "watch=true" | "watch=1" | "watch=True")))
}

/// The middleware: takes a permit for the request's whole life or answers 429.
pub async fn limit(State(limits): State<Arc<InflightLimits>>, request: Request, next: Next) -> Response {
    if request.extensions().get::<InProcess>().is_some() || long_running(&request) {
        return next.run(request).await;
    }
    let budget = match *request.method() {
        Method::GET | Method::HEAD | Method::OPTIONS => &limits.readonly,
        _ => &limits.mutating,
    };
    let Some(budget) = budget else {
        return next.run(request).await;
    };
    match budget.clone().try_acquire_owned() {
        Ok(_permit) => next.run(request).await,
        Err(_) => ApiError::new(Reason::TooManyRequests, "Too many requests, please try again later.").into_response(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use axum::Router;
    use axum::body::Body;
    use axum::routing::any;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    /// A router whose handler reads the whole body: a request whose body never finishes stays
    /// in flight.
    fn app(limits: InflightLimits) -> Router {
        Router::new()
            .route("/{*rest}", any(|body: Body| async move { body.collect().await.map(|_| "done").unwrap_or("cut") }))
            .layer(axum::middleware::from_fn_with_state(Arc::new(limits), limit))
    }

    fn request(method: Method, uri: &str, body: Body) -> Request {
        axum::http::Request::builder().method(method).uri(uri).body(body).unwrap()
    }

    #[tokio::test]
    async fn a_full_budget_answers_429_with_retry_after_and_frees_up_when_done() {
        let app = app(InflightLimits::new(5, 1));
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<bytes::Bytes, std::io::Error>>(1);
        let stuck = tokio::spawn(app.clone().oneshot(request(
            Method::POST,
            "/api/v1/namespaces/default/configmaps",
            Body::from_stream(tokio_stream_from(rx)),
        )));
        tokio::task::yield_now().await;
        // Wait until the stuck request holds the one mutating permit.
        let mut refused = None;
        for _ in 0..100 {
            let response = app.clone().oneshot(request(Method::PUT, "/api/v1/x", Body::empty())).await.unwrap();
            if response.status() == 429 {
                refused = Some(response);
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let refused = refused.expect("a second mutating request is refused while the first is in flight");
        assert_eq!(refused.headers()["retry-after"], "1");
        let status: serde_json::Value = serde_json::from_slice(&refused.into_body().collect().await.unwrap().to_bytes()).unwrap();
        assert_eq!(status["reason"], "TooManyRequests");
        assert_eq!(status["code"], 429);

        // Reads have their own budget; watches and in-process requests are never limited.
        let read = app.clone().oneshot(request(Method::GET, "/api/v1/x", Body::empty())).await.unwrap();
        assert_eq!(read.status(), 200);
        let watch = app.clone().oneshot(request(Method::POST, "/api/v1/x?watch=true", Body::empty())).await.unwrap();
        assert_eq!(watch.status(), 200);
        let mut internal = request(Method::POST, "/api/v1/x", Body::empty());
        internal.extensions_mut().insert(InProcess);
        assert_eq!(app.clone().oneshot(internal).await.unwrap().status(), 200);

        // Once the first request finishes, its permit is back.
        drop(tx);
        assert_eq!(stuck.await.unwrap().unwrap().status(), 200);
        let again = app.clone().oneshot(request(Method::PUT, "/api/v1/x", Body::empty())).await.unwrap();
        assert_eq!(again.status(), 200);
    }

    #[tokio::test]
    async fn zero_means_unlimited() {
        let app = app(InflightLimits::new(0, 0));
        let (_tx, rx) = tokio::sync::mpsc::channel::<Result<bytes::Bytes, std::io::Error>>(1);
        let _stuck = tokio::spawn(app.clone().oneshot(request(Method::POST, "/a", Body::from_stream(tokio_stream_from(rx)))));
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert_eq!(app.oneshot(request(Method::POST, "/b", Body::empty())).await.unwrap().status(), 200);
    }

    /// A stream over a channel's receiver (the body of a request that is still being sent).
    fn tokio_stream_from(
        mut rx: tokio::sync::mpsc::Receiver<Result<bytes::Bytes, std::io::Error>>,
    ) -> impl futures::Stream<Item = Result<bytes::Bytes, std::io::Error>> {
        futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
    }
}
