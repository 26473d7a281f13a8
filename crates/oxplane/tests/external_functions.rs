//! Third-party composition functions from PyPI, each started as its own process, called by
//! oxplane over gRPC beside built-in functions: crossplane-function-pythonic and a function
//! written with crossplane-function-sdk-python (served by the SDK's own server). Each runs
//! insecure (Crossplane's development annotations) and with mutual TLS from certificates
//! `oxplane function certs` issued; one Composition mixes a Python step with the built-in
//! patch-and-transform and auto-ready, and its XR becomes Ready with the resources expected.

use crate::support;

use std::time::Duration;

use serde_json::json;
use support::function_servers::{FunctionServer, oxplane_certs};
use support::{Server, composed_nops, is_true, within};

const T: Duration = Duration::from_secs(90);

const XRD: &str = "
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata: {name: xpetsets.example.org}
spec:
  group: example.org
  names: {kind: XPetSet, plural: xpetsets}
  versions:
  - name: v1alpha1
    served: true
    referenceable: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: string}
              replicas: {type: integer}
          status:
            type: object
            properties:
              pets: {type: integer}
              sdkSize: {type: string}
              schemaFields: {type: string}
";

/// Functions named `<prefix>-pythonic` and `<prefix>-sdk`, reached at the given addresses,
/// insecure (the development annotations) or with mutual TLS (`oxplane.io/function-endpoint`).
fn functions(prefix: &str, pythonic: &str, sdk: &str, mutual_tls: bool) -> String {
    let annotations = |address: &str| {
        if mutual_tls {
            format!("{{oxplane.io/function-endpoint: \"{address}\"}}")
        } else {
            format!("{{render.crossplane.io/runtime: Development, render.crossplane.io/runtime-development-target: \"{address}\"}}")
        }
    };
    format!(
        "apiVersion: pkg.crossplane.io/v1
kind: Function
metadata:
  name: {prefix}-pythonic
  annotations: {}
spec: {{package: ghcr.io/fortra/function-pythonic:v0.1.4}}
---
apiVersion: pkg.crossplane.io/v1
kind: Function
metadata:
  name: {prefix}-sdk
  annotations: {}
spec: {{package: xpkg.example.org/tests/function-sdk-python-example:v0.1.0}}
",
        annotations(pythonic),
        annotations(sdk)
    )
}

/// A Composition mixing the Python functions `<prefix>-pythonic` and `<prefix>-sdk` with the
/// built-in patch-and-transform and auto-ready.
fn composition(prefix: &str) -> String {
    format!(
        r#"
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata: {{name: {prefix}-petsets}}
spec:
  compositeTypeRef: {{apiVersion: example.org/v1alpha1, kind: XPetSet}}
  mode: Pipeline
  pipeline:
  - step: pets-in-python
    functionRef: {{name: {prefix}-pythonic}}
    input:
      apiVersion: pythonic.fn.fortra.com/v1alpha1
      kind: Composite
      composite: |
        class PetSet(BaseComposite):
            def compose(self):
                # Readiness is function-auto-ready's job in this pipeline.
                self.autoReady = False
                for i in range(int(self.spec.replicas)):
                    pet = self.resources[f"pet-{{i}}"]('nop.crossplane.io/v1alpha1', 'NopResource')
                    pet.spec.forProvider.fields.size = self.spec.size
                    pet.spec.forProvider.fields.index = i
                    pet.spec.forProvider.conditionAfter[0].time = '0s'
                    pet.spec.forProvider.conditionAfter[0].conditionType = 'Ready'
                    pet.spec.forProvider.conditionAfter[0].conditionStatus = 'True'
                self.status.pets = int(self.spec.replicas)
  - step: made-with-the-sdk
    functionRef: {{name: {prefix}-sdk}}
  - step: patch-and-transform
    functionRef: {{name: function-patch-and-transform}}
    input:
      apiVersion: pt.fn.crossplane.io/v1beta1
      kind: Resources
      resources:
      - name: tag
        base:
          apiVersion: nop.crossplane.io/v1alpha1
          kind: NopResource
          spec:
            forProvider:
              conditionAfter: [{{time: 0s, conditionType: Ready, conditionStatus: "True"}}]
              fields: {{}}
        patches:
        - type: FromCompositeFieldPath
          fromFieldPath: spec.size
          toFieldPath: spec.forProvider.fields.tag
          transforms:
          - type: string
            string: {{type: Format, fmt: "size-%s"}}
  - step: automatically-detect-ready-composed-resources
    functionRef: {{name: function-auto-ready}}
"#
    )
}

