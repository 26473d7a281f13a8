//! Watch streams: newline-delimited compact JSON events from the watch cache, with selectors
//! applied to both the old and the new object (an object leaving the selection is DELETED for
//! the watcher, one entering it ADDED), bookmarks when asked, and `timeoutSeconds`.
//!
//! Failures after the request was accepted (a resourceVersion older than the cache's window, a
//! watcher too slow for the live stream) are reported as Kubernetes does: HTTP 200 and one
//! `ERROR` event carrying a `Status` with code 410, so clients relist.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use bytes::Bytes;
use serde_json::json;
use tokio::sync::{broadcast, mpsc};

use super::select::Selection;
use crate::cache::{CacheError, CacheEvent, EventType, Live, WatchCache};
use crate::registry::{Registry, ResourceDef};
use crate::status::{ApiError, Reason};
use crate::table::IncludeObject;

/// How long a watch lasts when the client gives no `timeoutSeconds` (kube-apiserver picks a
/// random 30–60 minutes; clients re-watch either way).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);
/// How often a bookmark is sent to watchers that allow them, by default.
pub const DEFAULT_BOOKMARK_INTERVAL: Duration = Duration::from_secs(60);

/// What a watch request asked for.
pub struct WatchRequest {
    /// The resource watched.
    pub resource: Arc<ResourceDef>,
    /// The store prefix (one namespace or all).
    pub prefix: String,
    /// Start after this revision; `None` starts with the current objects as ADDED.
    pub after: Option<u64>,
    /// Label and field selectors.
    pub selection: Selection,
    /// Send BOOKMARK events.
    pub bookmarks: bool,
    /// How often to send them.
    pub bookmark_interval: Duration,
    /// End the stream after this long.
    pub timeout: Option<Duration>,
    /// Send each object as a one-row Table (kubectl get -w).
    pub table: Option<IncludeObject>,
    /// Send only each object's metadata, as `PartialObjectMetadata`.
    pub metadata_only: bool,
}

/// Starts streaming; the response is always 200 once the request is valid. `watchers` counts
/// the open streams.
pub fn stream(cache: &Arc<WatchCache>, registry: &Arc<Registry>, request: WatchRequest, watchers: &Arc<super::metrics::WatchGauge>) -> Response {
    let (tx, mut rx) = mpsc::channel::<Bytes>(256);
    match cache.watch(&request.prefix, request.after) {
        Ok(watch) => {
            let guard = watchers.open(&request.resource.group, &request.resource.plural);
            let registry = registry.clone();
            let cache = cache.clone();
            tokio::spawn(async move {
                run(request, watch, tx, registry, cache).await;
                drop(guard);
            });
        }
        Err(CacheError::Expired { requested, oldest }) => {
            let error = expired(format!("too old resource version: {requested} ({oldest})"));
            let _ = tx.try_send(error_line(&error));
        }
        Err(other) => {
            let _ = tx.try_send(error_line(&ApiError::internal(other.to_string())));
        }
    }
    let body = Body::from_stream(futures::stream::poll_fn(move |cx| {
        rx.poll_recv(cx).map(|line| line.map(Ok::<_, std::convert::Infallible>))
    }));
    let mut response = Response::new(body);
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
    response
}

fn expired(message: String) -> ApiError {
    ApiError::new(Reason::Expired, message)
}

fn error_line(error: &ApiError) -> Bytes {
    Bytes::from(format!("{}\n", json!({"type": "ERROR", "object": error.to_status()})))
}

fn event_line(kind: EventType, object_json: &[u8]) -> Bytes {
    let mut line = Vec::with_capacity(object_json.len() + 32);
    line.extend_from_slice(b"{\"type\":\"");
    line.extend_from_slice(kind.as_str().as_bytes());
    line.extend_from_slice(b"\",\"object\":");
    line.extend_from_slice(object_json);
    line.extend_from_slice(b"}\n");
    Bytes::from(line)
}

/// How a watcher renders objects: plain (shared JSON) or as Table rows.
struct Rendering<'a> {
    resource: &'a ResourceDef,
    table: Option<IncludeObject>,
    /// Column definitions go with the first Table only.
    first: bool,
    /// `PartialObjectMetadata` instead of the objects.
    metadata_only: bool,
}

