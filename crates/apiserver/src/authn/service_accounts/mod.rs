//! ServiceAccount tokens: JWTs signed with the store's key ([`key`]), as kube-apiserver issues
//! and checks them.
//!
//! - Bound tokens, from the `token` subresource (`TokenRequest`, `kubectl create token`): issuer
//!   `--service-account-issuer`, audiences, an expiry, and the ServiceAccount's uid (and, bound to
//!   a Secret, the Secret's) in the private `kubernetes.io` claim. A token stops working when it
//!   expires, or when its ServiceAccount (or bound Secret) is deleted, even if one of the same
//!   name is made again: the uids must match.
//! - Legacy tokens, written into Secrets of type `kubernetes.io/service-account-token` by the
//!   tokens controller (`crate::controllers`): issuer `kubernetes/serviceaccount`, no expiry,
//!   valid while the Secret holds them and the ServiceAccount exists.
//!
//! Either authenticates as `system:serviceaccount:<namespace>:<name>` in the groups
//! `system:serviceaccounts` and `system:serviceaccounts:<namespace>`.

pub mod key;
pub mod requests;
pub mod verified;

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use jsonwebtoken::{Algorithm, Header, Validation};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::UserInfo;
use crate::authz::SERVICE_ACCOUNT_PREFIX;
use crate::cache::WatchCache;

pub use key::SigningKey;

/// kube-apiserver's default issuer (and so API audience) of most clusters.
pub const DEFAULT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// The issuer of legacy (Secret) tokens.
pub const LEGACY_ISSUER: &str = "kubernetes/serviceaccount";
/// The group of every ServiceAccount.
pub const SERVICE_ACCOUNTS_GROUP: &str = "system:serviceaccounts";
/// The `extra` key naming a bound token's id (`JTI=<jti>`).
pub const CREDENTIAL_ID: &str = "authentication.kubernetes.io/credential-id";
/// A TokenRequest's default lifetime, as kube-apiserver's.
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
/// The shortest lifetime a TokenRequest may ask for.
pub const MIN_EXPIRATION_SECONDS: i64 = 600;
/// The longest (2^32 seconds).
pub const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;
/// The Secret type of legacy tokens.
pub const TOKEN_SECRET_TYPE: &str = "kubernetes.io/service-account-token";
/// The annotation naming a legacy token Secret's ServiceAccount.
pub const SA_NAME_ANNOTATION: &str = "kubernetes.io/service-account.name";
/// The annotation naming its uid.
pub const SA_UID_ANNOTATION: &str = "kubernetes.io/service-account.uid";

/// Why a token was refused: said to the client in the 401 and in a TokenReview's
/// `status.error`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Not a JWT this server can read.
    #[error("the token is not a valid service account token: {0}")]
    Malformed(String),
    /// Signed by another key.
    #[error("the service account token's signature is not valid (it was not signed by this server's key)")]
    Signature,
    /// Past its expiry.
    #[error("the service account token expired at {0}")]
    Expired(String),
    /// Not valid yet.
    #[error("the service account token is not valid before {0}")]
    NotYetValid(String),
    /// Issued by someone else.
    #[error("the service account token was issued by {found:?}, not by {expected:?}")]
    Issuer {
        /// The token's `iss`.
        found: String,
        /// This server's.
        expected: String,
    },
    /// Meant for other audiences.
    #[error("the service account token's audiences {found:?} include none of {wanted:?}")]
    Audience {
        /// The token's `aud`.
        found: Vec<String>,
        /// The audiences accepted here.
        wanted: Vec<String>,
    },
    /// The ServiceAccount (or the bound Secret) it names is gone, or was replaced.
    #[error("the service account token is no longer valid: {0}")]
    Invalidated(String),
}

/// The private claim of bound tokens.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct KubernetesClaim {
    /// The ServiceAccount's namespace.
    pub namespace: String,
    /// The ServiceAccount.
    pub serviceaccount: ObjectClaim,
    /// The Secret the token is bound to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<ObjectClaim>,
}

/// An object a token names: its name and uid.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ObjectClaim {
    /// Its name.
    pub name: String,
    /// Its uid.
    pub uid: String,
}

