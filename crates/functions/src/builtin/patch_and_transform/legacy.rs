//! Legacy `mode: Resources` Compositions (Crossplane ≤ 1.20) as input to this function.
//!
//! Crossplane v2 dropped native patch-and-transform; its replacement is this function, and
//! Crossplane's own converter (`crossplane beta convert pipeline-composition`) shows how the
//! old fields map onto the new input. The same mapping is made here:
//! - templates without a name are named `resource-<index>` (their position in
//!   `spec.resources`, from 0), as the converter names them;
//! - a patch without a `type` is `FromCompositeFieldPath`;
//! - `policy.mergeOptions {keepMapValues, appendSlice}` becomes `policy.toFieldPath`
//!   (`MergeObjects`, `MergeObjectsAppendArrays`, `ForceMergeObjectsAppendArrays`,
//!   `ForceMergeObjects`);
//! - a transform without a `type` takes it from the field it sets (`math`, `string`), and
//!   `math`/`string` transforms without a `type` take theirs from the fields they set;
//! - a connection detail without a `type` takes it from the field it sets, and a
//!   `FromConnectionSecretKey` detail without a `name` is named after its key;
//! - `patchSets` and `environment.patches` carry over with their patches converted the same way.

use serde_json::{Map, Value, json};

/// Why a Composition spec cannot be converted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LegacyCompositionError {
    /// The Composition is a pipeline, not a legacy one.
    #[error("composition is not in Resources mode (spec.mode is {0:?})")]
    NotResourcesMode(String),
    /// A field does not have the shape a Composition gives it.
    #[error("invalid legacy composition: {field} must be {expected}")]
    Shape {
        /// The field, e.g. `spec.resources[2]`.
        field: String,
        /// What it must be, e.g. `an object`.
        expected: &'static str,
    },
}

/// The `pt.fn.crossplane.io/v1beta1` `Resources` input equivalent to a legacy Composition's
/// `spec` (see the module documentation for the mapping).
pub fn input_from_legacy_composition(spec: &Value) -> Result<Value, LegacyCompositionError> {
    let shape = |field: &str, expected| LegacyCompositionError::Shape { field: field.to_string(), expected };
    let spec = spec.as_object().ok_or_else(|| shape("spec", "an object"))?;
    match spec.get("mode") {
        None | Some(Value::Null) => {}
        Some(Value::String(mode)) if mode == "Resources" => {}
        Some(Value::String(mode)) => return Err(LegacyCompositionError::NotResourcesMode(mode.clone())),
        Some(_) => return Err(shape("spec.mode", "a string")),
    }

    let mut input = Map::new();
    input.insert("apiVersion".into(), json!("pt.fn.crossplane.io/v1beta1"));
    input.insert("kind".into(), json!("Resources"));

    if let Some(sets) = spec.get("patchSets").filter(|v| !v.is_null()) {
        let sets = sets.as_array().ok_or_else(|| shape("spec.patchSets", "a list"))?;
        let mut out = Vec::with_capacity(sets.len());
        for (i, set) in sets.iter().enumerate() {
            let field = format!("spec.patchSets[{i}]");
            let mut set = set.as_object().cloned().ok_or_else(|| shape(&field, "an object"))?;
            convert_patches(&mut set, &field)?;
            out.push(Value::Object(set));
        }
        input.insert("patchSets".into(), Value::Array(out));
    }

    if let Some(patches) = spec.get("environment").and_then(|e| e.get("patches")).filter(|v| !v.is_null()) {
        let mut holder = Map::new();
        holder.insert("patches".into(), patches.clone());
        convert_patches(&mut holder, "spec.environment")?;
        input.insert("environment".into(), Value::Object(holder));
    }

    let resources = match spec.get("resources") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items.clone(),
        Some(_) => return Err(shape("spec.resources", "a list")),
    };
    let mut out = Vec::with_capacity(resources.len());
    for (i, resource) in resources.into_iter().enumerate() {
        let field = format!("spec.resources[{i}]");
        let Value::Object(mut resource) = resource else {
            return Err(shape(&field, "an object"));
        };
        let named = resource.get("name").and_then(Value::as_str).is_some_and(|n| !n.is_empty());
        if !named {
            resource.insert("name".into(), Value::String(format!("resource-{i}")));
        }
        convert_patches(&mut resource, &field)?;
        if let Some(details) = resource.get_mut("connectionDetails").filter(|v| !v.is_null()) {
            let details = details
                .as_array_mut()
                .ok_or_else(|| shape(&format!("{field}.connectionDetails"), "a list"))?;
            for detail in details.iter_mut() {
                if let Value::Object(detail) = detail {
                    convert_connection_detail(detail);
                }
            }
        }
        out.push(Value::Object(resource));
    }
    input.insert("resources".into(), Value::Array(out));
    Ok(Value::Object(input))
}

