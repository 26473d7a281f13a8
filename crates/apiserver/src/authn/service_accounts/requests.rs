//! The API of ServiceAccount tokens: the `token` subresource (`TokenRequest`, what
//! `kubectl create token` posts), `TokenReview` (any bearer token, for webhooks and proxies
//! that authenticate through the server), and the issuer's OpenID discovery document and key
//! set, for verifiers outside the server.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{DEFAULT_EXPIRATION_SECONDS, MAX_EXPIRATION_SECONDS, MIN_EXPIRATION_SECONDS, ObjectClaim, ServiceAccountTokens, TokenSpec};
use crate::state::AppState;
use crate::status::{ApiError, Cause, Reason};

const GROUP: &str = "authentication.k8s.io";

fn issuer(state: &AppState) -> Result<&Arc<ServiceAccountTokens>, ApiError> {
    state
        .authenticator
        .service_accounts
        .as_ref()
        .ok_or_else(|| ApiError::new(Reason::ServiceUnavailable, "service account tokens are not available: the server has no signing key"))
}

/// The body as a JSON object of `kind` (JSON or kubectl's protobuf).
fn body_of(headers: &HeaderMap, body: &[u8], kind: &str) -> Result<Value, ApiError> {
    let (object, _) = crate::http::resources::request_object(headers, body)?;
    match object.get("kind").and_then(Value::as_str) {
        Some(found) if !found.is_empty() && found != kind => Err(ApiError::bad_request(format!("expected a {kind}, got a {found}"))),
        _ => Ok(object),
    }
}

fn strings(value: &Value) -> Vec<String> {
    value.as_array().map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect()).unwrap_or_default()
}

/// `POST /api/v1/namespaces/NS/serviceaccounts/NAME/token`: a bound token for the
/// ServiceAccount, answered (201) in the TokenRequest's `status`; nothing is stored.
pub async fn token_request(state: &AppState, headers: &HeaderMap, body: &[u8], namespace: &str, name: &str) -> Result<Response, ApiError> {
    const KIND: &str = "TokenRequest";
    let tokens = issuer(state)?;
    let request = body_of(headers, body, KIND)?;
    let spec = request.get("spec").cloned().unwrap_or_else(|| json!({}));
    let invalid = |field: &str, message: String| {
        ApiError::invalid(KIND, GROUP, name, vec![Cause { reason: "FieldValueInvalid".into(), message, field: field.into() }])
    };
    let expiration_seconds = match spec.get("expirationSeconds") {
        None | Some(Value::Null) => DEFAULT_EXPIRATION_SECONDS,
        Some(value) => value.as_i64().ok_or_else(|| invalid("spec.expirationSeconds", format!("Invalid value: {value}: must be an integer")))?,
    };
    if expiration_seconds < MIN_EXPIRATION_SECONDS {
        return Err(invalid("spec.expirationSeconds", format!("Invalid value: {expiration_seconds}: may not specify a duration less than 10 minutes")));
    }
    if expiration_seconds > MAX_EXPIRATION_SECONDS {
        return Err(invalid("spec.expirationSeconds", format!("Invalid value: {expiration_seconds}: may not specify a duration larger than 2^32 seconds")));
    }
    let audiences = strings(&spec["audiences"]);
    if audiences.iter().any(String::is_empty) {
        return Err(invalid("spec.audiences", "Invalid value: \"\": an audience may not be empty".into()));
    }

    state.ensure_fresh(None).await?;
    let (account, _) = state.cache.get(&format!("/registry/core/serviceaccounts/{namespace}/{name}"));
    let account = account.ok_or_else(|| ApiError::not_found("", "serviceaccounts", name))?;
    let uid = crate::objects::meta_str(&account, "uid").unwrap_or_default().to_string();
    let bound_secret = match spec.get("boundObjectRef").filter(|r| !r.is_null()) {
        None => None,
        Some(reference) => Some(bound_secret(state, namespace, name, reference)?),
    };
    let spec_out = TokenSpec { namespace: namespace.into(), name: name.into(), uid, audiences, expiration_seconds, bound_secret };
    let (token, expires) = tokens.issue(&spec_out).map_err(ApiError::internal)?;
    let expiration = jiff::Timestamp::from_second(expires).map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()).map_err(|e| ApiError::internal(e.to_string()))?;
    let audiences = if spec_out.audiences.is_empty() { tokens.api_audiences() } else { spec_out.audiences };
    let mut spec_echo = json!({"audiences": audiences, "expirationSeconds": expiration_seconds, "boundObjectRef": null});
    if let Some(reference) = spec.get("boundObjectRef").filter(|r| !r.is_null()) {
        spec_echo["boundObjectRef"] = reference.clone();
    }
    let answer = json!({
        "kind": KIND,
        "apiVersion": format!("{GROUP}/v1"),
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": null},
        "spec": spec_echo,
        "status": {"token": token, "expirationTimestamp": expiration},
    });
    Ok((StatusCode::CREATED, Json(answer)).into_response())
}

