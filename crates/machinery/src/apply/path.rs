//! Field paths: the [`PathElement`] model shared by field sets, conflicts and the merge,
//! its canonical FieldsV1 key spelling, Kubernetes-style rendering for messages, and
//! lookups of a path inside a JSON value.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

/// One step of a field path.
#[derive(Clone, Debug)]
pub enum PathElement {
    /// A named object field (FieldsV1 `f:<name>`).
    Field(String),
    /// A list-map item identified by its key fields (FieldsV1 `k:{"name":"a"}`).
    Key(BTreeMap<String, Value>),
    /// A set-list item identified by its value (FieldsV1 `v:<json>`).
    Value(Value),
    /// A list item by position (FieldsV1 `i:<n>`); never produced by this engine, parsed for completeness.
    Index(usize),
}

/// A path from the object root; empty means the root itself.
pub type Path = Vec<PathElement>;

impl PathElement {
    /// The FieldsV1 key for this element (`f:name`, `k:{...}`, `v:...`, `i:n`).
    pub fn to_fields_v1_key(&self) -> String {
        match self {
            PathElement::Field(name) => format!("f:{name}"),
            PathElement::Key(key) => format!("k:{}", canonical_key_json(key)),
            PathElement::Value(v) => format!("v:{}", canonical_json(v)),
            PathElement::Index(i) => format!("i:{i}"),
        }
    }

    fn rank(&self) -> u8 {
        // Same relative order as the FieldsV1 prefixes f < i < k < v, so that ordering by
        // element equals ordering by the serialized key string.
        match self {
            PathElement::Field(_) => 0,
            PathElement::Index(_) => 1,
            PathElement::Key(_) => 2,
            PathElement::Value(_) => 3,
        }
    }
}

// Ordering (and therefore equality) is defined by the canonical FieldsV1 key string. This
// gives a total order over JSON values (which `Value` lacks), keeps FieldsV1 output sorted
// the way Kubernetes prints it, and is consistent with equality because the canonical
// spelling is injective.
impl Ord for PathElement {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (PathElement::Field(a), PathElement::Field(b)) => a.cmp(b),
            _ => match self.rank().cmp(&other.rank()) {
                Ordering::Equal => self.to_fields_v1_key().cmp(&other.to_fields_v1_key()),
                o => o,
            },
        }
    }
}

impl PartialOrd for PathElement {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for PathElement {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for PathElement {}

impl fmt::Display for PathElement {
    /// Renders `.name`, `[k="v",k2=1]`, `[="item"]` or `[3]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathElement::Field(name) => write!(f, ".{name}"),
            PathElement::Key(key) => {
                f.write_str("[")?;
                for (i, (k, v)) in key.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{k}={}", canonical_json(v))?;
                }
                f.write_str("]")
            }
            PathElement::Value(v) => write!(f, "[={}]", canonical_json(v)),
            PathElement::Index(i) => write!(f, "[{i}]"),
        }
    }
}

/// Renders a path for messages: `.spec.containers[name="nginx"].image`, `.metadata.finalizers[="a"]`.
pub fn path_string(path: &[PathElement]) -> String {
    path.iter().map(ToString::to_string).collect()
}

/// Compact JSON with object keys sorted recursively (independent of serde_json's map ordering).
pub fn canonical_json(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn canonical_key_json(key: &BTreeMap<String, Value>) -> String {
    let mut out = String::from("{");
    for (i, (k, v)) in key.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&Value::String(k.clone()).to_string());
        out.push(':');
        write_canonical(v, &mut out);
    }
    out.push('}');
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                if let Some(child) = map.get(k) {
                    write_canonical(child, out);
                }
            }
            out.push('}');
        }
        // Value's Display is compact JSON for scalars (and infallible).
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// The key of a list-map item: the values of all `keys`, or None when the item is not an
/// object or lacks one of them.
pub(crate) fn item_key(item: &Value, keys: &[String]) -> Option<BTreeMap<String, Value>> {
    let obj = item.as_object()?;
    keys.iter()
        .map(|k| obj.get(k).map(|v| (k.clone(), v.clone())))
        .collect()
}

