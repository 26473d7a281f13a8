//! Where Crossplane's machinery lives in a composite resource: under `spec.crossplane` for
//! modern (v2) XRs, at the top of `spec` for legacy (`LegacyCluster`) ones; and what the XRD
//! says about the composite type.

use oxplane_runtime::kinds::Kind;
use serde_json::{Value, json};

use crate::xrd::render;

/// The composite type an XRD defines, as its XR controller needs it.
#[derive(Clone, Debug)]
pub struct XrType {
    /// The XRD's name.
    pub xrd: String,
    /// The XR kind (its referenceable version).
    pub kind: Kind,
    /// Legacy (`LegacyCluster`): machinery at the top of `spec`, claims, connection secrets.
    pub legacy: bool,
    /// `spec.enforcedCompositionRef.name`.
    pub enforced_composition: Option<String>,
    /// `spec.defaultCompositionRef.name`.
    pub default_composition: Option<String>,
    /// `spec.defaultCompositionRevisionSelector`.
    pub default_revision_selector: Option<Value>,
    /// `spec.connectionSecretKeys` (empty: every key).
    pub connection_secret_keys: Vec<String>,
    /// The claim kind, when the XRD offers claims.
    pub claim: Option<Kind>,
}

impl XrType {
    /// The type an XRD defines; `None` when it has no referenceable version.
    pub fn of(xrd: &Value) -> Option<XrType> {
        let spec = xrd.get("spec")?;
        let group = spec.get("group")?.as_str()?;
        let version = render::referenceable_version(xrd)?;
        let names = spec.get("names")?;
        let scope = render::scope(xrd);
        let kind = Kind::new(
            group,
            &version,
            names.get("kind")?.as_str()?,
            names.get("plural")?.as_str()?,
            scope == render::Scope::Namespaced,
        );
        let text = |pointer: &str| spec.pointer(pointer).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string);
        let legacy = scope == render::Scope::LegacyCluster;
        let claim = match (legacy, spec.get("claimNames")) {
            (true, Some(claim)) => Some(Kind::new(
                group,
                &version,
                claim.get("kind").and_then(Value::as_str).unwrap_or_default(),
                claim.get("plural").and_then(Value::as_str).unwrap_or_default(),
                true,
            )),
            _ => None,
        };
        Some(XrType {
            xrd: xrd.pointer("/metadata/name")?.as_str()?.to_string(),
            kind,
            legacy,
            enforced_composition: text("/enforcedCompositionRef/name"),
            default_composition: text("/defaultCompositionRef/name"),
            default_revision_selector: spec.get("defaultCompositionRevisionSelector").filter(|s| !s.is_null()).cloned(),
            connection_secret_keys: spec
                .get("connectionSecretKeys")
                .and_then(Value::as_array)
                .map(|keys| keys.iter().filter_map(Value::as_str).map(str::to_string).collect())
                .unwrap_or_default(),
            claim,
        })
    }

    /// The JSON pointer of the machinery object (`/spec/crossplane` or `/spec`).
    pub fn machinery_pointer(&self) -> &'static str {
        if self.legacy { "/spec" } else { "/spec/crossplane" }
    }

    /// A machinery field of an XR (`compositionRef`, `resourceRefs`, ...).
    pub fn field<'a>(&self, xr: &'a Value, field: &str) -> Option<&'a Value> {
        xr.pointer(self.machinery_pointer()).and_then(|m| m.get(field)).filter(|v| !v.is_null())
    }

    /// A machinery field's string at `field.sub` (e.g. `compositionRef.name`).
    pub fn name_of(&self, xr: &Value, field: &str) -> Option<String> {
        self.field(xr, field).and_then(|f| f.get("name")).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string)
    }

    /// A merge patch setting machinery fields.
    pub fn patch(&self, fields: Value) -> Value {
        if self.legacy { json!({"spec": fields}) } else { json!({"spec": {"crossplane": fields}}) }
    }

    /// An object that sets machinery fields, for server-side apply.
    pub fn apply_object(&self, xr: &Value, fields: Value) -> Value {
        let mut object = json!({
            "apiVersion": self.kind.api_version(),
            "kind": self.kind.gvk.kind,
            "metadata": {"name": xr.pointer("/metadata/name")},
        });
        if let Some(namespace) = xr.pointer("/metadata/namespace") {
            object["metadata"]["namespace"] = namespace.clone();
        }
        object["spec"] = self.patch(fields)["spec"].clone();
        object
    }

    /// `compositionUpdatePolicy` (absent means Automatic).
    pub fn manual_updates(&self, xr: &Value) -> bool {
        self.field(xr, "compositionUpdatePolicy").and_then(Value::as_str) == Some("Manual")
    }

    /// The controller name Crossplane gives this XR controller.
    pub fn controller_name(&self) -> String {
        format!("composite/{}", self.xrd)
    }
}
