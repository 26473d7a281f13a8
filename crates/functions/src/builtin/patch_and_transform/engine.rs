//! One run of function-patch-and-transform over a request, in Crossplane's order:
//! environment patches; then per template: start from `base` (or the desired resource a
//! previous step produced), take name, namespace, connection details and readiness from the
//! observed resource, apply the patches; then the modern XR's connection secret; finally the
//! desired state and the environment go back in the response.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::compile::{Input, PatchType, compile_input};
use super::connection::{compose_secret, extract, is_modern, secret_resource_name};
use super::patches::apply;
use super::readiness::is_ready;
use crate::protocol::{
    DEFAULT_TTL, FnResult, Ready, Resource, RunFunctionRequest, RunFunctionResponse, response_to,
};

/// The context key of the composition environment.
pub const ENVIRONMENT_KEY: &str = "apiextensions.crossplane.io/environment";

/// The `apiVersion` an environment gets when it has none.
const ENVIRONMENT_API_VERSION: &str = "internal.crossplane.io/v1alpha1";

/// Runs the function.
pub fn run(request: &RunFunctionRequest) -> RunFunctionResponse {
    let mut rsp = response_to(request, DEFAULT_TTL);
    let input = match compile_input(request.input.as_ref()) {
        Ok(input) => input,
        Err(e) => {
            rsp.results.push(FnResult::fatal(e.to_string()));
            return rsp;
        }
    };
    match render(request, &input) {
        Ok(rendered) => {
            rsp.results.extend(rendered.warnings.into_iter().map(FnResult::warning));
            rsp.desired.composite = Some(rendered.composite);
            rsp.desired.resources = rendered.resources;
            let mut context = match rsp.context.take() {
                Some(Value::Object(map)) => map,
                _ => Map::new(),
            };
            context.insert(ENVIRONMENT_KEY.to_string(), rendered.environment);
            rsp.context = Some(Value::Object(context));
        }
        // A fatal result leaves the desired state as the request had it.
        Err(fatal) => {
            rsp.results.extend(fatal.warnings.into_iter().map(FnResult::warning));
            rsp.results.push(FnResult::fatal(fatal.message));
        }
    }
    rsp
}

/// What a successful run produces.
struct Rendered {
    composite: Resource,
    resources: BTreeMap<String, Resource>,
    environment: Value,
    warnings: Vec<String>,
}

/// A fatal error, with the warnings emitted before it.
struct Fatal {
    message: String,
    warnings: Vec<String>,
}

/// The environment from the context, with Crossplane's internal kind when it has none.
fn environment(request: &RunFunctionRequest) -> Value {
    let mut env = match request.context.as_ref().and_then(|c| c.get(ENVIRONMENT_KEY)) {
        Some(Value::Object(map)) => map.clone(),
        _ => Map::new(),
    };
    let empty = |key: &str| env.get(key).and_then(Value::as_str).is_none_or(str::is_empty);
    if empty("apiVersion") && empty("kind") {
        env.insert("apiVersion".into(), json!(ENVIRONMENT_API_VERSION));
        env.insert("kind".into(), json!("Environment"));
    }
    Value::Object(env)
}

/// Sets `metadata.<key>` to `value`, or removes it when there is none (as Kubernetes'
/// unstructured setters do with an empty string).
fn set_metadata(object: &mut Value, key: &str, value: Option<&Value>) {
    if !object.is_object() {
        *object = Value::Object(Map::new());
    }
    let Value::Object(map) = object else { return };
    match value.and_then(Value::as_str).filter(|s| !s.is_empty()) {
        Some(v) => {
            let metadata = map.entry("metadata").or_insert_with(|| Value::Object(Map::new()));
            if !metadata.is_object() {
                *metadata = Value::Object(Map::new());
            }
            if let Value::Object(m) = metadata {
                m.insert(key.to_string(), Value::String(v.to_string()));
            }
        }
        None => {
            if let Some(Value::Object(m)) = map.get_mut("metadata") {
                m.remove(key);
            }
        }
    }
}

