//! Apply: ownership, shared fields, conflicts and force, removal, metadata, errors.

use serde_json::{Value, json};

use super::*;
use crate::apply::*;

#[test]
fn create_by_apply_then_drop_a_field() {
    let a = ap(
        None,
        &[],
        with(base(), json!({"spec": {"replicas": 1, "paused": true}})),
        "m1",
        false,
    )
    .unwrap();
    assert_eq!(
        a.object,
        with(base(), json!({"spec": {"replicas": 1, "paused": true}}))
    );
    assert_eq!(a.managed.len(), 1);
    assert_eq!(a.managed[0].operation, Operation::Apply);
    assert_eq!(a.managed[0].time.as_deref(), Some(NOW));
    assert_eq!(
        fields_of(&a.managed, "m1"),
        json!({"f:spec": {"f:paused": {}, "f:replicas": {}}})
    );
    let b = ap_on(
        &a,
        with(base(), json!({"spec": {"replicas": 1}})),
        "m1",
        false,
    );
    assert_eq!(b.object, with(base(), json!({"spec": {"replicas": 1}})));
    assert_eq!(
        fields_of(&b.managed, "m1"),
        json!({"f:spec": {"f:replicas": {}}})
    );
}

#[test]
fn dropping_the_last_field_drops_unowned_empty_parents() {
    let a = ap(
        None,
        &[],
        with(base(), json!({"spec": {"deep": {"er": {"x": 1}}}})),
        "m1",
        false,
    )
    .unwrap();
    let b = ap_on(&a, base(), "m1", false);
    assert_eq!(b.object, base());
    assert!(b.managed.is_empty(), "an empty entry is dropped");
}

#[test]
fn disjoint_managers_both_kept() {
    let a = ap(
        None,
        &[],
        with(base(), json!({"spec": {"replicas": 1}})),
        "m1",
        false,
    )
    .unwrap();
    let b = ap_on(
        &a,
        with(base(), json!({"spec": {"paused": false}})),
        "m2",
        false,
    );
    assert_eq!(b.object["spec"], json!({"replicas": 1, "paused": false}));
    assert_eq!(
        fields_of(&b.managed, "m1"),
        json!({"f:spec": {"f:replicas": {}}})
    );
    assert_eq!(
        fields_of(&b.managed, "m2"),
        json!({"f:spec": {"f:paused": {}}})
    );
    // Entry order: existing first, new appended.
    let names: Vec<&str> = b.managed.iter().map(|e| e.manager.as_str()).collect();
    assert_eq!(names, ["m1", "m2"]);
}

#[test]
fn same_value_is_shared_and_survives_one_manager_dropping_it() {
    let a = ap(
        None,
        &[],
        with(base(), json!({"spec": {"replicas": 3}})),
        "m1",
        false,
    )
    .unwrap();
    let b = ap_on(
        &a,
        with(base(), json!({"spec": {"replicas": 3}})),
        "m2",
        false,
    );
    assert_eq!(fields_of(&b.managed, "m1"), fields_of(&b.managed, "m2"));
    let c = ap_on(&b, base(), "m1", false);
    assert_eq!(c.object["spec"]["replicas"], json!(3), "still owned by m2");
    assert_eq!(fields_of(&c.managed, "m1"), Value::Null);
}