/// The object as this watcher sees it: shared, or converted to the watched version.
fn presented(object: &Arc<serde_json::Value>, resource: &ResourceDef) -> Arc<serde_json::Value> {
    if crate::convert::needs_conversion(resource, object) {
        let mut converted = (**object).clone();
        crate::convert::present(resource, &mut converted);
        return Arc::new(converted);
    }
    object.clone()
}

/// The `object` of a watch event line.
fn payload(event: &CacheEvent, object: &Arc<serde_json::Value>, rendering: &mut Rendering<'_>) -> Bytes {
    if rendering.metadata_only {
        return Bytes::from(crate::objects::partial_metadata(object).to_string());
    }
    let Some(include) = rendering.table else {
        if Arc::ptr_eq(object, &event.object) {
            return event.object_json();
        }
        return Bytes::from(object.to_string());
    };
    let metadata = json!({"resourceVersion": event.revision.to_string()});
    let table = crate::table::table(rendering.resource, [&**object], metadata, include, rendering.first);
    rendering.first = false;
    Bytes::from(table.to_string())
}

/// The line for one cache event as this watcher sees it, or `None` if it is not selected.
fn render(event: &CacheEvent, rendering: &mut Rendering<'_>, selection: &Selection) -> Option<Bytes> {
    let object = presented(&event.object, rendering.resource);
    if selection.is_everything() {
        return Some(event_line(event.kind, &payload(event, &object, rendering)));
    }
    let now = event.kind != EventType::Deleted && selection.matches(&object);
    let before = match event.kind {
        EventType::Deleted => selection.matches(&object),
        _ => event.prev.as_ref().is_some_and(|prev| selection.matches(&presented(prev, rendering.resource))),
    };
    let kind = match (before, now) {
        (_, true) if event.kind == EventType::Added || !before => EventType::Added,
        (true, true) => EventType::Modified,
        (true, false) => EventType::Deleted,
        _ => return None,
    };
    Some(event_line(kind, &payload(event, &object, rendering)))
}

/// The event with its objects converted to the watched version by the CRD's conversion
/// webhook, when it has one and they need it; a failed conversion ends the stream with it.
async fn converted(cache: &WatchCache, resource: &ResourceDef, event: &CacheEvent) -> Result<Option<CacheEvent>, ApiError> {
    let Some(conversion) = crate::webhooks::conversion::for_resource(cache, resource) else { return Ok(None) };
    let desired = resource.api_version();
    if event.object["apiVersion"].as_str() == Some(desired.as_str())
        && event.prev.as_ref().is_none_or(|prev| prev["apiVersion"].as_str() == Some(desired.as_str()))
    {
        return Ok(None);
    }
    let mut objects = vec![(*event.object).clone()];
    objects.extend(event.prev.as_ref().map(|prev| (**prev).clone()));
    crate::webhooks::conversion::convert(cache, &conversion, &mut objects, &desired).await?;
    let prev = objects.get(1).cloned().map(Arc::new);
    let object = Arc::new(objects.swap_remove(0));
    Ok(Some(CacheEvent::new(event.revision, event.key.clone(), event.kind, object, prev)))
}

