//! `oxplane render XR COMPOSITION FUNCTIONS` (also `oxplane composition render`): what a
//! Composition would make of a composite resource, printed as the YAML stream Crossplane's
//! `crossplane render` prints, without a control plane. The pipeline is the XR controller's own
//! ([`pipeline::run`]) over files instead of a cluster: built-in functions run in-process,
//! others are called over gRPC as their Function's annotations say.
//!
//! - `env.rs`: functions, credentials, required resources and schemas from files.
//! - `output.rs`: the output objects and the YAML stream (pure).

mod env;
mod output;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use oxplane_composition::composite::compose::ANNOTATION_RESOURCE_NAME;
use oxplane_composition::composite::pipeline;
use oxplane_composition::composite::reconciler::steps_of;
use oxplane_functions::builtin::BuiltinOptions;
use oxplane_functions::protocol::{Resource, State};
use serde_json::{Value, json};

use crate::commands::load;

/// The flags and arguments of `render`, as Crossplane's CLI names them.
#[derive(Debug, Clone, clap::Args)]
pub struct RenderArgs {
    /// A YAML file specifying the composite resource (XR) to render.
    #[arg(value_name = "COMPOSITE_RESOURCE")]
    pub composite_resource: PathBuf,
    /// A YAML file specifying the Composition to use to render the XR. Must be mode: Pipeline.
    #[arg(value_name = "COMPOSITION")]
    pub composition: PathBuf,
    /// A YAML file or directory of YAML files specifying the Composition Functions to use to
    /// render the XR.
    #[arg(value_name = "FUNCTIONS")]
    pub functions: PathBuf,
    /// Context key-value pairs to pass to the Function pipeline. Values must be files
    /// containing JSON; repeatable.
    #[arg(long, value_name = "KEY=FILE")]
    pub context_files: Vec<String>,
    /// Context key-value pairs to pass to the Function pipeline. Values must be JSON. Keys
    /// take precedence over --context-files; repeatable.
    #[arg(long, value_name = "KEY=JSON")]
    pub context_values: Vec<String>,
    /// Include informational and warning messages from Functions in the rendered output as
    /// resources of kind: Result.
    #[arg(short = 'r', long)]
    pub include_function_results: bool,
    /// Include a direct copy of the input XR's spec and metadata fields in the rendered output.
    #[arg(short = 'x', long = "include-full-xr")]
    pub include_full_xr: bool,
    /// A YAML file or directory of YAML files specifying the observed state of composed
    /// resources.
    #[arg(short = 'o', long, value_name = "PATH")]
    pub observed_resources: Option<PathBuf>,
    /// A YAML file or directory of YAML files specifying required resources (deprecated, use
    /// --required-resources).
    #[arg(long, value_name = "PATH")]
    pub extra_resources: Option<PathBuf>,
    /// A YAML file or directory of YAML files specifying required resources to pass to the
    /// Function pipeline.
    #[arg(short = 'e', long, value_name = "PATH")]
    pub required_resources: Option<PathBuf>,
    /// A directory of OpenAPI v3 documents (JSON, as `/openapi/v3/apis/<group>/<version>`
    /// serves them) for functions that require schemas.
    #[arg(short = 's', long, value_name = "DIR")]
    pub required_schemas: Option<PathBuf>,
    /// Include the context in the rendered output as a resource of kind: Context.
    #[arg(short = 'c', long)]
    pub include_context: bool,
    /// A YAML file or directory of YAML files specifying credentials to use for Functions to
    /// render the XR.
    #[arg(long, value_name = "PATH")]
    pub function_credentials: Option<PathBuf>,
    /// Annotations to add to every Function (e.g. render.crossplane.io/runtime=Development);
    /// repeatable.
    #[arg(short = 'a', long = "function-annotations", value_name = "KEY=VALUE")]
    pub function_annotations: Vec<String>,
    /// A YAML file specifying the CompositeResourceDefinition (XRD) that defines the XR's
    /// schema and properties (its defaults are applied to the XR).
    #[arg(long, value_name = "PATH")]
    pub xrd: Option<PathBuf>,
    /// How long to run before timing out.
    #[arg(long, value_name = "DURATION", default_value = "1m")]
    pub timeout: String,
    /// function-go-templating's FileSystem root, as `oxplane up --go-templating-dir`.
    #[arg(long, value_name = "DIR")]
    pub go_templating_dir: Option<PathBuf>,
    /// oxplane's data directory, whose CA signs the client certificate for functions with
    /// `oxplane.io/function-endpoint` [default: $OXPLANE_HOME, else ~/.oxplane].
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
}

