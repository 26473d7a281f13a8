//! `oxplane function serve function-patch-and-transform`, run as its own process with mutual
//! TLS from `oxplane function certs` and called by oxplane's gRPC client, answers every case of
//! a table of patch-and-transform requests exactly as the in-process function does: every
//! patch type and policy, every transform, connection details, readiness checks, environment
//! patches, values of every JSON type, and the errors.

use crate::support;

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use oxplane_functions::grpc::tls::CertificateAuthority;
use oxplane_functions::grpc::{FunctionEndpoint, GrpcFunction, tag};
use oxplane_functions::protocol::{Capability, Function, Ready, Resource, RunFunctionRequest, Severity, State};
use oxplane_functions::PatchAndTransform;
use serde_json::{Value, json};
use support::function_servers::{FunctionServer, oxplane_certs};

const ENVIRONMENT: &str = "apiextensions.crossplane.io/environment";

fn xr() -> Value {
    json!({
        "apiVersion": "example.org/v1", "kind": "XApp",
        "metadata": {"name": "shop", "namespace": "default", "labels": {"team": "a"}, "uid": "0f8e7d6c"},
        "spec": {
            "size": "large", "replicas": 3, "ratio": 0.25, "big": 9007199254740993_u64, "enabled": true,
            "nothing": null, "tags": ["a", "b", "c"], "nested": {"deep": {"value": "x"}}, "empty": {},
            "unicode": "héllo ✓", "quantity": "1500m", "json": "{\"k\": [1, 2]}", "b64": "aGVsbG8=",
            "crossplane": {"compositionRef": {"name": "shop"}}
        },
        "status": {"phase": "Running"}
    })
}

fn nop(fields: Value) -> Value {
    json!({"apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource", "spec": {"forProvider": {"fields": fields}}})
}

/// An observed composed resource named `nop` with status, conditions and connection details.
fn observed_nop() -> Resource {
    Resource {
        resource: json!({
            "apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource",
            "metadata": {"name": "shop-x7k2p", "namespace": "default"},
            "spec": {"forProvider": {"fields": {"kept": 1}}},
            "status": {"atProvider": {"id": "nop-123", "count": 7, "endpoint": "db.example"},
                       "conditions": [{"type": "Ready", "status": "True", "reason": "Available"}, {"type": "Synced", "status": "True"}]}
        }),
        connection_details: BTreeMap::from([("password".to_string(), b"s3cr3t\x00\xff".to_vec()), ("user".to_string(), b"admin".to_vec())]),
        ready: Ready::Unspecified,
    }
}

