//! CustomResourceDefinitions: validating them, turning them into served kinds, and their status.
//!
//! A CRD becomes served in the same request that stores it: the write path registers its
//! resources and writes `status` (accepted names, `NamesAccepted`, `Established`, stored
//! versions) before answering, so a client may create custom resources right after. At start,
//! every stored CRD is registered again.

use oxplane_machinery::names::is_dns1123_label;
use serde_json::{Value, json};

use crate::objects;
use crate::registry::ResourceDef;
use crate::status::Cause;

/// The CRD kind's store prefix.
pub const CRD_PREFIX: &str = "/registry/apiextensions.k8s.io/customresourcedefinitions/";

fn cause(field: &str, reason: &str, message: impl Into<String>) -> Cause {
    Cause { reason: reason.into(), message: message.into(), field: field.into() }
}

/// Validates a CRD's spec; an empty result means it is acceptable.
pub fn validate(crd: &Value) -> Vec<Cause> {
    let mut causes = crate::webhooks::conversion::validate_crd(crd);
    let spec = &crd["spec"];
    let group = spec["group"].as_str().unwrap_or_default();
    let names = &spec["names"];
    let plural = names["plural"].as_str().unwrap_or_default();
    let kind = names["kind"].as_str().unwrap_or_default();
    if group.is_empty() {
        causes.push(cause("spec.group", "FieldValueRequired", "Required value"));
    } else if !group.contains('.') || objects::validate_name(group).is_some() {
        causes.push(cause("spec.group", "FieldValueInvalid", format!("Invalid value: \"{group}\": should be a domain with at least one dot")));
    }
    if plural.is_empty() {
        causes.push(cause("spec.names.plural", "FieldValueRequired", "Required value"));
    } else if !is_dns1123_label(plural) {
        causes.push(cause("spec.names.plural", "FieldValueInvalid", format!("Invalid value: \"{plural}\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-'")));
    }
    if kind.is_empty() {
        causes.push(cause("spec.names.kind", "FieldValueRequired", "Required value"));
    }
    if let Some(singular) = names["singular"].as_str()
        && !singular.is_empty()
        && !is_dns1123_label(singular)
    {
        causes.push(cause("spec.names.singular", "FieldValueInvalid", format!("Invalid value: \"{singular}\"")));
    }
    let name = objects::meta_str(crd, "name").unwrap_or_default();
    if !plural.is_empty() && !group.is_empty() && name != format!("{plural}.{group}") {
        causes.push(cause("metadata.name", "FieldValueInvalid", format!("Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group")));
    }
    match spec["scope"].as_str() {
        Some("Namespaced") | Some("Cluster") => {}
        Some(other) => causes.push(cause("spec.scope", "FieldValueNotSupported", format!("Unsupported value: \"{other}\": supported values: \"Cluster\", \"Namespaced\""))),
        None => causes.push(cause("spec.scope", "FieldValueRequired", "Required value")),
    }
    let versions = spec["versions"].as_array().cloned().unwrap_or_default();
    if versions.is_empty() {
        causes.push(cause("spec.versions", "FieldValueRequired", "Required value: must have exactly one version marked as storage version"));
    }
    let storage = versions.iter().filter(|v| v["storage"].as_bool() == Some(true)).count();
    if !versions.is_empty() && storage != 1 {
        causes.push(cause("spec.versions", "FieldValueInvalid", format!("Invalid value: must have exactly one version marked as storage version, found {storage}")));
    }
    let mut seen = Vec::new();
    for (i, version) in versions.iter().enumerate() {
        let name = version["name"].as_str().unwrap_or_default();
        if !is_dns1123_label(name) {
            causes.push(cause(&format!("spec.versions[{i}].name"), "FieldValueInvalid", format!("Invalid value: \"{name}\"")));
        }
        if seen.contains(&name) {
            causes.push(cause(&format!("spec.versions[{i}].name"), "FieldValueDuplicate", format!("Duplicate value: \"{name}\"")));
        }
        seen.push(name);
    }
    for (i, version) in versions.iter().enumerate() {
        let schema = &version["schema"]["openAPIV3Schema"];
        let field = format!("spec.versions[{i}].schema.openAPIV3Schema");
        if !schema.is_object() {
            causes.push(cause(&field, "FieldValueRequired", "Required value: schemas are required"));
            continue;
        }
        for problem in crate::schema::validate_structural(schema) {
            causes.push(cause(&field, "FieldValueInvalid", problem));
        }
        if let Err(error) = crate::schema::Schema::compile(schema) {
            causes.push(cause(&field, "FieldValueInvalid", error.to_string()));
        }
    }
    if !versions.is_empty() && !versions.iter().any(|v| v["served"].as_bool() == Some(true)) {
        causes.push(cause("spec.versions", "FieldValueInvalid", "Invalid value: must have at least one served version"));
    }
    causes
}

