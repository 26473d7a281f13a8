//! function-go-templating over requests shaped as Crossplane sends them; templates follow the
//! function's documented examples.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::*;
use crate::protocol::Severity;

fn xr() -> Value {
    json!({
        "apiVersion": "example.crossplane.io/v1",
        "kind": "XR",
        "metadata": {"name": "example-xr", "annotations": {}},
        "spec": {"region": "us-east-2", "count": 2, "name": "my-bucket"},
    })
}

fn request(template: &str) -> RunFunctionRequest {
    request_with(json!({
        "apiVersion": "gotemplating.fn.crossplane.io/v1beta1",
        "kind": "GoTemplate",
        "source": "Inline",
        "inline": {"template": template},
    }))
}

fn request_with(input: Value) -> RunFunctionRequest {
    let mut r = RunFunctionRequest { input: Some(input), ..Default::default() };
    r.meta.tag = "t".into();
    r.observed.composite = Some(Resource { resource: xr(), ..Default::default() });
    r.desired.composite = Some(Resource { resource: xr(), ..Default::default() });
    r
}

fn fatal(rsp: &RunFunctionResponse) -> Option<&str> {
    rsp.results.iter().find(|r| r.severity == Severity::Fatal).map(|r| r.message.as_str())
}

fn ok(r: &RunFunctionRequest) -> RunFunctionResponse {
    let rsp = run(r, None);
    assert_eq!(fatal(&rsp), None, "{:?}", rsp.results);
    rsp
}

/// The README's example: S3 buckets from the XR's spec, one per count.
const BUCKETS: &str = r#"{{- range $i := until ( .observed.composite.resource.spec.count | int ) }}
---
apiVersion: s3.aws.upbound.io/v1beta1
kind: Bucket
metadata:
  annotations:
    {{ setResourceNameAnnotation (print "bucket-" $i) }}
spec:
  forProvider:
    region: {{ $.observed.composite.resource.spec.region }}
{{- end }}
"#;

#[test]
fn composes_resources_from_the_readme_example() {
    let rsp = ok(&request(BUCKETS));
    assert_eq!(rsp.desired.resources.len(), 2);
    let b = &rsp.desired.resources["bucket-1"];
    assert_eq!(b.resource, json!({"apiVersion": "s3.aws.upbound.io/v1beta1", "kind": "Bucket", "metadata": {}, "spec": {"forProvider": {"region": "us-east-2"}}}));
    assert_eq!(b.ready, Ready::Unspecified);
    assert_eq!(rsp.meta.tag, "t");
    assert_eq!(rsp.meta.ttl, Some(DEFAULT_TTL));
}

