//! The tree `trace` prints: an object, the error fetching it (if any) and its children, loaded
//! the way Crossplane's trace loads them: a claim's composite, a composite's composed resources
//! (recursing into nested composites), connection Secrets on request, and for packages their
//! revisions, dependencies and runtime configs.

use futures::StreamExt;
use serde_json::{Value, json};

use crate::commands::kube::{Kube, RequestError};

/// One node of the tree.
#[derive(Debug, Clone)]
pub struct Node {
    /// The object as the server returned it (or just its reference when the fetch failed).
    pub object: Value,
    /// Why fetching the object failed.
    pub error: Option<NodeError>,
    /// The children, in the order their references appear.
    pub children: Vec<Node>,
}

/// Why a node's object could not be fetched.
#[derive(Debug, Clone)]
pub struct NodeError {
    /// The message (the API Status message when the server answered with one).
    pub message: String,
    /// The API Status, when there was one.
    pub status: Option<Value>,
}

/// A reference to an object.
#[derive(Debug, Clone, PartialEq)]
pub struct Ref {
    /// apiVersion.
    pub api_version: String,
    /// kind.
    pub kind: String,
    /// name.
    pub name: String,
    /// namespace ("" when cluster scoped).
    pub namespace: String,
}

impl Node {
    /// A leaf node for `object`.
    pub fn new(object: Value) -> Node {
        Node { object, error: None, children: Vec::new() }
    }

    /// The condition of `type_`, if the object has one.
    pub fn condition(&self, type_: &str) -> Option<&Value> {
        self.object["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == type_)
    }

    /// `kind` of the object.
    pub fn kind(&self) -> &str {
        self.object["kind"].as_str().unwrap_or_default()
    }

    /// The API group of the object.
    pub fn group(&self) -> &str {
        let api_version = self.object["apiVersion"].as_str().unwrap_or_default();
        api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("")
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        self.object["metadata"]["name"].as_str().unwrap_or_default()
    }

    /// `metadata.namespace` ("" when none).
    pub fn namespace(&self) -> &str {
        self.object["metadata"]["namespace"].as_str().unwrap_or_default()
    }
}

/// The group of Crossplane's package kinds.
pub const PKG_GROUP: &str = "pkg.crossplane.io";

/// Whether a group and kind is a package (Provider, Configuration, Function).
pub fn is_package(group: &str, kind: &str) -> bool {
    group == PKG_GROUP && matches!(kind, "Provider" | "Configuration" | "Function")
}

/// Whether a group and kind is a package revision.
pub fn is_package_revision(group: &str, kind: &str) -> bool {
    group == PKG_GROUP && matches!(kind, "ProviderRevision" | "ConfigurationRevision" | "FunctionRevision")
}

/// Whether a group and kind is a package runtime config.
pub fn is_runtime_config(group: &str, kind: &str) -> bool {
    group == PKG_GROUP && matches!(kind, "DeploymentRuntimeConfig" | "ControllerConfig")
}

/// The references a claim, composite or managed resource points at, in Crossplane's order: a
/// claim's composite (and its connection Secret); else a modern composite's
/// `spec.crossplane.resourceRefs`, a legacy one's `spec.resourceRefs` and its connection
/// Secret. References of a namespaced object without a namespace are in its namespace.
pub fn children_refs(object: &Value, connection_secrets: bool) -> Vec<Ref> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
    let kind = object["kind"].as_str().unwrap_or_default();
    let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
    if (group.is_empty() && kind == "Secret")
        || (matches!(group, "apiextensions.crossplane.io" | "protection.crossplane.io") && matches!(kind, "Usage" | "ClusterUsage"))
        || (group == "apiextensions.crossplane.io" && kind == "EnvironmentConfig")
    {
        return Vec::new();
    }
    let spec = &object["spec"];
    let as_ref = |r: &Value| Ref {
        api_version: r["apiVersion"].as_str().unwrap_or_default().to_string(),
        kind: r["kind"].as_str().unwrap_or_default().to_string(),
        name: r["name"].as_str().unwrap_or_default().to_string(),
        namespace: r["namespace"].as_str().unwrap_or_default().to_string(),
    };
    let mut refs = Vec::new();
    if spec["resourceRef"].is_object() {
        refs.push(as_ref(&spec["resourceRef"]));
        if connection_secrets {
            if let Some(name) = spec["writeConnectionSecretToRef"]["name"].as_str() {
                refs.push(secret_ref(name, namespace));
            }
        }
        return refs;
    }
    for list in [&spec["crossplane"]["resourceRefs"], &spec["resourceRefs"]] {
        refs.extend(list.as_array().into_iter().flatten().map(as_ref));
    }
    if connection_secrets {
        let secret = &spec["writeConnectionSecretToRef"];
        if let Some(name) = secret["name"].as_str() {
            refs.push(secret_ref(name, secret["namespace"].as_str().unwrap_or_default()));
        }
    }
    if !namespace.is_empty() {
        for r in &mut refs {
            if r.namespace.is_empty() {
                r.namespace = namespace.to_string();
            }
        }
    }
    refs
}

