//! Authentication: who a request is from.
//!
//! The HTTP layer's `authenticate` middleware (in [`crate::http`]) turns each request's
//! credentials into a [`UserInfo`] and puts it into the request's extensions before any handler
//! runs; it copies the same value into the response's extensions, so a middleware wrapped
//! around the router (metrics, an audit log) reads who made a request from the response:
//!
//! ```ignore
//! let user = request.extensions().get::<UserInfo>();   // in a handler or inner middleware
//! let user = response.extensions().get::<UserInfo>();  // in an outer middleware
//! ```
//!
//! When a request impersonates someone (`Impersonate-User` headers), [`UserInfo`] is the user
//! impersonated and [`Impersonator`] the authenticated user who asked for it, as
//! `audit.k8s.io/v1` Events record them (`impersonatedUser` and `user`).
//!
//! A request with no valid credentials never reaches a handler: it is answered 401.

pub mod service_accounts;
pub mod tokens;
pub mod x509;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use tokens::StaticTokens;
pub use x509::{CertificateAuthenticator, PeerCertificate};

/// Group every authenticated user is in.
pub const AUTHENTICATED: &str = "system:authenticated";
/// Group of the cluster administrators (bound to `cluster-admin`).
pub const MASTERS: &str = "system:masters";
/// User name of the admin token's holder.
pub const ADMIN_USER: &str = "oxplane-admin";

/// A user, in `authentication.k8s.io/v1`'s `UserInfo` shape (the same JSON as TokenReview's
/// `status.user` and an audit Event's `user`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserInfo {
    /// The name that identifies the user among all users (`alice`,
    /// `system:serviceaccount:ns:name`).
    pub username: String,
    /// A unique value that identifies the user across time (a ServiceAccount's uid); may be empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// The groups the user is in, `system:authenticated` included.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// Anything else the authenticator knows (a ServiceAccount token's pod or credential id).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// A user with a name and groups; `system:authenticated` is added when missing.
    pub fn new(username: impl Into<String>, groups: impl IntoIterator<Item = impl Into<String>>) -> Self {
        let mut groups: Vec<String> = groups.into_iter().map(Into::into).collect();
        if !groups.iter().any(|g| g == AUTHENTICATED) {
            groups.push(AUTHENTICATED.to_string());
        }
        UserInfo { username: username.into(), uid: String::new(), groups, extra: BTreeMap::new() }
    }

    /// The admin credential's holder: in `system:masters`, so allowed everything.
    pub fn admin() -> Self {
        UserInfo::new(ADMIN_USER, [MASTERS])
    }

    /// Whether the user is in `group`.
    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }
}

/// Every credential the server accepts: client certificates (checked per connection, see
/// [`x509`]), bearer tokens ([`tokens`]) and ServiceAccount tokens ([`service_accounts`]).
/// `system:anonymous` is refused.
#[derive(Clone, Debug, Default)]
pub struct Authenticator {
    /// Bearer tokens: the admin token and the token file's.
    pub tokens: StaticTokens,
    /// ServiceAccount tokens, once the server has loaded its signing key.
    pub service_accounts: Option<Arc<service_accounts::ServiceAccountTokens>>,
}

/// Why a request's credentials were refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// The cause, for the log (and the client, when `tell` is set).
    pub why: String,
    /// Whether the client is told the cause: yes for a ServiceAccount token (its holder can
    /// read every claim anyway, and an expired or revoked token must say so), no for a guessed
    /// static token or a missing credential, where kube-apiserver says only "Unauthorized".
    pub tell: bool,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.why)
    }
}

impl Refused {
    fn hidden(why: impl Into<String>) -> Self {
        Refused { why: why.into(), tell: false }
    }

    /// The message of the 401 Status.
    pub fn message(&self) -> String {
        if self.tell { format!("Unauthorized: {}", self.why) } else { "Unauthorized".to_string() }
    }
}

