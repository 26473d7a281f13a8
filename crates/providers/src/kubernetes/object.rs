//! The Object client: resolves `references` in the control plane (`dependsOn` must exist;
//! `patchesFrom` copies a field into the manifest), server-side applies the manifest to the
//! target with the provider's field manager (forcing ownership of the fields it sets, so a
//! change made on the target is reverted), reports the observed object in
//! `status.atProvider.manifest`, readiness by `spec.readiness.policy`, and connection details
//! read from any object on the target. Up to date means the target holds every field of the
//! manifest.

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine;
use oxplane_functions::fieldpath;
use oxplane_runtime::client::DeleteOptions;
use oxplane_runtime::conditions::Condition;
use oxplane_runtime::managed::{
    ConnectContext, ConnectionDetails, ExternalClient, ExternalConnector, ExternalCreation, ExternalDelete, ExternalError, ExternalObservation,
    ExternalUpdate, Managed,
};
use oxplane_runtime::object::{self, ObjectKey};
use serde_json::{Value, json};

use super::FIELD_MANAGER;
use super::target::{Target, Targets};
use super::watch::{RealtimeWatches, Watched};
use crate::subset::contains;

/// Builds Object clients.
pub struct ObjectConnector {
    /// Clients of target clusters.
    pub targets: Arc<Targets>,
    /// The control plane.
    pub local: Target,
    /// Realtime watches of Objects with `spec.watch`.
    pub realtime: Arc<RealtimeWatches>,
}

#[async_trait::async_trait]
impl ExternalConnector for ObjectConnector {
    async fn connect(&self, context: &ConnectContext<'_>, managed: &Managed) -> Result<Box<dyn ExternalClient>, ExternalError> {
        let target = self.targets.of(context, &self.local, managed.namespace()).await?;
        Ok(Box::new(ObjectClient { target, local: self.local.clone(), realtime: self.realtime.clone() }))
    }
}

/// The client of one Object.
pub struct ObjectClient {
    target: Target,
    local: Target,
    realtime: Arc<RealtimeWatches>,
}

/// A manifest ready to apply: the object and its kind on the target.
struct Desired {
    object: Value,
    kind: oxplane_runtime::kinds::Kind,
    namespace: Option<String>,
    name: String,
}

impl Desired {
    fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind.gvk.kind, self.name),
            None => format!("{} {}", self.kind.gvk.kind, self.name),
        }
    }
}

fn reference_target(reference: &Value, own_namespace: Option<&str>) -> (Value, String, Option<String>) {
    let text = |f: &str, default: &str| reference.get(f).and_then(Value::as_str).filter(|s| !s.is_empty()).unwrap_or(default).to_string();
    let type_meta = json!({"apiVersion": text("apiVersion", &super::schemas::default_reference_api_version(own_namespace.is_some())), "kind": text("kind", "Object")});
    let namespace = reference.get("namespace").and_then(Value::as_str).filter(|s| !s.is_empty()).or(own_namespace).map(str::to_string);
    (type_meta, text("name", ""), namespace)
}

impl ObjectClient {
    /// The objects an Object's references name in the control plane, to watch (those whose
    /// kind is served; a missing object is watched too, so its creation is seen).
    async fn reference_watches(&self, managed: &Managed) -> Vec<(oxplane_runtime::watches::Watches, Watched)> {
        let mut watched = Vec::new();
        for reference in managed.object.pointer("/spec/references").and_then(Value::as_array).into_iter().flatten() {
            for named in ["dependsOn", "patchesFrom"].iter().filter_map(|f| reference.get(*f)) {
                let (type_meta, name, namespace) = reference_target(named, managed.namespace());
                let Ok(kind) = self.local.kind_of(&type_meta).await else { continue };
                let namespace = if kind.namespaced { namespace } else { None };
                watched.push((self.local.watches(), Watched { cluster: self.local.id, gvk: kind.gvk, namespace, name }));
            }
        }
        watched
    }

