//! A bounded cache of ServiceAccount tokens whose signature this server has verified, so that
//! a client sending the same token on every request pays for the ECDSA verification and the
//! JSON decoding once, not per request (as kube-apiserver caches its token authentications).
//!
//! What is cached is what the token itself proves: its claims, read from a signature made with
//! this server's key, which the token's bytes alone determine. What can change while the token
//! stays the same is still decided on every request by the caller: expiry and audiences, and
//! that the ServiceAccount (and bound or legacy Secret) exists with the uid the token names.
//! That last one is read from the watch cache, unless no ServiceAccount (and, for a token that
//! depends on one, no Secret) has changed since it was last found true: each entry keeps the
//! [`Generation`] of that finding, and the watch cache moves the counters under its lock as it
//! applies a change. So a token whose ServiceAccount is deleted, on this server or on another
//! one sharing the store, is refused as soon as the deletion's watch event reaches this
//! server's watch cache; the caller then drops the entry ([`VerifiedTokens::forget`]).
//!
//! Bounds: at most `capacity` entries, the least recently used evicted first (the `lru` crate),
//! and an entry is never served after its token's `exp`: it is dropped when looked up then.

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

use lru::LruCache;

use super::Claims;

/// How many tokens a server remembers as verified by default.
pub const DEFAULT_CAPACITY: NonZeroUsize = match NonZeroUsize::new(4096) {
    Some(capacity) => capacity,
    None => NonZeroUsize::MIN,
};

/// The change counters of the objects tokens depend on (the watch cache's
/// [`crate::cache::WatchCache::track`] of ServiceAccounts and of Secrets) when a token's
/// objects were last found alive: while neither has moved, they still are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Generation {
    /// ServiceAccounts' counter.
    pub service_accounts: u64,
    /// Secrets' counter.
    pub secrets: u64,
}

/// One verified token: its claims, until when (Unix seconds) it may be served, and when its
/// objects were last confirmed alive.
struct Verified {
    claims: Arc<Claims>,
    until: Option<i64>,
    confirmed: Generation,
}

/// Tokens already verified, keyed by the token.
pub struct VerifiedTokens {
    entries: Mutex<LruCache<String, Verified>>,
}

impl std::fmt::Debug for VerifiedTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerifiedTokens").field("len", &self.len()).finish()
    }
}

impl VerifiedTokens {
    /// An empty cache holding at most `capacity` tokens.
    pub fn new(capacity: NonZeroUsize) -> Self {
        VerifiedTokens { entries: Mutex::new(LruCache::new(capacity)) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LruCache<String, Verified>> {
        // The map stays consistent whatever a panicking holder did: every operation on it is
        // one `lru` call.
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The claims of `token` if it was verified and has not expired by `now`, and when its
    /// objects were last confirmed alive; an expired entry is dropped.
    pub fn get(&self, token: &str, now: i64) -> Option<(Arc<Claims>, Generation)> {
        let mut entries = self.lock();
        let entry = entries.get(token)?;
        if entry.until.is_some_and(|until| until <= now) {
            entries.pop(token);
            return None;
        }
        Some((entry.claims.clone(), entry.confirmed))
    }

    /// Remembers `token` as verified, with its `claims` (their `exp` bounds the entry's life),
    /// its objects alive at `confirmed`; a token already remembered has its confirmation moved.
    pub fn insert(&self, token: &str, claims: Arc<Claims>, confirmed: Generation) {
        let until = claims.exp;
        self.lock().put(token.to_string(), Verified { claims, until, confirmed });
    }

    /// Drops `token` (its ServiceAccount or Secret is gone, or it expired).
    pub fn forget(&self, token: &str) {
        self.lock().pop(token);
    }

    /// Whether `token` is cached (expired or not).
    pub fn contains(&self, token: &str) -> bool {
        self.lock().contains(token)
    }

    /// How many tokens are cached.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(exp: Option<i64>) -> Arc<Claims> {
        Arc::new(Claims { iss: "i".into(), sub: "s".into(), exp, ..Claims::default() })
    }

    #[test]
    fn entries_are_served_until_their_expiry_then_dropped() {
        let cache = VerifiedTokens::new(DEFAULT_CAPACITY);
        cache.insert("t", claims(Some(100)), Generation::default());
        cache.insert("legacy", claims(None), Generation { service_accounts: 3, secrets: 4 });
        assert_eq!(cache.get("t", 99).map(|(c, _)| c.exp), Some(Some(100)));
        assert_eq!(cache.get("legacy", 0).map(|(_, g)| g), Some(Generation { service_accounts: 3, secrets: 4 }));
        assert!(cache.get("t", 100).is_none());
        assert!(!cache.contains("t"));
        assert!(cache.get("legacy", i64::MAX).is_some());
        cache.forget("legacy");
        assert!(cache.is_empty());
    }

    #[test]
    fn the_least_recently_used_token_goes_first_when_full() {
        let cache = VerifiedTokens::new(NonZeroUsize::new(2).unwrap_or(NonZeroUsize::MIN));
        cache.insert("a", claims(None), Generation::default());
        cache.insert("b", claims(None), Generation::default());
        assert!(cache.get("a", 0).is_some());
        cache.insert("c", claims(None), Generation::default());
        assert_eq!(cache.len(), 2);
        assert!(cache.contains("a") && cache.contains("c") && !cache.contains("b"));
    }
}
