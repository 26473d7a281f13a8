//! Secrets in provider-http requests and responses.
//!
//! - `{{ name:namespace:key }}` in a body or a header is replaced, just before sending, by that
//!   key of that Secret ([`Injector`]). The values injected into one request are remembered,
//!   and [`Injector::mask`] turns them back into their placeholders in anything that is
//!   stored or shown (status, conditions, events), so a secret is never written anywhere but
//!   to the HTTP server.
//! - `secretInjectionConfigs` copy values out of a response into Secrets ([`inject_response`]).
//!
//! A namespaced resource reads and writes Secrets of its own namespace only.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use base64::Engine;
use oxplane_runtime::client::Kube;
use oxplane_runtime::kinds::Kind;
use oxplane_runtime::object;
use regex::Regex;
use serde_json::{Map, Value, json};

use super::jq;

/// The core v1 Secret kind.
pub fn secret_kind() -> Kind {
    Kind::new("", "v1", "Secret", "secrets", true)
}

fn placeholder_pattern() -> &'static Regex {
    static PATTERN: OnceLock<Regex> = OnceLock::new();
    // Names, namespaces and keys are DNS labels or Secret keys: no ':', '{', '}' or spaces.
    PATTERN.get_or_init(|| Regex::new(r"\{\{\s*([^:{}\s]+):([^:{}\s]+):([^:{}\s]+)\s*\}\}").unwrap_or_else(|_| unreachable_pattern()))
}

#[allow(clippy::panic)]
fn unreachable_pattern() -> Regex {
    // The pattern above is a constant that compiles; this is never reached.
    panic!("secret placeholder pattern does not compile")
}

/// Why a secret could not be read or written.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SecretError {
    /// The placeholder names a Secret or key that does not exist.
    #[error("secret {namespace}/{name} has no key {key:?} (placeholder {{{{ {name}:{namespace}:{key} }}}})")]
    Missing {
        /// Secret name.
        name: String,
        /// Secret namespace.
        namespace: String,
        /// The key.
        key: String,
    },
    /// A namespaced resource named another namespace.
    #[error("secret {namespace}/{name} is outside the resource's namespace {own}")]
    OtherNamespace {
        /// Secret name.
        name: String,
        /// Secret namespace.
        namespace: String,
        /// The resource's namespace.
        own: String,
    },
    /// The API failed.
    #[error("cannot access secret {0}")]
    Api(String),
}

/// Decoded data of a Secret.
pub fn secret_data(secret: &Value) -> BTreeMap<String, Vec<u8>> {
    let mut data = BTreeMap::new();
    if let Some(map) = secret.get("data").and_then(Value::as_object) {
        for (key, value) in map {
            if let Some(decoded) = value.as_str().and_then(|v| base64::engine::general_purpose::STANDARD.decode(v).ok()) {
                data.insert(key.clone(), decoded);
            }
        }
    }
    if let Some(map) = secret.get("stringData").and_then(Value::as_object) {
        for (key, value) in map {
            if let Some(text) = value.as_str() {
                data.insert(key.clone(), text.as_bytes().to_vec());
            }
        }
    }
    data
}

/// Injects secret values into text and remembers them, to mask them again.
pub struct Injector<'a> {
    kube: &'a Kube,
    /// The namespace a namespaced resource is confined to.
    own_namespace: Option<String>,
    /// Injected values and their placeholders, longest value first when masking.
    injected: Vec<(String, String)>,
}

impl<'a> Injector<'a> {
    /// An injector for a resource (confined to its namespace when it has one).
    pub fn new(kube: &'a Kube, own_namespace: Option<&str>) -> Self {
        Injector { kube, own_namespace: own_namespace.map(str::to_string), injected: Vec::new() }
    }

    /// Reads one key of a Secret.
    pub async fn read(&self, namespace: &str, name: &str, key: &str) -> Result<Vec<u8>, SecretError> {
        if let Some(own) = &self.own_namespace
            && own != namespace
        {
            return Err(SecretError::OtherNamespace { name: name.into(), namespace: namespace.into(), own: own.clone() });
        }
        let secret = self.kube.get(&secret_kind(), Some(namespace), name).await.map_err(|e| SecretError::Api(format!("{namespace}/{name}: {e}")))?;
        let missing = || SecretError::Missing { name: name.into(), namespace: namespace.into(), key: key.into() };
        let secret = secret.ok_or_else(missing)?;
        secret_data(&secret).remove(key).ok_or_else(missing)
    }

    /// `text` with every `{{ name:namespace:key }}` replaced by the secret value.
    pub async fn inject(&mut self, text: &str) -> Result<String, SecretError> {
        let mut out = String::with_capacity(text.len());
        let mut last = 0;
        for captures in placeholder_pattern().captures_iter(text) {
            let (Some(whole), Some(name), Some(namespace), Some(key)) = (captures.get(0), captures.get(1), captures.get(2), captures.get(3)) else {
                continue;
            };
            let value = self.read(namespace.as_str(), name.as_str(), key.as_str()).await?;
            let value = String::from_utf8_lossy(&value).into_owned();
            out.push_str(&text[last..whole.start()]);
            out.push_str(&value);
            last = whole.end();
            if !value.is_empty() && !self.injected.iter().any(|(v, _)| v == &value) {
                self.injected.push((value, whole.as_str().to_string()));
                self.injected.sort_by_key(|(v, _)| std::cmp::Reverse(v.len()));
            }
        }
        out.push_str(&text[last..]);
        Ok(out)
    }

