//! Every patch type in its direction, combine, merge policies, and the from-field-path
//! policies.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::super::ENVIRONMENT_KEY;
use super::super::run as pt_run;
use super::{messages, nop_base, res, resources_input};
use crate::protocol::{Ready, RunFunctionRequest, Severity, State};

fn xr() -> Value {
    json!({
        "apiVersion": "example.crossplane.io/v1", "kind": "XR",
        "metadata": {"name": "my-xr"},
        "spec": {"region": "eu", "size": 3, "tags": {"team": "a"}, "list": ["x", "y"], "first": "Ada", "last": "Lovelace"}
    })
}

fn observed_nop() -> Value {
    json!({
        "apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource",
        "metadata": {"name": "my-xr-abc12", "annotations": {"crossplane.io/composition-resource-name": "nop"}},
        "spec": {"forProvider": {}},
        "status": {"atProvider": {"id": "id-1", "count": 4}, "conditions": [{"type": "Ready", "status": "True"}]}
    })
}

/// Runs one template `nop` with these patches, against the XR, an observed `nop`
/// (when `observed`), and an environment in the context.
fn run_patches(patches: Value, observed: bool) -> crate::protocol::RunFunctionResponse {
    let input = resources_input(json!([{"name": "nop", "base": nop_base(), "patches": patches}]));
    let mut resources = BTreeMap::new();
    if observed {
        resources.insert("nop".to_string(), res(observed_nop()));
    }
    let request = RunFunctionRequest {
        input: Some(input),
        observed: State { composite: Some(res(xr())), resources },
        context: Some(
            json!({ENVIRONMENT_KEY: {"apiVersion": "internal.crossplane.io/v1alpha1", "kind": "Environment", "zone": "z1", "n": 2}}),
        ),
        ..Default::default()
    };
    pt_run(&request)
}

fn desired_nop(rsp: &crate::protocol::RunFunctionResponse) -> &Value {
    &rsp.desired.resources["nop"].resource
}

fn desired_xr(rsp: &crate::protocol::RunFunctionResponse) -> &Value {
    &rsp.desired.composite.as_ref().unwrap().resource
}

fn env(rsp: &crate::protocol::RunFunctionResponse) -> &Value {
    &rsp.context.as_ref().unwrap()[ENVIRONMENT_KEY]
}

#[test]
fn from_composite_field_path_is_the_default_type_and_defaults_to_field_path() {
    let rsp = run_patches(
        json!([
            {"fromFieldPath": "spec.region", "toFieldPath": "spec.forProvider.region"},
            {"fromFieldPath": "spec.size"},
            {"type": "FromCompositeFieldPath", "fromFieldPath": "metadata.name", "toFieldPath": "metadata.annotations[crossplane.io/external-name]"}
        ]),
        false,
    );
    assert!(rsp.results.is_empty(), "{:?}", rsp.results);
    let nop = desired_nop(&rsp);
    assert_eq!(nop["spec"]["forProvider"]["region"], json!("eu"));
    // A number travels as the float64 5 and lands as the integer 3 it is.
    assert_eq!(nop["spec"]["size"], json!(3));
    assert!(nop["spec"]["size"].is_i64());
    assert_eq!(nop["metadata"]["annotations"]["crossplane.io/external-name"], json!("my-xr"));
}

#[test]
fn to_composite_field_path_goes_from_observed_composed_to_desired_xr() {
    let patches = json!([{"type": "ToCompositeFieldPath", "fromFieldPath": "status.atProvider.id", "toFieldPath": "status.nopId"}]);
    let rsp = run_patches(patches.clone(), true);
    assert_eq!(desired_xr(&rsp)["status"]["nopId"], json!("id-1"));
    // The desired XR keeps the observed XR's apiVersion and kind.
    assert_eq!(desired_xr(&rsp)["kind"], json!("XR"));
    // Not observed yet: skipped, no error.
    let rsp = run_patches(patches, false);
    assert!(rsp.results.is_empty());
    assert!(desired_xr(&rsp).get("status").is_none());
    assert!(rsp.desired.resources.contains_key("nop"));
}

