//! The CRDs `validate` checks against, from its extensions: CRDs as they are; XRDs turned into
//! the CRDs they generate (composite and claim), by the same code the XRD controller uses;
//! Providers that are built into oxplane by their own CRDs; and always Crossplane's core CRDs
//! (Crossplane's CLI fetches those from its image; oxplane serves the same ones). Nothing is
//! downloaded: a package that is not built in is reported and its kinds stay unknown.

use anyhow::Context;
use oxplane_runtime::provider::package_name;
use serde_json::Value;

use crate::commands::load;

/// The CRDs of `extensions`, and a note for each extension whose schemas oxplane cannot know.
pub fn crds(extensions: &[Value]) -> anyhow::Result<(Vec<Value>, Vec<String>)> {
    let mut crds = oxplane_composition::crds::core_crds().context("cannot load Crossplane's CRDs")?;
    let mut notes = Vec::new();
    let providers = oxplane_providers::catalog();
    for object in extensions {
        let (group, _) = load::group_version(object);
        let name = load::name(object);
        match (group.as_str(), load::kind(object)) {
            ("apiextensions.k8s.io", "CustomResourceDefinition") => crds.push(object.clone()),
            ("apiextensions.crossplane.io", "CompositeResourceDefinition") => {
                let cannot = || format!("cannot prepare extensions: cannot derive composite CRD from XRD {name:?}");
                crds.push(oxplane_composition::xrd::render::xr_crd(object).with_context(cannot)?);
                if let Some(claim) = oxplane_composition::xrd::render::claim_crd(object).with_context(cannot)? {
                    crds.push(claim);
                }
            }
            ("pkg.crossplane.io", kind @ ("Provider" | "Configuration" | "Function")) => {
                let reference = object.pointer("/spec/package").and_then(Value::as_str).unwrap_or_default();
                match providers.iter().find(|p| kind == "Provider" && p.name() == package_name(reference)) {
                    Some(provider) => crds.extend(provider.crds(reference)),
                    // A function's package brings no kinds resources are made of.
                    None if kind == "Function" => {}
                    None => notes.push(format!(
                        "{kind} {name:?}: package {reference:?} is not built into oxplane and nothing is downloaded; add its CRDs to the extensions to validate its kinds"
                    )),
                }
            }
            _ => {}
        }
    }
    Ok((crds, notes))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use serde_json::json;

    use super::*;

    fn kinds(crds: &[Value]) -> Vec<String> {
        crds.iter().filter_map(|c| c.pointer("/spec/names/kind").and_then(Value::as_str).map(str::to_string)).collect()
    }

    #[test]
    fn xrds_providers_and_crds_become_crds_beside_crossplanes_own() {
        let xrd = json!({"apiVersion": "apiextensions.crossplane.io/v1", "kind": "CompositeResourceDefinition", "metadata": {"name": "xqueues.example.org"},
            "spec": {"group": "example.org", "names": {"kind": "XQueue", "plural": "xqueues"}, "claimNames": {"kind": "Queue", "plural": "queues"},
                "versions": [{"name": "v1", "served": true, "referenceable": true, "schema": {"openAPIV3Schema": {"type": "object"}}}]}});
        let provider = json!({"apiVersion": "pkg.crossplane.io/v1", "kind": "Provider", "metadata": {"name": "provider-nop"},
            "spec": {"package": "xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.5.0"}});
        let foreign = json!({"apiVersion": "pkg.crossplane.io/v1", "kind": "Provider", "metadata": {"name": "provider-aws"},
            "spec": {"package": "xpkg.upbound.io/upbound/provider-aws-s3:v1"}});
        let (crds, notes) = crds(&[xrd, provider, foreign]).unwrap();
        let kinds = kinds(&crds);
        for kind in ["Composition", "CompositeResourceDefinition", "Provider", "XQueue", "Queue", "NopResource"] {
            assert!(kinds.iter().any(|k| k == kind), "{kind} in {kinds:?}");
        }
        assert_eq!(notes.len(), 1);
        assert!(notes[0].contains("provider-aws-s3"), "{notes:?}");
    }
}
