//! Renders the CustomResourceDefinitions a CompositeResourceDefinition stands for: the one it
//! defines (the composite resource, "XR") and the one it offers (the claim, legacy XRDs only).
//!
//! The rendering is pure so that the XRD controllers, `oxplane validate` and tests share one
//! definition of what an XR or claim looks like. Both XRD API versions (v1 and v2) arrive here
//! through the same storage; they differ only in their defaults, which are decided from the
//! `apiVersion` the object carries. The user's schema is merged first and Crossplane's own fields
//! are injected last, so a user property of the same name can never shadow them.

use serde_json::{Map, Value, json};

/// The API group of XRDs.
const XRD_GROUP: &str = "apiextensions.crossplane.io";
/// The apiVersion of v2 XRDs, whose defaults differ from v1's.
const XRD_V2: &str = "apiextensions.crossplane.io/v2";
/// The apiVersion used when an XRD arrives without one (v1 is the storage version).
const XRD_V1: &str = "apiextensions.crossplane.io/v1";
/// The kind of XRDs.
const XRD_KIND: &str = "CompositeResourceDefinition";
/// The longest composite resource or claim name: names of XRs become label values.
const MAX_NAME_LENGTH: u64 = 63;
/// The category every XR CRD joins.
const CATEGORY_COMPOSITE: &str = "composite";
/// The category every claim CRD joins.
const CATEGORY_CLAIM: &str = "claim";
/// The description of a modern XR's `spec.crossplane`.
const CROSSPLANE_DESCRIPTION: &str = "Configures how Crossplane will reconcile this composite resource";

/// Why an XRD could not be rendered into a CRD.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// A version has no `schema.openAPIV3Schema`.
    #[error("custom resource validation cannot be nil")]
    MissingSchema {
        /// The version without a schema.
        version: String,
    },
    /// A version's `schema.openAPIV3Schema` is not an object.
    #[error("cannot parse validation schema of version {version:?}: openAPIV3Schema must be an object")]
    InvalidSchema {
        /// The version with the unusable schema.
        version: String,
    },
    /// Not exactly one version is referenceable.
    #[error("exactly one version must be referenceable, found {found}")]
    Referenceable {
        /// How many versions are marked referenceable.
        found: usize,
    },
    /// A field the CRD is built from is missing or has the wrong type.
    #[error("composite resource definition has no valid {field}")]
    MissingField {
        /// The missing field's path.
        field: &'static str,
    },
    /// `spec.scope` holds a value no XRD version allows.
    #[error("unsupported scope {0:?}: supported values: \"Namespaced\", \"Cluster\", \"LegacyCluster\"")]
    UnknownScope(String),
}

/// The scope of an XRD's composite resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Modern namespaced XRs (the v2 default).
    Namespaced,
    /// Modern cluster-scoped XRs.
    Cluster,
    /// Crossplane 1.x-style cluster-scoped XRs, which may offer claims (the v1 default).
    LegacyCluster,
}

/// Whether the XRD arrived as a v2 object, whose defaults differ from v1's.
fn is_v2(xrd: &Value) -> bool {
    xrd["apiVersion"].as_str() == Some(XRD_V2)
}

/// Parses `spec.scope`, applying the default of the XRD's version when it is absent.
fn parse_scope(xrd: &Value) -> Result<Scope, RenderError> {
    match xrd["spec"]["scope"].as_str() {
        Some("Namespaced") => Ok(Scope::Namespaced),
        Some("Cluster") => Ok(Scope::Cluster),
        Some("LegacyCluster") => Ok(Scope::LegacyCluster),
        Some(other) => Err(RenderError::UnknownScope(other.to_string())),
        // A v2 object that was never defaulted still means what its CRD's default says; anything
        // else without a scope (v1, or an XRD stored before scopes existed) is legacy.
        None if is_v2(xrd) => Ok(Scope::Namespaced),
        None => Ok(Scope::LegacyCluster),
    }
}

/// The scope of an XRD's composite resources: `spec.scope`, else the default of the XRD's
/// version (v2: Namespaced; v1 or unknown: LegacyCluster). An unsupported value is treated as
/// absent; rendering reports it.
pub fn scope(xrd: &Value) -> Scope {
    parse_scope(xrd).unwrap_or(if is_v2(xrd) { Scope::Namespaced } else { Scope::LegacyCluster })
}

