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

pub mod tokens;
pub mod x509;

use std::collections::BTreeMap;

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
/// [`x509`]) and bearer tokens ([`tokens`]). `system:anonymous` is refused.
#[derive(Clone, Debug, Default)]
pub struct Authenticator {
    /// Bearer tokens: the admin token and the token file's.
    pub tokens: StaticTokens,
}

impl Authenticator {
    /// Who a request is from, given its `Authorization` header and its connection's client
    /// certificate; or why it is refused (401). A valid certificate wins, as in
    /// kube-apiserver's union of authenticators; a bearer token that matches nothing is refused
    /// even when the certificate is not valid either.
    pub fn authenticate(&self, authorization: Option<&str>, peer: Option<&PeerCertificate>) -> Result<UserInfo, String> {
        if let Some(PeerCertificate::Valid(user)) = peer {
            return Ok(user.clone());
        }
        if let Some(header) = authorization {
            let token = header
                .strip_prefix("Bearer ")
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .ok_or_else(|| "the Authorization header is not a bearer token".to_string())?;
            return self.tokens.user(token).cloned().ok_or_else(|| "invalid bearer token".to_string());
        }
        match peer {
            Some(PeerCertificate::Invalid(why)) => Err(format!("invalid client certificate: {why}")),
            _ => Err("no credentials (anonymous requests are not allowed)".to_string()),
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
    fn the_admin_is_a_master() {
        assert!(UserInfo::admin().in_group(MASTERS));
        assert!(UserInfo::admin().in_group(AUTHENTICATED));
    }
}
