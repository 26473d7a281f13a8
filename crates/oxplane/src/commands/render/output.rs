//! What `render` prints, as Crossplane's `crossplane render` prints it (pure: the pipeline's
//! outcome in, objects out): the composite with its desired status and `Ready` condition, each
//! desired composed resource with the metadata the composer gives it (sorted by composition
//! resource name), and with the flags the results and the context.

use std::collections::BTreeMap;

use oxplane_composition::composite::compose::{ANNOTATION_RESOURCE_NAME, LABEL_CLAIM_NAME, LABEL_CLAIM_NAMESPACE, LABEL_COMPOSITE};
use oxplane_composition::composite::pipeline::Outcome;
use oxplane_composition::composite::reconciler::{SYSTEM_CONDITIONS, name_list};
use oxplane_functions::protocol::{ConditionStatus, Ready, Severity};
use oxplane_runtime::object;
use serde_json::{Value, json};

/// Every condition render writes carries this time: a real one would only be noise, and
/// Crossplane's render writes the same.
pub const CONDITION_TIME: &str = "2024-01-01T00:00:00Z";

/// The API version of render's own kinds (`Result`, `Context`).
pub const RENDER_API_VERSION: &str = "render.crossplane.io/v1beta1";

/// What to include besides the composite and the composed resources.
#[derive(Debug, Clone, Copy, Default)]
pub struct Include {
    /// `-r`: function results as `kind: Result` objects.
    pub results: bool,
    /// `-x`: the input composite's spec and metadata.
    pub full_xr: bool,
    /// `-c`: the context as a `kind: Context` object.
    pub context: bool,
}

/// The documents of render's output, in order. `xr` is the composite as given (defaulted);
/// `observed` the observed composed resources by composition resource name.
pub fn documents(xr: &Value, outcome: &Outcome, observed: &BTreeMap<String, Value>, include: Include) -> Result<Vec<Value>, String> {
    let mut documents = vec![composite(xr, outcome, include.full_xr)];
    for (name, desired) in &outcome.desired.resources {
        documents.push(composed(xr, name, &desired.resource, observed.get(name)).map_err(|e| format!("cannot render composed resource {name:?} metadata: {e}"))?);
    }
    if include.results {
        for (step, result) in &outcome.results {
            let severity = match result.severity {
                Severity::Unspecified => "SEVERITY_UNSPECIFIED",
                Severity::Fatal => "SEVERITY_FATAL",
                Severity::Warning => "SEVERITY_WARNING",
                Severity::Normal => "SEVERITY_NORMAL",
            };
            documents.push(json!({"apiVersion": RENDER_API_VERSION, "kind": "Result", "step": step, "severity": severity, "message": result.message}));
        }
    }
    if include.context && let Some(context) = &outcome.context {
        documents.push(json!({"apiVersion": RENDER_API_VERSION, "kind": "Context", "fields": context}));
    }
    Ok(documents)
}

/// The YAML stream: each document after a `---` line.
pub fn stream(documents: &[Value]) -> String {
    let mut out = String::new();
    for document in documents {
        out.push_str("---\n");
        out.push_str(&crate::commands::yaml::yaml(document, 0));
        out.push('\n');
    }
    out
}

fn condition(type_: &str, status: &str, reason: &str, message: &str) -> Value {
    let mut condition = json!({"type": type_, "status": status, "reason": reason, "lastTransitionTime": CONDITION_TIME});
    if !message.is_empty() {
        condition["message"] = json!(message);
    }
    condition
}

/// Sets `condition` among `conditions`, replacing one of the same type.
fn set_condition(conditions: &mut Vec<Value>, condition: Value) {
    match conditions.iter_mut().find(|c| c.get("type") == condition.get("type")) {
        Some(existing) => *existing = condition,
        None => conditions.push(condition),
    }
}

