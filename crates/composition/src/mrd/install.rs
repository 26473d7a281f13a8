//! What a provider revision installs from its package's CRDs, as Crossplane's package manager
//! does with `--enable-custom-to-managed-resource-conversion` (on by default): each managed
//! kind as an MRD (`Active` unless the provider declares the `safe-start` capability), its
//! ProviderConfig kinds as plain CRDs. Used for built-in providers and pulled Provider packages
//! alike.

use oxplane_runtime::client::Kube;
use oxplane_runtime::conditions;
use oxplane_runtime::object;
use serde_json::Value;

use super::{becomes_mrd, is_active, mrd_kind, mrd_of};
use crate::packages::providers::FIELD_MANAGER;
use crate::packages::{LABEL_PACKAGE, crd_kind};

/// What installing a provider's CRDs left to wait for.
#[derive(Debug, Default, PartialEq)]
pub struct InstalledKinds {
    /// Active MRDs not yet established, and plain CRDs not yet established, by name.
    pub waiting: Vec<String>,
    /// MRDs left inactive (a `safe-start` provider's, until a policy activates them).
    pub inactive: Vec<String>,
}

/// Whether capabilities include `safe-start`, matched as Crossplane matches capabilities
/// (lowercased, non-alphanumerics removed: `SafeStart` is `safe-start`).
pub fn is_safe_start<'a>(capabilities: impl IntoIterator<Item = &'a str>) -> bool {
    let normalise = |c: &str| -> String { c.chars().filter(char::is_ascii_alphanumeric).map(|c| c.to_ascii_lowercase()).collect() };
    capabilities.into_iter().any(|c| normalise(c) == "safestart")
}

/// Installs a provider package's CRDs and MRDs: labelled with the package (and its
/// `commonLabels` and `commonAnnotations`), owned by `owners`; each managed kind as an MRD (the
/// package's own, `connectionDetails` and all, or made from its CRD), created `Active` unless
/// `safe_start` (an MRD already active stays active: an inactive state never overwrites a live
/// one), the ProviderConfig kinds as CRDs.
pub async fn install_provider_crds(kube: &Kube, package: &Value, crds: Vec<Value>, owners: &[Value], safe_start: bool) -> Result<InstalledKinds, String> {
    let mut installed = InstalledKinds::default();
    for mut crd in crds {
        mark_installed(package, &mut crd, owners);
        let name = object::name(&crd).unwrap_or_default().to_string();
        if !is_mrd(&crd) && !becomes_mrd(&crd) {
            let applied = kube.apply(&crd_kind(), &crd, FIELD_MANAGER, true).await.map_err(|e| format!("cannot apply CustomResourceDefinition {name}: {e}"))?;
            if !conditions::is_true(&applied, "Established") {
                installed.waiting.push(name);
            }
            continue;
        }
        // Only a safe-start provider's MRD may be inactive: then a live active one stays so.
        let active = !safe_start
            || kube.get(&mrd_kind(), None, &name).await.map_err(|e| format!("cannot get ManagedResourceDefinition {name}: {e}"))?.as_ref().is_some_and(is_active);
        let mut mrd = if is_mrd(&crd) {
            let mut shipped = crd.clone();
            shipped["spec"]["state"] = serde_json::json!(if active { "Active" } else { "Inactive" });
            shipped
        } else {
            mrd_of(&crd, active)
        };
        mrd["metadata"]["ownerReferences"] = Value::Array(owners.to_vec());
        let applied = kube.apply(&mrd_kind(), &mrd, FIELD_MANAGER, true).await.map_err(|e| format!("cannot apply ManagedResourceDefinition {name}: {e}"))?;
        if !is_active(&applied) {
            installed.inactive.push(name);
        } else if !conditions::is_true(&applied, "Established") {
            installed.waiting.push(name);
        }
    }
    Ok(installed)
}

/// Whether a package object is an MRD (rather than a CRD).
fn is_mrd(object: &Value) -> bool {
    object.get("kind").and_then(Value::as_str) == Some("ManagedResourceDefinition")
}

/// Marks `object` as installed by the provider `package`: labelled with the package (and its
/// `commonLabels` and `commonAnnotations`), owned by `owners`.
pub fn mark_installed(package: &Value, object: &mut Value, owners: &[Value]) {
    for (field, set) in [("commonLabels", object::set_label as fn(&mut Value, &str, &str)), ("commonAnnotations", object::set_annotation)] {
        for (key, value) in package.pointer(&format!("/spec/{field}")).and_then(Value::as_object).into_iter().flatten() {
            set(object, key, value.as_str().unwrap_or_default());
        }
    }
    object::set_label(object, LABEL_PACKAGE, object::name(package).unwrap_or_default());
    object["metadata"]["ownerReferences"] = Value::Array(owners.to_vec());
}

/// The `status.objectRefs` entry of one of a provider package's CRDs or MRDs: the MRD it is or
/// becomes, or the CRD itself for a ProviderConfig kind.
pub fn object_ref(crd: &Value) -> Value {
    let name = object::name(crd).unwrap_or_default();
    if is_mrd(crd) || becomes_mrd(crd) {
        serde_json::json!({"apiVersion": mrd_kind().api_version(), "kind": "ManagedResourceDefinition", "name": name})
    } else {
        serde_json::json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "name": name})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_start_is_matched_as_crossplane_matches_capabilities() {
        assert!(is_safe_start(["safe-start"]));
        assert!(is_safe_start(["composition", "SafeStart"]));
        assert!(is_safe_start(["Safe_Start"]));
        assert!(!is_safe_start(["composition"]));
        assert!(!is_safe_start(Vec::<&str>::new()));
    }

    #[test]
    fn a_shipped_mrd_is_referenced_as_an_mrd_whatever_its_kind() {
        let shipped = serde_json::json!({"kind": "ManagedResourceDefinition", "metadata": {"name": "gadgets.example.org"}, "spec": {"names": {"kind": "Gadget"}}});
        assert_eq!(object_ref(&shipped)["kind"], "ManagedResourceDefinition");
        let config = serde_json::json!({"kind": "CustomResourceDefinition", "metadata": {"name": "providerconfigs.example.org"}, "spec": {"names": {"kind": "ProviderConfig"}}});
        assert_eq!(object_ref(&config)["kind"], "CustomResourceDefinition");
        let managed = serde_json::json!({"kind": "CustomResourceDefinition", "metadata": {"name": "things.example.org"}, "spec": {"names": {"kind": "Thing"}}});
        assert_eq!(object_ref(&managed)["kind"], "ManagedResourceDefinition");
    }
}
