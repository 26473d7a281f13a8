//! The audit log (`--audit-log-path`, `--audit-policy-file`): every request as Kubernetes'
//! `audit.k8s.io/v1` `Event` JSON lines, at the level the policy gives it (`policy.rs`), in a
//! file rotated as kube-apiserver rotates it (`file.rs`).
//!
//! The `audit` middleware wraps the authenticated API: it knows the user (it authenticates
//! the same way `authenticate` does), writes `RequestReceived` before the request runs and
//! `ResponseComplete` after (`ResponseStarted` only, for watches, whose response never
//! completes in a request's time), with the request body at `Request` and the response body
//! at `RequestResponse`. The audit ID is the request's `Audit-ID` (the client's, or a new one).
//!
//! Secrets, TokenReviews and ServiceAccount tokens are never logged above `Metadata`, whatever
//! the policy says: their bodies are credentials, and kube-apiserver's documentation tells
//! every policy to keep them at `Metadata`; here it is not left to the policy.

pub mod file;
pub mod policy;

use std::net::IpAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use crate::authn::UserInfo;
use crate::state::AppState;
use crate::status::ApiError;
pub use file::{AuditFile, FileOptions};
pub use policy::{Level, Policy};

/// The client's address, put into each request's extensions by the HTTPS server.
#[derive(Clone, Copy, Debug)]
pub struct SourceIp(pub IpAddr);

/// How the audit log is configured.
#[derive(Clone, Debug)]
pub struct AuditConfig {
    /// The log file and its rotation.
    pub file: FileOptions,
    /// The policy file; `None` logs everything at `Metadata`.
    pub policy_file: Option<std::path::PathBuf>,
}

/// The audit log of a server.
pub struct Auditor {
    policy: Policy,
    file: AuditFile,
}

impl Auditor {
    /// Reads the policy and opens the file.
    pub fn open(config: &AuditConfig) -> Result<Auditor, String> {
        let policy = match &config.policy_file {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| format!("reading the audit policy {}: {e}", path.display()))?;
                Policy::parse(&text).map_err(|e| format!("the audit policy {} is invalid: {e}", path.display()))?
            }
            None => policy::metadata_for_everything(),
        };
        let file = AuditFile::open(config.file.clone()).map_err(|e| format!("opening the audit log {}: {e}", config.file.path.display()))?;
        Ok(Auditor { policy, file })
    }

    fn write(&self, event: &Value) {
        if let Err(error) = self.file.write_line(event.to_string().as_bytes()) {
            tracing::error!(%error, "cannot write the audit log");
        }
    }
}

/// What a request is about, as an audit event names it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestTarget {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`, or
    /// the lowercase method for non-resource requests.
    pub verb: String,
    /// For resource requests: `objectRef`'s group, version, resource, subresource,
    /// namespace, name.
    pub object: Option<[String; 6]>,
    /// Whether the request is a watch.
    pub watch: bool,
}

/// Reads the verb and object of a request as kube-apiserver's RequestInfo does.
pub fn target(method: &Method, path: &str, query: Option<&str>) -> RequestTarget {
    let lower = method.as_str().to_lowercase();
    let non_resource = RequestTarget { verb: lower.clone(), object: None, watch: false };
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, mut rest) = match parts.as_slice() {
        ["api", version, rest @ ..] if !rest.is_empty() => ("", *version, rest.to_vec()),
        ["apis", group, version, rest @ ..] if !rest.is_empty() => (*group, *version, rest.to_vec()),
        _ => return non_resource,
    };
    let mut watch = query.is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
    if rest.first() == Some(&"watch") {
        watch = true;
        rest.remove(0);
    }
    let mut namespace = String::new();
    if rest.first() == Some(&"namespaces") && rest.len() > 1 {
        namespace = rest[1].to_string();
        if rest.len() > 2 && !matches!(rest[2], "status" | "finalize") {
            rest.drain(..2);
        }
    }
    let resource = rest.first().copied().unwrap_or_default().to_string();
    let name = rest.get(1).copied().unwrap_or_default().to_string();
    let subresource = rest.get(2).copied().unwrap_or_default().to_string();
    let verb = match (method.as_str(), name.is_empty()) {
        ("GET", true) if watch => "watch",
        ("GET", true) => "list",
        ("GET", false) if watch => "watch",
        ("GET", false) => "get",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "deletecollection",
        ("DELETE", false) => "delete",
        _ => lower.as_str(),
    }
    .to_string();
    RequestTarget { verb, object: Some([group.into(), version.into(), resource, subresource, namespace, name]), watch }
}

