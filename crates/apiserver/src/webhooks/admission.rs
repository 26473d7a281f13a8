//! The admission hook that calls the webhooks of every stored
//! `MutatingWebhookConfiguration` (in the mutating step, before schema validation) and
//! `ValidatingWebhookConfiguration` (in the validating step, after it), as kube-apiserver's
//! `MutatingAdmissionWebhook` and `ValidatingAdmissionWebhook` plugins do: configurations in
//! name order, webhooks in their listed order; mutating webhooks one after another, each seeing
//! the previous one's patch, those with `reinvocationPolicy: IfNeeded` called once more when a
//! later one changed the object; validating webhooks all at once, the first refusal in order
//! winning.

use std::sync::Arc;

use base64::Engine;
use serde_json::{Value, json};

use super::client;
use super::conditions;
use super::config::{self, Webhook};
use crate::ops::admission::{AdmissionHook, AdmissionRequest, HookFuture, Operation};
use crate::registry::ResourceDef;
use crate::state::AppState;
use crate::status::{ApiError, Reason};

/// The hook (one per server).
pub struct WebhookAdmission;

/// One webhook of a stored configuration.
#[derive(Clone, Debug)]
struct Configured {
    webhook: Webhook,
}

/// The webhooks of the configurations under `prefix`, configurations in name order.
fn configured(state: &AppState, prefix: &str) -> Vec<Configured> {
    let (mut configurations, _) = state.cache.list(prefix);
    configurations.sort_by(|a, b| a["metadata"]["name"].as_str().cmp(&b["metadata"]["name"].as_str()));
    configurations.iter().flat_map(|c| config::webhooks(c)).map(|webhook| Configured { webhook }).collect()
}

/// Requests about the webhook configurations themselves are never sent to webhooks (as in
/// Kubernetes), so a broken webhook can always be removed.
fn exempt(resource: &ResourceDef) -> bool {
    resource.group == "admissionregistration.k8s.io"
}

fn operation_name(operation: Operation) -> &'static str {
    match operation {
        Operation::Create => "CREATE",
        Operation::Update => "UPDATE",
        Operation::Delete => "DELETE",
    }
}

/// The version of the request's resource `webhook` sees it in, if one of its rules covers the
/// request: the request's own version when a rule names it; else, under `matchPolicy:
/// Equivalent` (the default), another served version of the same resource a rule names, as
/// kube-apiserver sends an object converted to the version the webhook asked for.
/// (`Matched::Own`: no conversion, nothing copied.)
fn matched_resource(state: &AppState, webhook: &Webhook, request: &AdmissionRequest<'_>) -> Option<Matched> {
    if rules_match(webhook, request, request.resource) {
        return Some(Matched::Own);
    }
    if webhook.match_policy.as_deref() == Some("Exact") {
        return None;
    }
    let resource = request.resource;
    let mut versions: Vec<&str> = webhook.rules.iter().flat_map(|r| r.api_versions.iter().map(String::as_str)).filter(|v| *v != "*" && *v != resource.version).collect();
    versions.dedup();
    versions
        .into_iter()
        .filter_map(|version| state.registry.get(&resource.group, version, &resource.plural))
        .find(|other| rules_match(webhook, request, other))
        .map(Matched::Equivalent)
}

/// The version a webhook sees a request's object in.
enum Matched {
    /// The version written.
    Own,
    /// Another served version of the same resource.
    Equivalent(Arc<ResourceDef>),
}

