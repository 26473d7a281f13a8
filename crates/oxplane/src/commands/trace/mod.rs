//! `oxplane trace TYPE[.VERSION][.GROUP][/NAME]` (also `oxplane resource trace`): what a claim,
//! composite, managed resource or package is made of and why it is or is not ready, printed as
//! Crossplane's `crossplane beta trace` prints it. It talks to whatever API server the user's
//! kubeconfig names.

pub mod printer;
pub mod tree;
mod watch;

use anyhow::Context;

use super::kube::{Kube, KubeArgs};
use printer::Output;
use tree::{DependencyOutput, Node, PackageOptions, RevisionOutput};

/// The flags and arguments of `trace`.
#[derive(Debug, Clone, clap::Args)]
pub struct TraceArgs {
    /// Kind of the Crossplane resource, accepts the 'TYPE[.VERSION][.GROUP][/NAME]' format.
    #[arg(value_name = "TYPE[.VERSION][.GROUP][/NAME]")]
    pub resource: String,
    /// Name of the Crossplane resource, can be passed as part of the resource too.
    pub name: Option<String>,
    /// Which kubeconfig and context.
    #[command(flatten)]
    pub kube: KubeArgs,
    /// Namespace of the resource.
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value = "default")]
    pub output: Output,
    /// Show connection secrets in the output.
    #[arg(short = 's', long)]
    pub show_connection_secrets: bool,
    /// Show package dependencies in the output.
    #[arg(long, value_enum, default_value = "unique")]
    pub show_package_dependencies: DependencyOutput,
    /// Show package revisions in the output.
    #[arg(long, value_enum, default_value = "active")]
    pub show_package_revisions: RevisionOutput,
    /// Show package runtime configs in the output.
    #[arg(long)]
    pub show_package_runtime_configs: bool,
    /// Load concurrency.
    #[arg(long, default_value_t = 5)]
    pub concurrency: usize,
    /// Watch for changes until the resource is deleted (q, Esc or Ctrl-C to stop).
    #[arg(short = 'w', long)]
    pub watch: bool,
}

/// Runs `trace`.
pub fn run(args: TraceArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(run_async(args))
}

/// What is being traced, resolved.
pub(crate) struct Target {
    pub(crate) resource: super::kube::Resource,
    pub(crate) name: String,
    pub(crate) namespace: String,
}

async fn run_async(args: TraceArgs) -> anyhow::Result<()> {
    let (type_, name) = type_and_name(&args.resource, args.name.as_deref()).context("invalid resource and name")?;
    let kube = Kube::connect(&args.kube).await?;
    let resource = kube.resource_for_type(&type_).await.context("cannot get mapping for resource")?;
    let namespace = if resource.namespaced {
        args.namespace.clone().filter(|n| !n.is_empty()).unwrap_or_else(|| kube.default_namespace.clone())
    } else {
        String::new()
    };
    let target = Target { resource, name: name.clone(), namespace };
    if name.is_empty() {
        let roots = load_all(&kube, &target, &args).await?;
        print!("{}", printer::print_list(args.output, &roots));
        if args.watch {
            println!("error: you may only watch a single resource at a time");
        }
        return Ok(());
    }
    let root = load_one(&kube, &target, &args).await?;
    if args.watch {
        return watch::run(&kube, &target, &args, root).await;
    }
    print!("{}", printer::print(args.output, &root));
    Ok(())
}

/// Splits `TYPE/NAME` or `TYPE NAME`.
fn type_and_name(resource: &str, name: Option<&str>) -> anyhow::Result<(String, String)> {
    let name = name.unwrap_or_default();
    let parts: Vec<&str> = resource.split('/').collect();
    match parts.as_slice() {
        [t] if !t.is_empty() => Ok((t.to_string(), name.to_string())),
        [t, n] => {
            anyhow::ensure!(
                name.is_empty(),
                "name provided twice, must be provided separately 'TYPE[.VERSION][.GROUP] [NAME]' or in the 'TYPE[.VERSION][.GROUP][/NAME]' format"
            );
            Ok((t.to_string(), n.to_string()))
        }
        _ => anyhow::bail!("invalid resource, must be provided in the 'TYPE[.VERSION][.GROUP][/NAME]' format"),
    }
}

/// Fetches the traced object and loads its tree.
pub(crate) async fn load_one(kube: &Kube, target: &Target, args: &TraceArgs) -> anyhow::Result<Node> {
    let object = kube
        .get(&target.resource.object_url(Some(&target.namespace), &target.name))
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| {
            format!(
                "cannot get requested resource: kind={} name={} namespace={} (verify context, namespace, and that the resource exists)",
                target.resource.kind, target.name, target.namespace
            )
        })?;
    load_tree(kube, Node::new(object), target, args).await
}

async fn load_all(kube: &Kube, target: &Target, args: &TraceArgs) -> anyhow::Result<Vec<Node>> {
    let list = kube
        .get(&target.resource.collection_url(Some(&target.namespace)))
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| {
            format!(
                "cannot get requested resource: kind={} name=<all> namespace={} (verify context, namespace, and that the resource exists)",
                target.resource.kind, target.namespace
            )
        })?;
    let mut roots = Vec::new();
    for mut item in list["items"].as_array().cloned().unwrap_or_default() {
        item["apiVersion"] = serde_json::json!(target.resource.api_version());
        item["kind"] = serde_json::json!(target.resource.kind);
        roots.push(load_tree(kube, Node::new(item), target, args).await?);
    }
    Ok(roots)
}

async fn load_tree(kube: &Kube, mut root: Node, target: &Target, args: &TraceArgs) -> anyhow::Result<Node> {
    let (kind, name, namespace) = (root.kind().to_string(), root.name().to_string(), root.namespace().to_string());
    if tree::is_package(&target.resource.group, &target.resource.kind) {
        let options = PackageOptions {
            revisions: args.show_package_revisions,
            dependencies: args.show_package_dependencies,
            runtime_configs: args.show_package_runtime_configs,
        };
        tree::load_package_tree(kube, &mut root, options).await.with_context(|| {
            format!(
                "cannot get resource tree: kind={kind} name={name} namespace={namespace} (verify context, namespace, and that the resource exists)"
            )
        })?;
    } else {
        tree::load_resource_tree(kube, &mut root, args.show_connection_secrets, args.concurrency).await;
    }
    Ok(root)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_and_name_forms() {
        assert_eq!(type_and_name("xapp/a", None).unwrap(), ("xapp".into(), "a".into()));
        assert_eq!(type_and_name("xapp.example.org", Some("a")).unwrap(), ("xapp.example.org".into(), "a".into()));
        assert_eq!(type_and_name("xapp", None).unwrap(), ("xapp".into(), String::new()));
        assert!(type_and_name("xapp/a", Some("b")).unwrap_err().to_string().starts_with("name provided twice"));
        assert!(type_and_name("a/b/c", None).unwrap_err().to_string().starts_with("invalid resource, must be provided"));
    }
}