const BUILTINS: &str = "
apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata: {name: provider-nop}
spec: {package: xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0}
---
apiVersion: pkg.crossplane.io/v1
kind: Function
metadata: {name: function-patch-and-transform}
spec: {package: xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform:v0.8.2}
---
apiVersion: pkg.crossplane.io/v1
kind: Function
metadata: {name: function-auto-ready}
spec: {package: xpkg.crossplane.io/crossplane-contrib/function-auto-ready:v0.5.0}
";

#[test]
fn python_functions_compose_beside_built_in_ones_insecure_and_over_mutual_tls() {
    let server = Server::start();
    let logs = tempfile::tempdir().unwrap();
    // The functions' server certificates, from oxplane's CA in its data directory.
    let certs = logs.path().join("certs");
    oxplane_certs(server.dir(), &certs);
    let pythonic_plain = FunctionServer::pythonic(None, logs.path());
    let sdk_plain = FunctionServer::sdk_function(None, logs.path());
    let pythonic_tls = FunctionServer::pythonic(Some(&certs), logs.path());
    let sdk_tls = FunctionServer::sdk_function(Some(&certs), logs.path());

    server.apply(BUILTINS);
    server.apply(&functions("plain", &pythonic_plain.address, &sdk_plain.address, false));
    server.apply(&functions("mtls", &pythonic_tls.address, &sdk_tls.address, true));
    server.kubectl(&[
        "wait",
        "--for=condition=Healthy",
        "provider/provider-nop",
        "function/function-patch-and-transform",
        "function/function-auto-ready",
        "function/plain-pythonic",
        "function/plain-sdk",
        "function/mtls-pythonic",
        "function/mtls-sdk",
        "--timeout=90s",
    ]);
    for (function, address) in
        [("plain-pythonic", &pythonic_plain.address), ("plain-sdk", &sdk_plain.address), ("mtls-pythonic", &pythonic_tls.address), ("mtls-sdk", &sdk_tls.address)]
    {
        let revisions = server.get(&["functionrevisions", "-l", &format!("pkg.crossplane.io/package={function}")]).unwrap();
        assert_eq!(revisions["items"][0]["status"]["endpoint"], address.as_str(), "{function}");
    }
    server.apply(XRD);
    server.kubectl(&["wait", "--for=condition=Established", "xrd/xpetsets.example.org", "--timeout=90s"]);
    server.apply(&composition("plain"));
    server.apply(&composition("mtls"));
    server.apply("apiVersion: example.org/v1alpha1\nkind: XPetSet\nmetadata: {name: cats}\nspec: {size: small, replicas: 2, compositionRef: {name: plain-petsets}}\n");
    server.apply("apiVersion: example.org/v1alpha1\nkind: XPetSet\nmetadata: {name: dogs}\nspec: {size: large, replicas: 3, compositionRef: {name: mtls-petsets}}\n");

    let document: serde_json::Value = serde_json::from_str(&server.kubectl(&["get", "--raw", "/openapi/v3/apis/example.org/v1alpha1"])).unwrap();
    let served_spec_fields = document["components"]["schemas"]
        .as_object()
        .unwrap()
        .values()
        .find(|schema| schema["x-kubernetes-group-version-kind"][0]["kind"] == "XPetSet")
        .map(|schema| {
            let mut fields: Vec<String> = schema["properties"]["spec"]["properties"].as_object().unwrap().keys().cloned().collect();
            fields.sort();
            fields.join(",")
        })
        .unwrap();
    for field in ["compositionRef", "replicas", "size"] {
        assert!(served_spec_fields.split(',').any(|f| f == field), "{served_spec_fields}");
    }
    for (xr, size, replicas) in [("cats", "small", 2), ("dogs", "large", 3)] {
        within(T, &format!("{xr} Ready"), || server.get(&["xpetset", xr]).is_some_and(|x| is_true(&x, "Ready") && is_true(&x, "Synced")));
        let nops = composed_nops(&server, xr);
        let mut expected: Vec<String> = (0..replicas).map(|i| format!("pet-{i}")).collect();
        expected.extend(["sdk-made".to_string(), "tag".to_string()]);
        expected.sort();
        assert_eq!(nops.keys().cloned().collect::<Vec<_>>(), expected, "{xr}");
        for i in 0..replicas {
            assert_eq!(nops[&format!("pet-{i}")]["spec"]["forProvider"]["fields"], json!({"size": size, "index": i}), "{xr}");
        }
        assert_eq!(nops["sdk-made"]["spec"]["forProvider"]["fields"], json!({"size": size, "madeBy": "crossplane-function-sdk-python"}));
        assert_eq!(nops["tag"]["spec"]["forProvider"]["fields"], json!({"tag": format!("size-{size}")}));
        for nop in nops.values() {
            assert!(is_true(nop, "Ready"), "{nop}");
        }
        let status = &server.get(&["xpetset", xr]).unwrap()["status"];
        assert_eq!(status["pets"], replicas);
        assert_eq!(status["sdkSize"], size);
        // The SDK function required the XR's own schema and listed its spec fields: those of
        // the served OpenAPI v3 document, the XRD's and the ones Crossplane adds.
        assert_eq!(status["schemaFields"], served_spec_fields.as_str(), "{xr}");
        // The SDK function's result, as a Normal event on the XR.
        let events = server.kubectl(&["get", "events", "--field-selector", &format!("involvedObject.name={xr}"), "-o", "json"]);
        assert!(events.contains(&format!("Pipeline step \\\"made-with-the-sdk\\\": composed sdk-made of size {size}")), "{events}");
    }
    assert!(pythonic_tls.log().contains("Completed compose"), "{}", pythonic_tls.log());
}

