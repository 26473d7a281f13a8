//! ServiceAccount tokens and user kubeconfigs end to end: `kubectl create token` gives a JWT
//! that authenticates as the ServiceAccount (RBAC applies), for its audiences only, until it
//! expires or the ServiceAccount is deleted; forged, malformed and expired tokens get a 401
//! naming the cause; a legacy token Secret is filled in and dies with its ServiceAccount; the
//! issuer's discovery document and keys are served; `oxplane kubeconfig` writes a working
//! client-certificate kubeconfig; the Python client authenticates with each credential.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use oxplane_apiserver::authn::service_accounts::{self, Claims, KubernetesClaim, ObjectClaim, SigningKey};
use serde_json::{Value, json};

use crate::support::Server;

/// Runs kubectl as the holder of `token`: (success, stdout, stderr).
fn kubectl_as(server: &Server, token: &str, args: &[&str]) -> (bool, String, String) {
    let mut all = vec!["--token", token];
    all.extend_from_slice(args);
    let out = server.kubectl_command(&all).output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn whoami(server: &Server, token: &str) -> Value {
    let (ok, stdout, stderr) = kubectl_as(server, token, &["auth", "whoami", "-o", "json"]);
    assert!(ok, "{stderr}");
    serde_json::from_str::<Value>(&stdout).unwrap()["status"]["userInfo"].clone()
}

fn claims_of(token: &str) -> Value {
    let payload = token.split('.').nth(1).unwrap();
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap()
}

/// The server's signing key, read as an admin can read it (a Secret in kube-system).
fn signing_key(server: &Server) -> SigningKey {
    let encoded = server.kubectl(&["get", "secret", "oxplane-service-account-key", "-n", "kube-system", "-o", "jsonpath={.data.key\\.pem}"]);
    SigningKey::from_pem(&String::from_utf8(STANDARD.decode(encoded.trim()).unwrap()).unwrap()).unwrap()
}

fn refused(server: &Server, token: &str) -> String {
    let (ok, _, stderr) = kubectl_as(server, token, &["get", "configmaps", "-n", "team-a"]);
    assert!(!ok, "the token was accepted");
    stderr
}

fn wait_for(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn service_account_tokens_authenticate_until_expired_or_deleted() {
    let server = Server::start();
    server.kubectl(&["create", "namespace", "team-a"]);
    server.kubectl(&["create", "serviceaccount", "robot", "-n", "team-a"]);
    server.kubectl(&["create", "rolebinding", "robot-view", "--clusterrole=view", "--serviceaccount=team-a:robot", "-n", "team-a"]);
    let uid = server.kubectl(&["get", "sa", "robot", "-n", "team-a", "-o", "jsonpath={.metadata.uid}"]);

    // kubectl create token: a TokenRequest (protobuf) on serviceaccounts/robot/token.
    let token = server.kubectl(&["create", "token", "robot", "-n", "team-a", "--duration=20m"]).trim().to_string();
    let claims = claims_of(&token);
    assert_eq!(claims["iss"], service_accounts::DEFAULT_ISSUER);
    assert_eq!(claims["sub"], "system:serviceaccount:team-a:robot");
    assert_eq!(claims["aud"], json!([service_accounts::DEFAULT_ISSUER]));
    assert_eq!(claims["kubernetes.io"]["serviceaccount"], json!({"name": "robot", "uid": uid}));
    assert_eq!(claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(), 1200);

    let user = whoami(&server, &token);
    assert_eq!(user["username"], "system:serviceaccount:team-a:robot");
    assert_eq!(user["uid"], json!(uid));
    assert_eq!(user["groups"], json!(["system:serviceaccounts", "system:serviceaccounts:team-a", "system:authenticated"]));

    // RBAC applies to the ServiceAccount: view in team-a, nothing more.
    server.kubectl(&["create", "configmap", "settings", "--from-literal=a=b", "-n", "team-a"]);
    let (ok, stdout, stderr) = kubectl_as(&server, &token, &["get", "configmaps", "-n", "team-a", "-o", "name"]);
    assert!(ok && stdout.contains("configmap/settings"), "{stdout}{stderr}");
    let (ok, _, stderr) = kubectl_as(&server, &token, &["create", "configmap", "x", "-n", "team-a"]);
    assert!(!ok);
    assert!(
        stderr.contains("configmaps is forbidden: User \"system:serviceaccount:team-a:robot\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"team-a\""),
        "{stderr}"
    );

    // The issuer's discovery document and keys, readable by every ServiceAccount.
    let (ok, discovery, stderr) = kubectl_as(&server, &token, &["get", "--raw", "/.well-known/openid-configuration"]);
    assert!(ok, "{stderr}");
    let discovery: Value = serde_json::from_str(&discovery).unwrap();
    assert_eq!(discovery["issuer"], service_accounts::DEFAULT_ISSUER);
    assert_eq!(discovery["jwks_uri"], json!(format!("{}/openid/v1/jwks", server.server_url())));
    assert_eq!(discovery["id_token_signing_alg_values_supported"], json!(["ES256"]));
    let (ok, jwks, _) = kubectl_as(&server, &token, &["get", "--raw", "/openid/v1/jwks"]);
    assert!(ok);
    let jwks: Value = serde_json::from_str(&jwks).unwrap();
    let header: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(token.split('.').next().unwrap()).unwrap()).unwrap();
    assert_eq!(jwks["keys"][0]["kid"], header["kid"]);
    assert_eq!((jwks["keys"][0]["kty"].as_str(), jwks["keys"][0]["alg"].as_str()), (Some("EC"), Some("ES256")));

    // TokenReview: the token's user, and the reason another is refused.
    let review = |token: &str, audiences: Value| -> Value {
        let body = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token, "audiences": audiences}});
        let (code, _, out) = server.curl("POST", "/apis/authentication.k8s.io/v1/tokenreviews", Some(&body.to_string()));
        assert_eq!(code, 201, "{out}");
        serde_json::from_str::<Value>(&out).unwrap()["status"].clone()
    };
    let status = review(&token, json!([]));
    assert_eq!(status["authenticated"], true);
    assert_eq!(status["user"]["username"], "system:serviceaccount:team-a:robot");
    assert_eq!(status["audiences"], json!([service_accounts::DEFAULT_ISSUER]));

    // Another audience: good for that audience's TokenReview, not for this API.
    let vault = server.kubectl(&["create", "token", "robot", "-n", "team-a", "--audience=vault"]).trim().to_string();
    assert!(refused(&server, &vault).contains("Unauthorized: the service account token's audiences [\"vault\"] include none of"));
    assert_eq!(review(&vault, json!(["vault"]))["audiences"], json!(["vault"]));
    assert!(review(&vault, json!([]))["error"].as_str().unwrap().contains("include none of"));

    // Bad requests: too short, an unknown ServiceAccount, a Pod binding.
    let stderr = server.kubectl_fails(&["create", "token", "robot", "-n", "team-a", "--duration=1m"], "");
    assert!(stderr.contains("spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes"), "{stderr}");
    let stderr = server.kubectl_fails(&["create", "token", "nobody", "-n", "team-a"], "");
    assert!(stderr.contains("serviceaccounts \"nobody\" not found"), "{stderr}");

    // Expired, forged and malformed tokens: 401 with the cause.
    let key = signing_key(&server);
    let now = jiff::Timestamp::now().as_second();
    let made = |key: &SigningKey, exp: i64| {
        let claims = Claims {
            iss: service_accounts::DEFAULT_ISSUER.into(),
            sub: "system:serviceaccount:team-a:robot".into(),
            aud: vec![service_accounts::DEFAULT_ISSUER.into()],
            exp: Some(exp),
            iat: Some(exp - 3600),
            kubernetes: Some(KubernetesClaim {
                namespace: "team-a".into(),
                serviceaccount: ObjectClaim { name: "robot".into(), uid: uid.clone() },
                secret: None,
            }),
            ..Claims::default()
        };
        service_accounts::sign(key, &claims).unwrap()
    };
    // The key from the store signs tokens the server takes: the test's tokens are real ones.
    assert_eq!(whoami(&server, &made(&key, now + 600))["username"], "system:serviceaccount:team-a:robot");
    let stderr = refused(&server, &made(&key, now - 60));
    assert!(stderr.contains("error: You must be logged in to the server (Unauthorized: the service account token expired at"), "{stderr}");
    let (other, _) = SigningKey::generate().unwrap();
    let stderr = refused(&server, &made(&other, now + 600));
    assert!(stderr.contains("Unauthorized: the service account token's signature is not valid"), "{stderr}");
    let stderr = refused(&server, "eyJhbGciOiJIUzI1NiJ9.e30.c2ln");
    assert!(stderr.contains("Unauthorized: the token is not a valid service account token"), "{stderr}");
    let stderr = refused(&server, "a-guessed-token");
    assert!(stderr.contains("(Unauthorized)"), "{stderr}");

    // The ServiceAccount deleted, then made again: the token names the old one's uid.
    server.kubectl(&["delete", "serviceaccount", "robot", "-n", "team-a"]);
    let stderr = refused(&server, &token);
    assert!(stderr.contains("Unauthorized: the service account token is no longer valid: the ServiceAccount team-a/robot has been deleted"), "{stderr}");
    server.kubectl(&["create", "serviceaccount", "robot", "-n", "team-a"]);
    let stderr = refused(&server, &token);
    assert!(stderr.contains(&format!("(uid {uid}) has been deleted; the one of that name now has uid")), "{stderr}");
    let fresh = server.kubectl(&["create", "token", "robot", "-n", "team-a"]).trim().to_string();
    assert_eq!(whoami(&server, &fresh)["username"], "system:serviceaccount:team-a:robot");
}

