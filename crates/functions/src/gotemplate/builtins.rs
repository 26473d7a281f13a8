//! Go's predefined template functions, with Go's comparison rules and error wording.

use serde_json::Value;

use super::value::{Val, go_type_name, sprint, sprintln, truth};
use super::{Call, Func, Funcs, P, State};
use crate::golang::fmt::sprintf_named;

type Res<'a> = Result<Val<'a>, String>;

/// The table of Go's predefined functions.
pub(crate) fn funcs() -> Funcs {
    let mut f = Funcs::new();
    f.insert("and", Func { params: &[P::Val], variadic: Some(P::Val), lazy: true, call: Call::Ctx(lazy_unreachable) });
    f.insert("or", Func { params: &[P::Val], variadic: Some(P::Val), lazy: true, call: Call::Ctx(lazy_unreachable) });
    f.insert("not", Func::ctx(&[P::Val], not));
    f.insert("len", Func::ctx(&[P::Val], len));
    f.insert("index", Func::ctx_variadic(&[P::Val], P::Val, index));
    f.insert("slice", Func::ctx_variadic(&[P::Val], P::Val, slice));
    f.insert("print", Func::ctx_variadic(&[], P::Any, print));
    f.insert("printf", Func::ctx_variadic(&[P::Str], P::Any, printf));
    f.insert("println", Func::ctx_variadic(&[], P::Any, println));
    f.insert("eq", Func::ctx_variadic(&[P::Val], P::Val, eq));
    f.insert("ne", Func::ctx(&[P::Val, P::Val], ne));
    f.insert("lt", Func::ctx(&[P::Val, P::Val], lt));
    f.insert("le", Func::ctx(&[P::Val, P::Val], le));
    f.insert("gt", Func::ctx(&[P::Val, P::Val], gt));
    f.insert("ge", Func::ctx(&[P::Val, P::Val], ge));
    f.insert("html", Func::ctx_variadic(&[], P::Any, html));
    f.insert("js", Func::ctx_variadic(&[], P::Any, js));
    f.insert("urlquery", Func::ctx_variadic(&[], P::Any, urlquery));
    f.insert("call", Func::ctx_variadic(&[P::Val], P::Val, call));
    f
}

fn lazy_unreachable<'a>(_: &mut State<'_, 'a>, _: Vec<Val<'a>>) -> Res<'a> {
    Err("and/or are evaluated by the executor".into())
}

fn values(args: &[Val<'_>]) -> Vec<Value> {
    args.iter().map(Val::to_value).collect()
}

fn not<'a>(_: &mut State<'_, 'a>, a: Vec<Val<'a>>) -> Res<'a> {
    Ok(Val::own(Value::Bool(!truth(&a[0]))))
}

fn len<'a>(_: &mut State<'_, 'a>, a: Vec<Val<'a>>) -> Res<'a> {
    let n = match (&a[0], a[0].get()) {
        (Val::Missing, _) => return Err("reflect: call of reflect.Value.Type on zero Value".into()),
        (_, Value::Null) => return Err("len of nil pointer".into()),
        (_, Value::String(s)) => s.len(),
        (_, Value::Array(v)) => v.len(),
        (_, Value::Object(m)) => m.len(),
        (_, other) => return Err(format!("len of type {}", go_type_name(other))),
    };
    Ok(Val::int(n as i64))
}

/// Go's `indexArg`: an integer index within `cap`.
fn index_arg(index: &Val<'_>, cap: usize) -> Result<usize, String> {
    let x = match index.get() {
        Value::Null => return Err("cannot index slice/array with nil".into()),
        Value::Number(n) if !n.is_f64() => n.as_i64().unwrap_or(i64::MAX),
        other => return Err(format!("cannot index slice/array with type {}", go_type_name(other))),
    };
    if x < 0 || x as u64 > cap as u64 {
        return Err(format!("index out of range: {x}"));
    }
    Ok(x as usize)
}

fn index<'a>(_: &mut State<'_, 'a>, a: Vec<Val<'a>>) -> Res<'a> {
    let mut item = a[0].clone();
    if item.get().is_null() {
        return Err("index of untyped nil".into());
    }
    for idx in &a[1..] {
        if item.get().is_null() {
            return Err("index of nil pointer".into());
        }
        item = match item.get() {
            Value::Array(v) => {
                let x = index_arg(idx, v.len())?;
                if x >= v.len() {
                    return Err("reflect: slice index out of range".into());
                }
                item.index(x)
            }
            Value::String(s) => {
                let x = index_arg(idx, s.len())?;
                match s.as_bytes().get(x) {
                    Some(b) => Val::int(i64::from(*b)),
                    None => return Err("reflect: string index out of range".into()),
                }
            }
            Value::Object(m) => match idx.get() {
                Value::String(k) => {
                    if m.contains_key(k) {
                        item.key(k)
                    } else {
                        Val::own(Value::Null)
                    }
                }
                Value::Null => Val::own(Value::Null),
                other => return Err(format!("value has type {}; should be string", go_type_name(other))),
            },
            other => return Err(format!("can't index item of type {}", go_type_name(other))),
        };
    }
    Ok(item)
}

