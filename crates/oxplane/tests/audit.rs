//! The audit log of `oxplane up --audit-log-path --audit-policy-file` through a kubectl
//! session: every request is an `audit.k8s.io/v1` Event line with its user, verb, object and
//! response code, at the level the policy gives it; a Secret's body is never logged.

use crate::support;

use serde_json::Value;
use support::Server;

const POLICY: &str = r#"apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: None
    nonResourceURLs: ["/healthz*", "/readyz*", "/livez*", "/version"]
  - level: Metadata
    verbs: ["get", "list", "watch"]
  - level: RequestResponse
"#;

fn events(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn the_audit_log_records_every_request_of_a_kubectl_session() {
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("audit.log");
    let policy = logs.path().join("policy.yaml");
    std::fs::write(&policy, POLICY).unwrap();
    let server = Server::start_with(&["--audit-log-path", log.to_str().unwrap(), "--audit-policy-file", policy.to_str().unwrap()]);
    let before = events(&log).len();

    server.kubectl(&["create", "configmap", "audited", "--from-literal=k=v"]);
    server.kubectl(&["get", "configmap", "audited", "-o", "name"]);
    server.kubectl(&["create", "secret", "generic", "hidden", "--from-literal=password=hunter2-not-in-the-log"]);
    let refused = server.kubectl_fails(&["get", "configmap", "missing"], "");
    assert!(refused.contains("NotFound"), "{refused}");
    server.kubectl(&["delete", "configmap", "audited"]);

    let all = events(&log);
    let session: Vec<&Value> = all[before..].iter().collect();
    assert!(session.iter().all(|e| e["kind"] == "Event" && e["apiVersion"] == "audit.k8s.io/v1" && e["stage"] == "ResponseComplete"));
    assert!(session.iter().all(|e| e["user"]["username"] == "oxplane-admin" && e["sourceIPs"][0] == "127.0.0.1"), "{session:?}");
    assert!(session.iter().all(|e| e["userAgent"].as_str().is_some_and(|a| a.starts_with("kubectl"))), "{session:?}");
    assert!(session.iter().all(|e| e["requestURI"] != "/healthz"));
    let find = |verb: &str, resource: &str, name: &str| {
        session
            .iter()
            .find(|e| e["verb"] == verb && e["objectRef"]["resource"] == resource && e["objectRef"]["name"].as_str().unwrap_or_default() == name)
            .unwrap_or_else(|| panic!("no {verb} of {resource}/{name} in {session:#?}"))
    };
    let create = find("create", "configmaps", "");
    assert_eq!(create["responseStatus"]["code"], 201);
    assert_eq!(create["level"], "RequestResponse");
    assert_eq!(create["objectRef"]["namespace"], "default");
    assert_eq!(create["requestObject"]["data"]["k"], "v");
    assert_eq!(create["responseObject"]["metadata"]["name"], "audited");
    let get = find("get", "configmaps", "audited");
    assert_eq!(get["level"], "Metadata");
    assert_eq!(get["responseStatus"]["code"], 200);
    assert!(get.get("responseObject").is_none());
    let missing = find("get", "configmaps", "missing");
    assert_eq!(missing["responseStatus"]["code"], 404);
    assert_eq!(missing["responseStatus"]["reason"], "NotFound");
    assert_eq!(find("delete", "configmaps", "audited")["responseStatus"]["code"], 200);
    // kubectl's discovery reads are audited too.
    assert!(session.iter().any(|e| e["verb"] == "get" && e.get("objectRef").is_none() && e["requestURI"].as_str().unwrap().starts_with("/api")));
    // The Secret: Metadata only, and its value nowhere in the log.
    let secret = find("create", "secrets", "");
    assert_eq!(secret["level"], "Metadata");
    assert!(secret.get("requestObject").is_none() && secret.get("responseObject").is_none());
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains("hunter2") && !text.contains("aHVudGVyMi"), "a Secret's value reached the audit log");
    // Every line has its audit ID and timestamps; the IDs are the responses' Audit-Id.
    assert!(session.iter().all(|e| e["auditID"].as_str().is_some_and(|id| id.len() == 36)
        && e["requestReceivedTimestamp"].as_str().is_some_and(|t| t.ends_with('Z'))
        && e["stageTimestamp"].as_str().is_some()));
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&log).unwrap().permissions().mode() & 0o777, 0o600);
}