fn secret_ref(name: &str, namespace: &str) -> Ref {
    Ref { api_version: "v1".into(), kind: "Secret".into(), name: name.into(), namespace: namespace.into() }
}

/// Fetches the object a reference names; a failed fetch is a node carrying the reference and
/// the error.
pub async fn fetch(kube: &Kube, r: &Ref) -> Node {
    let result = async {
        let resource = kube.resource_for_kind(&r.api_version, &r.kind).await.map_err(RequestError::Other)?;
        kube.get(&resource.object_url(Some(&r.namespace), &r.name)).await
    }
    .await;
    match result {
        Ok(object) => Node::new(object),
        Err(error) => {
            let mut metadata = json!({ "name": r.name });
            if !r.namespace.is_empty() {
                metadata["namespace"] = json!(r.namespace);
            }
            let object = json!({ "apiVersion": r.api_version, "kind": r.kind, "metadata": metadata });
            let status = match &error {
                RequestError::Api(status) => serde_json::to_value(status).ok(),
                RequestError::Other(_) => None,
            };
            Node { object, error: Some(NodeError { message: error.to_string(), status }), children: Vec::new() }
        }
    }
}

/// Loads the children of a claim, composite or managed resource, recursively, fetching up to
/// `concurrency` objects at once.
pub async fn load_resource_tree(kube: &Kube, node: &mut Node, connection_secrets: bool, concurrency: usize) {
    if node.error.is_some() {
        return;
    }
    let refs = children_refs(&node.object, connection_secrets);
    let children: Vec<Node> = futures::stream::iter(refs)
        .map(|r| async move {
            let mut child = fetch(kube, &r).await;
            Box::pin(load_resource_tree(kube, &mut child, connection_secrets, concurrency)).await;
            child
        })
        .buffered(concurrency.max(1))
        .collect()
        .await;
    node.children = children;
}

/// Which package revisions `trace` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RevisionOutput {
    /// The active revision only.
    Active,
    /// Every revision.
    All,
    /// None.
    None,
}

/// Which package dependencies `trace` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DependencyOutput {
    /// Each dependency once, where it first appears.
    Unique,
    /// Every dependency wherever it appears.
    All,
    /// None.
    None,
}

/// How a package tree is loaded.
#[derive(Debug, Clone, Copy)]
pub struct PackageOptions {
    /// Which revisions.
    pub revisions: RevisionOutput,
    /// Which dependencies.
    pub dependencies: DependencyOutput,
    /// Whether runtime configs are shown.
    pub runtime_configs: bool,
}

/// Loads a package's tree breadth first: its runtime config, its revisions and, from the
/// package Lock, the packages its current revision depends on. A server that keeps no Lock
/// (`locks.pkg.crossplane.io` not served or `lock` absent) has no dependencies to show.
pub async fn load_package_tree(kube: &Kube, root: &mut Node, options: PackageOptions) -> anyhow::Result<()> {
    anyhow::ensure!(is_package(root.group(), root.kind()), "resource {} is not a package", root.name());
    let lock = match kube.get("/apis/pkg.crossplane.io/v1beta1/locks/lock").await {
        Ok(lock) => lock,
        Err(e) if e.is_not_found() => json!({}),
        Err(e) => anyhow::bail!("{e}"),
    };
    let packages: Vec<Value> = lock["packages"].as_array().cloned().unwrap_or_default();
    let mut seen = std::collections::HashSet::new();
    load_package_level(kube, root, options, &packages, &mut seen).await
}

