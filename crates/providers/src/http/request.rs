//! `Request`: a resource of an HTTP API managed through mappings of the actions CREATE,
//! OBSERVE, UPDATE and REMOVE to requests. URLs and bodies are jq expressions over
//! `{payload, response}` (`response` is the last answer, kept in `status.response`; the last
//! successful one also in `status.cache`). OBSERVE decides existence (`isRemovedCheck`:
//! by default a 404) and whether the resource is up to date (`expectedResponseCheck`: by
//! default the answer contains the UPDATE body; or a jq expression).

use oxplane_runtime::conditions::Condition;
use oxplane_runtime::managed::fault;
use oxplane_runtime::managed::{
    ExternalClient, ExternalCreation, ExternalDelete, ExternalError, ExternalNaming, ExternalObservation, ExternalUpdate, Managed,
};
use oxplane_runtime::object;
use serde_json::{Map, Value, json};

use super::secrets::{self, Injector};
use crate::subset::contains;
use super::send::{Answer, Outgoing, SendError, Sender, parse_body};
use super::{StatusWriter, allowed_codes, excerpt, headers_json, headers_of, injection_configs, jq, response_json};

/// The four actions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// CREATE (POST by default).
    Create,
    /// OBSERVE (GET).
    Observe,
    /// UPDATE (PUT).
    Update,
    /// REMOVE (DELETE).
    Remove,
}

impl Action {
    /// Every action.
    pub const ALL: [Action; 4] = [Action::Create, Action::Observe, Action::Update, Action::Remove];

    /// The action `mappings[].action` names.
    pub fn named(name: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|a| a.name() == name)
    }

    /// The name in `mappings[].action`.
    pub fn name(self) -> &'static str {
        match self {
            Action::Create => "CREATE",
            Action::Observe => "OBSERVE",
            Action::Update => "UPDATE",
            Action::Remove => "REMOVE",
        }
    }

    /// The method an action maps to when the mapping names none.
    pub fn default_method(self) -> &'static str {
        match self {
            Action::Create => "POST",
            Action::Observe => "GET",
            Action::Update => "PUT",
            Action::Remove => "DELETE",
        }
    }
}

/// The mapping of an action: the one naming it, else one without an action whose method is
/// the action's default. Returns it with its method.
pub fn mapping(for_provider: &Value, action: Action) -> Option<(Value, String)> {
    let mappings = for_provider.get("mappings").and_then(Value::as_array)?;
    let field = |m: &Value, f: &str| m.get(f).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string);
    let found = mappings
        .iter()
        .find(|m| field(m, "action").as_deref() == Some(action.name()))
        .or_else(|| mappings.iter().find(|m| field(m, "action").is_none() && field(m, "method").as_deref() == Some(action.default_method())))?;
    let method = field(found, "method").unwrap_or_else(|| action.default_method().to_string());
    Some((found.clone(), method))
}

/// What jq expressions see: `forProvider` with `payload.body` parsed, and `response` (its
/// body parsed) or null.
pub fn context(for_provider: &Value, response: Option<&Value>) -> Value {
    let mut context = for_provider.clone();
    if let Some(body) = context.pointer("/payload/body").and_then(Value::as_str).map(parse_body) {
        context["payload"]["body"] = body;
    }
    context["response"] = match response {
        Some(response) => {
            let mut response = response.clone();
            if let Some(body) = response.get("body").and_then(Value::as_str).map(parse_body) {
                response["body"] = body;
            }
            if response.get("headers").is_none() {
                response["headers"] = Value::Null;
            }
            response
        }
        None => Value::Null,
    };
    context
}

/// The jq input of `expectedResponseCheck` and `isRemovedCheck` logic.
fn check_context(for_provider: &Value, answer: &Answer) -> Value {
    let mut payload = for_provider.get("payload").cloned().unwrap_or(Value::Null);
    if let Some(body) = payload.get("body").and_then(Value::as_str).map(parse_body) {
        payload["body"] = body;
    }
    json!({"response": answer.to_context(), "payload": payload})
}

/// A request built from a mapping: what to send (secrets injected) and what to show
/// (`status.requestDetails`, placeholders kept).
pub struct Built {
    /// What is sent.
    pub outgoing: Outgoing,
    /// What is shown.
    pub shown: Value,
}

