//! JSON Patch (RFC 6902), the `application/json-patch+json` body.
//!
//! Owns validating a patch body and applying it to a stored object. The
//! behaviour follows the Go library the Kubernetes API server uses rather than
//! the letter of the RFC where the two differ, because clients (kubectl,
//! client-go, kube-rs) are written against what Kubernetes accepts:
//!
//! - `test` of a member missing from an existing object compares as `null`;
//! - numbers compare by value, so `1` and `1.0` are equal;
//! - `add` to an existing member replaces it, `/-` appends to an array.
//!
//! Errors separate a malformed body (400), an oversized one (413) and a
//! well-formed patch that does not apply, failed `test`s included (422).

use super::{MAX_DEPTH, depth_of, exceeds_depth, json_equal, measure, render, shorten, type_name};
use serde_json::{Map, Value};
use thiserror::Error;

/// The most operations one patch may hold; Kubernetes answers 413 above it.
pub const MAX_OPERATIONS: usize = 10_000;

/// The most data, in approximate JSON bytes, that the `copy` operations and
/// the deepening `move` operations of one patch may carry in total.
///
/// Each copy can double the document, so a short body could otherwise grow
/// the object exponentially; and a move to a deeper path must walk the moved
/// value to keep the document within [`MAX_DEPTH`], so thousands of such
/// moves of a large subtree would cost minutes. The bound is far above what
/// any legitimate patch carries.
pub const MAX_CARRIED_BYTES: usize = 16 * 1024 * 1024;

/// Why a JSON Patch could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum JsonPatchError {
    /// The body is not a valid JSON Patch document.
    #[error("malformed JSON patch: {0}")]
    Malformed(String),
    /// The body holds more than [`MAX_OPERATIONS`] operations.
    #[error("the JSON patch has {count} operations, more than the allowed {max}")]
    TooManyOperations {
        /// How many operations the body held.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// A `test` operation found a different value.
    #[error("the test operation at index {index} failed: {path} is {actual}, not {expected}")]
    TestFailed {
        /// The position of the operation in the patch.
        index: usize,
        /// The operation's path.
        path: String,
        /// The value found, as (possibly shortened) JSON.
        actual: String,
        /// The value the operation expected, as (possibly shortened) JSON.
        expected: String,
    },
    /// A well-formed operation does not fit the document.
    #[error("the {op} operation at index {index} failed: {reason}")]
    OperationFailed {
        /// The position of the operation in the patch.
        index: usize,
        /// The operation's name.
        op: &'static str,
        /// The operation's path.
        path: String,
        /// What went wrong, naming the paths involved.
        reason: String,
    },
    /// The stored object nests deeper than [`MAX_DEPTH`].
    #[error("the object to patch is nested more than {max} levels deep")]
    ObjectTooDeep {
        /// The limit.
        max: usize,
    },
}

impl JsonPatchError {
    /// The HTTP status a server should answer with.
    pub fn status_code(&self) -> u16 {
        match self {
            JsonPatchError::Malformed(_) => 400,
            JsonPatchError::TooManyOperations { .. } => 413,
            JsonPatchError::TestFailed { .. }
            | JsonPatchError::OperationFailed { .. }
            | JsonPatchError::ObjectTooDeep { .. } => 422,
        }
    }
}

/// Applies the JSON Patch `ops` to `doc` and returns the patched document.
///
/// The operations apply in order to a copy; on any error `doc` is unaffected
/// and no partial result escapes.
pub fn apply(doc: &Value, ops: &Value) -> Result<Value, JsonPatchError> {
    let ops = parse(ops)?;
    if exceeds_depth(doc, MAX_DEPTH) {
        return Err(JsonPatchError::ObjectTooDeep { max: MAX_DEPTH });
    }
    let mut doc = doc.clone();
    let mut carried = 0usize;
    for (index, op) in ops.iter().enumerate() {
        apply_one(&mut doc, op, &mut carried).map_err(|failure| match failure {
            Failure::Test { actual, expected } => JsonPatchError::TestFailed {
                index,
                path: shorten(op.path.text.to_string()),
                actual,
                expected,
            },
            Failure::Other(reason) => JsonPatchError::OperationFailed {
                index,
                op: op.kind.name(),
                path: shorten(op.path.text.to_string()),
                reason,
            },
        })?;
    }
    Ok(doc)
}