fn render(request: &RunFunctionRequest, input: &Input) -> Result<Rendered, Fatal> {
    let mut warnings = Vec::new();
    let fatal =
        |message: String, warnings: &mut Vec<String>| Fatal { message, warnings: std::mem::take(warnings) };

    let oxr = request.observed.composite.as_ref().map_or_else(|| json!({}), |c| c.resource.clone());
    let mut dxr = request.desired.composite.clone().unwrap_or_default();
    if !dxr.resource.is_object() {
        dxr.resource = json!({});
    }
    for key in ["apiVersion", "kind"] {
        if let (Some(v), Value::Object(map)) = (oxr.get(key), &mut dxr.resource) {
            map.insert(key.to_string(), v.clone());
        }
    }
    let observed = &request.observed.resources;
    let mut desired = request.desired.resources.clone();
    let mut env = environment(request);

    for (index, patch) in input.environment.iter().enumerate() {
        let result = match patch.patch_type {
            PatchType::FromCompositeFieldPath
            | PatchType::ToEnvironmentFieldPath
            | PatchType::CombineFromComposite => apply(patch, &oxr, &mut env),
            PatchType::ToCompositeFieldPath
            | PatchType::FromEnvironmentFieldPath
            | PatchType::CombineToComposite => apply(patch, &env, &mut dxr.resource),
            PatchType::CombineFromEnvironment | PatchType::CombineToEnvironment => Ok(()),
        };
        match result {
            Ok(()) => {}
            Err(e) if e.is_not_found() && !patch.required => {}
            Err(e) => {
                let message = format!(
                    "cannot apply the {:?} environment patch at index {index}: {e}",
                    patch.patch_type.name()
                );
                return Err(fatal(message, &mut warnings));
            }
        }
    }

    'templates: for template in &input.templates {
        let mut resource = match &template.base {
            Some(base) => base.clone(),
            None => match desired.get(&template.name) {
                Some(previous) => previous.resource.clone(),
                None => {
                    let message = format!(
                        "composed resource {:?} has no base template, and was not produced by a previous Function in the pipeline",
                        template.name
                    );
                    return Err(fatal(message, &mut warnings));
                }
            },
        };
        let mut ready = Ready::Unspecified;
        let ocd = observed.get(&template.name);
        if let Some(ocd) = ocd {
            // Keep the template associated with the object that exists.
            set_metadata(&mut resource, "namespace", ocd.resource.pointer("/metadata/namespace"));
            set_metadata(&mut resource, "name", ocd.resource.pointer("/metadata/name"));
            dxr.connection_details.extend(extract(ocd, &template.connection_details));
            match is_ready(&ocd.resource, &template.readiness_checks) {
                Ok(true) => ready = Ready::True,
                Ok(false) => {}
                Err(e) => warnings
                    .push(format!("cannot check readiness of composed resource {:?}: {e}", template.name)),
            }
        }

        for (index, patch) in template.patches.iter().enumerate() {
            // A patch from a composed resource that does not exist yet waits until it does.
            let to_composed = patch.patch_type.to_composed();
            let result = match (patch.patch_type, ocd) {
                (PatchType::FromCompositeFieldPath | PatchType::CombineFromComposite, _) => {
                    apply(patch, &oxr, &mut resource)
                }
                (PatchType::FromEnvironmentFieldPath | PatchType::CombineFromEnvironment, _) => {
                    apply(patch, &env, &mut resource)
                }
                (_, None) => Ok(()),
                (PatchType::ToCompositeFieldPath | PatchType::CombineToComposite, Some(ocd)) => {
                    apply(patch, &ocd.resource, &mut dxr.resource)
                }
                (PatchType::ToEnvironmentFieldPath | PatchType::CombineToEnvironment, Some(ocd)) => {
                    apply(patch, &ocd.resource, &mut env)
                }
            };
            let Err(e) = result else { continue };
            let type_name = patch.patch_type.name();
            if !e.is_not_found() {
                let message = format!(
                    "cannot render composed resource {:?} {type_name:?} patch at index {index}: {e}",
                    template.name
                );
                return Err(fatal(message, &mut warnings));
            }
            if !patch.required {
                continue;
            }
            if to_composed && ocd.is_none() {
                // Required means: do not create the resource until the source exists.
                warnings.push(format!(
                    "not adding new composed resource {:?} to desired state because {type_name:?} patch at index {index} has 'policy.fromFieldPath: Required': {e}",
                    template.name
                ));
                dxr.ready = Ready::False;
                continue 'templates;
            }
            warnings.push(format!(
                "cannot render composed resource {:?} {type_name:?} patch at index {index}: ignoring 'policy.fromFieldPath: Required' because 'to' resource already exists: {e}",
                template.name
            ));
        }

        desired
            .insert(template.name.clone(), Resource { resource, ready, connection_details: BTreeMap::new() });
    }

    if is_modern(&oxr) && !dxr.connection_details.is_empty() {
        let secret = compose_secret(&oxr, &dxr.connection_details, input.secret_ref.as_ref())
            .map_err(|message| fatal(message, &mut warnings))?;
        let name = secret_resource_name(&oxr);
        // A Secret has no status: it is ready once it exists.
        let ready = if observed.contains_key(&name) { Ready::True } else { Ready::Unspecified };
        desired.insert(name, Resource { resource: secret, ready, connection_details: BTreeMap::new() });
    }

    Ok(Rendered { composite: dxr, resources: desired, environment: env, warnings })
}