#[test]
fn request_numbers_are_float64() {
    let rsp = ok(&request(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  annotations:\n    gotemplating.fn.crossplane.io/composition-resource-name: cm\ndata:\n  t: {{ printf \"%T\" .observed.composite.resource.spec.count | quote }}\n  v: {{ .observed.composite.resource.spec.count | quote }}\n",
    ));
    assert_eq!(rsp.desired.resources["cm"].resource["data"], json!({"t": "float64", "v": "2"}));
    // Comparing a float64 with an integer constant is Go's error.
    let rsp = run(&request("{{ if eq .observed.composite.resource.spec.count 2 }}x{{ end }}"), None);
    assert_eq!(
        fatal(&rsp),
        Some("cannot execute template: template: manifests:1:6: executing \"manifests\" at <eq .observed.composite.resource.spec.count 2>: error calling eq: incompatible types for comparison")
    );
}

#[test]
fn ready_annotation_sets_readiness_and_is_removed() {
    let t = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  annotations:\n    gotemplating.fn.crossplane.io/composition-resource-name: cm\n    gotemplating.fn.crossplane.io/ready: \"True\"\n    keep: me\n";
    let rsp = ok(&request(t));
    assert_eq!(rsp.desired.resources["cm"].ready, Ready::True);
    assert_eq!(rsp.desired.resources["cm"].resource["metadata"], json!({"name": "x", "annotations": {"keep": "me"}}));
    let bad = t.replace("\"True\"", "\"Yes\"");
    assert_eq!(
        fatal(&run(&request(&bad), None)),
        Some("invalid function input: invalid \"gotemplating.fn.crossplane.io/ready\" annotation value \"Yes\": must be True, False, or Unspecified")
    );
}

#[test]
fn resources_need_a_name_annotation() {
    let rsp = run(&request("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"), None);
    assert_eq!(fatal(&rsp), Some("\"ConfigMap\" template is missing required \"gotemplating.fn.crossplane.io/composition-resource-name\" annotation"));
}

#[test]
fn composite_status_is_merged() {
    let mut r = request(
        "apiVersion: example.crossplane.io/v1\nkind: XR\nstatus:\n  dummy: cool-status\n  nested:\n    b: 2\n",
    );
    if let Some(c) = r.desired.composite.as_mut() {
        c.resource["status"] = json!({"nested": {"a": 1}, "other": "kept"});
    }
    let rsp = ok(&r);
    let status = &rsp.desired.composite.as_ref().unwrap().resource["status"];
    assert_eq!(status, &json!({"dummy": "cool-status", "nested": {"a": 1, "b": 2}, "other": "kept"}));
}

#[test]
fn connection_details_context_requirements_and_claim_conditions() {
    let t = r#"---
apiVersion: meta.gotemplating.fn.crossplane.io/v1alpha1
kind: CompositeConnectionDetails
data:
  user: {{ "admin" | b64enc }}
---
apiVersion: meta.gotemplating.fn.crossplane.io/v1alpha1
kind: Context
data:
  "apiextensions.crossplane.io/environment":
    region: {{ .observed.composite.resource.spec.region }}
  other: {"a": 1}
---
apiVersion: meta.gotemplating.fn.crossplane.io/v1alpha1
kind: ExtraResources
requirements:
  bucket:
    apiVersion: s3.aws.upbound.io/v1beta1
    kind: Bucket
    matchName: my-bucket
  configs:
    apiVersion: v1
    kind: ConfigMap
    matchLabels:
      app: demo
---
apiVersion: meta.gotemplating.fn.crossplane.io/v1alpha1
kind: ClaimConditions
conditions:
- type: DatabaseReady
  status: "False"
  reason: FoundError
  message: "Encountered an error creating the database"
  target: CompositeAndClaim
- type: Progressing
  status: "True"
  reason: Creating
"#;
    let mut r = request(t);
    r.context = Some(json!({"apiextensions.crossplane.io/environment": {"keep": true}}));
    let rsp = ok(&r);
    assert_eq!(rsp.desired.composite.as_ref().unwrap().connection_details, BTreeMap::from([("user".to_string(), b"admin".to_vec())]));
    assert_eq!(
        rsp.context,
        Some(json!({"apiextensions.crossplane.io/environment": {"keep": true, "region": "us-east-2"}, "other": {"a": 1}}))
    );
    assert_eq!(rsp.requirements.resources["bucket"].matching, Match::Name("my-bucket".into()));
    assert_eq!(rsp.requirements.resources["configs"].matching, Match::Labels(BTreeMap::from([("app".into(), "demo".into())])));
    assert_eq!(rsp.conditions.len(), 2);
    assert_eq!(rsp.conditions[0].type_, "DatabaseReady");
    assert_eq!(rsp.conditions[0].status, ConditionStatus::False);
    assert_eq!(rsp.conditions[0].message.as_deref(), Some("Encountered an error creating the database"));
    assert_eq!(rsp.conditions[0].target, Some(Target::CompositeAndClaim));
    assert_eq!(rsp.conditions[1].target, Some(Target::Composite));
    assert_eq!(rsp.conditions[1].message, None);

    let reserved = "apiVersion: meta.gotemplating.fn.crossplane.io/v1alpha1\nkind: ClaimConditions\nconditions:\n- type: Ready\n  status: \"True\"\n  reason: X\n";
    assert_eq!(fatal(&run(&request(reserved), None)), Some("cannot set ClaimCondition type: Ready is a reserved Crossplane Condition"));
    let unknown = "apiVersion: meta.gotemplating.fn.crossplane.io/v1alpha1\nkind: Bogus\n";
    assert_eq!(
        fatal(&run(&request(unknown), None)),
        Some("invalid kind \"Bogus\" for apiVersion \"meta.gotemplating.fn.crossplane.io/v1alpha1\" - must be one of CompositeConnectionDetails, Context, ExtraResources or ClaimConditions")
    );
}

#[test]
fn helpers_read_the_request() {
    let mut r = request(
        r#"{{- $bucket := getComposedResource . "bucket" }}
{{- $xr := getCompositeResource . }}
{{- $cond := getResourceCondition "Ready" (index .observed.resources "bucket") }}
{{- $missing := getResourceCondition "Synced" (index .observed.resources "bucket") }}
{{- $conn := getComposedConnectionDetails . "bucket" }}
{{- $creds := getCredentialData . "creds" }}
{{- $extra := getExtraResources . "configs" }}
{{- $fromCtx := getExtraResourcesFromContext . "envs" }}
apiVersion: v1
kind: ConfigMap
metadata:
  annotations:
    {{ setResourceNameAnnotation "summary" }}
data:
  bucket: {{ $bucket.metadata.name }}
  xr: {{ $xr.metadata.name }}
  ready: {{ $cond.Status }}
  reason: {{ $cond.Reason }}
  synced: {{ $missing.Status }}
  password: {{ $conn.password }}
  token: {{ $creds.token }}
  extra: {{ (index $extra 0).resource.metadata.name }}
  fromCtx: {{ len $fromCtx | quote }}
  included: {{ include "greet" $xr.spec | quote }}
  yaml: {{ toYaml $xr.spec | quote }}
  fromYaml: {{ (fromYaml "a: [1, 2]").a | toString | quote }}
  choice: {{ randomChoice "x" "x" }}
{{- define "greet" }}hello {{ .name }}{{ end }}
"#,
    );
    r.observed.resources.insert(
        "bucket".into(),
        Resource {
            resource: json!({"metadata": {"name": "b-1"}, "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Available"}]}}),
            connection_details: BTreeMap::from([("password".into(), b"s3cret".to_vec())]),
            ready: Ready::Unspecified,
        },
    );
    r.credentials.insert("creds".into(), Credentials::CredentialData(BTreeMap::from([("token".into(), b"tok".to_vec())])));
    r.required_resources.insert("configs".into(), Resources { items: vec![Resource { resource: json!({"metadata": {"name": "cfg"}}), ..Default::default() }] });
    r.context = Some(json!({EXTRA_RESOURCES_CONTEXT_KEY: {"envs": {"items": [{"resource": {}}, {"resource": {}}]}}}));
    let rsp = ok(&r);
    assert_eq!(
        rsp.desired.resources["summary"].resource["data"],
        json!({
            "bucket": "b-1", "xr": "example-xr", "ready": true, "reason": "Available", "synced": "Unknown",
            "password": "s3cret", "token": "tok", "extra": "cfg", "fromCtx": "2", "included": "hello my-bucket",
            "yaml": "count: 2\nname: my-bucket\nregion: us-east-2\n", "fromYaml": "[1 2]", "choice": "x",
        })
    );
}

