//! Legacy `mode: Resources` Compositions converted to input and run.

use std::collections::BTreeMap;

use serde_json::json;

use super::super::{LegacyCompositionError, input_from_legacy_composition, run as pt_run};
use super::res;
use crate::protocol::{Ready, RunFunctionRequest, State};

fn legacy_spec() -> serde_json::Value {
    json!({
        "compositeTypeRef": {"apiVersion": "example.crossplane.io/v1", "kind": "XNop"},
        "patchSets": [{"name": "labels", "patches": [
            {"fromFieldPath": "metadata.labels", "toFieldPath": "metadata.labels",
             "policy": {"mergeOptions": {"keepMapValues": true}}}
        ]}],
        "resources": [
            {
                "base": {"apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource", "metadata": {"labels": {"fixed": "yes"}}},
                "patches": [
                    {"type": "PatchSet", "patchSetName": "labels"},
                    {"fromFieldPath": "spec.size", "toFieldPath": "spec.forProvider.size",
                     "transforms": [{"math": {"multiply": 10}}]},
                    {"fromFieldPath": "spec.name", "toFieldPath": "spec.forProvider.name",
                     "transforms": [{"string": {"fmt": "nop-%s"}}]},
                    {"type": "ToCompositeFieldPath", "fromFieldPath": "status.atProvider.id", "toFieldPath": "status.id"}
                ],
                "connectionDetails": [
                    {"fromConnectionSecretKey": "password"},
                    {"name": "user", "value": "admin"}
                ],
                "readinessChecks": [{"type": "MatchString", "fieldPath": "status.phase", "matchString": "Up"}]
            },
            {"name": "named", "base": {"apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource"}}
        ]
    })
}

#[test]
fn conversion_follows_crossplanes_converter() {
    let input = input_from_legacy_composition(&legacy_spec()).unwrap();
    assert_eq!(input["apiVersion"], json!("pt.fn.crossplane.io/v1beta1"));
    assert_eq!(input["kind"], json!("Resources"));
    // Unnamed templates are named after their position.
    assert_eq!(input["resources"][0]["name"], json!("resource-0"));
    assert_eq!(input["resources"][1]["name"], json!("named"));
    let patches = &input["resources"][0]["patches"];
    assert_eq!(patches[0], json!({"type": "PatchSet", "patchSetName": "labels"}));
    assert_eq!(patches[1]["type"], json!("FromCompositeFieldPath"));
    assert_eq!(
        patches[1]["transforms"][0],
        json!({"type": "math", "math": {"type": "Multiply", "multiply": 10}})
    );
    assert_eq!(
        patches[2]["transforms"][0],
        json!({"type": "string", "string": {"type": "Format", "fmt": "nop-%s"}})
    );
    assert_eq!(input["patchSets"][0]["patches"][0]["policy"], json!({"toFieldPath": "MergeObjects"}));
    assert_eq!(
        input["resources"][0]["connectionDetails"],
        json!([
            {"name": "password", "type": "FromConnectionSecretKey", "fromConnectionSecretKey": "password"},
            {"name": "user", "type": "FromValue", "value": "admin"}
        ])
    );
}

#[test]
fn merge_options_map_to_to_field_path_policies() {
    let spec_with = |options: serde_json::Value| {
        json!({"resources": [{"name": "r", "base": {}, "patches": [
            {"fromFieldPath": "a", "policy": {"mergeOptions": options, "fromFieldPath": "Required"}}
        ]}]})
    };
    let cases = [
        (json!({"keepMapValues": true}), "MergeObjects"),
        (json!({"keepMapValues": true, "appendSlice": true}), "MergeObjectsAppendArrays"),
        (json!({"appendSlice": true}), "ForceMergeObjectsAppendArrays"),
        (json!({}), "ForceMergeObjects"),
    ];
    for (options, want) in cases {
        let input = input_from_legacy_composition(&spec_with(options.clone())).unwrap();
        assert_eq!(
            input["resources"][0]["patches"][0]["policy"],
            json!({"toFieldPath": want, "fromFieldPath": "Required"}),
            "{options}"
        );
    }
}

#[test]
fn pipeline_compositions_and_bad_shapes_are_refused() {
    assert_eq!(
        input_from_legacy_composition(&json!({"mode": "Pipeline", "pipeline": []})).unwrap_err(),
        LegacyCompositionError::NotResourcesMode("Pipeline".into())
    );
    assert_eq!(
        input_from_legacy_composition(&json!({"resources": [1]})).unwrap_err().to_string(),
        "invalid legacy composition: spec.resources[0] must be an object"
    );
    assert!(input_from_legacy_composition(&json!({"mode": "Resources", "resources": []})).is_ok());
}

#[test]
fn a_converted_legacy_composition_runs() {
    let input = input_from_legacy_composition(&legacy_spec()).unwrap();
    let xr = json!({"apiVersion": "example.crossplane.io/v1", "kind": "XNop",
                    "metadata": {"name": "legacy", "labels": {"fixed": "no", "team": "t"}},
                    "spec": {"size": 2, "name": "n"}});
    let observed = crate::protocol::Resource {
        resource: json!({"metadata": {"name": "legacy-abcde"},
                          "status": {"phase": "Up", "atProvider": {"id": "x-1"}}}),
        connection_details: BTreeMap::from([("password".to_string(), b"pw".to_vec())]),
        ready: Ready::Unspecified,
    };
    let request = RunFunctionRequest {
        input: Some(input),
        observed: State {
            composite: Some(res(xr)),
            resources: BTreeMap::from([("resource-0".to_string(), observed)]),
        },
        ..Default::default()
    };
    let rsp = pt_run(&request);
    assert!(rsp.results.is_empty(), "{:?}", rsp.results);
    let r0 = &rsp.desired.resources["resource-0"];
    assert_eq!(
        r0.resource,
        json!({"apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource",
               // MergeObjects keeps the base's own label.
               "metadata": {"name": "legacy-abcde", "labels": {"fixed": "yes", "team": "t"}},
               "spec": {"forProvider": {"size": 20, "name": "nop-n"}}})
    );
    assert_eq!(r0.ready, Ready::True);
    let composite = rsp.desired.composite.as_ref().unwrap();
    assert_eq!(composite.resource["status"], json!({"id": "x-1"}));
    // A legacy XR: connection details go to the XR, no Secret is composed.
    assert_eq!(
        composite.connection_details,
        BTreeMap::from([("password".to_string(), b"pw".to_vec()), ("user".to_string(), b"admin".to_vec())])
    );
    assert_eq!(rsp.desired.resources.keys().collect::<Vec<_>>(), vec!["named", "resource-0"]);
    assert_eq!(rsp.desired.resources["named"].ready, Ready::Unspecified);
}
