//! The etcd v3 backend: the store's keys live in an etcd cluster under a configurable prefix,
//! so several oxplane processes can share one store.
//!
//! Layout under the prefix `P` (default `/oxplane`):
//! - `P/meta`: the marker, written once when the prefix is claimed (see [`marker`]). Its
//!   create revision is the *base*: oxplane revision `r` is etcd revision `base + r`, so a
//!   fresh store starts at revision 0 as every backend does.
//! - `P/data<key>`: each store key (`/registry/core/pods/ns/x` is `P/data/registry/core/pods/ns/x`).
//! - `P/last-write`: rewritten by every committed write, in the write's own transaction, so its
//!   mod revision is the store's newest revision. etcd's revision counter is the whole
//!   cluster's: another program (or another store on another prefix) writing to the same etcd
//!   moves it, and a reader waiting for its watch to reach it would wait for events that never
//!   come under this prefix. The store's current revision is this key's instead.
//!
//! Every write is one etcd transaction comparing the key's create or mod revision, so a write
//! takes exactly one etcd revision and a failed compare takes none: oxplane's revisions stay
//! gap-free as long as nothing else writes to the same etcd (another writer's revisions show
//! up as gaps, never as reordering). Ranges read one etcd snapshot; pages continue at the
//! first page's revision. Watches are etcd watches with previous values, resumed from the last
//! delivered revision when the connection drops ([`watch`]). Compaction is etcd's (it covers
//! the whole etcd keyspace, as kube-apiserver's does); its revision is read back from etcd, so
//! every process sharing the store agrees on it.

mod marker;
pub mod testing;
mod tombstones;
mod watch;

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use etcd_client::{
    Certificate, Client, Compare, CompareOp, ConnectOptions, GetOptions, Identity, KvClient, TlsOptions, Txn, TxnOp,
    TxnOpResponse,
};

use crate::compaction::RevisionClock;
use crate::{
    CompactionPolicy, Event, GetResponse, KeyValue, RangeRequest, RangeResponse, Revision, Store, StoreError,
    StoreResult, Watcher, Write, WriteResult, continuation,
};

/// The prefix used when none is configured.
pub const DEFAULT_PREFIX: &str = "/oxplane";
/// The key under the prefix whose mod revision is the store's newest write.
const LAST_WRITE: &str = "last-write";

/// The largest answer (a range page, a batch of watch events) the client accepts. gRPC's
/// default of 4 MiB is less than a page of the watch cache's first read, and etcd itself sends
/// answers of any size.
pub const MAX_MESSAGE_BYTES: usize = 512 * 1024 * 1024;

/// Client certificates and the CA for an etcd served over TLS, all PEM.
#[derive(Clone, Debug, Default)]
pub struct EtcdTls {
    /// The CA that signed the etcd members' certificates (the system roots when absent).
    pub ca: Option<Vec<u8>>,
    /// The client certificate, when etcd asks for one.
    pub cert: Option<Vec<u8>>,
    /// The client certificate's private key.
    pub key: Option<Vec<u8>>,
}

/// How the etcd backend connects.
#[derive(Clone, Debug)]
pub struct EtcdOptions {
    /// Client URLs of the members (`http://host:2379` or `https://host:2379`).
    pub endpoints: Vec<String>,
    /// Every key of this store lives under this prefix.
    pub prefix: String,
    /// TLS settings, for `https://` endpoints.
    pub tls: Option<EtcdTls>,
    /// Automatic compaction, run by every process that opens the store (compacting to a
    /// revision already compacted is a no-op, so several processes agree).
    pub compaction: CompactionPolicy,
    /// How long connecting may take.
    pub connect_timeout: Duration,
    /// How long one request (not a watch) may take before it fails as unavailable.
    pub request_timeout: Duration,
}

impl EtcdOptions {
    /// Options for `endpoints` with the default prefix and policies.
    pub fn new(endpoints: Vec<String>) -> Self {
        EtcdOptions {
            endpoints,
            prefix: DEFAULT_PREFIX.to_string(),
            tls: None,
            compaction: CompactionPolicy::default(),
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(5),
        }
    }
}

/// The etcd store. Cloning shares the connection.
#[derive(Clone)]
pub struct EtcdStore {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    client: Client,
    kv: KvClient,
    /// `P/data`: prepended to every store key.
    data: String,
    /// `P/meta`.
    meta: String,
    /// `P/last-write`.
    last_write: String,
    /// The etcd revision that is oxplane revision 0.
    base: i64,
    endpoints: String,
    clock: std::sync::Mutex<RevisionClock>,
}

