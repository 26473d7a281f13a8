//! function-extra-resources: input `extra-resources.fn.crossplane.io/v1beta1` `Input`.
//!
//! Fetches arbitrary cluster objects for later steps (function-go-templating and the like).
//! Each `spec.extraResources` entry names a kind (`apiVersion`, `kind`, optionally a
//! `namespace`) and selects by `Reference` (`ref.name`) or `Selector` (`matchLabels`,
//! `minMatch`, `maxMatch`, `sortByFieldPath`); the function asks for one requirement per
//! entry and, once the requirements are answered (`required_resources`, or the deprecated
//! `extra_resources`), writes what they found into the context.
//!
//! Both input layouts the Go function has had are understood:
//! - the original one: each entry has `into`, a key; the requirement is named after it and
//!   the objects go, as a list, under `context["apiextensions.crossplane.io/extra-resources"][into]`.
//! - the current one: each entry has `toFieldPath` (a field path) and optionally
//!   `fromFieldPath` (keep that field of each object instead of the whole object); the
//!   requirement is named `resources-<index>`; `spec.into` picks the destination:
//!   `type: Context` (default) writes `{<toFieldPath>: [...]}` to the context key
//!   `spec.into.contextKey` (default [`EXTRA_RESOURCES_KEY`]); `type: Environment` merges each
//!   object (or, with `toFieldPath`, `{<toFieldPath>: object}`) into the environment the step
//!   received and writes it to [`ENVIRONMENT_KEY`].
//!
//! A `Reference` that finds nothing fails the step unless `spec.policy.resolution` is
//! `Optional`, in which case the entry is left out. A `Selector` keeps every match (at least
//! `minMatch`, sorted by `sortByFieldPath`, default `metadata.name`, the first `maxMatch`);
//! no match yields an empty list. A selector with no `matchLabels` matches every object of
//! the kind; one whose labels all come from missing `Optional` fields asks for nothing and is
//! left out. The desired state passes through unchanged.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::patch_and_transform::ENVIRONMENT_KEY;
use super::selection::{
    How, raw_input, respond,
    InputError, RawPolicy, RawRef, RawSelector, Resolution, SelectError, SelectorDialect, SourceType,
    answered, environment_object, fetched, incoming_environment, merge_maps, objects, observed_composite, parse_path,
    parse_ref_name, parse_resolution, parse_selector, parse_source_type, resolve_labels, select_multiple,
    set_context_key,
};
use crate::fieldpath::{FieldPath, Segment};
use crate::golang::strconv::quote;
use crate::protocol::{
    Match, ResourceSelector, RunFunctionRequest, RunFunctionResponse,
};

/// The context key the fetched objects go to when the input names none.
pub const EXTRA_RESOURCES_KEY: &str = "apiextensions.crossplane.io/extra-resources";

/// The requirement key of the `spec.extraResources` entry at `index` when it has no `into`.
pub fn requirement_key(index: usize) -> String {
    format!("resources-{index}")
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
    extra_resources: Option<Vec<RawSource>>,
    #[serde(default)]
    into: Option<RawInto>,
    #[serde(default)]
    policy: Option<RawPolicy>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawInto {
    #[serde(default, rename = "type")]
    into_type: Option<String>,
    #[serde(default)]
    context_key: Option<String>,
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
    kind: Option<String>,
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    into: Option<String>,
    #[serde(default)]
    to_field_path: Option<String>,
    #[serde(default)]
    from_field_path: Option<String>,
}

/// Where the results go.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Destination {
    /// A context key, holding an object.
    Context(String),
    /// The environment.
    Environment,
}

/// The checked input.
#[derive(Clone, Debug)]
struct Input {
    sources: Vec<Source>,
    destination: Destination,
    resolution: Resolution,
}

/// One `spec.extraResources` entry.
#[derive(Clone, Debug)]
struct Source {
    key: String,
    api_version: String,
    kind: String,
    namespace: Option<String>,
    how: How,
    /// `toFieldPath`, or the legacy `into` as a single field.
    to: Option<FieldPath>,
    from_field_path: Option<FieldPath>,
}