/// Why a mapping gave no usable request.
enum BuildError {
    /// The URL or body came out null or empty (it needs an answer not yet known).
    Incomplete(String),
    /// Anything else.
    Failed(ExternalError),
}

/// The Request client.
pub struct RequestClient {
    status: StatusWriter,
    sender: Sender,
    naming: ExternalNaming,
}

fn status_response(managed: &Managed, pointer: &str) -> Option<Value> {
    managed.object.pointer(pointer).filter(|r| r.get("statusCode").and_then(Value::as_u64).unwrap_or(0) != 0).cloned()
}

/// The OBSERVE request can be built without any answer (its URL comes from the payload):
/// then a lost POST answer can be settled by looking the object up.
fn observable_without_answer(for_provider: &Value) -> bool {
    let Some((mapping, _)) = mapping(for_provider, Action::Observe) else { return false };
    let url = mapping.get("url").and_then(Value::as_str).unwrap_or_default();
    jq::eval_string(url, &context(for_provider, None)).is_ok_and(|u| url_usable(&u))
}

fn url_usable(url: &str) -> bool {
    !url.is_empty() && !url.contains("null") && (url.starts_with("http://") || url.starts_with("https://"))
}

impl RequestClient {
    /// A client for one Request.
    pub fn new(status: StatusWriter, sender: Sender, managed: &Managed) -> Self {
        let for_provider = managed.for_provider();
        let answer_saved = status_response(managed, "/status/response").is_some()
            && managed.object.pointer("/status/requestDetails/method").and_then(Value::as_str) == Some("POST");
        let naming = ExternalNaming::Assigned { lookup_by_token: answer_saved || observable_without_answer(&for_provider) };
        RequestClient { status, sender, naming }
    }

    async fn build(&self, managed: &Managed, injector: &mut Injector<'_>, action: Action, response: Option<&Value>) -> Result<Option<Built>, BuildError> {
        let for_provider = managed.for_provider();
        let Some((mapping, method)) = mapping(&for_provider, action) else { return Ok(None) };
        let context = context(&for_provider, response);
        let failed = |e: jq::JqError| BuildError::Failed(ExternalError::definite(format!("{} mapping: {e}", action.name())));
        let url = jq::eval_string(mapping.get("url").and_then(Value::as_str).unwrap_or_default(), &context).map_err(failed)?;
        if !url_usable(&url) {
            return Err(BuildError::Incomplete(format!("{} mapping: URL {url:?} is not a complete http(s) URL", action.name())));
        }
        let body_expression = mapping.get("body").and_then(Value::as_str).unwrap_or_default();
        let body = if body_expression.trim().is_empty() {
            String::new()
        } else {
            let normalized = body_expression.split_whitespace().collect::<Vec<_>>().join(" ");
            jq::eval_string(&normalized, &context).map_err(failed)?
        };
        let mut headers = headers_of(mapping.get("headers").filter(|h| h.as_object().is_some_and(|m| !m.is_empty())).or_else(|| for_provider.get("headers")));
        // Header values starting with '.' are jq expressions; others are literal text.
        for values in headers.values_mut() {
            for value in values.iter_mut() {
                if value.starts_with('.') {
                    *value = jq::eval_string(value, &context).map_err(failed)?;
                }
            }
        }
        let secret_error = |e: secrets::SecretError| BuildError::Failed(ExternalError::definite(format!("{} mapping: {e}", action.name())));
        let sent_body = injector.inject(&body).await.map_err(secret_error)?;
        let sent_headers = injector.inject_headers(&headers).await.map_err(secret_error)?;
        let shown = json!({"method": method, "action": action.name(), "url": url, "body": body, "headers": headers_json(&headers)});
        Ok(Some(Built { outgoing: Outgoing { method, url, body: sent_body, headers: sent_headers }, shown }))
    }

    /// Builds from the last answer, or from the cached one when the last does not give a
    /// complete request.
    async fn build_from_status(&self, managed: &Managed, injector: &mut Injector<'_>, action: Action) -> Result<Option<Built>, BuildError> {
        let last = status_response(managed, "/status/response");
        match self.build(managed, injector, action, last.as_ref()).await {
            // The last answer may not be the resource (a DELETE's empty 204): try the cached.
            Err(first) => match status_response(managed, "/status/cache/response") {
                Some(cached) if Some(&cached) != last.as_ref() => match self.build(managed, injector, action, Some(&cached)).await {
                    Err(_) => Err(first),
                    other => other,
                },
                _ => Err(first),
            },
            other => other,
        }
    }

