//! What authenticating one request costs, in process (no HTTP, no TLS): a ServiceAccount token
//! on its first use (ES256 signature verified, claims decoded), the same token again (served
//! from the verified-token cache, its ServiceAccount still looked up in the watch cache), and
//! the admin's static token as the baseline. Each figure is the best of several rounds, so
//! other work on the machine inflates it as little as possible.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use oxplane_apiserver::authn::service_accounts::{self, ServiceAccountTokens, SigningKey, TokenSpec};
use oxplane_apiserver::authn::{Authenticator, StaticTokens};
use oxplane_apiserver::cache::WatchCache;
use oxplane_store::{Store, Write};

use super::Report;

const TOKENS: usize = 200;
const ROUNDS: usize = 5;

/// Microseconds per call of `f` on each of `items`: the best of [`ROUNDS`] rounds.
fn best_us<T>(items: &[T], mut f: impl FnMut(&T)) -> f64 {
    (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            items.iter().for_each(&mut f);
            start.elapsed().as_secs_f64() * 1e6 / items.len().max(1) as f64
        })
        .fold(f64::INFINITY, f64::min)
}

/// Adds `token_auth_first_use_us`, `token_auth_cached_us` and `static_token_auth_us`.
pub(super) async fn token_costs(report: &mut Report) -> anyhow::Result<()> {
    let store: Arc<dyn Store> = Arc::new(oxplane_store::memory::MemoryStore::new(Default::default()));
    let account = serde_json::json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot", "namespace": "bench", "uid": "u1"}});
    store.write(Write::Create { key: "/registry/core/serviceaccounts/bench/robot".into(), value: Bytes::from(account.to_string()) }).await?;
    let cache = WatchCache::start(store, 100).await?;
    cache.sync().await?;
    let (key, _) = SigningKey::generate().map_err(anyhow::Error::msg)?;
    let accounts = Arc::new(ServiceAccountTokens::new(service_accounts::DEFAULT_ISSUER.into(), String::new(), String::new(), key, cache));
    let authenticator = Authenticator { tokens: StaticTokens::admin("bench-admin-token"), service_accounts: Some(accounts.clone()) };
    let spec = TokenSpec { namespace: "bench".into(), name: "robot".into(), uid: "u1".into(), audiences: Vec::new(), expiration_seconds: 3600, bound_secret: None };

    // Every round needs tokens never seen before: issue them all first.
    let rounds: Vec<Vec<String>> = (0..ROUNDS)
        .map(|_| (0..TOKENS).map(|_| accounts.issue(&spec).map(|(token, _)| token)).collect::<Result<Vec<_>, _>>())
        .collect::<Result<_, _>>()
        .map_err(anyhow::Error::msg)?;
    let mut first_use = f64::INFINITY;
    for tokens in &rounds {
        let start = Instant::now();
        for token in tokens {
            authenticator.token(token, &[]).map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        first_use = first_use.min(start.elapsed().as_secs_f64() * 1e6 / TOKENS as f64);
    }
    let cached = best_us(&rounds[0], |token| {
        let _ = authenticator.token(token, &[]);
    });
    anyhow::ensure!(accounts.verified_tokens(&rounds[0][0]).1, "the tokens were not remembered");
    let admin = vec!["bench-admin-token".to_string(); TOKENS];
    let static_token = best_us(&admin, |token| {
        let _ = authenticator.token(token, &[]);
    });
    report.add("token_auth_first_use_us", first_use, "us");
    report.add("token_auth_cached_us", cached, "us");
    report.add("static_token_auth_us", static_token, "us");
    Ok(())
}
