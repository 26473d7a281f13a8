//! Conversion of the cluster-scoped `Object` between `v1alpha1` and `v1alpha2` (the storage
//! version), served as a CRD conversion webhook (`ConversionReview` v1).
//!
//! The versions differ where upstream's types do: v1alpha1 has `spec.managementPolicy`
//! (`Default`, `ObserveCreateUpdate`, `ObserveDelete`, `Observe`) and the deprecated
//! `spec.providerRef`; v1alpha2 has `spec.managementPolicies`,
//! `spec.forProvider.deletionPropagationPolicy` and `spec.readiness.celQuery`. Everything else
//! (manifest, references, readiness policy, connection details, watch, the shared managed
//! fields, status) is the same in both.
//!
//! Unlike upstream's converter, nothing is lost on a round trip (see [`crate::conversion`]); a
//! kept value is used only while the field it stands for still says the same (a policy changed
//! through v1alpha1 wins over kept `managementPolicies`).

use serde_json::{Map, Value, json};

use super::{CLUSTER_GROUP, CLUSTER_VERSION, OLDER_CLUSTER_VERSION};
use crate::conversion::{direction, keep, take_kept};

/// On a v1alpha1 view: the v1alpha2 fields it cannot show.
pub const V1ALPHA2_FIELDS: &str = "kubernetes.crossplane.io/v1alpha2-fields";
/// On a v1alpha2 view: the v1alpha1 fields it cannot show.
pub const V1ALPHA1_FIELDS: &str = "kubernetes.crossplane.io/v1alpha1-fields";

/// The v1alpha2 `managementPolicies` of a v1alpha1 `managementPolicy`.
fn policies_of(policy: &str) -> Result<Value, String> {
    Ok(match policy {
        "Default" => json!(["*"]),
        "ObserveCreateUpdate" => json!(["Observe", "Create", "Update"]),
        "ObserveDelete" => json!(["Observe", "Delete"]),
        "Observe" => json!(["Observe"]),
        other => return Err(format!("unknown management policy: {other}")),
    })
}

/// The v1alpha1 `managementPolicy` closest to v1alpha2 `managementPolicies`, as upstream
/// chooses it (none when v1alpha1 has no such policy).
fn policy_of(policies: &Value) -> Option<&'static str> {
    let set: Vec<&str> = policies.as_array()?.iter().filter_map(Value::as_str).collect();
    let has = |a: &str| set.contains(&a);
    let (observe, create, update, delete) = (has("Observe"), has("Create"), has("Update"), has("Delete"));
    if has("*") || (observe && create && update && delete) {
        Some("Default")
    } else if observe && create && update {
        Some("ObserveCreateUpdate")
    } else if observe && delete && !create && !update {
        Some("ObserveDelete")
    } else if observe && !create && !update && !delete {
        Some("Observe")
    } else {
        None
    }
}

fn spec_mut(object: &mut Value) -> Option<&mut Map<String, Value>> {
    object.get_mut("spec")?.as_object_mut()
}

/// Removes `map.<outer>.<field>`.
fn take_nested(map: &mut Map<String, Value>, outer: &str, field: &str) -> Option<Value> {
    map.get_mut(outer)?.as_object_mut()?.remove(field)
}

/// Sets `map.<outer>.<field>`, making `outer` when missing.
fn put_nested(map: &mut Map<String, Value>, outer: &str, field: &str, value: Value) {
    let entry = map.entry(outer).or_insert_with(|| json!({}));
    if let Some(inner) = entry.as_object_mut() {
        inner.insert(field.to_string(), value);
    }
}

