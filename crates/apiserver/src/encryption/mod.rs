//! Encryption at rest: a [`Store`] wrapper that encrypts the values of configured resources
//! (Secrets by default) on the way in and decrypts them on the way out, as kube-apiserver's
//! storage transformers do. It wraps any backend, so the embedded SQLite file and an etcd
//! cluster both hold ciphertext; everything above it (the watch cache, the handlers) sees
//! plain objects. The store crate stays ignorant of Kubernetes: which keys are encrypted is
//! decided here, from the `/registry/<group>/<plural>/` key layout.
//!
//! Rotation is by rewriting: [`EncryptedStore::rewrite_stale`] (run at every start) rewrites
//! every value not written by the first provider's first key, with a compare-and-swap, so a
//! configuration with a new key first and the old one second re-encrypts the store.

pub mod config;
pub mod providers;

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use oxplane_store::{
    Event, GetResponse, KeyValue, RangeRequest, RangeResponse, Revision, Store, StoreError, StoreResult, Watcher,
    Write, WriteResult,
};

use self::config::Rule;
use self::providers::CryptError;

/// The rules of an encryption configuration.
#[derive(Debug)]
pub struct Encryption {
    rules: Vec<Rule>,
}

impl Encryption {
    /// The configuration at `path`, or (none given) the one generated in the data directory.
    pub fn load(config: Option<&Path>, data_dir: &Path) -> Result<Encryption, crate::ServeError> {
        let rules = match config {
            Some(path) => config::load(path).map_err(|e| crate::ServeError::Startup(e.to_string()))?,
            None => config::ensure_generated(data_dir)?,
        };
        Ok(Encryption { rules })
    }

    /// The rule deciding for a store key: the first one naming it.
    fn rule(&self, key: &str) -> Option<&Rule> {
        self.rules.iter().find(|rule| rule.prefixes.iter().any(|p| key.starts_with(p.as_str())))
    }

    /// The stored form of `plain` under `key`.
    fn seal(&self, key: &str, plain: Bytes) -> StoreResult<Bytes> {
        match self.rule(key).and_then(|rule| rule.providers.first()) {
            None => Ok(plain),
            Some(provider) => provider.encrypt(key, &plain).map(Bytes::from).map_err(|e| failure(key, e)),
        }
    }

    /// The plain form of a stored value.
    fn open(&self, key: &str, stored: Bytes) -> StoreResult<Bytes> {
        let Some(rule) = self.rule(key) else { return Ok(stored) };
        for provider in &rule.providers {
            if let Some(result) = provider.decrypt(key, &stored) {
                return result.map(Bytes::from).map_err(|e| failure(key, e));
            }
        }
        let start = String::from_utf8_lossy(&stored[..stored.len().min(32)]).into_owned();
        Err(failure(key, CryptError::NoProvider(start)))
    }

    fn open_kv(&self, mut kv: KeyValue) -> StoreResult<KeyValue> {
        kv.value = self.open(&kv.key, std::mem::take(&mut kv.value))?;
        Ok(kv)
    }

    fn open_event(&self, event: Event) -> StoreResult<Event> {
        Ok(match event {
            Event::Put { kv, prev } => {
                Event::Put { kv: self.open_kv(kv)?, prev: prev.map(|p| self.open_kv(p)).transpose()? }
            }
            Event::Delete { revision, prev } => Event::Delete { revision, prev: self.open_kv(prev)? },
        })
    }

    /// Whether a stored value should be rewritten: its rule's first provider and key did not
    /// write it.
    fn is_stale(&self, key: &str, stored: &[u8]) -> bool {
        self.rule(key).and_then(|rule| rule.providers.first()).is_some_and(|p| !p.wrote_with_first_key(stored))
    }
}

fn failure(key: &str, error: CryptError) -> StoreError {
    StoreError::Backend(format!("encryption at rest: stored value of {key}: {error}"))
}

