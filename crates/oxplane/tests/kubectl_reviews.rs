//! The review kinds through the real kubectl: discovery lists TokenReview, SelfSubjectReview,
//! SubjectAccessReview, SelfSubjectAccessReview, LocalSubjectAccessReview and
//! SelfSubjectRulesReview with the verb `create` alone, so `kubectl create -f` sends each to
//! its handler and prints the answer; reading one is refused as kube-apiserver refuses it; a
//! ServiceAccount token's holder runs `kubectl auth whoami` and `kubectl auth can-i --list`.

use serde_json::Value;

use crate::support::Server;

/// `kubectl create -f - -o json` of `yaml`, as the holder of `token` when given.
fn create(server: &Server, yaml: &str, extra: &[&str]) -> Value {
    let mut args = vec!["create", "-f", "-", "-o", "json"];
    args.extend_from_slice(extra);
    serde_json::from_str(&server.kubectl_stdin(&args, yaml)).unwrap()
}

#[test]
fn review_kinds_are_created_with_kubectl_and_answered() {
    let server = Server::start();
    server.kubectl(&["create", "namespace", "team-a"]);
    server.kubectl(&["create", "serviceaccount", "robot", "-n", "team-a"]);
    server.kubectl(&["create", "rolebinding", "robot-edit", "--clusterrole=edit", "--serviceaccount=team-a:robot", "--user=alice", "-n", "team-a"]);

    // Discovery: every review kind, create only, at its scope.
    let resources = server.kubectl(&["api-resources", "--api-group=authorization.k8s.io", "-o", "wide"]);
    for (name, namespaced, kind) in [
        ("localsubjectaccessreviews", "true", "LocalSubjectAccessReview"),
        ("selfsubjectaccessreviews", "false", "SelfSubjectAccessReview"),
        ("selfsubjectrulesreviews", "false", "SelfSubjectRulesReview"),
        ("subjectaccessreviews", "false", "SubjectAccessReview"),
    ] {
        let line = resources.lines().find(|l| l.starts_with(&format!("{name} "))).unwrap_or_else(|| panic!("{name} missing:\n{resources}"));
        let words: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(words[1..], ["authorization.k8s.io/v1", namespaced, kind, "create"], "{line}");
    }
    let resources = server.kubectl(&["api-resources", "--api-group=authentication.k8s.io", "-o", "wide"]);
    for (name, kind) in [("selfsubjectreviews", "SelfSubjectReview"), ("tokenreviews", "TokenReview")] {
        let line = resources.lines().find(|l| l.starts_with(&format!("{name} "))).unwrap_or_else(|| panic!("{name} missing:\n{resources}"));
        let words: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(words[1..], ["authentication.k8s.io/v1", "false", kind, "create"], "{line}");
    }

    // TokenReview: a ServiceAccount token, then garbage.
    let token = server.kubectl(&["create", "token", "robot", "-n", "team-a"]).trim().to_string();
    let review = format!("apiVersion: authentication.k8s.io/v1\nkind: TokenReview\nspec:\n  token: {token}\n");
    let answer = create(&server, &review, &[]);
    assert_eq!(answer["kind"], "TokenReview");
    assert_eq!(answer["status"]["authenticated"], true, "{answer}");
    assert_eq!(answer["status"]["user"]["username"], "system:serviceaccount:team-a:robot");
    let answer = create(&server, "apiVersion: authentication.k8s.io/v1\nkind: TokenReview\nspec:\n  token: not-a-token\n", &[]);
    assert_eq!(answer["status"]["authenticated"], Value::Null, "{answer}");
    assert!(answer["status"]["error"].is_string(), "{answer}");
    // Printed as kubectl prints a created object without a name.
    let printed = server.kubectl_stdin(&["create", "-f", "-"], &review);
    assert!(printed.starts_with("tokenreview.authentication.k8s.io/"), "{printed}");

    // SelfSubjectReview: who the admin is.
    let answer = create(&server, "apiVersion: authentication.k8s.io/v1\nkind: SelfSubjectReview\n", &[]);
    assert_eq!(answer["status"]["userInfo"]["username"], "oxplane-admin", "{answer}");

    // SubjectAccessReview: alice may create ConfigMaps in team-a, not in default.
    let sar = |namespace: &str| {
        format!(
            "apiVersion: authorization.k8s.io/v1\nkind: SubjectAccessReview\nspec:\n  user: alice\n  resourceAttributes:\n    verb: create\n    resource: configmaps\n    namespace: {namespace}\n"
        )
    };
    let answer = create(&server, &sar("team-a"), &[]);
    assert_eq!(answer["status"]["allowed"], true, "{answer}");
    let answer = create(&server, &sar("default"), &[]);
    assert_eq!(answer["status"]["allowed"], false, "{answer}");

    // LocalSubjectAccessReview: the namespace comes from -n.
    let local = "apiVersion: authorization.k8s.io/v1\nkind: LocalSubjectAccessReview\nspec:\n  user: alice\n  resourceAttributes:\n    verb: delete\n    resource: secrets\n    namespace: team-a\n";
    let answer = create(&server, local, &["-n", "team-a"]);
    assert_eq!(answer["status"]["allowed"], true, "{answer}");
    assert_eq!(answer["metadata"]["namespace"], "team-a", "{answer}");

    // The ServiceAccount asks about itself: SelfSubjectAccessReview and SelfSubjectRulesReview.
    let as_robot = ["--token", token.as_str()];
    let self_sar = "apiVersion: authorization.k8s.io/v1\nkind: SelfSubjectAccessReview\nspec:\n  resourceAttributes:\n    verb: list\n    resource: secrets\n    namespace: team-a\n";
    assert_eq!(create(&server, self_sar, &as_robot)["status"]["allowed"], true);
    let cluster_wide = self_sar.replace("    namespace: team-a\n", "");
    assert_eq!(create(&server, &cluster_wide, &as_robot)["status"]["allowed"], false);
    let rules = create(&server, "apiVersion: authorization.k8s.io/v1\nkind: SelfSubjectRulesReview\nspec:\n  namespace: team-a\n", &as_robot);
    let resource_rules = rules["status"]["resourceRules"].as_array().unwrap_or_else(|| panic!("{rules}"));
    assert!(resource_rules.iter().any(|r| r["resources"].as_array().is_some_and(|rs| rs.iter().any(|x| x == "configmaps"))), "{rules}");

    // kubectl auth as the ServiceAccount.
    let whoami: Value = serde_json::from_str(&server.kubectl(&["--token", &token, "auth", "whoami", "-o", "json"])).unwrap();
    assert_eq!(whoami["status"]["userInfo"]["username"], "system:serviceaccount:team-a:robot");
    let list = server.kubectl(&["--token", &token, "auth", "can-i", "--list", "-n", "team-a"]);
    let configmaps = list.lines().find(|l| l.starts_with("configmaps ")).unwrap_or_else(|| panic!("{list}"));
    assert!(configmaps.contains("create") && configmaps.contains("watch"), "{configmaps}");
    assert!(list.lines().any(|l| l.starts_with("tokenreviews.authentication.k8s.io") || l.starts_with("selfsubjectreviews.authentication.k8s.io")), "{list}");

    // Nothing is stored: reading a review kind is refused as kube-apiserver refuses it.
    let error = server.kubectl_fails(&["get", "tokenreviews"], "");
    assert!(error.contains("(MethodNotAllowed): the server does not allow this method on the requested resource"), "{error}");
}
