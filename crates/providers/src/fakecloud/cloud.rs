//! A local fake cloud for fault-injection tests, served over HTTP on 127.0.0.1.
//!
//! It behaves like the clouds whose quirks cause duplicate resources: identifiers are random,
//! creation is asynchronous (a thing is `creating` for a while before it is `ready`), and it
//! can drop the response of a create it committed, refuse lookups by tag, or refuse creates or
//! deletes. Tests may also make things, or change them, behind the control plane's back.
//! Its ledger records every thing it ever held and how many creates each idempotency token
//! caused, so a test can prove "exactly one external object".
//!
//! API (JSON): `POST /things` `{id?, tags, spec}` → 201 thing (409 if the given id exists);
//! `GET /things/{id}`; `GET /things?tag=KEY=VALUE` (live things with that tag; 501 when
//! lookups are off); `PUT /things/{id}` `{spec}`; `DELETE /things/{id}` → 202;
//! `GET /ledger`; `POST /admin` `{provisioningMs, deletionMs, lookup, dropNextCreateResponse,
//! failCreates, failDeletes}`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

/// The tag carrying a managed resource's uid (the idempotency token).
pub const UID_TAG: &str = "crossplane-mr-uid";

#[derive(Clone, Debug)]
struct Thing {
    id: String,
    tags: BTreeMap<String, String>,
    spec: Value,
    created: Instant,
    deleting_since: Option<Instant>,
}

#[derive(Debug)]
struct Settings {
    provisioning: Duration,
    deletion: Duration,
    lookup: bool,
    drop_next_create_response: bool,
    fail_creates: Option<String>,
    fail_next_create: Option<String>,
    fail_deletes: Option<String>,
}

#[derive(Debug)]
struct Cloud {
    things: BTreeMap<String, Thing>,
    /// Creates per idempotency token, over the cloud's whole life.
    creates: BTreeMap<String, u64>,
    settings: Settings,
}

impl Thing {
    fn state(&self, settings: &Settings) -> &'static str {
        match self.deleting_since {
            Some(since) if since.elapsed() >= settings.deletion => "deleted",
            Some(_) => "deleting",
            None if self.created.elapsed() >= settings.provisioning => "ready",
            None => "creating",
        }
    }

    fn json(&self, settings: &Settings) -> Value {
        json!({"id": self.id, "tags": self.tags, "spec": self.spec, "state": self.state(settings)})
    }
}

type Shared = Arc<Mutex<Cloud>>;

fn lock(cloud: &Shared) -> std::sync::MutexGuard<'_, Cloud> {
    cloud.lock().unwrap_or_else(|p| p.into_inner())
}

fn error(code: StatusCode, message: &str) -> Response {
    (code, axum::Json(json!({"error": message}))).into_response()
}

async fn create(State(cloud): State<Shared>, axum::Json(body): axum::Json<Value>) -> Response {
    let mut cloud = lock(&cloud);
    if let Some(message) = cloud.settings.fail_next_create.take().or_else(|| cloud.settings.fail_creates.clone()) {
        // Refused before anything is made: a definite failure.
        return error(StatusCode::FORBIDDEN, &message);
    }
    let id = match body.get("id").and_then(Value::as_str) {
        Some(id) if cloud.things.get(id).is_some_and(|t| t.state(&cloud.settings) != "deleted") => {
            return error(StatusCode::CONFLICT, &format!("thing {id} already exists"));
        }
        Some(id) => id.to_string(),
        None => format!("thing-{:08x}", rand::random::<u32>()),
    };
    let tags: BTreeMap<String, String> = body
        .get("tags")
        .and_then(Value::as_object)
        .map(|t| t.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect())
        .unwrap_or_default();
    if let Some(uid) = tags.get(UID_TAG) {
        *cloud.creates.entry(uid.clone()).or_insert(0) += 1;
    }
    let mut spec = body.get("spec").cloned().filter(Value::is_object).unwrap_or(json!({}));
    // Like real clouds, it fills what the caller left out (what late initialization copies).
    if spec.get("color").is_none_or(Value::is_null) {
        spec["color"] = json!("blue");
    }
    let thing = Thing { id: id.clone(), tags, spec, created: Instant::now(), deleting_since: None };
    let answer = thing.json(&cloud.settings);
    cloud.things.insert(id, thing);
    if std::mem::take(&mut cloud.settings.drop_next_create_response) {
        // Committed, but the caller never learns the outcome: the body fails mid-response.
        let failing = futures::stream::once(async { Err::<bytes::Bytes, std::io::Error>(std::io::Error::other("connection reset")) });
        return (StatusCode::CREATED, Body::from_stream(failing)).into_response();
    }
    (StatusCode::CREATED, axum::Json(answer)).into_response()
}

