//! Conversion of the cluster-scoped `Request` and `DisposableRequest` between `v1alpha1` and
//! `v1alpha2` (the storage version), served as CRD conversion webhooks (`ConversionReview` v1).
//!
//! The versions differ where upstream's types do. v1alpha1's Request has no `tlsConfig`,
//! `secretInjectionConfigs`, `expectedResponseCheck` or `isRemovedCheck`, and its mappings
//! name a method (`POST`, `GET`, `PUT` or `DELETE`, required) and no action; v1alpha2's
//! mappings name an action, a method (also `PATCH`, `HEAD`, `OPTIONS`) or both, and its
//! `status.requestDetails` the action. v1alpha1's DisposableRequest has no `tlsConfig`,
//! `nextReconcile`, `shouldLoopInfinitely` or `secretInjectionConfigs`, nor
//! `status.lastReconcileTime`. v1alpha1 has nothing v1alpha2 lacks: a v1alpha1 object is a
//! valid v1alpha2 one once its apiVersion says so (a mapping with only a method is the action
//! that method stands for).
//!
//! A v1alpha2 mapping is shown in v1alpha1 with the method it is sent with (an action's
//! default when it names none) and without its action; one whose method v1alpha1 cannot name
//! is not shown. What is not shown is kept (see [`crate::conversion`]); the kept mappings
//! come back while the v1alpha1 mappings still show them the same way, so mappings changed
//! through v1alpha1 win.

use serde_json::{Map, Value, json};

use super::request::Action;
use super::{CLUSTER_GROUP, OLDER_VERSION, VERSION};
use crate::conversion::{direction, keep, take_kept};

/// On a v1alpha1 view: the v1alpha2 fields it cannot show.
pub const V1ALPHA2_FIELDS: &str = "http.crossplane.io/v1alpha2-fields";
/// The path the Request conversion webhook is served at.
pub const REQUESTS_PATH: &str = "/convert/requests.http.crossplane.io";
/// The path the DisposableRequest conversion webhook is served at.
pub const DISPOSABLE_PATH: &str = "/convert/disposablerequests.http.crossplane.io";
/// The Request CRD.
pub const REQUESTS_CRD: &str = "requests.http.crossplane.io";
/// The DisposableRequest CRD.
pub const DISPOSABLE_CRD: &str = "disposablerequests.http.crossplane.io";

/// The methods a v1alpha1 mapping may name.
pub const V1ALPHA1_METHODS: [&str; 4] = ["POST", "GET", "PUT", "DELETE"];

/// v1alpha2 fields of a Request that v1alpha1 has not, as paths.
pub(super) const REQUEST_ONLY_V1ALPHA2: [&[&str]; 5] = [
    &["spec", "forProvider", "tlsConfig"],
    &["spec", "forProvider", "secretInjectionConfigs"],
    &["spec", "forProvider", "expectedResponseCheck"],
    &["spec", "forProvider", "isRemovedCheck"],
    &["status", "requestDetails", "action"],
];

/// v1alpha2 fields of a DisposableRequest that v1alpha1 has not, as paths.
pub(super) const DISPOSABLE_ONLY_V1ALPHA2: [&[&str]; 5] = [
    &["spec", "forProvider", "tlsConfig"],
    &["spec", "forProvider", "nextReconcile"],
    &["spec", "forProvider", "shouldLoopInfinitely"],
    &["spec", "forProvider", "secretInjectionConfigs"],
    &["status", "lastReconcileTime"],
];

const MAPPINGS: &[&str] = &["spec", "forProvider", "mappings"];

fn key(path: &[&str]) -> String {
    path.join(".")
}

fn take_path(object: &mut Value, path: &[&str]) -> Option<Value> {
    let (last, parents) = path.split_last()?;
    let mut at = object;
    for part in parents {
        at = at.get_mut(*part)?;
    }
    at.as_object_mut()?.remove(*last)
}

fn get_path<'a>(object: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(object, |at, part| at.get(*part))
}