#[test]
fn different_value_conflicts_and_force_moves_ownership() {
    let a = ap(
        None,
        &[],
        with(base(), json!({"spec": {"replicas": 3, "paused": true}})),
        "m1",
        false,
    )
    .unwrap();
    let cfg = with(base(), json!({"spec": {"replicas": 5}}));
    let err = ap(Some(&a.object), &a.managed, cfg.clone(), "m2", false);
    let Err(ApplyError::Conflicts(cs)) = &err else {
        panic!("{err:?}")
    };
    let (msg, causes) = conflict_status_message(cs);
    assert_eq!(
        msg,
        "Apply failed with 1 conflict: conflict with \"m1\": .spec.replicas"
    );
    assert_eq!(
        causes,
        vec![(
            "conflict with \"m1\"".to_string(),
            ".spec.replicas".to_string()
        )]
    );
    assert_eq!(cs.0[0].operation, Operation::Apply);

    let f = ap(Some(&a.object), &a.managed, cfg, "m2", true).unwrap();
    assert_eq!(f.object["spec"], json!({"replicas": 5, "paused": true}));
    assert_eq!(
        fields_of(&f.managed, "m1"),
        json!({"f:spec": {"f:paused": {}}})
    );
    assert_eq!(
        fields_of(&f.managed, "m2"),
        json!({"f:spec": {"f:replicas": {}}})
    );
    // m1 re-applying its old value now conflicts with m2.
    let again = ap(
        Some(&f.object),
        &f.managed,
        with(base(), json!({"spec": {"replicas": 3, "paused": true}})),
        "m1",
        false,
    );
    assert_eq!(
        conflicts(again),
        vec![("m2".to_string(), ".spec.replicas".to_string())]
    );
}

#[test]
fn client_side_apply_migration() {
    // An object last written by kubectl's client-side apply (an Update manager).
    let live = with(base(), json!({"spec": {"replicas": 2, "paused": false}}));
    let managed = update(
        None,
        &live,
        &[],
        "kubectl-client-side-apply",
        "v1",
        Scope::WholeObject,
        Some(&schema()),
        NOW,
    );
    assert_eq!(managed[0].operation, Operation::Update);
    let same = ap(
        Some(&live),
        &managed,
        with(base(), json!({"spec": {"replicas": 2}})),
        "kubectl",
        false,
    )
    .unwrap();
    assert_eq!(same.object, live);
    assert_eq!(
        fields_of(&same.managed, "kubectl"),
        json!({"f:spec": {"f:replicas": {}}})
    );
    assert_eq!(
        fields_of(&same.managed, "kubectl-client-side-apply"),
        json!({"f:spec": {"f:paused": {}, "f:replicas": {}}})
    );
    let differ = ap(
        Some(&live),
        &managed,
        with(base(), json!({"spec": {"replicas": 4}})),
        "kubectl",
        false,
    );
    let Err(ApplyError::Conflicts(cs)) = differ else {
        panic!()
    };
    assert_eq!(cs.0[0].manager, "kubectl-client-side-apply");
    assert_eq!(cs.0[0].operation, Operation::Update);
    assert_eq!(cs.0[0].path, ".spec.replicas");
}

#[test]
fn replacing_a_node_with_another_kind_conflicts_with_its_owner() {
    let a = ap(
        None,
        &[],
        with(base(), json!({"spec": {"x": 1}})),
        "m1",
        false,
    )
    .unwrap();
    let r = ap(
        Some(&a.object),
        &a.managed,
        with(base(), json!({"spec": {"x": {"y": 1}}})),
        "m2",
        false,
    );
    assert_eq!(
        conflicts(r),
        vec![("m1".to_string(), ".spec.x".to_string())]
    );
    let a = ap(
        None,
        &[],
        with(base(), json!({"spec": {"x": {"y": 1, "z": 2}}})),
        "m1",
        false,
    )
    .unwrap();
    let r = ap(
        Some(&a.object),
        &a.managed,
        with(base(), json!({"spec": {"x": 7}})),
        "m2",
        false,
    );
    assert_eq!(
        conflicts(r),
        vec![
            ("m1".into(), ".spec.x.y".into()),
            ("m1".into(), ".spec.x.z".into())
        ]
    );
}