/// The six operations of RFC 6902.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Add,
    Remove,
    Replace,
    Move,
    Copy,
    Test,
}

const KINDS: [(&str, Kind); 6] = [
    ("add", Kind::Add),
    ("remove", Kind::Remove),
    ("replace", Kind::Replace),
    ("move", Kind::Move),
    ("copy", Kind::Copy),
    ("test", Kind::Test),
];

impl Kind {
    fn parse(name: &str) -> Option<Kind> {
        KINDS.iter().find(|(n, _)| *n == name).map(|&(_, k)| k)
    }

    fn name(self) -> &'static str {
        KINDS
            .iter()
            .find(|(_, k)| *k == self)
            .map_or("", |&(n, _)| n)
    }
}

/// A parsed JSON Pointer, keeping its text for messages.
#[derive(Debug)]
struct Pointer<'a> {
    text: &'a str,
    tokens: Vec<String>,
}

/// One validated operation, borrowing from the request body.
#[derive(Debug)]
struct Operation<'a> {
    kind: Kind,
    path: Pointer<'a>,
    from: Option<Pointer<'a>>,
    value: Option<&'a Value>,
}

/// Why one operation failed, before the index is attached.
enum Failure {
    Test { actual: String, expected: String },
    Other(String),
}

impl From<String> for Failure {
    fn from(reason: String) -> Self {
        Failure::Other(reason)
    }
}

/// Validates the whole body up front, so a malformed operation late in the
/// list is reported as 400 rather than after earlier ones were applied.
fn parse(ops: &Value) -> Result<Vec<Operation<'_>>, JsonPatchError> {
    let Value::Array(items) = ops else {
        return Err(JsonPatchError::Malformed(format!(
            "the body must be a JSON array of operations, not {}",
            type_name(ops)
        )));
    };
    if items.len() > MAX_OPERATIONS {
        return Err(JsonPatchError::TooManyOperations {
            count: items.len(),
            max: MAX_OPERATIONS,
        });
    }
    items
        .iter()
        .enumerate()
        .map(|(i, item)| parse_op(i, item))
        .collect()
}

fn parse_op(index: usize, item: &Value) -> Result<Operation<'_>, JsonPatchError> {
    let bad = |why: String| JsonPatchError::Malformed(format!("operation at index {index} {why}"));
    let Value::Object(fields) = item else {
        return Err(bad(format!("must be an object, not {}", type_name(item))));
    };
    let name = string_field(fields, "op").map_err(&bad)?;
    let kind = Kind::parse(name).ok_or_else(|| {
        let name = shorten(format!("{name:?}"));
        bad(format!(
            "has unknown op {name}; expected add, remove, replace, move, copy or test"
        ))
    })?;
    let path = pointer_field(fields, "path").map_err(&bad)?;
    let from = match kind {
        Kind::Move | Kind::Copy => Some(pointer_field(fields, "from").map_err(&bad)?),
        _ => None,
    };
    let value = match kind {
        Kind::Add | Kind::Replace | Kind::Test => {
            // Explicit null is a value (test-for-null relies on it); only a
            // missing key is an error.
            let value = fields
                .get("value")
                .ok_or_else(|| bad(format!("({}) has no \"value\"", kind.name())))?;
            if exceeds_depth(value, MAX_DEPTH) {
                return Err(bad(format!(
                    "has a value nested more than {MAX_DEPTH} levels deep"
                )));
            }
            Some(value)
        }
        _ => None,
    };
    Ok(Operation {
        kind,
        path,
        from,
        value,
    })
}

