//! The function's input, `pt.fn.crossplane.io/v1beta1` `Resources`, as written in YAML.
//!
//! Fields are decoded leniently, as Go's `encoding/json` does: unknown fields are ignored and
//! enum-like fields stay strings, so that [`super::compile`] can refuse bad values with
//! Crossplane's field-path messages rather than a decoder's.

use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

/// `Resources`: the whole input.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resources {
    /// Named groups of patches that templates include with a `PatchSet` patch.
    #[serde(default)]
    pub patch_sets: Vec<PatchSet>,
    /// Patches between the XR and the environment, run before the templates.
    #[serde(default)]
    pub environment: Option<Environment>,
    /// The composed resource templates.
    #[serde(default)]
    pub resources: Vec<ComposedTemplate>,
    /// Where a modern XR's connection secret goes.
    #[serde(default)]
    pub write_connection_secret_to_ref: Option<ConnectionSecretRef>,
}

/// A named list of patches.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PatchSet {
    /// The name templates refer to.
    #[serde(default)]
    pub name: String,
    /// The patches.
    #[serde(default)]
    pub patches: Vec<Patch>,
}

/// `environment`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Environment {
    /// Patches between the XR and the environment.
    #[serde(default)]
    pub patches: Vec<Patch>,
}

/// One composed resource template.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ComposedTemplate {
    /// The composition resource name.
    #[serde(default)]
    pub name: String,
    /// The object the resource starts from; none: a previous step's desired resource.
    #[serde(default)]
    pub base: Option<Value>,
    /// Patches to and from the resource.
    #[serde(default)]
    pub patches: Vec<Patch>,
    /// Connection details the XR takes from the resource.
    #[serde(default)]
    pub connection_details: Vec<ConnectionDetail>,
    /// When the resource counts as ready.
    #[serde(default)]
    pub readiness_checks: Vec<ReadinessCheck>,
}

/// `writeConnectionSecretToRef`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionSecretRef {
    /// The Secret's name.
    #[serde(default)]
    pub name: Option<String>,
    /// The Secret's namespace.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Patches from the XR to `name` and `namespace`.
    #[serde(default)]
    pub patches: Vec<Patch>,
}

/// One patch.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Patch {
    /// The patch type (default `FromCompositeFieldPath`).
    #[serde(default, rename = "type")]
    pub type_: Option<String>,
    /// Where the value comes from.
    #[serde(default)]
    pub from_field_path: Option<String>,
    /// Where it goes (default: `fromFieldPath`).
    #[serde(default)]
    pub to_field_path: Option<String>,
    /// For `Combine*` patches.
    #[serde(default)]
    pub combine: Option<Combine>,
    /// For `PatchSet` patches.
    #[serde(default)]
    pub patch_set_name: Option<String>,
    /// Transforms applied in order.
    #[serde(default)]
    pub transforms: Vec<Transform>,
    /// Source and destination policies.
    #[serde(default)]
    pub policy: Option<PatchPolicy>,
}

/// `combine`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Combine {
    /// The values combined.
    #[serde(default)]
    pub variables: Vec<CombineVariable>,
    /// Only `string`.
    #[serde(default)]
    pub strategy: String,
    /// For the `string` strategy.
    #[serde(default)]
    pub string: Option<StringCombine>,
}

/// One combined value.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CombineVariable {
    /// Where it comes from.
    #[serde(default)]
    pub from_field_path: String,
}

/// `combine.string`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct StringCombine {
    /// A Go format string.
    #[serde(default)]
    pub fmt: String,
}

/// `policy`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PatchPolicy {
    /// `Optional` (default) or `Required`.
    #[serde(default)]
    pub from_field_path: Option<String>,
    /// `Replace` (default) or one of the merge policies.
    #[serde(default)]
    pub to_field_path: Option<String>,
}

/// One transform.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Transform {
    /// `map`, `match`, `math`, `string` or `convert`.
    #[serde(default, rename = "type")]
    pub type_: String,
    /// For `math`.
    #[serde(default)]
    pub math: Option<MathTransform>,
    /// For `map`: the pairs.
    #[serde(default)]
    pub map: Option<Map<String, Value>>,
    /// For `match`.
    #[serde(default, rename = "match")]
    pub match_: Option<MatchTransform>,
    /// For `string`.
    #[serde(default)]
    pub string: Option<StringTransform>,
    /// For `convert`.
    #[serde(default)]
    pub convert: Option<ConvertTransform>,
}

/// `math`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MathTransform {
    /// `Multiply` (default), `ClampMin` or `ClampMax`.
    #[serde(default, rename = "type")]
    pub type_: Option<String>,
    /// The factor.
    #[serde(default, deserialize_with = "opt_int")]
    pub multiply: Option<i64>,
    /// The lower bound.
    #[serde(default, deserialize_with = "opt_int")]
    pub clamp_min: Option<i64>,
    /// The upper bound.
    #[serde(default, deserialize_with = "opt_int")]
    pub clamp_max: Option<i64>,
}