    /// Headers with secrets injected into each value.
    pub async fn inject_headers(&mut self, headers: &BTreeMap<String, Vec<String>>) -> Result<BTreeMap<String, Vec<String>>, SecretError> {
        let mut out = BTreeMap::new();
        for (name, values) in headers {
            let mut injected = Vec::with_capacity(values.len());
            for value in values {
                injected.push(self.inject(value).await?);
            }
            out.insert(name.clone(), injected);
        }
        Ok(out)
    }

    /// `text` with every injected secret value replaced by its placeholder.
    pub fn mask(&self, text: &str) -> String {
        let mut masked = text.to_string();
        for (value, placeholder) in &self.injected {
            masked = masked.replace(value.as_str(), placeholder);
        }
        masked
    }

    /// A JSON value with every string masked.
    pub fn mask_value(&self, value: &Value) -> Value {
        match value {
            Value::String(s) => Value::String(self.mask(s)),
            Value::Array(items) => Value::Array(items.iter().map(|v| self.mask_value(v)).collect()),
            Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), self.mask_value(v))).collect()),
            other => other.clone(),
        }
    }
}

/// What to do with a Secret key whose response field is missing.
fn missing_strategy(mapping: &Value) -> &str {
    mapping.get("missingFieldStrategy").and_then(Value::as_str).unwrap_or("delete")
}

/// Copies response data into Secrets as `secretInjectionConfigs` say. `response` is
/// `{statusCode, body, headers}` with the body parsed when it is JSON. `owner` is the managed
/// resource (for `setOwnerReference`).
pub async fn inject_response(kube: &Kube, configs: &[Value], response: &Value, owner: &Value) -> Result<(), SecretError> {
    let own_namespace = object::namespace(owner);
    for config in configs {
        let name = config.pointer("/secretRef/name").and_then(Value::as_str).unwrap_or_default();
        let namespace = config.pointer("/secretRef/namespace").and_then(Value::as_str).or(own_namespace).unwrap_or("default");
        if name.is_empty() {
            continue;
        }
        if let Some(own) = own_namespace
            && own != namespace
        {
            return Err(SecretError::OtherNamespace { name: name.into(), namespace: namespace.into(), own: own.into() });
        }
        let mut mappings: Vec<Value> = config.get("keyMappings").and_then(Value::as_array).cloned().unwrap_or_default();
        // The deprecated single-key form.
        if let (Some(key), Some(path)) = (config.get("secretKey").and_then(Value::as_str), config.get("responsePath").and_then(Value::as_str)) {
            mappings.push(json!({"secretKey": key, "responseJQ": path}));
        }
        let existing = kube.get(&secret_kind(), Some(namespace), name).await.map_err(|e| SecretError::Api(format!("{namespace}/{name}: {e}")))?;
        let mut data: Map<String, Value> = existing.as_ref().and_then(|s| s.get("data")).and_then(Value::as_object).cloned().unwrap_or_default();
        for mapping in &mappings {
            let Some(key) = mapping.get("secretKey").and_then(Value::as_str) else { continue };
            let expression = mapping.get("responseJQ").and_then(Value::as_str).unwrap_or(".");
            let found = match jq::eval_one(expression, response) {
                Ok(Value::Null) | Err(_) => None,
                Ok(Value::String(text)) => Some(text),
                Ok(other) => Some(other.to_string()),
            };
            match (found, missing_strategy(mapping)) {
                (Some(text), _) => {
                    data.insert(key.to_string(), Value::String(base64::engine::general_purpose::STANDARD.encode(text)));
                }
                (None, "preserve") => {}
                (None, "setEmpty") => {
                    data.insert(key.to_string(), Value::String(String::new()));
                }
                (None, _) => {
                    data.remove(key);
                }
            }
        }
        let mut secret = existing.unwrap_or_else(|| json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace}, "type": "Opaque"}));
        let before = secret.clone();
        secret["data"] = Value::Object(data);
        for field in ["labels", "annotations"] {
            if let Some(extra) = config.pointer(&format!("/metadata/{field}")).and_then(Value::as_object) {
                for (key, value) in extra {
                    if let Some(text) = value.as_str() {
                        if field == "labels" {
                            object::set_label(&mut secret, key, text);
                        } else {
                            object::set_annotation(&mut secret, key, text);
                        }
                    }
                }
            }
        }
        if config.get("setOwnerReference").and_then(Value::as_bool) == Some(true) && own_namespace == Some(namespace) {
            object::add_owner_reference(&mut secret, object::owner_reference(owner, false, false));
        }
        if secret == before {
            continue;
        }
        let result = if object::resource_version(&secret).is_some() { kube.replace(&secret_kind(), &secret).await } else { kube.create(&secret_kind(), &secret).await };
        result.map_err(|e| SecretError::Api(format!("{namespace}/{name}: {e}")))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn placeholders_are_recognised() {
        let found: Vec<(String, String, String)> = placeholder_pattern()
            .captures_iter("a {{ password:crossplane-system:secretKey }} b {{auth:default:token}} {{ bad }} {{a:b}}")
            .map(|c| (c[1].to_string(), c[2].to_string(), c[3].to_string()))
            .collect();
        assert_eq!(found, vec![("password".into(), "crossplane-system".into(), "secretKey".into()), ("auth".into(), "default".into(), "token".into())]);
    }

    #[test]
    fn secret_data_decodes_both_forms() {
        let secret = json!({"data": {"a": "aGk="}, "stringData": {"b": "there"}});
        let data = secret_data(&secret);
        assert_eq!(data["a"], b"hi");
        assert_eq!(data["b"], b"there");
    }
}