impl EtcdStore {
    /// Connects to etcd and opens the store under the configured prefix, claiming the prefix
    /// if it is empty. An etcd whose prefix holds anything but an oxplane store is refused
    /// with [`StoreError::Foreign`], and nothing is written to it.
    pub async fn open(options: EtcdOptions) -> StoreResult<EtcdStore> {
        let endpoints = options.endpoints.join(",");
        if options.endpoints.is_empty() {
            return Err(StoreError::Backend("no etcd endpoint given".into()));
        }
        let prefix = options.prefix.trim_end_matches('/').to_string();
        let mut connect = ConnectOptions::new()
            .with_connect_timeout(options.connect_timeout)
            .with_timeout(options.request_timeout)
            .with_keep_alive(Duration::from_secs(10), Duration::from_secs(5));
        if let Some(tls) = &options.tls {
            let mut tls_options = TlsOptions::new();
            if let Some(ca) = &tls.ca {
                tls_options = tls_options.ca_certificate(Certificate::from_pem(ca.clone()));
            }
            match (&tls.cert, &tls.key) {
                (Some(cert), Some(key)) => {
                    tls_options = tls_options.identity(Identity::from_pem(cert.clone(), key.clone()));
                }
                (None, None) => {}
                _ => return Err(StoreError::Backend("an etcd client certificate needs both the certificate and its key".into())),
            }
            connect = connect.with_tls(tls_options);
        }
        // With TLS 1.3 a server refusing a connection without a client certificate may only
        // drop it after the handshake, which the client sees as a bare "connection closed",
        // a broken pipe, a reset or a TLS alert, depending on when it next reads or writes.
        let no_client_certificate = options.tls.as_ref().is_some_and(|tls| tls.cert.is_none());
        let unavailable = |cause: String| {
            let dropped = ["connection closed", "canceled", "broken pipe", "BrokenPipe", "reset", "Reset", "alert"];
            let cause = if no_client_certificate && dropped.iter().any(|c| cause.contains(c)) {
                format!("{cause} (no client certificate was given: an etcd that requires one drops the connection)")
            } else {
                cause
            };
            StoreError::Unavailable { endpoints: endpoints.clone(), cause }
        };
        let client = tokio::time::timeout(
            options.connect_timeout,
            Client::connect(options.endpoints.clone(), Some(connect)),
        )
        .await
        .map_err(|_| unavailable(format!("no answer within {:?}", options.connect_timeout)))?
        .map_err(|e| unavailable(cause(&e)))?;
        let kv = client.kv_client().max_decoding_message_size(MAX_MESSAGE_BYTES);
        let meta = format!("{prefix}/meta");
        let last_write = format!("{prefix}/{LAST_WRITE}");
        let base = tokio::time::timeout(options.request_timeout, marker::claim(&kv, &prefix, &meta, &last_write))
            .await
            .map_err(|_| unavailable(format!("no answer within {:?}", options.request_timeout)))?
            .map_err(|e| match e {
                marker::ClaimError::Etcd(e) => unavailable(cause(&e)),
                marker::ClaimError::Foreign(reason) => {
                    StoreError::Foreign { path: format!("the etcd prefix {prefix} at {endpoints}").into(), reason }
                }
            })?;
        let inner = Inner {
            client,
            kv,
            data: format!("{prefix}/data"),
            meta,
            last_write,
            base,
            endpoints,
            clock: std::sync::Mutex::new(RevisionClock::new(options.compaction.clone(), Instant::now(), 0)),
        };
        let store = EtcdStore { inner: Arc::new(inner) };
        if options.compaction.enabled {
            tokio::spawn(auto_compact(Arc::downgrade(&store.inner), options.compaction.interval));
        }
        Ok(store)
    }

    /// The etcd revision of oxplane revision 0 (for tests and diagnostics).
    pub fn base_revision(&self) -> i64 {
        self.inner.base
    }
}

/// Checks the compaction policy every interval while the store is open.
async fn auto_compact(inner: std::sync::Weak<Inner>, interval: Duration) {
    loop {
        tokio::time::sleep(interval).await;
        let Some(inner) = inner.upgrade() else { return };
        let (Ok(current), Ok(compacted)) = (inner.current().await, inner.compacted().await) else { continue };
        let target = inner.clock.lock().unwrap_or_else(|p| p.into_inner()).check(Instant::now(), current, compacted);
        if let Some(target) = target
            && let Err(error) = inner.compact(target).await
        {
            tracing::warn!(%error, target, "automatic etcd compaction failed");
        }
    }
}

