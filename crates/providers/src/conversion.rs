//! CRD conversion webhooks of the built-in providers: where they are served, which CRDs convert
//! through them, the `ConversionReview` answer, and what every conversion shares.
//!
//! Conversions here lose nothing on a round trip, unlike upstream's: what one version cannot
//! show is kept, as JSON, in an annotation of the other (as Kubernetes keeps fields of newer
//! API versions), and restored when converting back, while the fields it stands for still say
//! the same.

use serde_json::{Map, Value, json};

use crate::{http, kubernetes};

/// Where the providers' conversion webhooks are served: an HTTPS base URL and the CA that
/// signed its certificate (`caBundle`, base64 PEM).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConversionWebhook {
    /// `https://HOST:PORT`, without a path.
    pub base_url: String,
    /// base64 of the CA's PEM.
    pub ca_bundle: String,
}

impl ConversionWebhook {
    /// A CRD's `spec.conversion` calling the webhook at `path`.
    pub fn conversion(&self, path: &str) -> Value {
        json!({"strategy": "Webhook", "webhook": {
            "conversionReviewVersions": ["v1"],
            "clientConfig": {"url": format!("{}{path}", self.base_url), "caBundle": self.ca_bundle}
        }})
    }
}

/// Converts one object to the `group/version` asked for.
type Convert = fn(Value, &str) -> Result<Value, String>;

/// A CRD converting through a provider's webhook.
#[derive(Clone, Copy, Debug)]
pub struct Converted {
    /// The CRD's name.
    pub crd: &'static str,
    /// The path its webhook is served at.
    pub path: &'static str,
    convert: Convert,
}

/// Every CRD the built-in providers convert through a webhook.
pub fn converted() -> [Converted; 3] {
    [
        Converted { crd: kubernetes::CONVERTED_CRD, path: kubernetes::CONVERSION_PATH, convert: kubernetes::conversion::convert },
        Converted { crd: http::conversion::REQUESTS_CRD, path: http::conversion::REQUESTS_PATH, convert: http::conversion::convert_request },
        Converted { crd: http::conversion::DISPOSABLE_CRD, path: http::conversion::DISPOSABLE_PATH, convert: http::conversion::convert_disposable },
    ]
}

/// Answers a CRD conversion webhook call (a `ConversionReview` body) for the built-in
/// providers' kinds by the path it was made to: (status code, JSON body).
pub fn review(path: &str, body: &[u8]) -> (u16, Vec<u8>) {
    match converted().iter().find(|c| c.path == path) {
        Some(converted) => (200, answer(body, converted.convert).to_string().into_bytes()),
        None => (404, format!("no conversion webhook is served at {path}").into_bytes()),
    }
}

/// Answers a `ConversionReview` (apiextensions.k8s.io/v1): every object converted, or the
/// whole review failed with the first error.
pub fn answer(body: &[u8], convert: Convert) -> Value {
    let review: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let request = &review["request"];
    let desired = request["desiredAPIVersion"].as_str().unwrap_or_default();
    let converted: Result<Vec<Value>, String> =
        request["objects"].as_array().cloned().unwrap_or_default().into_iter().map(|object| convert(object, desired)).collect();
    let response = match converted {
        Ok(objects) => json!({"uid": request["uid"], "result": {"status": "Success"}, "convertedObjects": objects}),
        Err(message) => json!({"uid": request["uid"], "result": {"status": "Failure", "message": message}}),
    };
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": response})
}

fn annotations(object: &mut Value) -> Option<&mut Map<String, Value>> {
    object.get_mut("metadata")?.as_object_mut()?.get_mut("annotations")?.as_object_mut()
}

/// Removes and parses the annotation `key` (the fields kept by the other version).
pub fn take_kept(object: &mut Value, key: &str) -> Map<String, Value> {
    let Some(found) = annotations(object) else { return Map::new() };
    let removed = found.remove(key);
    let had = removed.is_some();
    let kept = removed.and_then(|v| v.as_str().and_then(|s| serde_json::from_str::<Value>(s).ok()));
    if had && found.is_empty()
        && let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut)
    {
        metadata.remove("annotations");
    }
    match kept {
        Some(Value::Object(map)) => map,
        _ => Map::new(),
    }
}

/// Keeps `fields` in the annotation `key` (nothing when there are none).
pub fn keep(object: &mut Value, key: &str, fields: Map<String, Value>) {
    if fields.is_empty() {
        return;
    }
    let Some(root) = object.as_object_mut() else { return };
    let metadata = root.entry("metadata").or_insert_with(|| json!({}));
    let Some(metadata) = metadata.as_object_mut() else { return };
    let annotations = metadata.entry("annotations").or_insert_with(|| json!({}));
    if let Some(annotations) = annotations.as_object_mut() {
        annotations.insert(key.to_string(), Value::String(Value::Object(fields).to_string()));
    }
}

/// Which of two versions of one group an object is in, and which is asked for: `Some(true)`
/// to the newer, `Some(false)` to the older, `None` when it already is there.
pub fn direction(object: &Value, desired: &str, older: &str, newer: &str, kind: &str) -> Result<Option<bool>, String> {
    let from = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    match (from, desired) {
        (from, desired) if from == desired => Ok(None),
        (from, desired) if from == older && desired == newer => Ok(Some(true)),
        (from, desired) if from == newer && desired == older => Ok(Some(false)),
        (from, desired) => Err(format!("cannot convert a {kind} from {from:?} to {desired:?}")),
    }
}

/// Property-test strategies every conversion's tests use.
#[cfg(test)]
pub(crate) mod strategies {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    /// A short string value (jq and CEL punctuation included).
    pub fn text() -> impl Strategy<Value = Value> {
        "[a-z0-9.=+'\" ]{0,12}".prop_map(Value::String)
    }

    /// Metadata with or without annotations of its own (never a conversion's).
    pub fn metadata() -> impl Strategy<Value = Value> {
        proptest::option::of(proptest::collection::btree_map("[a-z]{1,5}\\.io/[a-z]{1,5}", text(), 1..3)).prop_map(|annotations| {
            let mut metadata = json!({"name": "o", "uid": "1"});
            if let Some(annotations) = annotations {
                metadata["annotations"] = json!(annotations);
            }
            metadata
        })
    }
}