/// Whether the XRD defines legacy (Crossplane 1.x-style) composite resources.
pub fn is_legacy(xrd: &Value) -> bool {
    scope(xrd) == Scope::LegacyCluster
}

/// The versions of the XRD marked referenceable.
fn referenceable_versions(xrd: &Value) -> Vec<&Value> {
    versions(xrd).iter().filter(|v| v["referenceable"].as_bool() == Some(true)).collect()
}

/// The XRD's `spec.versions`, empty when absent.
fn versions(xrd: &Value) -> &[Value] {
    xrd["spec"]["versions"].as_array().map_or(&[], Vec::as_slice)
}

/// The name of the one referenceable version, the one Crossplane reconciles; `None` when there
/// is not exactly one.
pub fn referenceable_version(xrd: &Value) -> Option<String> {
    match referenceable_versions(xrd).as_slice() {
        [only] => only["name"].as_str().map(String::from),
        _ => None,
    }
}

/// The CRD of the composite resource the XRD defines.
pub fn xr_crd(xrd: &Value) -> Result<Value, RenderError> {
    let scope = parse_scope(xrd)?;
    let legacy = scope == Scope::LegacyCluster;
    let name = xrd["metadata"]["name"].as_str().ok_or(RenderError::MissingField { field: "metadata.name" })?;
    let update_policy = xrd["spec"]["defaultCompositionUpdatePolicy"].as_str().unwrap_or("Automatic");
    let reconcile = composite_spec_props(scope, update_policy);
    let spec = if legacy {
        reconcile
    } else {
        let mut crossplane = Map::new();
        crossplane.insert(
            "crossplane".into(),
            json!({"type": "object", "description": CROSSPLANE_DESCRIPTION, "properties": reconcile}),
        );
        crossplane
    };
    let injection = Injection { spec, status: status_props(legacy), columns: composite_columns(legacy) };
    let crd_scope = if scope == Scope::Namespaced { "Namespaced" } else { "Cluster" };
    render_crd(xrd, name, &xrd["spec"]["names"], "spec.names", CATEGORY_COMPOSITE, crd_scope, &injection)
}

/// The CRD of the claim the XRD offers; `None` unless the XRD is legacy and names a claim.
pub fn claim_crd(xrd: &Value) -> Result<Option<Value>, RenderError> {
    let claim_names = &xrd["spec"]["claimNames"];
    if !claim_names.is_object() || parse_scope(xrd)? != Scope::LegacyCluster {
        return Ok(None);
    }
    let plural = claim_names["plural"].as_str().ok_or(RenderError::MissingField { field: "spec.claimNames.plural" })?;
    let group = xrd["spec"]["group"].as_str().ok_or(RenderError::MissingField { field: "spec.group" })?;
    // v1 defaults the delete policy to Background; a v2 object carries whatever storage holds.
    let delete_policy = xrd["spec"]["defaultCompositeDeletePolicy"]
        .as_str()
        .or(if is_v2(xrd) { None } else { Some("Background") });
    let injection = Injection { spec: claim_spec_props(delete_policy), status: status_props(true), columns: claim_columns() };
    let name = format!("{plural}.{group}");
    render_crd(xrd, &name, claim_names, "spec.claimNames", CATEGORY_CLAIM, "Namespaced", &injection).map(Some)
}

/// What Crossplane adds to every version of a rendered CRD.
struct Injection {
    /// Properties set in `spec`, replacing the user's of the same name.
    spec: Map<String, Value>,
    /// Properties set in `status`, replacing the user's of the same name.
    status: Map<String, Value>,
    /// Printer columns appended after the user's.
    columns: Vec<Value>,
}

