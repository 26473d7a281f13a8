//! Each connection detail type, and the connection secret of a modern XR.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::super::compile::compile_input;
use super::super::connection::{compose_secret, extract};
use super::super::run as pt_run;
use super::{messages, nop_base, res, resources_input};
use crate::golang::value::float;
use crate::protocol::{Ready, Resource, RunFunctionRequest, Severity, State};

fn details(raw: Value) -> Vec<super::super::compile::ConnectionDetail> {
    let input = json!({"resources": [{"name": "t", "connectionDetails": raw}]});
    compile_input(Some(&input)).unwrap().templates[0].connection_details.clone()
}

fn observed_db() -> Resource {
    Resource {
        resource: json!({
            "metadata": {"name": "db-1"},
            "status": {"atProvider": {"endpoint": "db.example.com", "port": float(5432.0), "meta": {"a": "<b>"}}}
        }),
        connection_details: BTreeMap::from([("password".to_string(), b"s3cret".to_vec())]),
        ready: Ready::Unspecified,
    }
}

fn bytes(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

#[test]
fn each_connection_detail_type() {
    let got = extract(
        &observed_db(),
        &details(json!([
            {"name": "user", "type": "FromValue", "value": "admin"},
            {"name": "pw", "type": "FromConnectionSecretKey", "fromConnectionSecretKey": "password"},
            {"name": "later", "type": "FromConnectionSecretKey", "fromConnectionSecretKey": "not-yet"},
            {"name": "host", "type": "FromFieldPath", "fromFieldPath": "status.atProvider.endpoint"},
            {"name": "port", "type": "FromFieldPath", "fromFieldPath": "status.atProvider.port"},
            {"name": "meta", "type": "FromFieldPath", "fromFieldPath": "status.atProvider.meta"},
            {"name": "missing", "type": "FromFieldPath", "fromFieldPath": "status.atProvider.nope"}
        ])),
    );
    let want = BTreeMap::from([
        ("user".to_string(), bytes("admin")),
        ("pw".to_string(), bytes("s3cret")),
        ("host".to_string(), bytes("db.example.com")),
        // Not a string: Go's JSON of the value.
        ("port".to_string(), bytes("5432")),
        ("meta".to_string(), bytes(r#"{"a":"\u003cb\u003e"}"#)),
    ]);
    assert_eq!(got, want);
}

#[test]
fn invalid_connection_details_are_refused() {
    let refuse = |raw: Value| {
        let input = json!({"resources": [{"name": "t", "connectionDetails": [raw]}]});
        compile_input(Some(&input)).unwrap_err().to_string()
    };
    assert_eq!(
        refuse(json!({"name": "a"})),
        "invalid Function input: resources[0].connectionDetails[0].type: Required value: connection detail type is required"
    );
    assert_eq!(
        refuse(json!({"name": "a", "type": "FromSecret"})),
        "invalid Function input: resources[0].connectionDetails[0].type: Invalid value: \"FromSecret\": unknown connection detail type"
    );
    assert_eq!(
        refuse(json!({"type": "FromValue", "value": "v"})),
        "invalid Function input: resources[0].connectionDetails[0].name: Required value: name is required"
    );
    assert_eq!(
        refuse(json!({"name": "a", "type": "FromValue"})),
        "invalid Function input: resources[0].connectionDetails[0].value: Required value: value connection detail requires a value"
    );
}

fn modern_xr(spec: Value) -> Value {
    let mut spec = spec;
    spec["crossplane"] = json!({"compositionRef": {"name": "c"}});
    json!({"apiVersion": "example.crossplane.io/v1", "kind": "XDatabase",
           "metadata": {"name": "my-db", "namespace": "team-a"}, "spec": spec})
}

fn observed_request(xr: Value, input: Value) -> RunFunctionRequest {
    RunFunctionRequest {
        input: Some(input),
        observed: State {
            composite: Some(res(xr)),
            resources: BTreeMap::from([("db".to_string(), observed_db())]),
        },
        ..Default::default()
    }
}

fn db_input(extra: Value) -> Value {
    let mut input = resources_input(json!([{"name": "db", "base": nop_base(), "connectionDetails": [
        {"name": "username", "type": "FromValue", "value": "admin"},
        {"name": "password", "type": "FromConnectionSecretKey", "fromConnectionSecretKey": "password"}
    ]}]));
    if let (Value::Object(input), Value::Object(extra)) = (&mut input, extra) {
        input.extend(extra);
    }
    input
}

#[test]
fn legacy_xr_gets_connection_details_and_no_secret() {
    let xr = json!({"apiVersion": "example.crossplane.io/v1", "kind": "XDatabase", "metadata": {"name": "my-db"}, "spec": {}});
    let rsp = pt_run(&observed_request(xr, db_input(json!({}))));
    assert!(rsp.results.is_empty(), "{:?}", rsp.results);
    let composite = rsp.desired.composite.unwrap();
    assert_eq!(
        composite.connection_details,
        BTreeMap::from([("password".to_string(), bytes("s3cret")), ("username".to_string(), bytes("admin"))])
    );
    assert_eq!(rsp.desired.resources.keys().collect::<Vec<_>>(), vec!["db"]);
}

#[test]
fn modern_xr_composes_a_connection_secret_named_by_default() {
    let rsp = pt_run(&observed_request(modern_xr(json!({})), db_input(json!({}))));
    assert!(rsp.results.is_empty(), "{:?}", rsp.results);
    let secret = &rsp.desired.resources["my-db-connection-secret"];
    assert_eq!(
        secret.resource,
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "my-db-connection", "namespace": "team-a"},
            "type": "connection.crossplane.io/v1alpha1",
            // base64 of "s3cret" and "admin".
            "data": {"password": "czNjcmV0", "username": "YWRtaW4="}
        })
    );
    // Not observed yet: not ready yet.
    assert_eq!(secret.ready, Ready::Unspecified);
}

