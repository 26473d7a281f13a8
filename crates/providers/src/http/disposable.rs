//! `DisposableRequest`: one request, sent until it succeeds (an allowed status and, when
//! `expectedResponse` is set, a response for which that jq expression is true) or until
//! `rollbackRetriesLimit` failures; with `shouldLoopInfinitely`, sent again every
//! `nextReconcile`. The outcome is in the status (`synced`, `response`, `failed`, `error`,
//! `requestDetails`, `lastReconcileTime`). Deleting it sends nothing.
//!
//! A POST or PATCH whose answer was lost (a timeout, a crash) is not sent again blindly:
//! the resource stops with `Synced=False` and the runtime's message saying what to do. Other
//! methods are idempotent and are simply retried.

use std::time::Duration;

use oxplane_runtime::conditions::Condition;
use oxplane_runtime::managed::fault;
use oxplane_runtime::managed::{
    ExternalClient, ExternalCreation, ExternalDelete, ExternalError, ExternalNaming, ExternalObservation, ExternalUpdate, Managed,
};
use oxplane_runtime::object;
use serde_json::{Map, Value, json};

use super::secrets::{self, Injector};
use super::send::{Answer, Outgoing, Sender};
use super::{StatusWriter, allowed_codes, duration_field, excerpt, headers_json, headers_of, injection_configs, jq, response_json};

/// The DisposableRequest client.
pub struct DisposableClient {
    status: StatusWriter,
    sender: Sender,
}

fn idempotent(method: &str) -> bool {
    matches!(method, "GET" | "HEAD" | "OPTIONS" | "PUT" | "DELETE")
}

fn status_field<'a>(managed: &'a Managed, field: &str) -> Option<&'a Value> {
    managed.object.pointer(&format!("/status/{field}"))
}

impl DisposableClient {
    /// A client for one DisposableRequest.
    pub fn new(status: StatusWriter, sender: Sender, _managed: &Managed) -> Self {
        DisposableClient { status, sender }
    }

    fn failed(managed: &Managed) -> i64 {
        status_field(managed, "failed").and_then(Value::as_i64).unwrap_or(0)
    }

    /// Sends the request and saves what happened.
    async fn send(&self, managed: &mut Managed) -> Result<(), ExternalError> {
        let for_provider = managed.for_provider();
        let text = |f: &str| for_provider.get(f).and_then(Value::as_str).unwrap_or_default().to_string();
        let (method, url, body) = (text("method").to_uppercase(), text("url"), text("body"));
        let headers = headers_of(for_provider.get("headers"));
        let kube = self.status.kube().clone();
        let mut injector = Injector::new(&kube, managed.namespace());
        let secret_error = |e: secrets::SecretError| ExternalError::definite(e.to_string());
        let outgoing = Outgoing {
            method: method.clone(),
            url: url.clone(),
            body: injector.inject(&body).await.map_err(secret_error)?,
            headers: injector.inject_headers(&headers).await.map_err(secret_error)?,
        };
        let shown = json!({"method": method, "url": url, "body": body, "headers": headers_json(&headers)});
        let mut fields = Map::new();
        fields.insert("requestDetails".into(), shown);
        fields.insert("lastReconcileTime".into(), json!(object::now_rfc3339()));
        let uid = managed.uid().to_string();
        let result = self.sender.send(&outgoing, || fault::point(fault::CREATE_RESPONSE_UNREAD, &uid)).await;
        let failed = Self::failed(managed);
        let outcome = match result {
            Err(error) => {
                let message = injector.mask(&error.to_string());
                fields.insert("error".into(), json!(message));
                fields.insert("failed".into(), json!(failed + 1));
                if error.is_definite() || idempotent(&method) { Err(ExternalError::definite(message)) } else { Err(ExternalError::ambiguous(message)) }
            }
            Ok(answer) => {
                fields.insert("response".into(), response_json(&answer, &|t| injector.mask(t)));
                match self.judge(&for_provider, &answer, &method, &url) {
                    Ok(()) => {
                        fields.insert("synced".into(), json!(true));
                        fields.insert("error".into(), json!(""));
                        let configs = injection_configs(&for_provider);
                        if !configs.is_empty() {
                            secrets::inject_response(&kube, &configs, &answer.to_context(), &managed.object)
                                .await
                                .map_err(|e| ExternalError::definite(format!("secretInjectionConfigs: {e}")))?;
                        }
                        Ok(())
                    }
                    Err(message) => {
                        let message = injector.mask(&message);
                        fields.insert("error".into(), json!(message));
                        fields.insert("failed".into(), json!(failed + 1));
                        Err(ExternalError::definite(message))
                    }
                }
            }
        };
        self.status.write(managed, fields).await?;
        outcome
    }