/// A v1alpha2 Object as v1alpha1.
pub fn to_v1alpha1(mut object: Value) -> Value {
    let mut restored = take_kept(&mut object, V1ALPHA1_FIELDS);
    let mut kept = Map::new();
    if let Some(spec) = spec_mut(&mut object) {
        if let Some(policies) = spec.remove("managementPolicies") {
            let policy = policy_of(&policies);
            if let Some(policy) = policy {
                spec.insert("managementPolicy".into(), json!(policy));
            }
            // Kept unless v1alpha1's policy says exactly the same.
            if policy.and_then(|p| policies_of(p).ok()).as_ref() != Some(&policies) {
                kept.insert("managementPolicies".into(), policies);
            }
        }
        if let Some(propagation) = take_nested(spec, "forProvider", "deletionPropagationPolicy") {
            kept.insert("deletionPropagationPolicy".into(), propagation);
        }
        if let Some(query) = take_nested(spec, "readiness", "celQuery") {
            kept.insert("celQuery".into(), query);
        }
        if let Some(provider) = restored.remove("providerRef") {
            spec.insert("providerRef".into(), provider);
        }
    }
    keep(&mut object, V1ALPHA2_FIELDS, kept);
    object["apiVersion"] = json!(format!("{CLUSTER_GROUP}/{OLDER_CLUSTER_VERSION}"));
    object
}

/// A v1alpha1 Object as v1alpha2.
pub fn to_v1alpha2(mut object: Value) -> Result<Value, String> {
    let mut restored = take_kept(&mut object, V1ALPHA2_FIELDS);
    let mut kept = Map::new();
    if let Some(spec) = spec_mut(&mut object) {
        let policy = spec.remove("managementPolicy");
        let policy_name = policy.as_ref().and_then(Value::as_str);
        // Kept policies stand while the v1alpha1 policy still maps to them.
        let policies = match restored.remove("managementPolicies") {
            Some(policies) if policy_of(&policies) == policy_name => Some(policies),
            _ => match policy_name {
                Some(name) => Some(policies_of(name)?),
                None if policy.is_some() => return Err("managementPolicy must be a string".into()),
                None => None,
            },
        };
        if let Some(policies) = policies {
            spec.insert("managementPolicies".into(), policies);
        }
        if let Some(propagation) = restored.remove("deletionPropagationPolicy") {
            put_nested(spec, "forProvider", "deletionPropagationPolicy", propagation);
        }
        if let Some(query) = restored.remove("celQuery") {
            put_nested(spec, "readiness", "celQuery", query);
        }
        if let Some(provider) = spec.remove("providerRef") {
            kept.insert("providerRef".into(), provider);
        }
    }
    keep(&mut object, V1ALPHA1_FIELDS, kept);
    object["apiVersion"] = json!(format!("{CLUSTER_GROUP}/{CLUSTER_VERSION}"));
    Ok(object)
}

