//! Transforms: checked once when the input is read ([`compile`]), then applied to patch values
//! ([`resolve_all`]) with Crossplane's semantics and error messages.
//!
//! Values follow the Go view of [`crate::golang::value`]: what a patch reads is float64, a
//! `convert` to `int64` or a clamp bound yields int64, string transforms yield strings.

use base64::Engine as _;
use regex::Regex;
use serde_json::{Map, Value};
use sha2::Digest as _;

use super::compile::{FieldError, Path};
use super::input;
use super::quantity::parse_quantity_f64;
use crate::golang::fmt::sprintf;
use crate::golang::json::marshal;
use crate::golang::strconv::format_float;
use crate::golang::value::{GoType, as_float64, float};

/// A checked transform.
#[derive(Clone, Debug)]
pub(crate) enum Transform {
    /// `map`: the input string is a key.
    Map(Map<String, Value>),
    /// `match`: the first matching pattern's result.
    Match {
        /// Patterns and their results, in order.
        patterns: Vec<(Pattern, Value)>,
        /// What to return when nothing matches.
        fallback: Fallback,
    },
    /// `math`.
    Math(MathOp),
    /// `string`.
    String(StringOp),
    /// `convert`.
    Convert {
        /// The output type (`int` is `int64`).
        to: IoType,
        /// How a string input is read.
        format: ConvertFormat,
    },
}

/// A `match` pattern.
#[derive(Clone, Debug)]
pub(crate) enum Pattern {
    /// Equal to the input string.
    Literal(String),
    /// Matches somewhere in the input string.
    Regexp(Regex),
}

/// What a `match` returns when no pattern matches.
#[derive(Clone, Debug)]
pub(crate) enum Fallback {
    /// `fallbackValue` (null when absent).
    Value(Value),
    /// `fallbackTo: Input`: the input itself.
    Input,
    /// `fallbackTo: Input` together with a `fallbackValue`, which Crossplane refuses when the
    /// fallback is needed.
    Both,
}

/// A `math` operation.
#[derive(Clone, Copy, Debug)]
pub(crate) enum MathOp {
    /// `Multiply`.
    Multiply(i64),
    /// `ClampMin`.
    ClampMin(i64),
    /// `ClampMax`.
    ClampMax(i64),
}

/// A `string` operation.
#[derive(Clone, Debug)]
pub(crate) enum StringOp {
    /// `Format`: `fmt.Sprintf(fmt, input)`.
    Format(String),
    /// `Convert`.
    Convert(Conversion),
    /// `TrimPrefix`.
    TrimPrefix(String),
    /// `TrimSuffix`.
    TrimSuffix(String),
    /// `Regexp`: a group of the first match.
    Regexp {
        /// The expression.
        regex: Regex,
        /// The group returned.
        group: usize,
    },
    /// `Join` an array's elements.
    Join(String),
    /// `Replace` every occurrence.
    Replace {
        /// What to replace.
        search: String,
        /// What to put instead.
        replace: String,
    },
}

/// A `string` `Convert` operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Conversion {
    /// `ToUpper`.
    ToUpper,
    /// `ToLower`.
    ToLower,
    /// `ToJson`.
    ToJson,
    /// `ToBase64`.
    ToBase64,
    /// `FromBase64`.
    FromBase64,
    /// `ToSha1`.
    ToSha1,
    /// `ToSha256`.
    ToSha256,
    /// `ToSha512`.
    ToSha512,
    /// `ToAdler32`.
    ToAdler32,
}

/// A `convert` type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IoType {
    /// `string`.
    String,
    /// `bool`.
    Bool,
    /// `int64` (and `int`).
    Int64,
    /// `float64`.
    Float64,
    /// `object`.
    Object,
    /// `array`.
    Array,
}

impl IoType {
    fn name(self) -> &'static str {
        match self {
            IoType::String => "string",
            IoType::Bool => "bool",
            IoType::Int64 => "int64",
            IoType::Float64 => "float64",
            IoType::Object => "object",
            IoType::Array => "array",
        }
    }
}

