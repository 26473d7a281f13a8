//! function-go-templating: composes resources from Go templates.
//!
//! Input: `gotemplating.fn.crossplane.io/v1beta1` `GoTemplate` with `source` `Inline`
//! (`inline.template`), `FileSystem` (`fileSystem.dirPath`, read under the directory oxplane
//! was given for templates, see [`GoTemplating::with_root`]) or `Environment`
//! (`environment.key` in the pipeline's environment), optional `delims`, `options`
//! (`missingkey=...`) and `ttl`. The template runs (engine: [`crate::gotemplate`]) over the
//! request as function-go-templating sees it: the protobuf request as JSON (`observed`,
//! `desired`, `context`, `extraResources`, `requiredResources`, `credentials`, `input`, with
//! protojson's names and every number a float64). Its output is a YAML stream; each document
//! is a composed resource (named by the `gotemplating.fn.crossplane.io/composition-resource-name`
//! annotation, readiness by `gotemplating.fn.crossplane.io/ready`), the composite (its
//! `status` is merged into the desired composite), or one of the `meta.gotemplating.fn.crossplane.io/v1alpha1`
//! kinds: `CompositeConnectionDetails`, `Context`, `ExtraResources`, `ClaimConditions`.
//! Errors are fatal results with the function's own wording around Go's.

mod helpers;

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use base64::Engine;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::gotemplate::sprig::mergo as dicts_merge;
use crate::golang::{duration, value::as_float64};
use crate::gotemplate::Template;
use crate::protocol::{
    Capability, Condition, ConditionStatus, Credentials, DEFAULT_TTL, FnResult, Match, Ready, Resource, ResourceSelector,
    Resources, RunFunctionRequest, RunFunctionResponse, State, Target, response_to,
};

pub use helpers::EXTRA_RESOURCES_CONTEXT_KEY;

/// The annotation naming a composed resource.
pub const ANNOTATION_RESOURCE_NAME: &str = "gotemplating.fn.crossplane.io/composition-resource-name";
/// The annotation setting a composed resource's readiness.
pub const ANNOTATION_READY: &str = "gotemplating.fn.crossplane.io/ready";
/// The apiVersion of the special documents.
pub const META_API_VERSION: &str = "meta.gotemplating.fn.crossplane.io/v1alpha1";
/// The context key of the pipeline's environment.
pub const ENVIRONMENT_CONTEXT_KEY: &str = "apiextensions.crossplane.io/environment";

/// function-go-templating, with the directory `FileSystem` sources read from, if any.
#[derive(Clone, Debug, Default)]
pub struct GoTemplating {
    root: Option<PathBuf>,
}

impl GoTemplating {
    /// A function whose `FileSystem` sources read under `root` (a `dirPath` of `/templates`
    /// is `root/templates`; nothing outside `root` is read). Without a root, a `FileSystem`
    /// source is refused with a message naming the option that enables it.
    pub fn with_root(root: Option<PathBuf>) -> GoTemplating {
        GoTemplating { root }
    }
}

