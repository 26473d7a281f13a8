//! RBAC end to end with the real kubectl: alice, with a client certificate (group `app-team`)
//! and a RoleBinding to `edit` in `team-a` made by `kubectl create rolebinding` (a protobuf
//! body), may write there and is refused, in Kubernetes' words, in `team-b` and at the cluster
//! scope; `kubectl auth can-i` (and `--list`, `--as`) answers the same. Crossplane's chart
//! roles give users bound to them what Crossplane's chart gives, Operations included.

use std::process::Command;

use oxplane_apiserver::server::{kubeconfig, tls};

use crate::support::Server;

/// Writes a kubeconfig for `user` in `groups` (a fresh client certificate) beside the admin's.
fn kubeconfig_for(server: &Server, user: &str, groups: &[&str]) -> std::path::PathBuf {
    let admin: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(server.kubeconfig()).unwrap()).unwrap();
    let url = admin["clusters"][0]["cluster"]["server"].as_str().unwrap().to_string();
    let ca = std::fs::read_to_string(server.dir().join("pki/ca.crt")).unwrap();
    let groups: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
    let (cert, key) = tls::issue_client_certificate(server.dir(), user, &groups).unwrap();
    let path = server.dir().join(format!("kubeconfig-{user}"));
    std::fs::write(&path, kubeconfig::render_with_certificate(&url, &ca, user, &cert, &key)).unwrap();
    path
}

