//! function-environment-configs: input `environmentconfigs.fn.crossplane.io/v1beta1` `Input`.
//!
//! Builds the composition environment from `EnvironmentConfig` objects
//! (`apiextensions.crossplane.io/v1beta1`, cluster-scoped, a free-form top-level `data`) and
//! writes it to the context key [`ENVIRONMENT_KEY`], where function-patch-and-transform and
//! other functions read it. The function runs twice: first it asks for one requirement per
//! `spec.environmentConfigs` entry (key [`requirement_key`]: `environment-config-<index>`; a
//! `Reference` by name, a `Selector` by labels resolved from the observed composite or the
//! incoming environment); once the requirements are answered (`required_resources`, or the
//! deprecated `extra_resources`) it selects the configs and merges their `data`.
//!
//! Merge order, as the Go function does it: the configs' `data` in list order (later wins;
//! objects merge key by key, anything else is replaced), laid over the environment already in
//! the context, laid over `spec.defaultData`. The result gets `apiVersion:
//! internal.crossplane.io/v1alpha1`, `kind: Environment` unless it has either already.
//!
//! Resolution: a `Reference` that finds nothing fails the step unless `spec.policy.resolution`
//! is `Optional` (the policy applies to references only, as in the Go function). A `Single`
//! selector needs exactly one match; `Multiple` checks `minMatch`, sorts by `sortByFieldPath`
//! (default `metadata.name`) and keeps the first `maxMatch`. A selector whose labels all come
//! from missing `Optional` fields asks for nothing and contributes nothing. An entry's
//! `toFieldPath` puts its `data` under that path of the environment. The desired state passes
//! through unchanged; without `spec.environmentConfigs` the function does nothing at all.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::patch_and_transform::ENVIRONMENT_KEY;
use super::selection::{
    How, raw_input, respond,
    InputError, Mode, RawPolicy, RawRef, RawSelector, Resolution, SelectError, SelectorDialect, SourceType,
    answered, environment_object, fetched, incoming_environment, merge_maps, objects, observed_composite, parse_path,
    parse_ref_name, parse_resolution, parse_selector, parse_source_type, resolve_labels, select_multiple,
    set_context_key,
};
use crate::fieldpath::FieldPath;
use crate::golang::strconv::quote;
use crate::protocol::{
    Match, ResourceSelector, RunFunctionRequest, RunFunctionResponse,
};

/// The `apiVersion` of the `EnvironmentConfig` objects the function asks for.
pub const ENVIRONMENT_CONFIG_API_VERSION: &str = "apiextensions.crossplane.io/v1beta1";

/// The kind of the objects the function asks for.
pub const ENVIRONMENT_CONFIG_KIND: &str = "EnvironmentConfig";

/// The requirement key of the `spec.environmentConfigs` entry at `index`.
pub fn requirement_key(index: usize) -> String {
    format!("environment-config-{index}")
}

/// The input as written.
#[derive(Clone, Debug, Default, Deserialize)]
struct RawInput {
    #[serde(default)]
    spec: RawSpec,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawSpec {
    #[serde(default)]
    default_data: Option<Map<String, Value>>,
    #[serde(default)]
    environment_configs: Option<Vec<RawSource>>,
    #[serde(default)]
    policy: Option<RawPolicy>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawSource {
    #[serde(default, rename = "type")]
    source_type: Option<String>,
    #[serde(default, rename = "ref")]
    reference: Option<RawRef>,
    #[serde(default)]
    selector: Option<RawSelector>,
    #[serde(default)]
    to_field_path: Option<String>,
}

/// The checked input.
#[derive(Clone, Debug)]
struct Input {
    default_data: Option<Map<String, Value>>,
    sources: Vec<Source>,
    resolution: Resolution,
}

/// One `spec.environmentConfigs` entry.
#[derive(Clone, Debug)]
struct Source {
    key: String,
    how: How,
    to_field_path: Option<FieldPath>,
}

/// The input, checked; `None` when there are no `environmentConfigs` (nothing to do).
fn parse_input(input: Option<&Value>) -> Result<Option<Input>, String> {
    let Some(raw) = raw_input::<RawInput>(input)? else { return Ok(None) };
    let Some(entries) = raw.spec.environment_configs else { return Ok(None) };
    let resolution = parse_resolution(raw.spec.policy.as_ref(), "spec.policy").map_err(|e| e.to_string())?;
    let dialect = SelectorDialect { with_mode: true, environment_labels: true };
    let mut sources = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        let field = format!("spec.environmentConfigs[{i}]");
        let check = || -> Result<Source, InputError> {
            let how = match parse_source_type(entry.source_type.as_deref(), &field)? {
                SourceType::Reference => How::Reference(parse_ref_name(entry.reference.as_ref(), &field)?),
                SourceType::Selector => How::Selector(parse_selector(entry.selector.as_ref(), &field, dialect)?),
            };
            let to_field_path = match entry.to_field_path.as_deref() {
                None | Some("") => None,
                Some(path) => Some(parse_path(path, &format!("{field}.toFieldPath"))?),
            };
            Ok(Source { key: requirement_key(i), how, to_field_path })
        };
        sources.push(check().map_err(|e| e.to_string())?);
    }
    Ok(Some(Input { default_data: raw.spec.default_data, sources, resolution }))
}

/// Runs the function.
pub fn run(request: &RunFunctionRequest) -> RunFunctionResponse {
    respond(request, parse_input, compose)
}

/// Asks for the configs; once they are there, writes the environment into the context.
fn compose(request: &RunFunctionRequest, input: &Input, rsp: &mut RunFunctionResponse) -> Result<(), String> {
    let incoming = incoming_environment(request)?;
    let composite = observed_composite(request);
    let environment = Value::Object(incoming.clone().unwrap_or_default());
    let requirements =
        requirements(input, &composite, &environment).map_err(|e| format!("cannot build requirements: {e}"))?;
    // The requirements are answered again on every call, so that Crossplane sees them stable.
    rsp.requirements.resources = requirements.clone();
    if !answered(request, &requirements) {
        return Ok(());
    }
    let configs =
        select(request, input, &requirements).map_err(|e| format!("cannot get selected environment configs: {e}"))?;
    let mut data = merge_configs(&configs).map_err(|e| format!("cannot merge environment data: {e}"))?;
    if let Some(incoming) = incoming {
        data = merge_maps(incoming, data);
    }
    if let Some(default_data) = &input.default_data {
        data = merge_maps(default_data.clone(), data);
    }
    set_context_key(rsp, ENVIRONMENT_KEY, environment_object(data));
    Ok(())
}

/// One requirement per entry; a selector whose labels all resolved to nothing is left out.
fn requirements(
    input: &Input,
    composite: &Value,
    environment: &Value,
) -> Result<BTreeMap<String, ResourceSelector>, String> {
    let mut out = BTreeMap::new();
    for source in &input.sources {
        let matching = match &source.how {
            How::Reference(name) => Match::Name(name.clone()),
            How::Selector(selector) => {
                let resolved = resolve_labels(&selector.matchers, composite, environment).map_err(|e| {
                    format!("cannot get value from {} field path {}: {}", e.origin, quote(&e.path, false), e.error)
                })?;
                if resolved.labels.is_empty() {
                    continue;
                }
                Match::Labels(resolved.labels)
            }
        };
        out.insert(
            source.key.clone(),
            ResourceSelector {
                api_version: ENVIRONMENT_CONFIG_API_VERSION.to_string(),
                kind: ENVIRONMENT_CONFIG_KIND.to_string(),
                matching,
                namespace: None,
            },
        );
    }
    Ok(out)
}

/// A selected config and where its data goes.
struct Selected<'a> {
    config: Value,
    to_field_path: Option<&'a FieldPath>,
}

