//! Sprig's list functions. A function given something that is not a list fails as Sprig's
//! `must` variant reports it (the plain variant panics with the same message, which Go's
//! template engine turns into the call's error).

use serde_json::Value;

use super::{empty, i, to_i64};
use crate::gotemplate::{Func, Funcs, P};

const NIL_DEREF: &str = "runtime error: invalid memory address or nil pointer dereference";

/// Go's `reflect.Kind` name of a value.
pub(crate) fn kind_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "invalid",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float64",
        Value::Number(_) => "int",
        Value::String(_) => "string",
        Value::Array(_) => "slice",
        Value::Object(_) => "map",
    }
}

/// The list, or Sprig's error naming what could not be done on the value's kind.
fn list<'v>(v: &'v Value, what: &str) -> Result<&'v Vec<Value>, String> {
    match v {
        Value::Array(items) => Ok(items),
        Value::Null => Err(NIL_DEREF.into()),
        other => Err(format!("Cannot {what} type {}", kind_name(other))),
    }
}

fn add_both(f: &mut Funcs, names: [&'static str; 2], func: Func) {
    for n in names {
        f.insert(n, func);
    }
}

pub(super) fn add(f: &mut Funcs) {
    use P::{Any, Int};
    for name in ["list", "tuple"] {
        f.insert(name, Func::pure_variadic(&[], Any, |a| Ok(Value::Array(a.iter().map(|v| (*v).clone()).collect()))));
    }
    for name in ["append", "push", "mustAppend", "mustPush"] {
        f.insert(name, Func::pure(&[Any, Any], |a| {
            let mut l = list(a[0], "push on")?.clone();
            l.push(a[1].clone());
            Ok(Value::Array(l))
        }));
    }
    add_both(f, ["prepend", "mustPrepend"], Func::pure(&[Any, Any], |a| {
        let mut l = vec![a[1].clone()];
        l.extend(list(a[0], "prepend on")?.iter().cloned());
        Ok(Value::Array(l))
    }));
    add_both(f, ["first", "mustFirst"], Func::pure(&[Any], |a| Ok(list(a[0], "find first on")?.first().cloned().unwrap_or(Value::Null))));
    add_both(f, ["last", "mustLast"], Func::pure(&[Any], |a| Ok(list(a[0], "find last on")?.last().cloned().unwrap_or(Value::Null))));
    add_both(f, ["rest", "mustRest"], Func::pure(&[Any], |a| {
        let l = list(a[0], "find rest on")?;
        Ok(if l.is_empty() { Value::Null } else { Value::Array(l[1..].to_vec()) })
    }));
    add_both(f, ["initial", "mustInitial"], Func::pure(&[Any], |a| {
        let l = list(a[0], "find initial on")?;
        Ok(if l.is_empty() { Value::Null } else { Value::Array(l[..l.len() - 1].to_vec()) })
    }));
    add_both(f, ["reverse", "mustReverse"], Func::pure(&[Any], |a| {
        let mut l = list(a[0], "find reverse on")?.clone();
        l.reverse();
        Ok(Value::Array(l))
    }));
    add_both(f, ["uniq", "mustUniq"], Func::pure(&[Any], |a| {
        let mut out: Vec<Value> = Vec::new();
        for v in list(a[0], "find uniq on")? {
            if !out.contains(v) {
                out.push(v.clone());
            }
        }
        Ok(Value::Array(out))
    }));
    add_both(f, ["compact", "mustCompact"], Func::pure(&[Any], |a| {
        Ok(Value::Array(list(a[0], "compact on")?.iter().filter(|v| !empty(v)).cloned().collect()))
    }));
    add_both(f, ["without", "mustWithout"], Func::pure_variadic(&[Any], Any, |a| {
        let l = list(a[0], "find without on")?;
        Ok(Value::Array(l.iter().filter(|v| !a[1..].contains(v)).cloned().collect()))
    }));
    add_both(f, ["has", "mustHas"], Func::pure(&[Any, Any], |a| {
        if a[1].is_null() {
            return Ok(Value::Bool(false));
        }
        Ok(Value::Bool(list(a[1], "find has on")?.contains(a[0])))
    }));
    add_both(f, ["slice", "mustSlice"], Func::pure_variadic(&[Any], Any, |a| {
        let l = list(a[0], "slice on")?;
        if l.is_empty() {
            return Ok(Value::Null);
        }
        let start = a.get(1).map_or(0, |v| to_i64(v));
        let end = a.get(2).map_or(l.len() as i64, |v| to_i64(v));
        if start < 0 || end < start || end as usize > l.len() {
            return Err("reflect: slice index out of range".into());
        }
        Ok(Value::Array(l[start as usize..end as usize].to_vec()))
    }));
    f.insert("concat", Func::pure_variadic(&[], Any, |a| {
        let mut out = Vec::new();
        for v in a {
            match v {
                Value::Array(items) => out.extend(items.iter().cloned()),
                other => return Err(format!("Cannot concat type {} as list", kind_name(other))),
            }
        }
        Ok(Value::Array(out))
    }));
    add_both(f, ["chunk", "mustChunk"], Func::pure(&[Int, Any], |a| {
        let size = i(a[0]);
        let l = list(a[1], "chunk")?;
        if size <= 0 {
            return Err("runtime error: integer divide by zero".into());
        }
        Ok(Value::Array(l.chunks(size as usize).map(|c| Value::Array(c.to_vec())).collect()))
    }));
}