/// Whether one of `webhook`'s rules covers the request made to `resource` (its own, or an
/// equivalent version of it).
fn rules_match(webhook: &Webhook, request: &AdmissionRequest<'_>, resource: &ResourceDef) -> bool {
    let operation = operation_name(request.operation);
    let subresource = request.subresource.unwrap_or_default();
    let cluster_scoped = !resource.namespaced;
    webhook.rules.iter().any(|rule| {
        let any = |list: &[String], value: &str| list.iter().any(|v| v == "*" || v == value);
        let scope = match rule.scope.as_deref().unwrap_or("*") {
            "Cluster" => cluster_scoped,
            "Namespaced" => !cluster_scoped,
            _ => true,
        };
        let resources = rule.resources.iter().any(|entry| {
            let (res, sub) = entry.split_once('/').unwrap_or((entry.as_str(), ""));
            (res == "*" || res == resource.plural) && (sub == "*" || sub == subresource)
        });
        any(&rule.operations, operation) && any(&rule.api_groups, &resource.group) && any(&rule.api_versions, &resource.version) && resources && scope
    })
}

fn labels_match(selector: Option<&Value>, object: &Value) -> Result<bool, String> {
    let Some(selector) = selector.filter(|s| !s.is_null()) else { return Ok(true) };
    let selector = crate::selectors::LabelSelector::from_label_selector_json(selector).map_err(|e| e.message())?;
    Ok(selector.matches_object(object))
}

/// `namespaceSelector`: the namespace's labels for namespaced objects, the Namespace's own for
/// a Namespace; cluster-scoped objects always match.
fn namespace_matches(state: &AppState, webhook: &Webhook, request: &AdmissionRequest<'_>, object: &Value) -> Result<bool, String> {
    if crate::ops::lifecycle::is_namespace(request.resource) {
        return labels_match(webhook.namespace_selector.as_ref(), object);
    }
    let Some(namespace) = request.namespace.filter(|_| request.resource.namespaced) else { return Ok(true) };
    let found = state.cache.get(&format!("/registry/core/namespaces/{namespace}")).0;
    let labels = found.map(|ns| (*ns).clone()).unwrap_or_else(|| json!({}));
    labels_match(webhook.namespace_selector.as_ref(), &labels)
}

/// What is decided for one webhook before calling it.
enum Decision {
    /// Not for this request.
    Skip,
    /// Call it.
    Call,
    /// Calling failed before the call (selectors, matchConditions): handled by failurePolicy.
    Failed(String),
}

fn decide(state: &AppState, webhook: &Webhook, request: &AdmissionRequest<'_>, object: &Value, review: &Value) -> Decision {
    match namespace_matches(state, webhook, request, object) {
        Ok(false) => return Decision::Skip,
        Err(e) => return Decision::Failed(format!("invalid namespaceSelector: {e}")),
        Ok(true) => {}
    }
    let old = request.old.cloned().unwrap_or(Value::Null);
    let object_matches = labels_match(webhook.object_selector.as_ref(), object)
        .and_then(|new| Ok(new || (!old.is_null() && labels_match(webhook.object_selector.as_ref(), &old)?)));
    match object_matches {
        Ok(false) => return Decision::Skip,
        Err(e) => return Decision::Failed(format!("invalid objectSelector: {e}")),
        Ok(true) => {}
    }
    let new = if request.operation == Operation::Delete { Value::Null } else { object.clone() };
    match conditions::matches(&webhook.match_conditions, &new, &old, &review["request"]) {
        Ok(true) => Decision::Call,
        Ok(false) => Decision::Skip,
        Err(e) => Decision::Failed(format!("failed to evaluate match conditions: {e}")),
    }
}