fn string_field<'a>(fields: &'a Map<String, Value>, key: &str) -> Result<&'a str, String> {
    match fields.get(key) {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(format!(
            "has a {key:?} that is {}, not a string",
            type_name(other)
        )),
        None => Err(format!("has no {key:?}")),
    }
}

fn pointer_field<'a>(fields: &'a Map<String, Value>, key: &str) -> Result<Pointer<'a>, String> {
    let text = string_field(fields, key)?;
    let tokens = parse_pointer(text).map_err(|why| {
        let text = shorten(format!("{text:?}"));
        format!("has a {key:?} of {text}, which is not a JSON pointer: {why}")
    })?;
    Ok(Pointer { text, tokens })
}

/// Splits a JSON Pointer (RFC 6901) into unescaped reference tokens.
fn parse_pointer(text: &str) -> Result<Vec<String>, &'static str> {
    if text.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = text.strip_prefix('/') else {
        return Err("it must be empty or start with \"/\"");
    };
    rest.split('/').map(unescape).collect()
}

fn unescape(token: &str) -> Result<String, &'static str> {
    let mut out = String::with_capacity(token.len());
    let mut chars = token.chars();
    while let Some(c) = chars.next() {
        if c != '~' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('0') => out.push('~'),
            Some('1') => out.push('/'),
            _ => return Err("\"~\" must be followed by \"0\" or \"1\""),
        }
    }
    Ok(out)
}

/// Renders the first `len` tokens back into pointer syntax for messages.
fn pointer_prefix(tokens: &[String], len: usize) -> String {
    let mut out = String::new();
    for token in tokens.iter().take(len) {
        out.push('/');
        out.push_str(&token.replace('~', "~0").replace('/', "~1"));
    }
    out
}

/// Like [`pointer_prefix`], but names the root in words.
fn at(tokens: &[String], len: usize) -> String {
    match len {
        0 => "the document root".to_string(),
        _ => shorten(pointer_prefix(tokens, len)),
    }
}

/// An array index token: digits without leading zeros, as RFC 6901 requires.
///
/// The Go library also accepts negative indices counted from the end; they are
/// an extension no Kubernetes client relies on, and are refused here.
fn parse_index(token: &str) -> Option<usize> {
    let digits_only = !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit());
    if !digits_only || (token.len() > 1 && token.starts_with('0')) {
        return None;
    }
    token.parse().ok()
}

fn bad_index(tokens: &[String], depth: usize, token: &str) -> String {
    let at = at(tokens, depth);
    format!("{token:?} is not a valid index into the array at {at}")
}

fn out_of_bounds(tokens: &[String], depth: usize, len: usize) -> String {
    let at = at(tokens, depth + 1);
    format!("{at} is out of bounds: the array has {len} elements")
}

fn missing(tokens: &[String], depth: usize) -> String {
    format!("{} does not exist", at(tokens, depth + 1))
}

fn not_container(tokens: &[String], depth: usize, found: &Value) -> String {
    let (target, parent) = (at(tokens, tokens.len()), at(tokens, depth));
    format!(
        "cannot reach {target} because {parent} is {}",
        type_name(found)
    )
}

/// Checks array index token `tokens[depth]` against `len`; `end_ok` admits
/// `len` itself, the insertion point just past the last element.
fn index(tokens: &[String], depth: usize, len: usize, end_ok: bool) -> Result<usize, String> {
    let token = tokens.get(depth).map_or("", String::as_str);
    let i = parse_index(token).ok_or_else(|| bad_index(tokens, depth, token))?;
    if i > len || (i == len && !end_ok) {
        return Err(out_of_bounds(tokens, depth, len));
    }
    Ok(i)
}