#[async_trait::async_trait]
impl crate::protocol::Function for GoTemplating {
    async fn run(&self, request: RunFunctionRequest) -> Result<RunFunctionResponse, crate::FunctionError> {
        Ok(run(&request, self.root.as_deref()))
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Input {
    #[serde(default)]
    source: String,
    #[serde(default)]
    inline: Option<InlineSource>,
    #[serde(default)]
    file_system: Option<FileSystemSource>,
    #[serde(default)]
    environment: Option<EnvironmentSource>,
    #[serde(default)]
    delims: Option<Delims>,
    #[serde(default)]
    options: Option<Vec<String>>,
    #[serde(default)]
    ttl: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct InlineSource {
    #[serde(default)]
    template: String,
    #[serde(default)]
    templates: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct FileSystemSource {
    #[serde(default)]
    dir_path: String,
}

#[derive(Debug, Default, Deserialize)]
struct EnvironmentSource {
    #[serde(default)]
    key: String,
}

#[derive(Debug, Default, Deserialize)]
struct Delims {
    left: Option<String>,
    right: Option<String>,
}

/// Runs the function; `root` is where `FileSystem` sources read.
pub fn run(request: &RunFunctionRequest, root: Option<&Path>) -> RunFunctionResponse {
    let mut rsp = response_to(request, DEFAULT_TTL);
    if let Err(message) = compose(request, root, &mut rsp) {
        rsp.results.push(FnResult::fatal(message));
    }
    rsp
}

fn compose(request: &RunFunctionRequest, root: Option<&Path>, rsp: &mut RunFunctionResponse) -> Result<(), String> {
    let input: Input = match &request.input {
        None | Some(Value::Null) => Input::default(),
        Some(v) => serde_json::from_value(v.clone())
            .map_err(|e| format!("cannot get Function input from *v1.RunFunctionRequest: {e}"))?,
    };
    if let Some(ttl) = input.ttl.as_deref().filter(|t| !t.is_empty()) {
        rsp.meta.ttl = Some(duration::parse(ttl).map_err(|e| format!("invalid function input: cannot parse ttl: {e}"))?);
    }
    let text = templates(&input, request, root).map_err(|e| format!("invalid function input: {e}"))?;

    let mut tmpl = Template::new("manifests", helpers::funcs());
    if let Some(d) = &input.delims
        && let (Some(l), Some(r)) = (&d.left, &d.right)
    {
        tmpl.delims(l, r);
    }
    for option in input.options.iter().flatten() {
        tmpl.option(option).map_err(|e| format!("invalid function input: cannot apply template options: {e}"))?;
    }
    tmpl.parse(&text).map_err(|e| format!("invalid function input: cannot parse the provided templates: {e}"))?;
    let data = request_map(request);
    let rendered = tmpl.execute(&data).map_err(|e| format!("cannot execute template: {e}"))?;

    let objects = decode_stream(&rendered)?;
    apply(request, rsp, objects)
}

/// The template text of the input's source.
fn templates(input: &Input, request: &RunFunctionRequest, root: Option<&Path>) -> Result<String, String> {
    match input.source.as_str() {
        "Inline" => {
            let inline = input.inline.as_ref();
            match inline {
                Some(i) if !i.template.is_empty() => Ok(i.template.clone()),
                Some(i) if !i.templates.is_empty() => Ok(i.templates.join("\n---\n")),
                _ => Err("inline.template should be provided".into()),
            }
        }
        "FileSystem" => {
            let dir = input.file_system.as_ref().map(|f| f.dir_path.as_str()).unwrap_or_default();
            if dir.is_empty() {
                return Err("fileSystem.dirPath should be provided".into());
            }
            let Some(root) = root else {
                return Err(format!(
                    "cannot read tmpl from the folder {{{dir}}}: FileSystem sources are not enabled: start oxplane with --go-templating-dir naming the directory templates are read from"
                ));
            };
            let path = confined(root, dir).ok_or_else(|| format!("cannot read tmpl from the folder {{{dir}}}: path escapes the templates directory"))?;
            let mut out = String::new();
            read_templates(&path, &mut out).map_err(|e| format!("cannot read tmpl from the folder {{{dir}}}: {e}"))?;
            Ok(out)
        }
        "Environment" => {
            let key = input.environment.as_ref().map(|e| e.key.as_str()).unwrap_or_default();
            if key.is_empty() {
                return Err("environment.key should be provided".into());
            }
            let Some(env) = request.context.as_ref().and_then(|c| c.get(ENVIRONMENT_CONTEXT_KEY)).filter(|e| e.is_object()) else {
                return Err(format!("cannot read tmpl from the environment: {ENVIRONMENT_CONTEXT_KEY} key does not exist in context"));
            };
            match env.get(key) {
                None => Err(format!("cannot read tmpl from the environment: key: {key} does not exist")),
                Some(Value::String(t)) => Ok(t.clone()),
                Some(_) => Err(format!("cannot read tmpl from the environment: key: {key} value is not a string")),
            }
        }
        "" => Err("source is required".into()),
        other => Err(format!("invalid source: {other}")),
    }
}

/// `dir` (absolute or relative) as a path under `root`, or `None` if it climbs out.
fn confined(root: &Path, dir: &str) -> Option<PathBuf> {
    let mut path = root.to_path_buf();
    for c in Path::new(dir).components() {
        match c {
            Component::Normal(p) => path.push(p),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => return None,
        }
    }
    Some(path)
}

/// Every non-hidden file under `dir`, in name order, each followed by a document separator
/// (as function-go-templating's `fs.WalkDir` reads them).
fn read_templates(dir: &Path, out: &mut String) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name();
        if name.to_string_lossy().starts_with('.') {
            continue;
        }
        let path = e.path();
        if e.file_type()?.is_dir() {
            read_templates(&path, out)?;
        } else {
            out.push_str(&std::fs::read_to_string(&path)?);
            out.push_str("\n---\n");
        }
    }
    Ok(())
}

fn b64(bytes: &[u8]) -> Value {
    Value::String(base64::engine::general_purpose::STANDARD.encode(bytes))
}

fn resource_json(r: &Resource) -> Value {
    let mut m = Map::new();
    m.insert("resource".into(), as_float64(r.resource.clone()));
    if !r.connection_details.is_empty() {
        m.insert("connectionDetails".into(), Value::Object(r.connection_details.iter().map(|(k, v)| (k.clone(), b64(v))).collect()));
    }
    match r.ready {
        Ready::True => {
            m.insert("ready".into(), Value::String("READY_TRUE".into()));
        }
        Ready::False => {
            m.insert("ready".into(), Value::String("READY_FALSE".into()));
        }
        Ready::Unspecified => {}
    }
    Value::Object(m)
}

fn state_json(s: &State) -> Value {
    let mut m = Map::new();
    if let Some(c) = &s.composite {
        m.insert("composite".into(), resource_json(c));
    }
    if !s.resources.is_empty() {
        m.insert("resources".into(), Value::Object(s.resources.iter().map(|(k, r)| (k.clone(), resource_json(r))).collect()));
    }
    Value::Object(m)
}

fn resources_json(map: &BTreeMap<String, Resources>) -> Value {
    Value::Object(
        map.iter()
            .map(|(k, rs)| {
                let mut m = Map::new();
                if !rs.items.is_empty() {
                    m.insert("items".into(), Value::Array(rs.items.iter().map(resource_json).collect()));
                }
                (k.clone(), Value::Object(m))
            })
            .collect(),
    )
}

/// The request as function-go-templating's templates see it: protojson, decoded with every
/// number a float64.
pub fn request_map(r: &RunFunctionRequest) -> Value {
    let mut m = Map::new();
    let mut meta = Map::new();
    if !r.meta.tag.is_empty() {
        meta.insert("tag".into(), Value::String(r.meta.tag.clone()));
    }
    if !r.meta.capabilities.is_empty() {
        let caps = r.meta.capabilities.iter().map(|c| Value::String(capability_name(*c).into())).collect();
        meta.insert("capabilities".into(), Value::Array(caps));
    }
    m.insert("meta".into(), Value::Object(meta));
    m.insert("observed".into(), state_json(&r.observed));
    m.insert("desired".into(), state_json(&r.desired));
    if let Some(i) = &r.input {
        m.insert("input".into(), as_float64(i.clone()));
    }
    if let Some(c) = &r.context {
        m.insert("context".into(), as_float64(c.clone()));
    }
    if !r.extra_resources.is_empty() {
        m.insert("extraResources".into(), resources_json(&r.extra_resources));
    }
    if !r.required_resources.is_empty() {
        m.insert("requiredResources".into(), resources_json(&r.required_resources));
    }
    if !r.credentials.is_empty() {
        let creds = r
            .credentials
            .iter()
            .map(|(k, Credentials::CredentialData(data))| {
                let data: Map<String, Value> = data.iter().map(|(k, v)| (k.clone(), b64(v))).collect();
                let mut inner = Map::new();
                inner.insert("data".into(), Value::Object(data));
                let mut outer = Map::new();
                outer.insert("credentialData".into(), Value::Object(inner));
                (k.clone(), Value::Object(outer))
            })
            .collect();
        m.insert("credentials".into(), Value::Object(creds));
    }
    Value::Object(m)
}

fn capability_name(c: Capability) -> &'static str {
    match c {
        Capability::Unspecified => "CAPABILITY_UNSPECIFIED",
        Capability::Capabilities => "CAPABILITY_CAPABILITIES",
        Capability::RequiredResources => "CAPABILITY_REQUIRED_RESOURCES",
        Capability::Credentials => "CAPABILITY_CREDENTIALS",
        Capability::Conditions => "CAPABILITY_CONDITIONS",
        Capability::RequiredSchemas => "CAPABILITY_REQUIRED_SCHEMAS",
    }
}

/// Splits a YAML stream at `---` lines and decodes each document into an object, as
/// Kubernetes' YAML decoder does (empty documents are skipped).
fn decode_stream(text: &str) -> Result<Vec<Map<String, Value>>, String> {
    let mut docs: Vec<String> = vec![String::new()];
    for line in text.split_inclusive('\n') {
        if let Some(after) = line.strip_prefix("---")
            && after.trim_end().is_empty()
        {
            docs.push(String::new());
            continue;
        }
        if let Some(last) = docs.last_mut() {
            last.push_str(line);
        }
    }
    let mut objects = Vec::new();
    for doc in docs {
        let value: Value = if doc.trim().is_empty() {
            continue;
        } else {
            match serde_yaml_ng::from_str::<Value>(&doc) {
                Ok(v) => v,
                Err(e) => {
                    let line = e.location().map_or(0, |l| l.line());
                    let msg = e.to_string();
                    let msg = msg.split(" at line ").next().unwrap_or(&msg).to_string();
                    return Err(format!("cannot decode manifest: error converting YAML to JSON: yaml: line {line}: {msg}"));
                }
            }
        };
        match value {
            Value::Null => {}
            Value::Object(m) => {
                if !m.get("kind").is_some_and(|k| k.as_str().is_some_and(|k| !k.is_empty())) {
                    return Err(format!(
                        "cannot decode manifest: Object 'Kind' is missing in '{}'",
                        crate::golang::json::marshal(&Value::Object(m))
                    ));
                }
                objects.push(m);
            }
            other => {
                let t = match other {
                    Value::String(_) => "string",
                    Value::Number(_) => "number",
                    Value::Bool(_) => "bool",
                    _ => "array",
                };
                return Err(format!(
                    "cannot decode manifest: couldn't get version/kind; json parse error: json: cannot unmarshal {t} into Go value of type struct {{ APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }}"
                ));
            }
        }
    }
    Ok(objects)
}

fn str_at<'v>(m: &'v Map<String, Value>, key: &str) -> &'v str {
    m.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// `group/version, Kind=Kind`, as Go prints a GroupVersionKind.
