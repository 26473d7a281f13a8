//! Choosing a composite's Composition (enforced, then default, then by label selector, at
//! random among the compatible ones) and its CompositionRevision (the one named, under the
//! `Manual` policy; otherwise the newest the Composition controls, filtered by the revision
//! selector).
//!
//! An XR's `compositionSelector` and `compositionRevisionSelector` hold `matchLabels` only (the
//! XR schema Crossplane generates has nothing else), while the XRD's
//! `defaultCompositionRevisionSelector` is a full label selector. The default is copied into
//! an XR as its `matchLabels`; its `matchExpressions` are applied from the XRD for as long as
//! the XR's selector is still the one the XRD gave it (the same `matchLabels`).

use oxplane_machinery::selectors::LabelSelector;
use oxplane_runtime::Runtime;
use oxplane_runtime::kinds::Kind;
use oxplane_runtime::object;
use rand::seq::IndexedRandom;
use serde_json::{Value, json};

use super::shape::XrType;
use crate::compositions::{LABEL_COMPOSITION_NAME, composition_kind, revision_kind};

/// A change the selection made, with the events it is announced by.
pub struct Selected {
    /// The machinery fields to patch.
    pub patch: Value,
    /// `(reason, message)` of each Normal event.
    pub events: Vec<(&'static str, String)>,
}

/// The events of a `compositionRef` set by the XRD: its own, then the one Crossplane emits
/// whenever the reference changes.
fn chosen_by_xrd(why: &str, name: &str) -> Vec<(&'static str, String)> {
    vec![("CompositionSelection", why.to_string()), ("SelectComposition", format!("Successfully selected composition: {name}"))]
}

fn matches_labels(object: &Value, selector: Option<&Value>) -> bool {
    let Some(wanted) = selector.and_then(|s| s.get("matchLabels")).and_then(Value::as_object) else { return true };
    let labels = object::labels(object);
    wanted.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// The next composition selection step, if one applies: enforced, default, or by selector.
pub async fn composition(runtime: &Runtime, xr_type: &XrType, xr: &Value) -> Result<Option<Selected>, String> {
    let current = xr_type.name_of(xr, "compositionRef");
    if let Some(enforced) = &xr_type.enforced_composition {
        if current.as_deref() != Some(enforced.as_str()) {
            return Ok(Some(Selected {
                patch: json!({"compositionRef": {"name": enforced}}),
                events: chosen_by_xrd("Enforced composition has been selected", enforced),
            }));
        }
        return Ok(None);
    }
    if current.is_some() {
        return Ok(None);
    }
    let selector = xr_type.field(xr, "compositionSelector");
    if selector.is_none()
        && let Some(default) = &xr_type.default_composition
    {
        return Ok(Some(Selected {
            patch: json!({"compositionRef": {"name": default}}),
            events: chosen_by_xrd("Default composition has been selected", default),
        }));
    }
    let compositions = runtime.kube.list(&composition_kind(), None, None).await.map_err(|e| format!("cannot list Compositions: {e}"))?;
    let api_version = xr.get("apiVersion").cloned().unwrap_or(Value::Null);
    let kind = xr.get("kind").cloned().unwrap_or(Value::Null);
    let candidates: Vec<&Value> = compositions
        .iter()
        .filter(|c| matches_labels(c, selector))
        .filter(|c| c.pointer("/spec/compositeTypeRef/apiVersion") == Some(&api_version) && c.pointer("/spec/compositeTypeRef/kind") == Some(&kind))
        .collect();
    let Some(chosen) = candidates.choose(&mut rand::rng()).and_then(|c| object::name(c)) else {
        return Err("no compatible Compositions found".to_string());
    };
    Ok(Some(Selected {
        patch: json!({"compositionRef": {"name": chosen}}),
        events: vec![("SelectComposition", format!("Successfully selected composition: {chosen}"))],
    }))
}

/// The `matchLabels` of a selector (empty when it has none).
fn match_labels(selector: &Value) -> Value {
    selector.get("matchLabels").filter(|m| m.is_object()).cloned().unwrap_or_else(|| json!({}))
}

/// The default revision selector, when the composite has neither a revision reference nor a
/// selector and the XRD has a default: its `matchLabels`, all the XR's schema holds.
pub fn revision_selector_default(xr_type: &XrType, xr: &Value) -> Option<Selected> {
    let default = xr_type.default_revision_selector.as_ref()?;
    if xr_type.field(xr, "compositionRevisionSelector").is_some() || xr_type.field(xr, "compositionRevisionRef").is_some() {
        return None;
    }
    Some(Selected {
        patch: json!({"compositionRevisionSelector": {"matchLabels": match_labels(default)}}),
        events: vec![("CompositionSelection", "Default revision selector has been selected".to_string())],
    })
}

/// The selector revisions must match: the XR's own `matchLabels`, and, while that is the one
/// the XRD's default gave it, the default's `matchExpressions` as well.
fn revision_filter(xr_type: &XrType, selector: Option<&Value>) -> Result<LabelSelector, String> {
    let Some(selector) = selector else { return Ok(LabelSelector::everything()) };
    let own = json!({"matchLabels": match_labels(selector)});
    let full = match &xr_type.default_revision_selector {
        Some(default) if match_labels(default) == own["matchLabels"] => default,
        _ => &own,
    };
    LabelSelector::from_label_selector_json(full).map_err(|e| format!("invalid composition revision selector: {}", e.message()))
}

/// The revision to compose with, and the reference change it needs (if any).
pub async fn revision(runtime: &Runtime, xr_type: &XrType, xr: &Value, composition: &str) -> Result<(Value, Option<Selected>), String> {
    let kind: Kind = revision_kind();
    let current = xr_type.name_of(xr, "compositionRevisionRef");
    if xr_type.manual_updates(xr)
        && let Some(name) = &current
    {
        let revision = runtime
            .kube
            .get(&kind, None, name)
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("CompositionRevision {name:?} not found"))?;
        return Ok((revision, None));
    }
    let owner = runtime
        .kube
        .get(&composition_kind(), None, composition)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("Composition {composition:?} not found"))?;
    let owner_uid = object::uid(&owner).unwrap_or_default().to_string();
    let revisions = runtime
        .kube
        .list(&kind, None, Some(&format!("{LABEL_COMPOSITION_NAME}={composition}")))
        .await
        .map_err(|e| e.to_string())?;
    let selector = if xr_type.manual_updates(xr) { None } else { xr_type.field(xr, "compositionRevisionSelector") };
    let filter = revision_filter(xr_type, selector)?;
    let newest = revisions
        .into_iter()
        .filter(|r| object::controller_uid(r) == Some(owner_uid.as_str()))
        .filter(|r| filter.matches_object(r))
        .max_by_key(|r| r.pointer("/spec/revision").and_then(Value::as_i64).unwrap_or(0))
        .ok_or_else(|| "no compatible CompositionRevisions found".to_string())?;
    let name = object::name(&newest).unwrap_or_default().to_string();
    let change = (current.as_deref() != Some(name.as_str())).then(|| Selected {
        patch: json!({"compositionRevisionRef": {"name": name}}),
        events: vec![("SelectComposition", format!("Selected composition revision: {name}"))],
    });
    Ok((newest, change))
}