/// The Secret a TokenRequest's `boundObjectRef` names, checked as kube-apiserver checks it:
/// only Secrets are served here (no Pods or Nodes), it must exist, and a given uid must be its.
fn bound_secret(state: &AppState, namespace: &str, name: &str, reference: &Value) -> Result<ObjectClaim, ApiError> {
    let text = |key: &str| reference.get(key).and_then(Value::as_str).unwrap_or_default();
    let (kind, api_version) = (text("kind"), text("apiVersion"));
    if kind != "Secret" || !matches!(api_version, "" | "v1") {
        return Err(ApiError::bad_request(format!(
            "cannot bind token for serviceaccount {name:?} to object of kind {kind:?} ({api_version}): only Secrets (v1) are served here"
        )));
    }
    let secret_name = text("name");
    let (secret, _) = state.cache.get(&format!("/registry/core/secrets/{namespace}/{secret_name}"));
    let secret = secret.ok_or_else(|| ApiError::not_found("", "secrets", secret_name))?;
    let uid = crate::objects::meta_str(&secret, "uid").unwrap_or_default();
    let wanted = text("uid");
    if !wanted.is_empty() && wanted != uid {
        return Err(ApiError::new(
            Reason::Conflict,
            format!(
                "Operation cannot be fulfilled on serviceaccounts {name:?}: the UID in the bound object reference ({wanted}) does not match the UID in record. The object might have been deleted and then recreated"
            ),
        ));
    }
    Ok(ObjectClaim { name: secret_name.into(), uid: uid.into() })
}

/// `POST /apis/authentication.k8s.io/v1/tokenreviews`: who a bearer token stands for, for
/// which audiences; answered (201) in `status`, nothing stored.
pub async fn token_review(State(state): State<Arc<AppState>>, headers: HeaderMap, body: Bytes) -> Response {
    const KIND: &str = "TokenReview";
    let result = body_of(&headers, &body, KIND).and_then(|mut review| {
        let token = review["spec"]["token"].as_str().unwrap_or_default().to_string();
        if token.is_empty() {
            return Err(ApiError::bad_request(format!("token is required for TokenReview in {GROUP}")));
        }
        let audiences = strings(&review["spec"]["audiences"]);
        let status = match state.authenticator.token(&token, &audiences) {
            Ok((user, audiences)) => json!({"authenticated": true, "user": user, "audiences": audiences}),
            Err(refused) => json!({"user": {}, "error": refused.why}),
        };
        review["kind"] = json!(KIND);
        review["apiVersion"] = json!(format!("{GROUP}/v1"));
        review["metadata"] = json!({"creationTimestamp": null});
        review["status"] = status;
        Ok(review)
    });
    match result {
        Ok(review) => (StatusCode::CREATED, Json(review)).into_response(),
        Err(error) => error.into_response(),
    }
}

/// `GET /.well-known/openid-configuration`: the issuer's discovery document.
pub async fn openid_configuration(State(state): State<Arc<AppState>>) -> Response {
    match issuer(&state) {
        Ok(tokens) => Json(json!({
            "issuer": tokens.issuer,
            "jwks_uri": tokens.jwks_uri,
            "response_types_supported": ["id_token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["ES256"],
        }))
        .into_response(),
        Err(error) => error.into_response(),
    }
}

/// `GET /openid/v1/jwks`: the public keys tokens are signed with.
pub async fn jwks(State(state): State<Arc<AppState>>) -> Response {
    match issuer(&state) {
        Ok(tokens) => {
            let mut response = Json(tokens.jwks()).into_response();
            response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/jwk-set+json"));
            response
        }
        Err(error) => error.into_response(),
    }
}
