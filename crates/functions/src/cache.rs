//! The function response cache (`--enable-function-response-cache`, Crossplane's alpha
//! feature): a response that carries a TTL is kept on disk under the request's `meta.tag` (the
//! digest of everything the function sees), and an identical request within that TTL is
//! answered from the file instead of calling the function again.
//!
//! Layout: `<dir>/<function name>/<tag>`, each file a [`CachedResponse`] (the deadline and the
//! response's wire message), written to a temporary file and renamed, so a reader never sees
//! half a file. TTLs are clamped to a maximum (Crossplane's `--xfn-cache-max-ttl`, 24h); the
//! cache is bounded in bytes: past the bound, expired entries go first, then those closest to
//! their deadline. A file that cannot be read or decoded is a miss, never an error.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prost::Message;

use crate::grpc::convert::{response_from_proto, response_to_proto};
use crate::grpc::proto::v1;
use crate::protocol::{Function, FunctionError, RunFunctionRequest, RunFunctionResponse};

/// Crossplane's default `--xfn-cache-max-ttl`.
pub const DEFAULT_MAX_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// How many bytes of responses the cache keeps by default.
pub const DEFAULT_MAX_BYTES: u64 = 256 * 1024 * 1024;

/// One cached response as stored: when it expires and the response itself.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CachedResponse {
    /// Milliseconds since the Unix epoch after which the response is stale.
    #[prost(int64, tag = "1")]
    pub deadline_unix_ms: i64,
    /// The function's response as it came over the wire.
    #[prost(message, optional, tag = "2")]
    pub response: Option<v1::RunFunctionResponse>,
}

/// The clock the cache reads (replaceable in tests).
pub type Clock = Arc<dyn Fn() -> SystemTime + Send + Sync>;

/// The response cache in one directory, shared by every function it wraps.
pub struct ResponseCache {
    dir: PathBuf,
    max_ttl: Duration,
    max_bytes: u64,
    /// Bytes written since the directory was last measured, plus what it held then.
    bytes: AtomicU64,
    clock: Clock,
}

impl ResponseCache {
    /// A cache in `dir` (created when the first response is written), keeping responses at
    /// most `max_ttl` and about `max_bytes` in all.
    pub fn new(dir: PathBuf, max_ttl: Duration, max_bytes: u64) -> Arc<Self> {
        ResponseCache::with_clock(dir, max_ttl, max_bytes, Arc::new(SystemTime::now))
    }

    /// [`ResponseCache::new`] on another clock.
    pub fn with_clock(dir: PathBuf, max_ttl: Duration, max_bytes: u64, clock: Clock) -> Arc<Self> {
        let held = entries(&dir).iter().map(|e| e.bytes).sum();
        Arc::new(ResponseCache { dir, max_ttl, max_bytes, bytes: AtomicU64::new(held), clock })
    }

    /// `function` answering from this cache under the name `name`.
    pub fn wrap(self: &Arc<Self>, name: &str, function: Arc<dyn Function>) -> Arc<dyn Function> {
        Arc::new(CachedFunction { name: name.to_string(), inner: function, cache: self.clone() })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, name: &str, tag: &str) -> Option<PathBuf> {
        // Names are Kubernetes object names and tags hex digests; anything else is never
        // turned into a path.
        let safe_name = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.') && !name.starts_with('.');
        let safe_tag = tag.len() == 64 && tag.chars().all(|c| c.is_ascii_hexdigit());
        (safe_name && safe_tag).then(|| self.dir.join(name).join(tag))
    }

    fn now_ms(&self) -> i64 {
        unix_ms((self.clock)())
    }

    /// The cached response of `tag` for `name`, if one is there and not yet stale.
    async fn read(&self, path: &Path) -> Option<RunFunctionResponse> {
        let bytes = tokio::fs::read(path).await.ok()?;
        let cached = CachedResponse::decode(bytes.as_slice()).ok()?;
        if cached.deadline_unix_ms <= self.now_ms() {
            return None;
        }
        response_from_proto(cached.response.as_ref()?).ok()
    }