    /// Saves an answer (masked) and what was sent; a successful answer is also cached.
    /// `durable`: written at once (after a create, update or delete), else only in memory
    /// (Observe's findings, written with the conditions).
    async fn record(&self, managed: &mut Managed, injector: &Injector<'_>, built: &Built, answer: &Answer, error: Option<String>, durable: bool) -> Result<(), ExternalError> {
        let mask = |text: &str| injector.mask(text);
        let response = response_json(answer, &mask);
        let mut fields = Map::new();
        fields.insert("requestDetails".into(), injector.mask_value(&built.shown));
        // The cache keeps the last answer that describes the resource (a REMOVE's does not).
        let describes = answer.status < 400 && built.shown.get("action").and_then(Value::as_str) != Some(Action::Remove.name());
        if describes && managed.object.pointer("/status/cache/response") != Some(&response) {
            fields.insert("cache".into(), json!({"lastUpdated": object::now_rfc3339(), "response": response}));
        }
        fields.insert("response".into(), response);
        let failed = managed.object.pointer("/status/failed").and_then(Value::as_i64).unwrap_or(0);
        match error {
            Some(error) => {
                fields.insert("error".into(), json!(error));
                fields.insert("failed".into(), json!(failed + 1));
            }
            None => {
                fields.insert("error".into(), json!(""));
                fields.insert("failed".into(), json!(0));
            }
        }
        let unchanged = fields.iter().all(|(k, v)| managed.object.pointer(&format!("/status/{k}")) == Some(v));
        if unchanged {
            return Ok(());
        }
        if !durable {
            StatusWriter::set(managed, fields);
            return Ok(());
        }
        self.status.write(managed, fields).await
    }

    /// Saves a failure to send.
    async fn record_failure(&self, managed: &mut Managed, injector: &Injector<'_>, built: &Built, error: &str) -> Result<(), ExternalError> {
        let failed = managed.object.pointer("/status/failed").and_then(Value::as_i64).unwrap_or(0);
        let mut fields = Map::new();
        fields.insert("requestDetails".into(), injector.mask_value(&built.shown));
        fields.insert("error".into(), json!(error));
        fields.insert("failed".into(), json!(failed + 1));
        self.status.write(managed, fields).await
    }

    fn send_error(error: &SendError, injector: &Injector<'_>) -> ExternalError {
        let message = injector.mask(&error.to_string());
        if error.is_definite() { ExternalError::definite(message) } else { ExternalError::ambiguous(message) }
    }

    /// Sends one action's request and saves the answer; an error status is an error.
    async fn act(&self, managed: &mut Managed, action: Action) -> Result<Option<Answer>, ExternalError> {
        let kube = self.status.kube().clone();
        let mut injector = Injector::new(&kube, managed.namespace());
        let built = match self.build_from_status(managed, &mut injector, action).await {
            Ok(Some(built)) => built,
            Ok(None) => return Ok(None),
            Err(BuildError::Incomplete(message)) => return Err(ExternalError::definite(message)),
            Err(BuildError::Failed(error)) => return Err(error),
        };
        let uid = managed.uid().to_string();
        let result = self
            .sender
            .send(&built.outgoing, || {
                if action == Action::Create {
                    fault::point(fault::CREATE_RESPONSE_UNREAD, &uid);
                }
            })
            .await;
        let answer = match result {
            Ok(answer) => answer,
            Err(error) => {
                let external = Self::send_error(&error, &injector);
                self.record_failure(managed, &injector, &built, &external.message).await?;
                return Err(external);
            }
        };
        let allowed = allowed_codes(&managed.for_provider());
        if answer.is_error(&allowed) && !(action == Action::Remove && answer.status == 404) {
            let message = injector.mask(&format!("{} {} answered {}: {}", built.outgoing.method, built.outgoing.url, answer.status, excerpt(&answer.body)));
            self.record(managed, &injector, &built, &answer, Some(message.clone()), true).await?;
            return Err(ExternalError::definite(message));
        }
        self.record(managed, &injector, &built, &answer, None, true).await?;
        Ok(Some(answer))
    }

