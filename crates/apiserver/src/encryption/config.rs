//! The encryption configuration file: kube-apiserver's `EncryptionConfiguration`
//! (`apiserver.config.k8s.io/v1`), read from YAML or JSON, and the one oxplane generates on
//! first start when none is given.
//!
//! ```yaml
//! apiVersion: apiserver.config.k8s.io/v1
//! kind: EncryptionConfiguration
//! resources:
//!   - resources: [secrets]
//!     providers:
//!       - aesgcm:
//!           keys:
//!             - name: key2
//!               secret: <base64 of 16, 24 or 32 random bytes>
//!             - name: key1
//!               secret: <...>
//!       - identity: {}
//! ```
//!
//! The first provider (and its first key) encrypts every write; every listed provider and key
//! can read. Resources are named as kube-apiserver names them: `secrets`, `configmaps`,
//! `<plural>.<group>`, `*.<group>`, `*.` (every core resource) and `*.*` (everything); the
//! first rule naming a resource decides for it.

use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rand::RngCore;
use serde::{Deserialize, Serialize};

use super::providers::{Provider, ProviderKind};

/// The file oxplane writes on first start when no configuration is given.
pub const GENERATED_FILE: &str = "encryption-config.yaml";
const API_VERSION: &str = "apiserver.config.k8s.io/v1";
const KIND: &str = "EncryptionConfiguration";

/// Why an encryption configuration was refused.
#[derive(Debug, thiserror::Error)]
#[error("encryption configuration {path}: {message}")]
pub struct ConfigError {
    /// The file.
    pub path: String,
    /// What is wrong with it.
    pub message: String,
}