/// A token's claims, bound or legacy.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Claims {
    /// Issuer.
    pub iss: String,
    /// `system:serviceaccount:<namespace>:<name>`.
    pub sub: String,
    /// Audiences (JSON: a string or an array).
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "one_or_many")]
    pub aud: Vec<String>,
    /// Expiry (Unix seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exp: Option<i64>,
    /// Issued at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iat: Option<i64>,
    /// Not before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<i64>,
    /// The token's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jti: Option<String>,
    /// Bound tokens' private claim.
    #[serde(rename = "kubernetes.io", default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<KubernetesClaim>,
    /// Legacy tokens' claims.
    #[serde(rename = "kubernetes.io/serviceaccount/namespace", default, skip_serializing_if = "Option::is_none")]
    pub legacy_namespace: Option<String>,
    /// The legacy token's Secret.
    #[serde(rename = "kubernetes.io/serviceaccount/secret.name", default, skip_serializing_if = "Option::is_none")]
    pub legacy_secret: Option<String>,
    /// The legacy token's ServiceAccount.
    #[serde(rename = "kubernetes.io/serviceaccount/service-account.name", default, skip_serializing_if = "Option::is_none")]
    pub legacy_name: Option<String>,
    /// The legacy token's ServiceAccount uid.
    #[serde(rename = "kubernetes.io/serviceaccount/service-account.uid", default, skip_serializing_if = "Option::is_none")]
    pub legacy_uid: Option<String>,
}

fn one_or_many<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(deserializer)? {
        OneOrMany::One(one) => vec![one],
        OneOrMany::Many(many) => many,
    })
}

/// A ServiceAccount's user name.
pub fn username(namespace: &str, name: &str) -> String {
    format!("{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}")
}

/// A ServiceAccount's user: its name, uid and groups.
pub fn user(namespace: &str, name: &str, uid: &str) -> UserInfo {
    let mut user = UserInfo::new(username(namespace, name), [SERVICE_ACCOUNTS_GROUP.to_string(), format!("{SERVICE_ACCOUNTS_GROUP}:{namespace}")]);
    user.uid = uid.to_string();
    user
}

/// What a bound token is issued for.
#[derive(Clone, Debug)]
pub struct TokenSpec {
    /// The ServiceAccount's namespace, name and uid.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its uid.
    pub uid: String,
    /// The audiences (the API's when empty).
    pub audiences: Vec<String>,
    /// Seconds until it expires.
    pub expiration_seconds: i64,
    /// The Secret (name, uid) it is bound to.
    pub bound_secret: Option<ObjectClaim>,
}

/// A token of `claims` signed with `key` (ES256, the key's id in the header).
pub fn sign(key: &SigningKey, claims: &Claims) -> Result<String, String> {
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some(key.kid.clone());
    jsonwebtoken::encode(&header, claims, &key.encoding).map_err(|e| format!("signing the token: {e}"))
}

/// Issues and checks ServiceAccount tokens.
pub struct ServiceAccountTokens {
    /// The issuer (`iss`) of bound tokens, and the API's audience.
    pub issuer: String,
    /// Where the key set is published (`jwks_uri` of the discovery document).
    pub jwks_uri: String,
    /// The CA certificate a legacy token Secret carries as `ca.crt`.
    pub ca_pem: String,
    key: SigningKey,
    cache: Arc<WatchCache>,
    verified: verified::VerifiedTokens,
    /// The watch cache's change counters of ServiceAccounts and of Secrets.
    changed: (Arc<std::sync::atomic::AtomicU64>, Arc<std::sync::atomic::AtomicU64>),
}

impl std::fmt::Debug for ServiceAccountTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceAccountTokens").field("issuer", &self.issuer).field("kid", &self.key.kid).finish_non_exhaustive()
    }
}

fn now() -> i64 {
    jiff::Timestamp::now().as_second()
}

fn rfc3339(seconds: i64) -> String {
    jiff::Timestamp::from_second(seconds).map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()).unwrap_or_else(|_| seconds.to_string())
}

impl ServiceAccountTokens {
    /// Tokens issued as `issuer` with `key`, checked against the ServiceAccounts in `cache`.
    pub fn new(issuer: String, jwks_uri: String, ca_pem: String, key: SigningKey, cache: Arc<WatchCache>) -> Self {
        let changed = (cache.track("/registry/core/serviceaccounts/"), cache.track("/registry/core/secrets/"));
        ServiceAccountTokens { issuer, jwks_uri, ca_pem, key, cache, verified: verified::VerifiedTokens::new(verified::DEFAULT_CAPACITY), changed }
    }

    /// The audiences API requests must carry: the issuer (kube-apiserver's `--api-audiences`
    /// default).
    pub fn api_audiences(&self) -> Vec<String> {
        vec![self.issuer.clone()]
    }

    /// The public key set (`/openid/v1/jwks`).
    pub fn jwks(&self) -> Value {
        serde_json::json!({"keys": [self.key.jwk()]})
    }

    fn sign(&self, claims: &Claims) -> Result<String, String> {
        sign(&self.key, claims)
    }