async fn load_package_level(
    kube: &Kube,
    root: &mut Node,
    options: PackageOptions,
    lock: &[Value],
    seen: &mut std::collections::HashSet<String>,
) -> anyhow::Result<()> {
    // Breadth first: children of this level are filled before their own children, so
    // "unique" keeps a dependency where it first appears nearest the root.
    let mut level: Vec<&mut Node> = vec![root];
    while !level.is_empty() {
        let mut dependency_counts = Vec::new();
        for node in level.iter_mut() {
            if node.error.is_some() || !is_package(node.group(), node.kind()) {
                dependency_counts.push(0);
                continue;
            }
            if options.runtime_configs {
                let config = &node.object["spec"]["runtimeConfigRef"];
                if let Some(name) = config["name"].as_str() {
                    let r = Ref {
                        api_version: config["apiVersion"].as_str().unwrap_or("pkg.crossplane.io/v1beta1").to_string(),
                        kind: config["kind"].as_str().unwrap_or("DeploymentRuntimeConfig").to_string(),
                        name: name.to_string(),
                        namespace: String::new(),
                    };
                    node.children.push(fetch(kube, &r).await);
                }
            }
            if options.revisions != RevisionOutput::None {
                let revisions = revisions(kube, node)
                    .await
                    .map_err(|e| anyhow::anyhow!("failed to set package revision children for package {}: {e}", node.name()))?;
                for revision in revisions {
                    match revision["spec"]["desiredState"].as_str() {
                        Some("Active") => node.children.push(Node::new(revision)),
                        Some("Inactive") if options.revisions == RevisionOutput::All => node.children.push(Node::new(revision)),
                        _ => {}
                    }
                }
            }
            let mut count = 0;
            if options.dependencies != DependencyOutput::None {
                for r in dependency_refs(kube, node, lock, options.dependencies, seen).await? {
                    node.children.push(fetch(kube, &r).await);
                    count += 1;
                }
            }
            dependency_counts.push(count);
        }
        let mut next = Vec::new();
        for (node, count) in level.into_iter().zip(dependency_counts) {
            let len = node.children.len();
            next.extend(node.children[len - count..].iter_mut());
        }
        level = next;
    }
    Ok(())
}

async fn revisions(kube: &Kube, package: &Node) -> anyhow::Result<Vec<Value>> {
    let api_version = package.object["apiVersion"].as_str().unwrap_or_default();
    let kind = format!("{}Revision", package.kind());
    let resource = match kube.resource_for_kind(api_version, &kind).await {
        Ok(r) => r,
        Err(_) => return Ok(Vec::new()),
    };
    let url = format!("{}?labelSelector=pkg.crossplane.io%2Fpackage%3D{}", resource.collection_url(None), package.name());
    let mut items = match kube.get(&url).await {
        Ok(list) => list["items"].as_array().cloned().unwrap_or_default(),
        Err(e) if e.is_not_found() => Vec::new(),
        Err(e) => anyhow::bail!("{e}"),
    };
    for item in &mut items {
        item["apiVersion"] = json!(resource.api_version());
        item["kind"] = json!(kind);
    }
    items.sort_by(|a, b| {
        a["metadata"]["creationTimestamp"].as_str().unwrap_or_default().cmp(b["metadata"]["creationTimestamp"].as_str().unwrap_or_default())
    });
    Ok(items)
}

