//! Crossplane field paths: `metadata.name`, `spec.containers[0].name`, `data[.config.yml]`,
//! `metadata.annotations['crossplane.io/external-name']`, `spec.items[0][8]`, `[42]`.
//!
//! Patches, readiness checks and connection details of Crossplane YAML name fields this way,
//! and users see the error messages, so this module follows crossplane-runtime's `fieldpath`
//! package: the grammar (a period separates fields; brackets hold either an array index, an
//! unsigned 32-bit number, or a field name in which periods are not separators; quotes around
//! a bracketed name are dropped), reads that tell "not found" from "wrong type", writes that
//! create missing objects and grow arrays with nulls (up to index [`MAX_INDEX`]), deletes,
//! `[*]` wildcard expansion, and the merge used by patch policies ([`merge_values`]). It is written
//! by hand because it is a small grammar with Crossplane-specific rules that no JSONPath or
//! JSON-pointer crate has.

pub(crate) mod merge;

use std::fmt;
use std::str::FromStr;

use serde_json::{Map, Value};

pub use merge::{MergeOptions, merge_values};

/// The largest array index a write may use (crossplane-runtime's `DefaultMaxFieldPathIndex`),
/// so that a path such as `spec.items[4000000000]` cannot allocate gigabytes of nulls.
pub const MAX_INDEX: usize = 1024;

/// The field name that stands for "every element or key" in [`expand_wildcards`].
pub const WILDCARD: &str = "*";

/// One step of a field path.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Segment {
    /// A field of an object.
    Field(String),
    /// An element of an array.
    Index(usize),
}

/// A parsed field path.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct FieldPath {
    segments: Vec<Segment>,
}

/// Why a field path could not be parsed, read or written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FieldPathError {
    /// The path is not valid field path syntax.
    #[error("cannot parse path {path:?}: {message} at position {position}")]
    Parse {
        /// The path as given.
        path: String,
        /// What is wrong, e.g. `unexpected '.'`.
        message: String,
        /// The byte offset of the problem.
        position: usize,
    },
    /// A field along the path does not exist.
    #[error("{path}: no such field")]
    NoSuchField {
        /// The path up to and including the missing field.
        path: String,
    },
    /// An index along the path is past the end of its array.
    #[error("{path}: no such element")]
    NoSuchElement {
        /// The path up to and including the missing element.
        path: String,
    },
    /// A read met something other than an object where a field was named.
    #[error("{path}: not an object")]
    NotAnObject {
        /// The path of the value that is not an object.
        path: String,
    },
    /// A read met something other than an array where an index was given.
    #[error("{path}: not an array")]
    NotAnArray {
        /// The path of the value that is not an array.
        path: String,
    },
    /// A write or delete met something other than an object where a field was named.
    #[error("{path} is not an object")]
    WriteNotAnObject {
        /// The path of the value that is not an object.
        path: String,
    },
    /// A write or delete met something other than an array where an index was given.
    #[error("{path} is not an array")]
    WriteNotAnArray {
        /// The path of the value that is not an array.
        path: String,
    },
    /// A write used an index larger than [`MAX_INDEX`].
    #[error("index {index} is greater than max allowed index {max}")]
    IndexTooLarge {
        /// The index asked for.
        index: usize,
        /// The largest allowed index.
        max: usize,
    },
    /// A wildcard stands where there is neither an object nor an array to expand.
    #[error("{path:?}: unexpected wildcard usage")]
    UnexpectedWildcard {
        /// The path up to the wildcard.
        path: String,
    },
    /// A value read is not of the type the caller asked for.
    #[error("{path}: not a {expected}")]
    WrongType {
        /// The full path read.
        path: String,
        /// What was expected, e.g. `string`.
        expected: &'static str,
    },
}

impl FieldPathError {
    /// Whether the error means the path does not exist (as opposed to a malformed path or a
    /// value of the wrong type along the way): Crossplane skips optional patches on this.
    pub fn is_not_found(&self) -> bool {
        matches!(self, FieldPathError::NoSuchField { .. } | FieldPathError::NoSuchElement { .. })
    }
}