/// An Object in `desired` (`group/version`).
pub fn convert(object: Value, desired: &str) -> Result<Value, String> {
    let older = format!("{CLUSTER_GROUP}/{OLDER_CLUSTER_VERSION}");
    let newer = format!("{CLUSTER_GROUP}/{CLUSTER_VERSION}");
    match direction(&object, desired, &older, &newer, "an Object")? {
        None => Ok(object),
        Some(true) => to_v1alpha2(object),
        Some(false) => Ok(to_v1alpha1(object)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use crate::conversion::strategies::{metadata, text};

    const OLDER: &str = "kubernetes.crossplane.io/v1alpha1";
    const NEWER: &str = "kubernetes.crossplane.io/v1alpha2";

    #[test]
    fn policies_map_as_upstream_maps_them() {
        let v1 = json!({"apiVersion": OLDER, "kind": "Object", "metadata": {"name": "a"}, "spec": {"managementPolicy": "ObserveDelete", "forProvider": {"manifest": {}}}});
        let v2 = convert(v1.clone(), NEWER).unwrap();
        assert_eq!(v2["spec"]["managementPolicies"], json!(["Observe", "Delete"]));
        assert!(v2["spec"].get("managementPolicy").is_none());
        assert!(v2["metadata"].get("annotations").is_none(), "nothing kept: {v2}");
        assert_eq!(convert(v2, OLDER).unwrap(), v1);

        // A v1alpha2 combination v1alpha1 has no policy for is kept, and comes back.
        let v2 = json!({"apiVersion": NEWER, "kind": "Object", "metadata": {"name": "a"},
            "spec": {"managementPolicies": ["Observe", "Create"], "forProvider": {"manifest": {}, "deletionPropagationPolicy": "Foreground"},
                     "readiness": {"policy": "DeriveFromCelQuery", "celQuery": "object.data.x == 'y'"}}});
        let v1 = convert(v2.clone(), OLDER).unwrap();
        assert!(v1["spec"].get("managementPolicy").is_none());
        assert!(v1["spec"]["forProvider"].get("deletionPropagationPolicy").is_none());
        assert!(v1["spec"]["readiness"].get("celQuery").is_none());
        assert!(v1["metadata"]["annotations"][V1ALPHA2_FIELDS].is_string());
        assert_eq!(convert(v1, NEWER).unwrap(), v2);

        // A policy changed through v1alpha1 wins over the kept policies.
        let v2 = json!({"apiVersion": NEWER, "kind": "Object", "spec": {"managementPolicies": ["Create", "Observe", "Update"]}});
        let mut v1 = convert(v2, OLDER).unwrap();
        assert_eq!(v1["spec"]["managementPolicy"], "ObserveCreateUpdate");
        v1["spec"]["managementPolicy"] = json!("Observe");
        assert_eq!(convert(v1, NEWER).unwrap()["spec"]["managementPolicies"], json!(["Observe"]));

        let bad = json!({"apiVersion": OLDER, "kind": "Object", "spec": {"managementPolicy": "FullControl"}});
        assert_eq!(convert(bad, NEWER).unwrap_err(), "unknown management policy: FullControl");
        assert!(convert(json!({"apiVersion": "v1", "kind": "Object"}), NEWER).is_err());
    }

    #[test]
    fn reviews_answer_each_object_or_fail_the_whole() {
        let body = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "request": {"uid": "u1", "desiredAPIVersion": NEWER,
            "objects": [{"apiVersion": OLDER, "kind": "Object", "spec": {"managementPolicy": "Observe"}}]}});
        let answer = crate::conversion::answer(body.to_string().as_bytes(), convert);
        assert_eq!(answer["response"]["uid"], "u1");
        assert_eq!(answer["response"]["result"]["status"], "Success");
        assert_eq!(answer["response"]["convertedObjects"][0]["spec"]["managementPolicies"], json!(["Observe"]));
        let body = json!({"request": {"uid": "u2", "desiredAPIVersion": NEWER, "objects": [{"apiVersion": OLDER, "kind": "Object", "spec": {"managementPolicy": "Sometimes"}}]}});
        let answer = crate::conversion::answer(body.to_string().as_bytes(), convert);
        assert_eq!(answer["response"]["result"]["status"], "Failure");
        assert!(answer["response"]["result"]["message"].as_str().unwrap().contains("Sometimes"));
    }

    fn maybe(value: impl Strategy<Value = Value>) -> impl Strategy<Value = Option<Value>> {
        proptest::option::of(value)
    }

    fn manifest() -> impl Strategy<Value = Value> {
        proptest::collection::btree_map("[a-z]{1,6}", text(), 0..4).prop_map(|data| json!({"apiVersion": "v1", "kind": "ConfigMap", "data": data}))
    }

    /// What both versions share in spec.
    fn common(spec: &mut Map<String, Value>, manifest: Value, watch: Option<bool>, readiness: Option<&str>, deletion: Option<&str>) {
        spec.insert("forProvider".into(), json!({"manifest": manifest}));
        if let Some(watch) = watch {
            spec.insert("watch".into(), json!(watch));
        }
        if let Some(policy) = readiness {
            spec.insert("readiness".into(), json!({"policy": policy}));
        }
        if let Some(deletion) = deletion {
            spec.insert("deletionPolicy".into(), json!(deletion));
        }
        spec.insert("references".into(), json!([{"dependsOn": {"name": "other"}}]));
        spec.insert("providerConfigRef".into(), json!({"name": "default"}));
    }

    fn v1alpha2() -> impl Strategy<Value = Value> {
        let actions = proptest::sample::subsequence(vec!["Observe", "Create", "Update", "Delete", "LateInitialize", "*"], 0..=6).prop_shuffle();
        (
            metadata(),
            manifest(),
            maybe(actions.prop_map(|a| json!(a))),
            proptest::option::of(any::<bool>()),
            proptest::option::of(proptest::sample::select(vec!["SuccessfulCreate", "DeriveFromObject", "AllTrue", "DeriveFromCelQuery"])),
            maybe(text()),
            proptest::option::of(proptest::sample::select(vec!["Orphan", "Background", "Foreground"])),
            proptest::option::of(proptest::sample::select(vec!["Orphan", "Delete"])),
        )
            .prop_map(|(metadata, manifest, policies, watch, readiness, cel, propagation, deletion)| {
                let mut spec = Map::new();
                common(&mut spec, manifest, watch, readiness, deletion);
                if let Some(policies) = policies {
                    spec.insert("managementPolicies".into(), policies);
                }
                if let Some(cel) = cel {
                    put_nested(&mut spec, "readiness", "celQuery", cel);
                }
                if let Some(propagation) = propagation {
                    put_nested(&mut spec, "forProvider", "deletionPropagationPolicy", json!(propagation));
                }
                json!({"apiVersion": NEWER, "kind": "Object", "metadata": metadata, "spec": spec,
                       "status": {"conditions": [{"type": "Ready", "status": "True"}], "atProvider": {"manifest": {"kind": "ConfigMap"}}}})
            })
    }

    fn v1alpha1() -> impl Strategy<Value = Value> {
        (
            metadata(),
            manifest(),
            proptest::option::of(proptest::sample::select(vec!["Default", "ObserveCreateUpdate", "ObserveDelete", "Observe"])),
            proptest::option::of(any::<bool>()),
            proptest::option::of(proptest::sample::select(vec!["SuccessfulCreate", "DeriveFromObject", "AllTrue"])),
            proptest::option::of("[a-z]{1,8}"),
            proptest::option::of(proptest::sample::select(vec!["Orphan", "Delete"])),
        )
            .prop_map(|(metadata, manifest, policy, watch, readiness, provider, deletion)| {
                let mut spec = Map::new();
                common(&mut spec, manifest, watch, readiness, deletion);
                if let Some(policy) = policy {
                    spec.insert("managementPolicy".into(), json!(policy));
                }
                if let Some(provider) = provider {
                    spec.insert("providerRef".into(), json!({"name": provider}));
                }
                json!({"apiVersion": OLDER, "kind": "Object", "metadata": metadata, "spec": spec, "status": {"conditions": []}})
            })
    }

    proptest! {
        #[test]
        fn v1alpha2_round_trips_through_v1alpha1(object in v1alpha2()) {
            let older = convert(object.clone(), OLDER).unwrap();
            prop_assert!(older["spec"].get("managementPolicies").is_none());
            prop_assert!(older["spec"]["forProvider"].get("deletionPropagationPolicy").is_none());
            prop_assert_eq!(&older["status"], &object["status"]);
            prop_assert_eq!(convert(older, NEWER).unwrap(), object);
        }

        #[test]
        fn v1alpha1_round_trips_through_v1alpha2(object in v1alpha1()) {
            let newer = convert(object.clone(), NEWER).unwrap();
            prop_assert!(newer["spec"].get("managementPolicy").is_none());
            prop_assert!(newer["spec"].get("providerRef").is_none());
            if let Some(policy) = object["spec"]["managementPolicy"].as_str() {
                prop_assert_eq!(&newer["spec"]["managementPolicies"], &policies_of(policy).unwrap());
            }
            prop_assert_eq!(convert(newer, OLDER).unwrap(), object);
        }
    }
}