/// `match`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MatchTransform {
    /// Tried in order.
    #[serde(default)]
    pub patterns: Vec<MatchPattern>,
    /// The result when nothing matches.
    #[serde(default)]
    pub fallback_value: Option<Value>,
    /// `Value` (default) or `Input`.
    #[serde(default)]
    pub fallback_to: Option<String>,
}

/// One `match` pattern.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct MatchPattern {
    /// `literal` (default) or `regexp`.
    #[serde(default, rename = "type")]
    pub type_: Option<String>,
    /// For `literal`.
    #[serde(default)]
    pub literal: Option<String>,
    /// For `regexp`.
    #[serde(default)]
    pub regexp: Option<String>,
    /// The result when it matches.
    #[serde(default)]
    pub result: Value,
}

/// `string`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct StringTransform {
    /// `Format` (default), `Convert`, `TrimPrefix`, `TrimSuffix`, `Regexp`, `Join`, `Replace`.
    #[serde(default, rename = "type")]
    pub type_: Option<String>,
    /// For `Format`.
    #[serde(default)]
    pub fmt: Option<String>,
    /// For `Convert`.
    #[serde(default)]
    pub convert: Option<String>,
    /// For `TrimPrefix` and `TrimSuffix`.
    #[serde(default)]
    pub trim: Option<String>,
    /// For `Regexp`.
    #[serde(default)]
    pub regexp: Option<StringRegexp>,
    /// For `Join`.
    #[serde(default)]
    pub join: Option<StringJoin>,
    /// For `Replace`.
    #[serde(default)]
    pub replace: Option<StringReplace>,
}

/// `string.regexp`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct StringRegexp {
    /// The expression.
    #[serde(default, rename = "match")]
    pub match_: String,
    /// The group returned (default 0, the whole match).
    #[serde(default, deserialize_with = "opt_int")]
    pub group: Option<i64>,
}

/// `string.join`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct StringJoin {
    /// Put between elements.
    #[serde(default)]
    pub separator: String,
}

/// `string.replace`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct StringReplace {
    /// What to replace.
    #[serde(default)]
    pub search: String,
    /// What to put instead.
    #[serde(default)]
    pub replace: String,
}

/// `convert`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConvertTransform {
    /// The output type.
    #[serde(default)]
    pub to_type: String,
    /// `none` (default), `quantity` or `json`.
    #[serde(default)]
    pub format: Option<String>,
}

/// One connection detail.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionDetail {
    /// The key in the XR's connection details.
    #[serde(default)]
    pub name: Option<String>,
    /// `FromConnectionSecretKey`, `FromFieldPath` or `FromValue`.
    #[serde(default, rename = "type")]
    pub type_: Option<String>,
    /// For `FromConnectionSecretKey`.
    #[serde(default)]
    pub from_connection_secret_key: Option<String>,
    /// For `FromFieldPath`.
    #[serde(default)]
    pub from_field_path: Option<String>,
    /// For `FromValue`.
    #[serde(default)]
    pub value: Option<String>,
}

/// One readiness check.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadinessCheck {
    /// The check type.
    #[serde(default, rename = "type")]
    pub type_: String,
    /// The field checked.
    #[serde(default)]
    pub field_path: Option<String>,
    /// For `MatchString`.
    #[serde(default)]
    pub match_string: Option<String>,
    /// For `MatchInteger`.
    #[serde(default, deserialize_with = "opt_int")]
    pub match_integer: Option<i64>,
    /// For `MatchCondition`.
    #[serde(default)]
    pub match_condition: Option<MatchConditionCheck>,
}

/// `matchCondition`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct MatchConditionCheck {
    /// The condition type (default `Ready`).
    #[serde(default, rename = "type")]
    pub type_: Option<String>,
    /// The status wanted (default `True`).
    #[serde(default)]
    pub status: Option<String>,
}

/// An optional integer that may arrive as an integral float, as numbers do after passing
/// through a protobuf `Struct`.
fn opt_int<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<i64>, D::Error> {
    let value = Option::<Value>::deserialize(deserializer)?;
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => {
            if let Some(i) = n.as_i64() {
                return Ok(Some(i));
            }
            match n.as_f64() {
                Some(f) if f.fract() == 0.0 && f.abs() < 9.2e18 => Ok(Some(f as i64)),
                _ => Err(serde::de::Error::custom(format!("cannot unmarshal number {n} into an int64"))),
            }
        }
        Some(other) => Err(serde::de::Error::custom(format!("cannot unmarshal {other} into an int64"))),
    }
}