/// A store whose configured resources are encrypted at rest.
pub struct EncryptedStore {
    inner: Arc<dyn Store>,
    encryption: Arc<Encryption>,
}

impl EncryptedStore {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn Store>, encryption: Encryption) -> EncryptedStore {
        EncryptedStore { inner, encryption: Arc::new(encryption) }
    }

    /// Rewrites every stored value of a configured resource that the first provider's first
    /// key did not write (a value written before encryption was on, or with a key rotated out
    /// of first place), each with a compare-and-swap on the revision it read. A value a
    /// client changes meanwhile was written with the current key anyway. Returns how many
    /// values were rewritten.
    pub async fn rewrite_stale(&self) -> StoreResult<usize> {
        let mut rewritten = 0;
        let prefixes: Vec<String> = self.encryption.rules.iter().flat_map(|r| r.prefixes.iter().cloned()).collect();
        for prefix in prefixes {
            let mut request = RangeRequest { prefix, limit: 500, ..Default::default() };
            loop {
                let page = self.inner.range(request.clone()).await?;
                for kv in page.kvs {
                    if !self.encryption.is_stale(&kv.key, &kv.value) {
                        continue;
                    }
                    let plain = self.encryption.open(&kv.key, kv.value)?;
                    let value = self.encryption.seal(&kv.key, plain)?;
                    let write = Write::Update { key: kv.key, value, expected: kv.mod_revision };
                    if let WriteResult::Committed(_) = self.inner.write(write).await? {
                        rewritten += 1;
                    }
                }
                match page.continue_token {
                    Some(token) => {
                        request.continue_token = Some(token);
                        request.revision = Some(page.revision);
                    }
                    None => break,
                }
            }
        }
        Ok(rewritten)
    }
}

#[async_trait]
impl Store for EncryptedStore {
    async fn get(&self, key: &str) -> StoreResult<GetResponse> {
        let response = self.inner.get(key).await?;
        Ok(GetResponse { kv: response.kv.map(|kv| self.encryption.open_kv(kv)).transpose()?, revision: response.revision })
    }

    async fn range(&self, request: RangeRequest) -> StoreResult<RangeResponse> {
        let mut response = self.inner.range(request).await?;
        response.kvs = response.kvs.into_iter().map(|kv| self.encryption.open_kv(kv)).collect::<StoreResult<_>>()?;
        Ok(response)
    }

    async fn write(&self, write: Write) -> StoreResult<WriteResult> {
        let write = match write {
            Write::Create { key, value } => {
                let value = self.encryption.seal(&key, value)?;
                Write::Create { key, value }
            }
            Write::Update { key, value, expected } => {
                let value = self.encryption.seal(&key, value)?;
                Write::Update { key, value, expected }
            }
            delete @ Write::Delete { .. } => delete,
        };
        Ok(match self.inner.write(write).await? {
            WriteResult::Committed(event) => WriteResult::Committed(self.encryption.open_event(event)?),
            WriteResult::Rejected { current } => {
                WriteResult::Rejected { current: current.map(|kv| self.encryption.open_kv(kv)).transpose()? }
            }
        })
    }

    async fn watch(&self, prefix: &str, after: Revision) -> StoreResult<Watcher> {
        let encryption = self.encryption.clone();
        Ok(self.inner.watch(prefix, after).await?.with_transform(Arc::new(move |event| encryption.open_event(event))))
    }

    async fn compact(&self, revision: Revision) -> StoreResult<()> {
        self.inner.compact(revision).await
    }

    async fn current_revision(&self) -> StoreResult<Revision> {
        self.inner.current_revision().await
    }