/// The composite: the desired composite from the pipeline (its status), identified by the
/// input's apiVersion, kind, name and namespace, with `Ready` and the functions' conditions.
fn composite(xr: &Value, outcome: &Outcome, full_xr: bool) -> Value {
    let desired = outcome.desired.composite.as_ref();
    let mut out = desired.map(|c| c.resource.clone()).filter(Value::is_object).unwrap_or_else(|| json!({}));
    out["apiVersion"] = xr.get("apiVersion").cloned().unwrap_or(Value::Null);
    out["kind"] = xr.get("kind").cloned().unwrap_or(Value::Null);
    if !out.get("metadata").is_some_and(Value::is_object) {
        out["metadata"] = json!({});
    }
    out["metadata"]["name"] = json!(object::name(xr).unwrap_or_default());
    match object::namespace(xr) {
        Some(namespace) if !namespace.is_empty() => out["metadata"]["namespace"] = json!(namespace),
        _ => {
            if let Some(metadata) = out["metadata"].as_object_mut() {
                metadata.remove("namespace");
            }
        }
    }
    let unready: Vec<String> = outcome.desired.resources.iter().filter(|(_, r)| r.ready != Ready::True).map(|(name, _)| name.clone()).collect();
    let ready = match desired.map(|c| c.ready).unwrap_or_default() {
        Ready::False => condition("Ready", "False", "Creating", ""),
        Ready::Unspecified if !unready.is_empty() => condition("Ready", "False", "Creating", &format!("Unready resources: {}", name_list(&unready))),
        _ => condition("Ready", "True", "Available", ""),
    };
    let mut conditions = out.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
    set_condition(&mut conditions, ready);
    for c in &outcome.conditions {
        // Functions may not set the conditions Crossplane itself owns.
        if SYSTEM_CONDITIONS.contains(&c.type_.as_str()) {
            continue;
        }
        let status = match c.status {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown | ConditionStatus::Unspecified => "Unknown",
        };
        set_condition(&mut conditions, condition(&c.type_, status, &c.reason, c.message.as_deref().unwrap_or_default()));
    }
    if !out.get("status").is_some_and(Value::is_object) {
        out["status"] = json!({});
    }
    out["status"]["conditions"] = Value::Array(conditions);
    if full_xr {
        for field in ["spec", "metadata"] {
            match xr.get(field) {
                Some(value) => out[field] = value.clone(),
                None => {
                    if let Some(map) = out.as_object_mut() {
                        map.remove(field);
                    }
                }
            }
        }
    }
    out
}