/// What an etcd error means for the caller.
pub(crate) fn classify(endpoints: &str, error: etcd_client::Error) -> StoreError {
    StoreError::Unavailable { endpoints: endpoints.to_string(), cause: cause(&error) }
}

/// An error with every cause under it: a failed TLS handshake reads `transport error` at the
/// top, and only its sources say why (an unknown CA, a refused client certificate). A source
/// whose text the chain already holds is skipped.
fn cause(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        let more = inner.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = inner.source();
    }
    text
}

/// How long a request that found no member able to answer is tried again.
const RETRY_BUDGET: Duration = Duration::from_secs(2);

/// Whether a read failed because the member it went to could not answer (not connected,
/// restarting, without a leader): reads change nothing, so they may be sent again.
fn read_again(error: &etcd_client::Error) -> bool {
    match error {
        etcd_client::Error::GRpcStatus(status) => status.code() == tonic::Code::Unavailable,
        etcd_client::Error::TransportError(_) => true,
        _ => never_reached_etcd(error),
    }
}

/// Whether a request failed before any member received it (the connection was refused):
/// sending a write again then cannot apply it twice.
fn never_reached_etcd(error: &etcd_client::Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(error) = cause {
        if error.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused) {
            return true;
        }
        cause = error.source();
    }
    false
}

/// Runs `call` again while it fails in a way `again` accepts and the budget lasts. The client
/// balances requests over the members, so one that reached a member being restarted, or a
/// connection not yet made again, goes to another member, as etcd's own client does, instead
/// of failing the request while the cluster can answer.
async fn retrying<T, F, Fut>(again: fn(&etcd_client::Error) -> bool, mut call: F) -> Result<T, etcd_client::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, etcd_client::Error>>,
{
    let deadline = Instant::now() + RETRY_BUDGET;
    let mut pause = Duration::from_millis(20);
    loop {
        match call().await {
            Err(error) if again(&error) && Instant::now() + pause < deadline => {
                tracing::debug!(%error, "etcd request sent again");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(400));
            }
            other => return other,
        }
    }
}

/// Whether an etcd error says the revision asked for was compacted.
fn is_compacted(error: &etcd_client::Error) -> bool {
    error.to_string().contains("required revision has been compacted")
}

/// Whether an etcd error says the revision asked for is in the future.
fn is_future(error: &etcd_client::Error) -> bool {
    error.to_string().contains("required revision is a future revision")
}

/// The smallest key greater than every key starting with `prefix` (etcd's range end).
pub(crate) fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // An all-0xff (or empty) prefix ranges to the end of the keyspace.
    vec![0]
}

impl Inner {
    fn rev(&self, etcd: i64) -> Revision {
        (etcd - self.base).max(0) as Revision
    }

    fn etcd_rev(&self, revision: Revision) -> i64 {
        self.base + revision as i64
    }

    fn etcd_key(&self, key: &str) -> String {
        format!("{}{key}", self.data)
    }

    fn err(&self, error: etcd_client::Error) -> StoreError {
        classify(&self.endpoints, error)
    }

    /// A store value from an etcd one.
    pub(crate) fn kv(&self, kv: &etcd_client::KeyValue) -> StoreResult<KeyValue> {
        let key = kv
            .key()
            .strip_prefix(self.data.as_bytes())
            .ok_or_else(|| StoreError::Backend(format!("etcd returned a key outside {}", self.data)))?;
        let key = String::from_utf8(key.to_vec()).map_err(|_| StoreError::Backend("etcd returned a non-UTF-8 key".into()))?;
        Ok(KeyValue {
            key,
            value: Bytes::copy_from_slice(kv.value()),
            create_revision: self.rev(kv.create_revision()),
            mod_revision: self.rev(kv.mod_revision()),
        })
    }

    /// The store's newest revision: `P/last-write`'s mod revision. A store claimed before
    /// that key existed has none until its next write; etcd's own revision stands in (an
    /// upper bound: it counts every writer of the cluster).
    async fn current(&self) -> StoreResult<Revision> {
        let response = retrying(read_again, || {
            let mut kv = self.kv.clone();
            async move { kv.get(self.last_write.as_bytes(), None).await }
        })
        .await
        .map_err(|e| self.err(e))?;
        let etcd = match response.kvs().first() {
            Some(kv) => kv.mod_revision(),
            None => response.header().map(|h| h.revision()).unwrap_or(self.base),
        };
        Ok(self.rev(etcd))
    }