/// How many calls the counting function has answered so far.
fn calls(file: &std::path::Path) -> usize {
    std::fs::read_to_string(file).map(|calls| calls.lines().count()).unwrap_or(0)
}

/// Restarts the server and waits until the XR `owls` was reconciled and the function's calls
/// stopped; how many calls there were by then.
fn restart_and_settle(server: &mut Server, calls_file: &std::path::Path) -> usize {
    let results = sdk_results(server, "owls");
    server.restart();
    within(T, "a reconcile after the restart", || sdk_results(server, "owls") > results);
    let mut settled = calls(calls_file);
    // Quiet for a while: on a loaded machine a provider's first reconcile after the restart
    // can come seconds later and change what the XR observes.
    within(T, "the function's calls settle", || {
        std::thread::sleep(Duration::from_secs(6));
        let now = calls(calls_file);
        std::mem::replace(&mut settled, now) == now
    });
    settled
}

/// How many times the XR `xr` got the SDK function's result event, counting folded repeats.
fn sdk_results(server: &Server, xr: &str) -> u64 {
    let events: serde_json::Value =
        serde_json::from_str(&server.kubectl(&["get", "events", "--field-selector", &format!("involvedObject.name={xr}"), "-o", "json"])).unwrap();
    events["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|event| event["message"].as_str().is_some_and(|m| m.contains("composed sdk-made")))
        .map(|event| event["count"].as_u64().unwrap_or(1))
        .sum()
}

#[test]
fn the_response_cache_answers_a_reconcile_with_the_same_request_after_a_restart() {
    let mut server = Server::new(&["--enable-function-response-cache"]);
    server.spawn();
    let logs = tempfile::tempdir().unwrap();
    let calls_file = logs.path().join("calls");
    let sdk = FunctionServer::sdk_function_counting(None, logs.path(), Some(&calls_file));
    server.apply(BUILTINS);
    server.apply(&format!(
        "apiVersion: pkg.crossplane.io/v1
kind: Function
metadata:
  name: cached-sdk
  annotations: {{render.crossplane.io/runtime: Development, render.crossplane.io/runtime-development-target: \"{}\"}}
spec: {{package: xpkg.example.org/tests/function-sdk-python-example:v0.1.0}}
",
        sdk.address
    ));
    server.kubectl(&["wait", "--for=condition=Healthy", "provider/provider-nop", "function/function-auto-ready", "function/cached-sdk", "--timeout=90s"]);
    server.apply(XRD);
    server.kubectl(&["wait", "--for=condition=Established", "xrd/xpetsets.example.org", "--timeout=90s"]);
    server.apply(
        "
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata: {name: cached}
spec:
  compositeTypeRef: {apiVersion: example.org/v1alpha1, kind: XPetSet}
  mode: Pipeline
  pipeline:
  - step: made-with-the-sdk
    functionRef: {name: cached-sdk}
  - step: automatically-detect-ready-composed-resources
    functionRef: {name: function-auto-ready}
",
    );
    server.apply("apiVersion: example.org/v1alpha1\nkind: XPetSet\nmetadata: {name: owls}\nspec: {size: small, replicas: 1, compositionRef: {name: cached}}\n");
    within(T, "owls Ready", || server.get(&["xpetset", "owls"]).is_some_and(|x| is_true(&x, "Ready") && is_true(&x, "Synced")));
    let entries = server.dir().join("cache/xfn/cached-sdk");
    // The XR's last status write is seen only by the next reconcile: a restart makes it, with
    // the request the XR now keeps sending.
    let settled = restart_and_settle(&mut server, &calls_file);
    assert!(std::fs::read_dir(&entries).is_ok_and(|mut dir| dir.next().is_some()), "nothing cached in {}", entries.display());

    // Reconciled again with the same request, the XR is answered from the cache (the function's
    // result is recorded again) and the function is not called.
    let versions = |server: &Server| {
        let nops = composed_nops(server, "owls");
        let xr = server.get(&["xpetset", "owls"]).unwrap();
        (xr["metadata"]["resourceVersion"].clone(), nops.values().map(|n| n["metadata"]["resourceVersion"].clone()).collect::<Vec<_>>())
    };
    let before = versions(&server);
    let results = sdk_results(&server, "owls");
    server.restart();
    within(T, "a reconcile after the restart", || sdk_results(&server, "owls") > results);
    assert!(server.get(&["xpetset", "owls"]).is_some_and(|x| is_true(&x, "Ready") && is_true(&x, "Synced")));
    // On a loaded machine the XR can still observe changes after the restart (a provider's late
    // first reconcile), and a changed request is rightly a new call. What the cache promises is
    // that no request already answered is sent to the function again.
    let tags = std::fs::read_to_string(&calls_file).unwrap_or_default();
    let lines: Vec<&str> = tags.lines().collect();
    let (answered, after) = lines.split_at(settled.min(lines.len()));
    let repeated: Vec<&str> = after.iter().copied().filter(|tag| answered.contains(tag)).collect();
    assert!(
        repeated.is_empty(),
        "the function was called again with requests whose responses were cached: {repeated:?}; calls by request tag:\n{tags}\nXR and composed resourceVersions before the restart {before:?}, after {:?}",
        versions(&server)
    );

    // With the cache emptied, the same reconcile after a restart calls the function again.
    let made = calls(&calls_file);
    std::fs::remove_dir_all(&entries).unwrap();
    server.restart();
    within(T, "the function called after the cache was emptied", || calls(&calls_file) > made);
}