#[test]
fn errors_name_the_template_line_and_column() {
    let rsp = run(&request("apiVersion: v1\nkind: {{ .observed.composite.resource.spec.region.x }}\n"), None);
    assert_eq!(
        fatal(&rsp),
        Some("cannot execute template: template: manifests:2:18: executing \"manifests\" at <.observed.composite.resource.spec.region.x>: can't evaluate field x in type interface {}")
    );
    let rsp = run(&request("line1\n{{ if }}\n"), None);
    assert_eq!(fatal(&rsp), Some("invalid function input: cannot parse the provided templates: template: manifests:2: missing value for if"));
    let rsp = run(&request("{{ nosuch 1 }}"), None);
    assert_eq!(fatal(&rsp), Some("invalid function input: cannot parse the provided templates: template: manifests:1: function \"nosuch\" not defined"));
    let rsp = run(&request("just a string"), None);
    assert!(fatal(&rsp).unwrap().starts_with("cannot decode manifest: couldn't get version/kind; json parse error: json: cannot unmarshal string"));
    let rsp = run(&request("a: b\n"), None);
    assert_eq!(fatal(&rsp), Some("cannot decode manifest: Object 'Kind' is missing in '{\"a\":\"b\"}'"));
    let rsp = run(&request("kind: X\n  bad: indent\n"), None);
    assert!(fatal(&rsp).unwrap().starts_with("cannot decode manifest: error converting YAML to JSON: yaml: line 2:"), "{:?}", fatal(&rsp));
    let rsp = run(&request("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  annotations:\n    n: 1\n"), None);
    assert_eq!(
        fatal(&rsp),
        Some("invalid annotations in resource '/v1, Kind=ConfigMap resource-name=<nil>': .metadata.annotations accessor error: contains non-string value in the map under key \"n\": 1 is of the type int64, expected string")
    );
}