fn gvk(obj: &Map<String, Value>) -> String {
    let api = str_at(obj, "apiVersion");
    let (group, version) = api.rsplit_once('/').unwrap_or(("", api));
    format!("{group}/{version}, Kind={}", str_at(obj, "kind"))
}

/// Applies the rendered documents to the response.
fn apply(request: &RunFunctionRequest, rsp: &mut RunFunctionResponse, objects: Vec<Map<String, Value>>) -> Result<(), String> {
    let observed = request.observed.composite.as_ref().map(|c| &c.resource);
    let mut desired_composite = request.desired.composite.clone().unwrap_or_default();
    if !desired_composite.resource.is_object() {
        desired_composite.resource = Value::Object(Map::new());
    }
    let mut requirements: BTreeMap<String, ResourceSelector> = BTreeMap::new();
    for mut obj in objects {
        // Annotations must all be strings.
        let annotations = obj.get("metadata").and_then(|m| m.get("annotations")).cloned();
        if let Some(Value::Object(a)) = &annotations
            && let Some((k, v)) = a.iter().find(|(_, v)| !v.is_string())
        {
            let name = a.get(ANNOTATION_RESOURCE_NAME).and_then(Value::as_str).map_or("<nil>".to_string(), str::to_string);
            let go_type = match v {
                Value::Bool(_) => "bool",
                Value::Number(n) if n.is_f64() => "float64",
                Value::Number(_) => "int64",
                Value::Null => "<nil>",
                Value::Array(_) => "[]interface {}",
                _ => "map[string]interface {}",
            };
            return Err(format!(
                "invalid annotations in resource '{} resource-name={name}': .metadata.annotations accessor error: contains non-string value in the map under key {k:?}: {} is of the type {go_type}, expected string",
                gvk(&obj),
                crate::gotemplate::to_string(v)
            ));
        }
        let annotation = |key: &str| annotations.as_ref().and_then(|a| a.get(key)).and_then(Value::as_str).map(str::to_string);
        let name = annotation(ANNOTATION_RESOURCE_NAME);
        let api_version = str_at(&obj, "apiVersion").to_string();
        let kind = str_at(&obj, "kind").to_string();

        // The composite itself: its status is merged into the desired composite's.
        if let Some(xr) = observed
            && xr.get("apiVersion").and_then(Value::as_str) == Some(api_version.as_str())
            && xr.get("kind").and_then(Value::as_str) == Some(kind.as_str())
            && name.is_none()
        {
            let src = obj.get("status").and_then(Value::as_object).cloned().unwrap_or_default();
            if let Value::Object(d) = &mut desired_composite.resource {
                let mut dst = d.get("status").and_then(Value::as_object).cloned().unwrap_or_default();
                dicts_merge(&mut dst, &src, true);
                d.insert("status".into(), Value::Object(dst));
            }
            continue;
        }

        if api_version == META_API_VERSION {
            match kind.as_str() {
                "CompositeConnectionDetails" => {
                    if let Some(Value::Object(data)) = obj.get("data") {
                        for (k, v) in data {
                            let Some(s) = v.as_str() else { continue };
                            let bytes = base64::engine::general_purpose::STANDARD.decode(s).unwrap_or_default();
                            desired_composite.connection_details.insert(k.clone(), bytes);
                        }
                    }
                }
                "Context" => {
                    let data = match obj.get("data") {
                        None | Some(Value::Null) => Map::new(),
                        Some(Value::Object(m)) => m.clone(),
                        Some(_) => return Err("cannot get Contexts from input: data is not an object".into()),
                    };
                    let mut ctx = rsp.context.as_ref().and_then(Value::as_object).cloned().unwrap_or_default();
                    dicts_merge(&mut ctx, &data, true);
                    rsp.context = Some(Value::Object(ctx));
                }
                "ExtraResources" => {
                    if let Some(Value::Object(reqs)) = obj.get("requirements") {
                        for (k, v) in reqs {
                            if requirements.contains_key(k) {
                                return Err(format!("duplicate extra resource key {k:?}"));
                            }
                            requirements.insert(k.clone(), selector(v).map_err(|e| format!("cannot get extra resources requirements: {e}"))?);
                        }
                    }
                }
                "ClaimConditions" => {
                    for c in obj.get("conditions").and_then(Value::as_array).into_iter().flatten() {
                        rsp.conditions.push(claim_condition(c)?);
                    }
                }
                other => {
                    return Err(format!(
                        "invalid kind {other:?} for apiVersion {META_API_VERSION:?} - must be one of CompositeConnectionDetails, Context, ExtraResources or ClaimConditions"
                    ));
                }
            }
            continue;
        }

        let mut ready = Ready::Unspecified;
        if let Some(v) = annotation(ANNOTATION_READY) {
            ready = match v.as_str() {
                "True" => Ready::True,
                "False" => Ready::False,
                "Unspecified" => Ready::Unspecified,
                _ => {
                    return Err(format!(
                        "invalid function input: invalid {ANNOTATION_READY:?} annotation value {v:?}: must be True, False, or Unspecified"
                    ));
                }
            };
        }
        remove_annotations(&mut obj);
        let Some(name) = name else {
            return Err(format!("{kind:?} template is missing required {ANNOTATION_RESOURCE_NAME:?} annotation"));
        };
        rsp.desired.resources.insert(name, Resource { resource: Value::Object(obj), connection_details: BTreeMap::new(), ready });
    }
    rsp.desired.composite = Some(desired_composite);
    if !requirements.is_empty() {
        rsp.requirements.resources = requirements;
    }
    Ok(())
}