async fn dependency_refs(
    kube: &Kube,
    package: &Node,
    lock: &[Value],
    output: DependencyOutput,
    seen: &mut std::collections::HashSet<String>,
) -> anyhow::Result<Vec<Ref>> {
    let Some(current) = package.object["status"]["currentRevision"].as_str().filter(|c| !c.is_empty()) else {
        return Ok(Vec::new());
    };
    let Some(entry) = lock.iter().find(|p| p["name"] == current) else { return Ok(Vec::new()) };
    let mut refs = Vec::new();
    for dependency in entry["dependencies"].as_array().into_iter().flatten() {
        let source = dependency["package"].as_str().unwrap_or_default();
        if output == DependencyOutput::Unique && seen.contains(source) {
            continue;
        }
        let (api_version, kind) = match (dependency["apiVersion"].as_str(), dependency["kind"].as_str(), dependency["type"].as_str()) {
            (Some(a), Some(k), _) => (a.to_string(), k.to_string()),
            (_, _, Some(t @ ("Configuration" | "Provider" | "Function"))) => ("pkg.crossplane.io/v1".to_string(), t.to_string()),
            _ => anyhow::bail!(
                "failed to get dependency ref {source}: cannot determine dependency type - you must specify either a valid type, or an explicit apiVersion and kind"
            ),
        };
        let mut name = dns_label(repository_of(source));
        if let Some(locked) = lock.iter().find(|p| p["source"] == source) {
            let revision_kind = format!("{kind}Revision");
            if let Ok(resource) = kube.resource_for_kind(&api_version, &revision_kind).await {
                if let Ok(revision) = kube.get(&resource.object_url(None, locked["name"].as_str().unwrap_or_default())).await {
                    if let Some(owner) = revision["metadata"]["ownerReferences"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .find(|o| o["kind"] == kind.as_str() && o["controller"] == true)
                    {
                        name = owner["name"].as_str().unwrap_or_default().to_string();
                    }
                }
            }
        }
        refs.push(Ref { api_version, kind, name, namespace: String::new() });
        seen.insert(source.to_string());
    }
    Ok(refs)
}

/// The repository part of an image reference (no registry, tag or digest).
fn repository_of(reference: &str) -> &str {
    let without_digest = reference.split('@').next().unwrap_or(reference);
    let (path, last) = match without_digest.rsplit_once('/') {
        Some((p, l)) => (Some(p), l),
        None => (None, without_digest),
    };
    let last_start = without_digest.len() - last.len();
    let end = last.find(':').map(|i| last_start + i).unwrap_or(without_digest.len());
    let repo = &without_digest[..end];
    match (path, repo.split_once('/')) {
        (Some(_), Some((first, rest))) if first.contains('.') || first.contains(':') || first == "localhost" => rest,
        _ => repo,
    }
}

/// A DNS label made of `s`: lower case, other characters as `-`, at most 63 characters.
fn dns_label(s: &str) -> String {
    let label: String = s.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    label.chars().take(63).collect::<String>().trim_matches('-').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn children_of_claims_composites_and_managed_resources() {
        let claim = json!({"apiVersion": "ex.org/v1", "kind": "App", "metadata": {"name": "a", "namespace": "ns"},
            "spec": {"resourceRef": {"apiVersion": "ex.org/v1", "kind": "XApp", "name": "a-1"}, "writeConnectionSecretToRef": {"name": "s"}}});
        assert_eq!(children_refs(&claim, false).len(), 1);
        let refs = children_refs(&claim, true);
        assert_eq!(refs[1], Ref { api_version: "v1".into(), kind: "Secret".into(), name: "s".into(), namespace: "ns".into() });
        let modern = json!({"apiVersion": "ex.org/v1", "kind": "XApp", "metadata": {"name": "a", "namespace": "ns"},
            "spec": {"crossplane": {"resourceRefs": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "c"}]}}});
        assert_eq!(children_refs(&modern, true)[0].namespace, "ns");
        let legacy = json!({"apiVersion": "ex.org/v1", "kind": "XApp", "metadata": {"name": "a"},
            "spec": {"resourceRefs": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "namespace": "x"}],
                     "writeConnectionSecretToRef": {"name": "s", "namespace": "y"}}});
        let refs = children_refs(&legacy, true);
        assert_eq!((refs[0].namespace.as_str(), refs[1].namespace.as_str()), ("x", "y"));
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "spec": {"resourceRef": {}}});
        assert!(children_refs(&secret, true).is_empty());
    }

    #[test]
    fn repositories_and_labels_of_package_references() {
        assert_eq!(repository_of("xpkg.crossplane.io/crossplane-contrib/provider-helm:v0.1.0"), "crossplane-contrib/provider-helm");
        assert_eq!(repository_of("provider-nop"), "provider-nop");
        assert_eq!(repository_of("localhost:5000/a/b@sha256:00"), "a/b");
        assert_eq!(dns_label("crossplane-contrib/provider-helm"), "crossplane-contrib-provider-helm");
    }
}
