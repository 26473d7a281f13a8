//! `oxplane import KIND EXTERNAL-NAME`: adopts an external resource that exists already (a
//! database made by hand, an object applied by someone else) into a managed resource, in two
//! steps so nothing is changed before the user has seen what would be managed:
//!
//! 1. The managed resource is created with the `crossplane.io/external-name` annotation and
//!    `managementPolicies: [Observe, LateInitialize]`: the provider looks the resource up and
//!    writes what it observes into `spec.forProvider` (late initialization) and
//!    `status.atProvider`, and never creates, updates or deletes anything.
//! 2. Once observed, the spec it would be managed with (`spec.forProvider` with
//!    `status.atProvider` merged in, as the server would store it: a dry-run patch drops what
//!    the kind's schema does not know) is printed; after the user confirms (`--yes`, or `y` on
//!    standard input), the resource is switched to full management (`["*"]`) with that spec.
//!
//! An external resource that is not found leaves nothing behind: the managed resource made in
//! step 1 is deleted again (Observe-only, so the external resource is never touched).

use std::io::BufRead;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::{Value, json};

use super::kube::{Kube, KubeArgs, Resource};

/// The annotation naming the external resource.
const EXTERNAL_NAME: &str = "crossplane.io/external-name";
/// The policies of the observing step.
const OBSERVING: [&str; 2] = ["Observe", "LateInitialize"];

