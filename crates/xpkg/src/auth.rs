//! Registry credentials from pull secrets: a `kubernetes.io/dockerconfigjson` Secret's
//! `.dockerconfigjson` (`{"auths": {KEY: {...}}}`) or a legacy `kubernetes.io/dockercfg`
//! Secret's `.dockercfg` (the `auths` map itself). Keys match as Kubernetes' keychain matches
//! them: scheme and a leading `/v1/` or `/v2/` dropped, the same port, the same number of
//! dot-separated host labels each matching (a label may be a `*` glob), and the image's path
//! starting with the key's path; a key with a path before the bare host. Written here because the
//! `docker_credential` crate reads only the local Docker configuration, not these secrets.

use base64::Engine;
use serde_json::Value;

use crate::XpkgError;
use crate::registry::Credentials;

/// Splits a registry key into host labels, port and path.
fn split_key(key: &str, is_key: bool) -> (Vec<String>, String, String) {
    let key = key.split_once("://").map_or(key, |(_, rest)| rest);
    let (host_port, path) = key.split_once('/').map_or((key, ""), |(h, p)| (h, p));
    let path = path.trim_end_matches('/');
    let path = if is_key && matches!(path.split('/').next(), Some("v1" | "v2")) { path.get(3..).unwrap_or_default() } else { path };
    let (host, port) = match host_port.rsplit_once(':') {
        Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => (host, port),
        _ => (host_port, ""),
    };
    (host.to_ascii_lowercase().split('.').map(str::to_string).collect(), port.to_string(), path.to_string())
}

/// A shell glob of `*` and literal characters (what host labels use in practice).
fn glob(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((head, rest)) => {
            let Some(after) = text.strip_prefix(head) else { return false };
            (0..=after.len()).filter(|i| after.is_char_boundary(*i)).any(|i| glob(rest, &after[i..]))
        }
    }
}

fn matches(key: &str, image: &str) -> bool {
    let (key_labels, key_port, key_path) = split_key(key, true);
    let (labels, port, path) = split_key(image, false);
    key_labels.len() == labels.len()
        && key_port == port
        && key_labels.iter().zip(&labels).all(|(k, l)| glob(k, l))
        && (key_path.is_empty() || path == key_path || path.starts_with(&format!("{key_path}/")))
}

/// The credentials a docker config (the bytes of `.dockerconfigjson` or `.dockercfg`) holds
/// for `image` (`registry[:port]/repository`), if any key matches.
pub fn credentials_for(config: &[u8], image: &str) -> Result<Option<Credentials>, XpkgError> {
    let parsed: Value = serde_json::from_slice(config).map_err(|e| XpkgError::Invalid(format!("the pull secret is not a docker config JSON: {e}")))?;
    let auths = parsed.get("auths").unwrap_or(&parsed);
    let Some(auths) = auths.as_object() else {
        return Err(XpkgError::Invalid("the pull secret is not a docker config JSON: no auths".into()));
    };
    let mut keys: Vec<&String> = auths.keys().filter(|key| matches(key, image)).collect();
    // Kubernetes' keyring sorts the normalised keys in reverse order, so a key with a path
    // comes before the bare host it extends.
    let normalised = |key: &str| {
        let (labels, port, path) = split_key(key, true);
        format!("{}:{port}/{path}", labels.join("."))
    };
    keys.sort_by_key(|key| std::cmp::Reverse(normalised(key)));
    let Some(entry) = keys.first().and_then(|key| auths.get(key.as_str())) else {
        return Ok(None);
    };
    let text = |field: &str| entry.get(field).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string);
    if let (Some(username), Some(password)) = (text("username"), text("password")) {
        return Ok(Some(Credentials::Basic { username, password }));
    }
    if let Some(auth) = text("auth") {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(auth.trim())
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .ok_or_else(|| XpkgError::Invalid("the pull secret's auth is not base64 of user:password".into()))?;
        let (username, password) = decoded.split_once(':').ok_or_else(|| XpkgError::Invalid("the pull secret's auth is not base64 of user:password".into()))?;
        return Ok(Some(Credentials::Basic { username: username.to_string(), password: password.to_string() }));
    }
    if let Some(token) = text("registrytoken").or_else(|| text("identitytoken")) {
        return Ok(Some(Credentials::Bearer(token)));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn basic(user: &str, password: &str) -> Option<Credentials> {
        Some(Credentials::Basic { username: user.into(), password: password.into() })
    }

    #[test]
    fn keys_match_as_kubernetes_matches_them() {
        let config = serde_json::json!({"auths": {
            "https://registry.example.org/v2/": {"username": "all", "password": "a"},
            "registry.example.org/team": {"auth": base64::engine::general_purpose::STANDARD.encode("team:t")},
            "*.example.com": {"username": "glob", "password": "g"},
            "127.0.0.1:5000": {"registrytoken": "tok"},
        }})
        .to_string();
        let get = |image: &str| credentials_for(config.as_bytes(), image).unwrap();
        assert_eq!(get("registry.example.org/other/x"), basic("all", "a"));
        assert_eq!(get("registry.example.org/team/x"), basic("team", "t"));
        assert_eq!(get("registry.example.org/teamx/x"), basic("all", "a"));
        assert_eq!(get("eu.example.com/x"), basic("glob", "g"));
        assert_eq!(get("a.eu.example.com/x"), None, "label counts differ");
        assert_eq!(get("127.0.0.1:5000/x"), Some(Credentials::Bearer("tok".into())));
        assert_eq!(get("127.0.0.1:5001/x"), None, "ports differ");
        let legacy = serde_json::json!({"registry.example.org": {"username": "old", "password": "o"}}).to_string();
        assert_eq!(credentials_for(legacy.as_bytes(), "registry.example.org/x").unwrap(), basic("old", "o"));
        assert!(credentials_for(b"not json", "x/y").unwrap_err().to_string().contains("not a docker config JSON"));
    }
}
