//! Crossplane's API details end to end with the real kubectl, where oxplane once differed:
//! an XRD's `defaultCompositionRevisionSelector` is a full label selector whose
//! `matchExpressions` choose the revision, while an XR's own selectors hold `matchLabels` only;
//! a Composition's `mode` is `Pipeline` alone (the default), the legacy `mode: Resources`
//! refused as Crossplane v2 refuses it; `revisionActivationPolicy: Manual` honoured for
//! Functions and Providers; annotations over 256 KiB refused on every write.

use crate::support::{Server, within};

use std::time::Duration;

use serde_json::Value;

const T: Duration = Duration::from_secs(60);

const FUNCTIONS: &str = "apiVersion: pkg.crossplane.io/v1
kind: Function
metadata:
  name: function-patch-and-transform
spec:
  package: xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform:v0.8.2
";

/// A server with provider-nop and function-patch-and-transform, Healthy.
fn plane() -> Server {
    let server = Server::start_with(&["--provider", "provider-nop"]);
    server.apply(FUNCTIONS);
    server.kubectl(&["wait", "--for=condition=Healthy", "provider/provider-nop", "function/function-patch-and-transform", "--timeout=60s"]);
    server
}

const BUCKETS_XRD: &str = "apiVersion: apiextensions.crossplane.io/v2
kind: CompositeResourceDefinition
metadata:
  name: xbuckets.parity.example.org
spec:
  group: parity.example.org
  names: {kind: XBucket, plural: xbuckets}
  scope: Cluster
  defaultCompositionRevisionSelector:
    matchLabels:
      team: platform
    matchExpressions:
    - key: channel
      operator: NotIn
      values: [dev, canary]
  versions:
  - name: v1
    served: true
    referenceable: true
    schema:
      openAPIV3Schema:
        type: object
";