/// The flags of `import`.
#[derive(Debug, Clone, clap::Args)]
pub struct ImportArgs {
    /// The managed resource's type, as kubectl names types (e.g. `database.postgresql.sql.crossplane.io`,
    /// `roles.postgresql.sql.crossplane.io`, `object.kubernetes.crossplane.io`).
    pub kind: String,
    /// The external resource's identifier, set as the `crossplane.io/external-name` annotation
    /// (a PostgreSQL database's or role's name; for a provider-kubernetes Object, the name of the
    /// object in `spec.forProvider.manifest`).
    pub external_name: String,
    /// The managed resource's name [default: the external name, when it is a valid name].
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Namespace of a namespaced managed resource [default: the kubeconfig's].
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// The ProviderConfig to reach the resource through (`KIND/NAME` for a namespaced managed
    /// resource's ClusterProviderConfig) [default: the kind's default, `default`].
    #[arg(long, value_name = "NAME")]
    pub provider_config: Option<String>,
    /// A field of `spec.forProvider` the provider needs to find the resource, as
    /// `PATH=VALUE` with a dotted path (e.g. `manifest.kind=ConfigMap`); repeatable. VALUE is
    /// read as JSON when it parses as JSON, else as a string.
    #[arg(long = "set", value_name = "PATH=VALUE")]
    pub set: Vec<String>,
    /// Take over management without asking.
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// How long to wait for the resource to be observed, and then managed.
    #[arg(long, value_name = "DURATION", default_value = "2m", value_parser = crate::cli::parse_positive_duration)]
    pub timeout: Duration,
    /// Which kubeconfig and context.
    #[command(flatten)]
    pub kube: KubeArgs,
}

/// Runs `import`.
pub fn run(args: ImportArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(import(args))
}

async fn import(args: ImportArgs) -> anyhow::Result<()> {
    let kube = Kube::connect(&args.kube).await?;
    let resource = kube.resource_for_type(&args.kind).await?;
    if !resource.categories.iter().any(|c| c == "managed") {
        anyhow::bail!("{} is not a managed resource kind: only managed resources adopt external resources", describe(&resource));
    }
    let name = match &args.name {
        Some(name) => name.clone(),
        None if oxplane_machinery::names::is_dns1123_subdomain(&args.external_name) => args.external_name.clone(),
        None => anyhow::bail!("{:?} is not a valid object name: name the managed resource with --name", args.external_name),
    };
    let namespace = resource.namespaced.then(|| args.namespace.clone().unwrap_or_else(|| kube.default_namespace.clone()));
    let observing = observing_object(&resource, &args, &name, namespace.as_deref())?;
    let url = resource.object_url(namespace.as_deref(), &name);
    let what = format!("{}/{name}", resource.kind);

    match kube.post(&resource.collection_url(namespace.as_deref()), &observing).await {
        Ok(_) => eprintln!("created {what} to observe {:?} (management policies: {})", args.external_name, OBSERVING.join(", ")),
        Err(error) if error.is_already_exists() => {
            // An import asked again (after answering no) goes on from the resource it made.
            let existing = kube.get(&url).await.map_err(|e| anyhow::anyhow!("cannot read {what}: {e}"))?;
            let ours = existing.pointer("/metadata/annotations").and_then(|a| a.get(EXTERNAL_NAME)).and_then(Value::as_str)
                == Some(args.external_name.as_str())
                && existing.pointer("/spec/managementPolicies") == Some(&json!(OBSERVING));
            if !ours {
                anyhow::bail!("{what} exists already: name the managed resource that imports {:?} with --name", args.external_name);
            }
            eprintln!("{what} observes {:?} already", args.external_name);
        }
        Err(error) => anyhow::bail!("cannot create {what}: {error}"),
    }

    let observed = match wait_observed(&kube, &url, args.timeout).await {
        Ok(observed) => observed,
        Err(error) => {
            // Observe-only: deleting it never touches the external resource.
            let _ = kube.send(http::Method::DELETE, &url, "application/json", None).await;
            return Err(error.context(format!("cannot import {:?}; {what} is deleted again", args.external_name)));
        }
    };
    let patch = json!({"spec": {"forProvider": observed_spec(&observed), "managementPolicies": ["*"]}});
    let planned = kube
        .send(http::Method::PATCH, &format!("{url}?dryRun=All"), "application/merge-patch+json", Some(&patch))
        .await
        .map_err(|e| anyhow::anyhow!("cannot plan the takeover of {what}: {e}"))?;
    let spec = planned.get("spec").cloned().unwrap_or_else(|| json!({}));
    println!("{}", super::yaml::yaml(&json!({"spec": spec}), 0));
    eprintln!("observed {:?}: the spec above is what {what} would manage from now on (create, update, late-initialize and delete).", args.external_name);

    if !args.yes && !confirmed(&format!("Take over {:?} with this spec? [y/N] ", args.external_name))? {
        eprintln!("{what} stays observe-only; run again with --yes, or patch spec.managementPolicies to [\"*\"], to take it over; delete {what} to forget it (the external resource stays)");
        return Ok(());
    }
    let applied = kube
        .send(http::Method::PATCH, &url, "application/merge-patch+json", Some(&json!({"spec": spec})))
        .await
        .map_err(|e| anyhow::anyhow!("cannot take over {what}: {e}"))?;
    let generation = applied.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(0);
    wait_managed(&kube, &url, generation, args.timeout).await.with_context(|| format!("{what} was switched to full management"))?;
    eprintln!("{what} manages {:?} now", args.external_name);
    Ok(())
}

fn describe(resource: &Resource) -> String {
    if resource.group.is_empty() { resource.plural.clone() } else { format!("{}.{}", resource.plural, resource.group) }
}

/// The managed resource that observes the external one.
fn observing_object(resource: &Resource, args: &ImportArgs, name: &str, namespace: Option<&str>) -> anyhow::Result<Value> {
    let mut for_provider = json!({});
    for assignment in &args.set {
        let (path, value) = assignment.split_once('=').with_context(|| format!("--set {assignment:?}: expected PATH=VALUE"))?;
        let value = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_string()));
        set_path(&mut for_provider, path, value).with_context(|| format!("--set {assignment:?}"))?;
    }
    // A provider-kubernetes Object finds its object by the manifest's name.
    if resource.kind == "Object" && resource.group.starts_with("kubernetes.") && for_provider.pointer("/manifest/metadata/name").is_none() {
        set_path(&mut for_provider, "manifest.metadata.name", json!(args.external_name))?;
    }
    let mut metadata = json!({"name": name, "annotations": {EXTERNAL_NAME: args.external_name}});
    if let Some(namespace) = namespace {
        metadata["namespace"] = json!(namespace);
    }
    let mut spec = json!({"managementPolicies": OBSERVING, "forProvider": for_provider});
    if let Some(config) = &args.provider_config {
        spec["providerConfigRef"] = match (resource.namespaced, config.split_once('/')) {
            (true, Some((kind, name))) => json!({"kind": kind, "name": name}),
            (true, None) => json!({"kind": "ProviderConfig", "name": config}),
            (false, _) => json!({"name": config}),
        };
    }
    Ok(json!({"apiVersion": resource.api_version(), "kind": resource.kind, "metadata": metadata, "spec": spec}))
}

/// Sets the dotted `path` under `root` (objects made as needed).
fn set_path(root: &mut Value, path: &str, value: Value) -> anyhow::Result<()> {
    let mut here = root;
    let parts: Vec<&str> = path.split('.').collect();
    for (i, part) in parts.iter().enumerate() {
        if part.is_empty() {
            anyhow::bail!("empty segment in path {path:?}");
        }
        let map = here.as_object_mut().with_context(|| format!("{} is not an object", parts[..i].join(".")))?;
        if i + 1 == parts.len() {
            map.insert((*part).to_string(), value);
            return Ok(());
        }
        here = map.entry((*part).to_string()).or_insert_with(|| json!({}));
    }
    Ok(())
}