impl FieldPath {
    /// Parses a field path.
    pub fn parse(path: &str) -> Result<FieldPath, FieldPathError> {
        Parser { input: path, pos: 0, segments: Vec::new() }.run()
    }

    /// A path made of the given segments.
    pub fn from_segments(segments: Vec<Segment>) -> FieldPath {
        FieldPath { segments }
    }

    /// The segments, in order.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// Whether any segment is the `*` wildcard.
    pub fn has_wildcard(&self) -> bool {
        self.segments.iter().any(|s| matches!(s, Segment::Field(f) if f == WILDCARD))
    }

    /// The value at this path. An empty path names the root itself.
    pub fn get<'a>(&self, root: &'a Value) -> Result<&'a Value, FieldPathError> {
        let mut current = root;
        for (i, segment) in self.segments.iter().enumerate() {
            current = match segment {
                Segment::Field(name) => {
                    let Value::Object(map) = current else {
                        return Err(FieldPathError::NotAnObject { path: render(&self.segments[..i]) });
                    };
                    map.get(name)
                        .ok_or_else(|| FieldPathError::NoSuchField { path: render(&self.segments[..=i]) })?
                }
                Segment::Index(index) => {
                    let Value::Array(items) = current else {
                        return Err(FieldPathError::NotAnArray { path: render(&self.segments[..i]) });
                    };
                    items
                        .get(*index)
                        .ok_or_else(|| FieldPathError::NoSuchElement { path: render(&self.segments[..=i]) })?
                }
            };
        }
        Ok(current)
    }

    /// Sets the value at this path, creating missing objects and arrays on the way and growing
    /// arrays with nulls. A null met on the way counts as missing. An empty path replaces the
    /// root.
    pub fn set(&self, root: &mut Value, value: Value) -> Result<(), FieldPathError> {
        if let Some(index) = self.segments.iter().find_map(|s| match s {
            Segment::Index(i) if *i > MAX_INDEX => Some(*i),
            _ => None,
        }) {
            return Err(FieldPathError::IndexTooLarge { index, max: MAX_INDEX });
        }
        let Some((last, parents)) = self.segments.split_last() else {
            *root = value;
            return Ok(());
        };
        let mut current = root;
        for (i, segment) in parents.iter().enumerate() {
            current = child_for_write(current, segment, &self.segments[..i])?;
        }
        match last {
            Segment::Field(name) => {
                if current.is_null() {
                    *current = Value::Object(Map::new());
                }
                let Value::Object(map) = current else {
                    return Err(FieldPathError::WriteNotAnObject { path: render(parents) });
                };
                map.insert(name.clone(), value);
            }
            Segment::Index(index) => {
                if current.is_null() {
                    *current = Value::Array(Vec::new());
                }
                let Value::Array(items) = current else {
                    return Err(FieldPathError::WriteNotAnArray { path: render(parents) });
                };
                if items.len() <= *index {
                    items.resize(index + 1, Value::Null);
                }
                items[*index] = value;
            }
        }
        Ok(())
    }

    /// Removes the value at this path: a field is removed from its object, an element from
    /// its array (later elements move up). A path that does not exist is not an error.
    pub fn delete(&self, root: &mut Value) -> Result<(), FieldPathError> {
        let Some((last, parents)) = self.segments.split_last() else {
            return Ok(());
        };
        let mut current = root;
        for (i, segment) in parents.iter().enumerate() {
            current = match segment {
                Segment::Field(name) => match current {
                    Value::Object(map) => match map.get_mut(name) {
                        Some(child) => child,
                        None => return Ok(()),
                    },
                    _ => {
                        return Err(FieldPathError::WriteNotAnObject { path: render(&parents[..i]) });
                    }
                },
                Segment::Index(index) => match current {
                    Value::Array(items) => match items.get_mut(*index) {
                        Some(child) => child,
                        None => return Ok(()),
                    },
                    _ => {
                        return Err(FieldPathError::WriteNotAnArray { path: render(&parents[..i]) });
                    }
                },
            };
        }
        match (last, current) {
            (Segment::Field(name), Value::Object(map)) => {
                map.remove(name);
            }
            (Segment::Index(index), Value::Array(items)) => {
                if *index < items.len() {
                    items.remove(*index);
                }
            }
            (Segment::Field(_), _) => {
                return Err(FieldPathError::WriteNotAnObject { path: render(parents) });
            }
            (Segment::Index(_), _) => {
                return Err(FieldPathError::WriteNotAnArray { path: render(parents) });
            }
        }
        Ok(())
    }

    /// Writes `value` at this path, merged with what is there according to `options`
    /// (`None`: replace). See [`merge_values`].
    pub fn merge(
        &self,
        root: &mut Value,
        value: Value,
        options: Option<&MergeOptions>,
    ) -> Result<(), FieldPathError> {
        let merged = match options {
            None => value,
            Some(options) => match self.get(root) {
                Ok(existing) => merge_values(existing.clone(), value, options),
                Err(e) if e.is_not_found() => value,
                Err(e) => return Err(e),
            },
        };
        self.set(root, merged)
    }
}

