//! Compiled schema nodes: turns the JSON of an `openAPIV3Schema` (or any of
//! its sub-schemas) into a [`Node`] tree, checking keyword value types,
//! compiling `pattern` regexes once, and bounding nesting depth so that a
//! hostile schema cannot overflow the stack.
//!
//! Unknown keywords (`description`, `example`, `x-kubernetes-validations`,
//! ...) are ignored, as they carry no pruning/defaulting/validation meaning
//! here. A keyword whose value is `null` counts as absent, except `default`,
//! where `null` is a legitimate default.

use std::collections::BTreeMap;

use regex::{Regex, RegexBuilder};
use serde_json::{Map, Number, Value};

use super::{MAX_DEPTH, SchemaError, json};

/// Upper bound on a compiled pattern's size; patterns come from users, so their cost is capped.
const REGEX_SIZE_LIMIT: usize = 1 << 21;

/// The `type` of a schema node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonType {
    /// `object`
    Object,
    /// `array`
    Array,
    /// `string`
    String,
    /// `integer` (3.0 counts as an integer)
    Integer,
    /// `number`
    Number,
    /// `boolean`
    Boolean,
}

impl JsonType {
    /// The keyword spelling, e.g. `"integer"`.
    pub fn as_str(self) -> &'static str {
        match self {
            JsonType::Object => "object",
            JsonType::Array => "array",
            JsonType::String => "string",
            JsonType::Integer => "integer",
            JsonType::Number => "number",
            JsonType::Boolean => "boolean",
        }
    }

    fn parse(s: &str) -> Option<JsonType> {
        Some(match s {
            "object" => JsonType::Object,
            "array" => JsonType::Array,
            "string" => JsonType::String,
            "integer" => JsonType::Integer,
            "number" => JsonType::Number,
            "boolean" => JsonType::Boolean,
            _ => return None,
        })
    }
}

/// `x-kubernetes-list-type`: how server-side apply merges a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListType {
    /// `atomic`: the list is replaced as a whole.
    Atomic,
    /// `set`: scalar items, unique.
    Set,
    /// `map`: object items, unique by `x-kubernetes-list-map-keys`.
    Map,
}

/// `x-kubernetes-map-type`: how server-side apply merges an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapType {
    /// `granular`: fields are merged separately.
    Granular,
    /// `atomic`: the object is replaced as a whole.
    Atomic,
}

/// `additionalProperties`, which may be absent, a boolean or a schema.
#[derive(Debug, Clone, Default)]
pub(super) enum Additional {
    #[default]
    Unspecified,
    Bool(bool),
    Schema(Box<Node>),
}

/// A compiled `pattern` (source kept for messages).
#[derive(Debug, Clone)]
pub(super) struct Pattern {
    pub(super) source: String,
    pub(super) regex: Regex,
}

/// One compiled schema node; read-only accessors expose what the server needs.
#[derive(Debug, Clone, Default)]
pub struct Node {
    pub(super) json_type: Option<JsonType>,
    pub(super) properties: BTreeMap<String, Node>,
    pub(super) additional: Additional,
    pub(super) items: Option<Box<Node>>,
    pub(super) required: Vec<String>,
    pub(super) enum_values: Option<Vec<Value>>,
    pub(super) minimum: Option<Number>,
    pub(super) maximum: Option<Number>,
    pub(super) exclusive_minimum: bool,
    pub(super) exclusive_maximum: bool,
    pub(super) multiple_of: Option<Number>,
    pub(super) min_length: Option<u64>,
    pub(super) max_length: Option<u64>,
    pub(super) pattern: Option<Pattern>,
    pub(super) format: Option<String>,
    pub(super) min_items: Option<u64>,
    pub(super) max_items: Option<u64>,
    pub(super) unique_items: bool,
    pub(super) min_properties: Option<u64>,
    pub(super) max_properties: Option<u64>,
    pub(super) nullable: bool,
    pub(super) default: Option<Value>,
    pub(super) all_of: Vec<Node>,
    pub(super) any_of: Vec<Node>,
    pub(super) one_of: Vec<Node>,
    pub(super) not: Option<Box<Node>>,
    pub(super) preserve_unknown: bool,
    pub(super) int_or_string: bool,
    pub(super) embedded: bool,
    pub(super) list_type: Option<ListType>,
    pub(super) list_map_keys: Vec<String>,
    pub(super) map_type: Option<MapType>,
}

