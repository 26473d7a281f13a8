//! Cross-resource references (`roleRef`, `databaseSelector`, ...): a field `x` of
//! `spec.forProvider` may instead be given as `xRef` (a name) or `xSelector` (labels, and
//! optionally "the same controller as me"); either resolves to the referenced managed
//! resource's external name. A namespaced resource refers within its own namespace.

use oxplane_runtime::client::Kube;
use oxplane_runtime::kinds::Kind;
use oxplane_runtime::managed::{ExternalError, Managed};
use oxplane_runtime::managed::annotations::EXTERNAL_NAME;
use oxplane_runtime::object;
use serde_json::Value;

/// One referencing field: `field` in `spec.forProvider`, referring to managed kind `kind`.
#[derive(Clone, Copy, Debug)]
pub struct Reference {
    /// The field holding the resolved value (`role`); `roleRef` and `roleSelector` go with it.
    pub field: &'static str,
    /// The referenced kind (`Role`).
    pub kind: &'static str,
    /// Its plural (`roles`).
    pub plural: &'static str,
}

/// `spec.forProvider` with every reference resolved (values set directly win) and the
/// names of the fields that were resolved.
pub async fn resolved_for_provider(kube: &Kube, managed: &Managed, references: &[Reference]) -> Result<(Value, Vec<&'static str>), ExternalError> {
    let mut for_provider = managed.for_provider();
    let mut filled = Vec::new();
    for reference in references {
        if for_provider.get(reference.field).and_then(Value::as_str).is_some_and(|v| !v.is_empty()) {
            continue;
        }
        if let Some(value) = resolve(kube, managed, &for_provider, reference).await? {
            for_provider[reference.field] = Value::String(value);
            filled.push(reference.field);
        }
    }
    Ok((for_provider, filled))
}

/// Writes resolved fields into `managed`'s `spec.forProvider` (saved like a late
/// initialization, so `kubectl get` shows what a reference resolved to). Whether any was
/// written.
pub fn record_resolved(managed: &mut Managed, resolved: &Value, fields: &[&'static str]) -> bool {
    let Some(spec) = managed.object.get_mut("spec").and_then(Value::as_object_mut) else { return false };
    let for_provider = spec.entry("forProvider").or_insert_with(|| Value::Object(Default::default()));
    for field in fields {
        for_provider[*field] = resolved.get(*field).cloned().unwrap_or(Value::Null);
    }
    !fields.is_empty()
}

async fn resolve(kube: &Kube, managed: &Managed, for_provider: &Value, reference: &Reference) -> Result<Option<String>, ExternalError> {
    let api_version = managed.object.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let namespace = managed.namespace();
    let kind = Kind::new(group, version, reference.kind, reference.plural, namespace.is_some());
    let field = reference.field;
    let external_name = |target: &Value| -> Result<String, ExternalError> {
        let name = object::name(target).unwrap_or_default();
        object::annotation(target, EXTERNAL_NAME)
            .filter(|n| !n.is_empty())
            .map(str::to_string)
            .ok_or_else(|| ExternalError::definite(format!("cannot resolve {field}Ref: referenced {} {name:?} has no external name yet", reference.kind)))
    };
    if let Some(name) = for_provider.pointer(&format!("/{field}Ref/name")).and_then(Value::as_str) {
        let target = kube
            .get(&kind, namespace, name)
            .await
            .map_err(|e| ExternalError::definite(format!("cannot resolve {field}Ref: {e}")))?
            .ok_or_else(|| ExternalError::definite(format!("cannot resolve {field}Ref: referenced {} {name:?} not found", reference.kind)))?;
        return external_name(&target).map(Some);
    }
    let Some(selector) = for_provider.get(format!("{field}Selector")) else { return Ok(None) };
    let labels: Vec<String> = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    let label_selector = labels.join(",");
    let candidates = kube
        .list(&kind, namespace, (!label_selector.is_empty()).then_some(label_selector.as_str()))
        .await
        .map_err(|e| ExternalError::definite(format!("cannot resolve {field}Selector: {e}")))?;
    let same_controller = selector.get("matchControllerRef").and_then(Value::as_bool).unwrap_or(false);
    let mine = object::controller_uid(&managed.object);
    let mut matching: Vec<&Value> = candidates.iter().filter(|c| !same_controller || (mine.is_some() && object::controller_uid(c) == mine)).collect();
    matching.sort_by_key(|c| object::name(c).unwrap_or_default().to_string());
    match matching.first() {
        Some(target) => external_name(target).map(Some),
        None => Err(ExternalError::definite(format!("cannot resolve {field}Selector: no {} matches", reference.kind))),
    }
}