/// Steps into `segment` of `current` for a write, creating the child (or turning a null into
/// a container) as needed. Arrays are grown so the index exists.
fn child_for_write<'a>(
    current: &'a mut Value,
    segment: &Segment,
    before: &[Segment],
) -> Result<&'a mut Value, FieldPathError> {
    match segment {
        Segment::Field(name) => {
            if current.is_null() {
                *current = Value::Object(Map::new());
            }
            let Value::Object(map) = current else {
                return Err(FieldPathError::WriteNotAnObject { path: render(before) });
            };
            Ok(map.entry(name.clone()).or_insert(Value::Null))
        }
        Segment::Index(index) => {
            if current.is_null() {
                *current = Value::Array(Vec::new());
            }
            let Value::Array(items) = current else {
                return Err(FieldPathError::WriteNotAnArray { path: render(before) });
            };
            if items.len() <= *index {
                items.resize(index + 1, Value::Null);
            }
            Ok(&mut items[*index])
        }
    }
}

/// Renders segments back to a path: `.field` (or `[field]` if it holds a period or is the
/// wildcard) and `[index]`, without a leading period.
fn render(segments: &[Segment]) -> String {
    let mut out = String::new();
    for segment in segments {
        match segment {
            Segment::Field(name) if name == WILDCARD || name.contains('.') => {
                out.push('[');
                out.push_str(name);
                out.push(']');
            }
            Segment::Field(name) => {
                out.push('.');
                out.push_str(name);
            }
            Segment::Index(index) => {
                out.push('[');
                out.push_str(&index.to_string());
                out.push(']');
            }
        }
    }
    match out.strip_prefix('.') {
        Some(rest) => rest.to_string(),
        None => out,
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&render(&self.segments))
    }
}

impl FromStr for FieldPath {
    type Err = FieldPathError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        FieldPath::parse(s)
    }
}

/// The value at `path` in `root`.
pub fn get_value<'a>(root: &'a Value, path: &str) -> Result<&'a Value, FieldPathError> {
    FieldPath::parse(path)?.get(root)
}

/// The string at `path` in `root`.
pub fn get_string<'a>(root: &'a Value, path: &str) -> Result<&'a str, FieldPathError> {
    get_value(root, path)?
        .as_str()
        .ok_or_else(|| FieldPathError::WrongType { path: path.to_string(), expected: "string" })
}

/// The boolean at `path` in `root`.
pub fn get_bool(root: &Value, path: &str) -> Result<bool, FieldPathError> {
    get_value(root, path)?
        .as_bool()
        .ok_or_else(|| FieldPathError::WrongType { path: path.to_string(), expected: "bool" })
}

/// Sets `value` at `path` in `root` (see [`FieldPath::set`]).
pub fn set_value(root: &mut Value, path: &str, value: Value) -> Result<(), FieldPathError> {
    FieldPath::parse(path)?.set(root, value)
}

/// Deletes `path` from `root` (see [`FieldPath::delete`]).
pub fn delete_field(root: &mut Value, path: &str) -> Result<(), FieldPathError> {
    FieldPath::parse(path)?.delete(root)
}