    /// Keeps the Object's realtime watches as `spec.watch` asks: its object on the target and
    /// what its references name, or nothing.
    async fn watch(&self, managed: &Managed, desired: Option<&Desired>) {
        let asked = self.realtime.enabled && managed.object.pointer("/spec/watch").and_then(Value::as_bool) == Some(true);
        let Some(key) = asked.then(|| ObjectKey::of(&managed.object)).flatten() else {
            self.realtime.forget(managed.uid());
            return;
        };
        let mut wanted = self.reference_watches(managed).await;
        if let Some(desired) = desired {
            let on_target = Watched { cluster: self.target.id, gvk: desired.kind.gvk.clone(), namespace: desired.namespace.clone(), name: desired.name.clone() };
            wanted.push((self.target.watches(), on_target));
        }
        self.realtime.ensure(&key, managed.uid(), wanted);
    }

    /// Reads an object a reference names in the control plane.
    async fn referenced(&self, reference: &Value, own_namespace: Option<&str>) -> Result<Value, ExternalError> {
        let (type_meta, name, namespace) = reference_target(reference, own_namespace);
        let kind = self.local.kind_of(&type_meta).await?;
        let namespace = if kind.namespaced { namespace } else { None };
        let found = self.local.kube.get(&kind, namespace.as_deref(), &name).await.map_err(|e| self.local.error("cannot resolve references", &e))?;
        found.ok_or_else(|| ExternalError::definite(format!("cannot resolve references: {} {name} not found", kind.gvk.kind)))
    }

    async fn desired(&self, managed: &Managed, resolve_references: bool) -> Result<Desired, ExternalError> {
        let mut manifest = managed.object.pointer("/spec/forProvider/manifest").cloned().unwrap_or(Value::Null);
        if !manifest.is_object() {
            return Err(ExternalError::definite("spec.forProvider.manifest must be an object"));
        }
        if resolve_references {
            for reference in managed.object.pointer("/spec/references").and_then(Value::as_array).into_iter().flatten() {
                if let Some(depends_on) = reference.get("dependsOn") {
                    self.referenced(depends_on, managed.namespace()).await?;
                }
                if let Some(patches_from) = reference.get("patchesFrom") {
                    let source = self.referenced(patches_from, managed.namespace()).await?;
                    let from = patches_from.get("fieldPath").and_then(Value::as_str).unwrap_or_default();
                    let to = reference.get("toFieldPath").and_then(Value::as_str).unwrap_or(from);
                    let value = fieldpath::get_value(&source, from).map_err(|e| ExternalError::definite(format!("cannot resolve references: {from}: {e}")))?.clone();
                    fieldpath::set_value(&mut manifest, to, value).map_err(|e| ExternalError::definite(format!("cannot patch the manifest at {to}: {e}")))?;
                }
            }
        }
        if object::name(&manifest).is_none_or(str::is_empty) {
            manifest["metadata"]["name"] = json!(managed.name());
        }
        let kind = self.target.kind_of(&manifest).await?;
        let namespace = if kind.namespaced {
            let ns = object::namespace(&manifest).filter(|n| !n.is_empty()).or(managed.namespace()).unwrap_or("default").to_string();
            manifest["metadata"]["namespace"] = json!(ns);
            Some(ns)
        } else {
            None
        };
        let name = object::name(&manifest).unwrap_or_default().to_string();
        Ok(Desired { object: manifest, kind, namespace, name })
    }

