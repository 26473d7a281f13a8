//! The marker that makes a prefix of an etcd keyspace an oxplane store.
//!
//! `P/meta` holds `{"format":"oxplane-store","version":1}`. It is written once, by the first
//! process that opens an empty prefix, in a transaction that also checks the prefix is still
//! empty, so two processes starting at once agree on one marker. Its create revision is the
//! store's base revision. A prefix holding keys but no marker, or a marker of another format
//! or version, is another program's data: it is refused and nothing is written.

use etcd_client::{Compare, CompareOp, GetOptions, KvClient, Txn, TxnOp};
use serde_json::{Value, json};

use super::prefix_end;

/// The marker's format name.
const FORMAT: &str = "oxplane-store";
/// The layout version this code reads and writes.
const VERSION: u64 = 1;

/// Why a prefix could not be claimed.
#[derive(Debug)]
pub(crate) enum ClaimError {
    /// etcd did not answer.
    Etcd(etcd_client::Error),
    /// The prefix holds data that is not an oxplane store of this version.
    Foreign(String),
}

impl From<etcd_client::Error> for ClaimError {
    fn from(error: etcd_client::Error) -> Self {
        ClaimError::Etcd(error)
    }
}

/// Returns the base revision of the store under `prefix`, claiming the prefix if it is empty.
/// The claim also writes `last_write`, so a new store's current revision is its base.
pub(crate) async fn claim(kv: &KvClient, prefix: &str, meta: &str, last_write: &str) -> Result<i64, ClaimError> {
    let mut kv = kv.clone();
    let space = format!("{prefix}/");
    loop {
        let found = kv.get(meta, None).await?;
        if let Some(marker) = found.kvs().first() {
            check(meta, marker.value())?;
            return Ok(marker.create_revision());
        }
        let any = kv
            .get(space.as_str(), Some(GetOptions::new().with_range(prefix_end(space.as_bytes())).with_keys_only().with_limit(1)))
            .await?;
        if let Some(other) = any.kvs().first() {
            return Err(ClaimError::Foreign(format!(
                "etcd holds {} under {space} but no oxplane marker at {meta}: the prefix belongs to another program or cluster",
                String::from_utf8_lossy(other.key())
            )));
        }
        let value = json!({ "format": FORMAT, "version": VERSION }).to_string();
        // Every key of the prefix must still be absent (a range compare holds for all keys in
        // it, and for none when it is empty), so data written meanwhile is not adopted.
        let empty = Compare::create_revision(space.as_str(), CompareOp::Equal, 0).with_range(prefix_end(space.as_bytes()));
        let txn = Txn::new().when([empty]).and_then([TxnOp::put(meta, value, None), TxnOp::put(last_write, Vec::new(), None)]);
        let response = kv.txn(txn).await?;
        if response.succeeded()
            && let Some(header) = response.header()
        {
            return Ok(header.revision());
        }
        // Someone else wrote first: read what they wrote.
    }
}

/// Checks that a marker is ours.
fn check(meta: &str, value: &[u8]) -> Result<(), ClaimError> {
    let parsed: Option<Value> = serde_json::from_slice(value).ok();
    let format = parsed.as_ref().and_then(|v| v.get("format")).and_then(Value::as_str);
    let version = parsed.as_ref().and_then(|v| v.get("version")).and_then(Value::as_u64);
    match (format, version) {
        (Some(FORMAT), Some(VERSION)) => Ok(()),
        (Some(FORMAT), Some(other)) => Err(ClaimError::Foreign(format!(
            "the store at {meta} has layout version {other}; this oxplane reads version {VERSION}"
        ))),
        _ => Err(ClaimError::Foreign(format!(
            "{meta} holds {:?}, not an oxplane store marker",
            String::from_utf8_lossy(&value[..value.len().min(64)])
        ))),
    }
}