    /// Keeps `response` until its TTL (clamped) passes; a response without a TTL is not kept.
    /// Failing to write only loses the cache entry.
    async fn write(&self, path: &Path, response: &RunFunctionResponse) {
        let Some(ttl) = response.meta.ttl.filter(|t| !t.is_zero()) else { return };
        let ttl = ttl.min(self.max_ttl);
        let Ok(wire) = response_to_proto(response) else { return };
        let deadline = self.now_ms().saturating_add(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX));
        let bytes = CachedResponse { deadline_unix_ms: deadline, response: Some(wire) }.encode_to_vec();
        let Some(parent) = path.parent() else { return };
        let temporary = parent.join(format!(".{}.{}", path.file_name().and_then(|n| n.to_str()).unwrap_or("entry"), rand::random::<u64>()));
        let written = async {
            tokio::fs::create_dir_all(parent).await?;
            tokio::fs::write(&temporary, &bytes).await?;
            tokio::fs::rename(&temporary, path).await
        };
        if let Err(error) = written.await {
            let _ = tokio::fs::remove_file(&temporary).await;
            tracing::info!(path = %path.display(), %error, "cannot write a function response to the cache");
            return;
        }
        let held = self.bytes.fetch_add(bytes.len() as u64, Ordering::Relaxed) + bytes.len() as u64;
        if held > self.max_bytes {
            let (dir, max_bytes, now) = (self.dir.clone(), self.max_bytes, self.now_ms());
            if let Ok(left) = tokio::task::spawn_blocking(move || collect(&dir, now, max_bytes)).await {
                self.bytes.store(left, Ordering::Relaxed);
            }
        }
    }

    /// Removes stale entries, then the entries closest to their deadline until the cache holds
    /// at most its bound; returns the bytes left.
    pub fn collect(&self) -> u64 {
        let left = collect(&self.dir, self.now_ms(), self.max_bytes);
        self.bytes.store(left, Ordering::Relaxed);
        left
    }
}

fn unix_ms(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// One file of the cache.
struct Entry {
    path: PathBuf,
    bytes: u64,
    /// Its deadline; `i64::MIN` when it cannot be read (such files go first).
    deadline: i64,
}

/// Every entry file under `dir` (`<dir>/<name>/<tag>`; temporary files are skipped).
fn entries(dir: &Path) -> Vec<Entry> {
    let mut found = Vec::new();
    for function in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        for file in std::fs::read_dir(function.path()).into_iter().flatten().flatten() {
            let path = file.path();
            if path.file_name().and_then(|n| n.to_str()).is_none_or(|n| n.starts_with('.')) {
                continue;
            }
            let bytes = file.metadata().map(|m| m.len()).unwrap_or(0);
            found.push(Entry { path, bytes, deadline: i64::MIN });
        }
    }
    found
}

fn collect(dir: &Path, now: i64, max_bytes: u64) -> u64 {
    let mut live = Vec::new();
    for mut entry in entries(dir) {
        entry.deadline = std::fs::read(&entry.path)
            .ok()
            .and_then(|bytes| CachedResponse::decode(bytes.as_slice()).ok())
            .map_or(i64::MIN, |cached| cached.deadline_unix_ms);
        if entry.deadline <= now {
            let _ = std::fs::remove_file(&entry.path);
        } else {
            live.push(entry);
        }
    }
    live.sort_by_key(|e| e.deadline);
    let mut held: u64 = live.iter().map(|e| e.bytes).sum();
    for entry in &live {
        if held <= max_bytes {
            break;
        }
        if std::fs::remove_file(&entry.path).is_ok() {
            held -= entry.bytes;
        }
    }
    held
}

/// A function whose responses are cached.
struct CachedFunction {
    name: String,
    inner: Arc<dyn Function>,
    cache: Arc<ResponseCache>,
}