/// A `convert` format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ConvertFormat {
    /// `none`.
    None,
    /// `quantity`.
    Quantity,
    /// `json`.
    Json,
}

impl ConvertFormat {
    fn name(self) -> &'static str {
        match self {
            ConvertFormat::None => "none",
            ConvertFormat::Quantity => "quantity",
            ConvertFormat::Json => "json",
        }
    }
}

impl Transform {
    /// The transform's `type`, as error messages name it.
    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            Transform::Map(_) => "map",
            Transform::Match { .. } => "match",
            Transform::Math(_) => "math",
            Transform::String(_) => "string",
            Transform::Convert { .. } => "convert",
        }
    }
}

/// A transform failed: `transform at index N returned error: <type> transform could not
/// resolve: <why>`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("transform at index {index} returned error: {kind} transform could not resolve: {message}")]
pub(crate) struct TransformError {
    index: usize,
    kind: &'static str,
    message: String,
}

/// Applies the transforms in order.
pub(crate) fn resolve_all(transforms: &[Transform], mut value: Value) -> Result<Value, TransformError> {
    for (index, transform) in transforms.iter().enumerate() {
        value = resolve(transform, value).map_err(|message| TransformError {
            index,
            kind: transform.type_name(),
            message,
        })?;
    }
    Ok(value)
}

/// Applies one transform; the error is the reason without the index prefix.
pub(crate) fn resolve(transform: &Transform, input: Value) -> Result<Value, String> {
    match transform {
        Transform::Map(pairs) => resolve_map(pairs, &input),
        Transform::Match { patterns, fallback } => resolve_match(patterns, fallback, input),
        Transform::Math(op) => resolve_math(*op, input),
        Transform::String(op) => resolve_string(op, &input).map(Value::String),
        Transform::Convert { to, format } => resolve_convert(*to, *format, input),
    }
}

fn type_name(value: &Value) -> &'static str {
    GoType::of(value).name()
}

/// `fmt.Sprintf("%v", value)`, how string transforms see a non-string input.
fn go_string(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => sprintf("%v", std::slice::from_ref(other)),
    }
}

fn resolve_map(pairs: &Map<String, Value>, input: &Value) -> Result<Value, String> {
    let Value::String(key) = input else {
        return Err(format!("type {} is not supported for map transform", type_name(input)));
    };
    pairs.get(key).cloned().ok_or_else(|| format!("key {key} is not found in map"))
}

fn resolve_match(patterns: &[(Pattern, Value)], fallback: &Fallback, input: Value) -> Result<Value, String> {
    for (index, (pattern, result)) in patterns.iter().enumerate() {
        let matched = match (pattern, &input) {
            (Pattern::Literal(literal), Value::String(s)) => s == literal,
            (Pattern::Regexp(regex), Value::String(s)) => regex.is_match(s),
            (Pattern::Regexp(_), Value::Null) => {
                return Err(format!("cannot match pattern at index {index}: unsupported input type 'null'"));
            }
            (_, other) => {
                return Err(format!(
                    "cannot match pattern at index {index}: unsupported input type '{}'",
                    type_name(other)
                ));
            }
        };
        if matched {
            return Ok(result.clone());
        }
    }
    match fallback {
        Fallback::Value(v) => Ok(v.clone()),
        Fallback::Input => Ok(input),
        Fallback::Both => Err("cannot set both a fallback value and the fallback to input flag".to_string()),
    }
}

/// A float64 result, refused when JSON cannot hold it (Go's encoder refuses it too).
fn finite(f: f64) -> Result<Value, String> {
    if f.is_finite() {
        Ok(float(f))
    } else {
        Err(format!("cannot marshal value to JSON: json: unsupported value: {}", format_float(f, b'g', -1)))
    }
}

