//! The HTTP surface: routing, authentication, and the handlers.

pub mod crds;
mod discovery;
pub mod extensions;
mod health;
pub mod inflight;
pub mod metrics;
pub mod query;
pub mod read;
mod scale;
pub(crate) mod resources;
pub mod seed;
mod select;
pub mod validation;
pub(crate) mod watch;
pub mod write;

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::authn::{Impersonator, MASTERS, UserInfo};
use crate::authz::{Attributes, Decision, reviews};
use crate::status::{ApiError, Reason};

/// Largest request body accepted (Kubernetes' limit is 3 MiB).
pub const MAX_BODY: usize = 3 * 1024 * 1024;

pub use crate::state::AppState;

/// The whole API as one router.
pub fn router(state: Arc<AppState>) -> Router {
    let api = Router::new()
        .route("/api", get(discovery::core_versions))
        .route("/api/{version}", get(discovery::core_resources))
        .route("/apis", get(discovery::groups))
        .route("/apis/{group}", get(discovery::group))
        .route("/apis/{group}/{version}", get(discovery::group_resources))
        .route("/api/{version}/{*rest}", axum::routing::any(resources::core))
        .route("/apis/{group}/{version}/{*rest}", axum::routing::any(resources::grouped))
        .route("/apis/authentication.k8s.io/v1/selfsubjectreviews", axum::routing::post(self_subject_review))
        .route("/apis/authentication.k8s.io/v1/tokenreviews", axum::routing::post(crate::authn::service_accounts::requests::token_review))
        .route("/.well-known/openid-configuration", get(crate::authn::service_accounts::requests::openid_configuration))
        .route("/openid/v1/jwks", get(crate::authn::service_accounts::requests::jwks))
        .route("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", axum::routing::post(reviews::self_subject_access_review))
        .route("/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", axum::routing::post(reviews::self_subject_rules_review))
        .route("/apis/authorization.k8s.io/v1/subjectaccessreviews", axum::routing::post(reviews::subject_access_review))
        .route(
            "/apis/authorization.k8s.io/v1/namespaces/{namespace}/localsubjectaccessreviews",
            axum::routing::post(reviews::local_subject_access_review),
        )
        .route("/metrics", get(health::metrics))
        .route("/debug/oxplane/{name}", get(extensions::debug_page))
        .route("/oxplane/v1alpha1/{name}", axum::routing::post(extensions::action))
        .route("/openapi/v2", get(openapi_v2))
        .route("/openapi/v3", get(openapi_index))
        .route("/openapi/v3/{*path}", get(openapi_document))
        .layer(middleware::from_fn_with_state(state.inflight.clone(), inflight::limit))
        .layer(middleware::from_fn_with_state(state.clone(), crate::store_health::warn_stale_reads))
        .layer(middleware::from_fn_with_state(state.clone(), authorize))
        .layer(middleware::from_fn_with_state(state.clone(), authenticate))
        .layer(middleware::from_fn_with_state(state.clone(), crate::audit::audit))
        .layer(middleware::from_fn_with_state(state.clone(), count));
    Router::new()
        .route("/healthz", get(health::healthz))
        .route("/livez", get(health::livez))
        .route("/readyz", get(health::readyz))
        .route("/version", get(health::version))
        .merge(api)
        .fallback(not_found)
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
        .with_state(state)
}

/// Counts every API request by method and code, and object requests by verb and resource.
async fn count(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let method = request.method().to_string();
    let started = std::time::Instant::now();
    let mut response = next.run(request).await;
    let code = response.status().as_u16();
    let took = started.elapsed();
    state.metrics.record(&method, code, took);
    let info = response.extensions_mut().remove::<metrics::RequestInfo>();
    let labels = match &info {
        Some(info) => oxplane_metrics::RequestLabels {
            verb: info.verb.to_string(),
            group: info.group.clone(),
            resource: info.resource.clone(),
            subresource: info.subresource.clone(),
            code: code.to_string(),
        },
        None => oxplane_metrics::RequestLabels {
            verb: method.clone(),
            group: String::new(),
            resource: String::new(),
            subresource: String::new(),
            code: code.to_string(),
        },
    };
    oxplane_metrics::global().request(labels, took);
    if let Some(info) = info {
        state.metrics.record_resource(info, code);
    }
    response
}

