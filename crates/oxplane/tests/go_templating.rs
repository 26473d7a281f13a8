//! function-go-templating, function-cel-filter and function-dummy end to end with the real
//! kubectl, on Compositions shaped as the functions' documented examples: a claim's buckets
//! composed by a Go template (status written back, connection details in the claim's Secret,
//! an extra resource read by the template, claim conditions), a template that fails (the XR
//! says so with Go's line and column), the cel-filter README's conditional bucket, and a
//! function-dummy pipeline whose composite gets exactly the response in its input.

use crate::support;

use std::time::Duration;

use base64::Engine;
use support::{Server, composed_nops, condition, is_true, within};

const T: Duration = Duration::from_secs(90);

const PACKAGES: &str = "
apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata: {name: provider-nop}
spec: {package: xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0}
---
apiVersion: pkg.crossplane.io/v1
kind: Function
metadata: {name: function-go-templating}
spec: {package: xpkg.crossplane.io/crossplane-contrib/function-go-templating:v0.9.2}
---
apiVersion: pkg.crossplane.io/v1
kind: Function
metadata: {name: function-auto-ready}
spec: {package: xpkg.crossplane.io/crossplane-contrib/function-auto-ready:v0.5.0}
---
apiVersion: pkg.crossplane.io/v1
kind: Function
metadata: {name: function-patch-and-transform}
spec: {package: xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform:v0.8.2}
---
apiVersion: pkg.crossplane.io/v1
kind: Function
metadata: {name: function-cel-filter}
spec: {package: xpkg.crossplane.io/crossplane-contrib/function-cel-filter:v0.1.1}
---
apiVersion: pkg.crossplane.io/v1
kind: Function
metadata: {name: function-dummy}
spec: {package: xpkg.crossplane.io/crossplane-contrib/function-dummy:v0.4.1}
";

fn xrd(kind: &str, plural: &str, claim: Option<(&str, &str)>, spec: &str, status: &str) -> String {
    let claim = claim.map(|(k, p)| format!("  claimNames: {{kind: {k}, plural: {p}}}\n")).unwrap_or_default();
    format!(
        "apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata:
  name: {plural}.example.org
spec:
  group: example.org
  names: {{kind: {kind}, plural: {plural}}}
{claim}  versions:
  - name: v1alpha1
    served: true
    referenceable: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties: {{{spec}}}
          status:
            type: object
            properties: {{{status}}}
"
    )
}

/// function-go-templating's README example, composing NopResources in place of S3 buckets.
const BUCKETS: &str = r#"
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata: {name: xbuckets}
spec:
  compositeTypeRef: {apiVersion: example.org/v1alpha1, kind: XBucket}
  writeConnectionSecretsToNamespace: default
  mode: Pipeline
  pipeline:
  - step: render-templates
    functionRef: {name: function-go-templating}
    input:
      apiVersion: gotemplating.fn.crossplane.io/v1beta1
      kind: GoTemplate
      source: Inline
      inline:
        template: |
          {{- $xr := .observed.composite.resource }}
          {{- range $i := until ($xr.spec.count | int) }}
          ---
          apiVersion: nop.crossplane.io/v1alpha1
          kind: NopResource
          metadata:
            annotations:
              {{ setResourceNameAnnotation (printf "bucket-%d" $i) }}
          spec:
            forProvider:
              conditionAfter:
              - time: 0s
                conditionType: Ready
                conditionStatus: "True"
              fields:
                region: {{ $xr.spec.region }}
                index: {{ $i }}
          {{- end }}
          ---
          apiVersion: meta.gotemplating.fn.crossplane.io/v1alpha1
          kind: ExtraResources
          requirements:
            settings:
              apiVersion: v1
              kind: ConfigMap
              matchName: bucket-settings
              namespace: default
          {{- with getExtraResources . "settings" }}
          ---
          apiVersion: nop.crossplane.io/v1alpha1
          kind: NopResource
          metadata:
            annotations:
              {{ setResourceNameAnnotation "settings" }}
              gotemplating.fn.crossplane.io/ready: "True"
          spec:
            forProvider:
              fields:
                tier: {{ (index . 0).resource.data.tier }}
          {{- end }}
          ---
          apiVersion: example.org/v1alpha1
          kind: XBucket
          status:
            bucketCount: {{ $xr.spec.count }}
            firstBucket: {{ with getComposedResource . "bucket-0" }}{{ .metadata.name }}{{ else }}pending{{ end }}
          ---
          apiVersion: meta.gotemplating.fn.crossplane.io/v1alpha1
          kind: CompositeConnectionDetails
          data:
            region: {{ $xr.spec.region | b64enc }}
          ---
          apiVersion: meta.gotemplating.fn.crossplane.io/v1alpha1
          kind: ClaimConditions
          conditions:
          - type: BucketsRequested
            status: "True"
            reason: Rendered
            message: {{ printf "%d buckets in %s" ($xr.spec.count | int) $xr.spec.region | quote }}
            target: CompositeAndClaim
  - step: automatically-detect-ready-composed-resources
    functionRef: {name: function-auto-ready}
