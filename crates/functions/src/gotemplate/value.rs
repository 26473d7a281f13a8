//! Values a template works on: JSON values borrowed from the data or owned by a function's
//! result, plus Go's "no value" (a missing map key), and how Go prints and judges them.

use std::rc::Rc;

use serde_json::Value;

use crate::golang::fmt::sprintf;

pub use crate::golang::value::float;

static NULL: Value = Value::Null;

/// A value during execution.
#[derive(Clone, Debug)]
pub enum Val<'a> {
    /// Go's invalid `reflect.Value`: a missing map key, printed `<no value>`.
    Missing,
    /// A value inside the data; `true` when it was read out of a map or slice (Go then sees
    /// it through an `interface {}`).
    Ref(&'a Value, bool),
    /// A value a function or constant produced; `true` as for `Ref`.
    Own(Rc<Value>, bool),
}

impl<'a> Val<'a> {
    /// An owned value.
    pub fn own(v: Value) -> Val<'a> {
        Val::Own(Rc::new(v), false)
    }

    /// An int.
    pub fn int(i: i64) -> Val<'a> {
        Val::own(Value::from(i))
    }

    /// A string.
    pub fn str(s: String) -> Val<'a> {
        Val::own(Value::String(s))
    }

    /// The JSON value (null for a missing one).
    pub fn get(&self) -> &Value {
        match self {
            Val::Missing => &NULL,
            Val::Ref(v, _) => v,
            Val::Own(v, _) => v,
        }
    }

    /// Whether this is Go's invalid value.
    pub fn is_missing(&self) -> bool {
        matches!(self, Val::Missing)
    }

    /// The value, owned.
    pub fn to_value(&self) -> Value {
        self.get().clone()
    }

    /// The entry `key` of a map value (the caller checked it is there).
    pub fn key(&self, key: &str) -> Val<'a> {
        match self {
            Val::Ref(Value::Object(m), _) => m.get(key).map_or(Val::Missing, |v| Val::Ref(v, true)),
            Val::Own(v, _) => v.get(key).map_or(Val::Missing, |v| Val::Own(Rc::new(v.clone()), true)),
            _ => Val::Missing,
        }
    }

    /// The element `i` of a slice value.
    pub fn index(&self, i: usize) -> Val<'a> {
        match self {
            Val::Ref(Value::Array(a), _) => a.get(i).map_or(Val::Missing, |v| Val::Ref(v, true)),
            Val::Own(v, _) => v.get(i).map_or(Val::Missing, |v| Val::Own(Rc::new(v.clone()), true)),
            _ => Val::Missing,
        }
    }

    /// The Go type name Go's errors show for this value.
    pub fn type_name(&self) -> String {
        match self {
            Val::Ref(_, true) | Val::Own(_, true) => "interface {}".to_string(),
            _ => go_type_name(self.get()),
        }
    }
}

/// The Go type of a JSON value as the template sees it (a number written as an integer is
/// an `int`, as template constants and Sprig's integer results are).
pub fn go_type_name(v: &Value) -> String {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float64",
        Value::Number(_) => "int",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
    .to_string()
}

/// Go's truth of a value (`if`, `with`, `and`, `or`, `not`): false, 0, nil, an empty string,
/// slice or map are false.
pub fn truth(v: &Val<'_>) -> bool {
    match v.get() {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(m) => !m.is_empty(),
    }
}

/// Prints a value as an action does: `<no value>` for nothing, else `fmt.Print`.
pub fn print(out: &mut String, v: &Val<'_>) {
    match v.get() {
        Value::Null => out.push_str("<no value>"),
        Value::String(s) => out.push_str(s),
        other => out.push_str(&sprintf("%v", std::slice::from_ref(other))),
    }
}

/// Go's `fmt.Sprint(args...)`: spaces between operands when neither side is a string.
pub fn sprint(args: &[Value]) -> String {
    let mut out = String::new();
    for (i, a) in args.iter().enumerate() {
        if i > 0 && !a.is_string() && !args[i - 1].is_string() {
            out.push(' ');
        }
        match a {
            Value::String(s) => out.push_str(s),
            Value::Null => out.push_str("<nil>"),
            other => out.push_str(&sprintf("%v", std::slice::from_ref(other))),
        }
    }
    out
}

/// Go's `fmt.Sprintln(args...)`: always spaces, and a newline.
pub fn sprintln(args: &[Value]) -> String {
    let mut out = String::new();
    for (i, a) in args.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        match a {
            Value::String(s) => out.push_str(s),
            Value::Null => out.push_str("<nil>"),
            other => out.push_str(&sprintf("%v", std::slice::from_ref(other))),
        }
    }
    out.push('\n');
    out
}

/// Go's `fmt.Sprint` of one value (strings as they are, nil as `<nil>`).
pub fn to_string(v: &Value) -> String {
    sprint(std::slice::from_ref(v))
}
