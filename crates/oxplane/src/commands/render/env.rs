//! Where `render`'s pipeline finds things: the Functions of the functions file (built in and
//! run in-process, or reached over gRPC as their annotations say), credentials among the
//! Secrets of `--function-credentials`, required resources among the objects of
//! `--required-resources`, and schemas among the OpenAPI documents of `--required-schemas`.
//! Nothing is read from a cluster.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use anyhow::{Context, bail};
use oxplane_composition::composite::pipeline::{PipelineEnv, schema_in};
use oxplane_composition::packages::{Placement, placement};
use oxplane_functions::Function;
use oxplane_functions::builtin::{BuiltinOptions, builtin_names, catalog};
use oxplane_functions::grpc::client::DEFAULT_CALL_TIMEOUT;
use oxplane_functions::grpc::tls::CertificateAuthority;
use oxplane_functions::grpc::{FunctionEndpoint, GrpcFunction};
use oxplane_functions::protocol::{Match, Resource, ResourceSelector, Resources, Schema, SchemaSelector};
use oxplane_runtime::provider::package_name;
use serde_json::Value;

use crate::commands::load;

/// The files a render reads its pipeline's surroundings from.
pub struct FileEnv {
    /// Functions by Function name.
    pub functions: BTreeMap<String, Arc<dyn Function>>,
    /// The Secrets of `--function-credentials`.
    pub secrets: Vec<Value>,
    /// The objects of `--required-resources` (and `--extra-resources`).
    pub resources: Vec<Value>,
    /// OpenAPI v3 documents of `--required-schemas`.
    pub schemas: Vec<Value>,
}

/// The API versions of Function objects render accepts.
const FUNCTION_API_VERSIONS: [&str; 2] = ["pkg.crossplane.io/v1", "pkg.crossplane.io/v1beta1"];

/// Builds the functions of `objects` (the functions file), with `annotations` added to each:
/// a built-in function runs in-process; one with the development annotations is called in
/// plain text, one with `oxplane.io/function-endpoint` with mutual TLS from oxplane's CA in
/// `ca_dir`.
pub fn functions(objects: &[Value], annotations: &BTreeMap<String, String>, ca_dir: &Path, options: &BuiltinOptions) -> anyhow::Result<BTreeMap<String, Arc<dyn Function>>> {
    let builtins: BTreeMap<&str, Arc<dyn Function>> = catalog(options).into_iter().collect();
    let mut functions = BTreeMap::new();
    for object in objects {
        let api_version = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
        if !FUNCTION_API_VERSIONS.contains(&api_version) || load::kind(object) != "Function" {
            bail!("not a function: {}/{}", load::kind(object), load::name(object));
        }
        let mut object = object.clone();
        for (key, value) in annotations {
            oxplane_runtime::object::set_annotation(&mut object, key, value);
        }
        let name = load::name(&object).to_string();
        let function: Arc<dyn Function> = match placement(&object) {
            Placement::Builtin => {
                let reference = object.pointer("/spec/package").and_then(Value::as_str).unwrap_or_default();
                match builtins.get(package_name(reference)) {
                    Some(function) => function.clone(),
                    None => bail!(
                        "cannot start function runtimes: cannot start Function {name:?}: package {reference:?} is not a built-in function and oxplane runs no function images; start the function yourself and annotate the Function with render.crossplane.io/runtime: Development (built-in functions: {})",
                        builtin_names().join(", ")
                    ),
                }
            }
            Placement::Insecure(address) => Arc::new(remote(&name, FunctionEndpoint::insecure(address))?),
            Placement::MutualTls(address) => {
                let ca = CertificateAuthority::load_or_create(ca_dir).with_context(|| format!("cannot start Function {name:?}: cannot load oxplane's certificate authority"))?;
                let tls = ca.client_tls(SystemTime::now()).with_context(|| format!("cannot start Function {name:?}: cannot issue a client certificate"))?;
                Arc::new(remote(&name, FunctionEndpoint { address, tls: Some(tls) })?)
            }
        };
        functions.insert(name, function);
    }
    Ok(functions)
}

fn remote(name: &str, endpoint: FunctionEndpoint) -> anyhow::Result<GrpcFunction> {
    let address = endpoint.address.clone();
    GrpcFunction::new(name, endpoint, DEFAULT_CALL_TIMEOUT).with_context(|| format!("cannot dial Function {name:?} at address {address:?}"))
}

#[async_trait::async_trait]
impl PipelineEnv for FileEnv {
    async fn function(&self, step: &str, name: &str) -> Result<Arc<dyn Function>, String> {
        self.functions
            .get(name)
            .cloned()
            .ok_or_else(|| format!("cannot run pipeline step {step:?}: unknown Function {name:?} - does it exist in your Functions file?"))
    }

    async fn credential(&self, _step: &str, _credential: &str, namespace: &str, secret: &str) -> Result<BTreeMap<String, Vec<u8>>, String> {
        let found = self
            .secrets
            .iter()
            .find(|s| load::name(s) == secret && s.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default() == namespace)
            .ok_or_else(|| format!("cannot get credentials from secret {secret:?}: secret {secret:?} not found"))?;
        secret_data(found).map_err(|e| format!("cannot get credentials from secret {secret:?}: {e}"))
    }

    async fn resources(&self, selector: &ResourceSelector) -> Result<Resources, String> {
        Ok(Resources { items: matching(&self.resources, selector).into_iter().map(|resource| Resource { resource, ..Default::default() }).collect() })
    }

