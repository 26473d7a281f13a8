//! Whole requests through the function, as the composer sends them.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};

use super::super::{ENVIRONMENT_KEY, run as pt_run};
use super::{messages, nop_base, res, resources_input};
use crate::builtin::PatchAndTransform;
use crate::protocol::{Function, Ready, Resource, RunFunctionRequest, Severity, State};

fn xr() -> Value {
    json!({
        "apiVersion": "example.crossplane.io/v1", "kind": "XNop",
        "metadata": {"name": "my-xr", "namespace": "default"},
        "spec": {"greeting": "hello", "count": 3, "crossplane": {"compositionRef": {"name": "nop"}}}
    })
}

fn two_nops_input() -> Value {
    resources_input(json!([
        {"name": "nop-a", "base": nop_base(), "patches": [
            {"fromFieldPath": "spec.greeting", "toFieldPath": "metadata.annotations[example.io/greeting]"},
            {"type": "FromCompositeFieldPath", "fromFieldPath": "spec.count", "toFieldPath": "spec.forProvider.fields.count",
             "transforms": [{"type": "math", "math": {"type": "Multiply", "multiply": 2}}]},
            {"type": "ToCompositeFieldPath", "fromFieldPath": "status.atProvider.id", "toFieldPath": "status.nopA"}
        ]},
        {"name": "nop-b", "base": nop_base(), "patches": [
            {"fromFieldPath": "spec.greeting", "toFieldPath": "spec.forProvider.fields.name",
             "transforms": [{"type": "string", "string": {"type": "Format", "fmt": "%s-b"}}]}
        ]}
    ]))
}

#[tokio::test]
async fn two_nop_resources_from_xr_spec_fields() {
    let mut request = super::request(two_nops_input(), xr());
    request.meta.tag = "tag-1".into();
    let rsp = PatchAndTransform.run(request).await.unwrap();
    assert!(rsp.results.is_empty(), "{:?}", rsp.results);
    assert_eq!(rsp.meta.tag, "tag-1");
    assert_eq!(rsp.meta.ttl, Some(Duration::from_secs(60)));

    let a = &rsp.desired.resources["nop-a"];
    assert_eq!(
        a.resource,
        json!({"apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource",
               "metadata": {"annotations": {"example.io/greeting": "hello"}},
               "spec": {"forProvider": {"fields": {"count": 6}}}})
    );
    // Not observed yet, so not ready.
    assert_eq!(a.ready, Ready::Unspecified);
    let b = &rsp.desired.resources["nop-b"];
    assert_eq!(b.resource["spec"]["forProvider"]["fields"]["name"], json!("hello-b"));

    // The desired XR carries only what patches wrote, plus its apiVersion and kind.
    let composite = rsp.desired.composite.as_ref().unwrap();
    assert_eq!(composite.resource, json!({"apiVersion": "example.crossplane.io/v1", "kind": "XNop"}));
    // The environment is written back to the context with Crossplane's internal kind.
    assert_eq!(
        rsp.context,
        Some(
            json!({ENVIRONMENT_KEY: {"apiVersion": "internal.crossplane.io/v1alpha1", "kind": "Environment"}})
        )
    );
}

#[test]
fn observed_resources_keep_their_names_feed_the_xr_and_get_readiness() {
    let mut request = super::request(two_nops_input(), xr());
    request.observed.resources.insert(
        "nop-a".into(),
        res(json!({
            "apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource",
            "metadata": {"name": "my-xr-x7k2p", "namespace": "default"},
            "status": {"atProvider": {"id": "nop-123"}, "conditions": [{"type": "Ready", "status": "True"}]}
        })),
    );
    request.observed.resources.insert(
        "nop-b".into(),
        res(json!({
            "apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource",
            "metadata": {"name": "my-xr-q9w8e", "namespace": "default"},
            "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "Creating"}]}
        })),
    );
    let rsp = pt_run(&request);
    assert!(rsp.results.is_empty(), "{:?}", rsp.results);
    let a = &rsp.desired.resources["nop-a"];
    assert_eq!(a.resource["metadata"]["name"], json!("my-xr-x7k2p"));
    assert_eq!(a.resource["metadata"]["namespace"], json!("default"));
    assert_eq!(a.ready, Ready::True);
    // Not ready is left unspecified, never set to false.
    assert_eq!(rsp.desired.resources["nop-b"].ready, Ready::Unspecified);
    assert_eq!(rsp.desired.composite.as_ref().unwrap().resource["status"], json!({"nopA": "nop-123"}));
}