impl Node {
    /// The declared `type`, if any.
    pub fn json_type(&self) -> Option<JsonType> {
        self.json_type
    }

    /// The schema of a named property (or, failing that, of `additionalProperties`).
    pub fn child(&self, name: &str) -> Option<&Node> {
        self.properties
            .get(name)
            .or_else(|| self.additional_properties())
    }

    /// The schema declared under `properties` for `name`, if any.
    pub fn property(&self, name: &str) -> Option<&Node> {
        self.properties.get(name)
    }

    /// All declared properties, sorted by name.
    pub fn properties(&self) -> impl Iterator<Item = (&str, &Node)> {
        self.properties.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// The `additionalProperties` schema, if it is a schema (not a boolean).
    pub fn additional_properties(&self) -> Option<&Node> {
        match &self.additional {
            Additional::Schema(s) => Some(s),
            _ => None,
        }
    }

    /// The `items` schema, if any.
    pub fn items(&self) -> Option<&Node> {
        self.items.as_deref()
    }

    /// The `required` property names.
    pub fn required(&self) -> &[String] {
        &self.required
    }

    /// The `default` value, if any.
    pub fn default_value(&self) -> Option<&Value> {
        self.default.as_ref()
    }

    /// Whether `nullable: true`.
    pub fn is_nullable(&self) -> bool {
        self.nullable
    }

    /// Whether `x-kubernetes-preserve-unknown-fields: true` at this node.
    pub fn preserves_unknown_fields(&self) -> bool {
        self.preserve_unknown
    }

    /// Whether pruning keeps fields this node does not declare (preserve-unknown-fields or `additionalProperties: true`).
    pub fn keeps_unknown_fields(&self) -> bool {
        self.preserve_unknown || matches!(self.additional, Additional::Bool(true))
    }

    /// Whether `x-kubernetes-int-or-string: true`.
    pub fn is_int_or_string(&self) -> bool {
        self.int_or_string
    }

    /// Whether `x-kubernetes-embedded-resource: true`.
    pub fn is_embedded_resource(&self) -> bool {
        self.embedded
    }

    /// The `x-kubernetes-list-type`, if any.
    pub fn list_type(&self) -> Option<ListType> {
        self.list_type
    }

    /// The `x-kubernetes-list-map-keys` (empty if none).
    pub fn list_map_keys(&self) -> &[String] {
        &self.list_map_keys
    }

    /// The `x-kubernetes-map-type`, if any.
    pub fn map_type(&self) -> Option<MapType> {
        self.map_type
    }

    /// Compiles one schema node at schema path `path`, `depth` levels down.
    pub(super) fn compile(value: &Value, path: &str, depth: usize) -> Result<Node, SchemaError> {
        Node::compile_boxed(value, path, depth)
            .map(|n| *n)
            .map_err(|e| *e)
    }

    /// Compiles into a heap node: the recursion keeps only pointers in its stack
    /// frames, so 128 levels fit comfortably in a worker thread's stack.
    fn compile_boxed(
        value: &Value,
        path: &str,
        depth: usize,
    ) -> Result<Box<Node>, Box<SchemaError>> {
        if depth > MAX_DEPTH {
            return Err(Box::new(SchemaError::TooDeep {
                path: path.to_string(),
                max: MAX_DEPTH,
            }));
        }
        let obj = value.as_object().ok_or_else(|| SchemaError::NotAnObject {
            path: path.to_string(),
        })?;
        let mut n = Box::<Node>::default();
        for (key, val) in obj {
            if val.is_null() && key != "default" {
                continue;
            }
            if !n.child_keyword(key, val, path, depth)? {
                n.scalar_keyword(key, val, path, depth)?;
            }
        }
        Ok(n)
    }

    /// Keywords holding sub-schemas. Each arm lives in its own small function
    /// so that the recursive path keeps small stack frames even in debug builds
    /// (128 levels must fit a worker thread's stack).
    fn child_keyword(
        &mut self,
        key: &str,
        val: &Value,
        path: &str,
        depth: usize,
    ) -> Result<bool, Box<SchemaError>> {
        match key {
            "properties" => self.compile_properties(val, path, depth)?,
            "additionalProperties" => {
                self.additional = match val {
                    Value::Bool(b) => Additional::Bool(*b),
                    _ => Additional::Schema(sub_schema(val, path, "additionalProperties", depth)?),
                }
            }
            "items" => {
                if val.is_array() {
                    return Err(Kw { path, key }
                        .invalid("must be a single schema, not an array of schemas"));
                }
                self.items = Some(sub_schema(val, path, "items", depth)?);
            }
            "allOf" => self.all_of = Kw { path, key }.schemas(val, depth)?,
            "anyOf" => self.any_of = Kw { path, key }.schemas(val, depth)?,
            "oneOf" => self.one_of = Kw { path, key }.schemas(val, depth)?,
            "not" => self.not = Some(sub_schema(val, path, "not", depth)?),
            _ => return Ok(false),
        }
        Ok(true)
    }

    #[inline(never)]
    fn compile_properties(
        &mut self,
        val: &Value,
        path: &str,
        depth: usize,
    ) -> Result<(), Box<SchemaError>> {
        let props = Kw {
            path,
            key: "properties",
        }
        .object(val)?;
        for (name, sub) in props {
            let child = sub_schema(sub, path, &format!("properties[{name}]"), depth)?;
            self.properties.insert(name.clone(), *child);
        }
        Ok(())
    }

    /// Keywords with literal values (no recursion into schemas).
    #[inline(never)]
    fn scalar_keyword(
        &mut self,
        key: &str,
        val: &Value,
        path: &str,
        depth: usize,
    ) -> Result<(), Box<SchemaError>> {
        let n = self;
        let kw = Kw { path, key };
        match key {
            "type" => n.json_type = kw.json_type(val)?,
            "required" => n.required = kw.strings(val)?,
            "enum" => {
                let values = kw.array(val)?;
                kw.shallow_enough(val, depth)?;
                n.enum_values = Some(values.clone());
            }
            "minimum" => n.minimum = Some(kw.number(val)?),
            "maximum" => n.maximum = Some(kw.number(val)?),
            "exclusiveMinimum" => n.exclusive_minimum = kw.boolean(val)?,
            "exclusiveMaximum" => n.exclusive_maximum = kw.boolean(val)?,
            "multipleOf" => {
                let m = kw.number(val)?;
                if m.as_f64().is_none_or(|f| f <= 0.0) {
                    return Err(kw.invalid("must be greater than 0"));
                }
                n.multiple_of = Some(m);
            }
            "minLength" => n.min_length = Some(kw.count(val)?),
            "maxLength" => n.max_length = Some(kw.count(val)?),
            "minItems" => n.min_items = Some(kw.count(val)?),
            "maxItems" => n.max_items = Some(kw.count(val)?),
            "minProperties" => n.min_properties = Some(kw.count(val)?),
            "maxProperties" => n.max_properties = Some(kw.count(val)?),
            "uniqueItems" => n.unique_items = kw.boolean(val)?,
            "pattern" => n.pattern = Some(compile_pattern(path, kw.string(val)?)?),
            "format" => n.format = Some(kw.string(val)?.to_string()),
            "nullable" => n.nullable = kw.boolean(val)?,
            "default" => {
                kw.shallow_enough(val, depth)?;
                n.default = Some(val.clone());
            }
            "x-kubernetes-preserve-unknown-fields" => n.preserve_unknown = kw.boolean(val)?,
            "x-kubernetes-int-or-string" => n.int_or_string = kw.boolean(val)?,
            "x-kubernetes-embedded-resource" => n.embedded = kw.boolean(val)?,
            "x-kubernetes-list-type" => {
                n.list_type = Some(match kw.string(val)? {
                    "atomic" => ListType::Atomic,
                    "set" => ListType::Set,
                    "map" => ListType::Map,
                    _ => {
                        return Err(kw.invalid("supported values: \"atomic\", \"set\", \"map\""));
                    }
                })
            }
            "x-kubernetes-list-map-keys" => n.list_map_keys = kw.strings(val)?,
            "x-kubernetes-map-type" => {
                n.map_type = Some(match kw.string(val)? {
                    "granular" => MapType::Granular,
                    "atomic" => MapType::Atomic,
                    _ => return Err(kw.invalid("supported values: \"granular\", \"atomic\"")),
                })
            }
            // CRD schemas are self-contained: kube-apiserver rejects references.
            "$ref" => {
                return Err(Box::new(SchemaError::Unsupported {
                    path: path.to_string(),
                    keyword: key.to_string(),
                }));
            }
            _ => {}
        }
        Ok(())
    }
}

/// Compiles the sub-schema at `{path}.{step}`, one level deeper.
#[inline(never)]
fn sub_schema(
    val: &Value,
    path: &str,
    step: &str,
    depth: usize,
) -> Result<Box<Node>, Box<SchemaError>> {
    Node::compile_boxed(val, &format!("{path}.{step}"), depth + 1)
}

/// Compiles a pattern once; the size limit keeps user-supplied regexes cheap.
fn compile_pattern(path: &str, source: &str) -> Result<Pattern, Box<SchemaError>> {
    let regex = RegexBuilder::new(source)
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| SchemaError::InvalidPattern {
            path: path.to_string(),
            pattern: source.to_string(),
            // The regex crate's messages span lines; an API message should not.
            message: e
                .to_string()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
        })?;
    Ok(Pattern {
        source: source.to_string(),
        regex,
    })
}