/// The `AdmissionReview` sent for `request` with `object` (as it is now) and `old`, both in
/// the version of `seen_as` (the request's resource, or an equivalent version of it).
fn review(request: &AdmissionRequest<'_>, seen_as: &ResourceDef, object: &Value, old: &Value) -> Value {
    let resource = request.resource;
    let uid = uuid::Uuid::new_v4().to_string();
    let request_kind = json!({"group": resource.group, "version": resource.version, "kind": resource.kind});
    let request_gvr = json!({"group": resource.group, "version": resource.version, "resource": resource.plural});
    let kind = json!({"group": seen_as.group, "version": seen_as.version, "kind": seen_as.kind});
    let gvr = json!({"group": seen_as.group, "version": seen_as.version, "resource": seen_as.plural});
    let (new, options) = match request.operation {
        Operation::Create => (object.clone(), json!({"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"})),
        Operation::Update => (object.clone(), json!({"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"})),
        Operation::Delete => {
            let mut options = json!({"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1"});
            if let Some(policy) = request.propagation {
                options["propagationPolicy"] = json!(policy);
            }
            (Value::Null, options)
        }
    };
    let mut body = json!({
        "uid": uid,
        "kind": kind,
        "resource": gvr,
        "requestKind": request_kind,
        "requestResource": request_gvr,
        "name": request.name,
        "operation": operation_name(request.operation),
        "userInfo": crate::context::current_user(),
        "object": new,
        "oldObject": old,
        "dryRun": request.dry_run,
        "options": options,
    });
    if let Some(sub) = request.subresource {
        body["subResource"] = json!(sub);
        body["requestSubResource"] = json!(sub);
    }
    if let Some(namespace) = request.namespace.filter(|_| resource.namespaced) {
        body["namespace"] = json!(namespace);
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": body})
}

/// A call's outcome.
enum Outcome {
    /// Allowed; with the patched object for a mutating webhook that patched.
    Allowed(Option<Value>),
    /// Refused by the webhook.
    Denied(ApiError),
    /// The call failed (unreachable, timeout, garbage); failurePolicy decides.
    Failed(String),
}

/// Calls `webhook` with `review` and checks its answer as kube-apiserver does.
async fn call(state: &AppState, webhook: &Webhook, review: &Value, object: &Value, mutating: bool) -> Outcome {
    let uid = review["request"]["uid"].as_str().unwrap_or_default().to_string();
    let target = match client::resolve(&state.cache, &webhook.client_config) {
        Ok(target) => target,
        Err(e) => return Outcome::Failed(format!("failed to call webhook: {e}")),
    };
    let ca = match webhook.ca_pem() {
        Ok(ca) => ca,
        Err(e) => return Outcome::Failed(format!("failed to call webhook: {e}")),
    };
    let body = serde_json::to_vec(review).unwrap_or_default();
    let answer = match client::post(&target, ca.as_deref(), body, webhook.timeout()).await {
        Ok(answer) => answer,
        Err(e) => return Outcome::Failed(format!("failed to call webhook: {e}")),
    };
    let invalid = |why: String| Outcome::Failed(format!("received invalid webhook response: {why}"));
    let (api_version, kind) = (answer["apiVersion"].as_str().unwrap_or_default(), answer["kind"].as_str().unwrap_or_default());
    if (api_version, kind) != ("admission.k8s.io/v1", "AdmissionReview") {
        return invalid(format!("expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {api_version}, Kind={kind}"));
    }
    let Some(response) = answer.get("response").filter(|r| r.is_object()) else {
        return invalid("webhook response was absent".into());
    };
    let got = response["uid"].as_str().unwrap_or_default();
    if got != uid {
        return invalid(format!("expected response.uid=\"{uid}\", got \"{got}\""));
    }
    let patch_type = response["patchType"].as_str().unwrap_or_default();
    let patch = response["patch"].as_str().unwrap_or_default();
    if (!patch.is_empty() || !patch_type.is_empty()) && !mutating {
        return invalid("validating webhooks may not return patches".into());
    }
    if (!patch.is_empty() || !patch_type.is_empty()) && patch_type != "JSONPatch" {
        return invalid(format!("webhook returned unsupported patchType: {patch_type}"));
    }
    for warning in response["warnings"].as_array().into_iter().flatten().filter_map(Value::as_str) {
        // Passed to the client as kube-apiserver does: empty ones dropped, long ones cut.
        if !warning.trim().is_empty() {
            crate::context::warn(warning.chars().take(1024).collect::<String>());
        }
    }
    match response["allowed"].as_bool() {
        Some(true) => {}
        Some(false) => return Outcome::Denied(denial(&webhook.name, &response["status"])),
        None => return invalid("response.allowed is missing".into()),
    }
    if patch.is_empty() {
        return Outcome::Allowed(None);
    }
    let ops = match base64::engine::general_purpose::STANDARD.decode(patch) {
        Ok(bytes) => bytes,
        Err(e) => return invalid(format!("response.patch is not base64: {e}")),
    };
    let ops: Value = match serde_json::from_slice(&ops) {
        Ok(ops) => ops,
        Err(e) => return Outcome::Failed(format!("unable to decode JSON patch: {e}")),
    };
    match crate::patch::json_patch::apply(object, &ops) {
        Ok(patched) if patched.is_object() => Outcome::Allowed(Some(patched)),
        Ok(_) => Outcome::Failed("JSON patch made the object no longer an object".into()),
        Err(e) => Outcome::Failed(format!("JSON patch failed: {e}")),
    }
}

/// A refusal as kube-apiserver builds it from the webhook's `status` (`ToStatusErr`): its code
/// (400 when below 400), its message after `admission webhook "NAME" denied the request`.
fn denial(name: &str, status: &Value) -> ApiError {
    let denied = format!("admission webhook \"{name}\" denied the request");
    let message = status["message"].as_str().filter(|m| !m.is_empty());
    let reason_text = status["reason"].as_str().filter(|m| !m.is_empty());
    let message = match (message, reason_text) {
        (Some(m), _) => format!("{denied}: {m}"),
        (None, Some(r)) => format!("{denied}: {r}"),
        (None, None) => format!("{denied} without explanation"),
    };
    let reason = match status["code"].as_u64().unwrap_or(0) {
        401 => Reason::Unauthorized,
        403 => Reason::Forbidden,
        404 => Reason::NotFound,
        405 => Reason::MethodNotAllowed,
        406 => Reason::NotAcceptable,
        409 => Reason::Conflict,
        410 => Reason::Expired,
        413 => Reason::RequestEntityTooLarge,
        415 => Reason::UnsupportedMediaType,
        422 => Reason::Invalid,
        429 => Reason::TooManyRequests,
        500 => Reason::InternalError,
        503 => Reason::ServiceUnavailable,
        504 => Reason::Timeout,
        _ => Reason::BadRequest,
    };
    ApiError::new(reason, message)
}

/// A failed call under failurePolicy `Fail`: kube-apiserver's 500.
fn failed_call(name: &str, why: &str) -> ApiError {
    ApiError::internal(format!("Internal error occurred: failed calling webhook \"{name}\": {why}"))
}

/// Runs one webhook: `Ok(Some(patched))` when it changed the object.
async fn run_one(
    state: &AppState,
    hook: &Configured,
    request: &AdmissionRequest<'_>,
    object: &Value,
    mutating: bool,
) -> Result<Option<Value>, ApiError> {
    let webhook = &hook.webhook;
    let Some(matched) = matched_resource(state, webhook, request) else { return Ok(None) };
    let seen_as: &ResourceDef = match &matched {
        Matched::Own => request.resource,
        Matched::Equivalent(other) => other,
    };
    // The object and the stored one in the version the webhook sees (the same, mostly).
    let mut views = vec![object.clone(), request.old.cloned().unwrap_or(Value::Null)];
    if seen_as.version != request.resource.version {
        if let Err(why) = convert_to(state, request.resource, &mut views, seen_as).await {
            return ignore_or_fail(webhook, &why).map(|()| None);
        }
    }
    let review = review(request, seen_as, &views[0], &views[1]);
    match decide(state, webhook, request, object, &review) {
        Decision::Skip => return Ok(None),
        Decision::Failed(why) => return ignore_or_fail(webhook, &why).map(|()| None),
        Decision::Call => {}
    }
    if request.dry_run && !webhook.dry_run_safe() {
        return Err(ApiError::bad_request(format!("admission webhook \"{}\" does not support dry run", webhook.name)));
    }
    match call(state, webhook, &review, &views[0], mutating).await {
        // A patch of an equivalent version's object applies to it, and the result goes back
        // to the version written.
        Outcome::Allowed(Some(patched)) if seen_as.version != request.resource.version => {
            let mut back = [patched];
            match convert_to(state, request.resource, &mut back, request.resource).await {
                Ok(()) => Ok(back.into_iter().next()),
                Err(why) => ignore_or_fail(webhook, &why).map(|()| None),
            }
        }
        Outcome::Allowed(patched) => Ok(patched),
        Outcome::Denied(error) => Err(error),
        Outcome::Failed(why) => ignore_or_fail(webhook, &why).map(|()| None),
    }
}

/// Converts `objects` (of `resource`; nulls left alone) to the version of `target`: through
/// the CRD's conversion webhook, or by naming the version (`strategy: None`).
async fn convert_to(state: &AppState, resource: &ResourceDef, objects: &mut [Value], target: &ResourceDef) -> Result<(), String> {
    let desired = target.api_version();
    let mut present: Vec<Value> = objects.iter().filter(|o| o.is_object()).cloned().collect();
    match super::conversion::for_resource(&state.cache, resource) {
        Some(conversion) => super::conversion::convert(&state.cache, &conversion, &mut present, &desired).await.map_err(|e| e.message)?,
        None => present.iter_mut().for_each(|o| o["apiVersion"] = json!(desired)),
    }
    let mut converted = present.into_iter();
    for object in objects.iter_mut().filter(|o| o.is_object()) {
        if let Some(next) = converted.next() {
            *object = next;
        }
    }
    Ok(())
}

fn ignore_or_fail(webhook: &Webhook, why: &str) -> Result<(), ApiError> {
    if webhook.fails_closed() {
        return Err(failed_call(&webhook.name, why));
    }
    tracing::warn!(webhook = %webhook.name, %why, "webhook failed, ignored (failurePolicy Ignore)");
    Ok(())
}

impl AdmissionHook for WebhookAdmission {
    fn name(&self) -> &str {
        "webhooks"
    }

    fn mutate<'a>(&'a self, state: &'a AppState, request: &'a AdmissionRequest<'a>, object: &'a mut Value) -> HookFuture<'a> {
        Box::pin(async move {
            if exempt(request.resource) {
                return Ok(());
            }
            let hooks = configured(state, config::MUTATING_PREFIX);
            // The object right after each webhook's call, to know whether a later one changed it.
            let mut after: Vec<Option<Value>> = vec![None; hooks.len()];
            for (i, hook) in hooks.iter().enumerate() {
                if let Some(patched) = run_one(state, hook, request, object, true).await? {
                    *object = patched;
                }
                after[i] = Some(object.clone());
            }
            // Reinvocation: once, for the IfNeeded webhooks called before a later change.
            for (i, hook) in hooks.iter().enumerate() {
                let Some(seen) = &after[i] else { continue };
                if hook.webhook.reinvoked_if_needed() && seen != &*object {
                    if let Some(patched) = run_one(state, hook, request, object, true).await? {
                        *object = patched;
                    }
                }
            }
            Ok(())
        })
    }

    fn validate<'a>(&'a self, state: &'a AppState, request: &'a AdmissionRequest<'a>, object: &'a Value) -> HookFuture<'a> {
        Box::pin(async move {
            if exempt(request.resource) {
                return Ok(());
            }
            let hooks = configured(state, config::VALIDATING_PREFIX);
            if hooks.is_empty() {
                return Ok(());
            }
            let calls = hooks.iter().map(|hook| run_one(state, hook, request, object, false));
            for outcome in futures::future::join_all(calls).await {
                outcome?;
            }
            Ok(())
        })
    }
}

/// The hook, shared.
pub fn hook() -> Arc<dyn AdmissionHook> {
    Arc::new(WebhookAdmission)
}