/// Whether `item` is the list-map item named by `key` (all key fields equal).
pub(crate) fn item_matches(item: &Value, key: &BTreeMap<String, Value>) -> bool {
    match item.as_object() {
        Some(obj) => key.iter().all(|(k, v)| obj.get(k) == Some(v)),
        None => false,
    }
}

/// The child of `v` addressed by one element, if present.
pub(crate) fn child<'a>(v: &'a Value, e: &PathElement) -> Option<&'a Value> {
    match (v, e) {
        (Value::Object(map), PathElement::Field(name)) => map.get(name),
        (Value::Array(items), PathElement::Key(key)) => items.iter().find(|i| item_matches(i, key)),
        (Value::Array(items), PathElement::Value(val)) => items.iter().find(|i| *i == val),
        (Value::Array(items), PathElement::Index(i)) => items.get(*i),
        _ => None,
    }
}

/// The value at `path` inside `v`, if every step exists.
pub fn lookup<'a>(v: &'a Value, path: &[PathElement]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, e| child(cur, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(pairs: &[(&str, Value)]) -> PathElement {
        PathElement::Key(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        )
    }

    #[test]
    fn renders_kubernetes_style_paths() {
        let p = vec![
            PathElement::Field("spec".into()),
            PathElement::Field("containers".into()),
            key(&[("name", json!("nginx"))]),
            PathElement::Field("image".into()),
        ];
        assert_eq!(path_string(&p), ".spec.containers[name=\"nginx\"].image");
        let p = vec![
            PathElement::Field("metadata".into()),
            PathElement::Field("finalizers".into()),
            PathElement::Value(json!("a")),
        ];
        assert_eq!(path_string(&p), ".metadata.finalizers[=\"a\"]");
        let p = vec![
            key(&[("protocol", json!("TCP")), ("containerPort", json!(80))]),
            PathElement::Index(2),
        ];
        assert_eq!(path_string(&p), "[containerPort=80,protocol=\"TCP\"][2]");
    }

    #[test]
    fn canonical_json_sorts_keys() {
        let v = json!({"b": [1, {"z": 1, "a": "x"}], "a": null});
        assert_eq!(canonical_json(&v), r#"{"a":null,"b":[1,{"a":"x","z":1}]}"#);
    }

    #[test]
    fn element_order_follows_fields_v1_keys() {
        let mut v = [
            PathElement::Value(json!("a")),
            key(&[("name", json!("a"))]),
            PathElement::Index(1),
            PathElement::Field("z".into()),
            PathElement::Field("a".into()),
        ];
        v.sort();
        let keys: Vec<String> = v.iter().map(PathElement::to_fields_v1_key).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
        assert_eq!(PathElement::Value(json!(1)), PathElement::Value(json!(1)));
        assert_ne!(PathElement::Value(json!(1)), PathElement::Value(json!(1.0)));
    }

    #[test]
    fn lookup_walks_keys_values_and_indices() {
        let v =
            json!({"spec": {"c": [{"name": "a", "image": "x"}, {"name": "b"}], "s": ["p", "q"]}});
        let p = vec![
            PathElement::Field("spec".into()),
            PathElement::Field("c".into()),
            key(&[("name", json!("a"))]),
            PathElement::Field("image".into()),
        ];
        assert_eq!(lookup(&v, &p), Some(&json!("x")));
        let p = vec![
            PathElement::Field("spec".into()),
            PathElement::Field("s".into()),
            PathElement::Value(json!("q")),
        ];
        assert_eq!(lookup(&v, &p), Some(&json!("q")));
        let p = vec![
            PathElement::Field("spec".into()),
            PathElement::Field("c".into()),
            PathElement::Index(1),
        ];
        assert_eq!(lookup(&v, &p), Some(&json!({"name": "b"})));
        assert_eq!(lookup(&v, &[PathElement::Field("nope".into())]), None);
        assert_eq!(
            item_key(&json!({"name": "a"}), &["name".into(), "port".into()]),
            None
        );
    }
}