#[test]
fn combine_from_and_to_composite() {
    let rsp = run_patches(
        json!([
            {"type": "CombineFromComposite", "combine": {"strategy": "string", "variables": [
                {"fromFieldPath": "spec.first"}, {"fromFieldPath": "spec.last"}, {"fromFieldPath": "spec.size"}
            ], "string": {"fmt": "%s-%s-%v"}}, "toFieldPath": "spec.forProvider.fullName"},
            {"type": "CombineToComposite", "combine": {"strategy": "string", "variables": [
                {"fromFieldPath": "metadata.name"}, {"fromFieldPath": "status.atProvider.count"}
            ], "string": {"fmt": "%s/%d"}}, "toFieldPath": "status.summary"}
        ]),
        true,
    );
    assert!(rsp.results.is_empty(), "{:?}", rsp.results);
    assert_eq!(desired_nop(&rsp)["spec"]["forProvider"]["fullName"], json!("Ada-Lovelace-3"));
    // %d of a float64 is Go's error form.
    assert_eq!(desired_xr(&rsp)["status"]["summary"], json!("my-xr-abc12/%!d(float64=4)"));
}

#[test]
fn combine_with_a_missing_variable_is_skipped() {
    let rsp = run_patches(
        json!([{"type": "CombineFromComposite", "combine": {"strategy": "string", "variables": [
            {"fromFieldPath": "spec.first"}, {"fromFieldPath": "spec.middle"}
        ], "string": {"fmt": "%s %s"}}, "toFieldPath": "spec.forProvider.name"}]),
        false,
    );
    assert!(rsp.results.is_empty());
    assert!(desired_nop(&rsp)["spec"]["forProvider"].get("name").is_none());
}

#[test]
fn environment_patch_types_in_templates() {
    let rsp = run_patches(
        json!([
            {"type": "FromEnvironmentFieldPath", "fromFieldPath": "zone", "toFieldPath": "spec.forProvider.zone"},
            {"type": "CombineFromEnvironment", "combine": {"strategy": "string", "variables": [
                {"fromFieldPath": "zone"}, {"fromFieldPath": "n"}
            ], "string": {"fmt": "%s-%v"}}, "toFieldPath": "spec.forProvider.zoneN"},
            {"type": "ToEnvironmentFieldPath", "fromFieldPath": "status.atProvider.id", "toFieldPath": "nopId"},
            {"type": "CombineToEnvironment", "combine": {"strategy": "string", "variables": [
                {"fromFieldPath": "metadata.name"}
            ], "string": {"fmt": "name=%s"}}, "toFieldPath": "nested.name"}
        ]),
        true,
    );
    assert!(rsp.results.is_empty(), "{:?}", rsp.results);
    assert_eq!(desired_nop(&rsp)["spec"]["forProvider"]["zone"], json!("z1"));
    assert_eq!(desired_nop(&rsp)["spec"]["forProvider"]["zoneN"], json!("z1-2"));
    assert_eq!(
        env(&rsp),
        &json!({"apiVersion": "internal.crossplane.io/v1alpha1", "kind": "Environment", "zone": "z1", "n": 2,
                "nopId": "id-1", "nested": {"name": "name=my-xr-abc12"}})
    );
}

