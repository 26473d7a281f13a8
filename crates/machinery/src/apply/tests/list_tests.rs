//! Apply on atomic, set and map lists, and atomic maps.

use serde_json::json;

use super::*;

#[test]
fn atomic_list_is_replaced_whole() {
    let a = ap(
        None,
        &[],
        with(base(), json!({"spec": {"args": ["a", "b"]}})),
        "m1",
        false,
    )
    .unwrap();
    assert_eq!(
        fields_of(&a.managed, "m1"),
        json!({"f:spec": {"f:args": {}}})
    );
    let r = ap(
        Some(&a.object),
        &a.managed,
        with(base(), json!({"spec": {"args": ["c"]}})),
        "m2",
        false,
    );
    assert_eq!(
        conflicts(r),
        vec![("m1".to_string(), ".spec.args".to_string())]
    );
    let b = ap_on(
        &a,
        with(base(), json!({"spec": {"args": ["c"]}})),
        "m1",
        false,
    );
    assert_eq!(b.object["spec"]["args"], json!(["c"]));
}

#[test]
fn set_list_union_and_removal_of_own_items_only() {
    let a = ap(
        None,
        &[],
        with(
            base(),
            json!({"metadata": {"name": "t", "finalizers": ["a", "b"]}}),
        ),
        "m1",
        false,
    )
    .unwrap();
    assert_eq!(
        fields_of(&a.managed, "m1"),
        json!({"f:metadata": {"f:finalizers": {"v:\"a\"": {}, "v:\"b\"": {}}}})
    );
    let b = ap_on(
        &a,
        with(base(), json!({"metadata": {"finalizers": ["c", "b"]}})),
        "m2",
        false,
    );
    assert_eq!(b.object["metadata"]["finalizers"], json!(["a", "b", "c"]));
    // m1 stops applying both: "a" goes, "b" stays (m2 owns it too).
    let c = ap_on(&b, base(), "m1", false);
    assert_eq!(c.object["metadata"]["finalizers"], json!(["b", "c"]));
    assert_eq!(
        fields_of(&c.managed, "m2"),
        json!({"f:metadata": {"f:finalizers": {"v:\"b\"": {}, "v:\"c\"": {}}}})
    );
    // m2 stops too: the emptied, unowned list disappears.
    let d = ap_on(&c, base(), "m2", false);
    assert_eq!(d.object, base());
}

#[test]
fn map_list_merges_by_key_with_two_owners() {
    let a = ap(
        None,
        &[],
        with(
            base(),
            json!({"spec": {"containers": [{"name": "app", "image": "app:1"}]}}),
        ),
        "m1",
        false,
    )
    .unwrap();
    assert_eq!(
        fields_of(&a.managed, "m1"),
        json!({"f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {".": {}, "f:image": {}, "f:name": {}}}}})
    );
    let b = ap_on(
        &a,
        with(
            base(),
            json!({"spec": {"containers": [{"name": "sidecar", "image": "s:1"}, {"name": "app", "port": 80}]}}),
        ),
        "m2",
        false,
    );
    // Config order for config items; "app" existed, "sidecar" is placed before it.
    assert_eq!(
        b.object["spec"]["containers"],
        json!([{"name": "sidecar", "image": "s:1"}, {"name": "app", "image": "app:1", "port": 80}])
    );
    // A different image for m1's item conflicts on that field only.
    let r = ap(
        Some(&b.object),
        &b.managed,
        with(
            base(),
            json!({"spec": {"containers": [{"name": "app", "image": "app:2"}]}}),
        ),
        "m2",
        false,
    );
    assert_eq!(
        conflicts(r),
        vec![(
            "m1".to_string(),
            ".spec.containers[name=\"app\"].image".to_string()
        )]
    );
    // m1 stops applying its item: m2 still owns the item and its port, so the item stays
    // (with its key) but loses m1's image.
    let c = ap_on(&b, base(), "m1", false);
    assert_eq!(
        c.object["spec"]["containers"],
        json!([{"name": "sidecar", "image": "s:1"}, {"name": "app", "port": 80}])
    );
    // m2 stops applying "sidecar": that item is removed.
    let d = ap_on(
        &c,
        with(
            base(),
            json!({"spec": {"containers": [{"name": "app", "port": 80}]}}),
        ),
        "m2",
        false,
    );
    assert_eq!(
        d.object["spec"]["containers"],
        json!([{"name": "app", "port": 80}])
    );
}

#[test]
fn atomic_map_is_replaced_whole() {
    let a = ap(
        None,
        &[],
        with(base(), json!({"spec": {"selector": {"a": "1", "b": "2"}}})),
        "m1",
        false,
    )
    .unwrap();
    assert_eq!(
        fields_of(&a.managed, "m1"),
        json!({"f:spec": {"f:selector": {}}})
    );
    let b = ap_on(
        &a,
        with(base(), json!({"spec": {"selector": {"c": "3"}}})),
        "m1",
        false,
    );
    assert_eq!(b.object["spec"]["selector"], json!({"c": "3"}));
    let r = ap(
        Some(&b.object),
        &b.managed,
        with(base(), json!({"spec": {"selector": {"c": "3", "d": "4"}}})),
        "m2",
        false,
    );
    assert_eq!(
        conflicts(r),
        vec![("m1".to_string(), ".spec.selector".to_string())]
    );
}