async fn get_thing(State(cloud): State<Shared>, Path(id): Path<String>) -> Response {
    let cloud = lock(&cloud);
    match cloud.things.get(&id) {
        Some(thing) if thing.state(&cloud.settings) != "deleted" => axum::Json(thing.json(&cloud.settings)).into_response(),
        _ => error(StatusCode::NOT_FOUND, &format!("thing {id} not found")),
    }
}

async fn list(State(cloud): State<Shared>, Query(query): Query<BTreeMap<String, String>>) -> Response {
    let cloud = lock(&cloud);
    let Some(tag) = query.get("tag") else {
        let all: Vec<Value> = cloud.things.values().filter(|t| t.state(&cloud.settings) != "deleted").map(|t| t.json(&cloud.settings)).collect();
        return axum::Json(all).into_response();
    };
    if !cloud.settings.lookup {
        return error(StatusCode::NOT_IMPLEMENTED, "this cloud cannot look things up by tag");
    }
    let Some((key, value)) = tag.split_once('=') else {
        return error(StatusCode::BAD_REQUEST, "tag must be KEY=VALUE");
    };
    let found: Vec<Value> = cloud
        .things
        .values()
        .filter(|t| t.state(&cloud.settings) != "deleted" && t.tags.get(key).map(String::as_str) == Some(value))
        .map(|t| t.json(&cloud.settings))
        .collect();
    axum::Json(found).into_response()
}

async fn update(State(cloud): State<Shared>, Path(id): Path<String>, axum::Json(body): axum::Json<Value>) -> Response {
    let mut cloud = lock(&cloud);
    let Cloud { things, settings, .. } = &mut *cloud;
    match things.get_mut(&id) {
        Some(thing) if matches!(thing.state(settings), "ready" | "creating") => {
            if let Some(spec) = body.get("spec") {
                thing.spec = spec.clone();
            }
            axum::Json(thing.json(settings)).into_response()
        }
        Some(_) => error(StatusCode::CONFLICT, &format!("thing {id} is being deleted")),
        None => error(StatusCode::NOT_FOUND, &format!("thing {id} not found")),
    }
}

async fn delete(State(cloud): State<Shared>, Path(id): Path<String>) -> Response {
    let mut cloud = lock(&cloud);
    if let Some(message) = cloud.settings.fail_deletes.clone() {
        return error(StatusCode::FORBIDDEN, &message);
    }
    let Cloud { things, settings, .. } = &mut *cloud;
    match things.get_mut(&id) {
        Some(thing) if thing.state(settings) != "deleted" => {
            if thing.deleting_since.is_none() {
                thing.deleting_since = Some(Instant::now());
            }
            (StatusCode::ACCEPTED, axum::Json(thing.json(settings))).into_response()
        }
        _ => error(StatusCode::NOT_FOUND, &format!("thing {id} not found")),
    }
}

async fn ledger(State(cloud): State<Shared>) -> Response {
    let cloud = lock(&cloud);
    let things: Vec<Value> = cloud.things.values().map(|t| t.json(&cloud.settings)).collect();
    axum::Json(json!({"things": things, "creates": cloud.creates})).into_response()
}

async fn admin(State(cloud): State<Shared>, axum::Json(body): axum::Json<Value>) -> Response {
    let mut cloud = lock(&cloud);
    if let Some(ms) = body.get("provisioningMs").and_then(Value::as_u64) {
        cloud.settings.provisioning = Duration::from_millis(ms);
    }
    if let Some(ms) = body.get("deletionMs").and_then(Value::as_u64) {
        cloud.settings.deletion = Duration::from_millis(ms);
    }
    if let Some(lookup) = body.get("lookup").and_then(Value::as_bool) {
        cloud.settings.lookup = lookup;
    }
    if let Some(drop) = body.get("dropNextCreateResponse").and_then(Value::as_bool) {
        cloud.settings.drop_next_create_response = drop;
    }
    if let Some(fail) = body.get("failCreates") {
        cloud.settings.fail_creates = fail.as_str().map(str::to_string);
    }
    if let Some(fail) = body.get("failDeletes") {
        cloud.settings.fail_deletes = fail.as_str().map(str::to_string);
    }
    StatusCode::NO_CONTENT.into_response()
}

/// A running fake cloud; stops when dropped.
pub struct FakeCloud {
    address: SocketAddr,
    cloud: Shared,
    task: tokio::task::JoinHandle<()>,
}