fn put_path(object: &mut Value, path: &[&str], value: Value) {
    let Some((last, parents)) = path.split_last() else { return };
    let mut at = object;
    for part in parents {
        let Some(map) = at.as_object_mut() else { return };
        at = map.entry(*part).or_insert_with(|| json!({}));
    }
    if let Some(map) = at.as_object_mut() {
        map.insert((*last).to_string(), value);
    }
}

/// v1alpha2 mappings as v1alpha1 shows them.
fn older_mappings(mappings: &Value) -> Value {
    let shown = mappings.as_array().into_iter().flatten().filter_map(|mapping| {
        let mut shown = mapping.as_object()?.clone();
        let action = shown.remove("action");
        let method = match shown.get("method").and_then(Value::as_str) {
            Some(method) => method.to_string(),
            None => Action::named(action.as_ref()?.as_str()?)?.default_method().to_string(),
        };
        if !V1ALPHA1_METHODS.contains(&method.as_str()) {
            return None;
        }
        shown.insert("method".into(), Value::String(method));
        Some(Value::Object(shown))
    });
    Value::Array(shown.collect())
}

fn to_v1alpha1(mut object: Value, only_newer: &[&[&str]], mappings: bool) -> Value {
    let mut kept = Map::new();
    for path in only_newer {
        if let Some(value) = take_path(&mut object, path) {
            kept.insert(key(path), value);
        }
    }
    if mappings && let Some(newer) = get_path(&object, MAPPINGS).cloned() {
        let shown = older_mappings(&newer);
        if shown != newer {
            kept.insert(key(MAPPINGS), newer);
        }
        put_path(&mut object, MAPPINGS, shown);
    }
    keep(&mut object, V1ALPHA2_FIELDS, kept);
    object["apiVersion"] = json!(format!("{CLUSTER_GROUP}/{OLDER_VERSION}"));
    object
}

fn to_v1alpha2(mut object: Value, only_newer: &[&[&str]], mappings: bool) -> Value {
    let mut restored = take_kept(&mut object, V1ALPHA2_FIELDS);
    for path in only_newer {
        if let Some(value) = restored.remove(&key(path)) {
            put_path(&mut object, path, value);
        }
    }
    // Kept mappings stand while v1alpha1 still shows them as they are.
    if mappings
        && let Some(newer) = restored.remove(&key(MAPPINGS))
        && get_path(&object, MAPPINGS) == Some(&older_mappings(&newer))
    {
        put_path(&mut object, MAPPINGS, newer);
    }
    object["apiVersion"] = json!(format!("{CLUSTER_GROUP}/{VERSION}"));
    object
}

fn convert(object: Value, desired: &str, kind: &str, only_newer: &[&[&str]], mappings: bool) -> Result<Value, String> {
    let older = format!("{CLUSTER_GROUP}/{OLDER_VERSION}");
    let newer = format!("{CLUSTER_GROUP}/{VERSION}");
    Ok(match direction(&object, desired, &older, &newer, kind)? {
        None => object,
        Some(true) => to_v1alpha2(object, only_newer, mappings),
        Some(false) => to_v1alpha1(object, only_newer, mappings),
    })
}

/// A Request in `desired` (`group/version`).
pub fn convert_request(object: Value, desired: &str) -> Result<Value, String> {
    convert(object, desired, "a Request", &REQUEST_ONLY_V1ALPHA2, true)
}

