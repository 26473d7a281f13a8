//! Bearer-token authentication: one admin token, generated on first start and kept in the data
//! directory; [`crate::authn`] takes it for the admin's.

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

/// Makes `token` the admin token in `dir` (a token shared by the servers on one store).
pub fn install_token(dir: &Path, token: &str) -> Result<(), ServeError> {
    let path = dir.join(TOKEN_FILE);
    if std::fs::read_to_string(&path).ok().as_deref().map(str::trim) == Some(token) {
        return Ok(());
    }
    super::files::write_private(&path, token.as_bytes(), true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_is_generated_once_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let first = ensure_token(dir.path()).unwrap();
        assert!(first.len() >= 40);
        assert_eq!(ensure_token(dir.path()).unwrap(), first);
    }
}