/// The input, checked; `None` when there are no `extraResources` (nothing to do).
fn parse_input(input: Option<&Value>) -> Result<Option<Input>, String> {
    let Some(raw) = raw_input::<RawInput>(input)? else { return Ok(None) };
    let Some(entries) = raw.spec.extra_resources else { return Ok(None) };
    let resolution = parse_resolution(raw.spec.policy.as_ref(), "spec.policy").map_err(|e| e.to_string())?;
    let into = raw.spec.into.unwrap_or_default();
    let destination = match into.into_type.as_deref() {
        None | Some("" | "Context") => Destination::Context(
            into.context_key.filter(|k| !k.is_empty()).unwrap_or_else(|| EXTRA_RESOURCES_KEY.to_string()),
        ),
        Some("Environment") => Destination::Environment,
        Some(other) => {
            return Err(InputError::invalid("spec.into.type", other, "supported values: \"Context\", \"Environment\"")
                .to_string());
        }
    };
    let mut sources: Vec<Source> = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        let source = parse_source(entry, i, &destination).map_err(|e| e.to_string())?;
        if sources.iter().any(|s| s.key == source.key) {
            let field = format!("spec.extraResources[{i}].into");
            return Err(InputError::invalid(&field, &source.key, "another entry already uses this key").to_string());
        }
        sources.push(source);
    }
    Ok(Some(Input { sources, destination, resolution }))
}

fn parse_source(entry: &RawSource, index: usize, destination: &Destination) -> Result<Source, InputError> {
    let field = format!("spec.extraResources[{index}]");
    let non_empty = |value: &Option<String>| value.as_deref().filter(|v| !v.is_empty()).map(str::to_string);
    let api_version = non_empty(&entry.api_version).ok_or_else(|| {
        InputError::required(&format!("{field}.apiVersion"), "the apiVersion of the objects to fetch")
    })?;
    let kind = non_empty(&entry.kind)
        .ok_or_else(|| InputError::required(&format!("{field}.kind"), "the kind of the objects to fetch"))?;
    let dialect = SelectorDialect { with_mode: false, environment_labels: false };
    let how = match parse_source_type(entry.source_type.as_deref(), &field)? {
        SourceType::Reference => How::Reference(parse_ref_name(entry.reference.as_ref(), &field)?),
        SourceType::Selector => How::Selector(parse_selector(entry.selector.as_ref(), &field, dialect)?),
    };
    let into = non_empty(&entry.into);
    let to = match (non_empty(&entry.to_field_path), &into) {
        (Some(path), _) => Some(parse_path(&path, &format!("{field}.toFieldPath"))?),
        (None, Some(into)) => Some(FieldPath::from_segments(vec![Segment::Field(into.clone())])),
        (None, None) => None,
    };
    if to.is_none() && matches!(destination, Destination::Context(_)) {
        return Err(InputError::required(
            &format!("{field}.toFieldPath"),
            "toFieldPath (or into) must be set when spec.into.type is Context",
        ));
    }
    let from_field_path = match entry.from_field_path.as_deref() {
        None => None,
        Some("") => {
            return Err(InputError::invalid(
                &format!("{field}.fromFieldPath"),
                "",
                "fromFieldPath cannot be empty, omit the field to get the whole object",
            ));
        }
        Some(path) => Some(parse_path(path, &format!("{field}.fromFieldPath"))?),
    };
    Ok(Source {
        key: into.unwrap_or_else(|| requirement_key(index)),
        api_version,
        kind,
        namespace: non_empty(&entry.namespace),
        how,
        to,
        from_field_path,
    })
}

/// Runs the function.
pub fn run(request: &RunFunctionRequest) -> RunFunctionResponse {
    respond(request, parse_input, fetch)
}