/// The file's shape.
#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct EncryptionConfiguration {
    api_version: String,
    kind: String,
    #[serde(default)]
    resources: Vec<ResourceConfiguration>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ResourceConfiguration {
    resources: Vec<String>,
    providers: Vec<ProviderConfiguration>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ProviderConfiguration {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    aesgcm: Option<KeysConfiguration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    aescbc: Option<KeysConfiguration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    identity: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    secretbox: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kms: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct KeysConfiguration {
    keys: Vec<KeyConfiguration>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct KeyConfiguration {
    name: String,
    secret: String,
}

/// One rule: the store key prefixes of the resources it names, and its providers in order.
#[derive(Debug)]
pub struct Rule {
    /// Store key prefixes (`/registry/core/secrets/`).
    pub prefixes: Vec<String>,
    /// The providers; the first one writes.
    pub providers: Vec<Provider>,
}

/// Reads and checks a configuration file.
pub fn load(path: &Path) -> Result<Vec<Rule>, ConfigError> {
    let error = |message: String| ConfigError { path: path.display().to_string(), message };
    let text = std::fs::read_to_string(path).map_err(|e| error(format!("cannot read it: {e}")))?;
    let config: EncryptionConfiguration =
        serde_saphyr::from_str(&text).map_err(|e| error(format!("not a valid EncryptionConfiguration: {e}")))?;
    parse(config).map_err(error)
}

/// Loads the configuration generated in `dir`, writing one with a new random AES-GCM key (and
/// `identity` after it, so a store written before encryption was on stays readable) on first
/// start.
pub fn ensure_generated(dir: &Path) -> Result<Vec<Rule>, crate::ServeError> {
    let path = dir.join(GENERATED_FILE);
    if !path.exists() {
        let mut secret = [0u8; 32];
        rand::rng().fill_bytes(&mut secret);
        let config = EncryptionConfiguration {
            api_version: API_VERSION.into(),
            kind: KIND.into(),
            resources: vec![ResourceConfiguration {
                resources: vec!["secrets".into()],
                providers: vec![
                    ProviderConfiguration {
                        aesgcm: Some(KeysConfiguration {
                            keys: vec![KeyConfiguration { name: "key1".into(), secret: STANDARD.encode(secret) }],
                        }),
                        ..Default::default()
                    },
                    ProviderConfiguration { identity: Some(serde_json::json!({})), ..Default::default() },
                ],
            }],
        };
        let yaml = serde_saphyr::to_string(&config)
            .map_err(|e| crate::ServeError::Startup(format!("writing the encryption configuration: {e}")))?;
        let text = format!(
            "# Generated by oxplane on first start: Secrets are encrypted at rest with this key.\n\
             # Keep this file apart from backups of the database. To rotate, add a new key first\n\
             # and restart (stored Secrets are rewritten with it); then remove the old key.\n{yaml}"
        );
        crate::server::write_private(&path, text.as_bytes(), true)?;
    }
    load(&path).map_err(|e| crate::ServeError::Startup(e.to_string()))
}

fn parse(config: EncryptionConfiguration) -> Result<Vec<Rule>, String> {
    if config.api_version != API_VERSION || config.kind != KIND {
        return Err(format!(
            "expected apiVersion {API_VERSION} and kind {KIND}, got {} {}",
            config.api_version, config.kind
        ));
    }
    let mut rules = Vec::new();
    for (i, resource) in config.resources.into_iter().enumerate() {
        if resource.resources.is_empty() {
            return Err(format!("resources[{i}].resources: at least one resource is required"));
        }
        if resource.providers.is_empty() {
            return Err(format!("resources[{i}].providers: at least one provider is required"));
        }
        let prefixes = resource
            .resources
            .iter()
            .map(|name| prefix_of(name).ok_or_else(|| format!("resources[{i}].resources: {name:?} is not a resource name")))
            .collect::<Result<Vec<_>, _>>()?;
        let providers = resource
            .providers
            .into_iter()
            .enumerate()
            .map(|(j, p)| provider(p).map_err(|m| format!("resources[{i}].providers[{j}]: {m}")))
            .collect::<Result<Vec<_>, _>>()?;
        rules.push(Rule { prefixes, providers });
    }
    Ok(rules)
}

/// The store key prefix of a resource name as the configuration spells it.
fn prefix_of(name: &str) -> Option<String> {
    let valid = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
    Some(match name {
        "*.*" => "/registry/".to_string(),
        "*." => "/registry/core/".to_string(),
        _ => match name.split_once('.') {
            None if valid(name) => format!("/registry/core/{name}/"),
            Some(("*", group)) if valid(group) => format!("/registry/{group}/"),
            Some((plural, group)) if valid(plural) && !plural.contains('.') && valid(group) => {
                format!("/registry/{group}/{plural}/")
            }
            _ => return None,
        },
    })
}

fn provider(config: ProviderConfiguration) -> Result<Provider, String> {
    let ProviderConfiguration { aesgcm, aescbc, identity, secretbox, kms } = config;
    let set = [aesgcm.is_some(), aescbc.is_some(), identity.is_some(), secretbox.is_some(), kms.is_some()];
    if set.iter().filter(|s| **s).count() != 1 {
        return Err("exactly one of aesgcm, aescbc, identity, secretbox or kms must be set".into());
    }
    if secretbox.is_some() || kms.is_some() {
        return Err("secretbox and kms are not supported by oxplane; use aesgcm or aescbc".into());
    }
    if identity.is_some() {
        return Ok(Provider::identity());
    }
    let (kind, keys) = match (aesgcm, aescbc) {
        (Some(keys), _) => (ProviderKind::AesGcm, keys),
        (_, Some(keys)) => (ProviderKind::AesCbc, keys),
        _ => return Err("no provider set".into()),
    };
    if keys.keys.is_empty() {
        return Err("keys: at least one key is required".into());
    }
    let mut parsed = Vec::new();
    for (k, key) in keys.keys.into_iter().enumerate() {
        if key.name.is_empty() || key.name.contains(':') {
            return Err(format!("keys[{k}].name: a non-empty name without ':' is required"));
        }
        if parsed.iter().any(|(name, _): &(String, Vec<u8>)| *name == key.name) {
            return Err(format!("keys[{k}].name: {:?} is used twice", key.name));
        }
        let secret = STANDARD
            .decode(key.secret.trim())
            .map_err(|e| format!("keys[{k}].secret: not valid base64: {e}"))?;
        if ![16, 24, 32].contains(&secret.len()) {
            return Err(format!("keys[{k}].secret: an AES key is 16, 24 or 32 bytes, this one is {}", secret.len()));
        }
        parsed.push((key.name, secret));
    }
    Ok(Provider::keyed(kind, parsed))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_yaml(text: &str) -> Result<Vec<Rule>, String> {
        parse(serde_saphyr::from_str(text).map_err(|e| e.to_string())?)
    }

    #[test]
    fn resource_names_map_to_store_prefixes() {
        assert_eq!(prefix_of("secrets").as_deref(), Some("/registry/core/secrets/"));
        assert_eq!(prefix_of("widgets.example.org").as_deref(), Some("/registry/example.org/widgets/"));
        assert_eq!(prefix_of("*.apps").as_deref(), Some("/registry/apps/"));
        assert_eq!(prefix_of("*.").as_deref(), Some("/registry/core/"));
        assert_eq!(prefix_of("*.*").as_deref(), Some("/registry/"));
        assert_eq!(prefix_of(""), None);
        assert_eq!(prefix_of("a/b"), None);
    }

    #[test]
    fn bad_configurations_are_refused_with_the_field_at_fault() {
        let head = "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\n";
        let short = format!("{head}resources:\n- resources: [secrets]\n  providers:\n  - aesgcm:\n      keys:\n      - name: k\n        secret: YWJj\n");
        assert!(parse_yaml(&short).err().unwrap().contains("resources[0].providers[0]: keys[0].secret: an AES key is 16, 24 or 32 bytes, this one is 3"));
        let two = format!("{head}resources:\n- resources: [secrets]\n  providers:\n  - identity: {{}}\n    aescbc: {{keys: []}}\n");
        assert!(parse_yaml(&two).err().unwrap().contains("exactly one of"));
        let kms = format!("{head}resources:\n- resources: [secrets]\n  providers:\n  - kms: {{name: x}}\n");
        assert!(parse_yaml(&kms).err().unwrap().contains("not supported"));
        assert!(parse_yaml("apiVersion: v1\nkind: Foo\n").err().unwrap().contains("expected apiVersion"));
    }

    #[test]
    fn the_generated_configuration_is_kept_private_and_reused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let rules = ensure_generated(dir.path()).unwrap();
        assert_eq!(rules.len(), 1);
        assert_eq!(rules[0].prefixes, ["/registry/core/secrets/"]);
        assert_eq!(rules[0].providers.len(), 2);
        let path = dir.path().join(GENERATED_FILE);
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let text = std::fs::read_to_string(&path).unwrap();
        ensure_generated(dir.path()).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text, "the key is generated once");
    }
}