fn resolve_math(op: MathOp, input: Value) -> Result<Value, String> {
    let number = match &input {
        Value::Number(n) => n.clone(),
        other => {
            return Err(format!(
                "input is required to be a number for math transformer, got {}",
                type_name(other)
            ));
        }
    };
    let as_float = !number.is_i64() && !number.is_u64();
    match op {
        MathOp::Multiply(factor) => {
            if as_float {
                finite(number.as_f64().unwrap_or_default() * factor as f64)
            } else {
                Ok(Value::from(number.as_i64().unwrap_or_default().wrapping_mul(factor)))
            }
        }
        MathOp::ClampMin(min) => {
            let truncated = number.as_i64().unwrap_or_else(|| number.as_f64().unwrap_or_default() as i64);
            Ok(if truncated < min { Value::from(min) } else { input })
        }
        MathOp::ClampMax(max) => {
            let truncated = number.as_i64().unwrap_or_else(|| number.as_f64().unwrap_or_default() as i64);
            Ok(if truncated > max { Value::from(max) } else { input })
        }
    }
}

fn resolve_string(op: &StringOp, input: &Value) -> Result<String, String> {
    match op {
        StringOp::Format(format) => Ok(sprintf(format, std::slice::from_ref(input))),
        StringOp::Convert(conversion) => convert_string(*conversion, input),
        StringOp::TrimPrefix(trim) => {
            let s = go_string(input);
            Ok(s.strip_prefix(trim.as_str()).map_or_else(|| s.clone(), str::to_string))
        }
        StringOp::TrimSuffix(trim) => {
            let s = go_string(input);
            Ok(s.strip_suffix(trim.as_str()).map_or_else(|| s.clone(), str::to_string))
        }
        StringOp::Regexp { regex, group } => {
            let s = go_string(input);
            regex
                .captures(&s)
                .and_then(|c| {
                    if *group < c.len() {
                        Some(c.get(*group).map_or("", |m| m.as_str()).to_string())
                    } else {
                        None
                    }
                })
                .ok_or_else(|| {
                    format!(
                        "regexp {} had no matches for group {group}",
                        crate::golang::strconv::quote(regex.as_str(), false)
                    )
                })
        }
        StringOp::Join(separator) => {
            let Value::Array(items) = input else {
                return Err("could not parse input array".to_string());
            };
            Ok(items.iter().map(go_string).collect::<Vec<_>>().join(separator))
        }
        StringOp::Replace { search, replace } => Ok(go_string(input).replace(search.as_str(), replace)),
    }
}

/// Go's `strings.ToUpper`/`ToLower` map each character to one character.
fn map_case(s: &str, upper: bool) -> String {
    s.chars()
        .map(|c| {
            let mut mapped =
                if upper { c.to_uppercase().collect::<Vec<_>>() } else { c.to_lowercase().collect() };
            if mapped.len() == 1 { mapped.remove(0) } else { c }
        })
        .collect()
}

/// The bytes a hash is taken over: a string's own bytes, anything else as Go's JSON.
fn hash_input(input: &Value) -> Vec<u8> {
    match input {
        Value::String(s) => s.as_bytes().to_vec(),
        other => marshal(other).into_bytes(),
    }
}

fn convert_string(conversion: Conversion, input: &Value) -> Result<String, String> {
    let s = go_string(input);
    Ok(match conversion {
        Conversion::ToUpper => map_case(&s, true),
        Conversion::ToLower => map_case(&s, false),
        Conversion::ToJson => marshal(input),
        Conversion::ToBase64 => base64::engine::general_purpose::STANDARD.encode(s.as_bytes()),
        Conversion::FromBase64 => {
            let bytes = base64::engine::general_purpose::STANDARD.decode(s.as_bytes()).map_err(|e| {
                let at = match e {
                    base64::DecodeError::InvalidByte(offset, _) => offset,
                    base64::DecodeError::InvalidLastSymbol(offset, _) => offset,
                    base64::DecodeError::InvalidLength(len) => len,
                    base64::DecodeError::InvalidPadding => s.len(),
                };
                format!("string is not valid base64: illegal base64 data at input byte {at}")
            })?;
            String::from_utf8_lossy(&bytes).into_owned()
        }
        Conversion::ToSha1 => hex::encode(sha1::Sha1::digest(hash_input(input))),
        Conversion::ToSha256 => hex::encode(sha2::Sha256::digest(hash_input(input))),
        Conversion::ToSha512 => hex::encode(sha2::Sha512::digest(hash_input(input))),
        Conversion::ToAdler32 => adler2::adler32_slice(&hash_input(input)).to_string(),
    })
}