    async fn schema(&self, selector: &SchemaSelector) -> Result<Schema, String> {
        Ok(Schema { openapi_v3: schema_in(&self.schemas, selector) })
    }

    fn step_failed(&self, step: &str, error: &str) -> String {
        format!("cannot run pipeline step {step:?}: {error}")
    }
}

/// A Secret's `data` (base64) and `stringData`, decoded.
fn secret_data(secret: &Value) -> Result<BTreeMap<String, Vec<u8>>, String> {
    use base64::Engine;
    let mut data = BTreeMap::new();
    for (key, value) in secret.get("data").and_then(Value::as_object).into_iter().flatten() {
        let text = value.as_str().unwrap_or_default();
        let bytes = base64::engine::general_purpose::STANDARD.decode(text).map_err(|e| format!("data key {key:?} is not base64: {e}"))?;
        data.insert(key.clone(), bytes);
    }
    for (key, value) in secret.get("stringData").and_then(Value::as_object).into_iter().flatten() {
        data.insert(key.clone(), value.as_str().unwrap_or_default().as_bytes().to_vec());
    }
    Ok(data)
}

/// The objects a selector matches, by name: one (the namespace not considered, as Crossplane's
/// render does), by labels: all whose labels hold every pair; sorted by name.
fn matching(objects: &[Value], selector: &ResourceSelector) -> Vec<Value> {
    let mut candidates: Vec<&Value> = objects
        .iter()
        .filter(|o| o.get("apiVersion").and_then(Value::as_str) == Some(selector.api_version.as_str()) && load::kind(o) == selector.kind)
        .collect();
    candidates.sort_by_key(|o| load::name(o));
    match &selector.matching {
        Match::Name(name) => candidates.into_iter().find(|o| load::name(o) == name).cloned().into_iter().collect(),
        Match::Labels(labels) => candidates
            .into_iter()
            .filter(|o| labels.iter().all(|(k, v)| o.pointer("/metadata/labels").and_then(|l| l.get(k)).and_then(Value::as_str) == Some(v.as_str())))
            .cloned()
            .collect(),
    }
}

/// Reads the OpenAPI v3 documents (JSON) of a `--required-schemas` directory.
pub fn schemas(dir: &Path) -> anyhow::Result<Vec<Value>> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read required schemas directory {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("json"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|file| {
            let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
            serde_json::from_str(&text).with_context(|| format!("cannot parse OpenAPI document {}", file.display()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use serde_json::json;

    use super::*;

    fn object(kind: &str, name: &str, labels: Value) -> Value {
        json!({"apiVersion": "example.org/v1", "kind": kind, "metadata": {"name": name, "labels": labels}})
    }

    #[test]
    fn selectors_match_by_name_or_labels_sorted_by_name() {
        let objects = vec![
            object("Config", "b", json!({"env": "prod"})),
            object("Config", "a", json!({"env": "prod", "team": "x"})),
            object("Config", "c", json!({"env": "dev"})),
            object("Other", "d", json!({"env": "prod"})),
        ];
        let by_labels = ResourceSelector {
            api_version: "example.org/v1".into(),
            kind: "Config".into(),
            matching: Match::Labels([("env".to_string(), "prod".to_string())].into()),
            namespace: None,
        };
        let names: Vec<String> = matching(&objects, &by_labels).iter().map(|o| load::name(o).to_string()).collect();
        assert_eq!(names, ["a", "b"]);
        let by_name = ResourceSelector { matching: Match::Name("c".into()), ..by_labels.clone() };
        assert_eq!(matching(&objects, &by_name), vec![objects[2].clone()]);
        let missing = ResourceSelector { matching: Match::Name("zz".into()), ..by_labels };
        assert!(matching(&objects, &missing).is_empty());
    }

    #[test]
    fn secrets_decode_data_and_string_data() {
        let secret = json!({"data": {"a": "aGk="}, "stringData": {"b": "there"}});
        let data = secret_data(&secret).unwrap();
        assert_eq!(data["a"], b"hi");
        assert_eq!(data["b"], b"there");
        assert!(secret_data(&json!({"data": {"a": "!!"}})).unwrap_err().contains("not base64"));
    }

    #[test]
    fn a_function_that_is_not_built_in_and_not_annotated_is_refused() {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let _entered = runtime.enter();
        let dir = tempfile::tempdir().unwrap();
        let objects = vec![json!({"apiVersion": "pkg.crossplane.io/v1", "kind": "Function", "metadata": {"name": "function-kcl"}, "spec": {"package": "xpkg.crossplane.io/crossplane-contrib/function-kcl:v0.1.0"}})];
        let error = functions(&objects, &BTreeMap::new(), dir.path(), &BuiltinOptions::default()).err().unwrap().to_string();
        assert!(error.contains("is not a built-in function"), "{error}");
        let annotations = [("render.crossplane.io/runtime".to_string(), "Development".to_string())].into();
        assert!(functions(&objects, &annotations, dir.path(), &BuiltinOptions::default()).unwrap().contains_key("function-kcl"));
        let not_function = vec![json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})];
        assert_eq!(functions(&not_function, &BTreeMap::new(), dir.path(), &BuiltinOptions::default()).err().unwrap().to_string(), "not a function: ConfigMap/x");
    }
}