"#;

/// A template that fails when it runs.
const BROKEN: &str = r#"
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata: {name: xbrokens}
spec:
  compositeTypeRef: {apiVersion: example.org/v1alpha1, kind: XBroken}
  mode: Pipeline
  pipeline:
  - step: render
    functionRef: {name: function-go-templating}
    input:
      apiVersion: gotemplating.fn.crossplane.io/v1beta1
      kind: GoTemplate
      source: Inline
      inline:
        template: |
          apiVersion: v1
          kind: {{ if eq .observed.composite.resource.spec.count 2 }}X{{ end }}
"#;

/// function-cel-filter's README: the bucket only when the XR exports to S3.
const NOSQL: &str = r#"
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata: {name: xnosqls}
spec:
  compositeTypeRef: {apiVersion: example.org/v1alpha1, kind: XNoSQL}
  mode: Pipeline
  pipeline:
  - step: patch-and-transform
    functionRef: {name: function-patch-and-transform}
    input:
      apiVersion: pt.fn.crossplane.io/v1beta1
      kind: Resources
      resources:
      - name: table
        base:
          apiVersion: nop.crossplane.io/v1alpha1
          kind: NopResource
          spec: {forProvider: {fields: {region: us-east-2, writeCapacity: 1}}}
      - name: bucket
        base:
          apiVersion: nop.crossplane.io/v1alpha1
          kind: NopResource
          spec: {forProvider: {fields: {region: us-east-2}}}
  - step: filter-composed-resources
    functionRef: {name: function-cel-filter}
    input:
      apiVersion: cel.fn.crossplane.io/v1beta1
      kind: Filters
      filters:
      - name: bucket
        expression: observed.composite.resource.spec.export == "S3"
"#;

/// function-dummy's example, with a NopResource as the composed resource.
const DUMMY: &str = r#"
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata: {name: xdummies}
spec:
  compositeTypeRef: {apiVersion: example.org/v1alpha1, kind: XDummy}
  mode: Pipeline
  pipeline:
  - step: return-some-results
    functionRef: {name: function-dummy}
    input:
      apiVersion: dummy.fn.crossplane.io/v1beta1
      kind: Response
      response:
        desired:
          composite:
            resource:
              status:
                widgets: 200
          resources:
            cool-resource:
              resource:
                apiVersion: nop.crossplane.io/v1alpha1
                kind: NopResource
                spec:
                  forProvider:
                    fields:
                      widgets: 200
              ready: READY_TRUE
        results:
        - severity: SEVERITY_NORMAL
          message: "I did the thing!"
"#;

fn xr_of_claim(server: &Server, claim: &str, ns: &str) -> Option<String> {
    server.get(&["bucket", claim, "-n", ns])?["spec"]["resourceRef"]["name"].as_str().map(str::to_string)
}