/// The cases: a name and the `resources` of a `Resources` input (plus, for some, more input).
fn cases() -> Vec<(&'static str, Value)> {
    let from = |from: &str, to: &str, transforms: Value| json!({"fromFieldPath": from, "toFieldPath": to, "transforms": transforms});
    let t = |transforms: Value| json!([{"name": "nop", "base": nop(json!({})), "patches": [from("spec.size", "spec.forProvider.fields.out", transforms)]}]);
    let tn = |field: &str, transforms: Value| json!([{"name": "nop", "base": nop(json!({})), "patches": [from(&format!("spec.{field}"), "spec.forProvider.fields.out", transforms)]}]);
    vec![
        ("every JSON type copied", json!([{"name": "nop", "base": nop(json!({"base": {"list": [1, 2.5, "x", null, true, {}], "n": -0.0}})), "patches": [
            from("spec.replicas", "spec.forProvider.fields.replicas", json!([])),
            from("spec.ratio", "spec.forProvider.fields.ratio", json!([])),
            from("spec.big", "spec.forProvider.fields.big", json!([])),
            from("spec.enabled", "spec.forProvider.fields.enabled", json!([])),
            from("spec.tags", "spec.forProvider.fields.tags", json!([])),
            from("spec.nested", "spec.forProvider.fields.nested", json!([])),
            from("spec.empty", "spec.forProvider.fields.empty", json!([])),
            from("spec.unicode", "spec.forProvider.fields.unicode", json!([])),
            from("metadata.labels[team]", "metadata.annotations[example.org/team]", json!([])),
            from("spec.tags[1]", "spec.forProvider.fields.second", json!([])),
        ]}])),
        ("to composite, from observed", json!([{"name": "nop", "base": nop(json!({})), "patches": [
            {"type": "ToCompositeFieldPath", "fromFieldPath": "status.atProvider.id", "toFieldPath": "status.nopId"},
            {"type": "ToCompositeFieldPath", "fromFieldPath": "status.atProvider.count", "toFieldPath": "status.count",
             "transforms": [{"type": "math", "math": {"type": "Multiply", "multiply": 3}}]},
        ]}])),
        ("combine both ways", json!([{"name": "nop", "base": nop(json!({})), "patches": [
            {"type": "CombineFromComposite", "combine": {"variables": [{"fromFieldPath": "spec.size"}, {"fromFieldPath": "spec.replicas"}],
             "strategy": "string", "string": {"fmt": "%s-%d"}}, "toFieldPath": "spec.forProvider.fields.combined"},
            {"type": "CombineToComposite", "combine": {"variables": [{"fromFieldPath": "status.atProvider.id"}, {"fromFieldPath": "status.atProvider.endpoint"}],
             "strategy": "string", "string": {"fmt": "%s@%s"}}, "toFieldPath": "status.where"},
        ]}])),
        ("environment patches", json!([{"name": "nop", "base": nop(json!({})), "patches": [
            {"type": "FromEnvironmentFieldPath", "fromFieldPath": "region", "toFieldPath": "spec.forProvider.fields.region"},
            {"type": "ToEnvironmentFieldPath", "fromFieldPath": "status.atProvider.id", "toFieldPath": "nopId"},
            {"type": "CombineFromEnvironment", "combine": {"variables": [{"fromFieldPath": "region"}, {"fromFieldPath": "zones"}],
             "strategy": "string", "string": {"fmt": "%s/%v"}}, "toFieldPath": "spec.forProvider.fields.placement"},
        ]}])),
        ("patch sets", json!({"patchSets": [{"name": "common", "patches": [from("spec.size", "spec.forProvider.fields.size", json!([]))]}],
            "resources": [{"name": "nop", "base": nop(json!({})), "patches": [{"type": "PatchSet", "patchSetName": "common"}]}]})),
        ("merge policies", json!([{"name": "nop", "base": nop(json!({"tags": ["z"], "obj": {"keep": 1}})), "patches": [
            {"fromFieldPath": "spec.tags", "toFieldPath": "spec.forProvider.fields.tags", "policy": {"toFieldPath": "MergeObjects"}},
            {"fromFieldPath": "spec.tags", "toFieldPath": "spec.forProvider.fields.tags", "policy": {"toFieldPath": "AppendArray"}},
            {"fromFieldPath": "spec.nested", "toFieldPath": "spec.forProvider.fields.obj", "policy": {"toFieldPath": "MergeObjectsAppendArrays"}},
            {"fromFieldPath": "spec.missing", "toFieldPath": "spec.forProvider.fields.required", "policy": {"fromFieldPath": "Required"}},
        ]}])),
        ("optional missing source", json!([{"name": "nop", "base": nop(json!({"a": 1})), "patches": [from("spec.missing", "spec.forProvider.fields.a", json!([]))]}])),
        ("map", t(json!([{"type": "map", "map": {"large": {"cpu": 4, "tier": "gold"}, "small": "s"}}]))),
        ("match", t(json!([{"type": "match", "match": {"patterns": [{"type": "literal", "literal": "small", "result": 1},
            {"type": "regexp", "regexp": "^l.*e$", "result": {"size": "L", "n": 2.5}}], "fallbackValue": null}}]))),
        ("math", tn("replicas", json!([{"type": "math", "math": {"type": "ClampMin", "clampMin": 5}}, {"type": "math", "math": {"multiply": 2}}]))),
        ("string formats", t(json!([{"type": "string", "string": {"type": "Format", "fmt": "size=%q"}},
            {"type": "string", "string": {"type": "Convert", "convert": "ToUpper"}},
            {"type": "string", "string": {"type": "TrimPrefix", "trim": "SIZE="}}]))),
        ("string conversions", tn("unicode", json!([{"type": "string", "string": {"type": "Convert", "convert": "ToBase64"}},
            {"type": "string", "string": {"type": "Convert", "convert": "FromBase64"}},
            {"type": "string", "string": {"type": "Convert", "convert": "ToSha256"}}]))),
        ("string regexp", t(json!([{"type": "string", "string": {"type": "Regexp", "regexp": {"match": "l(ar)(ge)", "group": 2}}}]))),
        ("string join and replace", tn("tags", json!([{"type": "string", "string": {"type": "Join", "join": {"separator": "+"}}},
            {"type": "string", "string": {"type": "Replace", "replace": {"search": "+", "replace": " & "}}}]))),
        ("to json and back", tn("nested", json!([{"type": "string", "string": {"type": "Convert", "convert": "ToJson"}},
            {"type": "convert", "convert": {"toType": "object", "format": "json"}}]))),
        ("convert", json!([{"name": "nop", "base": nop(json!({})), "patches": [
            from("spec.replicas", "spec.forProvider.fields.asString", json!([{"type": "convert", "convert": {"toType": "string"}}])),
            from("spec.ratio", "spec.forProvider.fields.asInt", json!([{"type": "convert", "convert": {"toType": "int64"}}])),
            from("spec.quantity", "spec.forProvider.fields.quantity", json!([{"type": "convert", "convert": {"toType": "float64", "format": "quantity"}}])),
            from("spec.enabled", "spec.forProvider.fields.flag", json!([{"type": "convert", "convert": {"toType": "string"}}])),
            from("spec.json", "spec.forProvider.fields.parsed", json!([{"type": "convert", "convert": {"toType": "object", "format": "json"}}])),
        ]}])),
        ("connection details", json!([{"name": "nop", "base": nop(json!({})), "connectionDetails": [
            {"type": "FromConnectionSecretKey", "name": "password", "fromConnectionSecretKey": "password"},
            {"type": "FromFieldPath", "name": "endpoint", "fromFieldPath": "status.atProvider.endpoint"},
            {"type": "FromValue", "name": "port", "value": "5432"},
        ]}])),
        ("readiness checks", json!([
            {"name": "nop", "base": nop(json!({})), "readinessChecks": [{"type": "MatchString", "fieldPath": "status.atProvider.id", "matchString": "nop-123"},
                {"type": "MatchInteger", "fieldPath": "status.atProvider.count", "matchInteger": 7},
                {"type": "MatchCondition", "matchCondition": {"type": "Synced", "status": "True"}}]},
            {"name": "never", "base": nop(json!({})), "readinessChecks": [{"type": "None"}]},
        ])),
        ("a failing patch is fatal", json!([{"name": "nop", "base": nop(json!({})), "patches": [
            {"fromFieldPath": "spec.size", "toFieldPath": "spec.forProvider.fields.n", "transforms": [{"type": "math", "math": {"multiply": 2}}]}]}])),
        ("an invalid input is fatal", json!([{"name": "nop", "base": nop(json!({})), "patches": [{"type": "Nonsense", "fromFieldPath": "spec.size"}]}])),
        ("no base is fatal", json!([{"name": "nameless", "patches": []}])),
    ]
}

