//! ManagedResourceDefinitions and activation policies, end to end with the real kubectl: a
//! provider's managed kinds are MRDs; a `safe-start` provider's start `Inactive`, with no CRD,
//! until a policy's glob activates one (its CRD appears, its resources reconcile, the others
//! stay inactive); the default policy activates everything, and `--default-activations ''`
//! creates none; ProviderConfig kinds stay plain CRDs; an MRD says why it has no CRD (blocked,
//! paused, terminating); the default policy is made from the flag once and then left alone.

use crate::support::{Server, condition, table, within};

use std::time::Duration;

use serde_json::Value;

const T: Duration = Duration::from_secs(60);

/// provider-nop v0.5.0: a namespaced `NopResource` and a `ClusterNopResource`, declared
/// `safe-start` through the annotation a built-in provider's capabilities are read from.
const SAFE_START_NOP: &str = "apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-nop
  annotations:
    pkg.oxplane.io/capabilities: safe-start
spec:
  package: xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.5.0
";

const NOP_RESOURCE: &str = "apiVersion: nop.crossplane.io/v1alpha1
kind: NopResource
metadata:
  name: first
  namespace: default
spec:
  forProvider:
    conditionAfter:
    - time: 0s
      conditionType: Ready
      conditionStatus: \"True\"
";

const NOPS: &str = "nopresources.nop.crossplane.io";
const CLUSTER_NOPS: &str = "clusternopresources.nop.crossplane.io";

/// The `Established` condition of an MRD: (status, reason).
fn established(server: &Server, name: &str) -> Option<(String, String)> {
    let mrd = server.get(&["mrd", name])?;
    let c = condition(&mrd, "Established")?;
    Some((c["status"].as_str()?.to_string(), c["reason"].as_str()?.to_string()))
}

fn crd_exists(server: &Server, name: &str) -> bool {
    server.get(&["crd", name]).is_some()
}

/// Event reasons and messages recorded on an object.
fn events_of(server: &Server, name: &str) -> Vec<(String, String)> {
    let events = server.get(&["events", "-A", "--field-selector", &format!("involvedObject.name={name}")]).unwrap_or_default();
    events["items"].as_array().into_iter().flatten().map(|e| (e["reason"].as_str().unwrap_or_default().to_string(), e["message"].as_str().unwrap_or_default().to_string())).collect()
}