    /// The operation every committed write adds to its transaction (see [`LAST_WRITE`]).
    fn mark_write(&self) -> TxnOp {
        TxnOp::put(self.last_write.as_bytes(), Vec::new(), None)
    }

    /// The compacted revision as etcd knows it: a watch from etcd's first revision on the
    /// marker is refused with the compacted revision, or (never compacted) replays the marker.
    pub(crate) async fn compacted(&self) -> StoreResult<Revision> {
        let etcd = watch::compacted_revision(&self.client, &self.meta, &self.endpoints).await?;
        // etcd compacted at `etcd` keeps the state at it: that is readable, so oxplane's
        // compacted revision is the one mapping onto it.
        Ok(self.rev(etcd))
    }

    async fn compact(&self, revision: Revision) -> StoreResult<()> {
        let current = self.current().await?;
        if revision > current {
            return Err(StoreError::FutureRevision { requested: revision, current });
        }
        let compacted = self.compacted().await?;
        if revision <= compacted {
            return Ok(());
        }
        let lowest = self.etcd_rev(compacted) + 1;
        let found = tombstones::newest_without_delete(&self.client, lowest, self.etcd_rev(revision), &self.endpoints).await?;
        let Some(target) = found else {
            tracing::debug!(revision, "every revision near the one asked for holds a delete; compacting later");
            return Ok(());
        };
        let options = etcd_client::CompactionOptions::new().with_physical();
        match self.client.clone().compact(target, Some(options)).await {
            Ok(_) => Ok(()),
            // Another process compacted further meanwhile.
            Err(e) if is_compacted(&e) => Ok(()),
            Err(e) => Err(self.err(e)),
        }
    }

    /// The error for a read at `revision` that etcd refused.
    async fn read_error(&self, revision: Revision, error: etcd_client::Error) -> StoreError {
        if is_compacted(&error) {
            let compacted = self.compacted().await.unwrap_or(revision + 1);
            return StoreError::Compacted { requested: revision, compacted };
        }
        if is_future(&error) {
            let current = self.current().await.unwrap_or(0);
            return StoreError::FutureRevision { requested: revision, current };
        }
        self.err(error)
    }

    fn rejected(&self, responses: &[TxnOpResponse]) -> StoreResult<WriteResult> {
        let current = match responses.first() {
            Some(TxnOpResponse::Get(get)) => get.kvs().first().map(|kv| self.kv(kv)).transpose()?,
            _ => None,
        };
        Ok(WriteResult::Rejected { current })
    }
}

#[async_trait]
impl Store for EtcdStore {
    async fn get(&self, key: &str) -> StoreResult<GetResponse> {
        let inner = &self.inner;
        let key = inner.etcd_key(key);
        let response = retrying(read_again, || {
            let (mut kv, key) = (inner.kv.clone(), key.clone());
            async move { kv.get(key, None).await }
        })
        .await
        .map_err(|e| inner.err(e))?;
        let kv = response.kvs().first().map(|kv| inner.kv(kv)).transpose()?;
        let revision = inner.rev(response.header().map(|h| h.revision()).unwrap_or(inner.base));
        Ok(GetResponse { kv, revision })
    }

    async fn range(&self, request: RangeRequest) -> StoreResult<RangeResponse> {
        let inner = &self.inner;
        let (revision, after) = match &request.continue_token {
            Some(token) => {
                let c = continuation::decode(token, &request.prefix)?;
                (Some(c.revision), Some(c.last_key))
            }
            None => (request.revision, None),
        };
        let prefix = inner.etcd_key(&request.prefix);
        let start = match &after {
            // The next page starts right after the last key returned.
            Some(last) => {
                let mut start = inner.etcd_key(last).into_bytes();
                start.push(0);
                start
            }
            None => prefix.clone().into_bytes(),
        };
        let mut options = GetOptions::new().with_range(prefix_end(prefix.as_bytes()));
        if request.limit > 0 {
            options = options.with_limit(request.limit as i64);
        }
        if let Some(revision) = revision {
            // etcd reads revision 0 as "latest", so pin even the empty store's snapshot.
            options = options.with_revision(inner.etcd_rev(revision));
        }
        let read = retrying(read_again, || {
            let (mut kv, start, options) = (inner.kv.clone(), start.clone(), options.clone());
            async move { kv.get(start, Some(options)).await }
        });
        let response = match read.await {
            Ok(response) => response,
            Err(e) => return Err(inner.read_error(revision.unwrap_or(0), e).await),
        };
        let snapshot = match revision {
            Some(revision) => revision,
            None => inner.rev(response.header().map(|h| h.revision()).unwrap_or(inner.base)),
        };
        let kvs = response.kvs().iter().map(|kv| inner.kv(kv)).collect::<StoreResult<Vec<_>>>()?;
        let continue_token = match kvs.last() {
            Some(last) if response.more() => Some(continuation::encode(snapshot, &request.prefix, &last.key)),
            _ => None,
        };
        Ok(RangeResponse { kvs, revision: snapshot, continue_token })
    }