/// A DisposableRequest in `desired` (`group/version`).
pub fn convert_disposable(object: Value, desired: &str) -> Result<Value, String> {
    convert(object, desired, "a DisposableRequest", &DISPOSABLE_ONLY_V1ALPHA2, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use crate::conversion::strategies::{metadata, text};

    const OLDER: &str = "http.crossplane.io/v1alpha1";
    const NEWER: &str = "http.crossplane.io/v1alpha2";

    #[test]
    fn mappings_show_the_method_they_are_sent_with() {
        let v2 = json!({"apiVersion": NEWER, "kind": "Request", "metadata": {"name": "user"}, "spec": {"forProvider": {
            "payload": {"baseUrl": "http://127.0.0.1:1/users"},
            "mappings": [
                {"action": "CREATE", "url": ".payload.baseUrl"},
                {"method": "GET", "url": ".payload.baseUrl"},
                {"action": "UPDATE", "method": "PATCH", "url": ".payload.baseUrl"},
                {"method": "DELETE", "action": "REMOVE", "url": ".payload.baseUrl"}
            ],
            "expectedResponseCheck": {"type": "CUSTOM", "logic": ".response.statusCode == 200"}
        }}, "status": {"requestDetails": {"method": "POST", "action": "CREATE", "url": "http://127.0.0.1:1/users"}}});
        let v1 = convert_request(v2.clone(), OLDER).unwrap();
        assert_eq!(v1["apiVersion"], OLDER);
        let methods: Vec<&str> = v1["spec"]["forProvider"]["mappings"].as_array().unwrap().iter().map(|m| m["method"].as_str().unwrap()).collect();
        assert_eq!(methods, ["POST", "GET", "DELETE"], "PATCH is not a v1alpha1 method");
        assert!(v1["spec"]["forProvider"]["mappings"].as_array().unwrap().iter().all(|m| m.get("action").is_none()));
        assert!(v1["spec"]["forProvider"].get("expectedResponseCheck").is_none());
        assert!(v1["status"]["requestDetails"].get("action").is_none());
        assert!(v1["metadata"]["annotations"][V1ALPHA2_FIELDS].is_string());
        assert_eq!(convert_request(v1.clone(), NEWER).unwrap(), v2);

        // Mappings changed through v1alpha1 win over the kept ones; the rest still comes back.
        let mut changed = v1;
        changed["spec"]["forProvider"]["mappings"][1]["url"] = json!(".payload.baseUrl + \"/1\"");
        let back = convert_request(changed.clone(), NEWER).unwrap();
        assert_eq!(back["spec"]["forProvider"]["mappings"], changed["spec"]["forProvider"]["mappings"]);
        assert_eq!(back["spec"]["forProvider"]["expectedResponseCheck"], v2["spec"]["forProvider"]["expectedResponseCheck"]);
        assert!(back["metadata"].get("annotations").is_none(), "{back}");

        // A v1alpha1 object is a v1alpha2 one as it is.
        let v1 = json!({"apiVersion": OLDER, "kind": "Request", "spec": {"forProvider": {"payload": {}, "mappings": [{"method": "POST", "url": "\"http://h\""}]}}});
        let v2 = convert_request(v1.clone(), NEWER).unwrap();
        assert_eq!(v2["spec"], v1["spec"]);
        assert_eq!(v2["apiVersion"], NEWER);
        assert!(convert_request(json!({"apiVersion": "v1", "kind": "Request"}), NEWER).is_err());
    }

    #[test]
    fn disposable_requests_keep_what_v1alpha1_lacks() {
        let v2 = json!({"apiVersion": NEWER, "kind": "DisposableRequest", "metadata": {"name": "ping", "annotations": {"a.io/b": "c"}},
            "spec": {"forProvider": {"url": "http://h", "method": "POST", "nextReconcile": "10s", "shouldLoopInfinitely": true}},
            "status": {"synced": true, "lastReconcileTime": "2026-01-01T00:00:00Z"}});
        let v1 = convert_disposable(v2.clone(), OLDER).unwrap();
        assert_eq!(v1["spec"]["forProvider"], json!({"url": "http://h", "method": "POST"}));
        assert_eq!(v1["status"], json!({"synced": true}));
        assert_eq!(v1["metadata"]["annotations"]["a.io/b"], "c");
        assert_eq!(convert_disposable(v1, NEWER).unwrap(), v2);
    }

    #[test]
    fn reviews_convert_through_the_path_they_are_made_to() {
        let body = json!({"request": {"uid": "u", "desiredAPIVersion": OLDER,
            "objects": [{"apiVersion": NEWER, "kind": "DisposableRequest", "spec": {"forProvider": {"url": "u", "method": "GET", "shouldLoopInfinitely": true}}}]}});
        let (code, answer) = crate::conversion::review(DISPOSABLE_PATH, body.to_string().as_bytes());
        assert_eq!(code, 200);
        let answer: Value = serde_json::from_slice(&answer).unwrap();
        assert_eq!(answer["response"]["result"]["status"], "Success");
        assert!(answer["response"]["convertedObjects"][0]["spec"]["forProvider"].get("shouldLoopInfinitely").is_none());
        assert_eq!(crate::conversion::review("/convert/other", b"{}").0, 404);
    }

    fn mapping(methods: Vec<&'static str>, actions: bool) -> impl Strategy<Value = Value> {
        let actions = if actions { vec!["CREATE", "OBSERVE", "UPDATE", "REMOVE"] } else { vec![] };
        (
            proptest::option::of(proptest::sample::select(methods)),
            proptest::option::of(proptest::sample::select(if actions.is_empty() { vec![""] } else { actions.clone() })),
            text(),
            proptest::option::of(text()),
        )
            .prop_map(move |(method, action, url, body)| {
                let mut m = json!({"url": url});
                if let Some(method) = method {
                    m["method"] = json!(method);
                }
                if let Some(action) = action.filter(|a| !a.is_empty()) {
                    m["action"] = json!(action);
                }
                if let Some(body) = body {
                    m["body"] = body;
                }
                m
            })
    }

    fn optional_fields(object: &mut Value, fields: Vec<(&[&str], Option<Value>)>) {
        for (path, value) in fields {
            if let Some(value) = value {
                put_path(object, path, value);
            }
        }
    }

    fn request_v1alpha2() -> impl Strategy<Value = Value> {
        (
            metadata(),
            proptest::collection::vec(mapping(vec!["POST", "GET", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"], true), 1..5),
            proptest::option::of(Just(json!({"insecureSkipVerify": false, "caBundle": "Zm9v"}))),
            proptest::option::of(Just(json!([{"secretRef": {"name": "s", "namespace": "default"}, "keyMappings": [{"secretKey": "k", "responseJQ": ".body.id"}]}]))),
            proptest::option::of(text().prop_map(|logic| json!({"type": "CUSTOM", "logic": logic}))),
            proptest::option::of(Just(json!({"type": "DEFAULT"}))),
            proptest::option::of(mapping(vec!["POST", "GET", "PATCH"], true)),
            proptest::option::of(Just(json!("30s"))),
        )
            .prop_map(|(metadata, mappings, tls, injections, check, removed, details, timeout)| {
                let mut object = json!({"apiVersion": NEWER, "kind": "Request", "metadata": metadata,
                    "spec": {"providerConfigRef": {"name": "default"}, "managementPolicies": ["*"], "forProvider": {"payload": {"baseUrl": "http://h"}, "mappings": mappings}},
                    "status": {"conditions": [{"type": "Ready", "status": "True"}], "response": {"statusCode": 200, "body": "{}"}}});
                optional_fields(&mut object, vec![
                    (&["spec", "forProvider", "tlsConfig"], tls),
                    (&["spec", "forProvider", "secretInjectionConfigs"], injections),
                    (&["spec", "forProvider", "expectedResponseCheck"], check),
                    (&["spec", "forProvider", "isRemovedCheck"], removed),
                    (&["status", "requestDetails"], details),
                    (&["spec", "forProvider", "waitTimeout"], timeout),
                ]);
                object
            })
    }

    fn request_v1alpha1() -> impl Strategy<Value = Value> {
        (metadata(), proptest::collection::vec(mapping(V1ALPHA1_METHODS.to_vec(), false), 0..5), proptest::option::of(any::<bool>())).prop_map(|(metadata, mappings, insecure)| {
            // v1alpha1 requires a method.
            let mappings: Vec<Value> = mappings.into_iter().map(|mut m| {
                if m.get("method").is_none() {
                    m["method"] = json!("GET");
                }
                m
            }).collect();
            let mut object = json!({"apiVersion": OLDER, "kind": "Request", "metadata": metadata,
                "spec": {"deletionPolicy": "Orphan", "forProvider": {"payload": {"body": "{}"}, "mappings": mappings}},
                "status": {"requestDetails": {"method": "PUT", "url": "http://h/1"}, "failed": 2}});
            if let Some(insecure) = insecure {
                object["spec"]["forProvider"]["insecureSkipTLSVerify"] = json!(insecure);
            }
            object
        })
    }

    fn disposable_v1alpha2() -> impl Strategy<Value = Value> {
        (
            metadata(),
            proptest::option::of(Just(json!({"caBundle": "Zm9v"}))),
            proptest::option::of(Just(json!("1m"))),
            proptest::option::of(any::<bool>()),
            proptest::option::of(Just(json!([{"secretRef": {"name": "s", "namespace": "default"}, "secretKey": "k", "responsePath": ".body"}]))),
            proptest::option::of(Just(json!("2026-01-01T00:00:00Z"))),
            proptest::option::of(text()),
        )
            .prop_map(|(metadata, tls, next, infinitely, injections, last, expected)| {
                let mut object = json!({"apiVersion": NEWER, "kind": "DisposableRequest", "metadata": metadata,
                    "spec": {"forProvider": {"url": "http://h", "method": "POST", "rollbackRetriesLimit": 3}},
                    "status": {"synced": true, "failed": 1}});
                optional_fields(&mut object, vec![
                    (&["spec", "forProvider", "tlsConfig"], tls),
                    (&["spec", "forProvider", "nextReconcile"], next),
                    (&["spec", "forProvider", "shouldLoopInfinitely"], infinitely.map(|b| json!(b))),
                    (&["spec", "forProvider", "secretInjectionConfigs"], injections),
                    (&["status", "lastReconcileTime"], last),
                    (&["spec", "forProvider", "expectedResponse"], expected),
                ]);
                object
            })
    }

    proptest! {
        #[test]
        fn requests_round_trip_through_v1alpha1(object in request_v1alpha2()) {
            let older = convert_request(object.clone(), OLDER).unwrap();
            for path in REQUEST_ONLY_V1ALPHA2 {
                prop_assert!(get_path(&older, path).is_none(), "{} shown in v1alpha1", key(path));
            }
            for mapping in older["spec"]["forProvider"]["mappings"].as_array().unwrap() {
                prop_assert!(mapping.get("action").is_none());
                prop_assert!(V1ALPHA1_METHODS.contains(&mapping["method"].as_str().unwrap_or_default()));
            }
            prop_assert_eq!(convert_request(older, NEWER).unwrap(), object);
        }

        #[test]
        fn v1alpha1_requests_round_trip_through_v1alpha2(object in request_v1alpha1()) {
            let newer = convert_request(object.clone(), NEWER).unwrap();
            prop_assert_eq!(&newer["spec"], &object["spec"]);
            prop_assert_eq!(convert_request(newer, OLDER).unwrap(), object);
        }

        #[test]
        fn disposable_requests_round_trip_through_v1alpha1(object in disposable_v1alpha2()) {
            let older = convert_disposable(object.clone(), OLDER).unwrap();
            for path in DISPOSABLE_ONLY_V1ALPHA2 {
                prop_assert!(get_path(&older, path).is_none(), "{} shown in v1alpha1", key(path));
            }
            prop_assert_eq!(&older["spec"]["forProvider"]["rollbackRetriesLimit"], &json!(3));
            let newer = convert_disposable(older.clone(), NEWER).unwrap();
            prop_assert_eq!(&newer, &object);
            // And a v1alpha1 object (what v1alpha1 showed, without what it kept) stays itself.
            let mut plain = older;
            take_kept(&mut plain, V1ALPHA2_FIELDS);
            prop_assert_eq!(convert_disposable(convert_disposable(plain.clone(), NEWER).unwrap(), OLDER).unwrap(), plain);
        }
    }
}