/// Runs kubectl with `kubeconfig`: (success, stdout, stderr).
fn kubectl_with(server: &Server, kubeconfig: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let mut command: Command = server.kubectl_command(args);
    command.env("KUBECONFIG", kubeconfig);
    let out = command.output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn alice_edits_her_namespace_and_is_refused_elsewhere() {
    let server = Server::start();
    server.kubectl(&["create", "namespace", "team-a"]);
    server.kubectl(&["create", "namespace", "team-b"]);
    server.kubectl(&["create", "rolebinding", "alice-edit", "--clusterrole=edit", "--user=alice", "-n", "team-a"]);
    let alice = kubeconfig_for(&server, "alice", &["app-team"]);

    let (ok, _, stderr) = kubectl_with(&server, &alice, &["create", "configmap", "settings", "--from-literal=a=b", "-n", "team-a"]);
    assert!(ok, "{stderr}");
    let (ok, stdout, _) = kubectl_with(&server, &alice, &["get", "configmaps", "-n", "team-a", "-o", "name"]);
    assert!(ok && stdout.contains("configmap/settings"), "{stdout}");

    let (ok, _, stderr) = kubectl_with(&server, &alice, &["create", "configmap", "settings", "--from-literal=a=b", "-n", "team-b"]);
    assert!(!ok);
    assert!(
        stderr.contains("configmaps is forbidden: User \"alice\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"team-b\""),
        "{stderr}"
    );
    let (ok, _, stderr) = kubectl_with(&server, &alice, &["get", "namespaces"]);
    assert!(!ok);
    assert!(stderr.contains("Error from server (Forbidden): namespaces is forbidden: User \"alice\" cannot list resource \"namespaces\" in API group \"\" at the cluster scope"), "{stderr}");

    // kubectl auth can-i: a SelfSubjectAccessReview (protobuf) per question.
    let (ok, stdout, stderr) = kubectl_with(&server, &alice, &["auth", "can-i", "create", "configmaps", "-n", "team-a"]);
    assert!(ok && stdout.trim() == "yes", "{stdout}{stderr}");
    let (ok, stdout, _) = kubectl_with(&server, &alice, &["auth", "can-i", "create", "configmaps", "-n", "team-b"]);
    assert!(!ok && stdout.trim() == "no", "{stdout}");
    let (_, whoami, stderr) = kubectl_with(&server, &alice, &["auth", "whoami", "-o", "json"]);
    assert!(whoami.contains("\"app-team\""), "{whoami}{stderr}");

    // --list, as alice herself and through the admin's impersonation, tells the same rules.
    let (ok, own, stderr) = kubectl_with(&server, &alice, &["auth", "can-i", "--list", "-n", "team-a"]);
    assert!(ok, "{stderr}");
    let as_alice = server.kubectl(&["auth", "can-i", "--list", "-n", "team-a", "--as", "alice", "--as-group", "app-team"]);
    assert_eq!(own, as_alice);
    let configmaps = own.lines().find(|l| l.starts_with("configmaps ")).unwrap_or_else(|| panic!("{own}"));
    assert!(configmaps.contains("create") && configmaps.contains("delete"), "{configmaps}");
    assert!(own.lines().any(|l| l.starts_with("selfsubjectaccessreviews.authorization.k8s.io")), "{own}");
    let out = server.kubectl_command(&["auth", "can-i", "create", "configmaps", "-n", "team-b", "--as", "alice"]).output().unwrap();
    assert_eq!((out.status.success(), String::from_utf8_lossy(&out.stdout).trim()), (false, "no"));
}

/// The chart's roles, asked with `kubectl auth can-i` as a user bound to each (Crossplane's
/// `rbac-manager-managed-clusterroles.yaml` and `clusterrole.yaml`): admins and editors may do
/// everything with Crossplane's kinds, Operations included, viewers only read them, browsers
/// see only compositions and XRDs, and the core's own `crossplane` role may do everything.
#[test]
fn crossplanes_roles_cover_operations_as_its_chart_does() {
    let server = Server::start_with(&["--enable-operations"]);
    let roles = ["crossplane-admin", "crossplane-edit", "crossplane-view", "crossplane-browse", "crossplane"];
    for role in roles {
        server.kubectl(&["create", "clusterrolebinding", &format!("{role}-user"), &format!("--clusterrole={role}"), &format!("--user={role}-user")]);
    }
    let can = |verb: &str, resource: &str, user: &str| {
        let out = server.kubectl_command(&["auth", "can-i", verb, resource, "--as", user]).output().unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stdout).trim().to_string(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    // The core installs the roles as it starts, and the aggregation controller fills them.
    crate::support::within(std::time::Duration::from_secs(60), "the chart's roles to be aggregated", || {
        can("create", "operations.ops.crossplane.io", "crossplane-admin-user").0 && can("list", "compositions.apiextensions.crossplane.io", "crossplane-browse-user").0
    });
    // (verb, resource, [admin, edit, view, browse, crossplane])
    let table: &[(&str, &str, [bool; 5])] = &[
        ("create", "operations.ops.crossplane.io", [true, true, false, false, true]),
        ("delete", "cronoperations.ops.crossplane.io", [true, true, false, false, true]),
        ("update", "watchoperations.ops.crossplane.io", [true, true, false, false, true]),
        ("list", "operations.ops.crossplane.io", [true, true, true, false, true]),
        ("watch", "watchoperations.ops.crossplane.io", [true, true, true, false, true]),
        ("get", "cronoperations.ops.crossplane.io", [true, true, true, false, true]),
        ("create", "usages.protection.crossplane.io", [true, true, false, false, true]),
        ("list", "providers.pkg.crossplane.io", [true, true, true, false, true]),
        ("list", "compositions.apiextensions.crossplane.io", [true, true, true, true, true]),
        ("create", "compositions.apiextensions.crossplane.io", [true, true, false, false, true]),
        ("create", "clusterrolebindings.rbac.authorization.k8s.io", [true, false, false, false, false]),
    ];
    let mut wrong = Vec::new();
    for (verb, resource, expected) in table {
        for (role, allowed) in roles.iter().zip(expected) {
            let (ok, answer, stderr) = can(verb, resource, &format!("{role}-user"));
            let want = if *allowed { "yes" } else { "no" };
            if answer != want || ok != *allowed {
                wrong.push(format!("{role}: can-i {verb} {resource}: {answer} (want {want}) {stderr}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