#[test]
fn input_errors() {
    let cases = [
        (json!({"source": "Inline"}), "invalid function input: inline.template should be provided"),
        (json!({}), "invalid function input: source is required"),
        (json!({"source": "Git"}), "invalid function input: invalid source: Git"),
        (json!({"source": "FileSystem"}), "invalid function input: fileSystem.dirPath should be provided"),
        (json!({"source": "Environment", "environment": {}}), "invalid function input: environment.key should be provided"),
        (
            json!({"source": "Environment", "environment": {"key": "t"}}),
            "invalid function input: cannot read tmpl from the environment: apiextensions.crossplane.io/environment key does not exist in context",
        ),
        (json!({"source": "Inline", "inline": {"template": "x"}, "ttl": "soon"}), "invalid function input: cannot parse ttl: time: invalid duration \"soon\""),
        (
            json!({"source": "Inline", "inline": {"template": "x"}, "options": ["missingkey=maybe"]}),
            "invalid function input: cannot apply template options: unrecognized option: missingkey=maybe",
        ),
    ];
    for (input, want) in cases {
        assert_eq!(fatal(&run(&request_with(input.clone()), None)), Some(want), "{input}");
    }
}

#[test]
fn options_delims_ttl_and_environment_source() {
    let t = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  annotations:\n    [[ setResourceNameAnnotation \"cm\" ]]\ndata:\n  r: [[ .observed.composite.resource.spec.region ]]\n  keep: '{{ literal }}'\n";
    let rsp = ok(&request_with(json!({"source": "Inline", "inline": {"template": t}, "delims": {"left": "[[", "right": "]]"}, "ttl": "2m"})));
    assert_eq!(rsp.desired.resources["cm"].resource["data"], json!({"r": "us-east-2", "keep": "{{ literal }}"}));
    assert_eq!(rsp.meta.ttl, Some(std::time::Duration::from_secs(120)));

    let rsp = run(&request_with(json!({"source": "Inline", "inline": {"template": "{{ .nope }}"}, "options": ["missingkey=error"]})), None);
    assert_eq!(
        fatal(&rsp),
        Some("cannot execute template: template: manifests:1:3: executing \"manifests\" at <.nope>: map has no entry for key \"nope\"")
    );

    let mut r = request_with(json!({"source": "Environment", "environment": {"key": "tmpl"}}));
    r.context = Some(json!({ENVIRONMENT_CONTEXT_KEY: {"tmpl": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  annotations:\n    {{ setResourceNameAnnotation \"from-env\" }}\n"}}));
    assert!(ok(&r).desired.resources.contains_key("from-env"));
}

#[test]
fn file_system_source_reads_under_the_root_only() {
    let root = std::env::temp_dir().join(format!("oxplane-gotemplating-{}", std::process::id()));
    let dir = root.join("templates");
    std::fs::create_dir_all(dir.join("nested")).unwrap();
    std::fs::write(dir.join("a.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  annotations:\n    {{ setResourceNameAnnotation \"a\" }}\n").unwrap();
    std::fs::write(dir.join("nested/b.tmpl"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  annotations:\n    {{ setResourceNameAnnotation \"b\" }}").unwrap();
    std::fs::write(dir.join(".hidden"), "{{ fail \"hidden files are skipped\" }}").unwrap();
    let r = request_with(json!({"source": "FileSystem", "fileSystem": {"dirPath": "/templates"}}));
    let rsp = run(&r, Some(&root));
    assert_eq!(fatal(&rsp), None);
    assert_eq!(rsp.desired.resources.keys().collect::<Vec<_>>(), vec!["a", "b"]);
    let escape = request_with(json!({"source": "FileSystem", "fileSystem": {"dirPath": "../etc"}}));
    assert_eq!(
        fatal(&run(&escape, Some(&root))),
        Some("invalid function input: cannot read tmpl from the folder {../etc}: path escapes the templates directory")
    );
    assert!(fatal(&run(&r, None)).unwrap().contains("--go-templating-dir"));
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn desired_resources_of_earlier_steps_pass_through() {
    let mut r = request(BUCKETS);
    r.desired.resources.insert("earlier".into(), Resource { resource: json!({"kind": "Earlier"}), ready: Ready::True, ..Default::default() });
    let rsp = ok(&r);
    assert_eq!(rsp.desired.resources.len(), 3);
    assert_eq!(rsp.desired.resources["earlier"].ready, Ready::True);
}