    /// Whether the answer says the resource is gone.
    fn removed(for_provider: &Value, answer: &Answer) -> Result<bool, ExternalError> {
        let check = for_provider.get("isRemovedCheck").cloned().unwrap_or(Value::Null);
        match check.get("type").and_then(Value::as_str).unwrap_or("DEFAULT") {
            "CUSTOM" => {
                let logic = check.get("logic").and_then(Value::as_str).unwrap_or_default();
                jq::eval_bool(logic, &check_context(for_provider, answer)).map_err(|e| ExternalError::definite(format!("isRemovedCheck: {e}")))
            }
            _ => Ok(answer.status == 404),
        }
    }

    /// Whether the answer shows the desired state, and if not, how it differs.
    async fn up_to_date(&self, managed: &Managed, injector: &mut Injector<'_>, answer: &Answer) -> Result<(bool, String), ExternalError> {
        let for_provider = managed.for_provider();
        let check = for_provider.get("expectedResponseCheck").cloned().unwrap_or(Value::Null);
        if check.get("type").and_then(Value::as_str) == Some("CUSTOM") {
            let logic = check.get("logic").and_then(Value::as_str).unwrap_or_default();
            let ok = jq::eval_bool(logic, &check_context(&for_provider, answer)).map_err(|e| ExternalError::definite(format!("expectedResponseCheck: {e}")))?;
            return Ok((ok, if ok { String::new() } else { "expectedResponseCheck logic returned false".into() }));
        }
        // DEFAULT: the answer contains what UPDATE would send.
        let response = answer_status(answer);
        let desired = match self.build(managed, injector, Action::Update, Some(&response)).await {
            Ok(Some(built)) => built.outgoing.body,
            Ok(None) => return Ok((true, String::new())),
            Err(BuildError::Incomplete(message)) => return Err(ExternalError::definite(message)),
            Err(BuildError::Failed(error)) => return Err(error),
        };
        let success = (200..300).contains(&answer.status);
        let (have, want) = (serde_json::from_str::<Value>(&answer.body), serde_json::from_str::<Value>(&desired));
        let ok = match (have, want) {
            (Ok(have), Ok(want)) => contains(&have, &want),
            (Err(_), Ok(_)) => return Err(ExternalError::definite(format!("the OBSERVE answer is not JSON but the UPDATE body is: {}", injector.mask(&excerpt(&answer.body))))),
            (Ok(_), Err(_)) => return Err(ExternalError::definite("the UPDATE body is not JSON but the OBSERVE answer is")),
            (Err(_), Err(_)) => answer.body.contains(&desired),
        } && success;
        Ok((ok, if ok { String::new() } else { "the OBSERVE answer does not contain the UPDATE body".into() }))
    }
}

/// An answer in `status.response` form (unmasked: used only in memory).
fn answer_status(answer: &Answer) -> Value {
    response_json(answer, &|t| t.to_string())
}

#[async_trait::async_trait]
impl ExternalClient for RequestClient {
    fn naming(&self) -> ExternalNaming {
        self.naming
    }

    async fn observe(&mut self, managed: &mut Managed) -> Result<ExternalObservation, ExternalError> {
        let for_provider = managed.for_provider();
        let last = status_response(managed, "/status/response");
        let post_failed = managed.object.pointer("/status/requestDetails/method").and_then(Value::as_str) == Some("POST")
            && last.as_ref().and_then(|r| r.get("statusCode")).and_then(Value::as_u64).is_some_and(|c| c >= 400);
        let not_created = last.is_none() || post_failed;
        let kube = self.status.kube().clone();
        let mut injector = Injector::new(&kube, managed.namespace());
        let built = match self.build_from_status(managed, &mut injector, Action::Observe).await {
            Ok(Some(built)) => built,
            Ok(None) => return Err(ExternalError::definite("no OBSERVE mapping (action OBSERVE, or method GET)")),
            Err(BuildError::Incomplete(_)) if not_created => return Ok(ExternalObservation::default()),
            Err(BuildError::Incomplete(message)) => return Err(ExternalError::definite(message)),
            Err(BuildError::Failed(error)) => return Err(error),
        };
        let answer = match self.sender.send(&built.outgoing, || {}).await {
            Ok(answer) => answer,
            Err(error) => {
                let external = Self::send_error(&error, &injector);
                let mut fields = Map::new();
                fields.insert("error".into(), json!(external.message));
                StatusWriter::set(managed, fields);
                return Err(external);
            }
        };
        let success = (200..300).contains(&answer.status);
        if not_created && !success {
            return Ok(ExternalObservation::default());
        }
        if Self::removed(&for_provider, &answer)? {
            return Ok(ExternalObservation::default());
        }
        if answer.is_error(&allowed_codes(&for_provider)) {
            let message = injector.mask(&format!("{} {} answered {}: {}", built.outgoing.method, built.outgoing.url, answer.status, excerpt(&answer.body)));
            self.record(managed, &injector, &built, &answer, Some(message.clone()), false).await?;
            return Err(ExternalError::definite(message));
        }
        let configs = injection_configs(&for_provider);
        if !configs.is_empty() {
            secrets::inject_response(&kube, &configs, &answer.to_context(), &managed.object).await.map_err(|e| ExternalError::definite(format!("secretInjectionConfigs: {e}")))?;
        }
        let (up_to_date, diff) = self.up_to_date(managed, &mut injector, &answer).await?;
        self.record(managed, &injector, &built, &answer, None, false).await?;
        if !object::is_deleting(&managed.object) {
            managed.set_condition(Condition::available());
        }
        Ok(ExternalObservation { resource_exists: true, resource_up_to_date: up_to_date, diff, ..Default::default() })
    }