/// Steps from `cur` through `tokens[depth]`, which must name an existing member.
fn step<'d>(cur: &'d mut Value, tokens: &[String], depth: usize) -> Result<&'d mut Value, String> {
    let found = match cur {
        Value::Object(map) => tokens.get(depth).and_then(|t| map.get_mut(t)),
        Value::Array(items) => {
            let i = index(tokens, depth, items.len(), false)?;
            items.get_mut(i)
        }
        other => return Err(not_container(tokens, depth, other)),
    };
    found.ok_or_else(|| missing(tokens, depth))
}

/// Follows the first `upto` tokens from `doc`.
fn locate<'d>(doc: &'d mut Value, tokens: &[String], upto: usize) -> Result<&'d mut Value, String> {
    let mut cur = doc;
    for depth in 0..upto.min(tokens.len()) {
        cur = step(cur, tokens, depth)?;
    }
    Ok(cur)
}

fn apply_one(doc: &mut Value, op: &Operation<'_>, carried: &mut usize) -> Result<(), Failure> {
    let tokens = &op.path.tokens;
    let from = op.from.as_ref().map_or(&[][..], |p| &p.tokens[..]);
    let value = || op.value.cloned().unwrap_or(Value::Null);
    match op.kind {
        Kind::Add => {
            check_depth(tokens, op.value.map_or(0, depth_of))?;
            add(doc, tokens, value())?;
        }
        Kind::Remove => drop(remove(doc, tokens)?),
        Kind::Replace => {
            check_depth(tokens, op.value.map_or(0, depth_of))?;
            *locate(doc, tokens, tokens.len())? = value();
        }
        Kind::Move if from == &tokens[..] => {
            // Moving onto itself changes nothing, but the source must exist.
            locate(doc, from, from.len())?;
        }
        Kind::Move if tokens.starts_with(from) => {
            return Err(Failure::Other(format!(
                "cannot move {} into its own child {}",
                at(from, from.len()),
                at(tokens, tokens.len())
            )));
        }
        Kind::Move => {
            let value = remove(doc, from)?;
            // The value sat at depth from.len(), so a destination no deeper
            // keeps the document within MAX_DEPTH without walking it.
            if tokens.len() > from.len() {
                check_depth(tokens, carry(carried, &value)?)?;
            }
            add(doc, tokens, value)?;
        }
        Kind::Copy => {
            let source = locate(doc, from, from.len())?;
            check_depth(tokens, carry(carried, source)?)?;
            let value = source.clone();
            add(doc, tokens, value)?;
        }
        Kind::Test => {
            let expected = op.value.unwrap_or(&Value::Null);
            let actual = get_for_test(doc, tokens)?;
            if !json_equal(actual, expected) {
                return Err(Failure::Test {
                    actual: render(actual),
                    expected: render(expected),
                });
            }
        }
    }
    Ok(())
}

/// Like [`locate`], except that a member missing from an existing object
/// reads as `null`.
///
/// The Go library stores object members as nullable pointers, so a missing
/// key and an explicit `null` look the same to its `test`. Clients depend on
/// that: kube-rs adds the first finalizer with `test /metadata/finalizers ==
/// null` followed by `add`, on objects that have no `finalizers` key at all.
/// A missing parent or a bad array index is still an error, as in Go.
fn get_for_test<'d>(doc: &'d mut Value, tokens: &[String]) -> Result<&'d Value, String> {
    static NULL: Value = Value::Null;
    let Some((last, parents)) = tokens.split_last() else {
        return Ok(doc);
    };
    match locate(doc, tokens, parents.len())? {
        Value::Object(map) => Ok(map.get(last).unwrap_or(&NULL)),
        parent => Ok(step(parent, tokens, parents.len())?),
    }
}

/// Charges `value` to the patch's [`MAX_CARRIED_BYTES`] budget and returns
/// its depth, both from one walk.
fn carry(carried: &mut usize, value: &Value) -> Result<usize, String> {
    let (depth, size) = measure(value);
    *carried = carried.saturating_add(size);
    if *carried > MAX_CARRIED_BYTES {
        return Err(format!(
            "the patch copies or moves more than {MAX_CARRIED_BYTES} bytes in total"
        ));
    }
    Ok(depth)
}