fn resolve_convert(to: IoType, format: ConvertFormat, input: Value) -> Result<Value, String> {
    let from = match GoType::of(&input) {
        GoType::String => IoType::String,
        GoType::Bool => IoType::Bool,
        GoType::Int64 => IoType::Int64,
        GoType::Float64 => IoType::Float64,
        other => return Err(format!("invalid input type {}", other.name())),
    };
    if from == to {
        return Ok(input);
    }
    let unsupported = || {
        format!(
            "conversion from {} to {} is not supported with format {}",
            from.name(),
            to.name(),
            format.name()
        )
    };
    match (input, to, format) {
        (Value::String(s), IoType::Int64, ConvertFormat::None) => {
            s.parse::<i64>().map(Value::from).map_err(|e| {
                parse_error(
                    "ParseInt",
                    &s,
                    e.kind() == &std::num::IntErrorKind::PosOverflow
                        || e.kind() == &std::num::IntErrorKind::NegOverflow,
                )
            })
        }
        (Value::String(s), IoType::Bool, ConvertFormat::None) => match s.as_str() {
            "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(Value::Bool(true)),
            "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(Value::Bool(false)),
            _ => Err(parse_error("ParseBool", &s, false)),
        },
        (Value::String(s), IoType::Float64, ConvertFormat::None) => {
            let f: f64 = s.parse().map_err(|_| parse_error("ParseFloat", &s, false))?;
            finite(f)
        }
        (Value::String(s), IoType::Float64, ConvertFormat::Quantity) => {
            finite(parse_quantity_f64(&s).map_err(|e| e.to_string())?)
        }
        (Value::String(s), IoType::Object, ConvertFormat::Json) => match serde_json::from_str::<Value>(&s) {
            Ok(Value::Object(map)) => Ok(as_float64(Value::Object(map))),
            Ok(Value::Null) => Ok(Value::Object(Map::new())),
            Ok(other) => Err(format!(
                "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                json_kind(&other)
            )),
            Err(e) => Err(e.to_string()),
        },
        (Value::String(s), IoType::Array, ConvertFormat::Json) => match serde_json::from_str::<Value>(&s) {
            Ok(Value::Array(items)) => Ok(as_float64(Value::Array(items))),
            Ok(Value::Null) => Ok(Value::Null),
            Ok(other) => Err(format!(
                "json: cannot unmarshal {} into Go value of type []interface {{}}",
                json_kind(&other)
            )),
            Err(e) => Err(e.to_string()),
        },
        (Value::Number(n), IoType::String, ConvertFormat::None) if from == IoType::Int64 => {
            Ok(Value::String(n.to_string()))
        }
        (Value::Number(n), IoType::Bool, ConvertFormat::None) if from == IoType::Int64 => {
            Ok(Value::Bool(n.as_i64() == Some(1)))
        }
        (Value::Number(n), IoType::Float64, ConvertFormat::None) if from == IoType::Int64 => {
            finite(n.as_f64().unwrap_or_default())
        }
        (Value::Bool(b), IoType::String, ConvertFormat::None) => Ok(Value::String(b.to_string())),
        (Value::Bool(b), IoType::Int64, ConvertFormat::None) => Ok(Value::from(i64::from(b))),
        (Value::Bool(b), IoType::Float64, ConvertFormat::None) => Ok(float(if b { 1.0 } else { 0.0 })),
        (Value::Number(n), IoType::String, ConvertFormat::None) => {
            Ok(Value::String(format_float(n.as_f64().unwrap_or_default(), b'f', -1)))
        }
        (Value::Number(n), IoType::Int64, ConvertFormat::None) => {
            Ok(Value::from(n.as_f64().unwrap_or_default() as i64))
        }
        (Value::Number(n), IoType::Bool, ConvertFormat::None) => Ok(Value::Bool(n.as_f64() == Some(1.0))),
        _ => Err(unsupported()),
    }
}

