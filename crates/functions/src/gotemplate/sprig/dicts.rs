//! Sprig's dictionary functions. `set`, `unset`, `merge` and `mergeOverwrite` change their
//! first argument in Go; here the change is seen through every variable holding that same
//! dictionary (`$d := dict` then `set $d "k" "v"`), which is how templates use them.

use serde_json::{Map, Value};

use super::{empty, s, strval};
use crate::gotemplate::{Func, Funcs, P, State, Val};

/// mergo's `Merge` of `src` into `dst` (`override`: `WithOverride`): a key missing from
/// `dst` is added; maps merge deeply; otherwise `dst` keeps a non-empty value unless
/// overriding with a non-empty one.
pub fn mergo(dst: &mut Map<String, Value>, src: &Map<String, Value>, override_: bool) {
    for (k, sv) in src {
        match dst.get_mut(k) {
            None => {
                dst.insert(k.clone(), sv.clone());
            }
            Some(Value::Object(dm)) if sv.is_object() => {
                if let Value::Object(sm) = sv {
                    mergo(dm, sm, override_);
                }
            }
            Some(dv) => {
                if !empty(sv) && (override_ || empty(dv)) {
                    *dv = sv.clone();
                }
            }
        }
    }
}

fn obj(v: &Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    }
}

fn set<'a>(st: &mut State<'_, 'a>, a: Vec<Val<'a>>) -> Result<Val<'a>, String> {
    let mut m = obj(a[0].get());
    m.insert(s(a[1].get()).to_string(), a[2].to_value());
    let new = Val::own(Value::Object(m));
    st.rebind(&a[0], &new);
    Ok(new)
}

fn unset<'a>(st: &mut State<'_, 'a>, a: Vec<Val<'a>>) -> Result<Val<'a>, String> {
    let mut m = obj(a[0].get());
    m.remove(s(a[1].get()));
    let new = Val::own(Value::Object(m));
    st.rebind(&a[0], &new);
    Ok(new)
}

fn merge_into<'a>(st: &mut State<'_, 'a>, a: &[Val<'a>], override_: bool) -> Result<Val<'a>, String> {
    let mut m = obj(a[0].get());
    for src in &a[1..] {
        if let Value::Object(sm) = src.get() {
            mergo(&mut m, sm, override_);
        }
    }
    let new = Val::own(Value::Object(m));
    st.rebind(&a[0], &new);
    Ok(new)
}

fn merge<'a>(st: &mut State<'_, 'a>, a: Vec<Val<'a>>) -> Result<Val<'a>, String> {
    merge_into(st, &a, false)
}

fn merge_overwrite<'a>(st: &mut State<'_, 'a>, a: Vec<Val<'a>>) -> Result<Val<'a>, String> {
    merge_into(st, &a, true)
}

fn dig_in(dict: &Map<String, Value>, default: &Value, keys: &[&str]) -> Result<Value, String> {
    let Some(step) = dict.get(keys[0]) else { return Ok(default.clone()) };
    if keys.len() == 1 {
        return Ok(step.clone());
    }
    match step {
        Value::Object(m) => dig_in(m, default, &keys[1..]),
        other => Err(format!("interface conversion: interface {{}} is {}, not map[string]interface {{}}", type_of(other))),
    }
}

fn type_of(v: &Value) -> String {
    match v {
        Value::Null => "nil".into(),
        other => crate::gotemplate::go_type_name(other),
    }
}

pub(super) fn add(f: &mut Funcs) {
    use P::{Any, Map as M, Str};
    f.insert("dict", Func::pure_variadic(&[], Any, |a| {
        let mut m = Map::new();
        for pair in a.chunks(2) {
            let v = pair.get(1).map_or(Value::String(String::new()), |v| (*v).clone());
            m.insert(strval(pair[0]), v);
        }
        Ok(Value::Object(m))
    }));
    f.insert("get", Func::pure(&[M, Str], |a| Ok(a[0].get(s(a[1])).cloned().unwrap_or(Value::String(String::new())))));
    f.insert("set", Func::ctx(&[M, Str, Any], set));
    f.insert("unset", Func::ctx(&[M, Str], unset));
    f.insert("hasKey", Func::pure(&[M, Str], |a| Ok(Value::Bool(a[0].get(s(a[1])).is_some()))));
    f.insert("pluck", Func::pure_variadic(&[Str], M, |a| {
        Ok(Value::Array(a[1..].iter().filter_map(|d| d.get(s(a[0])).cloned()).collect()))
    }));
    f.insert("keys", Func::pure_variadic(&[], M, |a| {
        let mut keys: Vec<Value> = Vec::new();
        for d in a {
            if let Value::Object(m) = d {
                keys.extend(m.keys().map(|k| Value::String(k.clone())));
            }
        }
        Ok(Value::Array(keys))
    }));
    f.insert("pick", Func::pure_variadic(&[M], Str, |a| {
        let m = obj(a[0]);
        let keep: Vec<&str> = a[1..].iter().map(|k| s(k)).collect();
        Ok(Value::Object(m.into_iter().filter(|(k, _)| keep.contains(&k.as_str())).collect()))
    }));
    f.insert("omit", Func::pure_variadic(&[M], Str, |a| {
        let m = obj(a[0]);
        let drop: Vec<&str> = a[1..].iter().map(|k| s(k)).collect();
        Ok(Value::Object(m.into_iter().filter(|(k, _)| !drop.contains(&k.as_str())).collect()))
    }));
    f.insert("values", Func::pure(&[M], |a| Ok(Value::Array(obj(a[0]).into_iter().map(|(_, v)| v).collect()))));
    for name in ["merge", "mustMerge"] {
        f.insert(name, Func::ctx_variadic(&[M], M, merge));
    }
    for name in ["mergeOverwrite", "mustMergeOverwrite"] {
        f.insert(name, Func::ctx_variadic(&[M], M, merge_overwrite));
    }
    f.insert("dig", Func::pure_variadic(&[], Any, |a| {
        if a.len() < 3 {
            return Err("dig needs at least three arguments".into());
        }
        let Value::Object(dict) = a[a.len() - 1] else {
            return Err(format!(
                "interface conversion: interface {{}} is {}, not map[string]interface {{}}",
                type_of(a[a.len() - 1])
            ));
        };
        let mut keys = Vec::new();
        for k in &a[..a.len() - 2] {
            match k {
                Value::String(k) => keys.push(k.as_str()),
                other => return Err(format!("interface conversion: interface {{}} is {}, not string", type_of(other))),
            }
        }
        dig_in(dict, a[a.len() - 2], &keys)
    }));
    for name in ["deepCopy", "mustDeepCopy"] {
        f.insert(name, Func::pure(&[Any], |a| Ok(a[0].clone())));
    }
}