fn request(name: &str, resources: Value) -> RunFunctionRequest {
    let mut input = json!({"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources"});
    match resources {
        Value::Array(_) => input["resources"] = resources,
        Value::Object(more) => input.as_object_mut().unwrap().extend(more),
        _ => unreachable!("{name}"),
    }
    let mut request = RunFunctionRequest {
        input: Some(input),
        observed: State {
            composite: Some(Resource { resource: xr(), connection_details: BTreeMap::from([("xr-key".to_string(), b"xr-value".to_vec())]), ..Default::default() }),
            resources: BTreeMap::from([("nop".to_string(), observed_nop())]),
        },
        // What an earlier step desired, which this one must pass through.
        desired: State {
            composite: Some(Resource { resource: json!({"apiVersion": "example.org/v1", "kind": "XApp", "status": {"earlier": [1, "two"]}}), ..Default::default() }),
            resources: BTreeMap::from([("earlier".to_string(), Resource { resource: nop(json!({"from": "an earlier step"})), ready: Ready::True, ..Default::default() })]),
        },
        context: Some(json!({ENVIRONMENT: {"apiVersion": "internal.crossplane.io/v1alpha1", "kind": "Environment", "region": "eu-west-1", "zones": 3}, "other": {"kept": true}})),
        ..Default::default()
    };
    request.meta.capabilities = Capability::ALL.to_vec();
    request.meta.tag = tag(&request);
    request
}

#[tokio::test(flavor = "multi_thread")]
async fn patch_and_transform_served_by_oxplane_answers_as_in_process() {
    let data = tempfile::tempdir().unwrap();
    let certs = data.path().join("certs");
    oxplane_certs(data.path(), &certs);
    let served = FunctionServer::oxplane("function-patch-and-transform", Some(&certs), data.path());
    let ca = CertificateAuthority::load_or_create(&data.path().join("pki/functions")).unwrap();
    let endpoint = FunctionEndpoint { address: served.address.clone(), tls: Some(ca.client_tls(SystemTime::now()).unwrap()) };
    let remote = GrpcFunction::new("function-patch-and-transform", endpoint, Duration::from_secs(30)).unwrap();
    let (mut composed, mut fatal) = (0, Vec::new());
    for (name, resources) in cases() {
        let request = request(name, resources);
        let local = PatchAndTransform.run(request.clone()).await.unwrap();
        let over_grpc = remote.run(request).await.unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(over_grpc, local, "{name}");
        composed += local.desired.resources.len();
        for result in local.results.iter().filter(|r| r.severity == Severity::Fatal) {
            fatal.push(format!("{name}: {}", result.message));
        }
    }
    // The table exercises both composing and failing.
    assert!(composed >= 30, "{composed}");
    assert_eq!(
        fatal,
        [
            "a failing patch is fatal: cannot render composed resource \"nop\" \"FromCompositeFieldPath\" patch at index 0: transform at index 0 returned error: math transform could not resolve: input is required to be a number for math transformer, got string",
            "an invalid input is fatal: invalid Function input: resources[0].patches[0].type: Invalid value: \"Nonsense\": unknown patch type",
            "no base is fatal: composed resource \"nameless\" has no base template, and was not produced by a previous Function in the pipeline",
        ]
    );
}