/// Waits until the provider observed the resource (`Synced=True`); a resource it reports
/// missing is an error at once, any other error after the timeout.
async fn wait_observed(kube: &Kube, url: &str, timeout: Duration) -> anyhow::Result<Value> {
    let deadline = Instant::now() + timeout;
    let mut last = String::from("not reconciled yet");
    loop {
        let object = kube.get(url).await.map_err(|e| anyhow::anyhow!("cannot read the managed resource: {e}"))?;
        match synced(&object) {
            Some((true, _)) => return Ok(object),
            Some((false, message)) if message.contains("does not exist") => anyhow::bail!("{message}"),
            Some((false, message)) => last = message,
            None => {}
        }
        if Instant::now() >= deadline {
            anyhow::bail!("not observed within {timeout:?}: {last}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Waits until a reconcile of `generation` or later succeeded.
async fn wait_managed(kube: &Kube, url: &str, generation: i64, timeout: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let object = kube.get(url).await.map_err(|e| anyhow::anyhow!("cannot read the managed resource: {e}"))?;
        let condition = object.pointer("/status/conditions").and_then(Value::as_array).and_then(|c| c.iter().find(|c| c["type"] == "Synced"));
        let at = condition.and_then(|c| c["observedGeneration"].as_i64()).unwrap_or(0);
        match synced(&object) {
            Some((true, _)) if at >= generation => return Ok(()),
            Some((false, message)) if at >= generation && Instant::now() >= deadline => anyhow::bail!("not synced: {message}"),
            _ if Instant::now() >= deadline => anyhow::bail!("no reconcile of the new spec within {timeout:?}"),
            _ => {}
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The `Synced` condition: whether true, and its message.
fn synced(object: &Value) -> Option<(bool, String)> {
    let condition = object.pointer("/status/conditions")?.as_array()?.iter().find(|c| c["type"] == "Synced")?;
    Some((condition["status"] == "True", condition["message"].as_str().unwrap_or_default().to_string()))
}

/// `spec.forProvider` with `status.atProvider` merged over it: what the provider observed,
/// as the spec to manage. Embedded objects (a provider-kubernetes manifest) lose what their
/// server owns (status, uid, resourceVersion, managedFields, ...), and nulls are dropped (in a
/// merge patch they would delete).
pub fn observed_spec(observed: &Value) -> Value {
    let mut spec = observed.pointer("/spec/forProvider").cloned().unwrap_or_else(|| json!({}));
    if let Some(at_provider) = observed.pointer("/status/atProvider") {
        oxplane_runtime::managed::external::merge_under(&mut spec, at_provider);
    }
    clean(&mut spec);
    spec
}

/// Server-owned metadata of an embedded object.
const SERVER_OWNED: [&str; 8] = ["uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds"];

fn clean(value: &mut Value) {
    let Value::Object(map) = value else { return };
    map.retain(|_, v| !v.is_null());
    let embedded = map.contains_key("apiVersion") && map.contains_key("kind") && map.get("metadata").is_some_and(Value::is_object);
    if embedded {
        map.remove("status");
        if let Some(metadata) = map.get_mut("metadata").and_then(Value::as_object_mut) {
            for field in SERVER_OWNED {
                metadata.remove(field);
            }
            if let Some(annotations) = metadata.get_mut("annotations").and_then(Value::as_object_mut) {
                annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
                if annotations.is_empty() {
                    metadata.remove("annotations");
                }
            }
        }
    }
    for child in map.values_mut() {
        clean(child);
    }
}

/// Asks on standard error, reads the answer from standard input (no answer: no).
fn confirmed(question: &str) -> anyhow::Result<bool> {
    eprint!("{question}");
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer).context("cannot read the answer")?;
    Ok(matches!(answer.trim().to_lowercase().as_str(), "y" | "yes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_observed_spec_is_for_provider_with_at_provider_merged_and_server_fields_dropped() {
        let observed = json!({
            "spec": {"forProvider": {"owner": "app", "manifest": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}}}},
            "status": {"atProvider": {"size": null, "manifest": {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "settings", "namespace": "default", "uid": "u", "resourceVersion": "7", "creationTimestamp": "t",
                    "managedFields": [], "labels": {"team": "a"}, "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
                "data": {"colour": "blue"}, "status": {"x": 1}}}}
        });
        assert_eq!(
            observed_spec(&observed),
            json!({"owner": "app", "manifest": {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "settings", "namespace": "default", "labels": {"team": "a"}}, "data": {"colour": "blue"}}})
        );
    }

    #[test]
    fn set_paths_make_objects_and_refuse_empty_segments() {
        let mut root = json!({});
        set_path(&mut root, "manifest.metadata.name", json!("x")).unwrap();
        set_path(&mut root, "manifest.kind", json!("ConfigMap")).unwrap();
        assert_eq!(root, json!({"manifest": {"kind": "ConfigMap", "metadata": {"name": "x"}}}));
        assert!(set_path(&mut root, "a..b", json!(1)).is_err());
        assert!(set_path(&mut root, "manifest.kind.deeper", json!(1)).is_err());
    }
}