/// Drops the function's own annotations (and an annotations map left empty).
fn remove_annotations(obj: &mut Map<String, Value>) {
    let Some(Value::Object(meta)) = obj.get_mut("metadata") else { return };
    let Some(Value::Object(a)) = meta.get_mut("annotations") else { return };
    a.remove(ANNOTATION_RESOURCE_NAME);
    a.remove(ANNOTATION_READY);
    if a.is_empty() {
        meta.remove("annotations");
    }
}

fn selector(v: &Value) -> Result<ResourceSelector, String> {
    let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
    let matching = match v.get("matchName").and_then(Value::as_str).filter(|n| !n.is_empty()) {
        Some(n) => Match::Name(n.to_string()),
        None => {
            let labels = v
                .get("matchLabels")
                .and_then(Value::as_object)
                .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string())).collect())
                .unwrap_or_default();
            Match::Labels(labels)
        }
    };
    let namespace = v.get("namespace").and_then(Value::as_str).filter(|n| !n.is_empty()).map(str::to_string);
    Ok(ResourceSelector { api_version: s("apiVersion"), kind: s("kind"), matching, namespace })
}

fn claim_condition(c: &Value) -> Result<Condition, String> {
    let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
    let type_ = s("type");
    if matches!(type_.as_str(), "Ready" | "Synced" | "Healthy") {
        return Err(format!("cannot set ClaimCondition type: {type_} is a reserved Crossplane Condition"));
    }
    let status = match s("status").as_str() {
        "True" => ConditionStatus::True,
        "False" => ConditionStatus::False,
        _ => ConditionStatus::Unknown,
    };
    let message = Some(s("message")).filter(|m| !m.is_empty());
    let target = if s("target") == "CompositeAndClaim" { Target::CompositeAndClaim } else { Target::Composite };
    Ok(Condition { type_, status, reason: s("reason"), message, target: Some(target) })
}

#[cfg(test)]
mod tests;