#[test]
fn a_safe_start_provider_serves_only_what_a_policy_activates() {
    let server = Server::start_with(&["--default-activations", ""]);
    server.apply(SAFE_START_NOP);
    server.kubectl(&["wait", "--for=condition=Healthy", "provider/provider-nop", "--timeout=60s"]);

    // No default policy was asked for, so nothing activates the provider's kinds.
    assert_eq!(server.kubectl(&["get", "mrap", "-o", "name"]).trim(), "", "--default-activations '' creates no policy");
    within(T, "both MRDs reported inactive", || {
        [NOPS, CLUSTER_NOPS].iter().all(|n| established(&server, n) == Some(("False".into(), "InactiveManagedResource".into())))
    });
    let rows = table(&server, &["get", "mrd"]);
    assert_eq!(rows[0], ["NAME", "STATE", "ESTABLISHED", "AGE"], "{rows:?}");
    let row = |rows: &[Vec<String>], name: &str| rows.iter().find(|r| r[0] == name).cloned().unwrap_or_else(|| panic!("no row {name}: {rows:?}"));
    assert_eq!(row(&rows, NOPS)[1..3], ["Inactive", "False"], "{rows:?}");
    assert_eq!(row(&rows, CLUSTER_NOPS)[1..3], ["Inactive", "False"], "{rows:?}");
    assert!(!crd_exists(&server, NOPS) && !crd_exists(&server, CLUSTER_NOPS), "an inactive MRD has no CRD");
    let revision = &server.get(&["providerrevisions"]).unwrap()["items"][0];
    assert_eq!(revision["status"]["capabilities"], serde_json::json!(["safe-start"]), "{revision}");
    let refs: Vec<(&str, &str)> =
        revision["status"]["objectRefs"].as_array().unwrap().iter().map(|r| (r["kind"].as_str().unwrap(), r["name"].as_str().unwrap())).collect();
    assert!(refs.contains(&("ManagedResourceDefinition", NOPS)) && refs.contains(&("ManagedResourceDefinition", CLUSTER_NOPS)), "{refs:?}");
    let mrd = server.get(&["mrd", NOPS]).unwrap();
    let owners: Vec<&str> = mrd["metadata"]["ownerReferences"].as_array().unwrap().iter().filter(|o| o["controller"] == true).map(|o| o["kind"].as_str().unwrap()).collect();
    assert_eq!(owners, ["ProviderRevision"], "the revision controls its MRDs: {mrd}");

    // A policy naming one kind by a glob activates that one only.
    server.apply("apiVersion: apiextensions.crossplane.io/v1alpha1\nkind: ManagedResourceActivationPolicy\nmetadata:\n  name: nops\nspec:\n  activate:\n  - 'nopresources.*'\n");
    within(T, "the matched MRD established", || established(&server, NOPS) == Some(("True".into(), "EstablishedManagedResource".into())));
    let crd = server.get(&["crd", NOPS, "--show-managed-fields"]).unwrap();
    let owner_kinds: Vec<&str> = crd["metadata"]["ownerReferences"].as_array().unwrap().iter().map(|o| o["kind"].as_str().unwrap()).collect();
    assert!(owner_kinds.contains(&"ManagedResourceDefinition"), "the CRD is owned by its MRD: {crd}");
    assert!(crd["metadata"]["managedFields"].as_array().unwrap().iter().any(|f| f["manager"] == "apiextensions.crossplane.io/managed"), "{crd}");
    within(T, "the policy's status", || {
        server.get(&["mrap", "nops"]).is_some_and(|p| {
            p["status"]["activated"] == serde_json::json!([NOPS]) && condition(&p, "Healthy").is_some_and(|c| c["status"] == "True" && c["reason"] == "Running")
        })
    });
    assert!(
        events_of(&server, "nops").contains(&("ActivateManagedResourceDefinition".into(), "Successfully activated ManagedResourceDefinition".into())),
        "{:?}",
        events_of(&server, "nops")
    );
    assert!(events_of(&server, NOPS).iter().any(|(reason, _)| reason == "ApplyCustomResourceDefinition"), "{:?}", events_of(&server, NOPS));
    assert_eq!(established(&server, CLUSTER_NOPS), Some(("False".into(), "InactiveManagedResource".into())));
    assert!(!crd_exists(&server, CLUSTER_NOPS), "what no policy matches stays without a CRD");
    let rows = table(&server, &["get", "mrds"]);
    assert_eq!(row(&rows, NOPS)[1..3], ["Active", "True"], "{rows:?}");

    // The provider's controller picks the new kind up: its resources reconcile.
    server.apply(NOP_RESOURCE);
    server.kubectl(&["wait", "--for=condition=Ready", "nopresource/first", "-n", "default", "--timeout=60s"]);

    // Activation is one-way: the state cannot go back (so no controller can deactivate it
    // either), and deleting the policy leaves the kind served.
    let refused = server.kubectl_fails(&["patch", "mrd", NOPS, "--type=merge", "-p", r#"{"spec":{"state":"Inactive"}}"#], "");
    assert!(refused.contains("state cannot be changed once it becomes Active"), "{refused}");
    server.kubectl(&["delete", "mrap", "nops"]);
    std::thread::sleep(Duration::from_secs(1));
    assert!(crd_exists(&server, NOPS));
}

#[test]
fn the_default_policy_activates_every_provider_kind() {
    let server = Server::start();
    let policy = server.get(&["mrap", "crossplane-default-activation-policy"]).expect("the default policy");
    assert_eq!(policy["spec"]["activate"], serde_json::json!(["*"]));
    let rows = table(&server, &["get", "mrap"]);
    assert_eq!(rows[0], ["NAME", "AGE"], "{rows:?}");

    // provider-sql without safe-start: MRDs created Active; its ProviderConfig stays a CRD.
    server.apply(SAFE_START_NOP);
    server.apply("apiVersion: pkg.crossplane.io/v1\nkind: Provider\nmetadata:\n  name: provider-sql\nspec:\n  package: xpkg.crossplane.io/crossplane-contrib/provider-sql:v0.13.0\n");
    server.kubectl(&["wait", "--for=condition=Healthy", "provider/provider-nop", "provider/provider-sql", "--timeout=60s"]);
    let databases = "databases.postgresql.sql.crossplane.io";
    within(T, "every MRD established", || [NOPS, CLUSTER_NOPS, databases].iter().all(|n| established(&server, n) == Some(("True".into(), "EstablishedManagedResource".into()))));
    let mrds: Vec<Value> = server.get(&["mrd"]).unwrap()["items"].as_array().unwrap().clone();
    assert!(mrds.iter().all(|m| m["spec"]["state"] == "Active"), "every MRD active: created so, or activated by the default policy");
    let config = "providerconfigs.postgresql.sql.crossplane.io";
    assert!(server.get(&["mrd", config]).is_none(), "a ProviderConfig kind is no MRD");
    assert!(crd_exists(&server, config), "a ProviderConfig kind is a plain CRD");
    // The safe-start provider's kinds were activated by the default policy, which lists them.
    let policy = server.get(&["mrap", "crossplane-default-activation-policy"]).unwrap();
    let activated: Vec<&str> = policy["status"]["activated"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    let mut sorted = activated.clone();
    sorted.sort();
    assert_eq!(activated, sorted, "status.activated is sorted");
    assert!(activated.contains(&NOPS) && activated.contains(&CLUSTER_NOPS), "{activated:?}");
    assert!(!activated.contains(&config));

    // Uninstalling removes the MRDs and their CRDs.
    server.kubectl(&["delete", "provider", "provider-nop", "--timeout=60s"]);
    within(T, "the provider's MRDs and CRDs gone", || {
        [NOPS, CLUSTER_NOPS].iter().all(|n| server.get(&["mrd", n]).is_none() && !crd_exists(&server, n))
    });
}

/// An MRD of `<plural>.example.org` written by hand (no provider behind it).
fn custom_mrd(plural: &str, kind: &str, metadata: &str, versions: &str) -> String {
    format!(
        "apiVersion: apiextensions.crossplane.io/v1alpha1\nkind: ManagedResourceDefinition\nmetadata:\n  name: {plural}.example.org\n{metadata}spec:\n  group: example.org\n  names: {{kind: {kind}, plural: {plural}}}\n  scope: Cluster\n  state: Active\n  versions:\n{versions}"
    )
}

const ONE_VERSION: &str = "  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}\n";

#[test]
fn an_mrd_says_why_it_has_no_crd() {
    let server = Server::start();

    // A CRD the API server refuses (two storage versions) blocks the MRD, naming where to look.
    let two_storage = format!("{ONE_VERSION}  - {{name: v2, served: true, storage: true, schema: {{openAPIV3Schema: {{type: object}}}}}}\n");
    server.apply(&custom_mrd("widgets", "Widget", "", &two_storage));
    within(T, "the blocked MRD", || {
        server.get(&["mrd", "widgets.example.org"]).and_then(|m| condition(&m, "Established")).is_some_and(|c| {
            c["status"] == "False" && c["reason"] == "BlockedManagedResourceActivationPolicy" && c["message"] == "unable to apply CustomResourceDefinition, see events"
        })
    });
    let events = events_of(&server, "widgets.example.org");
    assert!(events.iter().any(|(reason, message)| reason == "ApplyCustomResourceDefinition" && message.contains("cannot apply CustomResourceDefinition")), "{events:?}");
    assert!(!crd_exists(&server, "widgets.example.org"));

    // A paused MRD is left alone, active or not; unpaused, it gets its CRD.
    server.apply(&custom_mrd("gadgets", "Gadget", "  annotations:\n    crossplane.io/paused: \"true\"\n", ONE_VERSION));
    within(T, "the pause reported", || events_of(&server, "gadgets.example.org").contains(&("ReconciliationPaused".into(), "Reconciliation is paused via the pause annotation".into())));
    assert!(!crd_exists(&server, "gadgets.example.org"), "a paused MRD creates nothing");
    server.kubectl(&["annotate", "mrd", "gadgets.example.org", "crossplane.io/paused-"]);
    within(T, "the unpaused MRD established", || established(&server, "gadgets.example.org") == Some(("True".into(), "EstablishedManagedResource".into())));
    assert!(crd_exists(&server, "gadgets.example.org"));

    // While a finalizer holds it, a deleted MRD is terminating; once gone, its CRD goes too.
    server.kubectl(&["patch", "mrd", "gadgets.example.org", "--type=merge", "-p", r#"{"metadata":{"finalizers":["example.org/hold"]}}"#]);
    server.kubectl(&["delete", "mrd", "gadgets.example.org", "--wait=false"]);
    within(T, "the terminating MRD", || established(&server, "gadgets.example.org") == Some(("False".into(), "TerminatingManagedResource".into())));
    server.kubectl(&["patch", "mrd", "gadgets.example.org", "--type=merge", "-p", r#"{"metadata":{"finalizers":null}}"#]);
    within(T, "the CRD collected with its MRD", || server.get(&["mrd", "gadgets.example.org"]).is_none() && !crd_exists(&server, "gadgets.example.org"));
}

#[test]
fn the_default_policy_is_made_from_the_flag_once_and_then_left_to_its_users() {
    let mut server = Server::start_with(&["--default-activations", "nopresources.*,clusternop*"]);
    let activate = |server: &Server| server.get(&["mrap", "crossplane-default-activation-policy"]).map(|p| p["spec"]["activate"].clone());
    assert_eq!(activate(&server), Some(serde_json::json!(["nopresources.*", "clusternop*"])));
    // Edited by its users, it is kept as they left it across restarts, whatever the flag says.
    server.kubectl(&["patch", "mrap", "crossplane-default-activation-policy", "--type=merge", "-p", r#"{"spec":{"activate":["things.example.org"]}}"#]);
    server.set_args(&[]);
    server.restart();
    assert_eq!(activate(&server), Some(serde_json::json!(["things.example.org"])));
    // Deleted, it is made again at the next start from the flag of that start.
    server.kubectl(&["delete", "mrap", "crossplane-default-activation-policy"]);
    server.restart();
    assert_eq!(activate(&server), Some(serde_json::json!(["*"])));
}
