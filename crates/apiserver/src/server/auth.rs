//! Bearer-token authentication: one admin token, generated on first start and kept in the data
//! directory. Requests without it get 401 `Unauthorized`, except the health endpoints.

use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore;

use crate::ServeError;

const TOKEN_FILE: &str = "admin.token";

/// Loads the admin token from `dir`, generating a random one on first start.
pub fn ensure_token(dir: &Path) -> Result<String, ServeError> {
    let path = dir.join(TOKEN_FILE);
    if let Ok(token) = std::fs::read_to_string(&path) {
        let token = token.trim();
        if !token.is_empty() {
            return Ok(token.to_string());
        }
    }
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    let token = URL_SAFE_NO_PAD.encode(bytes);
    super::files::write_private(&path, token.as_bytes(), true)?;
    Ok(token)
}

/// Whether an `Authorization` header value carries `token`, compared in constant time.
pub fn is_authorized(header: Option<&str>, token: &str) -> bool {
    let Some(presented) = header.and_then(|h| h.strip_prefix("Bearer ")) else { return false };
    let (a, b) = (presented.trim().as_bytes(), token.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_bearer_token_is_accepted() {
        assert!(is_authorized(Some("Bearer abc"), "abc"));
        assert!(!is_authorized(Some("Bearer abd"), "abc"));
        assert!(!is_authorized(Some("Bearer ab"), "abc"));
        assert!(!is_authorized(Some("Basic abc"), "abc"));
        assert!(!is_authorized(None, "abc"));
    }

    #[test]
    fn the_token_is_generated_once_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let first = ensure_token(dir.path()).unwrap();
        assert!(first.len() >= 40);
        assert_eq!(ensure_token(dir.path()).unwrap(), first);
    }
}