    async fn write(&self, write: Write) -> StoreResult<WriteResult> {
        let inner = &self.inner;
        let key = inner.etcd_key(write.key());
        let read_back = TxnOp::get(key.clone(), None);
        let txn = match &write {
            Write::Create { value, .. } => Txn::new()
                .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
                .and_then([TxnOp::put(key.clone(), value.to_vec(), None), inner.mark_write()])
                .or_else([read_back]),
            Write::Update { value, expected, .. } => Txn::new()
                .when([Compare::mod_revision(key.clone(), CompareOp::Equal, inner.etcd_rev(*expected))])
                .and_then([TxnOp::put(
                    key.clone(),
                    value.to_vec(),
                    Some(etcd_client::PutOptions::new().with_prev_key()),
                ), inner.mark_write()])
                .or_else([read_back]),
            Write::Delete { expected, .. } => Txn::new()
                .when([Compare::mod_revision(key.clone(), CompareOp::Equal, inner.etcd_rev(*expected))])
                .and_then([
                    TxnOp::delete(key.clone(), Some(etcd_client::DeleteOptions::new().with_prev_key())),
                    inner.mark_write(),
                ])
                .or_else([read_back]),
        };
        // An expected revision of 0 maps onto the base, the marker's revision, which no data
        // key carries: it matches nothing, as in every backend.
        let response = retrying(never_reached_etcd, || {
            let (mut kv, txn) = (inner.kv.clone(), txn.clone());
            async move { kv.txn(txn).await }
        })
        .await
        .map_err(|e| inner.err(e))?;
        if !response.succeeded() {
            return inner.rejected(response.op_responses().as_slice());
        }
        let revision = inner.rev(response.header().map(|h| h.revision()).unwrap_or(inner.base));
        let responses = response.op_responses();
        let event = match (write, responses.first()) {
            (Write::Create { key, value }, _) => {
                Event::Put { kv: KeyValue { key, value, create_revision: revision, mod_revision: revision }, prev: None }
            }
            (Write::Update { key, value, .. }, Some(TxnOpResponse::Put(put))) => {
                let prev = put.prev_key().map(|kv| inner.kv(kv)).transpose()?;
                let create_revision = prev.as_ref().map(|p| p.create_revision).unwrap_or(revision);
                Event::Put { kv: KeyValue { key, value, create_revision, mod_revision: revision }, prev }
            }
            (Write::Delete { key, .. }, Some(TxnOpResponse::Delete(delete))) => {
                let prev = delete
                    .prev_kvs()
                    .first()
                    .map(|kv| inner.kv(kv))
                    .transpose()?
                    .ok_or_else(|| StoreError::Backend(format!("etcd deleted {key} without its previous value")))?;
                Event::Delete { revision, prev }
            }
            (write, _) => {
                return Err(StoreError::Backend(format!("etcd answered the write of {} with another operation", write.key())));
            }
        };
        Ok(WriteResult::Committed(event))
    }

    async fn watch(&self, prefix: &str, after: Revision) -> StoreResult<Watcher> {
        let compacted = self.inner.compacted().await?;
        if after < compacted {
            return Err(StoreError::Compacted { requested: after, compacted });
        }
        watch::start(self.inner.clone(), prefix, after).await
    }

    async fn compact(&self, revision: Revision) -> StoreResult<()> {
        self.inner.compact(revision).await
    }

    async fn current_revision(&self) -> StoreResult<Revision> {
        self.inner.current().await
    }

    async fn compacted_revision(&self) -> StoreResult<Revision> {
        self.inner.compacted().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_is_the_next_key_after_the_prefix() {
        assert_eq!(prefix_end(b"/a/"), b"/a0".to_vec());
        assert_eq!(prefix_end(b"a\xff"), b"b".to_vec());
        assert_eq!(prefix_end(b"\xff\xff"), vec![0]);
    }
}
