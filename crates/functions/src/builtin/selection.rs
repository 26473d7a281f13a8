//! What function-environment-configs and function-extra-resources share: selecting cluster
//! objects by name or by labels through `requirements.resources`, and merging objects.
//!
//! Both functions take a list of sources, each a `Reference` (`ref.name`) or a `Selector`
//! (`matchLabels`, `minMatch`, `maxMatch`, `sortByFieldPath`), ask Crossplane for them in
//! their response's requirements, and work on what comes back when they are called again.
//! This module owns the input types they have in common (checked into typed values with
//! Kubernetes-style field messages), label values drawn from the observed composite or the
//! incoming environment, the "has every requirement been answered" test, sorting by a field
//! path with the rules of the Go functions (one JSON type per list, absent values sort as the
//! type's zero value), and the deep merge of objects both use for the environment.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use super::patch_and_transform::ENVIRONMENT_KEY;
use crate::fieldpath::{FieldPath, FieldPathError};
use crate::golang::strconv::quote;
use crate::protocol::{DEFAULT_TTL, FnResult, Resource, ResourceSelector, RunFunctionRequest, RunFunctionResponse, response_to};

/// The `apiVersion` an environment gets when it has neither an `apiVersion` nor a `kind`.
pub(crate) const ENVIRONMENT_API_VERSION: &str = "internal.crossplane.io/v1alpha1";

/// The `kind` an environment gets when it has neither an `apiVersion` nor a `kind`.
pub(crate) const ENVIRONMENT_KIND: &str = "Environment";

/// The field path selected objects are sorted by when the input names none.
pub(crate) const DEFAULT_SORT_BY_FIELD_PATH: &str = "metadata.name";

/// A problem with the function's input; displays as `invalid Function input: ...`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct InputError(String);

impl InputError {
    /// A field that must be set and is not.
    pub(crate) fn required(field: &str, detail: &str) -> InputError {
        InputError(format!("{field}: Required value: {detail}"))
    }

    /// A field whose value is not allowed.
    pub(crate) fn invalid(field: &str, value: &str, detail: &str) -> InputError {
        InputError(format!("{field}: Invalid value: {}: {detail}", quote(value, false)))
    }
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid Function input: {}", self.0)
    }
}

/// `ref` of a source, as written.
#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct RawRef {
    /// The name of the object.
    #[serde(default)]
    pub(crate) name: Option<String>,
}

/// `policy` of the input, as written.
#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct RawPolicy {
    /// `Required` (the default) or `Optional`.
    #[serde(default)]
    pub(crate) resolution: Option<String>,
}

/// `selector` of a source, as written.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RawSelector {
    /// `Single` (the default) or `Multiple` (function-environment-configs only).
    #[serde(default)]
    pub(crate) mode: Option<String>,
    /// At most this many objects are kept, after sorting.
    #[serde(default, deserialize_with = "count")]
    pub(crate) max_match: Option<u64>,
    /// At least this many objects must match.
    #[serde(default, deserialize_with = "count")]
    pub(crate) min_match: Option<u64>,
    /// The field path objects are sorted by.
    #[serde(default)]
    pub(crate) sort_by_field_path: Option<String>,
    /// Where each label value comes from.
    #[serde(default)]
    pub(crate) match_labels: Option<Vec<RawLabelMatcher>>,
}

/// One `matchLabels` entry, as written.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RawLabelMatcher {
    /// `FromCompositeFieldPath` (the default), `FromEnvironmentFieldPath` or `Value`.
    #[serde(default, rename = "type")]
    pub(crate) matcher_type: Option<String>,
    /// The label's key.
    #[serde(default)]
    pub(crate) key: Option<String>,
    /// Where the label's value is read from.
    #[serde(default)]
    pub(crate) value_from_field_path: Option<String>,
    /// `Required` (the default) or `Optional`.
    #[serde(default)]
    pub(crate) from_field_path_policy: Option<String>,
    /// A literal value.
    #[serde(default)]
    pub(crate) value: Option<String>,
}

/// A `minMatch`/`maxMatch` count: a non-negative integer (a whole float is accepted, since a
/// protobuf `Struct` carries every number as a float).
fn count<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    match Option::<Value>::deserialize(deserializer)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => {
            if let Some(u) = n.as_u64() {
                return Ok(Some(u));
            }
            match n.as_f64() {
                // The cast saturates; counts that large all mean "no limit".
                Some(f) if f >= 0.0 && f.fract() == 0.0 => Ok(Some(f as u64)),
                _ => Err(D::Error::custom(format!("invalid count {n}: must be a non-negative integer"))),
            }
        }
        Some(other) => Err(D::Error::custom(format!("invalid count {other}: must be a non-negative integer"))),
    }
}