    async fn connection_details(&self, managed: &Managed) -> Result<ConnectionDetails, ExternalError> {
        let mut details = ConnectionDetails::new();
        for detail in managed.object.pointer("/spec/connectionDetails").and_then(Value::as_array).into_iter().flatten() {
            let text = |f: &str| detail.get(f).and_then(Value::as_str).unwrap_or_default().to_string();
            let kind = self.target.kind_of(&json!({"apiVersion": text("apiVersion"), "kind": text("kind")})).await?;
            let namespace = kind.namespaced.then(|| text("namespace")).filter(|n| !n.is_empty());
            let found = self
                .target
                .kube
                .get(&kind, namespace.as_deref(), &text("name"))
                .await
                .map_err(|e| self.target.error("cannot read connection details", &e))?
                .ok_or_else(|| ExternalError::definite(format!("{}: connection details: {} {} not found", self.target.name, kind.gvk.kind, text("name"))))?;
            let path = text("fieldPath");
            let value = fieldpath::get_value(&found, &path).map_err(|e| ExternalError::definite(format!("connection details: {path}: {e}")))?;
            let mut bytes = match value {
                Value::String(s) => s.as_bytes().to_vec(),
                other => other.to_string().into_bytes(),
            };
            // Secret data is base64 in the API; the connection Secret holds the plain value.
            if kind.gvk.group.is_empty() && kind.gvk.kind == "Secret" && path.starts_with("data") {
                bytes = base64::engine::general_purpose::STANDARD.decode(&bytes).map_err(|e| ExternalError::definite(format!("connection details: {path}: {e}")))?;
            }
            let key = Some(text("toConnectionSecretKey")).filter(|k| !k.is_empty()).unwrap_or(path);
            details.insert(key, bytes);
        }
        Ok(details)
    }
}

/// A JSON value in CEL, integers as integers (as Kubernetes' unstructured objects hold them).
fn cel_value(value: &Value) -> cel::Value {
    match value {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => cel::Value::Int(i),
            (None, Some(u)) => cel::Value::UInt(u),
            _ => cel::Value::Float(n.as_f64().unwrap_or_default()),
        },
        Value::String(s) => cel::Value::String(s.clone().into()),
        Value::Array(items) => cel::Value::List(items.iter().map(cel_value).collect::<Vec<_>>().into()),
        Value::Object(map) => {
            let entries: HashMap<cel::objects::Key, cel::Value> = map.iter().map(|(k, v)| (cel::objects::Key::from(k.as_str()), cel_value(v))).collect();
            cel::Value::Map(entries.into())
        }
    }
}

/// Readiness by `spec.readiness.policy`.
pub fn readiness(readiness: &Value, observed: &Value) -> Condition {
    let conditions: Vec<&Value> = observed.pointer("/status/conditions").and_then(Value::as_array).map(|c| c.iter().collect()).unwrap_or_default();
    let is_true = |c: &&Value| c.get("status").and_then(Value::as_str) == Some("True");
    match readiness.get("policy").and_then(Value::as_str).unwrap_or("SuccessfulCreate") {
        "DeriveFromObject" => {
            if conditions.iter().any(|c| c.get("type").and_then(Value::as_str) == Some("Ready") && is_true(c)) {
                Condition::available()
            } else {
                Condition::unavailable().with_message("the object's Ready condition is not True")
            }
        }
        "AllTrue" => {
            if !conditions.is_empty() && conditions.iter().all(is_true) {
                Condition::available()
            } else {
                Condition::unavailable().with_message("not every condition of the object is True")
            }
        }
        "DeriveFromCelQuery" => {
            let query = readiness.get("celQuery").and_then(Value::as_str).unwrap_or_default();
            let mut context = cel::Context::default();
            context.add_variable_from_value("object", cel_value(observed));
            match oxplane_functions::builtin::cel_filter::evaluate(&context, query) {
                Ok(true) => Condition::available(),
                Ok(false) => Condition::unavailable().with_message(format!("celQuery {query:?} is false")),
                Err(error) => Condition::unavailable().with_message(format!("celQuery {query:?}: {error}")),
            }
        }
        _ => Condition::available(),
    }
}

/// The observed object without server bookkeeping nobody reads.
fn observed_manifest(observed: &Value) -> Value {
    let mut manifest = observed.clone();
    if let Some(metadata) = manifest.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("managedFields");
    }
    manifest
}