/// Go's `strconv` error text, e.g. `strconv.ParseInt: parsing "x": invalid syntax`.
fn parse_error(func: &str, s: &str, out_of_range: bool) -> String {
    let why = if out_of_range { "value out of range" } else { "invalid syntax" };
    format!("strconv.{func}: parsing {}: {why}", crate::golang::strconv::quote(s, false))
}

/// The JSON kind Go's decoder names in type errors.
fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Checks a transform and turns it into a [`Transform`]; `path` names it in errors.
pub(crate) fn compile(raw: &input::Transform, path: &Path) -> Result<Transform, FieldError> {
    let required = |field: &str, kind: &str| {
        FieldError::required(path.child(field), format!("given transform type {kind} requires configuration"))
    };
    match raw.type_.as_str() {
        "math" => {
            let math = raw.math.as_ref().ok_or_else(|| required("math", "math"))?;
            compile_math(math, &path.child("math")).map(Transform::Math)
        }
        "map" => {
            let pairs = raw.map.as_ref().ok_or_else(|| required("map", "map"))?;
            if pairs.is_empty() {
                return Err(FieldError::required(
                    path.child("map").child("pairs"),
                    "at least one pair must be specified if a map transform is specified",
                ));
            }
            Ok(Transform::Map(pairs.iter().map(|(k, v)| (k.clone(), as_float64(v.clone()))).collect()))
        }
        "match" => {
            let m = raw.match_.as_ref().ok_or_else(|| required("match", "match"))?;
            compile_match(m, &path.child("match"))
        }
        "string" => {
            let s = raw.string.as_ref().ok_or_else(|| required("string", "string"))?;
            compile_string(s, &path.child("string")).map(Transform::String)
        }
        "convert" => {
            let c = raw.convert.as_ref().ok_or_else(|| required("convert", "convert"))?;
            let path = path.child("convert");
            let format = match c.format.as_deref().unwrap_or("none") {
                "none" | "" => ConvertFormat::None,
                "quantity" => ConvertFormat::Quantity,
                "json" => ConvertFormat::Json,
                other => return Err(FieldError::invalid(path.child("format"), other, "invalid format")),
            };
            let to = match c.to_type.as_str() {
                "string" => IoType::String,
                "bool" => IoType::Bool,
                "int" | "int64" => IoType::Int64,
                "float64" => IoType::Float64,
                "object" => IoType::Object,
                "array" => IoType::Array,
                other => return Err(FieldError::invalid(path.child("toType"), other, "invalid type")),
            };
            Ok(Transform::Convert { to, format })
        }
        other => Err(FieldError::invalid(path.child("type"), other, "unknown transform type")),
    }
}

fn compile_math(math: &input::MathTransform, path: &Path) -> Result<MathOp, FieldError> {
    match math.type_.as_deref().unwrap_or("Multiply") {
        "Multiply" | "" => math.multiply.map(MathOp::Multiply).ok_or_else(|| {
            FieldError::required(
                path.child("multiply"),
                "must specify a value if a multiply math transform is specified",
            )
        }),
        "ClampMin" => math.clamp_min.map(MathOp::ClampMin).ok_or_else(|| {
            FieldError::required(
                path.child("clampMin"),
                "must specify a value if a clamp min math transform is specified",
            )
        }),
        "ClampMax" => math.clamp_max.map(MathOp::ClampMax).ok_or_else(|| {
            FieldError::required(
                path.child("clampMax"),
                "must specify a value if a clamp max math transform is specified",
            )
        }),
        other => Err(FieldError::invalid(path.child("type"), other, "unknown math transform type")),
    }
}