/// Whether a missing object is an error (`Required`) or skipped (`Optional`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Resolution {
    /// A missing object fails the step.
    Required,
    /// A missing object is skipped.
    Optional,
}

/// The resolution policy of `policy`, `Required` when unset.
pub(crate) fn parse_resolution(policy: Option<&RawPolicy>, field: &str) -> Result<Resolution, InputError> {
    match policy.and_then(|p| p.resolution.as_deref()) {
        None | Some("" | "Required") => Ok(Resolution::Required),
        Some("Optional") => Ok(Resolution::Optional),
        Some(other) => Err(InputError::invalid(
            &format!("{field}.resolution"),
            other,
            "supported values: \"Required\", \"Optional\"",
        )),
    }
}

/// How a source selects: by name or by labels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SourceType {
    /// `Reference`: one object by name.
    Reference,
    /// `Selector`: objects by labels.
    Selector,
}

/// The `type` of a source, `Reference` when unset.
pub(crate) fn parse_source_type(value: Option<&str>, field: &str) -> Result<SourceType, InputError> {
    match value {
        None | Some("" | "Reference") => Ok(SourceType::Reference),
        Some("Selector") => Ok(SourceType::Selector),
        Some(other) => {
            Err(InputError::invalid(&format!("{field}.type"), other, "supported values: \"Reference\", \"Selector\""))
        }
    }
}

/// The `ref.name` of a `Reference` source.
pub(crate) fn parse_ref_name(reference: Option<&RawRef>, field: &str) -> Result<String, InputError> {
    match reference.and_then(|r| r.name.as_deref()) {
        Some(name) if !name.is_empty() => Ok(name.to_string()),
        _ => Err(InputError::required(&format!("{field}.ref.name"), "a Reference source needs the name of an object")),
    }
}

/// How many objects a `Selector` keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Exactly one object must match.
    Single,
    /// Any number, sorted, within `minMatch` and `maxMatch`.
    Multiple,
}

/// Where a label's value comes from.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum LabelSource {
    /// A literal value.
    Value(String),
    /// A field of the observed composite resource.
    FromComposite {
        /// The field.
        path: FieldPath,
        /// Whether a missing field leaves the label out instead of failing.
        optional: bool,
    },
    /// A field of the environment the step received.
    FromEnvironment {
        /// The field.
        path: FieldPath,
        /// Whether a missing field leaves the label out instead of failing.
        optional: bool,
    },
}

/// One label a selector matches.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct LabelMatcher {
    /// The label's key.
    pub(crate) key: String,
    /// Where its value comes from.
    pub(crate) source: LabelSource,
}

/// A checked `selector`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Selector {
    /// `Single` or `Multiple` (always `Multiple` for function-extra-resources).
    pub(crate) mode: Mode,
    /// At least this many must match (`Multiple` only).
    pub(crate) min_match: Option<u64>,
    /// At most this many are kept (`Multiple` only).
    pub(crate) max_match: Option<u64>,
    /// What the matches are sorted by (`Multiple` only).
    pub(crate) sort_by: FieldPath,
    /// The labels to match.
    pub(crate) matchers: Vec<LabelMatcher>,
}

/// What a selector of one of the two functions may contain.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SelectorDialect {
    /// Whether `mode` is read (otherwise every selector is `Multiple`).
    pub(crate) with_mode: bool,
    /// Whether `FromEnvironmentFieldPath` label matchers are allowed.
    pub(crate) environment_labels: bool,
}

