//! Events on objects, as `kubectl describe` shows them: core `v1` Events with the reporting
//! component as their source (Crossplane's recorder names, e.g.
//! `managed/nopresource.nop.crossplane.io`), repeats of the same event folded into one with a
//! count, as client-go's recorder does.
//!
//! Written by hand rather than with kube-runtime's `Recorder` because that one folds events
//! that differ only in their message, and Crossplane's messages (which resource is not ready,
//! what blocks a deletion) are what users read.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::client::Kube;
use crate::kinds::Kind;
use crate::object;

/// `Normal` or `Warning`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Something happened as it should.
    Normal,
    /// Something needs attention.
    Warning,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// An event recorded with the same object, type, reason and message within this long is
/// counted on the existing Event instead of creating a new one.
const FOLD_WINDOW: Duration = Duration::from_secs(600);
/// Folding memory kept at most (older entries are dropped; at worst an event is not folded).
const MAX_REMEMBERED: usize = 8192;
/// A folded event's count is written at most this often: a reconcile that repeats the same
/// event every few milliseconds must not turn into a write every few milliseconds (events
/// are informational; the count may lag, as client-go's recorder lets it).
const MIN_REWRITE: Duration = Duration::from_secs(30);

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct FoldKey {
    uid: String,
    type_: EventType,
    reason: String,
    message: String,
}

struct Folded {
    namespace: String,
    name: String,
    count: u64,
    at: Instant,
    written: Instant,
}

/// Records events as one component.
#[derive(Clone)]
pub struct EventRecorder {
    kube: Kube,
    component: Arc<str>,
    annotations: Arc<Value>,
    folded: Arc<Mutex<HashMap<FoldKey, Folded>>>,
}

fn events_kind() -> Kind {
    Kind::new("", "v1", "Event", "events", true)
}

impl EventRecorder {
    /// A recorder whose events come from `component`.
    pub fn new(kube: Kube, component: &str) -> Self {
        EventRecorder { kube, component: component.into(), annotations: Arc::new(json!({})), folded: Arc::default() }
    }

    /// The same recorder, adding `annotations` to every event it creates.
    pub fn with_annotations(mut self, annotations: Value) -> Self {
        self.annotations = Arc::new(annotations);
        self
    }

    /// The component events come from.
    pub fn component(&self) -> &str {
        &self.component
    }

    /// Records a Normal event on `object`.
    pub fn normal(&self, object: &Value, reason: &str, message: impl Into<String>) {
        self.record(object, EventType::Normal, reason, message.into());
    }

    /// Records a Warning event on `object`.
    pub fn warning(&self, object: &Value, reason: &str, message: impl Into<String>) {
        self.record(object, EventType::Warning, reason, message.into());
    }

    /// Records an event in the background: recording never delays or fails a reconcile.
    pub fn record(&self, object: &Value, type_: EventType, reason: &str, message: String) {
        let Some(name) = object::name(object) else { return };
        let key = FoldKey { uid: object::uid(object).unwrap_or(name).to_string(), type_, reason: reason.to_string(), message: message.clone() };
        let namespace = object::namespace(object).unwrap_or("default").to_string();
        let involved = json!({
            "apiVersion": object.get("apiVersion").cloned().unwrap_or(Value::Null),
            "kind": object.get("kind").cloned().unwrap_or(Value::Null),
            "name": name,
            "namespace": object::namespace(object),
            "uid": object::uid(object),
            "resourceVersion": object::resource_version(object),
        });
        let recorder = self.clone();
        let reason = reason.to_string();
        let object_name = name.to_string();
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        runtime.spawn(async move {
            if let Err(error) = recorder.write(key, namespace, object_name, involved, reason, message).await {
                tracing::debug!(%error, "cannot record event");
            }
        });
    }

    async fn write(
        &self,
        key: FoldKey,
        namespace: String,
        object_name: String,
        involved: Value,
        reason: String,
        message: String,
    ) -> Result<(), crate::client::ApiError> {
        let now = object::now_rfc3339();
        let existing = {
            let mut folded = self.folded.lock().unwrap_or_else(|p| p.into_inner());
            match folded.get_mut(&key) {
                Some(entry) if entry.at.elapsed() < FOLD_WINDOW => {
                    entry.count += 1;
                    entry.at = Instant::now();
                    if entry.written.elapsed() < MIN_REWRITE {
                        return Ok(());
                    }
                    entry.written = Instant::now();
                    Some((entry.namespace.clone(), entry.name.clone(), entry.count))
                }
                _ => None,
            }
        };
        if let Some((namespace, name, count)) = existing {
            let patch = json!({"count": count, "lastTimestamp": now});
            match self.kube.merge_patch(&events_kind(), Some(&namespace), &name, &patch).await {
                Ok(_) => return Ok(()),
                Err(error) if error.is_not_found() => {}
                Err(error) => return Err(error),
            }
        }
        let name = format!("{object_name}.{:016x}", rand::random::<u64>());
        let event = json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace, "annotations": *self.annotations},
            "involvedObject": involved,
            "reason": reason,
            "message": message,
            "type": key.type_.as_str(),
            "source": {"component": &*self.component},
            "reportingComponent": &*self.component,
            "reportingInstance": "oxplane",
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        });
        self.kube.create(&events_kind(), &event).await?;
        let mut folded = self.folded.lock().unwrap_or_else(|p| p.into_inner());
        if folded.len() >= MAX_REMEMBERED {
            folded.retain(|_, entry| entry.at.elapsed() < FOLD_WINDOW);
            if folded.len() >= MAX_REMEMBERED {
                folded.clear();
            }
        }
        folded.insert(key, Folded { namespace, name, count: 1, at: Instant::now(), written: Instant::now() });
        Ok(())
    }
}

/// The events recorded on an object (matched by uid), as `(type, reason, message)`, oldest
/// first.
pub async fn events_of(kube: &Kube, object: &Value) -> Result<Vec<(String, String, String)>, crate::client::ApiError> {
    let uid = object::uid(object).unwrap_or_default().to_string();
    let mut events: Vec<Value> = kube
        .list(&events_kind(), None, None)
        .await?
        .into_iter()
        .filter(|e| e.pointer("/involvedObject/uid").and_then(Value::as_str) == Some(uid.as_str()))
        .collect();
    events.sort_by_key(|e| e.get("firstTimestamp").and_then(Value::as_str).unwrap_or_default().to_string());
    Ok(events
        .iter()
        .map(|e| {
            let field = |f: &str| e.get(f).and_then(Value::as_str).unwrap_or_default().to_string();
            (field("type"), field("reason"), field("message"))
        })
        .collect())
}