/// The CRD shared by XRs and claims: metadata, owner, names and one version per XRD version.
fn render_crd(
    xrd: &Value,
    name: &str,
    names: &Value,
    names_field: &'static str,
    category: &str,
    scope: &str,
    injection: &Injection,
) -> Result<Value, RenderError> {
    let group = xrd["spec"]["group"].as_str().ok_or(RenderError::MissingField { field: "spec.group" })?;
    let mut names = names.as_object().cloned().ok_or(RenderError::MissingField { field: names_field })?;
    let mut categories = names.get("categories").and_then(Value::as_array).cloned().unwrap_or_default();
    if !categories.iter().any(|c| c == category) {
        categories.push(json!(category));
    }
    names.insert("categories".into(), Value::Array(categories));

    let found = referenceable_versions(xrd).len();
    if found != 1 {
        return Err(RenderError::Referenceable { found });
    }
    let versions = versions(xrd)
        .iter()
        .map(|version| render_version(version, injection))
        .collect::<Result<Vec<_>, _>>()?;

    let mut metadata = Map::new();
    metadata.insert("name".into(), json!(name));
    let mut labels = xrd["metadata"]["labels"].as_object().cloned().unwrap_or_default();
    if let Some(extra) = xrd["spec"]["metadata"]["labels"].as_object() {
        labels.extend(extra.clone());
    }
    if !labels.is_empty() {
        metadata.insert("labels".into(), Value::Object(labels));
    }
    // Only the annotations the XRD asks for are copied; its own describe the XRD, not the CRD.
    if let Some(annotations) = xrd["spec"]["metadata"]["annotations"].as_object().filter(|a| !a.is_empty()) {
        metadata.insert("annotations".into(), Value::Object(annotations.clone()));
    }
    metadata.insert("ownerReferences".into(), json!([owner_reference(xrd)]));

    let mut spec = Map::new();
    spec.insert("group".into(), json!(group));
    spec.insert("names".into(), Value::Object(names));
    spec.insert("scope".into(), json!(scope));
    spec.insert("versions".into(), Value::Array(versions));
    if xrd["spec"]["conversion"].is_object() {
        spec.insert("conversion".into(), xrd["spec"]["conversion"].clone());
    }
    Ok(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": metadata,
        "spec": spec,
    }))
}

/// The controller reference from a rendered CRD to its XRD, which makes the CRD go when the XRD
/// goes and lets the controller refuse to adopt a CRD another XRD owns.
fn owner_reference(xrd: &Value) -> Value {
    let api_version = xrd["apiVersion"].as_str().filter(|v| v.starts_with(&format!("{XRD_GROUP}/"))).unwrap_or(XRD_V1);
    json!({
        "apiVersion": api_version,
        "kind": XRD_KIND,
        "name": xrd["metadata"]["name"].as_str().unwrap_or_default(),
        "uid": xrd["metadata"]["uid"].as_str().unwrap_or_default(),
        "controller": true,
        "blockOwnerDeletion": true,
    })
}

/// One CRD version from one XRD version.
fn render_version(version: &Value, injection: &Injection) -> Result<Value, RenderError> {
    let name = version["name"].as_str().ok_or(RenderError::MissingField { field: "spec.versions[].name" })?;
    let user = match &version["schema"]["openAPIV3Schema"] {
        Value::Null => return Err(RenderError::MissingSchema { version: name.to_string() }),
        Value::Object(_) => &version["schema"]["openAPIV3Schema"],
        _ => return Err(RenderError::InvalidSchema { version: name.to_string() }),
    };
    let mut out = Map::new();
    out.insert("name".into(), json!(name));
    out.insert("served".into(), json!(version["served"].as_bool().unwrap_or(false)));
    out.insert("storage".into(), json!(version["referenceable"].as_bool().unwrap_or(false)));
    out.insert("deprecated".into(), json!(version["deprecated"].as_bool().unwrap_or(false)));
    if let Some(warning) = version["deprecationWarning"].as_str() {
        out.insert("deprecationWarning".into(), json!(warning));
    }
    out.insert("schema".into(), json!({"openAPIV3Schema": render_schema(user, injection)}));
    let mut subresources = Map::new();
    subresources.insert("status".into(), json!({}));
    if version["subresources"]["scale"].is_object() {
        subresources.insert("scale".into(), version["subresources"]["scale"].clone());
    }
    out.insert("subresources".into(), Value::Object(subresources));
    let mut columns = version["additionalPrinterColumns"].as_array().cloned().unwrap_or_default();
    columns.extend(injection.columns.iter().cloned());
    out.insert("additionalPrinterColumns".into(), Value::Array(columns));
    Ok(Value::Object(out))
}