#[test]
fn legacy_token_secrets_are_filled_and_die_with_their_service_account() {
    let server = Server::start();
    server.kubectl(&["create", "namespace", "team-a"]);
    server.kubectl(&["create", "serviceaccount", "builder", "-n", "team-a"]);
    server.apply(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: builder-token\n  namespace: team-a\n  annotations:\n    kubernetes.io/service-account.name: builder\ntype: kubernetes.io/service-account-token\n",
    );
    let mut secret = Value::Null;
    wait_for("the token Secret to be filled", || {
        secret = server.get(&["secret", "builder-token", "-n", "team-a"]).unwrap_or_default();
        secret["data"]["token"].is_string()
    });
    let decode = |key: &str| String::from_utf8(STANDARD.decode(secret["data"][key].as_str().unwrap()).unwrap()).unwrap();
    let token = decode("token");
    assert_eq!(decode("namespace"), "team-a");
    assert_eq!(decode("ca.crt"), std::fs::read_to_string(server.dir().join("pki/ca.crt")).unwrap());
    let uid = server.kubectl(&["get", "sa", "builder", "-n", "team-a", "-o", "jsonpath={.metadata.uid}"]);
    assert_eq!(secret["metadata"]["annotations"]["kubernetes.io/service-account.uid"], json!(uid));
    assert_eq!(claims_of(&token)["iss"], service_accounts::LEGACY_ISSUER);
    assert_eq!(whoami(&server, &token)["username"], "system:serviceaccount:team-a:builder");

    // Its ServiceAccount deleted, the Secret goes, and the token with it.
    server.kubectl(&["delete", "serviceaccount", "builder", "-n", "team-a"]);
    wait_for("the token Secret to be deleted", || server.get(&["secret", "builder-token", "-n", "team-a"]).is_none());
    let (ok, _, stderr) = kubectl_as(&server, &token, &["auth", "whoami"]);
    assert!(!ok && stderr.contains("Unauthorized: the service account token is no longer valid: the Secret team-a/builder-token has been deleted"), "{stderr}");
}

