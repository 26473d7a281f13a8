//! JSON → CEL value conversion, directed by the schema the way Kubernetes
//! types unstructured data for CEL.
//!
//! Strings are borrowed from the JSON (no copies); only the subtree at a rule
//! node is converted, once per node, and shared by all rules there.

use super::schema::{MAX_DEPTH, Node};
use cel::common::types::{
    CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelString,
};
use cel::common::value::Val;
use serde_json::Value as Json;
use std::borrow::Cow;
use std::collections::HashMap;

/// Words CEL reserves; Kubernetes exposes properties named like them as
/// `__<word>__` (e.g. `self.__namespace__`).
const RESERVED: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "within",
];

/// Converts `v` (found where `schema` applies) to a CEL value. `root` marks
/// the resource root, where Kubernetes exposes only `metadata.name` and
/// `metadata.generateName` of the object metadata.
pub(super) fn to_val<'a>(v: &'a Json, schema: Option<&Node>, root: bool) -> Box<dyn Val + 'a> {
    convert(v, schema, root, 0)
}

fn convert<'a>(v: &'a Json, schema: Option<&Node>, root: bool, depth: usize) -> Box<dyn Val + 'a> {
    if depth > MAX_DEPTH {
        // Beyond any real CRD; see MAX_DEPTH.
        return Box::new(CelNull);
    }
    match v {
        Json::Null => Box::new(CelNull),
        Json::Bool(b) => Box::new(CelBool::from(*b)),
        Json::Number(n) => number(n, schema.map(|s| s.ty.as_str()).unwrap_or_default()),
        Json::String(s) => Box::new(CelString::from(s.as_str())),
        Json::Array(items) => {
            let item_schema = schema.and_then(|s| s.items.as_deref());
            let list: Vec<Box<dyn Val + 'a>> = items
                .iter()
                .map(|i| convert(i, item_schema, false, depth + 1))
                .collect();
            Box::new(CelList::from(list))
        }
        Json::Object(fields) => {
            let mut map: HashMap<CelMapKey<'a>, Box<dyn Val + 'a>> =
                HashMap::with_capacity(fields.len());
            // Declared properties are CEL fields and get Kubernetes' escaping;
            // additionalProperties keys are plain map keys.
            let structured = schema.is_some_and(|s| !s.properties.is_empty());
            for (k, child) in fields {
                let key: CelMapKey<'a> = if structured {
                    match escape(k) {
                        Some(Cow::Borrowed(b)) => CelMapKey::from(b),
                        Some(Cow::Owned(o)) => CelMapKey::from(o),
                        // Not expressible as a CEL identifier: Kubernetes hides it.
                        None => continue,
                    }
                } else {
                    CelMapKey::from(k.as_str())
                };
                let child_schema =
                    schema.and_then(|s| s.properties.get(k).or(s.additional.as_deref()));
                let val = if root && k == "metadata" {
                    object_meta(child)
                } else {
                    convert(child, child_schema, false, depth + 1)
                };
                map.insert(key, val);
            }
            Box::new(CelMap::from(map))
        }
    }
}

/// JSON number → CEL: `type: number` is always a double (even `1`), integers
/// are ints, everything else follows the JSON form.
fn number<'a>(n: &serde_json::Number, ty: &str) -> Box<dyn Val + 'a> {
    if ty == "number" {
        return Box::new(CelDouble::from(n.as_f64().unwrap_or(f64::NAN)));
    }
    if let Some(i) = n.as_i64() {
        return Box::new(CelInt::from(i));
    }
    let f = n.as_f64().unwrap_or(f64::NAN);
    // An integral float under `type: integer` (e.g. `2.0`) is the integer.
    if ty == "integer" && f.fract() == 0.0 && f >= i64::MIN as f64 && f < i64::MAX as f64 {
        return Box::new(CelInt::from(f as i64));
    }
    Box::new(CelDouble::from(f))
}

/// The root `metadata` as CEL sees it in Kubernetes: name and generateName only.
fn object_meta<'a>(meta: &'a Json) -> Box<dyn Val + 'a> {
    let mut map: HashMap<CelMapKey<'a>, Box<dyn Val + 'a>> = HashMap::new();
    if let Some(obj) = meta.as_object() {
        for key in ["name", "generateName"] {
            if let Some(Json::String(s)) = obj.get(key) {
                map.insert(CelMapKey::from(key), Box::new(CelString::from(s.as_str())));
            }
        }
    }
    Box::new(CelMap::from(map))
}

/// Kubernetes' property-name escaping for CEL field access: reserved words
/// become `__word__`; `__`, `.`, `-`, `/` become `__underscores__`,
/// `__dot__`, `__dash__`, `__slash__`. Names with other characters, or
/// starting with a digit, are not accessible (None).
pub(super) fn escape(name: &str) -> Option<Cow<'_, str>> {
    let first = name.chars().next()?;
    if first.is_ascii_digit() {
        return None;
    }
    if RESERVED.contains(&name) {
        return Some(Cow::Owned(format!("__{name}__")));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/'))
    {
        return None;
    }
    if !name.contains("__") && !name.contains(['.', '-', '/']) {
        return Some(Cow::Borrowed(name));
    }
    let mut out = String::with_capacity(name.len() + 16);
    let mut rest = name;
    while let Some(c) = rest.chars().next() {
        if let Some(r) = rest.strip_prefix("__") {
            out.push_str("__underscores__");
            rest = r;
            continue;
        }
        match c {
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c => out.push(c),
        }
        rest = &rest[c.len_utf8()..];
    }
    Some(Cow::Owned(out))
}