#[test]
fn modern_xr_secret_name_from_xr_then_input_ref() {
    // The XR's own reference wins.
    let xr = modern_xr(json!({"writeConnectionSecretToRef": {"name": "from-xr"}}));
    let input = db_input(json!({"writeConnectionSecretToRef": {"name": "from-input"}}));
    let rsp = pt_run(&observed_request(xr, input));
    assert_eq!(
        rsp.desired.resources["my-db-connection-secret"].resource["metadata"]["name"],
        json!("from-xr")
    );

    // Then the input's reference, after its patches.
    let input = db_input(json!({"writeConnectionSecretToRef": {"name": "from-input", "patches": [
        {"type": "CombineFromComposite", "combine": {"strategy": "string", "variables": [{"fromFieldPath": "metadata.name"}],
         "string": {"fmt": "%s-creds"}}, "toFieldPath": "name"}
    ]}}));
    let rsp = pt_run(&observed_request(modern_xr(json!({})), input));
    assert!(rsp.results.is_empty(), "{:?}", rsp.results);
    let secret = &rsp.desired.resources["my-db-connection-secret"].resource;
    assert_eq!(secret["metadata"], json!({"name": "my-db-creds", "namespace": "team-a"}));

    // A patch whose source is missing leaves the written name.
    let input = db_input(json!({"writeConnectionSecretToRef": {"name": "from-input", "patches": [
        {"fromFieldPath": "spec.secretName", "toFieldPath": "name"}
    ]}}));
    let rsp = pt_run(&observed_request(modern_xr(json!({})), input));
    assert_eq!(
        rsp.desired.resources["my-db-connection-secret"].resource["metadata"]["name"],
        json!("from-input")
    );

    // Patches may only set name or namespace.
    let input = db_input(json!({"writeConnectionSecretToRef": {"patches": [
        {"fromFieldPath": "spec.secretName", "toFieldPath": "metadata.name"}
    ]}}));
    let rsp = pt_run(&observed_request(modern_xr(json!({})), input));
    assert_eq!(
        messages(&rsp, Severity::Fatal),
        vec![
            "invalid Function input: writeConnectionSecretToRef.patches[0].toFieldPath: Invalid value: \"metadata.name\": must be name or namespace"
        ]
    );
}

#[test]
fn modern_xr_secret_is_ready_once_observed_and_absent_without_details() {
    let mut request = observed_request(modern_xr(json!({})), db_input(json!({})));
    request
        .observed
        .resources
        .insert("my-db-connection-secret".into(), res(json!({"apiVersion": "v1", "kind": "Secret"})));
    let rsp = pt_run(&request);
    assert_eq!(rsp.desired.resources["my-db-connection-secret"].ready, Ready::True);

    // No connection details at all: no Secret.
    let input = resources_input(json!([{"name": "db", "base": nop_base()}]));
    let rsp = pt_run(&observed_request(modern_xr(json!({})), input));
    assert!(!rsp.desired.resources.contains_key("my-db-connection-secret"));
}

#[test]
fn compose_secret_for_a_cluster_scoped_xr_uses_the_reference_namespace() {
    let xr = json!({"metadata": {"name": "c"}, "spec": {"crossplane": {},
        "writeConnectionSecretToRef": {"name": "n", "namespace": "crossplane-system"}}});
    let secret = compose_secret(&xr, &BTreeMap::from([("k".to_string(), bytes("v"))]), None).unwrap();
    assert_eq!(secret["metadata"], json!({"name": "n", "namespace": "crossplane-system"}));
    assert_eq!(secret["data"], json!({"k": "dg=="}));
}