    /// Whether an answer is a success: an allowed status and the expected response.
    fn judge(&self, for_provider: &Value, answer: &Answer, method: &str, url: &str) -> Result<(), String> {
        if answer.is_error(&allowed_codes(for_provider)) {
            return Err(format!("{method} {url} answered {}: {}", answer.status, excerpt(&answer.body)));
        }
        let Some(expected) = for_provider.get("expectedResponse").and_then(Value::as_str).filter(|e| !e.trim().is_empty()) else {
            return Ok(());
        };
        match jq::eval_bool(expected, &answer.to_context()) {
            Ok(true) => Ok(()),
            Ok(false) => {
                let limit = for_provider.get("rollbackRetriesLimit").and_then(Value::as_i64).map_or("none".to_string(), |l| l.to_string());
                Err(format!("{method} {url}: the response does not match expectedResponse {expected:?} (retries limit {limit}): {}", excerpt(&answer.body)))
            }
            Err(error) => Err(format!("{method} {url}: expectedResponse: {error}")),
        }
    }
}

#[async_trait::async_trait]
impl ExternalClient for DisposableClient {
    fn naming(&self) -> ExternalNaming {
        // A request cannot be looked up: one whose outcome is unknown is never resent.
        ExternalNaming::Assigned { lookup_by_token: false }
    }

    async fn observe(&mut self, managed: &mut Managed) -> Result<ExternalObservation, ExternalError> {
        if object::is_deleting(&managed.object) {
            // Nothing to delete: the request was sent.
            return Ok(ExternalObservation::default());
        }
        let for_provider = managed.for_provider();
        let synced = status_field(managed, "synced").and_then(Value::as_bool).unwrap_or(false);
        if !synced {
            let failed = Self::failed(managed);
            if let Some(limit) = for_provider.get("rollbackRetriesLimit").and_then(Value::as_i64)
                && failed >= limit
            {
                let error = status_field(managed, "error").and_then(Value::as_str).unwrap_or_default();
                return Err(ExternalError::definite(format!("giving up after {failed} failed attempts (rollbackRetriesLimit {limit}): {error}")));
            }
            return Ok(ExternalObservation::default());
        }
        managed.set_condition(Condition::available());
        let mut observation = ExternalObservation { resource_exists: true, resource_up_to_date: true, ..Default::default() };
        if for_provider.get("shouldLoopInfinitely").and_then(Value::as_bool) == Some(true) {
            let every = duration_field(&for_provider, "nextReconcile")?.unwrap_or(Duration::ZERO);
            let last = status_field(managed, "lastReconcileTime").and_then(Value::as_str).and_then(object::parse_time);
            let elapsed = last.map(|t| jiff::Timestamp::now().duration_since(t)).and_then(|d| Duration::try_from(d).ok()).unwrap_or(Duration::MAX);
            if elapsed >= every {
                observation.resource_up_to_date = false;
                observation.diff = "nextReconcile is due".into();
            } else {
                observation.requeue_after = Some(every - elapsed);
            }
        }
        Ok(observation)
    }

    async fn create(&mut self, managed: &mut Managed) -> Result<ExternalCreation, ExternalError> {
        self.send(managed).await.map(|()| ExternalCreation::default())
    }

    async fn update(&mut self, managed: &mut Managed) -> Result<ExternalUpdate, ExternalError> {
        self.send(managed).await.map(|()| ExternalUpdate::default())
    }

    async fn delete(&mut self, _managed: &mut Managed) -> Result<ExternalDelete, ExternalError> {
        Ok(ExternalDelete {})
    }
}