#[test]
fn patch_sets_are_inlined_where_they_are_named() {
    let input = json!({
        "apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources",
        "patchSets": [{"name": "common", "patches": [
            {"fromFieldPath": "metadata.name", "toFieldPath": "metadata.labels[example.io/xr]"},
            {"fromFieldPath": "spec.greeting", "toFieldPath": "spec.forProvider.greeting"}
        ]}],
        "resources": [
            {"name": "one", "base": nop_base(), "patches": [
                {"type": "PatchSet", "patchSetName": "common"},
                {"fromFieldPath": "spec.count", "toFieldPath": "spec.forProvider.count"}
            ]},
            {"name": "two", "base": nop_base(), "patches": [{"type": "PatchSet", "patchSetName": "common"}]}
        ]
    });
    let rsp = pt_run(&super::request(input, xr()));
    assert!(rsp.results.is_empty(), "{:?}", rsp.results);
    for name in ["one", "two"] {
        let r = &rsp.desired.resources[name].resource;
        assert_eq!(r["metadata"]["labels"]["example.io/xr"], json!("my-xr"), "{name}");
        assert_eq!(r["spec"]["forProvider"]["greeting"], json!("hello"), "{name}");
    }
    assert_eq!(rsp.desired.resources["one"].resource["spec"]["forProvider"]["count"], json!(3));
    assert!(rsp.desired.resources["two"].resource["spec"]["forProvider"].get("count").is_none());

    // A patch set may not include another.
    let nested = json!({"patchSets": [{"name": "a", "patches": [{"type": "PatchSet", "patchSetName": "b"}]}],
                        "resources": [{"name": "x", "base": nop_base()}]});
    let rsp = pt_run(&super::request(nested, xr()));
    assert_eq!(
        messages(&rsp, Severity::Fatal),
        vec!["cannot resolve PatchSets: a patch in a PatchSet cannot be of type PatchSet"]
    );
}

#[test]
fn environment_patches_read_and_write_the_context() {
    let input = json!({
        "apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources",
        "environment": {"patches": [
            {"type": "ToEnvironmentFieldPath", "fromFieldPath": "spec.greeting", "toFieldPath": "greeting"},
            {"type": "FromCompositeFieldPath", "fromFieldPath": "metadata.name", "toFieldPath": "xrName"},
            {"type": "FromEnvironmentFieldPath", "fromFieldPath": "region", "toFieldPath": "status.region"},
            {"type": "FromEnvironmentFieldPath", "fromFieldPath": "optional.missing", "toFieldPath": "status.x"}
        ]},
        "resources": [{"name": "nop", "base": nop_base(), "patches": [
            {"type": "FromEnvironmentFieldPath", "fromFieldPath": "greeting", "toFieldPath": "spec.forProvider.greeting"},
            {"type": "FromEnvironmentFieldPath", "fromFieldPath": "region", "toFieldPath": "spec.forProvider.region"}
        ]}]
    });
    let mut request = super::request(input, xr());
    request.context = Some(json!({
        ENVIRONMENT_KEY: {"apiVersion": "internal.crossplane.io/v1alpha1", "kind": "Environment", "region": "eu-west-1"},
        "other-key": {"kept": true}
    }));
    let rsp = pt_run(&request);
    assert!(rsp.results.is_empty(), "{:?}", rsp.results);
    let nop = &rsp.desired.resources["nop"].resource;
    assert_eq!(nop["spec"]["forProvider"]["greeting"], json!("hello"));
    assert_eq!(nop["spec"]["forProvider"]["region"], json!("eu-west-1"));
    assert_eq!(rsp.desired.composite.as_ref().unwrap().resource["status"], json!({"region": "eu-west-1"}));
    assert_eq!(
        rsp.context,
        Some(json!({
            ENVIRONMENT_KEY: {"apiVersion": "internal.crossplane.io/v1alpha1", "kind": "Environment",
                              "region": "eu-west-1", "greeting": "hello", "xrName": "my-xr"},
            "other-key": {"kept": true}
        }))
    );

    // A Required environment patch whose source is missing is fatal.
    let input = json!({"environment": {"patches": [
        {"type": "FromEnvironmentFieldPath", "fromFieldPath": "nope", "toFieldPath": "status.x", "policy": {"fromFieldPath": "Required"}}
    ]}});
    let rsp = pt_run(&super::request(input, xr()));
    assert_eq!(
        messages(&rsp, Severity::Fatal),
        vec![
            "cannot apply the \"FromEnvironmentFieldPath\" environment patch at index 0: nope: no such field"
        ]
    );
    // Only XR ↔ environment types are allowed there.
    let input = json!({"environment": {"patches": [{"type": "CombineFromEnvironment"}]}});
    let rsp = pt_run(&super::request(input, xr()));
    assert_eq!(
        messages(&rsp, Severity::Fatal),
        vec![
            "invalid Function input: environment.patches[0][type]: Invalid value: \"CombineFromEnvironment\": invalid environment patch type"
        ]
    );
}

