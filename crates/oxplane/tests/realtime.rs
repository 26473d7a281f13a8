//! Realtime composition and clean teardown, as the scenarios of Crossplane's watch bugs
//! describe them (RC-01, RC-02, RC-03, RC-04, RC-06, RC-07, RC-08, WS-01 to WS-04, WS-07), against
//! the real binary with the real kubectl. Watches are re-asserted every 2 s and idle ones
//! kept 1 s (T_gc = 2 s); "within T_react" is 10 s; nothing relies on polling.

use crate::support;

use std::time::{Duration, Instant};

use serde_json::Value;
use support::{Server, condition, is_true, within};

const T_GC: Duration = Duration::from_secs(2);
const T_REACT: Duration = Duration::from_secs(10);
const T_DEL: Duration = Duration::from_secs(30);

const FUNCTIONS: &str = "apiVersion: pkg.crossplane.io/v1
kind: Function
metadata:
  name: function-patch-and-transform
spec:
  package: xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform:v0.8.2
---
apiVersion: pkg.crossplane.io/v1
kind: Function
metadata:
  name: function-auto-ready
spec:
  package: xpkg.crossplane.io/crossplane-contrib/function-auto-ready:v0.5.0
";

/// A v1 XRD of kind `kind` (plural `plural`) in example.org.
fn xrd(kind: &str, plural: &str) -> String {
    format!(
        "apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata:
  name: {plural}.example.org
spec:
  group: example.org
  names:
    kind: {kind}
    plural: {plural}
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
              label: {{type: string}}
"
    )
}