/// Kubernetes' timestamps in audit events: microseconds, UTC.
fn micro_now() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// Credentials whose bodies are never logged.
fn sensitive(object: &[String; 6]) -> bool {
    let [group, _, resource, subresource, ..] = object;
    (group.is_empty() && resource == "secrets")
        || (group.is_empty() && resource == "serviceaccounts" && subresource == "token")
        || (group == "authentication.k8s.io" && resource == "tokenreviews")
}

fn parse_body(bytes: &[u8], content_type: Option<&str>) -> Option<Value> {
    if bytes.is_empty() {
        return None;
    }
    if content_type.is_some_and(|t| t.contains("protobuf")) {
        return crate::protobuf::decode_object(bytes).ok();
    }
    serde_json::from_slice(bytes).ok().or_else(|| serde_saphyr::from_slice::<Value>(bytes).ok())
}

/// The user a request is from, found as the `authenticate` middleware finds it.
fn user_of(state: &AppState, request: &Request) -> Option<UserInfo> {
    if request.extensions().get::<crate::http::inflight::InProcess>().is_some() {
        return request.extensions().get::<UserInfo>().cloned();
    }
    let presented = request.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    let peer = request.extensions().get::<crate::authn::PeerCertificate>();
    state.authenticator.authenticate(presented, peer).ok()
}