/// Runs `oxplane kubeconfig` on the server's data directory; returns the kubeconfig's path.
fn oxplane_kubeconfig(server: &Server, user: &str, groups: &[&str]) -> PathBuf {
    let path = server.dir().join(format!("kubeconfig-{user}"));
    let mut command = Command::new(env!("CARGO_BIN_EXE_oxplane"));
    command.args(["kubeconfig", "--user", user, "--data-dir"]).arg(server.dir()).arg("--output").arg(&path);
    for group in groups {
        command.args(["--group", group]);
    }
    let out = command.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    path
}

fn kubectl_with(server: &Server, kubeconfig: &Path, args: &[&str]) -> (bool, String, String) {
    let out = server.kubectl_command(args).env("KUBECONFIG", kubeconfig).output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn oxplane_kubeconfig_and_every_credential_through_the_python_client() {
    let server = Server::start();
    server.kubectl(&["create", "namespace", "team-a"]);
    server.kubectl(&["create", "rolebinding", "team-view", "--clusterrole=view", "--group=app-team", "-n", "team-a"]);
    server.kubectl(&["create", "configmap", "settings", "--from-literal=a=b", "-n", "team-a"]);

    let bob = oxplane_kubeconfig(&server, "bob", &["app-team"]);
    let (ok, stdout, stderr) = kubectl_with(&server, &bob, &["auth", "whoami", "-o", "json"]);
    assert!(ok, "{stderr}");
    let user: Value = serde_json::from_str::<Value>(&stdout).unwrap()["status"]["userInfo"].clone();
    assert_eq!(user["username"], "bob");
    assert_eq!(user["groups"], json!(["app-team", "system:authenticated"]));
    let (ok, stdout, _) = kubectl_with(&server, &bob, &["get", "configmaps", "-n", "team-a", "-o", "name"]);
    assert!(ok && stdout.contains("configmap/settings"), "{stdout}");
    let (ok, _, stderr) = kubectl_with(&server, &bob, &["delete", "configmap", "settings", "-n", "team-a"]);
    assert!(!ok && stderr.contains("User \"bob\" cannot delete resource \"configmaps\""), "{stderr}");

    // Bad input: no user; a data directory without a CA.
    let out = Command::new(env!("CARGO_BIN_EXE_oxplane")).args(["kubeconfig", "--user", "", "--data-dir"]).arg(server.dir()).output().unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("--user must name a user"));
    let empty = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_oxplane")).args(["kubeconfig", "--user", "x", "--data-dir"]).arg(empty.path()).output().unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("reading the server's CA"), "{}", String::from_utf8_lossy(&out.stderr));

    // The Python client with each credential: admin token, client certificate, bound and
    // legacy ServiceAccount tokens.
    server.kubectl(&["create", "serviceaccount", "robot", "-n", "team-a"]);
    server.kubectl(&["create", "rolebinding", "robot-view", "--clusterrole=view", "--serviceaccount=team-a:robot", "-n", "team-a"]);
    server.apply(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: robot-token\n  namespace: team-a\n  annotations:\n    kubernetes.io/service-account.name: robot\ntype: kubernetes.io/service-account-token\n",
    );
    let mut legacy = String::new();
    wait_for("the legacy token", || {
        legacy = server.kubectl(&["get", "secret", "robot-token", "-n", "team-a", "-o", "jsonpath={.data.token}"]);
        !legacy.trim().is_empty()
    });
    let legacy = String::from_utf8(STANDARD.decode(legacy.trim()).unwrap()).unwrap();
    let bound = server.kubectl(&["create", "token", "robot", "-n", "team-a"]).trim().to_string();
    let token_kubeconfig = |name: &str, token: &str| -> PathBuf {
        let mut config: Value = serde_json::from_str(&std::fs::read_to_string(server.kubeconfig()).unwrap()).unwrap();
        config["users"][0]["user"] = json!({"token": token});
        let path = server.dir().join(format!("kubeconfig-{name}"));
        std::fs::write(&path, config.to_string()).unwrap();
        path
    };
    let cases = [
        (server.kubeconfig(), "oxplane-admin"),
        (bob, "bob"),
        (token_kubeconfig("bound", &bound), "system:serviceaccount:team-a:robot"),
        (token_kubeconfig("legacy", &legacy), "system:serviceaccount:team-a:robot"),
    ];
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = root.join(".venv/bin/python");
    assert!(python.exists(), "{} is missing: run ./scripts/test, which installs the Python client", python.display());
    for (kubeconfig, username) in cases {
        let out = Command::new(&python).arg(root.join("tests/python/credentials_check.py")).arg(&kubeconfig).arg(username).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success() && stdout.contains("CREDENTIALS-OK"), "{username}:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    }
}
