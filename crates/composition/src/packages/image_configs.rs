//! ImageConfigs (`pkg.crossplane.io/v1beta1`): settings for the package images whose reference
//! starts with one of an ImageConfig's `matchImages` prefixes. For each purpose (rewriting the
//! reference, a pull secret) the ImageConfig with the longest matching prefix among those that
//! set it wins, as in Crossplane (equal lengths: the first by name). The rewrite is applied
//! first, to the original reference; the pull secret is chosen for the rewritten one. What was
//! applied is recorded in `status.appliedImageConfigRefs` (`RewriteImage`,
//! `SetImagePullSecret`) and the rewritten reference in `status.resolvedPackage`.

use base64::Engine;
use oxplane_runtime::client::Kube;
use oxplane_runtime::kinds::Kind;
use oxplane_runtime::object;
use oxplane_xpkg::registry::Credentials;
use serde_json::{Value, json};

/// The namespace pull secrets are read from (Crossplane's own namespace).
pub const PACKAGE_NAMESPACE: &str = "crossplane-system";

fn secret_kind() -> Kind {
    Kind::new("", "v1", "Secret", "secrets", true)
}

/// `ImageConfig`.
pub fn image_config_kind() -> Kind {
    Kind::new("pkg.crossplane.io", "v1beta1", "ImageConfig", "imageconfigs", false)
}

/// The ImageConfig that sets `field` (a JSON pointer into its spec) and has the longest
/// prefix `image` starts with: its name, the prefix, and the field's value.
fn longest_match<'a>(configs: &'a [Value], image: &str, field: &str) -> Option<(&'a str, &'a str, &'a Value)> {
    let mut best: Option<(&str, &str, &Value)> = None;
    for config in configs {
        let Some(value) = config.pointer(&format!("/spec{field}")) else { continue };
        for rule in config.pointer("/spec/matchImages").and_then(Value::as_array).into_iter().flatten() {
            if rule.get("type").and_then(Value::as_str).is_some_and(|t| t != "Prefix") {
                continue;
            }
            let Some(prefix) = rule.get("prefix").and_then(Value::as_str) else { continue };
            if image.starts_with(prefix) && best.is_none_or(|(_, longest, _)| prefix.len() > longest.len()) {
                best = Some((object::name(config).unwrap_or_default(), prefix, value));
            }
        }
    }
    best
}

/// What the ImageConfigs do to one package image.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    /// The reference to pull (the original, or the rewritten one).
    pub image: String,
    /// The pull secret an ImageConfig names for the image to pull, if any.
    pub pull_secret: Option<String>,
    /// `appliedImageConfigRefs`: `(ImageConfig name, reason)`.
    pub refs: Vec<(String, &'static str)>,
}

impl Applied {
    /// `status.appliedImageConfigRefs` of the package and its revision.
    pub fn refs_json(&self) -> Value {
        Value::Array(self.refs.iter().map(|(name, reason)| json!({"name": name, "reason": reason})).collect())
    }
}

/// Applies `configs` (ImageConfig objects, sorted by name) to `image`.
pub fn apply(configs: &[Value], image: &str) -> Applied {
    let mut applied = Applied { image: image.to_string(), ..Applied::default() };
    if let Some((name, prefix, rewrite)) = longest_match(configs, image, "/rewriteImage")
        && let Some(replacement) = rewrite.get("prefix").and_then(Value::as_str)
    {
        applied.image = format!("{replacement}{}", &image[prefix.len()..]);
        applied.refs.push((name.to_string(), "RewriteImage"));
    }
    if let Some((name, _, secret)) = longest_match(configs, &applied.image, "/registry/authentication/pullSecretRef")
        && let Some(secret) = secret.get("name").and_then(Value::as_str).filter(|s| !s.is_empty())
    {
        applied.pull_secret = Some(secret.to_string());
        applied.refs.push((name.to_string(), "SetImagePullSecret"));
    }
    applied
}

