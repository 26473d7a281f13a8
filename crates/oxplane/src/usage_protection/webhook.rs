//! The same deletion protection served as Crossplane's validating admission webhook, for
//! `oxplane controllers` against another API server, where no in-process hook can run: its
//! HTTPS server (`crate::webhooks`) under a certificate from a CA of its own answers `POST
//! /validate-no-usages`,
//! and the `ValidatingWebhookConfiguration` `crossplane-no-usages` that Crossplane registers
//! (every resource's DELETE, objects labelled `crossplane.io/in-use: "true"`, `failurePolicy:
//! Fail`, `sideEffects: None`) points the API server at it, with that CA as `caBundle`.
//! Usages are read through the API and the refused attempt is recorded on the object with a
//! merge patch: nothing here knows the server's internals.

use oxplane_apiserver::webhooks::serve::Answer;
use oxplane_composition::usage;
use oxplane_runtime::client::{ApiError, Kube};
use oxplane_runtime::kinds::Kind;
use serde_json::{Value, json};

/// The configuration's name, as Crossplane's.
pub const CONFIGURATION: &str = "crossplane-no-usages";
/// The path the webhook is served at.
pub const PATH: &str = "/validate-no-usages";
/// The field manager the configuration is applied with.
const MANAGER: &str = "oxplane-controllers";

/// The `ValidatingWebhookConfiguration` pointing at the webhook at `url`, trusting `ca_bundle`.
pub fn configuration(url: &str, ca_bundle: &str) -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": CONFIGURATION},
        "webhooks": [{
            "name": "nousages.protection.crossplane.io",
            "admissionReviewVersions": ["v1"],
            "clientConfig": {"url": url, "caBundle": ca_bundle},
            "rules": [{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["DELETE"], "resources": ["*"]}],
            "objectSelector": {"matchLabels": {usage::LABEL_IN_USE: "true"}},
            "failurePolicy": "Fail",
            "sideEffects": "None",
        }],
    })
}

/// Registers (or re-points, after a restart on another port or CA) the configuration.
pub async fn register(kube: &Kube, url: &str, ca_bundle: &str) -> Result<(), ApiError> {
    let kind = Kind::new("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration", "validatingwebhookconfigurations", false);
    kube.apply(&kind, &configuration(url, ca_bundle), MANAGER, true).await.map(|_| ())
}

/// The answer to one POST: an `AdmissionReview` with the decision, or an HTTP error for what
/// is not one.
pub async fn answer(kube: &Kube, path: &str, body: &[u8]) -> Answer {
    let error = |code: u16, message: String| (code, json!({"error": message}).to_string().into_bytes());
    if path != PATH {
        return error(404, format!("no webhook is served at {path}; the Usage webhook is at {PATH}"));
    }
    let review: Value = match serde_json::from_slice(body) {
        Ok(review) => review,
        Err(e) => return error(400, format!("the body is not an AdmissionReview: {e}")),
    };
    let Some(request) = review.get("request").filter(|r| r.is_object()) else {
        return error(400, "the AdmissionReview has no request".into());
    };
    let response = decide(kube, request).await;
    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response});
    (200, review.to_string().into_bytes())
}

/// The review's `response`: allowed, or refused with an HTTP code and message (as
/// controller-runtime's `admission.Errored`: the code goes in `status.code`).
async fn decide(kube: &Kube, request: &Value) -> Value {
    let uid = request["uid"].clone();
    let refuse = |code: u16, message: String| json!({"uid": uid, "allowed": false, "status": {"code": code, "message": message}});
    let operation = request["operation"].as_str().unwrap_or_default();
    if operation != "DELETE" {
        return refuse(400, format!("unexpected operation {operation:?}: this webhook checks deletions only"));
    }
    let Some(mut used) = request.get("oldObject").filter(|o| o.is_object()).cloned() else {
        return refuse(400, "the DELETE review carries no oldObject".into());
    };
    let kind = &request["kind"];
    super::fill_type(&mut used, kind["group"].as_str().unwrap_or_default(), kind["version"].as_str().unwrap_or_default(), kind["kind"].as_str().unwrap_or_default());
    let mut found = Vec::new();
    for (kind, type_name) in usage::kinds() {
        match kube.list(&kind, None, None).await {
            Ok(usages) => found.extend(usages.into_iter().map(|u| (u, type_name))),
            Err(e) => return refuse(500, format!("cannot list {}: {e}", kind.plural)),
        }
    }
    let usages: Vec<(&Value, &str)> = found.iter().map(|(u, t)| (u, *t)).collect();
    let Some(message) = usage::deletion_refusal(&used, &usages) else {
        return json!({"uid": uid, "allowed": true});
    };
    if request["dryRun"].as_bool() != Some(true) {
        let policy = request.pointer("/options/propagationPolicy").and_then(Value::as_str).unwrap_or("Background");
        if let Err(e) = record_attempt(kube, request, &used, policy).await {
            tracing::info!(error = %e, object = request["name"].as_str().unwrap_or_default(), "cannot record the refused deletion attempt");
        }
    }
    refuse(409, message)
}

/// Writes the refused deletion's propagation policy on the object, for a Usage that replays
/// it, unless it already says so.
async fn record_attempt(kube: &Kube, request: &Value, used: &Value, policy: &str) -> Result<(), ApiError> {
    let annotations = used.pointer("/metadata/annotations");
    if annotations.and_then(|a| a.get(usage::ANNOTATION_DELETION_ATTEMPT)).and_then(Value::as_str) == Some(policy) {
        return Ok(());
    }
    let resource = &request["resource"];
    let namespace = request["namespace"].as_str().filter(|ns| !ns.is_empty());
    let kind = Kind::new(
        resource["group"].as_str().unwrap_or_default(),
        resource["version"].as_str().unwrap_or_default(),
        request["kind"]["kind"].as_str().unwrap_or_default(),
        resource["resource"].as_str().unwrap_or_default(),
        namespace.is_some(),
    );
    let name = request["name"].as_str().unwrap_or_default();
    let patch = json!({"metadata": {"annotations": {usage::ANNOTATION_DELETION_ATTEMPT: policy}}});
    kube.merge_patch(&kind, namespace, name, &patch).await.map(|_| ())
}
