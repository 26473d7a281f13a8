//! Update bookkeeping and status-subresource scopes.

use serde_json::{Value, json};

use super::*;
use crate::apply::*;

#[test]
fn scopes_separate_main_and_status() {
    let s = schema();
    let cfg = with(
        base(),
        json!({"spec": {"replicas": 1}, "status": {"ready": true}}),
    );
    let a = apply(
        None,
        &[],
        &cfg,
        "m",
        "v1",
        false,
        Scope::Main,
        Some(&s),
        NOW,
    )
    .unwrap();
    assert_eq!(
        a.object,
        with(base(), json!({"spec": {"replicas": 1}})),
        "status ignored"
    );
    assert_eq!(
        fields_of(&a.managed, "m"),
        json!({"f:spec": {"f:replicas": {}}})
    );
    let b = apply(
        Some(&a.object),
        &a.managed,
        &cfg,
        "m",
        "v1",
        false,
        Scope::Status,
        Some(&s),
        NOW,
    )
    .unwrap();
    assert_eq!(
        b.object,
        with(
            base(),
            json!({"spec": {"replicas": 1}, "status": {"ready": true}})
        )
    );
    assert_eq!(b.managed.len(), 2);
    assert_eq!(b.managed[1].subresource.as_deref(), Some("status"));
    assert_eq!(
        b.managed[1].fields.to_fields_v1(),
        json!({"f:status": {"f:ready": {}}})
    );
    // A main-scope apply without status never removes status fields.
    let c = apply(
        Some(&b.object),
        &b.managed,
        &base(),
        "m",
        "v1",
        false,
        Scope::Main,
        Some(&s),
        NOW,
    )
    .unwrap();
    assert_eq!(c.object, with(base(), json!({"status": {"ready": true}})));
    // Update through status owns only status.
    let new = with(
        base(),
        json!({"spec": {"replicas": 9}, "status": {"ready": false}}),
    );
    let m = update(
        Some(&c.object),
        &new,
        &c.managed,
        "ctl",
        "v1",
        Scope::Status,
        Some(&s),
        NOW,
    );
    let ctl = m.iter().find(|e| e.manager == "ctl").unwrap();
    assert_eq!(ctl.subresource.as_deref(), Some("status"));
    assert_eq!(
        ctl.fields.to_fields_v1(),
        json!({"f:status": {"f:ready": {}}})
    );
}

#[test]
fn update_create_marks_created_maps() {
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"key": "v"}});
    let m = update(
        None,
        &cm,
        &[],
        "kubectl-create",
        "v1",
        Scope::WholeObject,
        None::<&Untyped>,
        NOW,
    );
    assert_eq!(m.len(), 1);
    assert_eq!(
        m[0].to_json(),
        json!({"manager": "kubectl-create", "operation": "Update", "apiVersion": "v1",
        "time": NOW, "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {".": {}, "f:key": {}}}})
    );
    // Structs (per schema) get no marker; maps and list items do.
    let obj = with(
        base(),
        json!({"metadata": {"name": "t", "labels": {"app": "x"}}, "spec": {"replicas": 1, "containers": [{"name": "c", "image": "i"}]}}),
    );
    let m = update(
        None,
        &obj,
        &[],
        "u",
        "v1",
        Scope::WholeObject,
        Some(&schema()),
        NOW,
    );
    assert_eq!(
        m[0].fields.to_fields_v1(),
        json!({
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}, "f:name": {}}}, "f:replicas": {}}
        })
    );
}

#[test]
fn update_moves_and_removes_ownership() {
    let s = schema();
    let v1 = with(
        base(),
        json!({"spec": {"replicas": 1, "paused": true, "tags": ["x"]}}),
    );
    let m = update(None, &v1, &[], "A", "v1", Scope::WholeObject, Some(&s), NOW);
    let v2 = with(
        base(),
        json!({"spec": {"replicas": 2, "paused": true, "tags": ["x"]}}),
    );
    let m = update(
        Some(&v1),
        &v2,
        &m,
        "B",
        "v1",
        Scope::WholeObject,
        Some(&s),
        LATER,
    );
    assert_eq!(
        fields_of(&m, "A"),
        json!({"f:spec": {"f:paused": {}, "f:tags": {"v:\"x\"": {}}}})
    );
    assert_eq!(fields_of(&m, "B"), json!({"f:spec": {"f:replicas": {}}}));
    assert_eq!(m[1].time.as_deref(), Some(LATER));
    // A no-op write by A changes nothing, not even A's time.
    let same = update(
        Some(&v2),
        &v2,
        &m,
        "A",
        "v1",
        Scope::WholeObject,
        Some(&s),
        LATER,
    );
    assert_eq!(same, m);
    // Deleting a field removes it from every set; B, left empty, disappears.
    let v3 = with(base(), json!({"spec": {"paused": true}}));
    let m = update(
        Some(&v2),
        &v3,
        &m,
        "C",
        "v1",
        Scope::WholeObject,
        Some(&s),
        LATER,
    );
    assert_eq!(m.len(), 1);
    assert_eq!(fields_of(&m, "A"), json!({"f:spec": {"f:paused": {}}}));
    // An applier's field changed by an Update moves silently to the updater.
    let a = ap(
        Some(&v3),
        &m,
        with(base(), json!({"spec": {"replicas": 1}})),
        "ap",
        false,
    )
    .unwrap();
    let v4 = with(base(), json!({"spec": {"paused": true, "replicas": 4}}));
    let m = update(
        Some(&a.object),
        &v4,
        &a.managed,
        "hpa",
        "v1",
        Scope::WholeObject,
        Some(&s),
        LATER,
    );
    assert_eq!(fields_of(&m, "ap"), Value::Null);
    assert_eq!(fields_of(&m, "hpa"), json!({"f:spec": {"f:replicas": {}}}));
}