/// The middleware (a no-op when the server has no audit log).
pub async fn audit(State(state): State<Arc<AppState>>, mut request: Request, next: Next) -> Response {
    let Some(auditor) = state.audit.clone() else { return next.run(request).await };
    let received = micro_now();
    let audit_id = request
        .headers()
        .get("audit-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 64)
        .map(String::from)
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    if let Ok(value) = header::HeaderValue::from_str(&audit_id) {
        request.headers_mut().insert("audit-id", value);
    }
    let uri = request.uri().path_and_query().map(|p| p.as_str().to_string()).unwrap_or_default();
    let target = target(request.method(), request.uri().path(), request.uri().query());
    let user = user_of(&state, &request);
    let username = user.as_ref().map(|u| u.username.clone()).unwrap_or_else(|| "system:anonymous".into());
    let groups = user.as_ref().map(|u| u.groups.clone()).unwrap_or_default();
    let attributes = policy::Attributes {
        user: &username,
        groups: &groups,
        verb: &target.verb,
        resource: target.object.as_ref().map(|[g, _, r, s, n, name]| (g.as_str(), r.as_str(), s.as_str(), n.as_str(), name.as_str())),
        path: request.uri().path(),
    };
    let (mut level, omit) = auditor.policy.decide(&attributes);
    if level == Level::None {
        return next.run(request).await;
    }
    if target.object.as_ref().is_some_and(sensitive) {
        level = level.min(Level::Metadata);
    }
    let mut event = Map::new();
    event.insert("kind".into(), json!("Event"));
    event.insert("apiVersion".into(), json!("audit.k8s.io/v1"));
    event.insert("level".into(), json!(level.as_str()));
    event.insert("auditID".into(), json!(audit_id));
    event.insert("stage".into(), json!("RequestReceived"));
    event.insert("requestURI".into(), json!(uri));
    event.insert("verb".into(), json!(target.verb));
    event.insert("user".into(), serde_json::to_value(user.clone().unwrap_or_else(|| UserInfo { username: username.clone(), ..Default::default() })).unwrap_or(Value::Null));
    if let Some(ip) = request.extensions().get::<SourceIp>() {
        event.insert("sourceIPs".into(), json!([ip.0.to_string()]));
    }
    if let Some(agent) = request.headers().get(header::USER_AGENT).and_then(|v| v.to_str().ok()) {
        event.insert("userAgent".into(), json!(agent));
    }
    if let Some([group, version, resource, subresource, namespace, name]) = &target.object {
        let mut reference = Map::new();
        for (key, value) in [("resource", resource), ("namespace", namespace), ("name", name), ("apiGroup", group), ("apiVersion", version), ("subresource", subresource)] {
            if !value.is_empty() {
                reference.insert(key.into(), json!(value));
            }
        }
        event.insert("objectRef".into(), Value::Object(reference));
    }
    event.insert("requestReceivedTimestamp".into(), json!(received));
    event.insert("stageTimestamp".into(), json!(received));
    let stage_wanted = |stage: &str| !omit.iter().any(|s| s == stage);
    if level >= Level::Request && matches!(*request.method(), Method::POST | Method::PUT | Method::PATCH | Method::DELETE) {
        let content_type = request.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(String::from);
        let (parts, body) = request.into_parts();
        let bytes = match axum::body::to_bytes(body, crate::http::MAX_BODY).await {
            Ok(bytes) => bytes,
            Err(_) => return ApiError::new(crate::status::Reason::RequestEntityTooLarge, "Request entity too large").into_response(),
        };
        if let Some(object) = parse_body(&bytes, content_type.as_deref()) {
            event.insert("requestObject".into(), object);
        }
        request = Request::from_parts(parts, Body::from(bytes));
    }
    if stage_wanted("RequestReceived") {
        auditor.write(&Value::Object(event.clone()));
    }
    let response = next.run(request).await;
    let code = response.status().as_u16();
    // An impersonated request: `user` stays who authenticated, `impersonatedUser` is who it acted as.
    if response.extensions().get::<crate::authn::Impersonator>().is_some()
        && let Some(acting) = response.extensions().get::<UserInfo>()
    {
        event.insert("impersonatedUser".into(), serde_json::to_value(acting).unwrap_or(Value::Null));
    }
    let stage = if target.watch && code < 300 { "ResponseStarted" } else { "ResponseComplete" };
    event.insert("stage".into(), json!(stage));
    let read_body = !target.watch && (code >= 400 || level >= Level::RequestResponse);
    let response = if read_body {
        let content_type = response.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(String::from);
        let (parts, body) = response.into_parts();
        let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap_or_default();
        let object = parse_body(&bytes, content_type.as_deref());
        let mut status = json!({"metadata": {}, "code": code});
        if code >= 400
            && let Some(failure) = object.as_ref().filter(|o| o["kind"] == "Status")
        {
            for field in ["status", "message", "reason", "details"] {
                if let Some(value) = failure.get(field) {
                    status[field] = value.clone();
                }
            }
        }
        event.insert("responseStatus".into(), status);
        if level >= Level::RequestResponse
            && let Some(object) = object
        {
            event.insert("responseObject".into(), object);
        }
        Response::from_parts(parts, Body::from(bytes))
    } else {
        event.insert("responseStatus".into(), json!({"metadata": {}, "code": code}));
        response
    };
    event.insert("stageTimestamp".into(), json!(micro_now()));
    if stage_wanted(stage) {
        auditor.write(&Value::Object(event));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(method: Method, path: &str, query: Option<&str>) -> (String, Option<[String; 6]>) {
        let target = target(&method, path, query);
        (target.verb, target.object)
    }

    fn obj(parts: [&str; 6]) -> Option<[String; 6]> {
        Some(parts.map(String::from))
    }

    #[test]
    fn requests_read_as_kube_apiserver_reads_them() {
        assert_eq!(t(Method::GET, "/api/v1/namespaces/default/configmaps", None), ("list".into(), obj(["", "v1", "configmaps", "", "default", ""])));
        assert_eq!(t(Method::GET, "/api/v1/namespaces/default/configmaps", Some("watch=true")), ("watch".into(), obj(["", "v1", "configmaps", "", "default", ""])));
        assert_eq!(t(Method::PUT, "/api/v1/namespaces/ns1/finalize", None).1, obj(["", "v1", "namespaces", "finalize", "ns1", "ns1"]));
        assert_eq!(t(Method::DELETE, "/api/v1/namespaces/ns1", None), ("delete".into(), obj(["", "v1", "namespaces", "", "ns1", "ns1"])));
        assert_eq!(t(Method::PATCH, "/apis/example.com/v1/widgets/w/status", None), ("patch".into(), obj(["example.com", "v1", "widgets", "status", "", "w"])));
        assert_eq!(t(Method::DELETE, "/apis/example.com/v1/namespaces/a/widgets", None).0, "deletecollection");
        assert_eq!(t(Method::GET, "/apis/example.com/v1", None), ("get".into(), None));
        assert_eq!(t(Method::GET, "/healthz", None), ("get".into(), None));
    }
}