    /// A bound token and when it expires (Unix seconds).
    pub fn issue(&self, spec: &TokenSpec) -> Result<(String, i64), String> {
        let issued = now();
        let expires = issued.saturating_add(spec.expiration_seconds);
        let audiences = if spec.audiences.is_empty() { self.api_audiences() } else { spec.audiences.clone() };
        let claims = Claims {
            iss: self.issuer.clone(),
            sub: username(&spec.namespace, &spec.name),
            aud: audiences,
            exp: Some(expires),
            iat: Some(issued),
            nbf: Some(issued),
            jti: Some(uuid::Uuid::new_v4().to_string()),
            kubernetes: Some(KubernetesClaim {
                namespace: spec.namespace.clone(),
                serviceaccount: ObjectClaim { name: spec.name.clone(), uid: spec.uid.clone() },
                secret: spec.bound_secret.clone(),
            }),
            ..Claims::default()
        };
        Ok((self.sign(&claims)?, expires))
    }

    /// A legacy token for the Secret `namespace/secret` of the ServiceAccount `name` (`uid`).
    pub fn issue_legacy(&self, namespace: &str, secret: &str, name: &str, uid: &str) -> Result<String, String> {
        self.sign(&Claims {
            iss: LEGACY_ISSUER.into(),
            sub: username(namespace, name),
            legacy_namespace: Some(namespace.into()),
            legacy_secret: Some(secret.into()),
            legacy_name: Some(name.into()),
            legacy_uid: Some(uid.into()),
            ..Claims::default()
        })
    }

    /// Whether `token` has a JWT's shape (three dot-separated parts), so that it is this
    /// authenticator's to answer rather than the static tokens'.
    pub fn looks_like_jwt(token: &str) -> bool {
        token.split('.').count() == 3 && !token.contains(char::is_whitespace)
    }

    /// The user `token` stands for, and which of `audiences` (the API's when empty) it was
    /// issued for; or why it is refused. The signature is verified once per token
    /// ([`verified`]); expiry, audiences and the ServiceAccount's (and Secret's) existence are
    /// checked on every call.
    pub fn authenticate(&self, token: &str, audiences: &[String]) -> Result<(UserInfo, Vec<String>), TokenError> {
        let now = now();
        // Read before the objects are looked up: a change after this moves the counters, so
        // the next request looks again.
        let generation = self.generation();
        let (claims, confirmed) = match self.verified.get(token, now) {
            Some((claims, confirmed)) => (claims, Some(confirmed)),
            None => (Arc::new(self.verified_claims(token)?), None),
        };
        let alive = confirmed.is_some_and(|confirmed| {
            let secrets_matter = claims.iss == LEGACY_ISSUER || claims.kubernetes.as_ref().is_some_and(|k| k.secret.is_some());
            confirmed.service_accounts == generation.service_accounts && (!secrets_matter || confirmed.secrets == generation.secrets)
        });
        let answer = self.check(token, &claims, audiences, now, alive);
        match &answer {
            Ok(_) if !alive => self.verified.insert(token, claims, generation),
            // The token will never be good again: its objects are gone or it expired.
            Err(TokenError::Invalidated(_) | TokenError::Expired(_)) if confirmed.is_some() => self.verified.forget(token),
            _ => {}
        }
        answer
    }

    /// The change counters of ServiceAccounts and Secrets now.
    fn generation(&self) -> verified::Generation {
        use std::sync::atomic::Ordering;
        verified::Generation { service_accounts: self.changed.0.load(Ordering::Acquire), secrets: self.changed.1.load(Ordering::Acquire) }
    }

    /// How many verified tokens are remembered, and whether `token` is one of them.
    pub fn verified_tokens(&self, token: &str) -> (usize, bool) {
        (self.verified.len(), self.verified.contains(token))
    }

