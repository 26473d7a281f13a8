//! The config and usage kinds of the built-in providers (provider-sql, provider-kubernetes,
//! provider-http; provider-nop has none) as kubectl sees them: what their published CRDs
//! refuse is refused with the same message, a valid object of each kind is accepted, and each
//! kind has the upstream scope, categories and columns.
//!
//! Checked against the providers' API types (crossplane-contrib, as published):
//! provider-sql `apis/{cluster,namespaced}/{postgresql,mysql}/v1alpha1/provider_types.go`,
//! provider-kubernetes `apis/{cluster,namespaced}/v1alpha1/types.go` and
//! `pkg/kube/config/config.go`, provider-http `apis/cluster/v1alpha1/providerconfig*_types.go`
//! and `apis/namespaced/v1alpha2/*providerconfig*_types.go`, with crossplane-runtime's
//! credential selectors and references.

use crate::crossplane_crds::{invalid, unexpected_answer};
use crate::support::Server;

use serde_json::Value;

fn object(api_version: &str, kind: &str, namespaced: bool, rest: &str) -> String {
    let namespace = if namespaced { "  namespace: default\n" } else { "" };
    format!("apiVersion: {api_version}\nkind: {kind}\nmetadata:\n  name: c\n{namespace}{rest}")
}

const PG: &str = "postgresql.sql.crossplane.io/v1alpha1";
const PG_M: &str = "postgresql.sql.m.crossplane.io/v1alpha1";
const MYSQL: &str = "mysql.sql.crossplane.io/v1alpha1";
const K8S: &str = "kubernetes.crossplane.io/v1alpha1";
const K8S_M: &str = "kubernetes.m.crossplane.io/v1alpha1";
const HTTP: &str = "http.crossplane.io/v1alpha1";
const HTTP_M: &str = "http.m.crossplane.io/v1alpha2";