#[test]
fn to_field_path_policies() {
    let base = json!({"apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource",
        "spec": {"tags": {"team": "base", "env": "prod"}, "list": ["y", "z"]}});
    let run_with = |policy: &str, from: &str, to: &str| {
        let input = resources_input(json!([{"name": "nop", "base": base, "patches": [
            {"fromFieldPath": from, "toFieldPath": to, "policy": {"toFieldPath": policy}}
        ]}]));
        let rsp = pt_run(&super::request(input, xr()));
        assert!(rsp.results.is_empty(), "{policy}: {:?}", rsp.results);
        rsp.desired.resources["nop"].resource["spec"].clone()
    };
    assert_eq!(run_with("Replace", "spec.tags", "spec.tags")["tags"], json!({"team": "a"}));
    assert_eq!(
        run_with("MergeObjects", "spec.tags", "spec.tags")["tags"],
        json!({"team": "base", "env": "prod"})
    );
    assert_eq!(
        run_with("MergeObject", "spec.tags", "spec.tags")["tags"],
        json!({"team": "base", "env": "prod"})
    );
    assert_eq!(
        run_with("ForceMergeObjects", "spec.tags", "spec.tags")["tags"],
        json!({"team": "a", "env": "prod"})
    );
    assert_eq!(run_with("Replace", "spec.list", "spec.list")["list"], json!(["x", "y"]));
    assert_eq!(run_with("MergeObjects", "spec.list", "spec.list")["list"], json!(["y", "z"]));
    assert_eq!(
        run_with("MergeObjectsAppendArrays", "spec.list", "spec.list")["list"],
        json!(["y", "z", "x"])
    );
    assert_eq!(run_with("ForceMergeObjects", "spec.list", "spec.list")["list"], json!(["x", "y"]));
    assert_eq!(
        run_with("ForceMergeObjectsAppendArrays", "spec.list", "spec.list")["list"],
        json!(["y", "z", "x"])
    );
    assert_eq!(run_with("AppendArray", "spec.list", "spec.list")["list"], json!(["y", "z", "x"]));
}

#[test]
fn wildcard_to_field_path_patches_every_existing_match() {
    let patch = json!([{"fromFieldPath": "spec.region", "toFieldPath": "spec.rules[*].region"}]);
    let base = json!({"apiVersion": "v1", "kind": "X", "spec": {"rules": [{"port": 1, "region": ""}, {"port": 2, "region": "x"}]}});
    let input = resources_input(json!([{"name": "nop", "base": base, "patches": patch}]));
    let rsp = pt_run(&super::request(input, xr()));
    assert!(rsp.results.is_empty(), "{:?}", rsp.results);
    assert_eq!(
        rsp.desired.resources["nop"].resource["spec"]["rules"],
        json!([{"port": 1, "region": "eu"}, {"port": 2, "region": "eu"}])
    );
    // As in Crossplane, a wildcard only reaches fields that exist.
    let base = json!({"apiVersion": "v1", "kind": "X", "spec": {"rules": [{"port": 1}]}});
    let input = resources_input(json!([{"name": "nop", "base": base, "patches": patch}]));
    let rsp = pt_run(&super::request(input, xr()));
    assert_eq!(
        messages(&rsp, Severity::Fatal),
        vec![
            "cannot render composed resource \"nop\" \"FromCompositeFieldPath\" patch at index 0: cannot expand ToFieldPath spec.rules[*].region"
        ]
    );
}

#[test]
fn optional_missing_source_is_skipped_and_required_holds_back_a_new_resource() {
    let rsp =
        run_patches(json!([{"fromFieldPath": "spec.missing", "toFieldPath": "spec.forProvider.x"}]), false);
    assert!(rsp.results.is_empty());
    assert!(desired_nop(&rsp)["spec"]["forProvider"].get("x").is_none());

    let required = json!([
        {"fromFieldPath": "spec.missing", "toFieldPath": "spec.forProvider.x", "policy": {"fromFieldPath": "Required"}},
        {"fromFieldPath": "spec.region", "toFieldPath": "spec.forProvider.region"}
    ]);
    let rsp = run_patches(required.clone(), false);
    assert!(!rsp.desired.resources.contains_key("nop"));
    assert_eq!(rsp.desired.composite.as_ref().unwrap().ready, Ready::False);
    assert_eq!(
        messages(&rsp, Severity::Warning),
        vec![
            "not adding new composed resource \"nop\" to desired state because \"FromCompositeFieldPath\" patch at index 0 has 'policy.fromFieldPath: Required': spec.missing: no such field"
        ]
    );

    // Once the resource exists, a Required source that is missing only warns.
    let rsp = run_patches(required, true);
    assert_eq!(desired_nop(&rsp)["spec"]["forProvider"]["region"], json!("eu"));
    assert_eq!(rsp.desired.composite.as_ref().unwrap().ready, Ready::Unspecified);
    assert_eq!(
        messages(&rsp, Severity::Warning),
        vec![
            "cannot render composed resource \"nop\" \"FromCompositeFieldPath\" patch at index 0: ignoring 'policy.fromFieldPath: Required' because 'to' resource already exists: spec.missing: no such field"
        ]
    );
}