#[test]
fn server_metadata_is_kept_and_never_tracked() {
    let live = json!({"apiVersion": "v1", "kind": "Thing", "metadata": {"name": "t", "uid": "u1", "resourceVersion": "7",
        "managedFields": [], "labels": {"a": "1"}}});
    let cfg = json!({"apiVersion": "v1", "kind": "Thing", "metadata": {"name": "t", "uid": "evil", "labels": {"b": "2"}}});
    let r = ap(Some(&live), &[], cfg, "m", false).unwrap();
    assert_eq!(
        r.object["metadata"],
        json!({"name": "t", "uid": "u1", "resourceVersion": "7", "managedFields": [], "labels": {"a": "1", "b": "2"}})
    );
    assert_eq!(
        fields_of(&r.managed, "m"),
        json!({"f:metadata": {"f:labels": {"f:b": {}}}})
    );
}

#[test]
fn invalid_inputs_are_errors() {
    let r = ap(
        None,
        &[],
        with(base(), json!({"spec": {"containers": [{"image": "x"}]}})),
        "m",
        false,
    );
    assert_eq!(
        r,
        Err(ApplyError::InvalidListMapItem {
            path: ".spec.containers[0]".into()
        })
    );
    assert!(matches!(
        ap(None, &[], json!([1]), "m", false),
        Err(ApplyError::NotAnObject { .. })
    ));
    assert!(matches!(
        ap(Some(&json!("x")), &[], base(), "m", false),
        Err(ApplyError::NotAnObject { .. })
    ));
}

#[test]
fn reapply_updates_time_and_api_version() {
    let a = ap(
        None,
        &[],
        with(base(), json!({"spec": {"replicas": 1}})),
        "m",
        false,
    )
    .unwrap();
    let b = apply(
        Some(&a.object),
        &a.managed,
        &with(base(), json!({"spec": {"replicas": 1}})),
        "m",
        "v2",
        false,
        Scope::WholeObject,
        Some(&schema()),
        LATER,
    )
    .unwrap();
    assert_eq!(b.managed.len(), 1);
    assert_eq!(b.managed[0].api_version, "v2");
    assert_eq!(b.managed[0].time.as_deref(), Some(LATER));
}

#[test]
fn stale_claims_do_not_conflict_and_are_dropped() {
    let live = with(base(), json!({"spec": {"replicas": 1}}));
    let stale = ManagedFieldsEntry::from_json(
        &json!({"manager": "old", "operation": "Update", "apiVersion": "v1",
        "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:gone": {}, "f:replicas": {}}}}),
    )
    .unwrap();
    let r = ap(
        Some(&live),
        &[stale],
        with(base(), json!({"spec": {"gone": 2}})),
        "m",
        false,
    )
    .unwrap();
    assert_eq!(
        fields_of(&r.managed, "old"),
        json!({"f:spec": {"f:replicas": {}}})
    );
    assert_eq!(
        fields_of(&r.managed, "m"),
        json!({"f:spec": {"f:gone": {}}})
    );
}

#[test]
fn managed_fields_survive_a_json_round_trip_after_apply() {
    let a = ap(
        None,
        &[],
        with(
            base(),
            json!({"metadata": {"labels": {"a": "1"}, "finalizers": ["x"]},
        "spec": {"containers": [{"name": "c", "image": "i"}]}}),
        ),
        "m",
        false,
    )
    .unwrap();
    let mut obj = a.object.clone();
    obj["metadata"]["managedFields"] = managed_fields_to_json(&a.managed);
    assert_eq!(parse_managed_fields(&obj).unwrap(), a.managed);
    assert_eq!(
        obj["metadata"]["managedFields"][0]["fieldsV1"],
        json!({
            "f:metadata": {"f:finalizers": {"v:\"x\"": {}}, "f:labels": {"f:a": {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}, "f:name": {}}}}
        })
    );
    // Applying again over the stored form (managedFields inside the object) changes nothing.
    let b = ap(
        Some(&obj),
        &parse_managed_fields(&obj).unwrap(),
        with(
            base(),
            json!({"metadata": {"labels": {"a": "1"}, "finalizers": ["x"]},
        "spec": {"containers": [{"name": "c", "image": "i"}]}}),
        ),
        "m",
        false,
    )
    .unwrap();
    assert_eq!(b.object, obj);
    assert_eq!(b.managed, a.managed);
}