#[test]
fn a_required_patch_keeps_a_new_resource_out_and_the_xr_unready() {
    let input = resources_input(json!([
        {"name": "needs-id", "base": nop_base(), "patches": [
            {"fromFieldPath": "status.upstreamId", "toFieldPath": "spec.forProvider.id", "policy": {"fromFieldPath": "Required"}}
        ]},
        {"name": "plain", "base": nop_base()}
    ]));
    let rsp = pt_run(&super::request(input, xr()));
    assert_eq!(rsp.desired.resources.keys().collect::<Vec<_>>(), vec!["plain"]);
    assert_eq!(rsp.desired.composite.as_ref().unwrap().ready, Ready::False);
    assert_eq!(
        messages(&rsp, Severity::Warning),
        vec![
            "not adding new composed resource \"needs-id\" to desired state because \"FromCompositeFieldPath\" patch at index 0 has 'policy.fromFieldPath: Required': status: no such field"
        ]
    );
    assert!(messages(&rsp, Severity::Fatal).is_empty());
}

#[test]
fn a_template_without_base_patches_what_a_previous_step_produced() {
    let input = resources_input(json!([{"name": "from-before", "patches": [
        {"fromFieldPath": "spec.greeting", "toFieldPath": "spec.forProvider.greeting"}
    ]}]));
    let mut request = super::request(input.clone(), xr());
    request.desired.resources.insert(
        "from-before".into(),
        Resource {
            resource: json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "b"}}),
            ready: Ready::True,
            ..Default::default()
        },
    );
    request.desired.resources.insert("untouched".into(), res(json!({"apiVersion": "v1", "kind": "Secret"})));
    let rsp = pt_run(&request);
    assert!(rsp.results.is_empty(), "{:?}", rsp.results);
    assert_eq!(
        rsp.desired.resources["from-before"].resource,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "b"}, "spec": {"forProvider": {"greeting": "hello"}}})
    );
    // Resources this input does not mention pass through.
    assert_eq!(rsp.desired.resources["untouched"], request.desired.resources["untouched"]);

    // Nothing produced it: fatal.
    let rsp = pt_run(&super::request(input, xr()));
    assert_eq!(
        messages(&rsp, Severity::Fatal),
        vec![
            "composed resource \"from-before\" has no base template, and was not produced by a previous Function in the pipeline"
        ]
    );
    assert!(rsp.desired.resources.is_empty());
}

#[test]
fn a_base_replaces_what_a_previous_step_produced_and_observed_namespace_is_copied() {
    let input = resources_input(json!([{"name": "r", "base": {"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"namespace": "from-base"}}}]));
    let mut request = super::request(input, xr());
    request.desired.resources.insert("r".into(), res(json!({"apiVersion": "v1", "kind": "Secret"})));
    // The observed object is cluster-scoped here: its (absent) namespace is copied too.
    request.observed.resources.insert("r".into(), res(json!({"metadata": {"name": "r-abc"}})));
    let rsp = pt_run(&request);
    assert_eq!(
        rsp.desired.resources["r"].resource,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "r-abc"}})
    );
}

#[test]
fn invalid_input_is_fatal() {
    let rsp = pt_run(&super::request(json!({"resources": "not-a-list"}), xr()));
    let fatal = messages(&rsp, Severity::Fatal);
    assert_eq!(fatal.len(), 1);
    assert!(fatal[0].starts_with("cannot get Function input: "), "{fatal:?}");

    let rsp = pt_run(&super::request(json!({"resources": [{"base": nop_base()}]}), xr()));
    assert_eq!(
        messages(&rsp, Severity::Fatal),
        vec!["invalid Function input: resources[0].name: Required value: name is required"]
    );

    // No observed XR at all: patches from it are simply skipped.
    let request = RunFunctionRequest {
        input: Some(two_nops_input()),
        observed: State::default(),
        desired: State { composite: None, resources: BTreeMap::new() },
        ..Default::default()
    };
    let rsp = pt_run(&request);
    assert!(rsp.results.is_empty(), "{:?}", rsp.results);
    assert_eq!(rsp.desired.resources["nop-a"].resource, nop_base());
}