fn slice<'a>(_: &mut State<'_, 'a>, a: Vec<Val<'a>>) -> Res<'a> {
    let item = a[0].get();
    if item.is_null() {
        return Err("slice of untyped nil".into());
    }
    let idx = &a[1..];
    if idx.len() > 3 {
        return Err(format!("too many slice indexes: {}", idx.len()));
    }
    let len = match item {
        Value::String(s) => {
            if idx.len() == 3 {
                return Err("cannot 3-index slice a string".into());
            }
            s.len()
        }
        Value::Array(v) => v.len(),
        other => return Err(format!("can't slice item of type {}", go_type_name(other))),
    };
    let mut bounds = [0usize, len, len];
    for (i, x) in idx.iter().enumerate() {
        bounds[i] = index_arg(x, len)?;
    }
    if bounds[0] > bounds[1] {
        return Err(format!("invalid slice index: {} > {}", bounds[0], bounds[1]));
    }
    if idx.len() == 3 && bounds[1] > bounds[2] {
        return Err(format!("invalid slice index: {} > {}", bounds[1], bounds[2]));
    }
    Ok(Val::own(match item {
        Value::String(s) => match s.get(bounds[0]..bounds[1]) {
            Some(sub) => Value::String(sub.to_string()),
            None => Value::String(String::from_utf8_lossy(&s.as_bytes()[bounds[0]..bounds[1]]).into_owned()),
        },
        Value::Array(v) => Value::Array(v[bounds[0]..bounds[1]].to_vec()),
        _ => Value::Null,
    }))
}

fn print<'a>(_: &mut State<'_, 'a>, a: Vec<Val<'a>>) -> Res<'a> {
    Ok(Val::str(sprint(&values(&a))))
}

fn printf<'a>(_: &mut State<'_, 'a>, a: Vec<Val<'a>>) -> Res<'a> {
    let format = a[0].get().as_str().unwrap_or_default().to_string();
    Ok(Val::str(sprintf_named(&format, &values(&a[1..]), "int")))
}

fn println<'a>(_: &mut State<'_, 'a>, a: Vec<Val<'a>>) -> Res<'a> {
    Ok(Val::str(sprintln(&values(&a))))
}

/// Go's `basicKind` classes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Invalid,
    Bool,
    Int,
    Float,
    String,
}

fn kind(v: &Value) -> Kind {
    match v {
        Value::Bool(_) => Kind::Bool,
        Value::Number(n) if n.is_f64() => Kind::Float,
        Value::Number(_) => Kind::Int,
        Value::String(_) => Kind::String,
        _ => Kind::Invalid,
    }
}

const BAD_COMPARISON: &str = "incompatible types for comparison";
const BAD_COMPARISON_TYPE: &str = "invalid type for comparison";

fn eq_one(a: &Value, b: &Value) -> Result<bool, String> {
    let (k1, k2) = (kind(a), kind(b));
    if k1 != k2 {
        if !a.is_null() && !b.is_null() {
            return Err(BAD_COMPARISON.into());
        }
        return Ok(false);
    }
    Ok(match k1 {
        Kind::Bool | Kind::String => a == b,
        Kind::Int => a.as_i64() == b.as_i64(),
        Kind::Float => a.as_f64() == b.as_f64(),
        Kind::Invalid => {
            if a.is_null() || b.is_null() {
                a.is_null() == b.is_null()
            } else if std::mem::discriminant(a) != std::mem::discriminant(b) {
                return Err(format!(
                    "non-comparable types {}: {}, {}: {}",
                    sprint(std::slice::from_ref(a)),
                    go_type_name(a),
                    go_type_name(b),
                    sprint(std::slice::from_ref(b))
                ));
            } else {
                return Err(format!("non-comparable type {}: {}", sprint(std::slice::from_ref(b)), go_type_name(b)));
            }
        }
    })
}