/// The version's schema: the fixed skeleton, the parts of the user's schema Crossplane keeps,
/// then the injected properties.
fn render_schema(user: &Value, injection: &Injection) -> Value {
    let max_name_length = user["properties"]["metadata"]["properties"]["name"]["maxLength"]
        .as_u64()
        .map_or(MAX_NAME_LENGTH, |user_max| user_max.min(MAX_NAME_LENGTH));
    let mut root = Map::new();
    root.insert("type".into(), json!("object"));
    copy_description(user, &mut root);
    root.insert("required".into(), json!(["spec"]));
    root.insert(
        "properties".into(),
        json!({
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            // The server validates the rest of metadata itself; only the name's length is ours.
            "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": max_name_length}}},
            "spec": merge_object(&user["properties"]["spec"], &injection.spec),
            "status": merge_object(&user["properties"]["status"], &injection.status),
        }),
    );
    copy_non_empty(user, "x-kubernetes-validations", &mut root);
    Value::Object(root)
}

/// `spec` or `status`: an object with the user's properties, required list, validations, oneOf
/// and description, and the injected properties over them.
fn merge_object(user: &Value, injected: &Map<String, Value>) -> Value {
    let mut out = Map::new();
    out.insert("type".into(), json!("object"));
    copy_description(user, &mut out);
    let mut properties = user["properties"].as_object().cloned().unwrap_or_default();
    properties.extend(injected.iter().map(|(k, v)| (k.clone(), v.clone())));
    out.insert("properties".into(), Value::Object(properties));
    for key in ["required", "x-kubernetes-validations", "oneOf"] {
        copy_non_empty(user, key, &mut out);
    }
    Value::Object(out)
}

/// Copies a non-empty `description`.
fn copy_description(from: &Value, to: &mut Map<String, Value>) {
    if let Some(description) = from["description"].as_str().filter(|d| !d.is_empty()) {
        to.insert("description".into(), json!(description));
    }
}

/// Copies a non-empty list.
fn copy_non_empty(from: &Value, key: &str, to: &mut Map<String, Value>) {
    if let Some(list) = from[key].as_array().filter(|l| !l.is_empty()) {
        to.insert(key.into(), Value::Array(list.clone()));
    }
}