/// Runs `render`; `data_dir` resolves the data directory flag.
pub fn run(args: RenderArgs, data_dir: impl Fn(Option<PathBuf>) -> anyhow::Result<PathBuf>) -> anyhow::Result<()> {
    let timeout = oxplane_functions::golang::duration::parse(&args.timeout).map_err(|e| anyhow::anyhow!("--timeout: {e}"))?;
    // gRPC clients are made inside the runtime that will drive them.
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let _entered = runtime.enter();
    let mut xr = load::one(&args.composite_resource, "composite resource")
        .with_context(|| format!("cannot load composite resource from {:?}", args.composite_resource.display().to_string()))?;
    let composition = load_composition(&args.composition).with_context(|| format!("cannot load Composition from {:?}", args.composition.display().to_string()))?;
    check_composition(&xr, &composition)?;
    let functions = load::stream(&args.functions)
        .and_then(|objects| {
            let annotations = key_values(&args.function_annotations, "--function-annotations")?;
            let ca_dir = crate::commands::function::ca_dir(&data_dir(args.data_dir.clone())?);
            env::functions(&objects, &annotations, &ca_dir, &BuiltinOptions { go_templating_dir: args.go_templating_dir.clone() })
        })
        .with_context(|| format!("cannot load functions from {:?}", args.functions.display().to_string()))?;
    if let Some(path) = &args.xrd {
        let xrd = load::one(path, "XRD").with_context(|| format!("cannot load XRD from {:?}", path.display().to_string()))?;
        apply_xrd_defaults(&mut xr, &xrd)?;
    }
    let secrets = optional_stream(args.function_credentials.as_deref(), "cannot load secrets from")?;
    let observed_objects = optional_stream(args.observed_resources.as_deref(), "cannot load observed composed resources from")?;
    let mut resources = optional_stream(args.extra_resources.as_deref(), "cannot load extra resources from")?;
    resources.extend(optional_stream(args.required_resources.as_deref(), "cannot load required resources from")?);
    let schemas = match &args.required_schemas {
        Some(dir) => env::schemas(dir)?,
        None => Vec::new(),
    };
    let context = context(&args.context_files, &args.context_values)?;

    let mut observed = State { composite: Some(Resource { resource: xr.clone(), ..Default::default() }), resources: BTreeMap::new() };
    let mut observed_by_name = BTreeMap::new();
    for object in observed_objects {
        let name = oxplane_runtime::object::annotation(&object, ANNOTATION_RESOURCE_NAME).unwrap_or_default().to_string();
        observed.resources.insert(name.clone(), Resource { resource: object.clone(), ..Default::default() });
        observed_by_name.insert(name, object);
    }
    let steps = steps_of(&composition).map_err(|e| anyhow::anyhow!("cannot render composite resource: {e}"))?;
    let file_env = env::FileEnv { functions, secrets, resources, schemas };
    let outcome = runtime
        .block_on(async { tokio::time::timeout(timeout, pipeline::run(&file_env, &steps, observed, context)).await })
        .map_err(|_| anyhow::anyhow!("cannot render composite resource: no result within --timeout {}", args.timeout))?
        .map_err(|e| anyhow::anyhow!("cannot render composite resource: {e}"))?;
    if let Some(fatal) = &outcome.fatal {
        bail!("cannot render composite resource: {fatal}");
    }
    let include = output::Include { results: args.include_function_results, full_xr: args.include_full_xr, context: args.include_context };
    let documents = output::documents(&xr, &outcome, &observed_by_name, include).map_err(|e| anyhow::anyhow!("cannot render composite resource: {e}"))?;
    print!("{}", output::stream(&documents));
    Ok(())
}