#[async_trait::async_trait]
impl ExternalClient for ObjectClient {
    async fn observe(&mut self, managed: &mut Managed) -> Result<ExternalObservation, ExternalError> {
        let deleting = object::is_deleting(&managed.object);
        // While deleting, references may be gone already: the manifest names the object.
        let desired = self.desired(managed, !deleting).await;
        self.watch(managed, desired.as_ref().ok()).await;
        let desired = desired?;
        let observed = self
            .target
            .kube
            .get(&desired.kind, desired.namespace.as_deref(), &desired.name)
            .await
            .map_err(|e| self.target.error(&format!("cannot get {}", desired.describe()), &e))?;
        let Some(observed) = observed else { return Ok(ExternalObservation::default()) };
        managed.set_at_provider(json!({"manifest": observed_manifest(&observed)}));
        if !deleting {
            let readiness_spec = managed.object.pointer("/spec/readiness").cloned().unwrap_or(Value::Null);
            managed.set_condition(readiness(&readiness_spec, &observed));
        }
        let connection_details = if deleting { ConnectionDetails::new() } else { self.connection_details(managed).await? };
        let up_to_date = contains(&observed, &desired.object);
        Ok(ExternalObservation {
            resource_exists: true,
            resource_up_to_date: up_to_date,
            connection_details,
            diff: if up_to_date { String::new() } else { format!("{} on {} differs from the manifest", desired.describe(), self.target.name) },
            ..Default::default()
        })
    }

    async fn create(&mut self, managed: &mut Managed) -> Result<ExternalCreation, ExternalError> {
        let desired = self.desired(managed, true).await?;
        self.target
            .kube
            .apply(&desired.kind, &desired.object, FIELD_MANAGER, true)
            .await
            .map_err(|e| self.target.error(&format!("cannot apply {}", desired.describe()), &e))?;
        Ok(ExternalCreation::default())
    }

    async fn update(&mut self, managed: &mut Managed) -> Result<ExternalUpdate, ExternalError> {
        let desired = self.desired(managed, true).await?;
        self.target
            .kube
            .apply(&desired.kind, &desired.object, FIELD_MANAGER, true)
            .await
            .map_err(|e| self.target.error(&format!("cannot apply {}", desired.describe()), &e))?;
        Ok(ExternalUpdate::default())
    }

    async fn delete(&mut self, managed: &mut Managed) -> Result<ExternalDelete, ExternalError> {
        let desired = self.desired(managed, false).await?;
        let policy = managed.object.pointer("/spec/forProvider/deletionPropagationPolicy").and_then(Value::as_str).unwrap_or("Background").to_string();
        let options = DeleteOptions { propagation: Some(policy), ..Default::default() };
        match self.target.kube.delete(&desired.kind, desired.namespace.as_deref(), &desired.name, &options).await {
            Ok(_) => Ok(ExternalDelete {}),
            Err(error) if error.is_not_found() => Ok(ExternalDelete {}),
            Err(error) => Err(self.target.error(&format!("cannot delete {}", desired.describe()), &error)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_policies() {
        let ready = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Other", "status": "False"}], "replicas": 2}});
        let is_available = |policy: Value| readiness(&policy, &ready).status == "True";
        assert!(is_available(json!({})));
        assert!(is_available(json!({"policy": "DeriveFromObject"})));
        assert!(!is_available(json!({"policy": "AllTrue"})));
        assert!(!readiness(&json!({"policy": "AllTrue"}), &json!({})).status.eq("True"), "AllTrue needs a condition");
        assert!(is_available(json!({"policy": "DeriveFromCelQuery", "celQuery": "object.status.replicas == 2"})));
        assert!(!is_available(json!({"policy": "DeriveFromCelQuery", "celQuery": "object.status.conditions.all(c, c.status == 'True')"})));
        let broken = readiness(&json!({"policy": "DeriveFromCelQuery", "celQuery": "object.status.replicas +"}), &ready);
        assert_eq!(broken.status, "False");
        assert!(broken.message.contains("celQuery"));
    }
}