/// Converts `holder.patches` in place.
fn convert_patches(holder: &mut Map<String, Value>, field: &str) -> Result<(), LegacyCompositionError> {
    let Some(patches) = holder.get_mut("patches").filter(|v| !v.is_null()) else {
        return Ok(());
    };
    let patches = patches.as_array_mut().ok_or_else(|| LegacyCompositionError::Shape {
        field: format!("{field}.patches"),
        expected: "a list",
    })?;
    for (i, patch) in patches.iter_mut().enumerate() {
        let Value::Object(patch) = patch else {
            return Err(LegacyCompositionError::Shape {
                field: format!("{field}.patches[{i}]"),
                expected: "an object",
            });
        };
        convert_patch(patch);
    }
    Ok(())
}

fn convert_patch(patch: &mut Map<String, Value>) {
    if !patch.get("type").is_some_and(Value::is_string) {
        patch.insert("type".into(), json!("FromCompositeFieldPath"));
    }
    if let Some(Value::Object(policy)) = patch.get_mut("policy")
        && let Some(options) = policy.remove("mergeOptions")
    {
        let flag = |name: &str| options.get(name).and_then(Value::as_bool).unwrap_or(false);
        if !options.is_null() {
            let to = match (flag("keepMapValues"), flag("appendSlice")) {
                (true, false) => "MergeObjects",
                (true, true) => "MergeObjectsAppendArrays",
                (false, true) => "ForceMergeObjectsAppendArrays",
                (false, false) => "ForceMergeObjects",
            };
            policy.insert("toFieldPath".into(), json!(to));
        }
    }
    if let Some(Value::Array(transforms)) = patch.get_mut("transforms") {
        for transform in transforms.iter_mut() {
            if let Value::Object(transform) = transform {
                convert_transform(transform);
            }
        }
    }
}

fn convert_transform(t: &mut Map<String, Value>) {
    let has = |t: &Map<String, Value>, key: &str| t.get(key).is_some_and(|v| !v.is_null());
    if !t.get("type").is_some_and(Value::is_string) {
        if has(t, "math") {
            t.insert("type".into(), json!("math"));
        }
        if has(t, "string") {
            t.insert("type".into(), json!("string"));
        }
    }
    let kind = t.get("type").and_then(Value::as_str).unwrap_or_default().to_string();
    match kind.as_str() {
        "math" => {
            if let Some(Value::Object(math)) = t.get_mut("math")
                && !math.get("type").is_some_and(Value::is_string)
            {
                let inferred = if has(math, "clampMin") {
                    Some("ClampMin")
                } else if has(math, "clampMax") {
                    Some("ClampMax")
                } else if has(math, "multiply") {
                    Some("Multiply")
                } else {
                    None
                };
                if let Some(inferred) = inferred {
                    math.insert("type".into(), json!(inferred));
                }
            }
        }
        "string" => {
            if let Some(Value::Object(s)) = t.get_mut("string")
                && !s.get("type").is_some_and(Value::is_string)
            {
                let inferred = if has(s, "fmt") {
                    Some("Format")
                } else if has(s, "convert") {
                    Some("Convert")
                } else if has(s, "regexp") {
                    Some("Regexp")
                } else {
                    None
                };
                if let Some(inferred) = inferred {
                    s.insert("type".into(), json!(inferred));
                }
            }
        }
        _ => {}
    }
}

fn convert_connection_detail(detail: &mut Map<String, Value>) {
    let has = |key: &str| detail.get(key).is_some_and(|v| !v.is_null());
    if !detail.get("type").is_some_and(Value::is_string) {
        let inferred = if has("value") {
            Some("FromValue")
        } else if has("fromFieldPath") {
            Some("FromFieldPath")
        } else if has("fromConnectionSecretKey") {
            Some("FromConnectionSecretKey")
        } else {
            None
        };
        if let Some(inferred) = inferred {
            detail.insert("type".into(), json!(inferred));
        }
    }
    let unnamed = detail.get("name").is_none_or(|n| n.as_str().is_none_or(str::is_empty));
    if unnamed
        && detail.get("type").and_then(Value::as_str) == Some("FromConnectionSecretKey")
        && let Some(key) = detail.get("fromConnectionSecretKey").cloned()
    {
        detail.insert("name".into(), key);
    }
}