/// Asks for the objects; once they are there, writes them into the context.
fn fetch(request: &RunFunctionRequest, input: &Input, rsp: &mut RunFunctionResponse) -> Result<(), String> {
    let composite = observed_composite(request);
    let requirements =
        requirements(input, &composite).map_err(|e| format!("could not build extra resource requirements: {e}"))?;
    // The requirements are answered again on every call, so that Crossplane sees them stable.
    rsp.requirements.resources = requirements.clone();
    if !answered(request, &requirements) {
        return Ok(());
    }
    let results =
        select(request, input, &requirements).map_err(|e| format!("verifying and sorting extra resources: {e}"))?;
    match &input.destination {
        Destination::Context(key) => {
            let mut out = Value::Object(Map::new());
            for (source, values) in results {
                let Some(path) = &source.to else { continue };
                path.set(&mut out, Value::Array(values))
                    .map_err(|e| format!("cannot set nested field path {}: {e}", quote(&path.to_string(), false)))?;
            }
            set_context_key(rsp, key, out);
        }
        Destination::Environment => {
            let mut merged = Map::new();
            for (source, values) in results {
                for value in values {
                    let value = match &source.to {
                        Some(path) => {
                            let mut wrapped = Value::Object(Map::new());
                            path.set(&mut wrapped, value).map_err(|e| {
                                format!("cannot set nested field path {}: {e}", quote(&path.to_string(), false))
                            })?;
                            wrapped
                        }
                        None => value,
                    };
                    let Value::Object(value) = value else {
                        return Err("must set toFieldPath when extracted value is not an object".to_string());
                    };
                    merged = merge_maps(merged, value);
                }
            }
            if let Some(incoming) = incoming_environment(request)? {
                merged = merge_maps(incoming, merged);
            }
            set_context_key(rsp, ENVIRONMENT_KEY, environment_object(merged));
        }
    }
    Ok(())
}

/// One requirement per entry; a selector whose labels all came from missing `Optional`
/// fields is left out.
fn requirements(input: &Input, composite: &Value) -> Result<BTreeMap<String, ResourceSelector>, String> {
    let no_environment = Value::Object(Map::new());
    let mut out = BTreeMap::new();
    for source in &input.sources {
        let matching = match &source.how {
            How::Reference(name) => Match::Name(name.clone()),
            How::Selector(selector) => {
                let resolved = resolve_labels(&selector.matchers, composite, &no_environment)
                    .map_err(|e| format!("cannot get value from field path {}: {}", quote(&e.path, false), e.error))?;
                if resolved.labels.is_empty() && resolved.missing_optional {
                    continue;
                }
                Match::Labels(resolved.labels)
            }
        };
        out.insert(
            source.key.clone(),
            ResourceSelector {
                api_version: source.api_version.clone(),
                kind: source.kind.clone(),
                matching,
                namespace: source.namespace.clone(),
            },
        );
    }
    Ok(out)
}

/// What each entry selected (the objects, or their `fromFieldPath` values), in entry order.
fn select<'a>(
    request: &RunFunctionRequest,
    input: &'a Input,
    requirements: &BTreeMap<String, ResourceSelector>,
) -> Result<Vec<(&'a Source, Vec<Value>)>, String> {
    let mut out = Vec::new();
    for source in &input.sources {
        // An entry that asked for nothing selects nothing.
        if !requirements.contains_key(&source.key) {
            continue;
        }
        let items = objects(fetched(request, &source.key).unwrap_or_default());
        let key = quote(&source.key, false);
        let chosen = match &source.how {
            How::Reference(_) => match items.len() {
                0 if input.resolution == Resolution::Optional => continue,
                0 => return Err(format!("Required extra resource {key} not found")),
                1 => items,
                n => return Err(format!("expected exactly one extra resource {key}, got {n}")),
            },
            How::Selector(selector) => select_multiple(items, selector).map_err(|e| match e {
                SelectError::TooFew { min, got } => format!("expected at least {min} extra resources {key}, got {got}"),
                SelectError::Sort(e) => e,
            })?,
        };
        let values = match &source.from_field_path {
            None => chosen,
            Some(path) => {
                chosen.iter().map(|o| path.get(o).cloned().map_err(|e| e.to_string())).collect::<Result<_, _>>()?
            }
        };
        out.push((source, values));
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