/// `{name}` with the name required: a reference to a Composition or CompositionRevision.
fn name_reference() -> Value {
    json!({"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}})
}

/// `{matchLabels}` with the labels required: a selector of Compositions or revisions.
fn match_labels_selector() -> Value {
    json!({
        "type": "object",
        "required": ["matchLabels"],
        "properties": {"matchLabels": {"type": "object", "additionalProperties": {"type": "string"}}},
    })
}

/// The update policy enum, with a default when one applies.
fn update_policy(default: Option<&str>) -> Value {
    let mut policy = json!({"type": "string", "enum": ["Automatic", "Manual"]});
    if let Some(default) = default {
        policy["default"] = json!(default);
    }
    policy
}

/// The properties Crossplane reconciles an XR with: under `spec.crossplane` for modern XRs, at
/// the top of `spec` for legacy ones (which also get the claim and connection secret refs).
fn composite_spec_props(scope: Scope, update_policy_default: &str) -> Map<String, Value> {
    let mut ref_properties = json!({
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "name": {"type": "string"},
    });
    // A namespaced XR may compose only into its own namespace, so its refs carry none.
    if scope != Scope::Namespaced {
        ref_properties["namespace"] = json!({"type": "string"});
    }
    let mut props = Map::new();
    props.insert("compositionRef".into(), name_reference());
    props.insert("compositionSelector".into(), match_labels_selector());
    props.insert("compositionRevisionRef".into(), name_reference());
    props.insert("compositionRevisionSelector".into(), match_labels_selector());
    props.insert("compositionUpdatePolicy".into(), update_policy(Some(update_policy_default)));
    props.insert(
        "resourceRefs".into(),
        json!({
            "type": "array",
            "items": {"type": "object", "required": ["apiVersion", "kind"], "properties": ref_properties},
            "x-kubernetes-list-type": "atomic",
        }),
    );
    if scope == Scope::LegacyCluster {
        props.insert(
            "claimRef".into(),
            json!({
                "type": "object",
                "required": ["apiVersion", "kind", "namespace", "name"],
                "properties": {
                    "apiVersion": {"type": "string"},
                    "kind": {"type": "string"},
                    "namespace": {"type": "string"},
                    "name": {"type": "string"},
                },
            }),
        );
        props.insert(
            "writeConnectionSecretToRef".into(),
            json!({
                "type": "object",
                "required": ["name", "namespace"],
                "properties": {"name": {"type": "string"}, "namespace": {"type": "string"}},
            }),
        );
    }
    props
}

/// The properties Crossplane reconciles a claim with.
fn claim_spec_props(delete_policy_default: Option<&str>) -> Map<String, Value> {
    let mut delete_policy = json!({"type": "string", "enum": ["Background", "Foreground"]});
    if let Some(default) = delete_policy_default {
        delete_policy["default"] = json!(default);
    }
    let mut props = Map::new();
    props.insert("compositionRef".into(), name_reference());
    props.insert("compositionSelector".into(), match_labels_selector());
    props.insert("compositionRevisionRef".into(), name_reference());
    props.insert("compositionRevisionSelector".into(), match_labels_selector());
    // No default: an absent policy lets the XR's own default apply.
    props.insert("compositionUpdatePolicy".into(), update_policy(None));
    props.insert("compositeDeletePolicy".into(), delete_policy);
    props.insert(
        "resourceRef".into(),
        json!({
            "type": "object",
            "required": ["apiVersion", "kind", "name"],
            "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"}, "name": {"type": "string"}},
        }),
    );
    // The secret always lands in the claim's namespace, so only its name is asked for.
    props.insert(
        "writeConnectionSecretToRef".into(),
        json!({"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}),
    );
    props
}

/// The status properties Crossplane writes; legacy XRs and claims also track connection
/// details and the claim's condition types.
fn status_props(legacy: bool) -> Map<String, Value> {
    let mut props = Map::new();
    props.insert(
        "conditions".into(),
        json!({
            "description": "Conditions of the resource.",
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
            "items": {
                "type": "object",
                "required": ["lastTransitionTime", "reason", "status", "type"],
                "properties": {
                    "lastTransitionTime": {"type": "string", "format": "date-time"},
                    "message": {"type": "string"},
                    "observedGeneration": {"type": "integer", "format": "int64"},
                    "reason": {"type": "string"},
                    "status": {"type": "string"},
                    "type": {"type": "string"},
                },
            },
        }),
    );
    props.insert("observedGeneration".into(), json!({"type": "integer", "format": "int64"}));
    if legacy {
        props.insert(
            "connectionDetails".into(),
            json!({
                "type": "object",
                "properties": {"lastPublishedTime": {"type": "string", "format": "date-time"}},
            }),
        );
        props.insert(
            "claimConditionTypes".into(),
            json!({"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}),
        );
    }
    props
}

/// A printer column showing a condition's status.
fn condition_column(name: &str, condition: &str) -> Value {
    json!({"name": name, "type": "string", "jsonPath": format!(".status.conditions[?(@.type=='{condition}')].status")})
}

/// The age column every kind ends with.
fn age_column() -> Value {
    json!({"name": "AGE", "type": "date", "jsonPath": ".metadata.creationTimestamp"})
}

/// The columns appended to an XR's: its conditions, its composition (and revision, wide only)
/// and its age.
fn composite_columns(legacy: bool) -> Vec<Value> {
    let prefix = if legacy { ".spec" } else { ".spec.crossplane" };
    vec![
        condition_column("SYNCED", "Synced"),
        condition_column("READY", "Ready"),
        json!({"name": "COMPOSITION", "type": "string", "jsonPath": format!("{prefix}.compositionRef.name")}),
        json!({
            "name": "COMPOSITIONREVISION",
            "type": "string",
            "jsonPath": format!("{prefix}.compositionRevisionRef.name"),
            "priority": 1,
        }),
        age_column(),
    ]
}

/// The columns appended to a claim's: its conditions, its connection secret and its age.
fn claim_columns() -> Vec<Value> {
    vec![
        condition_column("SYNCED", "Synced"),
        condition_column("READY", "Ready"),
        json!({"name": "CONNECTION-SECRET", "type": "string", "jsonPath": ".spec.writeConnectionSecretToRef.name"}),
        age_column(),
    ]
}

#[cfg(test)]
mod tests;