fn compile_match(m: &input::MatchTransform, path: &Path) -> Result<Transform, FieldError> {
    if m.patterns.is_empty() {
        return Err(FieldError::required(
            path.child("patterns"),
            "at least one pattern must be specified if a match transform is specified",
        ));
    }
    let mut patterns = Vec::with_capacity(m.patterns.len());
    for (i, p) in m.patterns.iter().enumerate() {
        let path = path.child("patterns").index(i);
        let pattern = match p.type_.as_deref().unwrap_or("literal") {
            "literal" | "" => Pattern::Literal(p.literal.clone().ok_or_else(|| {
                FieldError::required(path.child("literal"), "literal pattern type requires a literal")
            })?),
            "regexp" => {
                let source = p.regexp.as_ref().ok_or_else(|| {
                    FieldError::required(path.child("regexp"), "regexp pattern type requires a regexp")
                })?;
                Pattern::Regexp(
                    Regex::new(source)
                        .map_err(|_| FieldError::invalid(path.child("regexp"), source, "invalid regexp"))?,
                )
            }
            other => return Err(FieldError::invalid(path.child("type"), other, "unknown pattern type")),
        };
        patterns.push((pattern, as_float64(p.result.clone())));
    }
    let fallback = match (m.fallback_to.as_deref(), &m.fallback_value) {
        (Some("Input"), None) => Fallback::Input,
        (Some("Input"), Some(_)) => Fallback::Both,
        (_, value) => Fallback::Value(as_float64(value.clone().unwrap_or(Value::Null))),
    };
    Ok(Transform::Match { patterns, fallback })
}

fn compile_string(s: &input::StringTransform, path: &Path) -> Result<StringOp, FieldError> {
    match s.type_.as_deref().unwrap_or("Format") {
        "Format" | "" => s
            .fmt
            .clone()
            .map(StringOp::Format)
            .ok_or_else(|| FieldError::required(path.child("fmt"), "format transform requires a format")),
        "Convert" => {
            let name = s.convert.as_deref().ok_or_else(|| {
                FieldError::required(path.child("convert"), "convert transform requires a conversion type")
            })?;
            let conversion = match name {
                "ToUpper" => Conversion::ToUpper,
                "ToLower" => Conversion::ToLower,
                "ToJson" => Conversion::ToJson,
                "ToBase64" => Conversion::ToBase64,
                "FromBase64" => Conversion::FromBase64,
                "ToSha1" => Conversion::ToSha1,
                "ToSha256" => Conversion::ToSha256,
                "ToSha512" => Conversion::ToSha512,
                "ToAdler32" => Conversion::ToAdler32,
                other => {
                    return Err(FieldError::invalid(
                        path.child("convert"),
                        other,
                        &format!("type {other} is not supported for string convert"),
                    ));
                }
            };
            Ok(StringOp::Convert(conversion))
        }
        kind @ ("TrimPrefix" | "TrimSuffix") => {
            let trim = s.trim.clone().ok_or_else(|| {
                FieldError::required(path.child("trim"), "trim transform requires a trim value")
            })?;
            Ok(if kind == "TrimPrefix" { StringOp::TrimPrefix(trim) } else { StringOp::TrimSuffix(trim) })
        }
        "Regexp" => {
            let r = s.regexp.as_ref().ok_or_else(|| {
                FieldError::required(path.child("regexp"), "regexp transform requires a regexp")
            })?;
            let match_path = path.child("regexp").child("match");
            if r.match_.is_empty() {
                return Err(FieldError::required(match_path, "regexp transform requires a match"));
            }
            let regex = Regex::new(&r.match_)
                .map_err(|_| FieldError::invalid(match_path, &r.match_, "invalid regexp"))?;
            let group = usize::try_from(r.group.unwrap_or(0)).unwrap_or(usize::MAX);
            Ok(StringOp::Regexp { regex, group })
        }
        "Join" => s
            .join
            .as_ref()
            .map(|j| StringOp::Join(j.separator.clone()))
            .ok_or_else(|| FieldError::required(path.child("join"), "join transform requires a join")),
        "Replace" => {
            let r = s.replace.as_ref().ok_or_else(|| {
                FieldError::required(path.child("replace"), "replace transform requires a replace")
            })?;
            if r.search.is_empty() {
                return Err(FieldError::required(
                    path.child("replace").child("search"),
                    "replace transform requires a search",
                ));
            }
            Ok(StringOp::Replace { search: r.search.clone(), replace: r.replace.clone() })
        }
        other => Err(FieldError::invalid(path.child("type"), other, "unknown string transform type")),
    }
}