/// The configs each entry selects, in entry order.
fn select<'a>(
    request: &RunFunctionRequest,
    input: &'a Input,
    requirements: &BTreeMap<String, ResourceSelector>,
) -> Result<Vec<Selected<'a>>, String> {
    let mut out = Vec::new();
    for source in &input.sources {
        // An entry that asked for nothing selects nothing.
        if !requirements.contains_key(&source.key) {
            continue;
        }
        let items = objects(fetched(request, &source.key).unwrap_or_default());
        let key = quote(&source.key, false);
        let chosen = match &source.how {
            How::Reference(name) => {
                let by_reference = |e: String| {
                    format!("cannot process environment config {} by reference, {key}: {e}", quote(name, false))
                };
                match items.len() {
                    0 if input.resolution == Resolution::Optional => continue,
                    0 => {
                        return Err(by_reference(format!(
                            "Required environment config {} not found",
                            quote(name, false)
                        )));
                    }
                    1 => items,
                    n => {
                        return Err(by_reference(format!(
                            "expected exactly one required resource {}, got {n}",
                            quote(name, false)
                        )));
                    }
                }
            }
            How::Selector(selector) => {
                let by_selector = |e: String| format!("cannot process environment config {key} by selector: {e}");
                match selector.mode {
                    Mode::Single if items.len() == 1 => items,
                    Mode::Single => {
                        return Err(by_selector(format!(
                            "expected exactly one required resource, got {}",
                            items.len()
                        )));
                    }
                    Mode::Multiple => select_multiple(items, selector).map_err(|e| {
                        by_selector(match e {
                            SelectError::TooFew { min, got } => {
                                format!("expected at least {min} required resources, got {got}")
                            }
                            SelectError::Sort(e) => e,
                        })
                    })?,
                }
            }
        };
        out.extend(chosen.into_iter().map(|config| Selected { config, to_field_path: source.to_field_path.as_ref() }));
    }
    Ok(out)
}

/// The configs' `data`, merged in order. A config without `data` contributes nothing.
fn merge_configs(configs: &[Selected<'_>]) -> Result<Map<String, Value>, String> {
    let mut merged = Map::new();
    for selected in configs {
        let name = selected.config.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
        let data = selected.config.get("data").cloned().unwrap_or(Value::Null);
        let data = match selected.to_field_path {
            Some(path) => {
                let mut wrapped = Value::Object(Map::new());
                path.set(&mut wrapped, data).map_err(|e| {
                    format!(
                        "cannot get data from environment config {name} into path {}: {e}",
                        quote(&path.to_string(), false)
                    )
                })?;
                wrapped
            }
            None => data,
        };
        match data {
            Value::Object(data) => merged = merge_maps(merged, data),
            Value::Null => {}
            _ => {
                return Err(format!(
                    "cannot get data from environment config {}: data: not an object",
                    quote(name, false)
                ));
            }
        }
    }
    Ok(merged)
}

#[cfg(test)]
mod tests;