/// A desired composed resource with the composer's metadata: the observed resource's name,
/// namespace and generateName kept; otherwise `generateName` from the composite's
/// `crossplane.io/composite` label (or name); the composite's namespace; the resource-name
/// annotation; the composite and claim labels; and the composite as controller.
fn composed(xr: &Value, name: &str, desired: &Value, observed: Option<&Value>) -> Result<Value, String> {
    let mut out = desired.clone();
    if !out.is_object() {
        return Err("the desired resource is not an object".to_string());
    }
    if !out.get("metadata").is_some_and(Value::is_object) {
        out["metadata"] = json!({});
    }
    if let Some(observed) = observed {
        for field in ["namespace", "name", "generateName"] {
            match observed.pointer(&format!("/metadata/{field}")).filter(|v| v.as_str().is_some_and(|s| !s.is_empty())) {
                Some(value) => out["metadata"][field] = value.clone(),
                None => {
                    if let Some(metadata) = out["metadata"].as_object_mut() {
                        metadata.remove(field);
                    }
                }
            }
        }
    }
    let prefix = object::label(xr, LABEL_COMPOSITE).filter(|p| !p.is_empty()).or(object::name(xr)).unwrap_or_default().to_string();
    let unnamed = |field: &str| out.pointer(&format!("/metadata/{field}")).and_then(Value::as_str).is_none_or(str::is_empty);
    if unnamed("name") && unnamed("generateName") {
        out["metadata"]["generateName"] = json!(format!("{prefix}-"));
    }
    if let Some(namespace) = object::namespace(xr).filter(|n| !n.is_empty()) {
        out["metadata"]["namespace"] = json!(namespace);
    }
    object::set_annotation(&mut out, ANNOTATION_RESOURCE_NAME, name);
    object::set_label(&mut out, LABEL_COMPOSITE, &prefix);
    let claim = match (object::label(xr, LABEL_CLAIM_NAME), object::label(xr, LABEL_CLAIM_NAMESPACE)) {
        (Some(claim), Some(namespace)) if !claim.is_empty() && !namespace.is_empty() => Some((claim.to_string(), namespace.to_string())),
        _ => xr.pointer("/spec/claimRef").map(|r| {
            let field = |f: &str| r.get(f).and_then(Value::as_str).unwrap_or_default().to_string();
            (field("name"), field("namespace"))
        }),
    };
    if let Some((claim, namespace)) = claim {
        object::set_label(&mut out, LABEL_CLAIM_NAMESPACE, &namespace);
        object::set_label(&mut out, LABEL_CLAIM_NAME, &claim);
    }
    let controller = object::owner_reference(xr, true, true);
    let uid = controller.get("uid").cloned();
    let mut owners = out.pointer("/metadata/ownerReferences").and_then(Value::as_array).cloned().unwrap_or_default();
    if let Some(other) = owners.iter().find(|r| r.get("controller").and_then(Value::as_bool) == Some(true) && r.get("uid") != uid.as_ref()) {
        let field = |f: &str| other.get(f).and_then(Value::as_str).unwrap_or_default().to_string();
        return Err(format!(
            "cannot set composite resource {:?} as controller ref of composed resource: {} is already controlled by {} {} (UID {})",
            object::name(xr).unwrap_or_default(),
            name,
            field("kind"),
            field("name"),
            field("uid")
        ));
    }
    owners.retain(|r| r.get("uid") != uid.as_ref());
    owners.push(controller);
    out["metadata"]["ownerReferences"] = Value::Array(owners);
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use oxplane_functions::protocol::{Condition, FnResult, Resource, Target};

    use super::*;

    fn xr() -> Value {
        json!({"apiVersion": "example.org/v1", "kind": "XBucket", "metadata": {"name": "my-bucket"}, "spec": {"region": "eu"}})
    }

    fn desired(kind: &str, ready: Ready) -> Resource {
        Resource { resource: json!({"apiVersion": "nop.crossplane.io/v1alpha1", "kind": kind, "spec": {"forProvider": {}}}), ready, ..Default::default() }
    }

    #[test]
    fn the_stream_is_the_composite_then_composed_resources_by_name() {
        let mut outcome = Outcome::default();
        outcome.desired.composite = Some(Resource { resource: json!({"status": {"region": "eu"}}), ..Default::default() });
        outcome.desired.resources.insert("b-role".into(), desired("NopResource", Ready::True));
        outcome.desired.resources.insert("a-bucket".into(), desired("NopResource", Ready::Unspecified));
        let text = stream(&documents(&xr(), &outcome, &BTreeMap::new(), Include::default()).unwrap());
        let expected = r#"---
apiVersion: example.org/v1
kind: XBucket
metadata:
  name: my-bucket
status:
  conditions:
  - lastTransitionTime: "2024-01-01T00:00:00Z"
    message: 'Unready resources: a-bucket'
    reason: Creating
    status: "False"
    type: Ready
  region: eu
---
apiVersion: nop.crossplane.io/v1alpha1
kind: NopResource
metadata:
  annotations:
    crossplane.io/composition-resource-name: a-bucket
  generateName: my-bucket-
  labels:
    crossplane.io/composite: my-bucket
  ownerReferences:
  - apiVersion: example.org/v1
    blockOwnerDeletion: true
    controller: true
    kind: XBucket
    name: my-bucket
    uid: ""
spec:
  forProvider: {}
---
apiVersion: nop.crossplane.io/v1alpha1
kind: NopResource
metadata:
  annotations:
    crossplane.io/composition-resource-name: b-role
  generateName: my-bucket-
  labels:
    crossplane.io/composite: my-bucket
  ownerReferences:
  - apiVersion: example.org/v1
    blockOwnerDeletion: true
    controller: true
    kind: XBucket
    name: my-bucket
    uid: ""
spec:
  forProvider: {}
"#;
        assert_eq!(text, expected);
    }

    #[test]
    fn ready_follows_the_composite_then_the_resources() {
        let ready_of = |outcome: &Outcome| documents(&xr(), outcome, &BTreeMap::new(), Include::default()).unwrap()[0]["status"]["conditions"][0].clone();
        let mut outcome = Outcome::default();
        assert_eq!(ready_of(&outcome)["reason"], "Available");
        outcome.desired.resources.insert("x".into(), desired("NopResource", Ready::True));
        assert_eq!(ready_of(&outcome)["reason"], "Available");
        outcome.desired.composite = Some(Resource { resource: json!({}), ready: Ready::False, ..Default::default() });
        let ready = ready_of(&outcome);
        assert_eq!((ready["status"].as_str(), ready["reason"].as_str(), ready.get("message")), (Some("False"), Some("Creating"), None));
        for name in ["c", "d", "e", "f"] {
            outcome.desired.resources.insert(name.into(), desired("NopResource", Ready::False));
        }
        outcome.desired.composite = None;
        assert_eq!(ready_of(&outcome)["message"], "Unready resources: c, d, e, and 1 more");
    }

    #[test]
    fn function_conditions_results_context_and_the_full_xr_on_request() {
        let mut outcome = Outcome::default();
        let condition = |type_: &str| Condition { type_: type_.into(), status: ConditionStatus::False, reason: "Waiting".into(), message: Some("m".into()), target: Some(Target::Composite) };
        outcome.conditions = vec![condition("DatabaseReady"), condition("Synced")];
        outcome.results = vec![("step-a".into(), FnResult::normal("hello")), ("step-b".into(), FnResult::warning("careful"))];
        outcome.context = Some(json!({"apiextensions.crossplane.io/environment": {"region": "eu"}}));
        let include = Include { results: true, full_xr: true, context: true };
        let docs = documents(&xr(), &outcome, &BTreeMap::new(), include).unwrap();
        let types: Vec<&str> = docs[0]["status"]["conditions"].as_array().unwrap().iter().filter_map(|c| c["type"].as_str()).collect();
        assert_eq!(types, ["Ready", "DatabaseReady"]);
        assert_eq!(docs[0]["spec"], json!({"region": "eu"}));
        assert_eq!(docs[1], json!({"apiVersion": RENDER_API_VERSION, "kind": "Result", "step": "step-a", "severity": "SEVERITY_NORMAL", "message": "hello"}));
        assert_eq!(docs[2]["severity"], "SEVERITY_WARNING");
        assert_eq!(docs[3]["kind"], "Context");
        assert_eq!(docs[3]["fields"]["apiextensions.crossplane.io/environment"]["region"], "eu");
    }

    #[test]
    fn observed_names_are_kept_and_namespaced_composites_compose_in_their_namespace() {
        let mut xr = xr();
        xr["metadata"]["namespace"] = json!("team-a");
        xr["metadata"]["labels"] = json!({"crossplane.io/composite": "root", "crossplane.io/claim-name": "c", "crossplane.io/claim-namespace": "ns"});
        let observed = json!({"metadata": {"name": "root-abc123", "namespace": "team-a"}});
        let mut outcome = Outcome::default();
        outcome.desired.resources.insert("db".into(), desired("NopResource", Ready::True));
        let docs = documents(&xr, &outcome, &[("db".to_string(), observed)].into(), Include::default()).unwrap();
        let metadata = &docs[1]["metadata"];
        assert_eq!(metadata["name"], "root-abc123");
        assert!(metadata.get("generateName").is_none());
        assert_eq!(metadata["namespace"], "team-a");
        assert_eq!(metadata["labels"], json!({"crossplane.io/composite": "root", "crossplane.io/claim-name": "c", "crossplane.io/claim-namespace": "ns"}));
        assert_eq!(docs[0]["metadata"]["namespace"], "team-a");
    }

    #[test]
    fn a_resource_controlled_by_another_object_is_an_error() {
        let mut outcome = Outcome::default();
        let mut resource = desired("NopResource", Ready::True);
        resource.resource["metadata"] = json!({"ownerReferences": [{"apiVersion": "v1", "kind": "Other", "name": "o", "uid": "1234", "controller": true}]});
        outcome.desired.resources.insert("db".into(), resource);
        let error = documents(&xr(), &outcome, &BTreeMap::new(), Include::default()).unwrap_err();
        assert!(error.starts_with("cannot render composed resource \"db\" metadata: cannot set composite resource \"my-bucket\" as controller ref"), "{error}");
    }
}