    async fn create(&mut self, managed: &mut Managed) -> Result<ExternalCreation, ExternalError> {
        match self.act(managed, Action::Create).await? {
            Some(_) => Ok(ExternalCreation::default()),
            None => Err(ExternalError::definite("no CREATE mapping (action CREATE, or method POST)")),
        }
    }

    async fn update(&mut self, managed: &mut Managed) -> Result<ExternalUpdate, ExternalError> {
        match self.act(managed, Action::Update).await? {
            Some(_) => Ok(ExternalUpdate::default()),
            None => Err(ExternalError::definite("no UPDATE mapping (action UPDATE, or method PUT)")),
        }
    }

    async fn delete(&mut self, managed: &mut Managed) -> Result<ExternalDelete, ExternalError> {
        match self.act(managed, Action::Remove).await? {
            Some(_) => Ok(ExternalDelete {}),
            None => Err(ExternalError::definite("no REMOVE mapping (action REMOVE, or method DELETE); set deletionPolicy Orphan to leave the object")),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn spec() -> Value {
        json!({
            "payload": {"baseUrl": "http://127.0.0.1:9/api", "body": "{\"username\": \"ann\", \"email\": \"ann@example.com\"}"},
            "mappings": [
                {"method": "POST", "body": "{ username: .payload.body.username }", "url": ".payload.baseUrl + \"/users\""},
                {"action": "OBSERVE", "url": ".payload.baseUrl + \"/users/\" + (.response.body.id|tostring)"},
                {"method": "PUT", "url": ".payload.baseUrl + \"/users/\" + (.response.body.id|tostring)"}
            ]
        })
    }

    #[test]
    fn mappings_are_found_by_action_or_default_method() {
        let spec = spec();
        assert_eq!(mapping(&spec, Action::Create).unwrap().1, "POST");
        assert_eq!(mapping(&spec, Action::Observe).unwrap().1, "GET");
        assert_eq!(mapping(&spec, Action::Update).unwrap().1, "PUT");
        assert!(mapping(&spec, Action::Remove).is_none());
    }

    #[test]
    fn context_parses_payload_and_response_bodies() {
        let ctx = context(&spec(), Some(&json!({"statusCode": 201, "body": "{\"id\": 4}"})));
        assert_eq!(ctx["payload"]["body"]["username"], "ann");
        assert_eq!(ctx["response"]["body"]["id"], 4);
        assert_eq!(ctx["response"]["headers"], Value::Null);
        let url = jq::eval_string(mapping(&spec(), Action::Observe).unwrap().0["url"].as_str().unwrap(), &ctx).unwrap();
        assert_eq!(url, "http://127.0.0.1:9/api/users/4");
    }

    #[test]
    fn lookups_need_a_url_without_the_answer() {
        assert!(!observable_without_answer(&spec()));
        let mut by_name = spec();
        by_name["mappings"][1]["url"] = json!(".payload.baseUrl + \"/users/by-name/\" + .payload.body.username");
        assert!(observable_without_answer(&by_name));
    }
}