#[async_trait::async_trait]
impl Function for CachedFunction {
    async fn run(&self, request: RunFunctionRequest) -> Result<RunFunctionResponse, FunctionError> {
        let Some(path) = self.cache.path(&self.name, &request.meta.tag) else {
            return self.inner.run(request).await;
        };
        if let Some(response) = self.cache.read(&path).await {
            tracing::debug!(function = %self.name, tag = %request.meta.tag, "function response cache hit");
            return Ok(response);
        }
        let response = self.inner.run(request).await?;
        self.cache.write(&path, &response).await;
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::sync::Mutex;
    use std::sync::atomic::AtomicUsize;

    use serde_json::json;

    use super::*;
    use crate::protocol::{ResponseMeta, response_to};

    /// Counts its calls; answers with the TTL it is given and the call's number in `context`.
    struct Counting {
        calls: AtomicUsize,
        ttl: Option<Duration>,
    }

    #[async_trait::async_trait]
    impl Function for Counting {
        async fn run(&self, request: RunFunctionRequest) -> Result<RunFunctionResponse, FunctionError> {
            let call = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
            let mut response = response_to(&request, Duration::ZERO);
            response.meta = ResponseMeta { tag: request.meta.tag.clone(), ttl: self.ttl };
            response.context = Some(json!({"call": call}));
            Ok(response)
        }
    }

    fn request(size: u32) -> RunFunctionRequest {
        let mut request = RunFunctionRequest { input: Some(json!({"apiVersion": "x/v1", "kind": "In", "size": size})), ..Default::default() };
        request.meta.tag = crate::grpc::tag(&request);
        request
    }

    struct Fixture {
        _dir: tempfile::TempDir,
        cache: Arc<ResponseCache>,
        now: Arc<Mutex<SystemTime>>,
    }

    fn fixture(max_ttl: Duration, max_bytes: u64) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let now = Arc::new(Mutex::new(SystemTime::now()));
        let clock = now.clone();
        let cache = ResponseCache::with_clock(dir.path().join("xfn"), max_ttl, max_bytes, Arc::new(move || *clock.lock().unwrap()));
        Fixture { _dir: dir, cache, now }
    }

    impl Fixture {
        fn advance(&self, by: Duration) {
            *self.now.lock().unwrap() += by;
        }
    }

    fn counting(ttl: Option<Duration>) -> Arc<Counting> {
        Arc::new(Counting { calls: AtomicUsize::new(0), ttl })
    }

    #[tokio::test]
    async fn an_identical_request_within_the_ttl_is_answered_from_the_cache_until_it_expires() {
        let f = fixture(DEFAULT_MAX_TTL, DEFAULT_MAX_BYTES);
        let inner = counting(Some(Duration::from_secs(60)));
        let cached = f.cache.wrap("function-a", inner.clone());
        let first = cached.run(request(1)).await.unwrap();
        assert_eq!(cached.run(request(1)).await.unwrap(), first);
        assert_eq!(inner.calls.load(Ordering::SeqCst), 1);
        // Another request is another entry.
        assert_eq!(cached.run(request(2)).await.unwrap().context, Some(json!({"call": 2})));
        f.advance(Duration::from_secs(59));
        assert_eq!(cached.run(request(1)).await.unwrap(), first);
        assert_eq!(inner.calls.load(Ordering::SeqCst), 2);
        f.advance(Duration::from_secs(1));
        assert_eq!(cached.run(request(1)).await.unwrap().context, Some(json!({"call": 3})));
        assert_eq!(inner.calls.load(Ordering::SeqCst), 3);
        // Kept on disk: a new cache on the same directory (a restart) answers from it.
        let again = ResponseCache::with_clock(f.cache.dir().to_path_buf(), DEFAULT_MAX_TTL, DEFAULT_MAX_BYTES, f.cache.clock.clone());
        assert_eq!(again.wrap("function-a", inner.clone()).run(request(1)).await.unwrap().context, Some(json!({"call": 3})));
        // Another function's name is another entry.
        assert_eq!(again.wrap("function-b", inner.clone()).run(request(1)).await.unwrap().context, Some(json!({"call": 4})));
    }