/// Checks a source's `selector`.
pub(crate) fn parse_selector(
    raw: Option<&RawSelector>,
    field: &str,
    dialect: SelectorDialect,
) -> Result<Selector, InputError> {
    let field = format!("{field}.selector");
    let Some(raw) = raw else {
        return Err(InputError::required(&field, "a Selector source needs a selector"));
    };
    let mode = if dialect.with_mode {
        match raw.mode.as_deref() {
            None | Some("" | "Single") => Mode::Single,
            Some("Multiple") => Mode::Multiple,
            Some(other) => {
                return Err(InputError::invalid(
                    &format!("{field}.mode"),
                    other,
                    "supported values: \"Single\", \"Multiple\"",
                ));
            }
        }
    } else {
        Mode::Multiple
    };
    let sort_by_text =
        raw.sort_by_field_path.as_deref().filter(|p| !p.is_empty()).unwrap_or(DEFAULT_SORT_BY_FIELD_PATH);
    let sort_by = parse_path(sort_by_text, &format!("{field}.sortByFieldPath"))?;
    let mut matchers = Vec::new();
    for (i, m) in raw.match_labels.iter().flatten().enumerate() {
        matchers.push(parse_matcher(m, &format!("{field}.matchLabels[{i}]"), dialect)?);
    }
    Ok(Selector { mode, min_match: raw.min_match, max_match: raw.max_match, sort_by, matchers })
}

fn parse_matcher(raw: &RawLabelMatcher, field: &str, dialect: SelectorDialect) -> Result<LabelMatcher, InputError> {
    let key = match raw.key.as_deref() {
        Some(key) if !key.is_empty() => key.to_string(),
        _ => return Err(InputError::required(&format!("{field}.key"), "a label matcher needs a key")),
    };
    let optional = match raw.from_field_path_policy.as_deref() {
        None | Some("" | "Required") => false,
        Some("Optional") => true,
        Some(other) => {
            return Err(InputError::invalid(
                &format!("{field}.fromFieldPathPolicy"),
                other,
                "supported values: \"Required\", \"Optional\"",
            ));
        }
    };
    let from_path = |kind: &str| -> Result<FieldPath, InputError> {
        let path_field = format!("{field}.valueFromFieldPath");
        match raw.value_from_field_path.as_deref() {
            Some(path) if !path.is_empty() => parse_path(path, &path_field),
            _ => Err(InputError::required(&path_field, &format!("valueFromFieldPath must be set for type {kind}"))),
        }
    };
    let source = match raw.matcher_type.as_deref() {
        None | Some("" | "FromCompositeFieldPath") => {
            LabelSource::FromComposite { path: from_path("FromCompositeFieldPath")?, optional }
        }
        Some("FromEnvironmentFieldPath") if dialect.environment_labels => {
            LabelSource::FromEnvironment { path: from_path("FromEnvironmentFieldPath")?, optional }
        }
        Some("Value") => match &raw.value {
            Some(value) => LabelSource::Value(value.clone()),
            None => return Err(InputError::required(&format!("{field}.value"), "value must be set for type Value")),
        },
        Some(other) => {
            let supported = if dialect.environment_labels {
                "supported values: \"FromCompositeFieldPath\", \"FromEnvironmentFieldPath\", \"Value\""
            } else {
                "supported values: \"FromCompositeFieldPath\", \"Value\""
            };
            return Err(InputError::invalid(&format!("{field}.type"), other, supported));
        }
    };
    Ok(LabelMatcher { key, source })
}

/// A field path of the input, parsed.
pub(crate) fn parse_path(path: &str, field: &str) -> Result<FieldPath, InputError> {
    FieldPath::parse(path).map_err(|e| InputError::invalid(field, path, &e.to_string()))
}

/// The labels a selector resolved to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ResolvedLabels {
    /// Label keys and values.
    pub(crate) labels: BTreeMap<String, String>,
    /// Whether an `Optional` matcher's field was missing (so its label was left out).
    pub(crate) missing_optional: bool,
}

/// A `Required` label value that could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LabelError {
    /// `composite` or `environment`.
    pub(crate) origin: &'static str,
    /// The field path, as written.
    pub(crate) path: String,
    /// Why it could not be read.
    pub(crate) error: FieldPathError,
}

/// Reads the label values of `matchers` from the observed composite and the environment.
/// A value must be a string; an `Optional` matcher whose value cannot be read is left out.
pub(crate) fn resolve_labels(
    matchers: &[LabelMatcher],
    composite: &Value,
    environment: &Value,
) -> Result<ResolvedLabels, LabelError> {
    let mut out = ResolvedLabels::default();
    for matcher in matchers {
        let (origin, path, optional, root) = match &matcher.source {
            LabelSource::Value(value) => {
                out.labels.insert(matcher.key.clone(), value.clone());
                continue;
            }
            LabelSource::FromComposite { path, optional } => ("composite", path, *optional, composite),
            LabelSource::FromEnvironment { path, optional } => ("environment", path, *optional, environment),
        };
        let read = path.get(root).and_then(|v| {
            v.as_str().ok_or_else(|| FieldPathError::WrongType { path: path.to_string(), expected: "string" })
        });
        match read {
            Ok(value) => {
                out.labels.insert(matcher.key.clone(), value.to_string());
            }
            Err(_) if optional => out.missing_optional = true,
            Err(error) => return Err(LabelError { origin, path: path.to_string(), error }),
        }
    }
    Ok(out)
}