fn load_composition(path: &Path) -> anyhow::Result<Value> {
    let composition = load::one(path, "composition")?;
    if composition.get("apiVersion").and_then(Value::as_str) != Some("apiextensions.crossplane.io/v1") || load::kind(&composition) != "Composition" {
        bail!("not a composition: {}/{}", load::kind(&composition), load::name(&composition));
    }
    Ok(composition)
}

/// The checks Crossplane's render makes before running anything, with its words.
fn check_composition(xr: &Value, composition: &Value) -> anyhow::Result<()> {
    let field = |pointer: &str| composition.pointer(pointer).and_then(Value::as_str).unwrap_or_default();
    let (xr_kind, xr_api_version) = (load::kind(xr), xr.get("apiVersion").and_then(Value::as_str).unwrap_or_default());
    if field("/spec/compositeTypeRef/kind") != xr_kind {
        bail!("composition's compositeTypeRef.kind ({}) does not match XR's kind ({xr_kind})", field("/spec/compositeTypeRef/kind"));
    }
    if field("/spec/compositeTypeRef/apiVersion") != xr_api_version {
        bail!("composition's compositeTypeRef.apiVersion ({}) does not match XR's apiVersion ({xr_api_version})", field("/spec/compositeTypeRef/apiVersion"));
    }
    // The selector lives in spec.crossplane (v2 composites) or spec (legacy ones).
    let selector = xr.pointer("/spec/crossplane/compositionSelector/matchLabels").or_else(|| xr.pointer("/spec/compositionSelector/matchLabels"));
    let name = load::name(composition);
    for (key, want) in selector.and_then(Value::as_object).into_iter().flatten() {
        let want = want.as_str().unwrap_or_default();
        match composition.pointer("/metadata/labels").and_then(|l| l.get(key)).and_then(Value::as_str) {
            None => bail!("composition {name:?} is missing required label {key:?}"),
            Some(got) if got != want => bail!("composition {name:?} has incorrect value for label {key:?}: want {want:?}, got {got:?}"),
            Some(_) => {}
        }
    }
    if field("/spec/mode") != "Pipeline" {
        bail!("render only supports Composition Function pipelines: Composition {name:?} must use spec.mode: Pipeline");
    }
    Ok(())
}

/// Applies the defaults of the XR's version in the CRD the XRD generates.
fn apply_xrd_defaults(xr: &mut Value, xrd: &Value) -> anyhow::Result<()> {
    let xrd_name = load::name(xrd).to_string();
    let crd = oxplane_composition::xrd::render::xr_crd(xrd).with_context(|| format!("cannot derive composite CRD from XRD {xrd_name:?}"))?;
    let xr_name = load::name(xr).to_string();
    let (_, version) = load::group_version(xr);
    let schema = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|v| v.get("name").and_then(Value::as_str) == Some(version.as_str()))
        .and_then(|v| v.pointer("/schema/openAPIV3Schema"))
        .with_context(|| format!("cannot default values for XR {xr_name:?}: the XRD {xrd_name:?} has no version {version:?}"))?;
    let schema = oxplane_apiserver::schema::Schema::compile(schema).with_context(|| format!("cannot default values for XR {xr_name:?}"))?;
    schema.default(xr);
    Ok(())
}

fn optional_stream(path: Option<&Path>, what: &str) -> anyhow::Result<Vec<Value>> {
    match path {
        Some(path) => load::stream(path).with_context(|| format!("{what} {:?}", path.display().to_string())),
        None => Ok(Vec::new()),
    }
}