/// The Composition of XBuckets on `channel`: one NopResource, Ready at once.
fn buckets_composition(channel: &str) -> String {
    format!(
        "apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: xbuckets
  labels:
    team: platform
    channel: {channel}
spec:
  compositeTypeRef:
    apiVersion: parity.example.org/v1
    kind: XBucket
  pipeline:
  - step: compose
    functionRef:
      name: function-patch-and-transform
    input:
      apiVersion: pt.fn.crossplane.io/v1beta1
      kind: Resources
      resources:
      - name: bucket
        base:
          apiVersion: nop.crossplane.io/v1alpha1
          kind: NopResource
          spec:
            forProvider:
              conditionAfter:
              - {{time: 0s, conditionType: Ready, conditionStatus: \"True\"}}
"
    )
}

/// The CompositionRevisions of `xbuckets`, as `(revision number, channel label, name)` by number.
fn revisions(server: &Server) -> Vec<(i64, String, String)> {
    let list: Value = serde_json::from_str(&server.kubectl(&["get", "compositionrevisions", "-l", "crossplane.io/composition-name=xbuckets", "-o", "json"])).unwrap();
    let mut revisions: Vec<(i64, String, String)> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["spec"]["revision"].as_i64().unwrap(),
                r["metadata"]["labels"]["channel"].as_str().unwrap_or_default().to_string(),
                r["metadata"]["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    revisions.sort();
    revisions
}

#[test]
fn the_xrds_default_revision_selector_matches_expressions_too() {
    let server = plane();
    server.apply(BUCKETS_XRD);
    server.kubectl(&["wait", "--for=condition=Established", "xrd/xbuckets.parity.example.org", "--timeout=60s"]);
    let xrd = server.get(&["xrd", "xbuckets.parity.example.org"]).unwrap();
    assert_eq!(xrd["spec"]["defaultCompositionRevisionSelector"]["matchExpressions"][0]["operator"], "NotIn", "nothing is pruned: {xrd}");

    // Revisions 1 (stable), 2 (dev) and 3 (canary): the newest the default selects is 1.
    for (count, channel) in [(1, "stable"), (2, "dev"), (3, "canary")] {
        server.apply(&buckets_composition(channel));
        within(T, &format!("revision {count}"), || revisions(&server).len() == count);
    }
    let seen = revisions(&server);
    assert_eq!(seen.iter().map(|(n, c, _)| (*n, c.as_str())).collect::<Vec<_>>(), [(1, "stable"), (2, "dev"), (3, "canary")]);

    server.apply("apiVersion: parity.example.org/v1\nkind: XBucket\nmetadata:\n  name: b1\nspec: {}\n");
    within(T, "b1 to be Ready", || server.get(&["xbucket", "b1"]).is_some_and(|b| crate::support::is_true(&b, "Ready")));
    let b1 = server.get(&["xbucket", "b1"]).unwrap();
    assert_eq!(b1["spec"]["crossplane"]["compositionRevisionRef"]["name"], seen[0].2.as_str(), "{b1}");
    // The XR's selector holds what its schema has: the default's matchLabels.
    assert_eq!(b1["spec"]["crossplane"]["compositionRevisionSelector"], serde_json::json!({"matchLabels": {"team": "platform"}}), "{b1}");

    // A stable revision 4 is selected at once by the XR following the default.
    server.apply(&buckets_composition("stable").replace("- name: bucket", "- name: bucket-v4"));
    within(T, "b1 to follow the newest stable revision", || {
        let newest = revisions(&server).into_iter().find(|(n, _, _)| *n == 4).map(|(_, _, name)| name);
        newest.is_some() && server.get(&["xbucket", "b1"]).is_some_and(|b| b["spec"]["crossplane"]["compositionRevisionRef"]["name"].as_str() == newest.as_deref())
    });

    // An XR's own selectors have matchLabels only, as the XR schema Crossplane generates.
    let refused = server.kubectl_fails(
        &["apply", "-f", "-"],
        "apiVersion: parity.example.org/v1\nkind: XBucket\nmetadata:\n  name: b2\nspec:\n  crossplane:\n    compositionRevisionSelector:\n      matchLabels: {team: platform}\n      matchExpressions:\n      - {key: channel, operator: Exists}\n",
    );
    assert!(refused.contains(r#"unknown field "spec.crossplane.compositionRevisionSelector.matchExpressions""#), "{refused}");
}

const LEGACY_COMPOSITION: &str = "apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: xbuckets-classic
spec:
  compositeTypeRef:
    apiVersion: parity.example.org/v1
    kind: XBucket
  mode: Resources
  resources:
  - name: bucket
    base:
      apiVersion: nop.crossplane.io/v1alpha1
      kind: NopResource
";

#[test]
fn a_composition_runs_a_pipeline_only_and_the_resources_mode_is_refused() {
    let server = Server::start();
    // Crossplane 1.x YAML: its legacy fields are unknown to the v2 schema...
    let refused = server.kubectl_fails(&["apply", "-f", "-"], LEGACY_COMPOSITION);
    assert!(refused.contains(r#"strict decoding error: unknown field "spec.resources""#), "{refused}");
    // ...and, with them dropped, the mode is refused with the CRD's enum.
    let refused = server.kubectl_fails(&["apply", "--validate=false", "-f", "-"], LEGACY_COMPOSITION);
    assert!(refused.contains(r#"The Composition "xbuckets-classic" is invalid: "#), "{refused}");
    assert!(refused.contains(r#"spec.mode: Unsupported value: "Resources": supported values: "Pipeline""#), "{refused}");
    // Without a mode, the mode is Pipeline, which needs a pipeline.
    let refused = server.kubectl_fails(&["apply", "--validate=false", "-f", "-"], &LEGACY_COMPOSITION.replace("  mode: Resources\n", ""));
    assert!(refused.contains(r#"spec: Invalid value: "object": an array of pipeline steps is required in Pipeline mode"#), "{refused}");
    assert!(server.get(&["composition", "xbuckets-classic"]).is_none(), "nothing is stored");

    // A pipeline without a mode is stored with the default mode, Pipeline.
    server.apply(&buckets_composition("stable"));
    let stored = server.get(&["composition", "xbuckets"]).unwrap();
    assert_eq!(stored["spec"]["mode"], "Pipeline", "{stored}");
}

/// `(status, reason)` of a condition of `object`.
fn state_of(object: &Value, type_: &str) -> (String, String) {
    let condition = crate::support::condition(object, type_).unwrap_or_default();
    (condition["status"].as_str().unwrap_or_default().to_string(), condition["reason"].as_str().unwrap_or_default().to_string())
}

fn desired_state(server: &Server, kind: &str, name: &str) -> String {
    server.get(&[kind, name]).map(|r| r["spec"]["desiredState"].as_str().unwrap_or_default().to_string()).unwrap_or_default()
}

#[test]
fn a_manual_activation_policy_leaves_new_revisions_of_functions_and_providers_inactive() {
    let server = Server::start();
    // A Function installed with the Manual policy: its first revision is Inactive, and the
    // Function says so, until the user activates the revision.
    server.apply("apiVersion: pkg.crossplane.io/v1\nkind: Function\nmetadata:\n  name: function-dummy\nspec:\n  package: xpkg.crossplane.io/crossplane-contrib/function-dummy:v0.4.1\n  revisionActivationPolicy: Manual\n");
    within(T, "the Function to be inactive", || {
        server.get(&["function", "function-dummy"]).is_some_and(|f| state_of(&f, "Installed") == ("False".into(), "InactivePackageRevision".into()))
    });
    let function = server.get(&["function", "function-dummy"]).unwrap();
    assert_eq!(crate::support::condition(&function, "Installed").unwrap()["message"], "Package is inactive");
    let revision = function["status"]["currentRevision"].as_str().unwrap().to_string();
    assert_eq!(desired_state(&server, "functionrevision", &revision), "Inactive");
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(desired_state(&server, "functionrevision", &revision), "Inactive", "it stays inactive");
    server.kubectl(&["patch", "functionrevision", &revision, "--type=merge", "-p", r#"{"spec":{"desiredState":"Active"}}"#]);
    server.kubectl(&["wait", "--for=condition=Installed", "function/function-dummy", "--timeout=60s"]);

    // A Provider installed with the default (Automatic) policy, then upgraded under Manual:
    // the new revision is created Inactive, and, as Crossplane's package manager does
    // whatever the policy, the old one is made inactive too; what it installed stays.
    let provider = |version: &str, policy: &str| {
        format!("apiVersion: pkg.crossplane.io/v1\nkind: Provider\nmetadata:\n  name: provider-nop\nspec:\n  package: xpkg.crossplane.io/crossplane-contrib/provider-nop:{version}\n  revisionActivationPolicy: {policy}\n")
    };
    server.apply(&provider("v0.4.0", "Automatic"));
    server.kubectl(&["wait", "--for=condition=Healthy", "--for=condition=Installed", "provider/provider-nop", "--timeout=60s"]);
    let first = server.get(&["provider", "provider-nop"]).unwrap()["status"]["currentRevision"].as_str().unwrap().to_string();
    server.apply(&provider("v0.4.1", "Manual"));
    within(T, "the new revision, inactive", || {
        server.get(&["provider", "provider-nop"]).is_some_and(|p| {
            p["status"]["currentRevision"].as_str() != Some(first.as_str()) && state_of(&p, "Installed") == ("False".into(), "InactivePackageRevision".into())
        })
    });
    let second = server.get(&["provider", "provider-nop"]).unwrap()["status"]["currentRevision"].as_str().unwrap().to_string();
    assert_eq!(desired_state(&server, "providerrevision", &second), "Inactive");
    within(T, "the old revision to become inactive", || desired_state(&server, "providerrevision", &first) == "Inactive");
    let crd = server.get(&["crd", "nopresources.nop.crossplane.io"]).expect("the provider's CRDs stay");
    let controller = crd["metadata"]["ownerReferences"].as_array().unwrap().iter().find(|o| o["controller"] == true).cloned().unwrap();
    assert_eq!(controller["name"], first.as_str(), "nothing of the inactive revision is installed: {crd}");
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(desired_state(&server, "providerrevision", &second), "Inactive", "it stays inactive");

    // The user activates it: it is installed, the CRDs' controller moves to it.
    server.kubectl(&["patch", "providerrevision", &second, "--type=merge", "-p", r#"{"spec":{"desiredState":"Active"}}"#]);
    server.kubectl(&["wait", "--for=condition=Installed", "provider/provider-nop", "--timeout=60s"]);
    within(T, "the CRD's controller to move to the activated revision", || {
        server.get(&["crd", "nopresources.nop.crossplane.io"]).is_some_and(|c| {
            c["metadata"]["ownerReferences"].as_array().into_iter().flatten().any(|o| o["controller"] == true && o["name"] == second.as_str())
        })
    });
    assert_eq!(desired_state(&server, "providerrevision", &first), "Inactive");
    let revisions = server.kubectl(&["get", "providerrevisions"]);
    assert!(revisions.lines().next().unwrap().contains("STATE"), "{revisions}");
}


/// kube-apiserver's limit on annotations (keys and values together), on every write path
/// (create, update, merge and JSON patch, server-side and client-side apply), for a built-in
/// kind and a custom one: a 422 whose cause kubectl prints after "is invalid:".
#[test]
fn annotations_over_256_kib_are_refused_on_every_write_path() {
    let server = Server::start();
    const LIMIT: usize = 262_144;
    let big = "x".repeat(LIMIT);
    let config_map = |annotations: &str| format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: default\n  annotations: {{{annotations}}}\ndata: {{a: b}}\n");
    let environment = |annotations: &str| format!("apiVersion: apiextensions.crossplane.io/v1beta1\nkind: EnvironmentConfig\nmetadata:\n  name: settings\n  annotations: {{{annotations}}}\ndata: {{a: b}}\n");
    let too_long = "metadata.annotations: Too long: must have at most 262144 bytes";
    let patches = server.dir().join("patches");
    std::fs::create_dir_all(&patches).unwrap();
    let merge = patches.join("merge.json");
    std::fs::write(&merge, format!(r#"{{"metadata":{{"annotations":{{"note":"{big}"}}}}}}"#)).unwrap();
    let json_patch = patches.join("json.json");
    std::fs::write(&json_patch, format!(r#"[{{"op":"add","path":"/metadata/annotations/note","value":"{big}"}}]"#)).unwrap();
    let kinds = [("ConfigMap", "configmap/settings", config_map as fn(&str) -> String), ("EnvironmentConfig", "environmentconfig/settings", environment)];
    let mut wrong = Vec::new();
    for (kind, object, manifest) in kinds {
        // Exactly at the limit (key "note" and its value) is accepted.
        let at_limit = manifest(&format!("note: {}", &big[..LIMIT - 4]));
        server.kubectl_stdin(&["create", "-f", "-"], &at_limit);
        server.kubectl(&["delete", object, "-n", "default"]);
        let refused = manifest(&format!("note: {big}"));
        let expected = crate::crossplane_crds::invalid(kind, "settings", too_long);
        let mut check = |path: &str, answer: Result<String, String>| wrong.extend(crate::crossplane_crds::unexpected_answer(&format!("{kind} {path}"), answer, &expected));
        check("create", server.kubectl_try(&["create", "-f", "-"], &refused));
        check("server-side apply (create)", server.kubectl_try(&["apply", "--server-side", "-f", "-"], &refused));
        server.apply(&manifest("owner: platform"));
        check("update", server.kubectl_try(&["replace", "-f", "-"], &refused));
        check("merge patch", server.kubectl_try(&["patch", object, "-n", "default", "--type=merge", "--patch-file", merge.to_str().unwrap()], ""));
        check("JSON patch", server.kubectl_try(&["patch", object, "-n", "default", "--type=json", "--patch-file", json_patch.to_str().unwrap()], ""));
        check("client-side apply (patch)", server.kubectl_try(&["apply", "-f", "-"], &refused));
        check("server-side apply (patch)", server.kubectl_try(&["apply", "--server-side", "--force-conflicts", "-f", "-"], &refused));
        let stored = server.get(&[object, "-n", "default"]).unwrap();
        assert_eq!(stored["metadata"]["annotations"]["owner"], "platform", "nothing refused was stored: {kind}");
        assert!(stored["metadata"]["annotations"].get("note").is_none(), "nothing refused was stored: {kind}");
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
