//! ManagedResourceDefinitions (MRDs) and ManagedResourceActivationPolicies (MRAPs): a
//! provider's managed resource kinds are installed as MRDs, and only an active MRD gets its
//! CustomResourceDefinition, so a cluster serves just the kinds someone asked for.
//!
//! - this file: the kinds, a provider CRD turned into an MRD (and back), which kinds stay plain
//!   CRDs, and how an MRAP's entries match MRD names;
//! - `definitions.rs`: the MRD controller (creates the CRD of an active MRD, `Established`);
//! - `policies.rs`: the MRAP controller (activates what its entries match, `Healthy`) and the
//!   default policy `oxplane up` creates;
//! - `install.rs`: what a provider revision installs: an MRD per managed CRD (active unless
//!   the provider is `safe-start`), its ProviderConfig kinds as plain CRDs.

mod definitions;
mod install;
mod policies;

pub use definitions::start_controller as start_definition_controller;
pub use install::{InstalledKinds, install_provider_crds, is_safe_start, mark_installed, object_ref};
pub use policies::{DEFAULT_POLICY_NAME, install_default_policy, start_controller as start_policy_controller};

use oxplane_runtime::kinds::Kind;
use oxplane_runtime::object;
use serde_json::{Map, Value, json};

/// The field manager the MRD controller applies CRDs with.
pub const FIELD_MANAGER: &str = "apiextensions.crossplane.io/managed";

/// `apiextensions.crossplane.io/v1alpha1` `ManagedResourceDefinition`.
pub fn mrd_kind() -> Kind {
    Kind::new("apiextensions.crossplane.io", "v1alpha1", "ManagedResourceDefinition", "managedresourcedefinitions", false)
}

/// `apiextensions.crossplane.io/v1alpha1` `ManagedResourceActivationPolicy`.
pub fn mrap_kind() -> Kind {
    Kind::new("apiextensions.crossplane.io", "v1alpha1", "ManagedResourceActivationPolicy", "managedresourceactivationpolicies", false)
}

/// The kinds of a provider package that stay plain CRDs, as Crossplane's converter leaves
/// them (matched on `spec.names.kind`): the provider's configuration and its usage tracking,
/// which the provider needs whatever managed kinds are active.
pub const PLAIN_CRD_KINDS: [&str; 4] = ["ProviderConfig", "ClusterProviderConfig", "ProviderConfigUsage", "ClusterProviderConfigUsage"];

/// Whether a provider's CRD becomes an MRD (every kind but its ProviderConfig kinds).
pub fn becomes_mrd(crd: &Value) -> bool {
    let kind = crd.pointer("/spec/names/kind").and_then(Value::as_str).unwrap_or_default();
    !PLAIN_CRD_KINDS.contains(&kind)
}

/// The CRD spec fields an MRD carries (the rest of its spec is its own: `state`,
/// `connectionDetails`).
const CRD_SPEC_FIELDS: [&str; 6] = ["group", "names", "scope", "versions", "conversion", "preserveUnknownFields"];

/// A provider's CRD as an MRD of the same name, labels and annotations, `Active` or
/// `Inactive`.
pub fn mrd_of(crd: &Value, active: bool) -> Value {
    let mut spec = copy_fields(crd, "spec", &CRD_SPEC_FIELDS);
    spec.insert("state".into(), json!(if active { "Active" } else { "Inactive" }));
    let metadata = copy_fields(crd, "metadata", &["name", "labels", "annotations"]);
    json!({"apiVersion": mrd_kind().api_version(), "kind": "ManagedResourceDefinition", "metadata": metadata, "spec": spec})
}

/// The `fields` of `from`'s `section` that it has.
fn copy_fields(from: &Value, section: &str, fields: &[&str]) -> Map<String, Value> {
    let source = from.get(section).and_then(Value::as_object);
    fields.iter().filter_map(|field| Some((field.to_string(), source?.get(*field)?.clone()))).collect()
}

/// The CRD an active MRD defines: its CRD spec fields, labels and annotations, owned by the MRD
/// and controlled by the MRD's controller (the provider revision), as Crossplane's MRD
/// controller writes it.
pub fn crd_of(mrd: &Value) -> Value {
    let spec = copy_fields(mrd, "spec", &CRD_SPEC_FIELDS);
    let mut owners = vec![object::owner_reference(mrd, false, false)];
    // The MRD's own owners too (the revision as controller, the package), so the CRD is
    // owned as it was before MRDs and moves with the active revision.
    owners.extend(mrd.pointer("/metadata/ownerReferences").and_then(Value::as_array).into_iter().flatten().cloned());
    let mut metadata = copy_fields(mrd, "metadata", &["name", "labels", "annotations"]);
    metadata.insert("ownerReferences".into(), Value::Array(owners));
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": metadata, "spec": spec})
}

