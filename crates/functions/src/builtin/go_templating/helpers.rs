//! function-go-templating's own template functions, added to Go's and Sprig's.

use std::sync::{Arc, OnceLock};

use base64::Engine;
use serde_json::{Map, Value, json};

use crate::golang::yaml;
use crate::gotemplate::{Func, Funcs, P, State, Val, builtin_funcs, sprig};

/// The context key function-extra-resources writes its resources under.
pub const EXTRA_RESOURCES_CONTEXT_KEY: &str = "apiextensions.crossplane.io/extra-resources";

/// How deep `include` may nest the same template.
const RECURSION_MAX: usize = 1000;

/// Go's, Sprig's and function-go-templating's functions, built once.
pub(crate) fn funcs() -> Arc<Funcs> {
    static FUNCS: OnceLock<Arc<Funcs>> = OnceLock::new();
    FUNCS
        .get_or_init(|| {
            let mut f = builtin_funcs();
            f.extend(sprig::funcs());
            add(&mut f);
            Arc::new(f)
        })
        .clone()
}

fn include<'a>(st: &mut State<'_, 'a>, a: Vec<Val<'a>>) -> Result<Val<'a>, String> {
    let name = a[0].get().as_str().unwrap_or_default().to_string();
    let count = st.includes.get(&name).copied().unwrap_or(0);
    if count > RECURSION_MAX {
        return Err(format!("rendering template has a nested reference name: {name}: unable to execute template"));
    }
    st.includes.insert(name.clone(), count + 1);
    let result = st.execute_nested(&name, a[1].clone());
    if let Some(c) = st.includes.get_mut(&name) {
        *c = c.saturating_sub(1);
    }
    result.map(Val::str)
}

/// Reads `path` (a list of map keys) out of a value.
fn at<'v>(v: &'v Value, path: &[&str]) -> Option<&'v Value> {
    path.iter().try_fold(v, |v, k| v.get(k))
}

/// A map of base64 strings decoded (Go hands templates `[]byte`; printing them as text is
/// what templates do with them).
fn decoded(v: Option<&Value>) -> Value {
    let Some(Value::Object(m)) = v else { return Value::Null };
    let out: Map<String, Value> = m
        .iter()
        .map(|(k, v)| {
            let bytes = base64::engine::general_purpose::STANDARD.decode(v.as_str().unwrap_or_default()).unwrap_or_default();
            (k.clone(), Value::String(String::from_utf8_lossy(&bytes).into_owned()))
        })
        .collect();
    Value::Object(out)
}

/// crossplane-runtime's `GetCondition`: the condition of that type, or an `Unknown` one.
fn condition(ct: &str, res: &Value) -> Value {
    let conditions = at(res, &["resource", "status", "conditions"])
        .or_else(|| at(res, &["status", "conditions"]))
        .and_then(Value::as_array);
    let found = conditions.and_then(|cs| cs.iter().find(|c| c.get("type").and_then(Value::as_str) == Some(ct)));
    let s = |c: Option<&Value>, k: &str| c.and_then(|c| c.get(k)).and_then(Value::as_str).unwrap_or_default().to_string();
    match found {
        Some(c) => json!({
            "Type": ct,
            "Status": s(Some(c), "status"),
            "Reason": s(Some(c), "reason"),
            "Message": s(Some(c), "message"),
            "LastTransitionTime": s(Some(c), "lastTransitionTime"),
            "ObservedGeneration": c.get("observedGeneration").cloned().unwrap_or(json!(0)),
        }),
        None => json!({"Type": ct, "Status": "Unknown", "Reason": "", "Message": "", "LastTransitionTime": "", "ObservedGeneration": 0}),
    }
}

fn add(f: &mut Funcs) {
    use P::{Any, Map as M, Str};
    f.insert("include", Func::ctx(&[Str, Any], include));
    f.insert("randomChoice", Func::pure_variadic(&[], Str, |a| {
        use rand::Rng;
        if a.is_empty() {
            return Err("invalid argument to Intn".into());
        }
        Ok(a[rand::rng().random_range(0..a.len())].clone())
    }));
    f.insert("toYaml", Func::pure(&[Any], |a| Ok(Value::String(yaml::marshal(a[0])))));
    f.insert("fromYaml", Func::pure(&[Str], |a| {
        yaml::unmarshal(a[0].as_str().unwrap_or_default())
    }));
    f.insert("getResourceCondition", Func::pure(&[Str, M], |a| Ok(condition(a[0].as_str().unwrap_or_default(), a[1]))));
    f.insert("setResourceNameAnnotation", Func::pure(&[Str], |a| {
        Ok(Value::String(format!("gotemplating.fn.crossplane.io/composition-resource-name: {}", a[0].as_str().unwrap_or_default())))
    }));
    f.insert("getComposedResource", Func::pure(&[M, Str], |a| {
        let name = a[1].as_str().unwrap_or_default();
        Ok(at(a[0], &["observed", "resources", name, "resource"]).filter(|v| v.is_object()).cloned().unwrap_or(Value::Null))
    }));
    f.insert("getCompositeResource", Func::pure(&[M], |a| {
        Ok(at(a[0], &["observed", "composite", "resource"]).filter(|v| v.is_object()).cloned().unwrap_or(Value::Null))
    }));
    f.insert("getComposedConnectionDetails", Func::pure(&[M, Str], |a| {
        let name = a[1].as_str().unwrap_or_default();
        Ok(decoded(at(a[0], &["observed", "resources", name, "connectionDetails"])))
    }));
    f.insert("getExtraResources", Func::pure(&[M, Str], |a| {
        let name = a[1].as_str().unwrap_or_default();
        let items = at(a[0], &["requiredResources", name, "items"]).or_else(|| at(a[0], &["extraResources", name, "items"]));
        Ok(items.filter(|v| v.is_array()).cloned().unwrap_or(Value::Null))
    }));
    f.insert("getExtraResourcesFromContext", Func::pure(&[M, Str], |a| {
        let name = a[1].as_str().unwrap_or_default();
        Ok(at(a[0], &["context", EXTRA_RESOURCES_CONTEXT_KEY, name, "items"]).filter(|v| v.is_array()).cloned().unwrap_or(Value::Null))
    }));
    f.insert("getCredentialData", Func::pure(&[M, Str], |a| {
        let name = a[1].as_str().unwrap_or_default();
        Ok(decoded(at(a[0], &["credentials", name, "credentialData", "data"])))
    }));
}