/// A keyword being parsed, for typed extraction with uniform error messages.
struct Kw<'a> {
    path: &'a str,
    key: &'a str,
}

impl Kw<'_> {
    fn invalid(&self, message: &str) -> Box<SchemaError> {
        Box::new(SchemaError::InvalidKeyword {
            path: self.path.to_string(),
            keyword: self.key.to_string(),
            message: message.to_string(),
        })
    }

    fn json_type(&self, v: &Value) -> Result<Option<JsonType>, Box<SchemaError>> {
        let s = self.string(v)?;
        if s.is_empty() {
            return Ok(None);
        }
        JsonType::parse(s).map(Some).ok_or_else(|| {
            self.invalid(&format!(
                "{}: supported values: \"array\", \"boolean\", \"integer\", \"number\", \"object\", \"string\"",
                json::quote(s)
            ))
        })
    }

    fn string<'v>(&self, v: &'v Value) -> Result<&'v str, Box<SchemaError>> {
        v.as_str().ok_or_else(|| self.invalid("must be a string"))
    }

    fn boolean(&self, v: &Value) -> Result<bool, Box<SchemaError>> {
        v.as_bool().ok_or_else(|| self.invalid("must be a boolean"))
    }

    fn number(&self, v: &Value) -> Result<Number, Box<SchemaError>> {
        match v {
            Value::Number(n) => Ok(n.clone()),
            _ => Err(self.invalid("must be a number")),
        }
    }

    /// A non-negative integer keyword such as `maxLength` (2.0 is accepted as 2).
    fn count(&self, v: &Value) -> Result<u64, Box<SchemaError>> {
        let err = || self.invalid("must be a non-negative integer");
        match v {
            Value::Number(n) => n
                .as_u64()
                .or_else(|| {
                    n.as_f64()
                        .filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f < 1.8e19)
                        .map(|f| f as u64)
                })
                .ok_or_else(err),
            _ => Err(err()),
        }
    }

    fn array<'v>(&self, v: &'v Value) -> Result<&'v Vec<Value>, Box<SchemaError>> {
        v.as_array().ok_or_else(|| self.invalid("must be an array"))
    }

    fn object<'v>(&self, v: &'v Value) -> Result<&'v Map<String, Value>, Box<SchemaError>> {
        v.as_object()
            .ok_or_else(|| self.invalid("must be an object"))
    }

    fn strings(&self, v: &Value) -> Result<Vec<String>, Box<SchemaError>> {
        self.array(v)?
            .iter()
            .map(|s| {
                s.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| self.invalid("must be an array of strings"))
            })
            .collect()
    }

    fn schemas(&self, v: &Value, depth: usize) -> Result<Vec<Node>, Box<SchemaError>> {
        let items = self.array(v)?;
        let mut out = Vec::with_capacity(items.len());
        for (i, s) in items.iter().enumerate() {
            out.push(*sub_schema(
                s,
                self.path,
                &format!("{}[{i}]", self.key),
                depth,
            )?);
        }
        Ok(out)
    }

    /// Literal values (`default`, `enum`) count towards the depth limit too.
    fn shallow_enough(&self, v: &Value, depth: usize) -> Result<(), Box<SchemaError>> {
        if json::depth_exceeds(v, MAX_DEPTH.saturating_sub(depth)) {
            return Err(Box::new(SchemaError::TooDeep {
                path: format!("{}.{}", self.path, self.key),
                max: MAX_DEPTH,
            }));
        }
        Ok(())
    }
}