/// Whether an MRD is `Active`.
pub fn is_active(mrd: &Value) -> bool {
    mrd.pointer("/spec/state").and_then(Value::as_str) == Some("Active")
}

/// Whether an MRAP entry matches an MRD name, as Go's `filepath.Match` does: `*` any run of
/// characters, `?` one, `[...]` a class; a malformed pattern matches nothing.
pub fn matches(pattern: &str, name: &str) -> bool {
    let options = glob::MatchOptions { case_sensitive: true, require_literal_separator: true, require_literal_leading_dot: false };
    glob::Pattern::new(pattern).is_ok_and(|p| p.matches_with(name, options))
}

/// Whether any of an MRAP's `spec.activate` entries matches `name`.
pub fn activates(policy: &Value, name: &str) -> bool {
    policy.pointer("/spec/activate").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).any(|p| matches(p, name))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn globs_match_as_go_filepath_match() {
        assert!(matches("*", "buckets.s3.aws.example.org"));
        assert!(matches("*.aws.example.org", "buckets.aws.example.org"));
        assert!(matches("*.aws.example.org", "buckets.s3.aws.example.org"), "* crosses dots: names have no separators");
        assert!(!matches("*.aws.example.org", "buckets.gcp.example.org"));
        assert!(matches("nopresources.nop.crossplane.io", "nopresources.nop.crossplane.io"));
        assert!(!matches("nopresources.nop.crossplane.io", "nopresources.nop.crossplane.iox"));
        assert!(matches("?opresources.nop.crossplane.io", "nopresources.nop.crossplane.io"));
        assert!(matches("[mn]opresources.*", "nopresources.nop.crossplane.io"));
        assert!(!matches("[unclosed", "[unclosed"), "a malformed pattern matches nothing");
        assert!(!matches("*.AWS.example.org", "buckets.aws.example.org"), "case matters");
    }

    #[test]
    fn a_policy_activates_what_any_entry_matches() {
        let policy = json!({"spec": {"activate": ["things.example.org", "*.aws.example.org"]}});
        assert!(activates(&policy, "things.example.org"));
        assert!(activates(&policy, "buckets.aws.example.org"));
        assert!(!activates(&policy, "others.example.org"));
        assert!(!activates(&json!({"spec": {}}), "things.example.org"));
    }

    #[test]
    fn provider_configs_stay_crds() {
        let crd = |kind: &str| json!({"spec": {"names": {"kind": kind}}});
        for kind in PLAIN_CRD_KINDS {
            assert!(!becomes_mrd(&crd(kind)), "{kind}");
        }
        assert!(becomes_mrd(&crd("NopResource")));
        assert!(becomes_mrd(&crd("StoreConfig")), "only the four ProviderConfig kinds stay CRDs");
    }

    #[test]
    fn a_crd_round_trips_through_an_mrd() {
        let crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "things.example.org", "labels": {"pkg.crossplane.io/package": "p"}, "resourceVersion": "7"},
            "spec": {"group": "example.org", "names": {"kind": "Thing", "plural": "things"}, "scope": "Cluster", "versions": [{"name": "v1", "served": true, "storage": true}]},
            "status": {"conditions": []},
        });
        let mut mrd = mrd_of(&crd, false);
        assert_eq!(mrd["spec"]["state"], "Inactive");
        assert_eq!(mrd["metadata"], json!({"name": "things.example.org", "labels": {"pkg.crossplane.io/package": "p"}}));
        assert!(!is_active(&mrd));
        assert!(is_active(&mrd_of(&crd, true)));
        mrd["metadata"]["uid"] = json!("u1");
        mrd["metadata"]["ownerReferences"] = json!([{"apiVersion": "pkg.crossplane.io/v1", "kind": "ProviderRevision", "name": "p-1", "uid": "r1", "controller": true}]);
        let back = crd_of(&mrd);
        assert_eq!(back["spec"], crd["spec"]);
        assert_eq!(back["metadata"]["labels"], crd["metadata"]["labels"]);
        let owners = back["metadata"]["ownerReferences"].as_array().unwrap();
        assert_eq!(owners[0]["kind"], "ManagedResourceDefinition");
        assert_eq!(owners[0]["controller"], false);
        assert_eq!(owners[1]["kind"], "ProviderRevision");
        assert_eq!(owners[1]["controller"], true);
    }
}