    /// Everything about verified `claims` that can change while the token stays the same; the
    /// objects it names are looked up unless they are known `alive` (see [`verified`]).
    fn check(&self, token: &str, claims: &Claims, audiences: &[String], now: i64, alive: bool) -> Result<(UserInfo, Vec<String>), TokenError> {
        if let Some(exp) = claims.exp
            && exp <= now
        {
            return Err(TokenError::Expired(rfc3339(exp)));
        }
        if let Some(nbf) = claims.nbf
            && nbf > now
        {
            return Err(TokenError::NotYetValid(rfc3339(nbf)));
        }
        let wanted = if audiences.is_empty() { self.api_audiences() } else { audiences.to_vec() };
        if claims.iss == LEGACY_ISSUER {
            // Legacy tokens name no audience: they are for the API alone.
            let matched: Vec<String> = wanted.iter().filter(|a| self.api_audiences().contains(a)).cloned().collect();
            if matched.is_empty() {
                return Err(TokenError::Audience { found: self.api_audiences(), wanted });
            }
            return Ok((self.legacy_user(token, claims, alive)?, matched));
        }
        if claims.iss != self.issuer {
            return Err(TokenError::Issuer { found: claims.iss.clone(), expected: self.issuer.clone() });
        }
        let matched: Vec<String> = wanted.iter().filter(|a| claims.aud.contains(a)).cloned().collect();
        if matched.is_empty() {
            return Err(TokenError::Audience { found: claims.aud.clone(), wanted });
        }
        if claims.exp.is_none() {
            return Err(TokenError::Malformed("a bound token must have an expiry (exp)".into()));
        }
        let private = claims.kubernetes.as_ref().ok_or_else(|| TokenError::Malformed("the kubernetes.io claim is missing".into()))?;
        let account = &private.serviceaccount;
        if claims.sub != username(&private.namespace, &account.name) {
            return Err(TokenError::Malformed(format!("the subject {:?} is not the service account the token names", claims.sub)));
        }
        if !alive {
            self.live("serviceaccounts", "ServiceAccount", &private.namespace, &account.name, &account.uid)?;
            if let Some(secret) = &private.secret {
                self.live("secrets", "Secret", &private.namespace, &secret.name, &secret.uid)?;
            }
        }
        let mut user = user(&private.namespace, &account.name, &account.uid);
        if let Some(jti) = &claims.jti {
            user.extra.insert(CREDENTIAL_ID.into(), vec![format!("JTI={jti}")]);
        }
        if let Some(secret) = &private.secret {
            user.extra.insert("authentication.kubernetes.io/secret-name".to_string(), vec![secret.name.clone()]);
            user.extra.insert("authentication.kubernetes.io/secret-uid".to_string(), vec![secret.uid.clone()]);
        }
        Ok((user, matched))
    }

    /// The claims of a token signed by this server's key (expiry is checked by the caller, as
    /// legacy tokens have none).
    fn verified_claims(&self, token: &str) -> Result<Claims, TokenError> {
        let header = jsonwebtoken::decode_header(token).map_err(|e| TokenError::Malformed(e.to_string()))?;
        if header.alg != Algorithm::ES256 {
            return Err(TokenError::Malformed(format!("the signing algorithm {:?} is not ES256", header.alg)));
        }
        let mut validation = Validation::new(Algorithm::ES256);
        validation.required_spec_claims.clear();
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.validate_aud = false;
        validation.leeway = 0;
        match jsonwebtoken::decode::<Claims>(token, &self.key.decoding, &validation) {
            Ok(data) => Ok(data.claims),
            Err(error) => match error.kind() {
                jsonwebtoken::errors::ErrorKind::InvalidSignature => Err(TokenError::Signature),
                _ => Err(TokenError::Malformed(error.to_string())),
            },
        }
    }

    /// Checks that `kind` `namespace/name` exists with `uid` and is not being deleted.
    fn live(&self, plural: &str, kind: &str, namespace: &str, name: &str, uid: &str) -> Result<Arc<Value>, TokenError> {
        let (object, _) = self.cache.get(&format!("/registry/core/{plural}/{namespace}/{name}"));
        let Some(object) = object else {
            return Err(TokenError::Invalidated(format!("the {kind} {namespace}/{name} has been deleted")));
        };
        let found = crate::objects::meta_str(&object, "uid").unwrap_or_default();
        if !uid.is_empty() && found != uid {
            return Err(TokenError::Invalidated(format!(
                "the {kind} {namespace}/{name} (uid {uid}) has been deleted; the one of that name now has uid {found}"
            )));
        }
        if object["metadata"].get("deletionTimestamp").is_some_and(|t| !t.is_null()) {
            return Err(TokenError::Invalidated(format!("the {kind} {namespace}/{name} is being deleted")));
        }
        Ok(object)
    }

    /// The user of a legacy token: its Secret must still hold it, its ServiceAccount exist
    /// (looked up unless known `alive`).
    fn legacy_user(&self, token: &str, claims: &Claims, alive: bool) -> Result<UserInfo, TokenError> {
        let missing = |claim: &str| TokenError::Malformed(format!("the claim kubernetes.io/serviceaccount/{claim} is missing"));
        let namespace = claims.legacy_namespace.as_deref().ok_or_else(|| missing("namespace"))?;
        let secret_name = claims.legacy_secret.as_deref().ok_or_else(|| missing("secret.name"))?;
        let name = claims.legacy_name.as_deref().ok_or_else(|| missing("service-account.name"))?;
        let uid = claims.legacy_uid.as_deref().ok_or_else(|| missing("service-account.uid"))?;
        if !alive {
            let secret = self.live("secrets", "Secret", namespace, secret_name, "")?;
            let held = secret["data"]["token"].as_str().and_then(|t| STANDARD.decode(t).ok());
            if held.as_deref() != Some(token.as_bytes()) {
                return Err(TokenError::Invalidated(format!("the Secret {namespace}/{secret_name} no longer holds this token")));
            }
            self.live("serviceaccounts", "ServiceAccount", namespace, name, uid)?;
        }
        Ok(user(namespace, name, uid))
    }
}

#[cfg(test)]
mod tests;
