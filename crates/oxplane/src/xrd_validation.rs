//! The validation of XRDs by the CRDs they generate, as an admission hook of the embedded API
//! server (what Crossplane runs as the `compositeresourcedefinitions.apiextensions.crossplane.io`
//! webhook, which dry-runs the generated CRDs): an XRD whose composite or claim CRD the API
//! server would refuse is itself refused at admission, with the CRD's causes moved to the XRD's
//! own fields (`spec.claimNames.plural` rather than the claim CRD's `spec.names.plural`), so a
//! bad XRD never sits in the store without a status.

use oxplane_apiserver::ops::admission::{AdmissionHook, AdmissionRequest, HookFuture, Operation};
use oxplane_apiserver::state::AppState;
use oxplane_apiserver::status::{ApiError, Cause};
use oxplane_composition::xrd::render;
use serde_json::Value;

/// The hook.
pub struct XrdValidation;

/// The causes of refusing `xrd`, at the XRD's own fields; empty when it is acceptable.
pub fn causes(xrd: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let rendered = [("spec.names", render::xr_crd(xrd).map(Some)), ("spec.claimNames", render::claim_crd(xrd))];
    for (names_field, crd) in rendered {
        match crd {
            Ok(Some(crd)) => causes.extend(oxplane_apiserver::crd::validate(&crd).into_iter().filter_map(|cause| at_xrd_field(cause, names_field))),
            Ok(None) => {}
            Err(error) => causes.push(Cause { reason: "FieldValueInvalid".into(), message: error.to_string(), field: "spec".into() }),
        }
    }
    causes.dedup();
    causes
}

/// Moves a cause of a generated CRD to the XRD field it comes from; `None` for causes the
/// XRD's own schema already reports (its name, group and scope).
fn at_xrd_field(mut cause: Cause, names_field: &str) -> Option<Cause> {
    if let Some(rest) = cause.field.strip_prefix("spec.names") {
        cause.field = format!("{names_field}{rest}");
        return Some(cause);
    }
    // The versions and their schemas are the XRD's own, at the same paths.
    cause.field.starts_with("spec.versions").then_some(cause)
}

impl AdmissionHook for XrdValidation {
    fn name(&self) -> &str {
        "compositeresourcedefinitions.apiextensions.crossplane.io"
    }

    fn validate<'a>(&'a self, _state: &'a AppState, request: &'a AdmissionRequest<'a>, object: &'a Value) -> HookFuture<'a> {
        Box::pin(async move {
            let resource = request.resource;
            let is_xrd = resource.group == "apiextensions.crossplane.io" && resource.kind == "CompositeResourceDefinition";
            if !is_xrd || request.operation == Operation::Delete || request.subresource.is_some() {
                return Ok(());
            }
            // An XRD on its way out keeps whatever it was accepted with.
            if object.pointer("/metadata/deletionTimestamp").is_some() {
                return Ok(());
            }
            let causes = causes(object);
            if causes.is_empty() {
                return Ok(());
            }
            Err(ApiError::invalid(&resource.kind, &resource.group, request.name, causes))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn xrd(claim_plural: &str) -> Value {
        json!({
            "apiVersion": "apiextensions.crossplane.io/v1",
            "kind": "CompositeResourceDefinition",
            "metadata": {"name": "xnops.nop.example.org"},
            "spec": {
                "group": "nop.example.org",
                "names": {"kind": "XNop", "plural": "xnops"},
                "claimNames": {"kind": "Nop", "plural": claim_plural},
                "versions": [{"name": "v1alpha1", "served": true, "referenceable": true,
                              "schema": {"openAPIV3Schema": {"type": "object"}}}]
            }
        })
    }

    #[test]
    fn a_claim_plural_the_claim_crd_refuses_is_refused_at_the_xrd_field() {
        assert_eq!(causes(&xrd("nops")), Vec::<Cause>::new());
        let found = causes(&xrd("Nopresourcestwo"));
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].field, "spec.claimNames.plural");
        assert!(found[0].message.starts_with("Invalid value: \"Nopresourcestwo\": a lowercase RFC 1123 label"), "{}", found[0].message);
    }
}