#[test]
fn a_failing_patch_is_fatal_and_leaves_the_desired_state_alone() {
    let mut request = super::request(
        resources_input(json!([{"name": "nop", "base": nop_base(), "patches": [
            {"fromFieldPath": "spec.region", "toFieldPath": "spec.forProvider.n", "transforms": [{"type": "math", "math": {"multiply": 2}}]}
        ]}])),
        xr(),
    );
    request.desired.resources.insert("other".into(), res(json!({"kind": "Other"})));
    let rsp = pt_run(&request);
    assert_eq!(
        messages(&rsp, Severity::Fatal),
        vec![
            "cannot render composed resource \"nop\" \"FromCompositeFieldPath\" patch at index 0: transform at index 0 returned error: math transform could not resolve: input is required to be a number for math transformer, got string"
        ]
    );
    assert_eq!(rsp.desired, request.desired);

    // A source path crossing a string is not "missing": it is an error.
    let rsp = run_patches(json!([{"fromFieldPath": "spec.region.x", "toFieldPath": "spec.y"}]), false);
    assert_eq!(
        messages(&rsp, Severity::Fatal),
        vec![
            "cannot render composed resource \"nop\" \"FromCompositeFieldPath\" patch at index 0: spec.region: not an object"
        ]
    );
}

#[test]
fn invalid_patches_are_fatal_with_field_paths() {
    let cases = [
        (
            json!({"type": "FromSomewhere", "fromFieldPath": "a"}),
            "invalid Function input: resources[0].patches[0].type: Invalid value: \"FromSomewhere\": unknown patch type",
        ),
        (
            json!({"type": "ToCompositeFieldPath"}),
            "invalid Function input: resources[0].patches[0].fromFieldPath: Required value: fromFieldPath must be set for patch type ToCompositeFieldPath",
        ),
        (
            json!({"type": "CombineFromComposite", "toFieldPath": "x"}),
            "invalid Function input: resources[0].patches[0].combine: Required value: combine must be set for patch type CombineFromComposite",
        ),
        (
            json!({"type": "CombineFromComposite", "combine": {"strategy": "string", "string": {"fmt": "%s"}, "variables": []}, "toFieldPath": "x"}),
            "invalid Function input: resources[0].patches[0].combine.variables: Required value: at least one variable must be provided",
        ),
        (
            json!({"type": "CombineFromComposite", "combine": {"strategy": "concat", "variables": [{"fromFieldPath": "a"}]}, "toFieldPath": "x"}),
            "invalid Function input: resources[0].patches[0].combine.strategy: Invalid value: \"concat\": unknown strategy type",
        ),
        (
            json!({"type": "PatchSet"}),
            "invalid Function input: resources[0].patches[0].patchSetName: Required value: patchSetName must be set for patch type PatchSet",
        ),
        (
            json!({"type": "PatchSet", "patchSetName": "nope"}),
            "cannot resolve PatchSets: cannot find PatchSet by name nope",
        ),
        (
            json!({"fromFieldPath": "a", "policy": {"toFieldPath": "Smush"}}),
            "invalid Function input: resources[0].patches[0].policy.toFieldPathPolicy: Invalid value: \"Smush\": unknown toFieldPathPolicy",
        ),
        (
            json!({"fromFieldPath": "a", "policy": {"fromFieldPath": "Maybe"}}),
            "invalid Function input: resources[0].patches[0].policy.fromFieldPathPolicy: Invalid value: \"Maybe\": unknown fromFieldPathPolicy",
        ),
        (
            json!({"fromFieldPath": "a", "transforms": [{"type": "rot13"}]}),
            "invalid Function input: resources[0].patches[0].transforms[0].type: Invalid value: \"rot13\": unknown transform type",
        ),
    ];
    for (patch, want) in cases {
        let rsp = pt_run(&super::request(
            resources_input(json!([{"name": "nop", "base": nop_base(), "patches": [patch]}])),
            xr(),
        ));
        assert_eq!(messages(&rsp, Severity::Fatal), vec![want.to_string()]);
        assert!(rsp.desired.resources.is_empty());
    }
}
