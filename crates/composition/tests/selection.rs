//! Composition and revision selection on an in-process server, as Crossplane's XR reconciler
//! does it (crossplane-spec §2.4, §3.2, §3.3 steps 7-9): the XRD's `enforcedCompositionRef`
//! wins over the XR's own reference; its `defaultCompositionRef` serves XRs that name no
//! Composition and have no selector; `Manual` pins an XR to its revision until its reference
//! is changed while `Automatic` follows the newest; a Composition changed back to an earlier
//! spec renumbers that revision as the newest instead of making another.

use crate::support;

use oxplane_runtime::kinds::Kind;
use oxplane_runtime::object;
use serde_json::{Value, json};
use support::{Plane, compositions, config_maps, is_true, revisions};

/// A v2 namespaced XRD of `kind` in example.org, with extra `spec` lines (indented two spaces).
fn xrd(kind: &str, plural: &str, extra: &str) -> String {
    format!(
        "apiVersion: apiextensions.crossplane.io/v2
kind: CompositeResourceDefinition
metadata:
  name: {plural}.example.org
spec:
  group: example.org
  names: {{kind: {kind}, plural: {plural}}}
{extra}
  versions:
  - name: v1
    served: true
    referenceable: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
"
    )
}

/// A Composition of `kind` composing one ConfigMap whose `data.from` is `from`.
fn composition(name: &str, kind: &str, from: &str, labels: &str) -> String {
    format!(
        "apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: {name}
  labels: {{{labels}}}
spec:
  compositeTypeRef: {{apiVersion: example.org/v1, kind: {kind}}}
  mode: Pipeline
  pipeline:
  - step: compose
    functionRef: {{name: function-patch-and-transform}}
    input:
      apiVersion: pt.fn.crossplane.io/v1beta1
      kind: Resources
      resources:
      - name: settings
        base: {{apiVersion: v1, kind: ConfigMap, data: {{from: {from}}}}}
  - step: ready
    functionRef: {{name: function-auto-ready}}
"
    )
}

/// Creates an XR of `kind` named `name` in `default` with the given `spec.crossplane`.
async fn create_xr(plane: &Plane, kind: &str, name: &str, crossplane: Option<Value>) -> Kind {
    let mut xr = json!({"apiVersion": "example.org/v1", "kind": kind, "metadata": {"name": name, "namespace": "default"}, "spec": {}});
    if let Some(crossplane) = crossplane {
        xr["spec"]["crossplane"] = crossplane;
    }
    let served = plane.kind_of(&xr).await;
    plane.runtime.kube.create(&served, &xr).await.unwrap();
    served
}

/// Waits until the XR is Ready, and returns it.
async fn ready(plane: &Plane, kind: &Kind, name: &str) -> Value {
    plane.wait_object(kind, Some("default"), name, &format!("{name} Ready"), |x| is_true(x, "Ready") && is_true(x, "Synced")).await
}

/// `data.from` of the ConfigMap an XR composed.
async fn composed_from(plane: &Plane, xr: &Value) -> String {
    let uid = object::uid(xr).unwrap();
    let cms = plane.runtime.kube.list(&config_maps(), Some("default"), None).await.unwrap();
    let mine: Vec<&Value> = cms.iter().filter(|c| object::controller_uid(c) == Some(uid)).collect();
    assert_eq!(mine.len(), 1, "{mine:?}");
    mine[0]["data"]["from"].as_str().unwrap().to_string()
}

/// Events of an object with one of these reasons, as `(reason, message)`.
async fn selection_events(plane: &Plane, xr: &Value) -> Vec<(String, String)> {
    let events = plane.events_of(xr).await;
    events.into_iter().filter(|(_, r, _)| r == "CompositionSelection" || r == "SelectComposition").map(|(_, r, m)| (r, m)).collect()
}

fn composition_ref(xr: &Value) -> &Value {
    &xr["spec"]["crossplane"]["compositionRef"]["name"]
}