/// Fails if a value `depth` levels deep placed at `tokens` would nest the
/// document deeper than [`MAX_DEPTH`].
fn check_depth(tokens: &[String], depth: usize) -> Result<(), String> {
    if tokens.len().saturating_add(depth) > MAX_DEPTH {
        return Err(format!(
            "the result would be nested more than {MAX_DEPTH} levels deep at {}",
            pointer_prefix(tokens, tokens.len())
        ));
    }
    Ok(())
}

fn add(doc: &mut Value, tokens: &[String], value: Value) -> Result<(), String> {
    let Some((last, parents)) = tokens.split_last() else {
        *doc = value;
        return Ok(());
    };
    let depth = parents.len();
    match locate(doc, tokens, depth)? {
        Value::Object(map) => drop(map.insert(last.clone(), value)),
        Value::Array(items) if last == "-" => items.push(value),
        Value::Array(items) => {
            // Inserting at len appends; beyond it would leave a hole.
            let i = index(tokens, depth, items.len(), true)?;
            items.insert(i, value);
        }
        other => return Err(not_container(tokens, depth, other)),
    }
    Ok(())
}

fn remove(doc: &mut Value, tokens: &[String]) -> Result<Value, String> {
    let Some((last, parents)) = tokens.split_last() else {
        return Err("the whole document cannot be removed".to_string());
    };
    let depth = parents.len();
    match locate(doc, tokens, depth)? {
        Value::Object(map) => {
            // With serde_json's preserve_order this moves the last key into
            // the gap; an order-keeping removal costs O(keys) per operation,
            // and Kubernetes itself does not keep map key order.
            map.remove(last).ok_or_else(|| missing(tokens, depth))
        }
        Value::Array(items) => {
            let i = index(tokens, depth, items.len(), false)?;
            Ok(items.remove(i))
        }
        other => Err(not_container(tokens, depth, other)),
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::nested_objects;
    use super::*;
    use serde_json::json;

    fn err(doc: Value, ops: Value) -> JsonPatchError {
        match apply(&doc, &ops) {
            Ok(v) => panic!("{ops} applied to {doc} gave {v}, expected an error"),
            Err(e) => e,
        }
    }

    #[test]
    #[rustfmt::skip]
    fn applies_each_operation() {
        // (document, patch, expected result)
        let cases = [
            (json!({}), json!([]), json!({})),
            (json!({"a":1}), json!([{"op":"add","path":"/b","value":2}]), json!({"a":1,"b":2})),
            (json!({"a":1}), json!([{"op":"add","path":"/a","value":[]}]), json!({"a":[]})),
            (json!({"a":[1,2]}), json!([{"op":"add","path":"/a/0","value":0}]), json!({"a":[0,1,2]})),
            (json!({"a":[1,2]}), json!([{"op":"add","path":"/a/2","value":3}]), json!({"a":[1,2,3]})),
            (json!({"a":[1]}), json!([{"op":"add","path":"/a/-","value":2}]), json!({"a":[1,2]})),
            (json!({"a":1}), json!([{"op":"add","path":"","value":[7]}]), json!([7])),
            (json!({"a":{}}), json!([{"op":"add","path":"/a/x","value":null}]), json!({"a":{"x":null}})),
            (json!({"a":1,"b":2}), json!([{"op":"remove","path":"/a"}]), json!({"b":2})),
            (json!({"a":null}), json!([{"op":"remove","path":"/a"}]), json!({})),
            (json!([1,2,3]), json!([{"op":"remove","path":"/1"}]), json!([1,3])),
            (json!({"a":1}), json!([{"op":"replace","path":"/a","value":{"b":2}}]), json!({"a":{"b":2}})),
            (json!([1,2]), json!([{"op":"replace","path":"/1","value":9}]), json!([1,9])),
            (json!({"a":1}), json!([{"op":"replace","path":"","value":2}]), json!(2)),
            (json!({"a":{"b":1}}), json!([{"op":"move","from":"/a/b","path":"/c"}]), json!({"a":{},"c":1})),
            (json!([1,2,3]), json!([{"op":"move","from":"/0","path":"/-"}]), json!([2,3,1])),
            (json!({"a":1}), json!([{"op":"move","from":"/a","path":"/a"}]), json!({"a":1})),
            (json!({"a":{"b":1}}), json!([{"op":"copy","from":"/a","path":"/c"}]), json!({"a":{"b":1},"c":{"b":1}})),
            (json!([1,2]), json!([{"op":"copy","from":"/1","path":"/0"}]), json!([2,1,2])),
            // JSON Pointer escapes, the empty key and digit-only object keys.
            (json!({"a~b":1,"c/d":2}), json!([{"op":"remove","path":"/a~0b"},{"op":"replace","path":"/c~1d","value":3}]), json!({"c/d":3})),
            (json!({"":{"":1}}), json!([{"op":"replace","path":"//","value":2}]), json!({"":{"":2}})),
            (json!({"7":1}), json!([{"op":"replace","path":"/7","value":2}]), json!({"7":2})),
            // test: numbers by value, objects regardless of key order,
            // explicit null and a missing member alike.
            (json!({"n":1}), json!([{"op":"test","path":"/n","value":1.0}]), json!({"n":1})),
            (json!({"n":[1.5,{"a":2,"b":3}]}), json!([{"op":"test","path":"/n","value":[1.5,{"b":3,"a":2.0}]}]), json!({"n":[1.5,{"a":2,"b":3}]})),
            (json!({"a":null}), json!([{"op":"test","path":"/a","value":null}]), json!({"a":null})),
            (json!({}), json!([{"op":"test","path":"/a","value":null}]), json!({})),
            (json!({"a":"x"}), json!([{"op":"test","path":"","value":{"a":"x"}}]), json!({"a":"x"})),
            // Operations see the results of earlier ones.
            (json!({}), json!([{"op":"add","path":"/a","value":[]},{"op":"add","path":"/a/-","value":1},{"op":"test","path":"/a/0","value":1}]), json!({"a":[1]})),
            // Members other than op/path/value/from are ignored.
            (json!({}), json!([{"op":"add","path":"/a","value":1,"comment":"x"}]), json!({"a":1})),
        ];
        for (doc, ops, expected) in cases {
            assert_eq!(apply(&doc, &ops), Ok(expected), "{ops} on {doc}");
        }
    }

    #[test]
    fn kube_rs_finalizer_sequences() {
        // First finalizer on an object that has none: test-for-null, then add.
        let add_first = json!([
            {"op":"test","path":"/metadata/finalizers","value":null},
            {"op":"add","path":"/metadata/finalizers","value":["x"]},
        ]);
        let with_x = json!({"metadata":{"name":"n","finalizers":["x"]}});
        assert_eq!(
            apply(&json!({"metadata":{"name":"n"}}), &add_first),
            Ok(with_x.clone())
        );
        // Someone else added one meanwhile: the precondition fails with 422.
        let e = err(json!({"metadata":{"finalizers":["a"]}}), add_first);
        assert_eq!(e.status_code(), 422);
        assert_eq!(
            e.to_string(),
            r#"the test operation at index 0 failed: /metadata/finalizers is ["a"], not null"#
        );
        // Appending to an existing list guards on the current list.
        let append = json!([
            {"op":"test","path":"/metadata/finalizers","value":["x"]},
            {"op":"add","path":"/metadata/finalizers/-","value":"y"},
        ]);
        let with_xy = json!({"metadata":{"name":"n","finalizers":["x","y"]}});
        assert_eq!(apply(&with_x, &append), Ok(with_xy.clone()));
        // Removal by index, guarded by a test of that index.
        let remove_x = json!([
            {"op":"test","path":"/metadata/finalizers/0","value":"x"},
            {"op":"remove","path":"/metadata/finalizers/0"},
        ]);
        let with_y = json!({"metadata":{"name":"n","finalizers":["y"]}});
        assert_eq!(apply(&with_xy, &remove_x), Ok(with_y.clone()));
        let e = err(with_y, remove_x.clone());
        assert_eq!(
            e.to_string(),
            r#"the test operation at index 0 failed: /metadata/finalizers/0 is "y", not "x""#
        );
        let e = err(json!({"metadata":{"finalizers":[]}}), remove_x);
        assert_eq!(e.status_code(), 422);
        assert!(
            e.to_string()
                .contains("/metadata/finalizers/0 is out of bounds"),
            "{e}"
        );
    }

    #[test]
    #[rustfmt::skip]
    fn rejects_malformed_bodies() {
        // (body, part of the message); all answered with 400.
        let cases = [
            (json!({"op":"add"}), "the body must be a JSON array of operations, not an object"),
            (json!("[]"), "not a string"),
            (json!([1]), "operation at index 0 must be an object, not a number"),
            (json!([{"path":"/a"}]), "operation at index 0 has no \"op\""),
            (json!([{"op":1,"path":"/a"}]), "\"op\" that is a number, not a string"),
            (json!([{"op":"merge","path":"/a"}]), "unknown op \"merge\""),
            (json!([{"op":"remove"}]), "has no \"path\""),
            (json!([{"op":"remove","path":null}]), "\"path\" that is null"),
            (json!([{"op":"remove","path":"a"}]), "must be empty or start with \"/\""),
            (json!([{"op":"remove","path":"/a~2"}]), "\"~\" must be followed by \"0\" or \"1\""),
            (json!([{"op":"remove","path":"/a~"}]), "\"~\" must be followed"),
            (json!([{"op":"add","path":"/a"}]), "(add) has no \"value\""),
            (json!([{"op":"test","path":"/a"}]), "(test) has no \"value\""),
            (json!([{"op":"move","path":"/a"}]), "has no \"from\""),
            (json!([{"op":"copy","path":"/a","from":"x"}]), "\"from\" of \"x\""),
            // The whole body is validated before anything is applied.
            (json!([{"op":"remove","path":"/missing"},{"op":"nope","path":""}]), "operation at index 1"),
        ];
        for (body, message) in cases {
            let e = err(json!({"a":1}), body.clone());
            assert!(matches!(e, JsonPatchError::Malformed(_)), "{body}: {e:?}");
            assert_eq!(e.status_code(), 400);
            assert!(e.to_string().starts_with("malformed JSON patch: "), "{e}");
            assert!(e.to_string().contains(message), "{body}: {e}");
        }
    }

    #[test]
    fn limits_the_number_of_operations() {
        let op = json!({"op":"test","path":"","value":{}});
        let ok = Value::Array(vec![op.clone(); MAX_OPERATIONS]);
        assert_eq!(apply(&json!({}), &ok), Ok(json!({})));
        // Counted before validation: a huge body of junk is still a 413.
        let too_many = Value::Array(vec![json!(0); MAX_OPERATIONS + 1]);
        let e = err(json!({}), too_many);
        assert_eq!(
            e,
            JsonPatchError::TooManyOperations {
                count: 10_001,
                max: 10_000
            }
        );
        assert_eq!(e.status_code(), 413);
        assert_eq!(
            e.to_string(),
            "the JSON patch has 10001 operations, more than the allowed 10000"
        );
    }

    #[test]
    #[rustfmt::skip]
    fn reports_operations_that_do_not_apply() {
        // (document, patch, full message); all answered with 422.
        let cases = [
            (json!({}), json!([{"op":"remove","path":"/a"}]), "the remove operation at index 0 failed: /a does not exist"),
            (json!({}), json!([{"op":"replace","path":"/a","value":1}]), "the replace operation at index 0 failed: /a does not exist"),
            (json!({}), json!([{"op":"add","path":"/a/b","value":1}]), "the add operation at index 0 failed: /a does not exist"),
            (json!({}), json!([{"op":"test","path":"/a/b","value":null}]), "the test operation at index 0 failed: /a does not exist"),
            (json!({"a":"s"}), json!([{"op":"add","path":"/a/b","value":1}]), "the add operation at index 0 failed: cannot reach /a/b because /a is a string"),
            (json!([1]), json!([{"op":"add","path":"/2","value":1}]), "the add operation at index 0 failed: /2 is out of bounds: the array has 1 elements"),
            (json!([1]), json!([{"op":"remove","path":"/1"}]), "the remove operation at index 0 failed: /1 is out of bounds: the array has 1 elements"),
            (json!([1]), json!([{"op":"remove","path":"/-"}]), "the remove operation at index 0 failed: \"-\" is not a valid index into the array at the document root"),
            (json!({"a":[1,2]}), json!([{"op":"replace","path":"/a/01","value":1}]), "the replace operation at index 0 failed: \"01\" is not a valid index into the array at /a"),
            (json!({"a":[1]}), json!([{"op":"add","path":"/a/-1","value":0}]), "the add operation at index 0 failed: \"-1\" is not a valid index into the array at /a"),
            (json!({}), json!([{"op":"remove","path":""}]), "the remove operation at index 0 failed: the whole document cannot be removed"),
            (json!({"a":{}}), json!([{"op":"move","from":"/a","path":"/a/b"}]), "the move operation at index 0 failed: cannot move /a into its own child /a/b"),
            (json!({}), json!([{"op":"move","from":"/x","path":"/y"}]), "the move operation at index 0 failed: /x does not exist"),
            (json!({}), json!([{"op":"copy","from":"/x","path":"/y"}]), "the copy operation at index 0 failed: /x does not exist"),
            (json!({"a":1}), json!([{"op":"add","path":"/b","value":1},{"op":"test","path":"/a","value":"1"}]), "the test operation at index 1 failed: /a is 1, not \"1\""),
            (json!({"a":[]}), json!([{"op":"test","path":"/a/0","value":null}]), "the test operation at index 0 failed: /a/0 is out of bounds: the array has 0 elements"),
        ];
        for (doc, ops, message) in cases {
            let e = err(doc, ops);
            assert_eq!(e.status_code(), 422, "{e}");
            assert_eq!(e.to_string(), message);
        }
    }

    #[test]
    fn bounds_depth_and_growth() {
        let deep = nested_objects(MAX_DEPTH + 1);
        let e = err(
            json!({}),
            json!([{"op":"add","path":"/a","value":deep.clone()}]),
        );
        assert_eq!(e.status_code(), 400, "{e}");
        let e = err(deep, json!([]));
        assert_eq!(e, JsonPatchError::ObjectTooDeep { max: MAX_DEPTH });
        // Nesting by path plus value depth is bounded too.
        let path = "/a".repeat(MAX_DEPTH - 1) + "/b";
        let e = err(
            nested_objects(MAX_DEPTH),
            json!([{"op":"add","path":path,"value":{}}]),
        );
        assert!(e.to_string().contains("nested more than 256 levels"), "{e}");
        // Each pair of copies doubles the document; the copy budget stops it.
        let pair = [
            json!({"op":"copy","from":"/a","path":"/b"}),
            json!({"op":"copy","from":"","path":"/a"}),
        ];
        let ops: Vec<Value> = pair.iter().cycle().take(80).cloned().collect();
        let e = err(json!({"a":"0123456789"}), Value::Array(ops));
        assert!(e.to_string().contains("copies or moves more than"), "{e}");
    }
}
