//! Watches on etcd: one etcd watch per store watch, with previous values, from the revision
//! after the last one delivered. When the connection to a member drops, the watch is opened
//! again from that revision (on any member), so no event is lost or repeated; when etcd has
//! compacted past it meanwhile, the watch ends with [`StoreError::Compacted`].

use std::sync::Arc;
use std::time::Duration;

use etcd_client::{Client, EventType, WatchOptions, WatchResponse};
use tokio::sync::mpsc;

use super::{Inner, prefix_end};
use crate::watch::CONSUMER_QUEUE;
use crate::{Event, Revision, StoreError, StoreResult, Watcher};

/// How long a watch waits before opening again after its connection dropped, at most.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// Starts a watch of the store keys under `prefix` with revisions after `after`.
pub(crate) async fn start(inner: Arc<Inner>, prefix: &str, after: Revision) -> StoreResult<Watcher> {
    let key = inner.etcd_key(prefix).into_bytes();
    // Open the first etcd watch here, so an unreachable etcd fails the call itself.
    let stream = open(&inner, &key, after).await?;
    let (tx, rx) = mpsc::channel(CONSUMER_QUEUE);
    tokio::spawn(run(inner, key, after, stream, tx));
    Ok(Watcher::from_channel(rx))
}

type Stream = etcd_client::WatchStream;

async fn open(inner: &Inner, key: &[u8], after: Revision) -> StoreResult<Stream> {
    let options = WatchOptions::new()
        .with_range(prefix_end(key))
        .with_prev_key()
        .with_start_revision(inner.etcd_rev(after) + 1);
    let mut client = inner.client.watch_client().max_decoding_message_size(super::MAX_MESSAGE_BYTES);
    client.watch(key.to_vec(), Some(options)).await.map_err(|e| inner.err(e))
}

/// What one etcd watch response means.
enum Step {
    Events(Vec<Event>),
    Compacted(Revision),
    /// The watch ended on etcd's side or the connection dropped: open it again.
    Reopen(String),
}

async fn run(
    inner: Arc<Inner>,
    key: Vec<u8>,
    mut delivered: Revision,
    first: Stream,
    tx: mpsc::Sender<StoreResult<Vec<Event>>>,
) {
    let mut stream = Some(first);
    let mut backoff = Duration::from_millis(50);
    loop {
        let mut events = match stream.take() {
            Some(stream) => stream,
            None => {
                tokio::select! {
                    () = tokio::time::sleep(backoff) => {}
                    () = tx.closed() => return,
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
                match open(&inner, &key, delivered).await {
                    Ok(stream) => stream,
                    Err(error) => {
                        tracing::debug!(%error, "reopening an etcd watch");
                        continue;
                    }
                }
            }
        };
        loop {
            let message = tokio::select! {
                message = events.message() => message,
                () = tx.closed() => return,
            };
            let step = match message {
                Ok(Some(response)) => step(&inner, &response, delivered),
                Ok(None) => Step::Reopen("the watch stream ended".into()),
                Err(error) => Step::Reopen(error.to_string()),
            };
            match step {
                Step::Events(batch) => {
                    backoff = Duration::from_millis(50);
                    let Some(last) = batch.last().map(Event::revision) else { continue };
                    delivered = last;
                    if tx.send(Ok(batch)).await.is_err() {
                        return;
                    }
                }
                Step::Compacted(compacted) => {
                    let _ = tx.send(Err(StoreError::Compacted { requested: delivered, compacted })).await;
                    return;
                }
                Step::Reopen(why) => {
                    tracing::debug!(why, delivered, "etcd watch interrupted; reopening");
                    break;
                }
            }
        }
    }
}

fn step(inner: &Inner, response: &WatchResponse, delivered: Revision) -> Step {
    if response.compact_revision() > 0 {
        return Step::Compacted(inner.rev(response.compact_revision()));
    }
    if response.canceled() {
        return Step::Reopen(format!("etcd canceled the watch: {}", response.cancel_reason()));
    }
    let mut batch = Vec::with_capacity(response.events().len());
    for event in response.events() {
        match convert(inner, event) {
            // A reopened watch never repeats what was delivered; this only guards it.
            Ok(event) if event.revision() <= delivered => {}
            Ok(event) => batch.push(event),
            Err(error) => return Step::Reopen(error.to_string()),
        }
    }
    Step::Events(batch)
}

fn convert(inner: &Inner, event: &etcd_client::Event) -> StoreResult<Event> {
    let kv = event.kv().ok_or_else(|| StoreError::Backend("etcd sent a watch event without a key".into()))?;
    let prev = event.prev_kv().map(|kv| inner.kv(kv)).transpose()?;
    match event.event_type() {
        EventType::Put => Ok(Event::Put { kv: inner.kv(kv)?, prev }),
        EventType::Delete => {
            let revision = inner.rev(kv.mod_revision());
            let prev = prev.ok_or_else(|| {
                StoreError::Backend(format!("etcd sent the delete at {revision} without the deleted value"))
            })?;
            Ok(Event::Delete { revision, prev })
        }
    }
}

/// What a [`probe`] does with one watch response: answer, or read on.
pub(crate) enum Probed<T> {
    Answer(T),
    ReadOn,
}

/// Opens a short-lived etcd watch of `key` with `options` and reads responses until `answer`
/// gives one (dropping the stream ends the watch). A canceled watch, a stream that ends, an
/// error (with its whole cause chain) or no answer within 10 s is [`StoreError::Unavailable`].
pub(crate) async fn probe<T>(
    client: &Client,
    key: impl Into<Vec<u8>>,
    options: WatchOptions,
    endpoints: &str,
    mut answer: impl FnMut(&WatchResponse) -> Probed<T>,
) -> StoreResult<T> {
    let unavailable = |cause: String| StoreError::Unavailable { endpoints: endpoints.to_string(), cause };
    let read = async {
        // Replayed history can be large: the same message limit as the store's own watches.
        let mut watch = client.watch_client().max_decoding_message_size(super::MAX_MESSAGE_BYTES);
        let mut stream = watch.watch(key, Some(options)).await.map_err(|e| super::classify(endpoints, e))?;
        loop {
            match stream.message().await {
                Ok(Some(response)) => {
                    if let Probed::Answer(value) = answer(&response) {
                        return Ok(value);
                    }
                    if response.canceled() {
                        return Err(unavailable(format!("etcd canceled a watch: {}", response.cancel_reason())));
                    }
                }
                Ok(None) => return Err(unavailable("the watch stream ended".into())),
                Err(e) => return Err(super::classify(endpoints, e)),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .map_err(|_| unavailable("no answer to a watch within 10 s".into()))?
}

/// The revision etcd has compacted to (0 if never): a watch from etcd's first revision on
/// `meta` is refused with it, or, when nothing was compacted, replays the marker's write.
pub(crate) async fn compacted_revision(client: &Client, meta: &str, endpoints: &str) -> StoreResult<i64> {
    probe(client, meta, WatchOptions::new().with_start_revision(1), endpoints, |response| {
        if response.compact_revision() > 0 {
            Probed::Answer(response.compact_revision())
        } else if !response.events().is_empty() {
            Probed::Answer(0)
        } else {
            Probed::ReadOn
        }
    })
    .await
}