async fn run(request: WatchRequest, watch: crate::cache::CacheWatch, tx: mpsc::Sender<Bytes>, registry: Arc<Registry>, cache: Arc<WatchCache>) {
    let mut served = registry.subscribe();
    let mut rendering = Rendering { resource: &request.resource, table: request.table, first: true, metadata_only: request.metadata_only };
    for event in &watch.initial {
        let event = match converted(&cache, &request.resource, event).await {
            Ok(Some(converted)) => Arc::new(converted),
            Ok(None) => event.clone(),
            Err(error) => {
                let _ = tx.send(error_line(&error)).await;
                return;
            }
        };
        if let Some(line) = render(&event, &mut rendering, &request.selection)
            && tx.send(line).await.is_err()
        {
            return;
        }
    }
    // Live events up to here were already replayed (or predate a future start revision).
    let mut revision = request.after.unwrap_or(0).max(watch.revision);
    let mut live = watch.live;
    let deadline = tokio::time::sleep(request.timeout.unwrap_or(DEFAULT_TIMEOUT));
    tokio::pin!(deadline);
    let mut bookmarks = tokio::time::interval(request.bookmark_interval.max(Duration::from_millis(10)));
    bookmarks.reset();
    loop {
        tokio::select! {
            received = live.recv() => match received {
                Ok(Live::Reset) => {
                    let error = expired(format!("the watch cache was reloaded; relist (resource version {revision} is gone)"));
                    let _ = tx.send(error_line(&error)).await;
                    return;
                }
                Ok(Live::Event(event)) => {
                    if event.revision <= revision {
                        continue;
                    }
                    // Every event received, of this kind or not, moves the watcher on: its
                    // bookmarks carry the cache's revision, as kube-apiserver's do, so a
                    // watcher of a quiet kind can resume after writes to other kinds have
                    // pushed its last event out of the window.
                    revision = event.revision;
                    if !event.key.starts_with(&request.prefix) {
                        continue;
                    }
                    let event = match converted(&cache, &request.resource, &event).await {
                        Ok(Some(converted)) => Arc::new(converted),
                        Ok(None) => event,
                        Err(error) => {
                            let _ = tx.send(error_line(&error)).await;
                            return;
                        }
                    };
                    if let Some(line) = render(&event, &mut rendering, &request.selection)
                        && tx.send(line).await.is_err()
                    {
                        return;
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    let error = expired(format!("the watcher fell too far behind; relist from a newer resource version than {revision}"));
                    let _ = tx.send(error_line(&error)).await;
                    return;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
            _ = bookmarks.tick(), if request.bookmarks => {
                let bookmark = json!({
                    "type": "BOOKMARK",
                    "object": {
                        "kind": request.resource.kind,
                        "apiVersion": request.resource.api_version(),
                        "metadata": {"resourceVersion": revision.to_string()},
                    },
                });
                if tx.send(Bytes::from(format!("{bookmark}\n"))).await.is_err() {
                    return;
                }
            }
            () = &mut deadline => return,
            // The kind stopped being served (its CRD was deleted): the stream ends, as
            // Kubernetes ends it when the kind's storage goes.
            changed = served.changed() => {
                if changed.is_err() || !registry.still_serves(&request.resource) {
                    return;
                }
            }
            () = tx.closed() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::builtins;
    use serde_json::Value;

    fn cm(labels: Value) -> Arc<Value> {
        Arc::new(json!({"metadata": {"name": "a", "namespace": "default", "labels": labels}}))
    }

    fn seen(kind: EventType, prev: Option<Value>, now: Value, selector: &str) -> Option<String> {
        let resource = builtins().into_iter().find(|r| r.kind == "ConfigMap").unwrap();
        let selection = Selection::parse(&resource, Some(selector), None).unwrap();
        let event = CacheEvent::new(2, "/k".into(), kind, cm(now), prev.map(cm));
        let mut rendering = Rendering { resource: &resource, table: None, first: true, metadata_only: false };
        let line = render(&event, &mut rendering, &selection)?;
        let parsed: Value = serde_json::from_slice(&line).unwrap();
        Some(parsed["type"].as_str().unwrap().to_string())
    }

    #[test]
    fn selection_changes_become_added_and_deleted() {
        let on = json!({"app": "x"});
        let off = json!({"app": "y"});
        assert_eq!(seen(EventType::Added, None, on.clone(), "app=x").as_deref(), Some("ADDED"));
        assert_eq!(seen(EventType::Added, None, off.clone(), "app=x"), None);
        assert_eq!(seen(EventType::Modified, Some(on.clone()), on.clone(), "app=x").as_deref(), Some("MODIFIED"));
        assert_eq!(seen(EventType::Modified, Some(off.clone()), on.clone(), "app=x").as_deref(), Some("ADDED"));
        assert_eq!(seen(EventType::Modified, Some(on.clone()), off.clone(), "app=x").as_deref(), Some("DELETED"));
        assert_eq!(seen(EventType::Modified, Some(off.clone()), off.clone(), "app=x"), None);
        assert_eq!(seen(EventType::Deleted, None, on, "app=x").as_deref(), Some("DELETED"));
        assert_eq!(seen(EventType::Deleted, None, off, "app=x"), None);
    }
}