/// A Composition of `kind` making two NopResources that are Ready at once; `extra_label`
/// adds a label to both.
fn composition(name: &str, kind: &str, extra_label: Option<(&str, &str)>) -> String {
    let labels = match extra_label {
        Some((k, v)) => format!("\n          metadata:\n            labels:\n              {k}: {v}"),
        None => String::new(),
    };
    format!(
        "apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: {name}
spec:
  compositeTypeRef:
    apiVersion: example.org/v1alpha1
    kind: {kind}
  mode: Pipeline
  pipeline:
  - step: compose
    functionRef:
      name: function-patch-and-transform
    input:
      apiVersion: pt.fn.crossplane.io/v1beta1
      kind: Resources
      resources:
      - name: one
        base: &nop
          apiVersion: nop.crossplane.io/v1alpha1
          kind: NopResource{labels}
          spec:
            forProvider:
              conditionAfter:
              - {{time: 0s, conditionType: Ready, conditionStatus: \"True\"}}
        patches: &patches
        - fromFieldPath: spec.label
          toFieldPath: spec.forProvider.fields.label
      - name: two
        base: *nop
        patches: *patches
  - step: ready
    functionRef:
      name: function-auto-ready
"
    )
}

/// A Composition of `kind` making one ConfigMap (no NopResource).
fn configmap_composition(name: &str, kind: &str) -> String {
    format!(
        "apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: {name}
spec:
  compositeTypeRef:
    apiVersion: example.org/v1alpha1
    kind: {kind}
  mode: Pipeline
  pipeline:
  - step: compose
    functionRef:
      name: function-patch-and-transform
    input:
      apiVersion: pt.fn.crossplane.io/v1beta1
      kind: Resources
      resources:
      - name: settings
        base:
          apiVersion: v1
          kind: ConfigMap
          metadata: {{namespace: default}}
          data: {{a: b}}
        readinessChecks:
        - type: None
"
    )
}

fn xr(kind: &str, name: &str, label: &str) -> String {
    format!("apiVersion: example.org/v1alpha1\nkind: {kind}\nmetadata:\n  name: {name}\nspec:\n  label: {label}\n")
}

/// The binary with provider-nop and the built-in functions installed.
fn start() -> Server {
    start_with(&[])
}

fn start_with(extra: &[&str]) -> Server {
    let mut args = vec!["--provider", "provider-nop", "--watch-reassert-interval", "2", "--watch-grace-period", "1"];
    args.extend_from_slice(extra);
    let server = Server::start_with(&args);
    server.kubectl_stdin(&["apply", "-f", "-"], FUNCTIONS);
    server.kubectl(&["wait", "--for=condition=Healthy", "provider/provider-nop", "function/function-auto-ready", "function/function-patch-and-transform", "--timeout=60s"]);
    server
}

fn establish(server: &Server, kind: &str, plural: &str, composition_yaml: &str) {
    server.apply(&xrd(kind, plural));
    server.kubectl(&["wait", "--for=condition=Established", &format!("xrd/{plural}.example.org"), "--timeout=60s"]);
    server.apply(composition_yaml);
}

fn ready(server: &Server, kind: &str, name: &str) -> bool {
    server.get(&[kind, name]).is_some_and(|x| is_true(&x, "Ready") && is_true(&x, "Synced"))
}

/// NopResources controlled by the object with this uid.
fn composed_by(server: &Server, uid: &str) -> Vec<Value> {
    server.get(&["nopresources"]).map(|l| l["items"].as_array().unwrap().clone()).unwrap_or_default().into_iter().filter(|n| n["metadata"]["ownerReferences"][0]["uid"] == uid).collect()
}

/// Watches of the debug page: (controller, kind) pairs.
fn watches(server: &Server) -> Vec<(String, String)> {
    let page: Value = serde_json::from_str(&server.kubectl(&["get", "--raw", "/debug/oxplane/watches"])).unwrap();
    let mut out = Vec::new();
    for informer in page["informers"].as_array().unwrap() {
        for controller in informer["subscriptions"].as_object().unwrap().keys() {
            out.push((controller.clone(), informer["kind"].as_str().unwrap().to_string()));
        }
    }
    out
}

/// Requests about a kind so far, as the server counts them: LIST and WATCH of its resource,
/// discovery of its group-version (what a client still waiting for the kind would send), and
/// the watch streams open on it now.
#[derive(Debug, PartialEq)]
struct Traffic {
    lists_and_watches: f64,
    discovery: f64,
    open_watches: f64,
}

fn traffic(server: &Server, group: &str, resource: &str) -> Traffic {
    let metrics = server.kubectl(&["get", "--raw", "/metrics"]);
    let in_group = format!("group=\"{group}\"");
    let sum = |prefix: &str, keep: &dyn Fn(&str) -> bool| -> f64 {
        metrics
            .lines()
            .filter(|l| l.starts_with(prefix) && l.contains(&in_group) && keep(l))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
            .sum()
    };
    let of_resource = format!("resource=\"{resource}\"");
    Traffic {
        lists_and_watches: sum("oxplane_apiserver_resource_requests_total{", &|l| {
            l.contains(&of_resource) && (l.contains("verb=\"LIST\"") || l.contains("verb=\"WATCH\""))
        }),
        discovery: sum("oxplane_apiserver_resource_requests_total{", &|l| l.contains("resource=\"\"")),
        open_watches: sum("oxplane_apiserver_resource_watchers{", &|l| l.contains(&of_resource)),
    }
}

fn assert_no_bad_logs(server: &Server) {
    for line in server.warnings() {
        for bad in ["cannot stop", "Informer to sync", "cannot get informer", "panic", "Timeout"] {
            assert!(!line.contains(bad), "{line}");
        }
    }
}

#[test]
fn rc01_an_xr_created_long_after_its_xrd_is_reconciled_promptly() {
    let server = start();
    establish(&server, "XParent", "xparents", &composition("xparents", "XParent", None));
    std::thread::sleep(T_GC * 3 + Duration::from_secs(5));
    let created = Instant::now();
    server.apply(&xr("XParent", "p1", "a"));
    within(T_REACT, "p1 Synced with its composition", || {
        server.get(&["xparent", "p1"]).is_some_and(|p| {
            is_true(&p, "Synced") && p["spec"]["compositionRef"]["name"] == "xparents" && p["spec"]["compositionRevisionRef"]["name"].is_string()
        })
    });
    let p1 = server.get(&["xparent", "p1"]).unwrap();
    within(T_REACT, "two NopResources owned by p1", || composed_by(&server, p1["metadata"]["uid"].as_str().unwrap()).len() == 2);
    within(T_REACT, "p1 Ready", || ready(&server, "xparent", "p1"));
    assert!(created.elapsed() < T_REACT * 2);
    let described = server.kubectl(&["describe", "xparent", "p1"]);
    assert!(described.contains("SelectComposition"), "{described}");
    let live = watches(&server);
    for kind in ["example.org/v1alpha1, Kind=XParent", "apiextensions.crossplane.io/v1, Kind=CompositionRevision", "nop.crossplane.io/v1alpha1, Kind=NopResource"] {
        assert!(live.contains(&("composite/xparents.example.org".to_string(), kind.to_string())), "{kind} not in {live:?}");
    }
    assert_no_bad_logs(&server);
}

/// RC-02: a claim applied long after its XRD (idle for three watch sweeps) gets its composite
/// at once, both Synced, and turns Ready within T_react of its composite — no waiting for a poll.
#[test]
fn rc02_a_claim_created_long_after_its_xrd_follows_its_composite_promptly() {
    let server = start();
    let claim_xrd = xrd("XDb", "xdbs").replace("    plural: xdbs\n", "    plural: xdbs\n  claimNames:\n    kind: Db\n    plural: dbs\n");
    assert!(claim_xrd.contains("claimNames"));
    server.apply(&claim_xrd);
    server.kubectl(&["wait", "--for=condition=Established", "--for=condition=Offered", "xrd/xdbs.example.org", "--timeout=60s"]);
    server.apply(&composition("xdbs", "XDb", None));
    server.apply("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-a\n");
    std::thread::sleep(T_GC * 3 + Duration::from_secs(5));

    let created = Instant::now();
    server.apply("apiVersion: example.org/v1alpha1\nkind: Db\nmetadata:\n  name: c1\n  namespace: team-a\nspec:\n  label: c\n");
    // Poll claim and composite together, noting when each is first seen Ready.
    let (mut xr_synced, mut claim_synced, mut xr_ready, mut claim_ready) = (None, None, None, None);
    let mut xr_name = String::new();
    while claim_ready.is_none() && created.elapsed() < T_REACT * 4 {
        let claim = server.get(&["db", "c1", "-n", "team-a"]).unwrap();
        if let Some(name) = claim["spec"]["resourceRef"]["name"].as_str() {
            xr_name = name.to_string();
            if let Some(xr) = server.get(&["xdb", name]) {
                if is_true(&xr, "Synced") {
                    xr_synced.get_or_insert(created.elapsed());
                }
                if is_true(&xr, "Ready") {
                    xr_ready.get_or_insert(Instant::now());
                }
            }
            if is_true(&claim, "Synced") {
                claim_synced.get_or_insert(created.elapsed());
            }
        }
        if is_true(&claim, "Ready") {
            claim_ready = Some(Instant::now());
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(xr_name.starts_with("c1-"), "{xr_name:?}");
    assert!(xr_synced.is_some_and(|t| t < T_REACT), "the composite Synced after {xr_synced:?}");
    assert!(claim_synced.is_some_and(|t| t < T_REACT), "the claim Synced with its resourceRef after {claim_synced:?}");
    let (Some(xr_ready), Some(claim_ready)) = (xr_ready, claim_ready) else { panic!("not Ready: composite {xr_ready:?}, claim {claim_ready:?}") };
    assert!(claim_ready.saturating_duration_since(xr_ready) < T_REACT, "the claim turned Ready {:?} after its composite", claim_ready.saturating_duration_since(xr_ready));
    let xr = server.get(&["xdb", &xr_name]).unwrap();
    assert_eq!(xr["spec"]["claimRef"]["name"], "c1");
    assert_eq!(composed_by(&server, xr["metadata"]["uid"].as_str().unwrap()).len(), 2);
    assert_no_bad_logs(&server);
}

#[test]
fn rc03_an_xr_deleted_and_recreated_with_the_same_name_gets_new_resources() {
    let server = start();
    establish(&server, "XParent", "xparents", &composition("xparents", "XParent", None));
    server.apply(&xr("XParent", "p1", "a"));
    within(T_REACT, "p1 Ready", || ready(&server, "xparent", "p1"));
    let old_uid = server.get(&["xparent", "p1"]).unwrap()["metadata"]["uid"].as_str().unwrap().to_string();
    std::thread::sleep(T_GC * 3);
    server.kubectl(&["delete", "xparent", "p1", "--wait=false"]);
    // Create again until accepted (AlreadyExists while the old one is still going).
    within(T_DEL, "the create to be accepted", || server.kubectl_try(&["create", "-f", "-"], &xr("XParent", "p1", "a")).is_ok());
    let new = server.get(&["xparent", "p1"]).unwrap();
    let new_uid = new["metadata"]["uid"].as_str().unwrap().to_string();
    assert_ne!(new_uid, old_uid);
    within(T_REACT, "the new p1 Ready", || ready(&server, "xparent", "p1"));
    within(T_REACT, "the new p1's resources", || composed_by(&server, &new_uid).len() == 2);
    within(T_DEL, "no resource of the old p1 left", || composed_by(&server, &old_uid).is_empty());
    assert_no_bad_logs(&server);
}

#[test]
fn rc04_a_composition_change_rolls_out_after_idling() {
    let server = start();
    establish(&server, "XParent", "xparents", &composition("xparents", "XParent", None));
    server.apply(&xr("XParent", "p1", "a"));
    within(T_REACT, "p1 Ready", || ready(&server, "xparent", "p1"));
    let first = server.get(&["xparent", "p1"]).unwrap()["spec"]["compositionRevisionRef"]["name"].clone();
    std::thread::sleep(T_GC * 3);
    server.apply(&composition("xparents", "XParent", Some(("rev", "two"))));
    within(T_REACT, "a second revision", || {
        server.get(&["compositionrevisions", "-l", "crossplane.io/composition-name=xparents"]).is_some_and(|l| l["items"].as_array().unwrap().len() == 2)
    });
    within(T_REACT, "p1 on the new revision", || {
        server.get(&["xparent", "p1"]).is_some_and(|p| p["spec"]["compositionRevisionRef"]["name"] != first)
    });
    within(T_REACT, "the composed resources relabelled", || server.kubectl(&["get", "nopresources", "-l", "rev=two", "-o", "name"]).lines().count() == 2);
}

#[test]
fn rc06_two_xr_kinds_share_a_composed_kind_and_release_it_separately() {
    let server = start();
    establish(&server, "XA", "xas", &composition("xas", "XA", None));
    establish(&server, "XC", "xcs", &composition("xcs", "XC", None));
    server.apply(&xr("XA", "a1", "a"));
    server.apply(&xr("XC", "c1", "c"));
    within(T_REACT, "a1 and c1 Ready", || ready(&server, "xa", "a1") && ready(&server, "xc", "c1"));
    let nop_kind = "nop.crossplane.io/v1alpha1, Kind=NopResource".to_string();
    assert!(watches(&server).contains(&("composite/xas.example.org".into(), nop_kind.clone())));

    // XA stops composing NopResources.
    server.apply(&configmap_composition("xas", "XA"));
    within(T_REACT + T_GC * 3, "XA's NopResource watch released", || {
        let live = watches(&server);
        !live.contains(&("composite/xas.example.org".into(), nop_kind.clone())) && live.contains(&("composite/xcs.example.org".into(), nop_kind.clone()))
    });
    // c1's resources are still watched: drift is reverted at once.
    let c1 = server.get(&["xc", "c1"]).unwrap();
    let nop = composed_by(&server, c1["metadata"]["uid"].as_str().unwrap())[0]["metadata"]["name"].as_str().unwrap().to_string();
    server.kubectl(&["patch", "nopresource", &nop, "--type=merge", "-p", r#"{"spec":{"forProvider":{"fields":{"label":"drifted"}}}}"#]);
    within(T_REACT, "drift reverted", || server.get(&["nopresource", &nop]).unwrap()["spec"]["forProvider"]["fields"]["label"] == "c");

    // XA's XRD goes: XC is unaffected.
    server.kubectl(&["delete", "xrd", "xas.example.org", "--timeout=60s"]);
    assert!(!watches(&server).iter().any(|(c, _)| c == "composite/xas.example.org"));
    server.kubectl(&["patch", "xc", "c1", "--type=merge", "-p", r#"{"spec":{"label":"c2"}}"#]);
    within(T_REACT, "c1 still reconciled", || server.get(&["nopresource", &nop]).unwrap()["spec"]["forProvider"]["fields"]["label"] == "c2");
    // And when XC's goes too, no composite controller watches anything.
    server.kubectl(&["delete", "xrd", "xcs.example.org", "--timeout=60s"]);
    within(T_GC * 2 + Duration::from_secs(2), "every composite watch gone", || !watches(&server).iter().any(|(c, _)| c.starts_with("composite/")));
    assert_no_bad_logs(&server);
}

#[test]
fn rc07_an_xrd_deleted_and_recreated_at_once_serves_again() {
    let server = start();
    establish(&server, "XParent", "xparents", &composition("xparents", "XParent", None));
    server.apply(&xr("XParent", "p1", "a"));
    within(T_REACT, "p1 Ready", || ready(&server, "xparent", "p1"));
    server.kubectl(&["delete", "xparents", "--all", "--timeout=60s"]);
    server.kubectl(&["delete", "xrd", "xparents.example.org", "--timeout=60s"]);
    server.apply(&xrd("XParent", "xparents"));
    server.kubectl(&["wait", "--for=condition=Established", "xrd/xparents.example.org", "--timeout=60s"]);
    let established = Instant::now();
    within(T_DEL, "the kind served again", || server.kubectl_try(&["create", "-f", "-"], &xr("XParent", "p2", "b")).is_ok());
    within(T_REACT, "p2 Synced", || server.get(&["xparent", "p2"]).is_some_and(|p| is_true(&p, "Synced")));
    assert!(established.elapsed() < T_REACT + T_DEL);
    std::thread::sleep(T_GC * 3);
    server.kubectl(&["patch", "xparent", "p2", "--type=merge", "-p", r#"{"spec":{"label":"later"}}"#]);
    let p2 = server.get(&["xparent", "p2"]).unwrap();
    within(T_REACT, "p2's edit composed", || {
        composed_by(&server, p2["metadata"]["uid"].as_str().unwrap()).iter().all(|n| n["spec"]["forProvider"]["fields"]["label"] == "later")
    });
}

#[test]
fn rc08_after_a_kill_every_xr_is_reconciled_again() {
    let mut server = start();
    for (kind, plural) in [("XOne", "xones"), ("XTwo", "xtwos"), ("XThree", "xthrees")] {
        establish(&server, kind, plural, &composition(plural, kind, None));
        let many: String = (0..5).map(|i| xr(kind, &format!("{plural}-{i}"), "x")).collect::<Vec<_>>().join("---\n");
        server.apply(&many);
    }
    within(Duration::from_secs(60), "all 15 Ready", || {
        ["xones", "xtwos", "xthrees"].iter().all(|p| {
            server.get(&[p]).is_some_and(|l| l["items"].as_array().unwrap().iter().filter(|x| is_true(x, "Ready")).count() == 5)
        })
    });
    server.kill_and_restart();
    let restarted = Instant::now();
    // Drift on any composed resource is reverted: every XR's watches are back.
    let x = server.get(&["xtwo", "xtwos-3"]).unwrap();
    let nop = composed_by(&server, x["metadata"]["uid"].as_str().unwrap())[0]["metadata"]["name"].as_str().unwrap().to_string();
    server.kubectl(&["patch", "nopresource", &nop, "--type=merge", "-p", r#"{"spec":{"forProvider":{"fields":{"label":"drifted"}}}}"#]);
    within(T_REACT, "drift reverted after the restart", || server.get(&["nopresource", &nop]).unwrap()["spec"]["forProvider"]["fields"]["label"] == "x");
    let metrics = server.kubectl(&["get", "--raw", "/metrics"]);
    for plural in ["xones", "xtwos", "xthrees"] {
        let total: f64 = metrics
            .lines()
            .filter(|l| l.starts_with(&format!("oxplane_reconciles_total{{controller=\"composite/{plural}.example.org\"")))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum();
        assert!(total >= 5.0, "{plural}: {total} reconciles since the restart");
    }
    server.apply(&xr("XOne", "late", "late"));
    within(T_REACT, "an XR created after the restart", || server.get(&["xone", "late"]).is_some_and(|x| is_true(&x, "Synced")));
    assert!(restarted.elapsed() < Duration::from_secs(60));
}

/// WS-01 (provider first) and WS-02 (XRD first): teardown is clean either way.
#[test]
fn ws01_ws02_provider_and_xrd_teardown_in_either_order_is_clean() {
    for provider_first in [true, false] {
        let server = start();
        establish(&server, "XParent", "xparents", &composition("xparents", "XParent", None));
        server.apply(&xr("XParent", "p1", "a"));
        within(T_REACT, "p1 Ready", || ready(&server, "xparent", "p1"));
        server.kubectl(&["delete", "xparent", "p1", "--timeout=60s"]);
        let teardown = |what: &str| match what {
            "provider" => {
                server.kubectl(&["delete", "provider", "provider-nop", "--timeout=60s"]);
                within(T_DEL, "the NopResource CRD gone", || server.get(&["crd", "nopresources.nop.crossplane.io"]).is_none());
            }
            _ => {
                server.kubectl(&["delete", "xrd", "xparents.example.org", "--timeout=30s"]);
                within(T_DEL, "the XR CRD gone", || server.get(&["crd", "xparents.example.org"]).is_none());
            }
        };
        if provider_first {
            teardown("provider");
            teardown("xrd");
        } else {
            teardown("xrd");
            teardown("provider");
        }
        std::thread::sleep(Duration::from_secs(5));
        // From here on nothing lists or watches the gone kinds, not even when another CRD
        // comes and goes (which wakes informers that wait for a kind to be served).
        let nop = || traffic(&server, "nop.crossplane.io", "nopresources");
        let xparents = || traffic(&server, "example.org", "xparents");
        let (nop_before, xparents_before) = (nop(), xparents());
        assert!(nop_before.lists_and_watches > 0.0 && xparents_before.lists_and_watches > 0.0, "{nop_before:?} {xparents_before:?}");
        assert!(nop_before.open_watches == 0.0 && xparents_before.open_watches == 0.0, "{nop_before:?} {xparents_before:?}");
        establish(&server, "XUnrelated", "xunrelateds", &configmap_composition("xunrelateds", "XUnrelated"));
        server.kubectl(&["delete", "xrd", "xunrelateds.example.org", "--timeout=30s"]);
        std::thread::sleep(T_GC * 2 + Duration::from_secs(1));
        assert_eq!(nop(), nop_before, "requests about NopResources after their teardown");
        // The unrelated XRD shares example.org's discovery; XParents' own traffic must not move.
        let xparents_after = xparents();
        assert_eq!(
            (xparents_after.lists_and_watches, xparents_after.open_watches),
            (xparents_before.lists_and_watches, 0.0),
            "requests about XParents after their teardown"
        );
        // Nothing watches the gone kinds; no controller of the XRD runs; nothing went wrong.
        let live = watches(&server);
        assert!(!live.iter().any(|(_, k)| k.contains("nop.crossplane.io") || k.contains("example.org")), "{live:?}");
        let metrics = server.kubectl(&["get", "--raw", "/metrics"]);
        assert!(!metrics.contains("oxplane_controllers_running{controller=\"composite/xparents.example.org\"}"));
        let events = server.kubectl(&["get", "events", "-A", "--field-selector", "type=Warning", "-o", "json"]);
        assert!(!events.contains("cannot stop"), "{events}");
        assert_no_bad_logs(&server);
    }
}

/// WS-03: provider and XRD deleted in the same second, in both orders, several times.
#[test]
fn ws03_concurrent_teardown_is_clean() {
    for round in 0..3 {
        let server = start();
        establish(&server, "XParent", "xparents", &composition("xparents", "XParent", None));
        server.apply(&xr("XParent", "p1", "a"));
        within(T_REACT, "p1 Ready", || ready(&server, "xparent", "p1"));
        server.kubectl(&["delete", "xparent", "p1", "--timeout=60s"]);
        let (first, second) = if round % 2 == 0 { (["provider", "provider-nop"], ["xrd", "xparents.example.org"]) } else { (["xrd", "xparents.example.org"], ["provider", "provider-nop"]) };
        server.kubectl(&["delete", first[0], first[1], "--wait=false"]);
        server.kubectl(&["delete", second[0], second[1], "--wait=false"]);
        within(T_DEL, "both gone with their CRDs", || {
            server.get(&["crd", "nopresources.nop.crossplane.io"]).is_none() && server.get(&["crd", "xparents.example.org"]).is_none()
        });
        assert_no_bad_logs(&server);
    }
}

#[test]
fn ws04_a_composed_kind_that_goes_away_is_named_and_recovers_without_restart() {
    let server = start();
    establish(&server, "XParent", "xparents", &composition("xparents", "XParent", None));
    establish(&server, "XOther", "xothers", &configmap_composition("xothers", "XOther"));
    server.apply(&xr("XParent", "p1", "a"));
    within(T_REACT, "p1 Ready", || ready(&server, "xparent", "p1"));

    // The kind's ManagedResourceDefinition would apply its CRD again at once: paused, it
    // leaves the kind gone.
    server.kubectl(&["annotate", "mrd", "nopresources.nop.crossplane.io", "crossplane.io/paused=true"]);
    server.kubectl(&["delete", "crd", "nopresources.nop.crossplane.io", "--timeout=60s"]);
    within(T_REACT, "p1 to name the missing kind", || {
        server.get(&["xparent", "p1"]).is_some_and(|p| {
            condition(&p, "Synced").is_some_and(|c| {
                c["status"] == "False"
                    && c["reason"] == "ReconcileError"
                    && c["message"].as_str().unwrap().contains("nop.crossplane.io/v1alpha1, Kind=NopResource is not served (CRD not found)")
            })
        })
    });
    let described = server.kubectl(&["describe", "xparent", "p1"]);
    assert!(described.contains("Warning") && described.contains("is not served (CRD not found)"), "{described}");
    // Other composites keep working.
    server.apply(&xr("XOther", "o1", "x"));
    within(T_REACT, "another XRD's XR still reconciles", || server.get(&["xother", "o1"]).is_some_and(|o| is_true(&o, "Synced")));

    // Unpaused, the MRD applies its CRD again.
    server.kubectl(&["annotate", "mrd", "nopresources.nop.crossplane.io", "crossplane.io/paused-"]);
    within(T_REACT * 2, "p1 recomposed and Ready", || ready(&server, "xparent", "p1"));
    let p1 = server.get(&["xparent", "p1"]).unwrap();
    let nop = composed_by(&server, p1["metadata"]["uid"].as_str().unwrap())[0]["metadata"]["name"].as_str().unwrap().to_string();
    server.kubectl(&["patch", "nopresource", &nop, "--type=merge", "-p", r#"{"spec":{"forProvider":{"fields":{"label":"drifted"}}}}"#]);
    within(T_REACT, "drift detection works again", || server.get(&["nopresource", &nop]).unwrap()["spec"]["forProvider"]["fields"]["label"] == "a");
    assert_no_bad_logs(&server);
}

/// WS-07: stopping is total and bounded — an XRD's controller and all of its watches go as
/// soon as its deletion finishes, with nothing to fail on the way (removing a subscription is
/// a map removal: there is no failure to inject).
#[test]
fn ws07_stopping_an_xrd_controller_is_total_and_bounded() {
    let server = start();
    establish(&server, "XA", "xas", &composition("xas", "XA", None));
    server.apply(&xr("XA", "a1", "a"));
    within(T_REACT, "a1 Ready", || ready(&server, "xa", "a1"));
    let started = Instant::now();
    server.kubectl(&["delete", "xrd", "xas.example.org", "--timeout=30s"]);
    assert!(started.elapsed() < T_DEL, "the XRD deletion took {:?}", started.elapsed());
    within(Duration::from_secs(5), "the controller and its watches gone", || {
        let metrics = server.kubectl(&["get", "--raw", "/metrics"]);
        !metrics.contains("oxplane_controllers_running{controller=\"composite/xas.example.org\"}") && !watches(&server).iter().any(|(c, _)| c == "composite/xas.example.org")
    });
    let events = server.kubectl(&["get", "events", "-A", "--field-selector", "type=Warning", "-o", "name"]);
    assert!(events.trim().is_empty(), "{events}");
}

/// The watch circuit breaker: a fight over a composed resource (someone keeps changing a field
/// the composite owns, the composite keeps putting it back) opens the composite's circuit, which
/// it reports as `Responsive=False/WatchCircuitOpen` naming the resource. While open, a change
/// is still seen: it wakes the composite at the next probe instead of being dropped. Once the
/// cooldown passes, the circuit closes and says so with no event needed.
#[test]
fn a_fight_over_a_composed_resource_opens_the_circuit_without_losing_the_last_change() {
    let server = start_with(&[
        "--circuit-breaker-burst",
        "15",
        "--circuit-breaker-refill-rate",
        "0.5",
        "--circuit-breaker-cooldown",
        "30",
        "--circuit-breaker-probe-interval",
        "2",
    ]);
    establish(&server, "XParent", "xparents", &composition("xparents", "XParent", None));
    server.apply(&xr("XParent", "p1", "a"));
    within(T_REACT, "p1 Ready", || ready(&server, "xparent", "p1"));
    let p1 = server.get(&["xparent", "p1"]).unwrap();
    assert_eq!(condition(&p1, "Responsive").unwrap()["reason"], "WatchCircuitClosed");
    let nop = composed_by(&server, p1["metadata"]["uid"].as_str().unwrap())[0]["metadata"]["name"].as_str().unwrap().to_string();
    let drift = |value: &str| {
        let patch = format!(r#"{{"spec":{{"forProvider":{{"fields":{{"label":"{value}"}}}}}}}}"#);
        server.kubectl(&["patch", "nopresource", &nop, "--type=merge", "-p", &patch]);
    };
    let label = || server.get(&["nopresource", &nop]).unwrap()["spec"]["forProvider"]["fields"]["label"].as_str().unwrap().to_string();

    for round in 0..30 {
        drift(&format!("fight-{round}"));
    }
    let message = format!("Too many watch events from NopResource/{nop}. Allowing events periodically.");
    within(T_REACT, "p1 to report the open circuit", || {
        server.get(&["xparent", "p1"]).is_some_and(|p| {
            condition(&p, "Responsive").is_some_and(|c| c["status"] == "False" && c["reason"] == "WatchCircuitOpen" && c["message"] == message.as_str())
        })
    });
    let metrics = server.kubectl(&["get", "--raw", "/metrics"]);
    assert!(metrics.contains("oxplane_circuit_breaker_opens_total{controller=\"composite/xparents.example.org\"} "), "{metrics}");
    assert!(metrics.contains("oxplane_circuit_breaker_events_total{controller=\"composite/xparents.example.org\",result=\"dropped\"} "), "{metrics}");

    // One more change while the circuit is open, and nothing after it: it is put back at the
    // next probe all the same.
    drift("the-last-word");
    within(T_REACT, "the last drift reverted while the circuit is open", || label() == "a");
    let p1 = server.get(&["xparent", "p1"]).unwrap();
    assert_eq!(condition(&p1, "Responsive").unwrap()["reason"], "WatchCircuitOpen", "still open when the drift was reverted");

    // The cooldown passes with no further event, and the composite says its circuit closed.
    within(Duration::from_secs(30) + T_REACT, "the circuit to close", || {
        server.get(&["xparent", "p1"]).is_some_and(|p| condition(&p, "Responsive").is_some_and(|c| c["status"] == "True" && c["reason"] == "WatchCircuitClosed"))
    });
    assert!(ready(&server, "xparent", "p1"));
    drift("after");
    within(T_REACT, "drift reverted at once with the circuit closed", || label() == "a");
}