/// (what, manifest, kubectl's lines) for objects the providers' CRDs refuse.
fn refused() -> Vec<(&'static str, String, Vec<String>)> {
    let pg_secret = "spec:\n  credentials:\n    source: PostgreSQLConnectionSecret\n    connectionSecretRef: {namespace: default, name: db}\n";
    let usage = |api_version: &str, kind: &str, namespaced: bool, rest: &str| object(api_version, kind, namespaced, rest);
    let config = |kind: &str, cause: &str| invalid(kind, "c", cause);
    vec![
        ("sql: a ProviderConfig without spec", object(PG, "ProviderConfig", false, ""), config("ProviderConfig", "spec: Required value")),
        (
            "sql: a credentials source of another provider",
            object(PG, "ProviderConfig", false, &pg_secret.replace("PostgreSQLConnectionSecret", "Secret")),
            config("ProviderConfig", r#"spec.credentials.source: Unsupported value: "Secret": supported values: "PostgreSQLConnectionSecret""#),
        ),
        (
            "sql: an unknown sslMode",
            object(PG, "ProviderConfig", false, &format!("{pg_secret}  sslMode: prefer\n")),
            config("ProviderConfig", r#"spec.sslMode: Unsupported value: "prefer": supported values: "disable", "require", "verify-ca", "verify-full""#),
        ),
        (
            "sql: a namespaced ProviderConfig's Secret without a name",
            object(PG_M, "ProviderConfig", true, "spec:\n  credentials:\n    source: PostgreSQLConnectionSecret\n    connectionSecretRef: {}\n"),
            config("ProviderConfig", "spec.credentials.connectionSecretRef.name: Required value"),
        ),
        (
            "sql: a namespaced ProviderConfig's Secret in another namespace",
            object(PG_M, "ProviderConfig", true, pg_secret),
            vec![r#"unknown field "spec.credentials.connectionSecretRef.namespace""#.to_string()],
        ),
        (
            "sql: a ClusterProviderConfig's Secret without a namespace",
            object(PG_M, "ClusterProviderConfig", false, "spec:\n  credentials:\n    source: PostgreSQLConnectionSecret\n    connectionSecretRef: {name: db}\n"),
            config("ClusterProviderConfig", "spec.credentials.connectionSecretRef.namespace: Required value"),
        ),
        (
            "sql: an unknown MySQL tls mode",
            object(MYSQL, "ProviderConfig", false, "spec:\n  credentials:\n    source: MySQLConnectionSecret\n    connectionSecretRef: {namespace: default, name: db}\n  tls: 'false'\n"),
            config("ProviderConfig", r#"spec.tls: Unsupported value: "false": supported values: "true", "skip-verify", "preferred", "custom""#),
        ),
        (
            "sql: a MySQL TLS Secret without a namespace",
            object(MYSQL, "ProviderConfig", false, "spec:\n  credentials:\n    source: MySQLConnectionSecret\n    connectionSecretRef: {namespace: default, name: db}\n  tls: custom\n  tlsConfig:\n    caCert:\n      secretRef: {name: db-ca, key: ca.crt}\n"),
            config("ProviderConfig", "spec.tlsConfig.caCert.secretRef.namespace: Required value"),
        ),
        (
            "sql: a usage without its resource",
            usage(PG, "ProviderConfigUsage", false, "providerConfigRef: {name: default}\n"),
            invalid("ProviderConfigUsage", "c", "resourceRef: Required value"),
        ),
        (
            "kubernetes: credentials without a source",
            object(K8S, "ProviderConfig", false, "spec:\n  credentials: {}\n"),
            config("ProviderConfig", "spec.credentials.source: Required value"),
        ),
        (
            "kubernetes: a secretRef without a key",
            object(K8S, "ProviderConfig", false, "spec:\n  credentials:\n    source: Secret\n    secretRef: {namespace: default, name: kubeconfig}\n"),
            config("ProviderConfig", "spec.credentials.secretRef.key: Required value"),
        ),
        (
            "kubernetes: an identity without a type",
            object(K8S, "ProviderConfig", false, "spec:\n  credentials: {source: InjectedIdentity}\n  identity: {source: InjectedIdentity}\n"),
            config("ProviderConfig", "spec.identity.type: Required value"),
        ),
        (
            "kubernetes: an unknown identity type",
            object(K8S, "ProviderConfig", false, "spec:\n  credentials: {source: InjectedIdentity}\n  identity: {type: Kerberos, source: InjectedIdentity}\n"),
            config("ProviderConfig", r#"spec.identity.type: Unsupported value: "Kerberos": supported values: "GoogleApplicationCredentials", "AzureServicePrincipalCredentials", "AzureWorkloadIdentityCredentials", "UpboundTokens", "AWSWebIdentityCredentials""#),
        ),
        (
            "kubernetes: an environment source without a variable",
            object(K8S_M, "ClusterProviderConfig", false, "spec:\n  credentials:\n    source: Environment\n    env: {}\n"),
            config("ClusterProviderConfig", "spec.credentials.env.name: Required value"),
        ),
        (
            "kubernetes: a namespaced usage whose reference has no kind",
            usage(K8S_M, "ProviderConfigUsage", true, "providerConfigRef: {name: default}\nresourceRef: {apiVersion: kubernetes.m.crossplane.io/v1alpha1, kind: Object, name: o}\n"),
            invalid("ProviderConfigUsage", "c", "providerConfigRef.kind: Required value"),
        ),
        ("http: a ProviderConfig without credentials", object(HTTP, "ProviderConfig", false, "spec: {}\n"), config("ProviderConfig", "spec.credentials: Required value")),
        (
            "http: an unknown credentials source",
            object(HTTP_M, "ClusterProviderConfig", false, "spec:\n  credentials: {source: Token}\n"),
            config("ClusterProviderConfig", r#"spec.credentials.source: Unsupported value: "Token": supported values: "None", "Secret", "InjectedIdentity", "Environment", "Filesystem""#),
        ),
        (
            "http: a filesystem source without a path",
            object(HTTP_M, "ProviderConfig", true, "spec:\n  credentials:\n    source: Filesystem\n    fs: {}\n"),
            config("ProviderConfig", "spec.credentials.fs.path: Required value"),
        ),
        (
            "http: a legacy usage with an unknown resolution policy",
            usage(HTTP, "ProviderConfigUsage", false, "providerConfigRef: {name: default, policy: {resolution: Sometimes}}\nresourceRef: {apiVersion: http.crossplane.io/v1alpha2, kind: Request, name: r}\n"),
            invalid("ProviderConfigUsage", "c", r#"providerConfigRef.policy.resolution: Unsupported value: "Sometimes": supported values: "Required", "Optional""#),
        ),
        (
            "http: a ClusterProviderConfigUsage without its config",
            usage(HTTP_M, "ClusterProviderConfigUsage", false, "resourceRef: {apiVersion: http.m.crossplane.io/v1alpha2, kind: Request, name: r}\n"),
            invalid("ClusterProviderConfigUsage", "c", "providerConfigRef: Required value"),
        ),
    ]
}

/// One valid object per kind.
fn valid() -> Vec<String> {
    let resource = |api_version: &str, kind: &str| format!("resourceRef: {{apiVersion: {api_version}, kind: {kind}, name: r, uid: 0d8a1c52-7a39-4f7e-9f3e-6a2b9b1b2c3d}}\n");
    vec![
        object(PG, "ProviderConfig", false, "spec:\n  credentials:\n    source: PostgreSQLConnectionSecret\n    connectionSecretRef: {namespace: default, name: db}\n    secretKeyMapping: {endpoint: host}\n  sslMode: disable\n"),
        object(PG_M, "ProviderConfig", true, "spec:\n  credentials:\n    source: PostgreSQLConnectionSecret\n    connectionSecretRef: {name: db}\n"),
        object(PG_M, "ClusterProviderConfig", false, "spec:\n  credentials:\n    source: PostgreSQLConnectionSecret\n    connectionSecretRef: {namespace: default, name: db}\n"),
        object(PG, "ProviderConfigUsage", false, &format!("providerConfigRef: {{name: default, policy: {{resolution: Optional}}}}\n{}", resource(PG, "Database"))),
        object(PG_M, "ProviderConfigUsage", true, &format!("providerConfigRef: {{kind: ClusterProviderConfig, name: default}}\n{}", resource(PG_M, "Database"))),
        object(MYSQL, "ProviderConfig", false, "spec:\n  credentials:\n    source: MySQLConnectionSecret\n    connectionSecretRef: {namespace: default, name: db}\n  tls: preferred\n"),
        object(K8S, "ProviderConfig", false, "spec:\n  credentials:\n    source: Secret\n    secretRef: {namespace: default, name: kubeconfig, key: kubeconfig}\n  identity:\n    type: UpboundTokens\n    source: Secret\n    secretRef: {namespace: default, name: token, key: token}\n"),
        object(K8S_M, "ProviderConfig", true, "spec:\n  credentials: {source: InjectedIdentity}\n"),
        object(K8S_M, "ClusterProviderConfig", false, "spec:\n  credentials: {source: Environment, env: {name: KUBECONFIG}}\n"),
        object(K8S, "ProviderConfigUsage", false, &format!("providerConfigRef: {{name: default}}\n{}", resource(K8S, "Object"))),
        object(HTTP, "ProviderConfig", false, "spec:\n  credentials: {source: None}\n"),
        object(HTTP_M, "ProviderConfig", true, "spec:\n  credentials: {source: Filesystem, fs: {path: /etc/token}}\n"),
        object(HTTP_M, "ClusterProviderConfig", false, "spec:\n  credentials: {source: None}\n"),
        object(HTTP_M, "ProviderConfigUsage", true, &format!("providerConfigRef: {{kind: ProviderConfig, name: default}}\n{}", resource(HTTP_M, "Request"))),
        object(HTTP_M, "ClusterProviderConfigUsage", false, &format!("providerConfigRef: {{kind: ClusterProviderConfig, name: default}}\n{}", resource(HTTP_M, "Request"))),
    ]
}

/// (CRD, scope, categories) of every config and usage kind, as upstream.
const KINDS: &[(&str, &str, &[&str])] = &[
    ("providerconfigs.postgresql.sql.crossplane.io", "Cluster", &["crossplane", "provider", "sql"]),
    ("providerconfigusages.postgresql.sql.crossplane.io", "Cluster", &["crossplane", "provider", "sql"]),
    ("providerconfigs.postgresql.sql.m.crossplane.io", "Namespaced", &["crossplane", "provider", "sql"]),
    ("clusterproviderconfigs.postgresql.sql.m.crossplane.io", "Cluster", &["crossplane", "provider", "sql"]),
    ("providerconfigusages.postgresql.sql.m.crossplane.io", "Namespaced", &["crossplane", "provider", "sql"]),
    ("providerconfigs.mysql.sql.crossplane.io", "Cluster", &["crossplane", "provider", "sql"]),
    ("providerconfigs.mysql.sql.m.crossplane.io", "Namespaced", &["crossplane", "provider", "sql"]),
    ("providerconfigs.kubernetes.crossplane.io", "Cluster", &["crossplane", "provider", "kubernetes"]),
    ("providerconfigusages.kubernetes.crossplane.io", "Cluster", &["crossplane", "provider", "kubernetes"]),
    ("providerconfigs.kubernetes.m.crossplane.io", "Namespaced", &["crossplane", "provider", "kubernetes"]),
    ("clusterproviderconfigs.kubernetes.m.crossplane.io", "Cluster", &["crossplane", "provider", "kubernetes"]),
    ("providerconfigusages.kubernetes.m.crossplane.io", "Namespaced", &["crossplane", "provider", "kubernetes"]),
    ("providerconfigs.http.crossplane.io", "Cluster", &[]),
    ("providerconfigusages.http.crossplane.io", "Cluster", &["crossplane", "provider", "http"]),
    ("providerconfigs.http.m.crossplane.io", "Namespaced", &[]),
    ("clusterproviderconfigs.http.m.crossplane.io", "Cluster", &[]),
    ("providerconfigusages.http.m.crossplane.io", "Namespaced", &["crossplane", "provider", "http"]),
    ("clusterproviderconfigusages.http.m.crossplane.io", "Cluster", &["crossplane", "provider", "http"]),
];

fn header(server: &Server, args: &[&str]) -> Vec<String> {
    server.kubectl(args).lines().next().unwrap_or_default().split_whitespace().map(str::to_string).collect()
}

#[test]
fn provider_config_kinds_are_served_as_the_providers_publish_them() {
    let server = Server::start_with(&["--provider", "provider-sql", "--provider", "provider-kubernetes", "--provider", "provider-http", "--provider", "provider-nop"]);
    server.kubectl(&["wait", "--for=condition=Healthy", "provider/provider-sql", "provider/provider-kubernetes", "provider/provider-http", "provider/provider-nop", "--timeout=60s"]);
    let mut wrong = Vec::new();
    for (what, manifest, expected) in refused() {
        wrong.extend(unexpected_answer(what, server.kubectl_try(&["create", "-f", "-"], &manifest), &expected));
    }
    for manifest in valid() {
        if let Err(error) = server.kubectl_try(&["create", "--dry-run=server", "-f", "-"], &manifest) {
            wrong.push(format!("valid object refused: {error}\n{manifest}"));
        }
    }
    for (crd, scope, categories) in KINDS {
        let Some(definition) = server.get(&["crd", crd]) else {
            wrong.push(format!("{crd}: not served"));
            continue;
        };
        let served_categories: Vec<&str> = definition["spec"]["names"]["categories"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        if definition["spec"]["scope"] != *scope || served_categories != *categories {
            wrong.push(format!("{crd}: scope {} categories {served_categories:?}, want {scope} {categories:?}", definition["spec"]["scope"]));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));

    // The configs print AGE, and SECRET-NAME with -o wide; the usages their config and resource.
    server.apply(&object(PG, "ProviderConfig", false, "spec:\n  credentials:\n    source: PostgreSQLConnectionSecret\n    connectionSecretRef: {namespace: default, name: db}\n"));
    server.apply(&object(K8S, "ProviderConfig", false, "spec:\n  credentials:\n    source: Secret\n    secretRef: {namespace: default, name: kubeconfig, key: kubeconfig}\n"));
    assert_eq!(header(&server, &["get", "providerconfigs.postgresql.sql.crossplane.io"]), ["NAME", "AGE"]);
    let wide = server.kubectl(&["get", "providerconfigs.postgresql.sql.crossplane.io", "-o", "wide"]);
    assert!(wide.lines().next().unwrap().split_whitespace().eq(["NAME", "AGE", "SECRET-NAME"]) && wide.lines().nth(1).unwrap().ends_with("db"), "{wide}");
    let wide = server.kubectl(&["get", "providerconfigs.kubernetes.crossplane.io", "-o", "wide"]);
    assert!(wide.lines().nth(1).unwrap().ends_with("kubeconfig"), "{wide}");
    assert_eq!(header(&server, &["get", "providerconfigusages.http.m.crossplane.io", "-A"]).len(), 0, "no usages yet");
    server.apply(&object(HTTP_M, "ClusterProviderConfigUsage", false, "providerConfigRef: {kind: ClusterProviderConfig, name: default}\nresourceRef: {apiVersion: http.m.crossplane.io/v1alpha2, kind: Request, name: r}\n"));
    assert_eq!(header(&server, &["get", "clusterproviderconfigusages.http.m.crossplane.io"]), ["NAME", "AGE", "CONFIG-NAME", "RESOURCE-KIND", "RESOURCE-NAME"]);

    // provider-nop has no config kinds, as upstream.
    let missing = server.kubectl_fails(&["get", "providerconfigs.nop.crossplane.io"], "");
    assert!(missing.contains("the server doesn't have a resource type"), "{missing}");
}
