use std::sync::Arc;

use bytes::Bytes;
use oxplane_store::{Store, Write};
use serde_json::json;

use super::*;

struct Fixture {
    store: Arc<dyn Store>,
    tokens: ServiceAccountTokens,
}

async fn put(store: &Arc<dyn Store>, key: &str, object: Value) {
    let value = Bytes::from(object.to_string());
    let write = match store.get(key).await.unwrap().kv {
        Some(kv) => Write::Update { key: key.into(), value, expected: kv.mod_revision },
        None => Write::Create { key: key.into(), value },
    };
    store.write(write).await.unwrap();
}

async fn delete(store: &Arc<dyn Store>, key: &str) {
    let expected = store.get(key).await.unwrap().kv.unwrap().mod_revision;
    store.write(Write::Delete { key: key.into(), expected }).await.unwrap();
}

async fn fixture() -> Fixture {
    let store: Arc<dyn Store> = Arc::new(oxplane_store::memory::MemoryStore::new(Default::default()));
    put(&store, "/registry/core/serviceaccounts/team-a/robot", json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot", "namespace": "team-a", "uid": "u1"}})).await;
    let cache = WatchCache::start(store.clone(), 100).await.unwrap();
    let (key, _) = SigningKey::generate().unwrap();
    let tokens = ServiceAccountTokens::new(DEFAULT_ISSUER.into(), "https://127.0.0.1/openid/v1/jwks".into(), "CA".into(), key, cache);
    Fixture { store, tokens }
}

impl Fixture {
    async fn synced(&self) -> &ServiceAccountTokens {
        self.tokens.cache.sync().await.unwrap();
        &self.tokens
    }
}

fn spec(audiences: &[&str], seconds: i64) -> TokenSpec {
    TokenSpec {
        namespace: "team-a".into(),
        name: "robot".into(),
        uid: "u1".into(),
        audiences: audiences.iter().map(|a| a.to_string()).collect(),
        expiration_seconds: seconds,
        bound_secret: None,
    }
}

#[tokio::test]
async fn a_bound_token_authenticates_its_service_account_for_its_audiences() {
    let f = fixture().await;
    let tokens = f.synced().await;
    let (token, expires) = tokens.issue(&spec(&[], 3600)).unwrap();
    assert!(ServiceAccountTokens::looks_like_jwt(&token));
    assert!(expires > now() + 3500);
    let (user, audiences) = tokens.authenticate(&token, &[]).unwrap();
    assert_eq!(user.username, "system:serviceaccount:team-a:robot");
    assert_eq!(user.uid, "u1");
    assert_eq!(user.groups, ["system:serviceaccounts", "system:serviceaccounts:team-a", "system:authenticated"]);
    assert!(user.extra[CREDENTIAL_ID][0].starts_with("JTI="));
    assert_eq!(audiences, [DEFAULT_ISSUER]);

    // A token for another audience is not the API's, but a TokenReview for that audience
    // accepts it.
    let (vault, _) = tokens.issue(&spec(&["vault"], 3600)).unwrap();
    assert!(matches!(tokens.authenticate(&vault, &[]), Err(TokenError::Audience { .. })));
    assert_eq!(tokens.authenticate(&vault, &["vault".into(), "other".into()]).unwrap().1, ["vault"]);
}

#[tokio::test]
async fn expired_forged_malformed_and_orphaned_tokens_are_refused_with_their_cause() {
    let f = fixture().await;
    let tokens = f.synced().await;
    let (expired, _) = tokens.issue(&spec(&[], -10)).unwrap();
    let error = tokens.authenticate(&expired, &[]).unwrap_err();
    assert!(matches!(error, TokenError::Expired(_)), "{error}");
    assert!(error.to_string().starts_with("the service account token expired at 20"), "{error}");

    let (other_key, _) = SigningKey::generate().unwrap();
    let other = ServiceAccountTokens::new(DEFAULT_ISSUER.into(), String::new(), String::new(), other_key, tokens.cache.clone());
    let (forged, _) = other.issue(&spec(&[], 3600)).unwrap();
    assert_eq!(tokens.authenticate(&forged, &[]).unwrap_err(), TokenError::Signature);

    for garbage in ["a.b.c", "not a token", "eyJhbGciOiJIUzI1NiJ9.e30.AAAA"] {
        assert!(matches!(tokens.authenticate(garbage, &[]), Err(TokenError::Malformed(_))), "{garbage}");
    }
    // Well formed, signed by nobody.
    assert_eq!(tokens.authenticate("eyJhbGciOiJFUzI1NiJ9.e30.AAAA", &[]).unwrap_err(), TokenError::Signature);

    // The token names uid u1: a ServiceAccount made again under the same name does not revive it.
    let (token, _) = tokens.issue(&spec(&[], 3600)).unwrap();
    delete(&f.store, "/registry/core/serviceaccounts/team-a/robot").await;
    let error = f.synced().await.authenticate(&token, &[]).unwrap_err();
    assert_eq!(error.to_string(), "the service account token is no longer valid: the ServiceAccount team-a/robot has been deleted");
    put(&f.store, "/registry/core/serviceaccounts/team-a/robot", json!({"metadata": {"name": "robot", "namespace": "team-a", "uid": "u2"}})).await;
    let error = f.synced().await.authenticate(&token, &[]).unwrap_err();
    assert!(error.to_string().contains("(uid u1) has been deleted; the one of that name now has uid u2"), "{error}");
}

#[tokio::test]
async fn a_legacy_token_lives_as_long_as_its_secret_holds_it() {
    let f = fixture().await;
    let token = f.tokens.issue_legacy("team-a", "robot-token", "robot", "u1").unwrap();
    let secret = |token: &str| {
        json!({"metadata": {"name": "robot-token", "namespace": "team-a", "uid": "s1"}, "type": TOKEN_SECRET_TYPE, "data": {"token": STANDARD.encode(token)}})
    };
    put(&f.store, "/registry/core/secrets/team-a/robot-token", secret(&token)).await;
    let (user, _) = f.synced().await.authenticate(&token, &[]).unwrap();
    assert_eq!(user.username, "system:serviceaccount:team-a:robot");
    assert!(matches!(f.tokens.authenticate(&token, &["vault".into()]), Err(TokenError::Audience { .. })));

    put(&f.store, "/registry/core/secrets/team-a/robot-token", secret("another")).await;
    let error = f.synced().await.authenticate(&token, &[]).unwrap_err();
    assert!(error.to_string().ends_with("the Secret team-a/robot-token no longer holds this token"), "{error}");
}

#[tokio::test]
async fn claims_read_as_kubernetes_writes_them() {
    let f = fixture().await;
    let (token, _) = f.tokens.issue(&TokenSpec { bound_secret: Some(ObjectClaim { name: "s".into(), uid: "s1".into() }), ..spec(&["a"], 600) }).unwrap();
    let payload = token.split('.').nth(1).unwrap();
    let claims: Value = serde_json::from_slice(&base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap();
    assert_eq!(claims["sub"], "system:serviceaccount:team-a:robot");
    assert_eq!(claims["aud"], json!(["a"]));
    assert_eq!(claims["kubernetes.io"], json!({"namespace": "team-a", "serviceaccount": {"name": "robot", "uid": "u1"}, "secret": {"name": "s", "uid": "s1"}}));
    assert_eq!(claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(), 600);
    let header = jsonwebtoken::decode_header(&token).unwrap();
    assert_eq!(header.kid.as_deref(), Some(f.tokens.key.kid.as_str()));
    // A bound Secret that does not exist invalidates the token.
    let error = f.synced().await.authenticate(&token, &["a".into()]).unwrap_err();
    assert!(error.to_string().ends_with("the Secret team-a/s has been deleted"), "{error}");
    // `aud` may also be one string.
    let claims: Claims = serde_json::from_value(json!({"iss": "i", "sub": "s", "aud": "x"})).unwrap();
    assert_eq!(claims.aud, ["x"]);
}

/// A second server on the same store, with the same key but a watch cache of its own.
async fn replica(f: &Fixture, pem: &str) -> ServiceAccountTokens {
    let cache = WatchCache::start(f.store.clone(), 100).await.unwrap();
    cache.sync().await.unwrap();
    ServiceAccountTokens::new(DEFAULT_ISSUER.into(), String::new(), String::new(), SigningKey::from_pem(pem).unwrap(), cache)
}

const ROBOT: &str = "/registry/core/serviceaccounts/team-a/robot";

#[tokio::test]
async fn a_verified_token_is_remembered_and_dropped_when_its_service_account_is_deleted() {
    let f = fixture().await;
    let tokens = f.synced().await;
    let (token, _) = tokens.issue(&spec(&[], 3600)).unwrap();
    assert_eq!(tokens.verified_tokens(&token), (0, false));
    let first = tokens.authenticate(&token, &[]).unwrap();
    assert_eq!(tokens.verified_tokens(&token), (1, true));
    // Served from the cache: the same answer, and still one entry.
    assert_eq!(tokens.authenticate(&token, &[]).unwrap(), first);
    assert_eq!(tokens.verified_tokens(&token), (1, true));
    // A review for another audience is refused but does not make the token bad for the API.
    assert!(matches!(tokens.authenticate(&token, &["vault".into()]), Err(TokenError::Audience { .. })));
    assert!(tokens.verified_tokens(&token).1);

    delete(&f.store, ROBOT).await;
    let error = f.synced().await.authenticate(&token, &[]).unwrap_err();
    assert!(matches!(error, TokenError::Invalidated(_)), "{error}");
    assert_eq!(f.tokens.verified_tokens(&token), (0, false));
    // Made again under the same name, the ServiceAccount has another uid: still refused.
    put(&f.store, ROBOT, json!({"metadata": {"name": "robot", "namespace": "team-a", "uid": "u2"}})).await;
    assert!(matches!(f.synced().await.authenticate(&token, &[]), Err(TokenError::Invalidated(_))));
    assert_eq!(f.tokens.verified_tokens(&token), (0, false));
}

#[tokio::test]
async fn a_remembered_token_is_dropped_when_its_service_account_uid_changes_or_it_is_being_deleted() {
    let f = fixture().await;
    let tokens = f.synced().await;
    let (token, _) = tokens.issue(&spec(&[], 3600)).unwrap();
    tokens.authenticate(&token, &[]).unwrap();
    // Replaced in place (as a restore from a backup would): the uid the token names is gone.
    put(&f.store, ROBOT, json!({"metadata": {"name": "robot", "namespace": "team-a", "uid": "u2"}})).await;
    let error = f.synced().await.authenticate(&token, &[]).unwrap_err();
    assert!(error.to_string().contains("(uid u1) has been deleted; the one of that name now has uid u2"), "{error}");
    assert!(!f.tokens.verified_tokens(&token).1);

    put(&f.store, ROBOT, json!({"metadata": {"name": "robot", "namespace": "team-a", "uid": "u1"}})).await;
    f.synced().await.authenticate(&token, &[]).unwrap();
    assert!(f.tokens.verified_tokens(&token).1);
    let terminating = json!({"metadata": {"name": "robot", "namespace": "team-a", "uid": "u1", "deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["x"]}});
    put(&f.store, ROBOT, terminating).await;
    let error = f.synced().await.authenticate(&token, &[]).unwrap_err();
    assert!(error.to_string().ends_with("the ServiceAccount team-a/robot is being deleted"), "{error}");
    assert!(!f.tokens.verified_tokens(&token).1);
}

#[tokio::test]
async fn a_remembered_bound_token_is_dropped_when_its_secret_goes() {
    let f = fixture().await;
    let key = "/registry/core/secrets/team-a/s";
    put(&f.store, key, json!({"metadata": {"name": "s", "namespace": "team-a", "uid": "s1"}})).await;
    let tokens = f.synced().await;
    let (token, _) = tokens.issue(&TokenSpec { bound_secret: Some(ObjectClaim { name: "s".into(), uid: "s1".into() }), ..spec(&[], 3600) }).unwrap();
    let (user, _) = tokens.authenticate(&token, &[]).unwrap();
    assert_eq!(user.extra["authentication.kubernetes.io/secret-uid"], ["s1"]);
    assert!(tokens.verified_tokens(&token).1);
    assert_eq!(tokens.authenticate(&token, &[]).unwrap().0, user);

    delete(&f.store, key).await;
    let error = f.synced().await.authenticate(&token, &[]).unwrap_err();
    assert!(error.to_string().ends_with("the Secret team-a/s has been deleted"), "{error}");
    assert_eq!(f.tokens.verified_tokens(&token), (0, false));
}

#[tokio::test]
async fn a_remembered_legacy_token_is_dropped_when_its_secret_or_service_account_goes() {
    let f = fixture().await;
    let secret_key = "/registry/core/secrets/team-a/robot-token";
    let token = f.tokens.issue_legacy("team-a", "robot-token", "robot", "u1").unwrap();
    let secret = |token: &str| {
        json!({"metadata": {"name": "robot-token", "namespace": "team-a", "uid": "s1"}, "type": TOKEN_SECRET_TYPE, "data": {"token": STANDARD.encode(token)}})
    };
    put(&f.store, secret_key, secret(&token)).await;
    f.synced().await.authenticate(&token, &[]).unwrap();
    assert!(f.tokens.verified_tokens(&token).1);
    // The Secret is emptied: the token it held is no longer good.
    put(&f.store, secret_key, secret("another")).await;
    assert!(matches!(f.synced().await.authenticate(&token, &[]), Err(TokenError::Invalidated(_))));
    assert!(!f.tokens.verified_tokens(&token).1);

    put(&f.store, secret_key, secret(&token)).await;
    f.synced().await.authenticate(&token, &[]).unwrap();
    delete(&f.store, secret_key).await;
    assert!(matches!(f.synced().await.authenticate(&token, &[]), Err(TokenError::Invalidated(_))));
    assert!(!f.tokens.verified_tokens(&token).1);

    put(&f.store, secret_key, secret(&token)).await;
    f.synced().await.authenticate(&token, &[]).unwrap();
    delete(&f.store, ROBOT).await;
    let error = f.synced().await.authenticate(&token, &[]).unwrap_err();
    assert!(error.to_string().ends_with("the ServiceAccount team-a/robot has been deleted"), "{error}");
    assert!(!f.tokens.verified_tokens(&token).1);
}

#[tokio::test]
async fn a_remembered_token_is_not_served_past_its_expiry() {
    let f = fixture().await;
    let tokens = f.synced().await;
    let (token, expires) = tokens.issue(&spec(&[], 1)).unwrap();
    tokens.authenticate(&token, &[]).unwrap();
    assert!(tokens.verified_tokens(&token).1);
    while now() < expires {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(matches!(tokens.authenticate(&token, &[]), Err(TokenError::Expired(_))));
    assert_eq!(tokens.verified_tokens(&token), (0, false));
}

#[tokio::test]
async fn tokens_that_fail_verification_are_not_remembered() {
    let f = fixture().await;
    let tokens = f.synced().await;
    let (other_key, _) = SigningKey::generate().unwrap();
    let other = ServiceAccountTokens::new(DEFAULT_ISSUER.into(), String::new(), String::new(), other_key, tokens.cache.clone());
    let (forged, _) = other.issue(&spec(&[], 3600)).unwrap();
    assert_eq!(tokens.authenticate(&forged, &[]).unwrap_err(), TokenError::Signature);
    // Well signed, but for an audience the API is not: verified, yet never good for requests.
    let (vault, _) = tokens.issue(&spec(&["vault"], 3600)).unwrap();
    assert!(tokens.authenticate(&vault, &[]).is_err());
    assert_eq!(tokens.verified_tokens(&forged), (0, false));
}

#[tokio::test]
async fn a_replica_refuses_a_remembered_token_once_the_deletion_reaches_its_watch_cache() {
    let store: Arc<dyn Store> = Arc::new(oxplane_store::memory::MemoryStore::new(Default::default()));
    put(&store, ROBOT, json!({"metadata": {"name": "robot", "namespace": "team-a", "uid": "u1"}})).await;
    let (key, pem) = SigningKey::generate().unwrap();
    let cache = WatchCache::start(store.clone(), 100).await.unwrap();
    cache.sync().await.unwrap();
    let f = Fixture { store, tokens: ServiceAccountTokens::new(DEFAULT_ISSUER.into(), String::new(), String::new(), key, cache) };
    let other = replica(&f, &pem).await;
    let (token, _) = f.tokens.issue(&spec(&[], 3600)).unwrap();
    f.tokens.authenticate(&token, &[]).unwrap();
    other.authenticate(&token, &[]).unwrap();
    assert!(other.verified_tokens(&token).1);

    // Deleted through the first server's store: the replica learns it by its watch alone.
    delete(&f.store, ROBOT).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while other.cache.get(ROBOT).0.is_some() {
        assert!(std::time::Instant::now() < deadline, "the replica's watch cache never saw the deletion");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert!(matches!(other.authenticate(&token, &[]), Err(TokenError::Invalidated(_))));
    assert!(!other.verified_tokens(&token).1);
}