/// The observed composite resource, or an empty object.
pub(crate) fn observed_composite(request: &RunFunctionRequest) -> Value {
    request.observed.composite.as_ref().map_or_else(|| Value::Object(Map::new()), |c| c.resource.clone())
}

/// The resources fetched for requirement `key`: from `required_resources`, else from the
/// deprecated `extra_resources`. `None` when the request has no answer for it yet.
pub(crate) fn fetched<'a>(request: &'a RunFunctionRequest, key: &str) -> Option<&'a [Resource]> {
    request.required_resources.get(key).or_else(|| request.extra_resources.get(key)).map(|r| r.items.as_slice())
}

/// Whether the request answers every requirement (trivially so when there are none): the
/// function can then do its work instead of only asking.
pub(crate) fn answered(request: &RunFunctionRequest, requirements: &BTreeMap<String, ResourceSelector>) -> bool {
    requirements.keys().all(|key| fetched(request, key).is_some())
}

/// The objects of fetched resources.
pub(crate) fn objects(resources: &[Resource]) -> Vec<Value> {
    resources.iter().map(|r| r.resource.clone()).collect()
}

/// Why a `Multiple` selection failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum SelectError {
    /// Fewer than `minMatch` objects matched.
    TooFew {
        /// `minMatch`.
        min: u64,
        /// How many matched.
        got: usize,
    },
    /// The objects could not be sorted.
    Sort(String),
}

/// A `Multiple` selection: at least `minMatch` objects, sorted by `sortByFieldPath`, the
/// first `maxMatch` of them kept.
pub(crate) fn select_multiple(items: Vec<Value>, selector: &Selector) -> Result<Vec<Value>, SelectError> {
    if let Some(min) = selector.min_match
        && (items.len() as u64) < min
    {
        return Err(SelectError::TooFew { min, got: items.len() });
    }
    let mut sorted = sort_by_field_path(items, &selector.sort_by).map_err(SelectError::Sort)?;
    if let Some(max) = selector.max_match {
        sorted.truncate(usize::try_from(max).unwrap_or(usize::MAX));
    }
    Ok(sorted)
}

/// The Go type a decoded JSON value has, as Go names it in messages.
fn go_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// A value sorted on.
enum SortKey {
    Number(f64),
    Text(String),
}

/// `items` sorted (stably) by the value at `path`. Every value found must have the same JSON
/// type, a string or a number; an object where the path is absent (or null) sorts as that
/// type's zero value (`""`, `0`). When no object has the field the order is kept.
pub(crate) fn sort_by_field_path(items: Vec<Value>, path: &FieldPath) -> Result<Vec<Value>, String> {
    let mut values = Vec::with_capacity(items.len());
    let mut kind: Option<&'static str> = None;
    for item in &items {
        let value = match path.get(item) {
            Ok(Value::Null) => None,
            Ok(v) => Some(v.clone()),
            Err(e) if e.is_not_found() => None,
            Err(e) => return Err(e.to_string()),
        };
        if let Some(v) = &value {
            let t = go_type(v);
            match kind {
                None => kind = Some(t),
                Some(k) if k != t => {
                    return Err(format!(
                        "cannot sort values of different types {} and {}",
                        quote(k, false),
                        quote(t, false)
                    ));
                }
                Some(_) => {}
            }
        }
        values.push(value);
    }
    let Some(kind) = kind else { return Ok(items) };
    if kind != "string" && kind != "float64" {
        // Go fails in its comparison function, which runs only for two or more objects.
        if items.len() < 2 {
            return Ok(items);
        }
        return Err(format!("unsupported type {} for sorting", quote(kind, false)));
    }
    let mut keyed: Vec<(SortKey, Value)> = values
        .into_iter()
        .zip(items)
        .map(|(value, item)| {
            let key = match value {
                Some(Value::String(s)) => SortKey::Text(s),
                Some(Value::Number(n)) => SortKey::Number(n.as_f64().unwrap_or(0.0)),
                _ if kind == "string" => SortKey::Text(String::new()),
                _ => SortKey::Number(0.0),
            };
            (key, item)
        })
        .collect();
    keyed.sort_by(|(a, _), (b, _)| match (a, b) {
        (SortKey::Text(a), SortKey::Text(b)) => a.cmp(b),
        (SortKey::Number(a), SortKey::Number(b)) => a.partial_cmp(b).unwrap_or(Ordering::Equal),
        // Cannot happen: every key has the same kind.
        _ => Ordering::Equal,
    });
    Ok(keyed.into_iter().map(|(_, item)| item).collect())
}