#[tokio::test]
async fn the_xrd_enforces_or_defaults_the_composition() {
    let plane = Plane::start().await;
    plane.apply_yaml(&xrd("XEnforced", "xenforceds", "  enforcedCompositionRef: {name: enforced-a}")).await;
    plane.apply_yaml(&composition("enforced-a", "XEnforced", "a", "")).await;
    plane.apply_yaml(&composition("enforced-b", "XEnforced", "b", "")).await;
    plane.apply_yaml(&xrd("XDefaulted", "xdefaulteds", "  defaultCompositionRef: {name: default-b}")).await;
    plane.apply_yaml(&composition("default-a", "XDefaulted", "a", "which: a")).await;
    plane.apply_yaml(&composition("default-b", "XDefaulted", "b", "which: b")).await;

    // Enforced: the XR's own choice is overridden, at once and again after it is edited back.
    let enforced = create_xr(&plane, "XEnforced", "e1", Some(json!({"compositionRef": {"name": "enforced-b"}}))).await;
    let e1 = ready(&plane, &enforced, "e1").await;
    assert_eq!(composition_ref(&e1), "enforced-a");
    assert_eq!(composed_from(&plane, &e1).await, "a");
    plane.wait_event(&e1, "Normal", "SelectComposition", "Successfully selected composition: enforced-a").await;
    let events = selection_events(&plane, &e1).await;
    assert!(events.contains(&("CompositionSelection".into(), "Enforced composition has been selected".into())), "{events:?}");
    plane.runtime.kube.merge_patch(&enforced, Some("default"), "e1", &json!({"spec": {"crossplane": {"compositionRef": {"name": "enforced-b"}}}})).await.unwrap();
    let e1 = plane.wait_object(&enforced, Some("default"), "e1", "the enforced composition back", |x| composition_ref(x) == "enforced-a").await;
    assert_eq!(composed_from(&plane, &e1).await, "a");

    // Default: only for an XR that names no Composition and has no selector.
    let defaulted = create_xr(&plane, "XDefaulted", "d1", None).await;
    create_xr(&plane, "XDefaulted", "d2", Some(json!({"compositionRef": {"name": "default-a"}}))).await;
    create_xr(&plane, "XDefaulted", "d3", Some(json!({"compositionSelector": {"matchLabels": {"which": "a"}}}))).await;
    let d1 = ready(&plane, &defaulted, "d1").await;
    assert_eq!(composition_ref(&d1), "default-b");
    assert_eq!(composed_from(&plane, &d1).await, "b");
    plane.wait_event(&d1, "Normal", "SelectComposition", "Successfully selected composition: default-b").await;
    let events = selection_events(&plane, &d1).await;
    assert!(events.contains(&("CompositionSelection".into(), "Default composition has been selected".into())), "{events:?}");
    let d2 = ready(&plane, &defaulted, "d2").await;
    assert_eq!(composition_ref(&d2), "default-a", "the XR's own reference stands");
    assert_eq!(composed_from(&plane, &d2).await, "a");
    let d3 = ready(&plane, &defaulted, "d3").await;
    assert_eq!(composition_ref(&d3), "default-a", "the XR's selector is used, not the default");
    plane.wait_event(&d3, "Normal", "SelectComposition", "Successfully selected composition: default-a").await;
    for xr in [&d2, &d3] {
        let events = selection_events(&plane, xr).await;
        assert!(!events.iter().any(|(r, _)| r == "CompositionSelection"), "no default applied: {events:?}");
    }
}

/// The revisions of Composition `pinned`, as `(name, number)` sorted by number.
async fn pinned_revisions(plane: &Plane) -> Vec<(String, i64)> {
    let list = plane.runtime.kube.list(&revisions(), None, Some("crossplane.io/composition-name=pinned")).await.unwrap();
    let mut out: Vec<(String, i64)> = list.iter().map(|r| (object::name(r).unwrap().to_string(), r["spec"]["revision"].as_i64().unwrap())).collect();
    out.sort_by_key(|(_, n)| *n);
    out
}

/// Sets `data.from` of the Composition `pinned`.
async fn set_from(plane: &Plane, from: &str) {
    let mut composition = plane.runtime.kube.get(&compositions(), None, "pinned").await.unwrap().unwrap();
    composition["spec"]["pipeline"][0]["input"]["resources"][0]["base"]["data"]["from"] = json!(from);
    plane.runtime.kube.replace(&compositions(), &composition).await.unwrap();
}

fn revision_ref(xr: &Value) -> String {
    xr["spec"]["crossplane"]["compositionRevisionRef"]["name"].as_str().unwrap_or_default().to_string()
}

