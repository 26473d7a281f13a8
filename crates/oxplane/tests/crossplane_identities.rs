//! Crossplane's identities end to end with the real kubectl: the core acts as the
//! ServiceAccount `crossplane-system/crossplane`, bound to the aggregated ClusterRole
//! `crossplane`, so composing a kind that role does not cover (a Namespace) leaves the XR with
//! Crossplane's `RoleBasedAccessControl` warning, until a ClusterRole labelled
//! `rbac.crossplane.io/aggregate-to-crossplane` grants it and the XR becomes Ready, with
//! nothing restarted. Each ProviderRevision gets its ServiceAccount, roles and binding from
//! the RBAC manager: the provider runs as that ServiceAccount, and the core composes its
//! managed kinds through the revision's `aggregate-to-edit` role.

use std::time::Duration;

use serde_json::Value;

use crate::support::{self, Server, within};

const CORE: &str = "system:serviceaccount:crossplane-system:crossplane";

const TEAMS: &str = r#"
apiVersion: pkg.crossplane.io/v1
kind: Function
metadata: {name: function-patch-and-transform}
spec: {package: xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform:v0.8.2}
---
apiVersion: apiextensions.crossplane.io/v2
kind: CompositeResourceDefinition
metadata: {name: xteams.identity.example.org}
spec:
  group: identity.example.org
  scope: Cluster
  names: {kind: XTeam, plural: xteams}
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
            properties:
              owner: {type: string}
---
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata: {name: xteams}
spec:
  compositeTypeRef: {apiVersion: identity.example.org/v1, kind: XTeam}
  mode: Pipeline
  pipeline:
  - step: namespace
    functionRef: {name: function-patch-and-transform}
    input:
      apiVersion: pt.fn.crossplane.io/v1beta1
      kind: Resources
      resources:
      - name: namespace
        base:
          apiVersion: v1
          kind: Namespace
          metadata:
            labels: {team: blue}
        readinessChecks:
        - type: None
"#;

/// What a user adds so Crossplane may compose Namespaces (Crossplane's documented way).
const GRANT: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: namespaces:aggregate-to-crossplane
  labels: {rbac.crossplane.io/aggregate-to-crossplane: "true"}
rules:
- apiGroups: [""]
  resources: [namespaces]
  verbs: ["*"]
"#;