fn eq<'a>(_: &mut State<'_, 'a>, a: Vec<Val<'a>>) -> Res<'a> {
    if a.len() < 2 {
        return Err("missing argument for comparison".into());
    }
    for other in &a[1..] {
        if eq_one(a[0].get(), other.get())? {
            return Ok(Val::own(Value::Bool(true)));
        }
    }
    Ok(Val::own(Value::Bool(false)))
}

fn ne<'a>(_: &mut State<'_, 'a>, a: Vec<Val<'a>>) -> Res<'a> {
    Ok(Val::own(Value::Bool(!eq_one(a[0].get(), a[1].get())?)))
}

fn less(a: &Value, b: &Value) -> Result<bool, String> {
    let (k1, k2) = (kind(a), kind(b));
    if k1 == Kind::Invalid || k2 == Kind::Invalid {
        return Err(BAD_COMPARISON_TYPE.into());
    }
    if k1 != k2 {
        return Err(BAD_COMPARISON.into());
    }
    Ok(match k1 {
        Kind::Bool | Kind::Invalid => return Err(BAD_COMPARISON_TYPE.into()),
        Kind::Float => a.as_f64() < b.as_f64(),
        Kind::Int => a.as_i64() < b.as_i64(),
        Kind::String => a.as_str() < b.as_str(),
    })
}

fn lt<'a>(_: &mut State<'_, 'a>, a: Vec<Val<'a>>) -> Res<'a> {
    Ok(Val::own(Value::Bool(less(a[0].get(), a[1].get())?)))
}

fn le<'a>(_: &mut State<'_, 'a>, a: Vec<Val<'a>>) -> Res<'a> {
    let l = less(a[0].get(), a[1].get())?;
    Ok(Val::own(Value::Bool(l || eq_one(a[0].get(), a[1].get())?)))
}

fn gt<'a>(_: &mut State<'_, 'a>, a: Vec<Val<'a>>) -> Res<'a> {
    let l = less(a[0].get(), a[1].get())?;
    Ok(Val::own(Value::Bool(!(l || eq_one(a[0].get(), a[1].get())?))))
}

fn ge<'a>(_: &mut State<'_, 'a>, a: Vec<Val<'a>>) -> Res<'a> {
    Ok(Val::own(Value::Bool(!less(a[0].get(), a[1].get())?)))
}

/// Go's `evalArgs` for the escapers: one string as it is, else `fmt.Sprint` with nil as
/// `<no value>`.
fn eval_args(a: &[Val<'_>]) -> String {
    if a.len() == 1
        && let Value::String(s) = a[0].get()
    {
        return s.clone();
    }
    let vals: Vec<Value> =
        a.iter().map(|v| if v.get().is_null() { Value::String("<no value>".into()) } else { v.to_value() }).collect();
    sprint(&vals)
}

/// Go's `template.HTMLEscapeString`.
pub(crate) fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("&#34;"),
            '\'' => out.push_str("&#39;"),
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\0' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// Go's `template.JSEscapeString`.
pub(crate) fn js_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '"' => out.push_str("\\\""),
            '<' => out.push_str("\\u003C"),
            '>' => out.push_str("\\u003E"),
            '&' => out.push_str("\\u0026"),
            '=' => out.push_str("\\u003D"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u00{:02X}", c as u32)),
            c if (c as u32) >= 0x80 && !is_print(c) => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// Go's `unicode.IsPrint`, close enough: not a control, format or separator other than space.
fn is_print(c: char) -> bool {
    !(c.is_control() || matches!(c as u32, 0x2028 | 0x2029 | 0x200B..=0x200F | 0xFEFF | 0xA0 | 0x2000..=0x200A | 0x3000))
}

/// Go's `url.QueryEscape`.
pub(crate) fn query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(char::from(b)),
            b' ' => out.push('+'),
            b => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

fn html<'a>(_: &mut State<'_, 'a>, a: Vec<Val<'a>>) -> Res<'a> {
    Ok(Val::str(html_escape(&eval_args(&a))))
}

fn js<'a>(_: &mut State<'_, 'a>, a: Vec<Val<'a>>) -> Res<'a> {
    Ok(Val::str(js_escape(&eval_args(&a))))
}

fn urlquery<'a>(_: &mut State<'_, 'a>, a: Vec<Val<'a>>) -> Res<'a> {
    Ok(Val::str(query_escape(&eval_args(&a))))
}

fn call<'a>(_: &mut State<'_, 'a>, a: Vec<Val<'a>>) -> Res<'a> {
    if a[0].get().is_null() {
        return Err("call of nil".into());
    }
    Err(format!("non-function of type {}", go_type_name(a[0].get())))
}