    #[tokio::test]
    async fn responses_without_a_ttl_are_not_cached_and_ttls_are_clamped() {
        let f = fixture(Duration::from_secs(10), DEFAULT_MAX_BYTES);
        for ttl in [None, Some(Duration::ZERO)] {
            let inner = counting(ttl);
            let cached = f.cache.wrap("function-a", inner.clone());
            cached.run(request(1)).await.unwrap();
            cached.run(request(1)).await.unwrap();
            assert_eq!(inner.calls.load(Ordering::SeqCst), 2, "{ttl:?}");
        }
        let inner = counting(Some(Duration::from_secs(3600)));
        let cached = f.cache.wrap("function-c", inner.clone());
        cached.run(request(1)).await.unwrap();
        f.advance(Duration::from_secs(9));
        cached.run(request(1)).await.unwrap();
        assert_eq!(inner.calls.load(Ordering::SeqCst), 1);
        f.advance(Duration::from_secs(1));
        cached.run(request(1)).await.unwrap();
        assert_eq!(inner.calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_damaged_entry_is_a_miss_and_is_replaced() {
        let f = fixture(DEFAULT_MAX_TTL, DEFAULT_MAX_BYTES);
        let inner = counting(Some(Duration::from_secs(60)));
        let cached = f.cache.wrap("function-a", inner.clone());
        cached.run(request(1)).await.unwrap();
        let path = f.cache.path("function-a", &request(1).meta.tag).unwrap();
        std::fs::write(&path, b"\xff\xff not a message").unwrap();
        assert_eq!(cached.run(request(1)).await.unwrap().context, Some(json!({"call": 2})));
        assert_eq!(cached.run(request(1)).await.unwrap().context, Some(json!({"call": 2})));
    }

    #[tokio::test]
    async fn requests_without_a_usable_tag_or_name_bypass_the_cache() {
        let f = fixture(DEFAULT_MAX_TTL, DEFAULT_MAX_BYTES);
        let inner = counting(Some(Duration::from_secs(60)));
        let mut untagged = request(1);
        untagged.meta.tag = String::new();
        let mut forged = request(1);
        forged.meta.tag = "../../etc/passwd".into();
        for (name, request) in [("function-a", untagged), ("function-a", forged), ("../up", request(1))] {
            let cached = f.cache.wrap(name, inner.clone());
            cached.run(request.clone()).await.unwrap();
            cached.run(request).await.unwrap();
        }
        assert_eq!(inner.calls.load(Ordering::SeqCst), 6);
        assert!(!f.cache.dir().exists());
    }

    #[tokio::test]
    async fn the_cache_stays_within_its_bound_dropping_stale_then_soonest_to_expire() {
        let f = fixture(DEFAULT_MAX_TTL, u64::MAX);
        let short = f.cache.wrap("short", counting(Some(Duration::from_secs(10))));
        let long = f.cache.wrap("long", counting(Some(Duration::from_secs(1000))));
        let soon = f.cache.wrap("soon", counting(Some(Duration::from_secs(100))));
        short.run(request(1)).await.unwrap();
        long.run(request(1)).await.unwrap();
        soon.run(request(1)).await.unwrap();
        let name_of = |e: &Entry| e.path.parent().unwrap().file_name().unwrap().to_string_lossy().into_owned();
        let found = entries(f.cache.dir());
        assert_eq!(found.len(), 3);
        let long_bytes = found.iter().find(|e| name_of(e) == "long").unwrap().bytes;
        f.advance(Duration::from_secs(20));
        // Bound: the long-lived entry alone. The stale one goes, then the one closest to its
        // deadline.
        let left = collect(f.cache.dir(), f.cache.now_ms(), long_bytes);
        let names: Vec<String> = entries(f.cache.dir()).iter().map(name_of).collect();
        assert_eq!(names, ["long"]);
        assert_eq!(left, long_bytes);
    }
}