/// The Warning events of `reason` about the object named `name`.
fn warnings(server: &Server, reason: &str, name: &str) -> Vec<String> {
    let events = server.get(&["events", "-A"]).unwrap_or_default();
    events["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["reason"] == reason && e["type"] == "Warning" && e["involvedObject"]["name"] == name)
        .filter_map(|e| e["message"].as_str().map(str::to_string))
        .collect()
}

/// `kubectl auth can-i VERB RESOURCE --as USER` (the admin impersonating): yes or no.
fn can(server: &Server, user: &str, verb: &str, resource: &str) -> bool {
    let out = server.kubectl_command(&["auth", "can-i", verb, resource, "--as", user]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim() == "yes"
}

#[test]
fn a_kind_crossplane_may_not_compose_warns_until_an_aggregated_role_grants_it() {
    let server = Server::start();
    // The chart's identity: the ServiceAccount, bound to the aggregated role.
    let account = server.get(&["serviceaccount", "crossplane", "-n", "crossplane-system"]).expect("the core's ServiceAccount");
    assert_eq!(account["metadata"]["name"], "crossplane");
    let binding = server.get(&["clusterrolebinding", "crossplane"]).expect("the core's binding");
    assert_eq!(binding["roleRef"]["name"], "crossplane");
    assert_eq!(binding["subjects"][0]["name"], "crossplane");
    assert_eq!(binding["subjects"][0]["namespace"], "crossplane-system");
    let role = server.get(&["clusterrole", "crossplane"]).unwrap();
    assert_eq!(role["aggregationRule"]["clusterRoleSelectors"][0]["matchLabels"]["rbac.crossplane.io/aggregate-to-crossplane"], "true");
    assert!(can(&server, CORE, "create", "compositions.apiextensions.crossplane.io"));
    assert!(can(&server, CORE, "create", "configmaps"));
    assert!(!can(&server, CORE, "create", "namespaces"));

    server.kubectl_stdin(&["apply", "-f", "-"], TEAMS);
    server.kubectl(&["wait", "--for=condition=Established", "xrd/xteams.identity.example.org", "--timeout=60s"]);
    server.kubectl(&["wait", "--for=condition=Healthy", "function/function-patch-and-transform", "--timeout=60s"]);
    server.apply("apiVersion: identity.example.org/v1\nkind: XTeam\nmetadata: {name: blue}\nspec: {owner: alice}\n");

    let expected = format!("{CORE} is not allowed to [get, list, watch, create, update, patch, delete] resource namespaces/v1");
    within(Duration::from_secs(60), "the RoleBasedAccessControl warning on the XR", || warnings(&server, "RoleBasedAccessControl", "blue").contains(&expected));
    let compose = warnings(&server, "ComposeResources", "blue");
    assert!(
        compose.iter().any(|m| m.starts_with("cannot compose resources: cannot apply composed resource \"namespace\"")
            && m.contains(&format!("is forbidden: User \"{CORE}\" cannot patch resource \"namespaces\" in API group \"\""))),
        "{compose:?}"
    );
    let xr = server.get(&["xteam", "blue"]).unwrap();
    let synced = support::condition(&xr, "Synced").unwrap();
    assert_eq!((synced["status"].as_str(), synced["reason"].as_str()), (Some("False"), Some("ReconcileError")), "{synced}");
    assert_eq!(server.kubectl(&["get", "namespaces", "-l", "team=blue", "-o", "name"]).trim(), "");

    // Granted as Crossplane's documentation says: the XR gets there, nothing restarted.
    server.kubectl_stdin(&["apply", "-f", "-"], GRANT);
    within(Duration::from_secs(30), "the crossplane role to aggregate the grant", || can(&server, CORE, "create", "namespaces"));
    server.kubectl(&["wait", "--for=condition=Ready", "xteam/blue", "--timeout=90s"]);
    let namespaces = server.get(&["namespaces", "-l", "team=blue"]).unwrap();
    let items = namespaces["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{namespaces}");
    assert_eq!(items[0]["metadata"]["ownerReferences"][0]["name"], "blue");
}

/// The name of a Provider's current revision.
fn current_revision(server: &Server, provider: &str) -> String {
    let provider: Value = server.get(&["provider", provider]).unwrap();
    provider["status"]["currentRevision"].as_str().unwrap().to_string()
}

#[test]
fn providers_run_as_their_revisions_service_accounts_and_the_core_composes_through_their_roles() {
    let server = Server::start();
    let example = |file: &str| format!("{}/../../examples/getting-started/{file}", env!("CARGO_MANIFEST_DIR"));
    server.kubectl(&["apply", "-f", &example("00-provider.yaml"), "-f", &example("01-functions.yaml")]);
    server.kubectl(&["wait", "--for=condition=Healthy", "provider/provider-nop", "--timeout=60s"]);
    let revision = current_revision(&server, "provider-nop");
    let provider_user = format!("system:serviceaccount:crossplane-system:{revision}");

    let account = server.get(&["serviceaccount", &revision, "-n", "crossplane-system"]).expect("the provider's ServiceAccount");
    assert_eq!(account["metadata"]["ownerReferences"][0]["name"], revision);
    let role = |suffix: &str| server.get(&["clusterrole", &format!("crossplane:provider:{revision}:{suffix}")]).unwrap_or_else(|| panic!("{suffix}"));
    let edit = role("aggregate-to-edit");
    for label in ["crossplane", "admin", "edit"] {
        assert_eq!(edit["metadata"]["labels"][format!("rbac.crossplane.io/aggregate-to-{label}")], "true", "{edit}");
    }
    assert_eq!(role("aggregate-to-view")["metadata"]["labels"]["rbac.crossplane.io/aggregate-to-view"], "true");
    let system = role("system");
    assert_eq!(system["metadata"]["labels"]["rbac.crossplane.io/system"], revision.as_str());
    assert_eq!(system["metadata"]["ownerReferences"][0]["kind"], "ProviderRevision");
    let binding = server.get(&["clusterrolebinding", &format!("crossplane:provider:{revision}:system")]).unwrap();
    assert_eq!(binding["subjects"][0]["name"], revision.as_str());
    assert_eq!(binding["subjects"][0]["namespace"], "crossplane-system");
    within(Duration::from_secs(30), "the RBAC manager's events on the revision", || {
        let events = server.get(&["events", "-A"]).unwrap_or_default();
        let about: Vec<(String, String)> = events["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["involvedObject"]["name"] == revision.as_str())
            .map(|e| (e["reason"].as_str().unwrap_or_default().to_string(), e["message"].as_str().unwrap_or_default().to_string()))
            .collect();
        about.iter().any(|(r, m)| r == "ApplyClusterRoles" && m.starts_with("Applied RBAC ClusterRoles: ") && m.contains(&format!("crossplane:provider:{revision}:system")))
            && about.iter().any(|(r, m)| {
                r == "BindClusterRole" && *m == format!("Bound system ClusterRole \"crossplane:provider:{revision}:system\" to provider ServiceAccount(s): crossplane-system/{revision}")
            })
    });

    // What each identity may do, as kubectl asks the API server.
    assert!(can(&server, &provider_user, "create", "nopresources.nop.crossplane.io"));
    assert!(can(&server, &provider_user, "update", "nopresources.nop.crossplane.io/status"));
    assert!(can(&server, &provider_user, "create", "secrets"));
    assert!(!can(&server, &provider_user, "delete", "nopresources.nop.crossplane.io"));
    assert!(!can(&server, &provider_user, "create", "namespaces"));
    assert!(!can(&server, &provider_user, "create", "compositions.apiextensions.crossplane.io"));
    assert!(can(&server, CORE, "delete", "nopresources.nop.crossplane.io"));
    assert!(!can(&server, "bob", "get", "nopresources.nop.crossplane.io"));

    // The core composes NopResources through that role; the provider (as its account) makes them Ready.
    server.kubectl(&["apply", "-f", &example("02-xrd.yaml")]);
    server.kubectl(&["wait", "--for=condition=Established", "xrd/apps.example.org", "--timeout=60s"]);
    server.kubectl(&["apply", "-f", &example("03-composition.yaml"), "-f", &example("04-app.yaml")]);
    server.kubectl(&["wait", "--for=condition=Ready", "app/my-app", "--timeout=90s"]);
    assert_eq!(support::composed_nops(&server, "my-app").len(), 2);
    assert!(warnings(&server, "RoleBasedAccessControl", "my-app").is_empty());

    // The revision's account, roles and binding go with it.
    server.kubectl(&["delete", "app", "my-app", "--timeout=60s"]);
    server.kubectl(&["delete", "provider", "provider-nop", "--timeout=90s"]);
    let system_name = format!("crossplane:provider:{revision}:system");
    within(Duration::from_secs(60), "the revision's ServiceAccount, roles and binding to be deleted with it", || {
        server.get(&["serviceaccount", &revision, "-n", "crossplane-system"]).is_none()
            && server.get(&["clusterrole", &system_name]).is_none()
            && server.get(&["clusterrole", &format!("crossplane:provider:{revision}:aggregate-to-edit")]).is_none()
            && server.get(&["clusterrolebinding", &system_name]).is_none()
    });
    assert!(!can(&server, CORE, "get", "nopresources.nop.crossplane.io"));
}