/// The credentials the pull secrets `names` (in [`PACKAGE_NAMESPACE`], tried in order) hold
/// for `reference`'s registry (the first secret with a matching key), else anonymous.
pub async fn pull_credentials(kube: &Kube, names: &[String], reference: &str) -> Result<Credentials, String> {
    let source = oxplane_xpkg::names::source(reference);
    for name in names {
        let found = kube.get(&secret_kind(), Some(PACKAGE_NAMESPACE), name).await.map_err(|e| format!("cannot get pull secret {PACKAGE_NAMESPACE}/{name}: {e}"))?;
        let Some(found) = found else {
            return Err(format!("cannot get pull secret {PACKAGE_NAMESPACE}/{name}: not found"));
        };
        let data = [".dockerconfigjson", ".dockercfg"].iter().find_map(|key| found.pointer(&format!("/data/{key}"))?.as_str());
        let Some(data) = data else {
            return Err(format!("pull secret {PACKAGE_NAMESPACE}/{name} has no .dockerconfigjson or .dockercfg key"));
        };
        let bytes = base64::engine::general_purpose::STANDARD.decode(data).map_err(|e| format!("pull secret {PACKAGE_NAMESPACE}/{name}: {e}"))?;
        match oxplane_xpkg::auth::credentials_for(&bytes, source) {
            Ok(Some(credentials)) => return Ok(credentials),
            Ok(None) => {}
            Err(error) => return Err(format!("pull secret {PACKAGE_NAMESPACE}/{name}: {error}")),
        }
    }
    Ok(Credentials::Anonymous)
}

/// The pull secrets of a package (`spec.packagePullSecrets`) and then the one an ImageConfig
/// sets for the image it pulls.
pub fn pull_secret_names(package: &Value, applied: &Applied) -> Vec<String> {
    let mut names: Vec<String> = package
        .pointer("/spec/packagePullSecrets")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.get("name").and_then(Value::as_str).map(str::to_string))
        .collect();
    names.extend(applied.pull_secret.clone());
    names
}

/// Every ImageConfig, sorted by name.
pub async fn list(kube: &Kube) -> Result<Vec<Value>, String> {
    let mut configs = kube.list(&image_config_kind(), None, None).await.map_err(|e| format!("cannot list ImageConfigs: {e}"))?;
    configs.sort_by(|a, b| object::name(a).cmp(&object::name(b)));
    Ok(configs)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn config(name: &str, prefixes: &[&str], spec: Value) -> Value {
        let mut spec = spec;
        spec["matchImages"] = prefixes.iter().map(|p| json!({"type": "Prefix", "prefix": p})).collect();
        json!({"metadata": {"name": name}, "spec": spec})
    }

    #[test]
    fn the_longest_prefix_wins_for_each_purpose() {
        let configs = [
            config("all", &["registry.example.org/"], json!({"registry": {"authentication": {"pullSecretRef": {"name": "all-secret"}}}})),
            config("team", &["other.example.org/", "registry.example.org/team/"], json!({"registry": {"authentication": {"pullSecretRef": {"name": "team-secret"}}}})),
            config("mirror", &["registry.example.org/"], json!({"rewriteImage": {"prefix": "127.0.0.1:5000/mirror/"}})),
            config("mirror-auth", &["127.0.0.1:5000/"], json!({"registry": {"authentication": {"pullSecretRef": {"name": "mirror-secret"}}}})),
        ];
        let applied = apply(&configs[..2], "registry.example.org/team/pkg:v1");
        assert_eq!((applied.image.as_str(), applied.pull_secret.as_deref()), ("registry.example.org/team/pkg:v1", Some("team-secret")));
        assert_eq!(applied.refs, [("team".to_string(), "SetImagePullSecret")]);
        assert_eq!(apply(&configs[..2], "registry.example.org/else/pkg:v1").pull_secret.as_deref(), Some("all-secret"));
        assert_eq!(apply(&configs[..2], "elsewhere.example.org/pkg:v1"), Applied { image: "elsewhere.example.org/pkg:v1".into(), ..Applied::default() });
        // Rewritten first; the pull secret is then chosen for the rewritten reference.
        let applied = apply(&configs, "registry.example.org/team/pkg:v1");
        assert_eq!(applied.image, "127.0.0.1:5000/mirror/team/pkg:v1");
        assert_eq!(applied.pull_secret.as_deref(), Some("mirror-secret"));
        assert_eq!(applied.refs_json(), json!([{"name": "mirror", "reason": "RewriteImage"}, {"name": "mirror-auth", "reason": "SetImagePullSecret"}]));
    }
}