#[tokio::test]
async fn manual_pins_the_revision_automatic_follows_and_a_revert_renumbers() {
    let plane = Plane::start().await;
    plane.apply_yaml(&xrd("XPinned", "xpinneds", "  defaultCompositionUpdatePolicy: Manual")).await;
    plane.apply_yaml(&composition("pinned", "XPinned", "one", "team: core")).await;
    let first = plane.wait("the first revision", async |p| pinned_revisions(p).await.pop()).await;
    assert_eq!(first.1, 1, "revisions start at 1");

    // The revision: named after the hash it is labelled with, labelled with the Composition's labels.
    let revision = plane.runtime.kube.get(&revisions(), None, &first.0).await.unwrap().unwrap();
    let hash = object::label(&revision, "crossplane.io/composition-hash").unwrap().to_string();
    assert_eq!(hash.len(), 63);
    assert!(hash.chars().all(|c| c.is_ascii_hexdigit()), "{hash}");
    assert_eq!(first.0, format!("pinned-{}", &hash[..7]));
    assert_eq!(object::label(&revision, "team"), Some("core"));
    let composition = plane.runtime.kube.get(&compositions(), None, "pinned").await.unwrap().unwrap();
    assert_eq!(object::controller_uid(&revision), object::uid(&composition));
    assert_eq!(revision["spec"]["pipeline"], composition["spec"]["pipeline"]);
    let created = plane
        .wait("the CreateRevision event", async |p| {
            p.event_objects(&composition).await.into_iter().find(|e| e["reason"] == "CreateRevision" && e["message"] == "Created new revision")
        })
        .await;
    assert_eq!(created["type"], "Normal");
    assert_eq!(created["metadata"]["annotations"]["revision"], "1", "{created}");

    // `manual` takes the XRD's default policy; `automatic` says Automatic itself.
    let kind = create_xr(&plane, "XPinned", "manual", None).await;
    create_xr(&plane, "XPinned", "automatic", Some(json!({"compositionUpdatePolicy": "Automatic"}))).await;
    let manual = ready(&plane, &kind, "manual").await;
    let automatic = ready(&plane, &kind, "automatic").await;
    assert_eq!(manual["spec"]["crossplane"]["compositionUpdatePolicy"], "Manual", "the XRD's default");
    assert_eq!(revision_ref(&manual), first.0);
    assert_eq!(revision_ref(&automatic), first.0);

    // A new revision: Automatic follows it, Manual stays where it is.
    set_from(&plane, "two").await;
    let second = plane.wait("the second revision", async |p| pinned_revisions(p).await.get(1).cloned()).await;
    assert_eq!(second.1, 2);
    let automatic = plane.wait_object(&kind, Some("default"), "automatic", "automatic on revision 2", |x| revision_ref(x) == second.0).await;
    plane.wait("automatic recomposed", async |p| (composed_from(p, &automatic).await == "two").then_some(())).await;
    // The revision woke both XRs; give the Manual one time to (wrongly) move.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let manual = plane.runtime.kube.get(&kind, Some("default"), "manual").await.unwrap().unwrap();
    assert_eq!(revision_ref(&manual), first.0, "Manual is pinned");
    assert_eq!(composed_from(&plane, &manual).await, "one");

    // Moving the Manual XR's reference is what updates it.
    plane.runtime.kube.merge_patch(&kind, Some("default"), "manual", &json!({"spec": {"crossplane": {"compositionRevisionRef": {"name": second.0}}}})).await.unwrap();
    plane.wait("manual recomposed", async |p| (composed_from(p, &manual).await == "two").then_some(())).await;
    let manual = ready(&plane, &kind, "manual").await;
    assert_eq!(revision_ref(&manual), second.0);

    // Back to the first spec: no third revision, the first one renumbered as the newest.
    set_from(&plane, "one").await;
    let renumbered = plane
        .wait("the first revision renumbered", async |p| {
            let revisions = pinned_revisions(p).await;
            (revisions.last().map(|(_, n)| *n) == Some(3)).then_some(revisions)
        })
        .await;
    assert_eq!(renumbered, vec![(second.0.clone(), 2), (first.0.clone(), 3)]);
    let automatic = plane.wait_object(&kind, Some("default"), "automatic", "automatic back on the first revision", |x| revision_ref(x) == first.0).await;
    plane.wait("automatic recomposed again", async |p| (composed_from(p, &automatic).await == "one").then_some(())).await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let manual = plane.runtime.kube.get(&kind, Some("default"), "manual").await.unwrap().unwrap();
    assert_eq!(revision_ref(&manual), second.0, "Manual is still pinned");
    assert_eq!(composed_from(&plane, &manual).await, "two");
}
