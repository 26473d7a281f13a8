//! Validating objects against CRD schemas offline, as `crossplane beta validate` does and with
//! its lines (pure: CRDs and objects in, lines and counts out). Per object: its schema found by
//! group, version and kind (`[!] could not find CRD/XRD for: ...` when none); defaults
//! applied; the schema's keywords and unknown fields checked (`[x] schema validation error`);
//! then its CEL rules (`[x] CEL validation error`); `[✓] ... validated successfully` when
//! nothing failed. The schema code is the API server's own.

use std::collections::BTreeMap;

use oxplane_apiserver::schema::Schema;
use serde_json::Value;

use crate::commands::load;

/// A kind's `group/version, Kind=kind`, as Go's `schema.GroupVersionKind.String()` prints it.
pub fn gvk_string(group: &str, version: &str, kind: &str) -> String {
    format!("{group}/{version}, Kind={kind}")
}

/// The schemas of every served version of the CRDs, by (group, version, kind).
pub struct Schemas {
    by_gvk: BTreeMap<(String, String, String), Schema>,
}

impl Schemas {
    /// Compiles the schema of every version of every CRD.
    pub fn compile(crds: &[Value]) -> Result<Schemas, String> {
        let mut by_gvk = BTreeMap::new();
        for crd in crds {
            let text = |pointer: &str| crd.pointer(pointer).and_then(Value::as_str).unwrap_or_default().to_string();
            let (group, kind) = (text("/spec/group"), text("/spec/names/kind"));
            for version in crd.pointer("/spec/versions").and_then(Value::as_array).into_iter().flatten() {
                let Some(schema) = version.pointer("/schema/openAPIV3Schema") else { continue };
                let name = version.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
                let compiled = Schema::compile(schema).map_err(|e| format!("cannot create schema validators: CRD {:?} version {name:?}: {e}", load::name(crd)))?;
                by_gvk.insert((group.clone(), name, kind.clone()), compiled);
            }
        }
        Ok(Schemas { by_gvk })
    }
}

/// What validating a set of objects found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// The output lines, in order (the total line last).
    pub lines: Vec<String>,
    /// Objects with at least one error.
    pub failures: usize,
    /// Objects whose kind has no schema.
    pub missing: usize,
}

/// Validates `objects` (defaults are applied to them in place, unknown fields dropped).
pub fn validate(objects: &mut [Value], schemas: &Schemas, skip_success: bool) -> Report {
    let mut report = Report::default();
    for object in objects.iter_mut() {
        let (group, version) = load::group_version(object);
        let kind = load::kind(object).to_string();
        let gvk = gvk_string(&group, &version, &kind);
        let Some(schema) = schemas.by_gvk.get(&(group, version, kind)) else {
            report.missing += 1;
            report.lines.push(format!("[!] could not find CRD/XRD for: {gvk}"));
            continue;
        };
        schema.default(object);
        let name = resource_name(object);
        let mut errors: Vec<String> = schema.validate_keywords(object).iter().map(ToString::to_string).collect();
        for path in schema.prune(object) {
            let path = path.trim_start_matches('.');
            let child = path.rsplit('.').next().unwrap_or(path);
            errors.push(format!("{path}: Invalid value: {}: unknown field: {}", go_quote(child), go_quote(child)));
        }
        let mut failed = false;
        for error in errors {
            failed = true;
            report.lines.push(format!("[x] schema validation error {gvk}, {name} : {error}"));
        }
        for error in schema.validate_rules(object, None) {
            failed = true;
            report.lines.push(format!("[x] CEL validation error {gvk}, {name} : {error}"));
        }
        if failed {
            report.failures += 1;
        } else if !skip_success {
            report.lines.push(format!("[✓] {gvk}, {name} validated successfully"));
        }
    }
    let total = objects.len();
    report.lines.push(format!(
        "Total {total} resources: {} missing schemas, {} success cases, {} failure cases",
        report.missing,
        total - report.failures - report.missing,
        report.failures
    ));
    report
}

/// The object's name, or its composition resource name (what `render` prints has no names).
fn resource_name(object: &Value) -> String {
    let name = load::name(object);
    if !name.is_empty() {
        return name.to_string();
    }
    object.pointer("/metadata/annotations/crossplane.io~1composition-resource-name").and_then(Value::as_str).unwrap_or_default().to_string()
}

/// A string as Go's `%q` prints it.
fn go_quote(s: &str) -> String {
    oxplane_functions::golang::strconv::quote(s, false)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use serde_json::json;

    use super::*;

    fn crd() -> Value {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "buckets.example.org"},
            "spec": {"group": "example.org", "names": {"kind": "Bucket", "plural": "buckets"}, "scope": "Namespaced", "versions": [{
                "name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "required": ["size"], "properties": {
                        "size": {"type": "integer", "x-kubernetes-validations": [{"rule": "self <= 10", "message": "must be at most 10"}]},
                        "region": {"type": "string", "default": "eu"},
                    }},
                }}},
            }]}})
    }

    fn bucket(name: &str, spec: Value) -> Value {
        json!({"apiVersion": "example.org/v1", "kind": "Bucket", "metadata": {"name": name}, "spec": spec})
    }

    #[test]
    fn every_kind_of_finding_has_crossplanes_line() {
        let schemas = Schemas::compile(&[crd()]).unwrap();
        let mut objects = vec![
            bucket("good", json!({"size": 3})),
            bucket("unknown", json!({"size": 3, "colour": "red"})),
            bucket("wrong-type", json!({"size": 3, "region": 5})),
            bucket("too-big", json!({"size": 11})),
            json!({"apiVersion": "example.org/v2", "kind": "Bucket", "metadata": {"name": "v2"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"annotations": {"crossplane.io/composition-resource-name": "settings"}}}),
        ];
        let report = validate(&mut objects, &schemas, false);
        assert_eq!(
            report.lines,
            [
                "[✓] example.org/v1, Kind=Bucket, good validated successfully",
                "[x] schema validation error example.org/v1, Kind=Bucket, unknown : spec.colour: Invalid value: \"colour\": unknown field: \"colour\"",
                "[x] schema validation error example.org/v1, Kind=Bucket, wrong-type : spec.region: Invalid value: \"integer\": spec.region in body must be of type string: \"integer\"",
                "[x] CEL validation error example.org/v1, Kind=Bucket, too-big : spec.size: Invalid value: \"integer\": must be at most 10",
                "[!] could not find CRD/XRD for: example.org/v2, Kind=Bucket",
                "[!] could not find CRD/XRD for: /v1, Kind=ConfigMap",
                "Total 6 resources: 2 missing schemas, 1 success cases, 3 failure cases",
            ]
        );
        assert_eq!((report.failures, report.missing), (3, 2));
        assert_eq!(objects[0]["spec"]["region"], "eu", "defaults are applied");
        let quiet = validate(&mut [bucket("good", json!({"size": 1}))], &schemas, true);
        assert_eq!(quiet.lines, ["Total 1 resources: 0 missing schemas, 1 success cases, 0 failure cases"]);
    }

    #[test]
    fn a_schema_that_does_not_compile_is_an_error() {
        let mut bad = crd();
        bad["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["size"]["x-kubernetes-validations"][0]["rule"] = json!("self <=");
        assert!(Schemas::compile(&[bad]).err().unwrap().starts_with("cannot create schema validators"));
    }
}
