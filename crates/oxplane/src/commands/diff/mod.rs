//! `oxplane diff -f FILE`: what applying a composite resource or claim would change, asked of
//! the server (`POST /oxplane/v1alpha1/plan`, answered by the XR controller's own composition
//! steps in dry run, nothing written) and printed as a tree: the object, then each composed
//! resource that would be created (`+`), changed (`~`, with each field's old and new value),
//! deleted (`-`) or left as it is (`=`), nested composites with their own resources. Each
//! object's plan is printed as soon as the server answers, after a `planning KIND/NAME ...`
//! line on standard error.

use anyhow::Context;
use serde_json::Value;

use super::kube::{Kube, KubeArgs};
use crate::commands::load;

/// The flags of `diff`.
#[derive(Debug, Clone, clap::Args)]
pub struct DiffArgs {
    /// The composite resources or claims to plan: a file, a directory, or '-' for standard
    /// input (comma-separated for several).
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    pub filename: String,
    /// Which kubeconfig and context.
    #[command(flatten)]
    pub kube: KubeArgs,
    /// Namespace of objects that name none.
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// Print the plans as the server answers them (JSON), not as a tree.
    #[arg(short = 'o', long, value_enum, default_value = "tree")]
    pub output: DiffOutput,
}

/// The output forms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DiffOutput {
    /// A tree of changes.
    Tree,
    /// The plans as JSON, one per line.
    Json,
}

/// Runs `diff`.
pub fn run(args: DiffArgs) -> anyhow::Result<()> {
    let objects = load::sources(&args.filename).with_context(|| format!("cannot read {}", args.filename))?;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(async move {
        let kube = Kube::connect(&args.kube).await?;
        let namespace = args.namespace.clone().unwrap_or_else(|| kube.default_namespace.clone());
        for mut object in objects {
            if object.pointer("/metadata/namespace").is_none()
                && let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut)
            {
                // The server drops it again for a cluster-scoped kind.
                metadata.insert("namespace".into(), Value::String(namespace.clone()));
            }
            // The plan of each object is printed as soon as it is known; while the server
            // plans (it runs the Composition's functions), a line on stderr says which.
            eprintln!("planning {}/{} ...", load::kind(&object), load::name(&object));
            let plan = kube.post(&crate::plan_action::path(), &object).await.map_err(|e| anyhow::anyhow!("cannot plan {}/{}: {e}", load::kind(&object), load::name(&object)))?;
            match args.output {
                DiffOutput::Json => println!("{}", serde_json::to_string(&plan)?),
                DiffOutput::Tree => print!("{}", tree(&plan)),
            }
        }
        anyhow::Ok(())
    })
}

/// A plan as a tree of changes.
pub fn tree(plan: &Value) -> String {
    let mut out = String::new();
    node(&mut out, plan, 0);
    out
}

fn node(out: &mut String, plan: &Value, depth: usize) {
    let text = |field: &str| plan.get(field).and_then(Value::as_str).unwrap_or_default();
    let sign = match text("action") {
        "create" => "+",
        "update" => "~",
        "delete" => "-",
        _ => "=",
    };
    let name = match (text("name"), text("generateName")) {
        ("", generate) if !generate.is_empty() => format!("{generate}*"),
        (name, _) => name.to_string(),
    };
    let pad = "  ".repeat(depth);
    let mut line = format!("{pad}{sign} {}/{name}", text("kind"));
    let mut notes = Vec::new();
    if !text("resourceName").is_empty() {
        notes.push(text("resourceName").to_string());
    }
    if !text("namespace").is_empty() && depth == 0 {
        notes.push(format!("namespace {}", text("namespace")));
    }
    if !notes.is_empty() {
        line.push_str(&format!(" ({})", notes.join(", ")));
    }
    out.push_str(&line);
    out.push('\n');
    for change in plan.get("changes").and_then(Value::as_array).into_iter().flatten() {
        let value = |field: &str| change.get(field).map_or("<unset>".to_string(), |v| v.to_string());
        out.push_str(&format!("{pad}    {}: {} -> {}\n", change.get("path").and_then(Value::as_str).unwrap_or_default(), value("from"), value("to")));
    }
    if !text("error").is_empty() {
        out.push_str(&format!("{pad}    ! {}\n", text("error")));
    }
    for child in plan.get("resources").and_then(Value::as_array).into_iter().flatten() {
        node(out, child, depth + 1);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn plans_print_as_trees_of_changes() {
        let plan = json!({"kind": "App", "name": "my-app", "namespace": "default", "action": "update",
            "changes": [{"path": "spec.size", "from": "medium", "to": "large"}],
            "resources": [
                {"kind": "NopResource", "name": "my-app-1", "resourceName": "database", "action": "update",
                    "changes": [{"path": "spec.forProvider.fields.size", "from": "db.t3.medium", "to": "db.t3.large"}, {"path": "metadata.labels.x", "to": "1"}]},
                {"kind": "NopResource", "name": "", "generateName": "my-app-", "resourceName": "queue", "action": "create"},
                {"kind": "NopResource", "name": "my-app-2", "resourceName": "cache", "action": "delete"},
                {"kind": "XNetwork", "name": "my-app-3", "resourceName": "network", "action": "unchanged", "error": "cannot compose resources: boom",
                    "resources": [{"kind": "NopResource", "name": "my-app-4", "resourceName": "subnet", "action": "unchanged"}]},
            ]});
        assert_eq!(
            tree(&plan),
            r#"~ App/my-app (namespace default)
    spec.size: "medium" -> "large"
  ~ NopResource/my-app-1 (database)
      spec.forProvider.fields.size: "db.t3.medium" -> "db.t3.large"
      metadata.labels.x: <unset> -> "1"
  + NopResource/my-app-* (queue)
  - NopResource/my-app-2 (cache)
  = XNetwork/my-app-3 (network)
      ! cannot compose resources: boom
    = NopResource/my-app-4 (subnet)
"#
        );
    }
}