#[test]
fn go_templating_cel_filter_and_dummy_compose_as_documented() {
    let server = Server::start();
    server.apply(PACKAGES);
    server.kubectl(&[
        "wait",
        "--for=condition=Healthy",
        "provider/provider-nop",
        "function/function-go-templating",
        "function/function-cel-filter",
        "function/function-dummy",
        "--timeout=90s",
    ]);
    server.apply(&xrd(
        "XBucket",
        "xbuckets",
        Some(("Bucket", "buckets")),
        "count: {type: integer}, region: {type: string}",
        "bucketCount: {type: integer}, firstBucket: {type: string}",
    ));
    server.apply(&xrd("XBroken", "xbrokens", None, "count: {type: integer}", ""));
    server.apply(&xrd("XNoSQL", "xnosqls", None, "export: {type: string}", ""));
    server.apply(&xrd("XDummy", "xdummies", None, "", "widgets: {type: integer}"));
    for x in ["xbuckets", "xbrokens", "xnosqls", "xdummies"] {
        server.kubectl(&["wait", "--for=condition=Established", &format!("xrd/{x}.example.org"), "--timeout=90s"]);
    }
    server.kubectl(&["create", "namespace", "team-a"]);
    server.apply(BUCKETS);
    server.apply(BROKEN);
    server.apply(NOSQL);
    server.apply(DUMMY);
    server.apply("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bucket-settings, namespace: default}\ndata: {tier: gold}\n");
    server.apply(
        "apiVersion: example.org/v1alpha1\nkind: Bucket\nmetadata: {name: photos, namespace: team-a}\nspec:\n  count: 2\n  region: eu-west-1\n  writeConnectionSecretToRef: {name: photos-conn}\n",
    );
    server.apply("apiVersion: example.org/v1alpha1\nkind: XBroken\nmetadata: {name: broken}\nspec: {count: 2}\n");
    server.apply("apiVersion: example.org/v1alpha1\nkind: XNoSQL\nmetadata: {name: to-s3}\nspec: {export: S3}\n");
    server.apply("apiVersion: example.org/v1alpha1\nkind: XNoSQL\nmetadata: {name: to-gcs}\nspec: {export: GCS}\n");
    server.apply("apiVersion: example.org/v1alpha1\nkind: XDummy\nmetadata: {name: dummy}\nspec: {}\n");

    // The claim's buckets: two from the range, one from the extra resource.
    within(T, "the claim Ready", || {
        let ready = server.get(&["bucket", "photos", "-n", "team-a"]).is_some_and(|c| is_true(&c, "Ready"));
        if !ready {
            eprintln!("{}", server.kubectl(&["get", "xbucket", "-o", "yaml"]));
        }
        ready
    });
    let xr = xr_of_claim(&server, "photos", "team-a").unwrap();
    let nops = composed_nops(&server, &xr);
    assert_eq!(nops.keys().collect::<Vec<_>>(), ["bucket-0", "bucket-1", "settings"], "{nops:?}");
    assert_eq!(nops["bucket-1"]["spec"]["forProvider"]["fields"], serde_json::json!({"region": "eu-west-1", "index": 1}));
    assert_eq!(nops["settings"]["spec"]["forProvider"]["fields"]["tier"], "gold");
    // The function's own annotations are not on the composed resources.
    assert!(nops["bucket-0"]["metadata"]["annotations"].get("gotemplating.fn.crossplane.io/composition-resource-name").is_none());
    // Status written back, including a composed resource's observed name.
    within(T, "the XR's status from the template", || {
        let x = server.get(&["xbucket", &xr]).unwrap();
        x["status"]["bucketCount"] == 2 && x["status"]["firstBucket"] == nops["bucket-0"]["metadata"]["name"]
    });
    // The claim condition, on the claim and the composite.
    let claim = server.get(&["bucket", "photos", "-n", "team-a"]).unwrap();
    let c = condition(&claim, "BucketsRequested").expect("claim condition");
    assert_eq!((c["status"].as_str(), c["reason"].as_str(), c["message"].as_str()), (Some("True"), Some("Rendered"), Some("2 buckets in eu-west-1")));
    assert!(condition(&server.get(&["xbucket", &xr]).unwrap(), "BucketsRequested").is_some());
    // Connection details reach the claim's Secret.
    within(T, "the claim's connection secret", || {
        server.get(&["secret", "photos-conn", "-n", "team-a"]).is_some_and(|s| {
            s["data"]["region"].as_str().and_then(|v| base64::engine::general_purpose::STANDARD.decode(v).ok()).as_deref() == Some(b"eu-west-1")
        })
    });

    // A template failing at run time: Synced=False naming the step, Go's line and column.
    within(T, "the broken XR reporting its template error", || {
        let x = server.get(&["xbroken", "broken"]).unwrap();
        condition(&x, "Synced").is_some_and(|c| {
            let m = c["message"].as_str().unwrap_or_default();
            c["status"] == "False"
                && m.starts_with("cannot compose resources: pipeline step \"render\" returned a fatal result: ")
                && m.contains("cannot execute template: template: manifests:2:12: executing \"manifests\" at <eq .observed.composite.resource.spec.count 2>: error calling eq: incompatible types for comparison")
        })
    });

    // cel-filter: the bucket only for the XR exporting to S3.
    within(T, "cel-filter's choice of composed resources", || {
        composed_nops(&server, "to-s3").len() == 2 && composed_nops(&server, "to-gcs").keys().collect::<Vec<_>>() == ["table"]
    });

    // function-dummy: the composite gets exactly the response in the input.
    within(T, "function-dummy's response applied", || {
        let x = server.get(&["xdummy", "dummy"]).unwrap();
        let nops = composed_nops(&server, "dummy");
        x["status"]["widgets"] == 200
            && nops.keys().collect::<Vec<_>>() == ["cool-resource"]
            && nops["cool-resource"]["spec"]["forProvider"]["fields"] == serde_json::json!({"widgets": 200})
    });
    within(T, "the XR Ready from the response's READY_TRUE", || is_true(&server.get(&["xdummy", "dummy"]).unwrap(), "Ready"));
    let events = server.kubectl(&["get", "events", "-A", "-o", "json"]);
    assert!(events.contains("I did the thing!"), "{events}");
}