fn strings(value: &Value) -> Vec<String> {
    value.as_array().map(|a| a.iter().filter_map(|v| v.as_str().map(String::from)).collect()).unwrap_or_default()
}

/// The served resources of a (valid) CRD, one per served version.
pub fn resources(crd: &Value) -> Vec<ResourceDef> {
    let spec = &crd["spec"];
    let group = spec["group"].as_str().unwrap_or_default().to_string();
    let names = &spec["names"];
    let plural = names["plural"].as_str().unwrap_or_default().to_string();
    let kind = names["kind"].as_str().unwrap_or_default().to_string();
    let singular = names["singular"].as_str().filter(|s| !s.is_empty()).map(String::from).unwrap_or_else(|| kind.to_lowercase());
    let namespaced = spec["scope"].as_str() == Some("Namespaced");
    spec["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["served"].as_bool() == Some(true))
        .map(|v| {
            let mut subresources = Vec::new();
            if v["subresources"]["status"].is_object() {
                subresources.push("status".to_string());
            }
            let scale = v["subresources"]["scale"]["specReplicasPath"].as_str().map(|spec| crate::registry::ScalePaths {
                spec_replicas: spec.to_string(),
                status_replicas: v["subresources"]["scale"]["statusReplicasPath"].as_str().map(String::from),
                label_selector: v["subresources"]["scale"]["labelSelectorPath"].as_str().map(String::from),
            });
            if scale.is_some() {
                subresources.push("scale".to_string());
            }
            ResourceDef {
                group: group.clone(),
                version: v["name"].as_str().unwrap_or_default().to_string(),
                kind: kind.clone(),
                plural: plural.clone(),
                singular: singular.clone(),
                namespaced,
                short_names: strings(&names["shortNames"]),
                categories: strings(&names["categories"]),
                subresources,
                storage: format!("{group}/{plural}"),
                unconditional_update: false,
                crd: Some(objects::meta_str(crd, "name").unwrap_or_default().to_string()),
                columns: crate::table::crd_columns(v),
                schema: v["schema"]["openAPIV3Schema"].is_object().then(|| std::sync::Arc::new(v["schema"]["openAPIV3Schema"].clone())),
                validation: crate::schema::Schema::compile(&v["schema"]["openAPIV3Schema"])
                    .ok()
                    .filter(|_| v["schema"]["openAPIV3Schema"].is_object())
                    .map(|schema| crate::registry::CompiledSchema(std::sync::Arc::new(schema))),
                scale,
                apply_types: Default::default(),
                // As kube-apiserver: the version's own warning, else "<apiVersion> <Kind> is deprecated".
                deprecation_warning: (v["deprecated"].as_bool() == Some(true)).then(|| {
                    v["deprecationWarning"].as_str().map(String::from).unwrap_or_else(|| {
                        format!("{group}/{} {kind} is deprecated", v["name"].as_str().unwrap_or_default())
                    })
                }),
                create_only: false,
            }
        })
        .collect()
}

/// The status the server writes for an accepted CRD: its names accepted, `NamesAccepted` and
/// `Established` true, and the stored versions (the storage version added to any recorded).
pub fn accepted_status(crd: &Value, names_conflict: Option<String>) -> Value {
    let now = objects::now_rfc3339();
    let existing = &crd["status"]["conditions"];
    let transition = |kind: &str, status: &str| {
        existing
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == kind && c["status"] == status))
            .and_then(|c| c["lastTransitionTime"].as_str().map(String::from))
            .unwrap_or_else(|| now.clone())
    };
    let mut stored = strings(&crd["status"]["storedVersions"]);
    if let Some(storage) = crd["spec"]["versions"]
        .as_array()
        .and_then(|vs| vs.iter().find(|v| v["storage"].as_bool() == Some(true)))
        .and_then(|v| v["name"].as_str())
        && !stored.iter().any(|s| s == storage)
    {
        stored.push(storage.to_string());
    }
    let (names_status, names_reason, names_message, established) = match &names_conflict {
        None => ("True", "NoConflicts", "no conflicts found".to_string(), ("True", "InitialNamesAccepted", "the initial names have been accepted")),
        Some(conflict) => ("False", "NameConflict", conflict.clone(), ("False", "NotAccepted", "not all names are accepted")),
    };
    let mut accepted = crd["spec"]["names"].clone();
    if accepted["singular"].as_str().is_none_or(str::is_empty) {
        accepted["singular"] = json!(crd["spec"]["names"]["kind"].as_str().unwrap_or_default().to_lowercase());
    }
    if accepted["listKind"].as_str().is_none_or(str::is_empty) {
        accepted["listKind"] = json!(format!("{}List", crd["spec"]["names"]["kind"].as_str().unwrap_or_default()));
    }
    json!({
        "acceptedNames": if names_conflict.is_none() { accepted } else { json!({"plural": "", "kind": ""}) },
        "conditions": [
            {"type": "NamesAccepted", "status": names_status, "reason": names_reason, "message": names_message,
             "lastTransitionTime": transition("NamesAccepted", names_status)},
            {"type": "Established", "status": established.0, "reason": established.1, "message": established.2,
             "lastTransitionTime": transition("Established", established.0)},
        ],
        "storedVersions": stored,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open() -> Value {
        json!({"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}})
    }

    fn widget_crd() -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
                     "versions": [
                        {"name": "v1", "served": true, "storage": true, "subresources": {"status": {}}, "schema": open()},
                        {"name": "v1beta1", "served": true, "storage": false, "schema": open()},
                        {"name": "v1alpha1", "served": false, "storage": false, "schema": open()}]}
        })
    }

    #[test]
    fn a_valid_crd_serves_each_served_version() {
        let crd = widget_crd();
        assert!(validate(&crd).is_empty(), "{:?}", validate(&crd));
        let defs = resources(&crd);
        let versions: Vec<_> = defs.iter().map(|d| d.version.as_str()).collect();
        assert_eq!(versions, ["v1", "v1beta1"]);
        assert_eq!(defs[0].subresources, ["status"]);
        assert!(defs[1].subresources.is_empty());
        assert_eq!(defs[0].singular, "widget");
        assert_eq!(defs[0].storage, defs[1].storage);
        let status = accepted_status(&crd, None);
        assert_eq!(status["conditions"][1]["type"], "Established");
        assert_eq!(status["conditions"][1]["status"], "True");
        assert_eq!(status["storedVersions"], json!(["v1"]));
        assert_eq!(status["acceptedNames"]["listKind"], "WidgetList");
    }

    #[test]
    fn invalid_crds_name_each_problem() {
        let mut crd = widget_crd();
        crd["metadata"]["name"] = json!("gadgets.example.com");
        crd["spec"]["versions"][1]["storage"] = json!(true);
        crd["spec"]["scope"] = json!("Galaxy");
        let fields: Vec<String> = validate(&crd).into_iter().map(|c| c.field).collect();
        assert_eq!(fields, ["metadata.name", "spec.scope", "spec.versions"]);
        let mut crd = widget_crd();
        crd["spec"]["versions"][0]["schema"] = json!({"openAPIV3Schema": {"type": "object", "properties": {"spec": {"properties": {"a": {"type": "string"}}}}}});
        let causes = validate(&crd);
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert_eq!(causes[0].field, "spec.versions[0].schema.openAPIV3Schema");
        crd["spec"]["versions"][0].as_object_mut().unwrap().remove("schema");
        assert_eq!(validate(&crd)[0].reason, "FieldValueRequired");
        let mut crd = widget_crd();
        crd["spec"]["group"] = json!("nodot");
        crd["metadata"]["name"] = json!("widgets.nodot");
        assert_eq!(validate(&crd)[0].field, "spec.group");
    }
}