/// `KEY=VALUE` pairs.
fn key_values(pairs: &[String], flag: &str) -> anyhow::Result<BTreeMap<String, String>> {
    pairs
        .iter()
        .map(|pair| match pair.split_once('=') {
            Some((key, value)) if !key.is_empty() => Ok((key.to_string(), value.to_string())),
            _ => bail!("{flag}: {pair:?} is not KEY=VALUE"),
        })
        .collect()
}

/// The pipeline's starting context: `--context-files` (each file's YAML or JSON), then
/// `--context-values` over them.
fn context(files: &[String], values: &[String]) -> anyhow::Result<Value> {
    let mut context = serde_json::Map::new();
    for (key, file) in key_values(files, "--context-files")? {
        let text = std::fs::read_to_string(&file).with_context(|| format!("cannot read context value for key {key:?}"))?;
        let value: Value = serde_saphyr::from_str(&text).with_context(|| format!("cannot unmarshal YAML/JSON for context key {key:?}"))?;
        context.insert(key, value);
    }
    for (key, text) in key_values(values, "--context-values")? {
        let value: Value = serde_saphyr::from_str(&text).with_context(|| format!("cannot unmarshal YAML/JSON for context key {key:?}"))?;
        context.insert(key, value);
    }
    Ok(json!(context))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn composition(mode: &str) -> Value {
        json!({"apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition", "metadata": {"name": "c", "labels": {"tier": "gold"}},
            "spec": {"compositeTypeRef": {"apiVersion": "example.org/v1", "kind": "XBucket"}, "mode": mode}})
    }

    #[test]
    fn compositions_are_checked_with_crossplanes_words() {
        let xr = json!({"apiVersion": "example.org/v1", "kind": "XBucket", "metadata": {"name": "b"}});
        check_composition(&xr, &composition("Pipeline")).unwrap();
        let other_kind = json!({"apiVersion": "example.org/v1", "kind": "XQueue"});
        assert_eq!(check_composition(&other_kind, &composition("Pipeline")).unwrap_err().to_string(), "composition's compositeTypeRef.kind (XBucket) does not match XR's kind (XQueue)");
        let other_version = json!({"apiVersion": "example.org/v2", "kind": "XBucket"});
        assert_eq!(
            check_composition(&other_version, &composition("Pipeline")).unwrap_err().to_string(),
            "composition's compositeTypeRef.apiVersion (example.org/v1) does not match XR's apiVersion (example.org/v2)"
        );
        assert_eq!(
            check_composition(&xr, &composition("Resources")).unwrap_err().to_string(),
            "render only supports Composition Function pipelines: Composition \"c\" must use spec.mode: Pipeline"
        );
        let selecting = |labels: Value| json!({"apiVersion": "example.org/v1", "kind": "XBucket", "spec": {"crossplane": {"compositionSelector": {"matchLabels": labels}}}});
        check_composition(&selecting(json!({"tier": "gold"})), &composition("Pipeline")).unwrap();
        assert_eq!(
            check_composition(&selecting(json!({"tier": "silver"})), &composition("Pipeline")).unwrap_err().to_string(),
            "composition \"c\" has incorrect value for label \"tier\": want \"silver\", got \"gold\""
        );
        assert_eq!(
            check_composition(&selecting(json!({"zone": "a"})), &composition("Pipeline")).unwrap_err().to_string(),
            "composition \"c\" is missing required label \"zone\""
        );
    }

    #[test]
    fn context_values_override_context_files() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("env.json");
        std::fs::write(&file, r#"{"region": "eu"}"#).unwrap();
        let files = vec![format!("a={}", file.display()), format!("b={}", file.display())];
        let context = context(&files, &[r#"b={"region": "us"}"#.to_string()]).unwrap();
        assert_eq!(context, json!({"a": {"region": "eu"}, "b": {"region": "us"}}));
        assert!(key_values(&["novalue".to_string()], "--x").unwrap_err().to_string().contains("is not KEY=VALUE"));
    }
}
