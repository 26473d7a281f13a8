//! A package's admission webhook configurations (`ValidatingWebhookConfiguration`,
//! `MutatingWebhookConfiguration`), installed as Crossplane's package manager installs them:
//! renamed `crossplane-<lowercase package kind>-<package name>` (as the name a package gives
//! them is a kubebuilder default such as `validating-webhook-configuration`, shared by every
//! provider), each webhook's `clientConfig` pointed at the package's Service
//! (`crossplane-system/<package name>:9443`, `path` kept) and given a `caBundle`, the objects
//! owned by the revision and the package like the package's other objects.

use oxplane_runtime::client::Kube;
use oxplane_runtime::kinds::Kind;
use oxplane_runtime::object;
use serde_json::{Value, json};

use super::providers::FIELD_MANAGER;

const GROUP: &str = "admissionregistration.k8s.io";

/// The kind of a webhook configuration object, `None` for any other object.
fn kind_of(object: &Value) -> Option<Kind> {
    if object.get("apiVersion").and_then(Value::as_str) != Some("admissionregistration.k8s.io/v1") {
        return None;
    }
    let (kind, plural) = match object.get("kind").and_then(Value::as_str)? {
        "ValidatingWebhookConfiguration" => ("ValidatingWebhookConfiguration", "validatingwebhookconfigurations"),
        "MutatingWebhookConfiguration" => ("MutatingWebhookConfiguration", "mutatingwebhookconfigurations"),
        _ => return None,
    };
    Some(Kind::new(GROUP, "v1", kind, plural, false))
}

/// The name a package's webhook configurations are installed under.
fn installed_name(package_kind: &str, package: &str) -> String {
    format!("crossplane-{}-{package}", package_kind.to_lowercase())
}

/// The webhook configurations among a package's `objects` as they are installed for the
/// package `package` of kind `package_kind` (`Provider`), trusting `ca_pem`. Crossplane puts
/// the leaf `tls.crt` in `caBundle`, which only Go's verifier accepts as a root; oxplane's CA
/// is what the package's serving certificate chains to.
pub fn configurations(objects: &[Value], package_kind: &str, package: &str, ca_pem: &str) -> Vec<(Kind, Value)> {
    objects
        .iter()
        .filter_map(|o| Some((kind_of(o)?, o)))
        .map(|(kind, original)| {
            let mut configuration = original.clone();
            configuration["metadata"] = json!({"name": installed_name(package_kind, package)});
            for (key, value) in ["labels", "annotations"].iter().filter_map(|k| Some((*k, original.pointer(&format!("/metadata/{k}"))?))) {
                configuration["metadata"][key] = value.clone();
            }
            for webhook in configuration.get_mut("webhooks").and_then(Value::as_array_mut).into_iter().flatten() {
                let path = webhook.pointer("/clientConfig/service/path").cloned();
                // A `url` would make the webhook invalid next to `service` (exactly one is
                // allowed): the package's own server is what is called.
                webhook["clientConfig"] = super::provider_runtime::service_client_config(package, path, ca_pem);
            }
            (kind, configuration)
        })
        .collect()
}

/// The `status.objectRefs` entries of the webhook configurations among a package's `objects`.
pub fn object_refs(objects: &[Value], package_kind: &str, package: &str) -> Vec<Value> {
    objects
        .iter()
        .filter_map(kind_of)
        .map(|kind| json!({"apiVersion": kind.api_version(), "kind": kind.gvk.kind, "name": installed_name(package_kind, package)}))
        .collect()
}

/// Applies `configurations` (from [`configurations`]) labelled and owned as the package's
/// other objects (`owners`: the revision's controller reference first).
pub async fn install(kube: &Kube, package: &Value, configurations: Vec<(Kind, Value)>, owners: &[Value]) -> Result<(), String> {
    for (kind, mut configuration) in configurations {
        crate::mrd::mark_installed(package, &mut configuration, owners);
        let name = object::name(&configuration).unwrap_or_default().to_string();
        kube.apply(&kind, &configuration, FIELD_MANAGER, true).await.map_err(|e| format!("cannot apply {} {name}: {e}", kind.gvk.kind))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;

    fn package_objects() -> Vec<Value> {
        vec![
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "things.example.org"}}),
            json!({
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": "validating-webhook-configuration", "labels": {"a": "b"}, "creationTimestamp": null},
                "webhooks": [
                    {"name": "vthing.example.org", "sideEffects": "None", "admissionReviewVersions": ["v1"],
                     "clientConfig": {"service": {"name": "webhook-service", "namespace": "system", "path": "/validate-thing"}}},
                    {"name": "vother.example.org", "sideEffects": "None", "admissionReviewVersions": ["v1"],
                     "clientConfig": {"url": "https://example.org/validate"}},
                ],
            }),
            json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration", "metadata": {"name": "mutating-webhook-configuration"}, "webhooks": []}),
        ]
    }

    #[test]
    fn webhook_configurations_are_renamed_and_pointed_at_the_packages_service_with_the_ca() {
        let installed = configurations(&package_objects(), "Provider", "provider-things", "PEM");
        let kinds: Vec<(&str, &str)> = installed.iter().map(|(k, o)| (k.plural.as_str(), o["metadata"]["name"].as_str().unwrap_or_default())).collect();
        assert_eq!(
            kinds,
            [("validatingwebhookconfigurations", "crossplane-provider-provider-things"), ("mutatingwebhookconfigurations", "crossplane-provider-provider-things")]
        );
        let validating = &installed[0].1;
        assert_eq!(validating["metadata"], json!({"name": "crossplane-provider-provider-things", "labels": {"a": "b"}}));
        let service = |path: Value| {
            let mut service = json!({"name": "provider-things", "namespace": "crossplane-system", "port": 9443});
            if !path.is_null() {
                service["path"] = path;
            }
            json!({"service": service, "caBundle": STANDARD.encode("PEM")})
        };
        assert_eq!(validating["webhooks"][0]["clientConfig"], service(json!("/validate-thing")));
        assert_eq!(validating["webhooks"][1]["clientConfig"], service(Value::Null));
        assert_eq!(validating["webhooks"][0]["name"], "vthing.example.org");
        assert_eq!(
            object_refs(&package_objects(), "Provider", "provider-things"),
            [
                json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration", "name": "crossplane-provider-provider-things"}),
                json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration", "name": "crossplane-provider-provider-things"}),
            ]
        );
    }
}