    async fn compacted_revision(&self) -> StoreResult<Revision> {
        self.inner.compacted_revision().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxplane_store::memory::MemoryStore;

    fn encryption(first: &str, second: Option<&str>) -> Encryption {
        // Each key name has its own secret, wherever it stands in the list.
        let secret = |name: &str| vec![name.len() as u8 + name.as_bytes()[name.len() - 1]; 32];
        let mut keys = vec![(first.to_string(), secret(first))];
        if let Some(second) = second {
            keys.push((second.to_string(), secret(second)));
        }
        let providers = vec![
            providers::Provider::keyed(providers::ProviderKind::AesGcm, keys),
            providers::Provider::identity(),
        ];
        Encryption { rules: vec![Rule { prefixes: vec!["/registry/core/secrets/".into()], providers }] }
    }

    async fn create(store: &dyn Store, key: &str, value: &str) {
        let result = store.write(Write::Create { key: key.into(), value: Bytes::from(value.to_string()) }).await.unwrap();
        let WriteResult::Committed(Event::Put { kv, .. }) = result else { panic!("{result:?}") };
        assert_eq!(kv.value, value.as_bytes(), "the write's answer is plain");
    }

    #[tokio::test]
    async fn configured_resources_are_sealed_and_everything_else_is_untouched() {
        let raw: Arc<dyn Store> = Arc::new(MemoryStore::new(oxplane_store::CompactionPolicy::disabled()));
        let store = EncryptedStore::new(raw.clone(), encryption("key1", None));
        let mut watcher = store.watch("/registry/", 0).await.unwrap();
        create(&store, "/registry/core/secrets/ns/s", "{\"data\":\"c2VjcmV0\"}").await;
        create(&store, "/registry/core/configmaps/ns/c", "{\"data\":\"plain\"}").await;

        let sealed = raw.get("/registry/core/secrets/ns/s").await.unwrap().kv.unwrap().value;
        assert!(sealed.starts_with(b"k8s:enc:aesgcm:v1:key1:"));
        assert!(!sealed.windows(8).any(|w| w == b"c2VjcmV0"));
        assert_eq!(raw.get("/registry/core/configmaps/ns/c").await.unwrap().kv.unwrap().value, "{\"data\":\"plain\"}");

        assert_eq!(store.get("/registry/core/secrets/ns/s").await.unwrap().kv.unwrap().value, "{\"data\":\"c2VjcmV0\"}");
        let listed = store.range(RangeRequest { prefix: "/registry/".into(), ..Default::default() }).await.unwrap();
        assert!(listed.kvs.iter().all(|kv| kv.value.starts_with(b"{")));
        let Event::Put { kv, .. } = watcher.next().await.unwrap().unwrap() else { panic!() };
        assert_eq!(kv.value, "{\"data\":\"c2VjcmV0\"}");
    }

    #[tokio::test]
    async fn rotation_rewrites_old_keys_and_plain_values_with_the_first_key() {
        let raw: Arc<dyn Store> = Arc::new(MemoryStore::new(oxplane_store::CompactionPolicy::disabled()));
        create(raw.as_ref(), "/registry/core/secrets/ns/plain", "{\"a\":1}").await;
        create(&EncryptedStore::new(raw.clone(), encryption("key1", None)), "/registry/core/secrets/ns/old", "{\"b\":2}").await;

        let rotated = EncryptedStore::new(raw.clone(), encryption("key2", Some("key1")));
        assert_eq!(rotated.rewrite_stale().await.unwrap(), 2);
        assert_eq!(rotated.rewrite_stale().await.unwrap(), 0, "nothing is stale any more");
        for (name, value) in [("plain", "{\"a\":1}"), ("old", "{\"b\":2}")] {
            let key = format!("/registry/core/secrets/ns/{name}");
            assert!(raw.get(&key).await.unwrap().kv.unwrap().value.starts_with(b"k8s:enc:aesgcm:v1:key2:"));
            assert_eq!(rotated.get(&key).await.unwrap().kv.unwrap().value, value);
        }

        // A configuration without the key a value was written with names the problem.
        let lost = EncryptedStore::new(raw.clone(), encryption("key3", None));
        let error = lost.get("/registry/core/secrets/ns/old").await.unwrap_err().to_string();
        assert!(error.contains("/registry/core/secrets/ns/old") && error.contains("add the key it was written with"), "{error}");
    }
}