/// `over` merged into `base`: where both hold an object under a key, the objects merge
/// recursively; otherwise `over`'s value wins (arrays and scalars are replaced, not merged).
pub(crate) fn merge_maps(mut base: Map<String, Value>, over: Map<String, Value>) -> Map<String, Value> {
    merge_into(&mut base, over);
    base
}

fn merge_into(base: &mut Map<String, Value>, over: Map<String, Value>) {
    for (key, value) in over {
        if let Value::Object(over_child) = value {
            if let Some(Value::Object(base_child)) = base.get_mut(&key) {
                merge_into(base_child, over_child);
                continue;
            }
            base.insert(key, Value::Object(over_child));
        } else {
            base.insert(key, value);
        }
    }
}

/// The environment the step received in its context, if any.
pub(crate) fn incoming_environment(request: &RunFunctionRequest) -> Result<Option<Map<String, Value>>, String> {
    match request.context.as_ref().and_then(|c| c.get(ENVIRONMENT_KEY)) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(map)) => Ok(Some(map.clone())),
        Some(other) => Err(format!(
            "cannot get Composition environment from *v1.RunFunctionRequest context key {}: a {} is not an object",
            quote(ENVIRONMENT_KEY, false),
            go_type(other)
        )),
    }
}

/// An environment object: `data` with Crossplane's internal `apiVersion` and `kind` when it
/// has neither.
pub(crate) fn environment_object(mut data: Map<String, Value>) -> Value {
    let empty = |data: &Map<String, Value>, key: &str| data.get(key).and_then(Value::as_str).is_none_or(str::is_empty);
    if empty(&data, "apiVersion") && empty(&data, "kind") {
        data.insert("apiVersion".into(), Value::String(ENVIRONMENT_API_VERSION.into()));
        data.insert("kind".into(), Value::String(ENVIRONMENT_KIND.into()));
    }
    Value::Object(data)
}

/// Sets `key` of the response's context to `value`, keeping its other keys.
pub(crate) fn set_context_key(rsp: &mut RunFunctionResponse, key: &str, value: Value) {
    let mut context = match rsp.context.take() {
        Some(Value::Object(map)) => map,
        _ => Map::new(),
    };
    context.insert(key.to_string(), value);
    rsp.context = Some(Value::Object(context));
}

#[cfg(test)]
mod tests;

/// Runs a function of this family: parses its input (`None`: nothing to do), then runs `body`;
/// an input error or a failure of `body` is a fatal result.
pub(super) fn respond<I>(
    request: &RunFunctionRequest,
    parse: fn(Option<&Value>) -> Result<Option<I>, String>,
    body: fn(&RunFunctionRequest, &I, &mut RunFunctionResponse) -> Result<(), String>,
) -> RunFunctionResponse {
    let mut rsp = response_to(request, DEFAULT_TTL);
    let outcome = parse(request.input.as_ref()).and_then(|input| match input {
        Some(input) => body(request, &input, &mut rsp),
        None => Ok(()),
    });
    if let Err(message) = outcome {
        rsp.results.push(FnResult::fatal(message));
    }
    rsp
}

/// How a source picks its objects: one by name, or those a label selector matches.
#[derive(Clone, Debug)]
pub(super) enum How {
    /// `type: Reference`, `ref.name`.
    Reference(String),
    /// `type: Selector`.
    Selector(Selector),
}

/// The function's input as written, or `None` when the step has none.
pub(super) fn raw_input<T: serde::de::DeserializeOwned>(input: Option<&Value>) -> Result<Option<T>, String> {
    match input {
        None | Some(Value::Null) => Ok(None),
        Some(v) => serde_json::from_value(v.clone()).map(Some).map_err(|e| format!("cannot get Function input from *v1.RunFunctionRequest: {e}")),
    }
}