/// The token of an `Authorization: Bearer TOKEN` header, read as kube-apiserver reads it: the
/// header trimmed, split on single spaces, the scheme matched in any case, the word after it.
fn bearer_token(header: &str) -> Option<&str> {
    let mut parts = header.trim().splitn(3, ' ');
    let scheme = parts.next()?;
    let token = parts.next()?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

impl Authenticator {
    /// Who a request is from, given its `Authorization` header and its connection's client
    /// certificate; or why it is refused (401). A valid certificate wins, as in
    /// kube-apiserver's union of authenticators; a bearer token that matches nothing is refused
    /// even when the certificate is not valid either.
    pub fn authenticate(&self, authorization: Option<&str>, peer: Option<&PeerCertificate>) -> Result<UserInfo, Refused> {
        if let Some(PeerCertificate::Valid(user)) = peer {
            return Ok(user.clone());
        }
        if let Some(header) = authorization {
            let token = bearer_token(header).ok_or_else(|| Refused::hidden("the Authorization header is not a bearer token"))?;
            return self.token(token, &[]).map(|(user, _)| user);
        }
        match peer {
            Some(PeerCertificate::Invalid(why)) => Err(Refused::hidden(format!("invalid client certificate: {why}"))),
            _ => Err(Refused::hidden("no credentials (anonymous requests are not allowed)")),
        }
    }

    /// The user a bearer token stands for and which of `audiences` (the API's when empty) it
    /// is good for: what API requests and `TokenReview` ask. Static tokens are good for the
    /// API's audiences only, as kube-apiserver treats audience-agnostic authenticators.
    pub fn token(&self, token: &str, audiences: &[String]) -> Result<(UserInfo, Vec<String>), Refused> {
        let api_audiences = self.service_accounts.as_ref().map(|s| s.api_audiences()).unwrap_or_else(|| vec![service_accounts::DEFAULT_ISSUER.to_string()]);
        if let Some(user) = self.tokens.user(token) {
            let matched: Vec<String> =
                if audiences.is_empty() { api_audiences.clone() } else { audiences.iter().filter(|a| api_audiences.contains(a)).cloned().collect() };
            if matched.is_empty() {
                return Err(Refused { why: format!("the token is not valid for the audiences {audiences:?}"), tell: true });
            }
            return Ok((user.clone(), matched));
        }
        match &self.service_accounts {
            Some(accounts) if service_accounts::ServiceAccountTokens::looks_like_jwt(token) => {
                accounts.authenticate(token, audiences).map_err(|e| Refused { why: e.to_string(), tell: true })
            }
            _ => Err(Refused::hidden("invalid bearer token")),
        }
    }
}

/// A request extension present only on impersonated requests: the authenticated user who asked
/// to act as the [`UserInfo`] of the same request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Impersonator(pub UserInfo);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_info_serializes_as_authentication_k8s_io() {
        let mut user = UserInfo::new("alice", ["app-team"]);
        user.extra.insert("scopes".into(), vec!["a".into()]);
        let json = serde_json::to_value(&user).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"username": "alice", "groups": ["app-team", "system:authenticated"], "extra": {"scopes": ["a"]}})
        );
        assert_eq!(serde_json::from_value::<UserInfo>(json).unwrap(), user);
    }

    #[test]
    fn a_bearer_token_is_read_as_kube_apiserver_reads_it() {
        // The scheme in any case (the Python client's in-cluster configuration sends
        // `bearer`), the header trimmed, the token the word after it.
        for header in ["Bearer abc", "bearer abc", "BEARER abc", "  Bearer abc  ", "Bearer abc extra"] {
            assert_eq!(bearer_token(header), Some("abc"), "{header:?}");
        }
        for header in ["", "Bearer", "Bearer ", "Basic abc", "Bearerabc", "Bearer  abc"] {
            assert_eq!(bearer_token(header), None, "{header:?}");
        }
    }

    #[test]
    fn the_admin_is_a_master() {
        assert!(UserInfo::admin().in_group(MASTERS));
        assert!(UserInfo::admin().in_group(AUTHENTICATED));
    }
}