impl FakeCloud {
    /// Starts a cloud on a free port of 127.0.0.1 whose things take `provisioning` to become
    /// ready.
    pub async fn start(provisioning: Duration) -> std::io::Result<FakeCloud> {
        let cloud: Shared = Arc::new(Mutex::new(Cloud {
            things: BTreeMap::new(),
            creates: BTreeMap::new(),
            settings: Settings {
                provisioning,
                deletion: Duration::ZERO,
                lookup: true,
                drop_next_create_response: false,
                fail_creates: None,
                fail_next_create: None,
                fail_deletes: None,
            },
        }));
        let app = Router::new()
            .route("/things", post(create).get(list))
            .route("/things/{id}", get(get_thing).put(update).delete(delete))
            .route("/ledger", get(ledger))
            .route("/admin", post(admin))
            .with_state(cloud.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        // No Nagle delay on the cloud's answers, as on the API server's.
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(FakeCloud { address, cloud, task })
    }

    /// The URL to put in a ProviderConfig's `spec.endpoint`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Live things tagged with a managed resource's uid.
    pub fn things_of(&self, uid: &str) -> Vec<Value> {
        let cloud = lock(&self.cloud);
        cloud
            .things
            .values()
            .filter(|t| t.tags.get(UID_TAG).map(String::as_str) == Some(uid) && t.state(&cloud.settings) != "deleted")
            .map(|t| t.json(&cloud.settings))
            .collect()
    }

    /// How many creates a managed resource's uid caused, ever.
    pub fn creates_of(&self, uid: &str) -> u64 {
        lock(&self.cloud).creates.get(uid).copied().unwrap_or(0)
    }

    /// Every live thing.
    pub fn live(&self) -> Vec<Value> {
        let cloud = lock(&self.cloud);
        cloud.things.values().filter(|t| t.state(&cloud.settings) != "deleted").map(|t| t.json(&cloud.settings)).collect()
    }

    /// Turns lookups by tag on or off.
    pub fn set_lookup(&self, lookup: bool) {
        lock(&self.cloud).settings.lookup = lookup;
    }

    /// Makes the next create commit and lose its response.
    pub fn drop_next_create_response(&self) {
        lock(&self.cloud).settings.drop_next_create_response = true;
    }

    /// Makes creates fail with `message` (403, nothing made), or succeed again with `None`.
    pub fn fail_creates(&self, message: Option<&str>) {
        lock(&self.cloud).settings.fail_creates = message.map(str::to_string);
    }

    /// Makes the next create alone fail with `message` (403, nothing made).
    pub fn fail_next_create(&self, message: &str) {
        lock(&self.cloud).settings.fail_next_create = Some(message.to_string());
    }

    /// One thing by id, if it is live.
    pub fn thing(&self, id: &str) -> Option<Value> {
        let cloud = lock(&self.cloud);
        cloud.things.get(id).filter(|t| t.state(&cloud.settings) != "deleted").map(|t| t.json(&cloud.settings))
    }

    /// Makes a thing behind the control plane's back (someone else's, to observe or adopt),
    /// ready at once; returns its id. It counts as no create of any managed resource.
    pub fn insert(&self, spec: Value) -> String {
        let mut cloud = lock(&self.cloud);
        let id = format!("thing-{:08x}", rand::random::<u32>());
        // Old enough to be ready whatever the provisioning latency.
        let created = Instant::now().checked_sub(cloud.settings.provisioning).unwrap_or_else(Instant::now);
        let thing = Thing { id: id.clone(), tags: BTreeMap::new(), spec, created, deleting_since: None };
        cloud.things.insert(id.clone(), thing);
        id
    }

    /// Changes a live thing's spec behind the control plane's back (drift); whether it was
    /// there.
    pub fn set_spec(&self, id: &str, spec: Value) -> bool {
        let mut cloud = lock(&self.cloud);
        match cloud.things.get_mut(id) {
            Some(thing) if thing.deleting_since.is_none() => {
                thing.spec = spec;
                true
            }
            _ => false,
        }
    }

    /// Makes deletes fail with `message` (403), or succeed again with `None`.
    pub fn fail_deletes(&self, message: Option<&str>) {
        lock(&self.cloud).settings.fail_deletes = message.map(str::to_string);
    }

    /// Sets how long a delete takes.
    pub fn set_deletion(&self, deletion: Duration) {
        lock(&self.cloud).settings.deletion = deletion;
    }
}

impl Drop for FakeCloud {
    fn drop(&mut self) {
        self.task.abort();
    }
}