/// Every concrete path that `path`'s `*` wildcards stand for in `root`: each index of an
/// array, each key of an object (in key order). As in Crossplane, only paths that exist,
/// leaf included, are returned: a wildcard reaches existing fields, it does not create any.
pub fn expand_wildcards(root: &Value, path: &FieldPath) -> Result<Vec<FieldPath>, FieldPathError> {
    let mut out = Vec::new();
    expand_into(root, path.segments.clone(), &mut out)?;
    Ok(out)
}

fn expand_into(root: &Value, segments: Vec<Segment>, out: &mut Vec<FieldPath>) -> Result<(), FieldPathError> {
    let mut current = root;
    for (i, segment) in segments.iter().enumerate() {
        if matches!(segment, Segment::Field(f) if f == WILDCARD) {
            let replacements: Vec<Segment> = match current {
                Value::Array(items) => (0..items.len()).map(Segment::Index).collect(),
                Value::Object(map) => {
                    let mut keys: Vec<&String> = map.keys().collect();
                    keys.sort();
                    keys.into_iter().map(|k| Segment::Field(k.clone())).collect()
                }
                _ => return Err(FieldPathError::UnexpectedWildcard { path: render(&segments[..i]) }),
            };
            for replacement in replacements {
                let mut expanded = segments.clone();
                expanded[i] = replacement;
                expand_into(root, expanded, out)?;
            }
            return Ok(());
        }
        let prefix = FieldPath::from_segments(segments[..=i].to_vec());
        current = match prefix.get(root) {
            Ok(v) => v,
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(e),
        };
    }
    out.push(FieldPath::from_segments(segments));
    Ok(())
}

/// A lexer-parser for the grammar in the module comment.
struct Parser<'a> {
    input: &'a str,
    pos: usize,
    segments: Vec<Segment>,
}

impl Parser<'_> {
    fn error(&self, message: &str, position: usize) -> FieldPathError {
        FieldPathError::Parse { path: self.input.to_string(), message: message.to_string(), position }
    }

    fn run(mut self) -> Result<FieldPath, FieldPathError> {
        let bytes = self.input.as_bytes();
        // Each iteration reads a (possibly empty) field name, then the separator after it.
        loop {
            let start = self.pos;
            while self.pos < bytes.len() && !matches!(bytes[self.pos], b'.' | b'[' | b']') {
                self.pos += 1;
            }
            if self.pos > start {
                self.segments.push(field(&self.input[start..self.pos]));
            }
            if self.pos >= bytes.len() {
                return Ok(FieldPath { segments: self.segments });
            }
            match bytes[self.pos] {
                b']' => return Err(self.error("unexpected ']'", self.pos)),
                b'.' => {
                    if self.pos == 0 || self.pos == bytes.len() - 1 {
                        return Err(self.error("unexpected '.'", self.pos));
                    }
                    self.pos += 1;
                    match bytes[self.pos] {
                        b'.' => return Err(self.error("unexpected '.'", self.pos)),
                        b'[' => return Err(self.error("unexpected '['", self.pos)),
                        _ => {}
                    }
                }
                _ => self.bracket()?,
            }
        }
    }

    /// Reads `[...]` starting at the left bracket.
    fn bracket(&mut self) -> Result<(), FieldPathError> {
        let open = self.pos;
        let rest = &self.input[open + 1..];
        let Some(close_rel) = rest.find(']') else {
            return Err(self.error("unterminated '['", open));
        };
        let inner = &rest[..close_rel];
        if inner.is_empty() {
            return Err(self.error("unexpected ']'", open + 1));
        }
        if let Some(left) = inner.find('[') {
            return Err(self.error("unexpected '['", open + 1 + left));
        }
        self.segments.push(field_or_index(inner));
        self.pos = open + 1 + close_rel + 1;
        Ok(())
    }
}

/// A bracketed segment: an index if it is an unsigned 32-bit number, else a field name.
fn field_or_index(s: &str) -> Segment {
    if s.bytes().all(|b| b.is_ascii_digit())
        && let Ok(index) = s.parse::<u32>()
    {
        return Segment::Index(index as usize);
    }
    field(s)
}

/// A field segment; quotes around the name (as in `['a.b']`) are not part of it.
fn field(s: &str) -> Segment {
    Segment::Field(s.trim_matches(|c| c == '\'' || c == '"').to_string())
}

#[cfg(test)]
mod tests;