/// Finds who a request is from and puts it into the request's extensions as a [`UserInfo`]
/// (and, once answered, into the response's); requests without valid credentials get 401.
/// In-process requests carry their user already (see [`crate::server::LocalService`]).
async fn authenticate(State(state): State<Arc<AppState>>, mut request: Request, next: Next) -> Response {
    let in_process = request.extensions().get::<inflight::InProcess>().is_some();
    let user = match request.extensions().get::<UserInfo>() {
        Some(user) if in_process => user.clone(),
        _ => {
            let presented = request.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
            let peer = request.extensions().get::<crate::authn::PeerCertificate>();
            let user = match state.authenticator.authenticate(presented, peer) {
                Ok(user) => user,
                Err(refused) => {
                    // For a guessed token or no credential, kube-apiserver says no more than
                    // "Unauthorized"; a ServiceAccount token's holder is told why it no longer
                    // works (see `Refused`). The cause always goes to the log.
                    tracing::debug!(why = %refused, path = %request.uri().path(), "request refused: not authenticated");
                    return ApiError::new(Reason::Unauthorized, refused.message()).into_response();
                }
            };
            request.extensions_mut().insert(user.clone());
            user
        }
    };
    // `Impersonate-*` headers: from here on the request is the impersonated user's.
    let mut impersonator = None;
    let user = match crate::authz::impersonation::impersonate(&state.authorizer, &user, request.headers()).await {
        Ok(None) => user,
        Ok(Some(acting)) => {
            impersonator = Some(Impersonator(user));
            if let Some(impersonator) = &impersonator {
                request.extensions_mut().insert(impersonator.clone());
            }
            request.extensions_mut().insert(acting.clone());
            acting
        }
        Err(error) => {
            let mut response = error.into_response();
            response.extensions_mut().insert(user);
            return response;
        }
    };
    // As kube-apiserver: the client's `Audit-ID` is kept, else a new one; it is sent back.
    let audit_id = request
        .headers()
        .get("audit-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 64)
        .map(String::from)
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let context = std::sync::Arc::new(crate::context::RequestContext::new(user.clone(), audit_id.clone()));
    let response = crate::context::scope(context.clone(), next.run(request)).await;
    let mut response = validation::with_warnings(response, &context.take_warnings());
    if let Ok(value) = axum::http::HeaderValue::from_str(&audit_id) {
        response.headers_mut().insert("audit-id", value);
    }
    response.extensions_mut().insert(user);
    if let Some(impersonator) = impersonator {
        response.extensions_mut().insert(impersonator);
    }
    response
}

/// Lets a request through only when its user may do what it asks (RBAC); otherwise a 403
/// worded as Kubernetes words it. `system:masters` skips the rules.
async fn authorize(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let Some(user) = request.extensions().get::<UserInfo>() else {
        return ApiError::new(Reason::Unauthorized, "Unauthorized").into_response();
    };
    if user.in_group(MASTERS) {
        return next.run(request).await;
    }
    let attributes = Attributes::from_request(user.clone(), request.method(), request.uri().path(), request.uri().query());
    match state.authorizer.authorize(&attributes).await {
        Decision::Allow => next.run(request).await,
        Decision::Deny(reason) => {
            tracing::debug!(user = %attributes.user.username, verb = %attributes.verb, path = %request.uri().path(), "request refused: not authorized");
            crate::authz::forbidden(&attributes, &reason).into_response()
        }
    }
}

/// `SelfSubjectReview` (`kubectl auth whoami`): who the request was made as.
async fn self_subject_review(axum::Extension(user): axum::Extension<UserInfo>) -> Response {
    let review = serde_json::json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "SelfSubjectReview",
        "metadata": {"creationTimestamp": null},
        "status": {"userInfo": user},
    });
    (axum::http::StatusCode::CREATED, axum::Json(review)).into_response()
}

/// `/openapi/v2`: protobuf when the client accepts it (kubectl), else JSON.
async fn openapi_v2(headers: axum::http::HeaderMap) -> Response {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let protobuf = crate::openapi::v2::wants_protobuf(accept);
    let version = format!("v1.{}.0", health::KUBERNETES_MINOR);
    let (bytes, content_type) = crate::openapi::v2::document(&version, protobuf);
    let mut response = axum::body::Body::from(bytes).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, axum::http::HeaderValue::from_static(content_type));
    response
}

async fn openapi_index(State(state): State<Arc<AppState>>) -> Response {
    axum::Json(state.openapi.index(&state.registry)).into_response()
}

async fn openapi_document(State(state): State<Arc<AppState>>, axum::extract::Path(path): axum::extract::Path<String>) -> Response {
    let parts: Vec<&str> = path.split('/').collect();
    let (group, version) = match parts.as_slice() {
        ["api", version] => ("", *version),
        ["apis", group, version] => (*group, *version),
        _ => return not_found_response(),
    };
    match state.openapi.document(&state.registry, group, version) {
        Some((bytes, _)) => {
            let mut response = axum::body::Body::from(bytes).into_response();
            response.headers_mut().insert(header::CONTENT_TYPE, axum::http::HeaderValue::from_static("application/json"));
            // Documents are addressed by content hash: clients may cache them.
            response.headers_mut().insert(header::CACHE_CONTROL, axum::http::HeaderValue::from_static("public, immutable"));
            response
        }
        None => not_found_response(),
    }
}

fn not_found_response() -> Response {
    ApiError::new(Reason::NotFound, "the server could not find the requested resource").into_response()
}

async fn not_found() -> ApiError {
    ApiError::new(Reason::NotFound, "the server could not find the requested resource")
}
