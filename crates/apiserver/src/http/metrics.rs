//! Request metrics, exported on `/metrics` in Prometheus text format beside the store's: counters
//! kept in this server's own `prometheus-client` registry (two servers in one process, as in
//! tests, count apart) and the open watch streams read at scrape time.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::http::Method;
use oxplane_metrics::prometheus_client::metrics::counter::Counter;
use oxplane_metrics::prometheus_client::metrics::family::Family;
use oxplane_metrics::prometheus_client::registry::Registry;
use oxplane_metrics::{Labels, Scrape};

/// Counters the HTTP layer keeps.
pub struct Metrics {
    registry: Registry,
    /// Requests by method and status code.
    requests: Family<Labels, Counter>,
    /// Time spent answering requests, by method and status code.
    request_seconds: Family<Labels, Counter<f64, AtomicU64>>,
    /// Resource requests by what they did and their status code.
    resource_requests: Family<Labels, Counter>,
    /// Watch streams currently open, by resource.
    pub watchers: Arc<WatchGauge>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let requests = Family::<Labels, Counter>::default();
        registry.register("oxplane_apiserver_requests", "API requests by method and response code", requests.clone());
        let request_seconds = Family::<Labels, Counter<f64, AtomicU64>>::default();
        registry.register(
            "oxplane_apiserver_request_seconds",
            "Time spent answering API requests (watches until their response starts)",
            request_seconds.clone(),
        );
        let resource_requests = Family::<Labels, Counter>::default();
        registry.register(
            "oxplane_apiserver_resource_requests",
            "Requests to object endpoints by verb, resource and response code",
            resource_requests.clone(),
        );
        Metrics { registry, requests, request_seconds, resource_requests, watchers: Arc::default() }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// What a request to an object endpoint asked for, in Kubernetes' request-info terms (the
/// labels of kube-apiserver's `apiserver_request_total`). Read from the path alone, so requests
/// for kinds that are not served (any more) are counted too: they are what shows a client
/// still polling a kind whose CRD is gone.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RequestInfo {
    /// `GET`, `LIST`, `WATCH`, `POST`, `PUT`, `PATCH`, `DELETE` or `DELETECOLLECTION`.
    pub verb: &'static str,
    /// API group ("" for core).
    pub group: String,
    /// API version.
    pub version: String,
    /// Plural resource name as the path gives it.
    pub resource: String,
    /// Subresource ("" for none).
    pub subresource: String,
}

impl RequestInfo {
    /// A discovery request for a group-version's resources.
    pub fn discovery(group: &str, version: &str) -> Self {
        RequestInfo { verb: "GET", group: group.to_string(), version: version.to_string(), resource: String::new(), subresource: String::new() }
    }

    /// The request info of `method` on `/api(s)/<group>/<version>/<rest>?<raw_query>`.
    pub fn parse(method: &Method, group: &str, version: &str, rest: &str, raw_query: Option<&str>) -> Self {
        let parts: Vec<&str> = rest.split('/').filter(|p| !p.is_empty()).collect();
        // `/namespaces/<ns>/<plural>/...` addresses a namespaced collection, except the core
        // group's `/namespaces/<name>/status|finalize`, which are subresources of a Namespace.
        let (resource, name, subresource) = match parts.as_slice() {
            ["namespaces", name, sub @ ("status" | "finalize")] if group.is_empty() => ("namespaces", Some(*name), *sub),
            ["namespaces", _, plural, tail @ ..] => (*plural, tail.first().copied(), tail.get(1).copied().unwrap_or_default()),
            [plural, tail @ ..] => (*plural, tail.first().copied(), tail.get(1).copied().unwrap_or_default()),
            [] => ("", None, ""),
        };
        let watching = raw_query
            .unwrap_or_default()
            .split('&')
            .any(|pair| matches!(pair.split_once('='), Some(("watch", "true" | "1"))));
        let verb = match (method, name) {
            (&Method::GET, None) if watching => "WATCH",
            (&Method::GET, None) => "LIST",
            (&Method::GET, Some(_)) => "GET",
            (&Method::POST, _) => "POST",
            (&Method::PUT, _) => "PUT",
            (&Method::PATCH, _) => "PATCH",
            (&Method::DELETE, None) => "DELETECOLLECTION",
            (&Method::DELETE, Some(_)) => "DELETE",
            _ => "OTHER",
        };
        RequestInfo {
            verb,
            group: group.to_string(),
            version: version.to_string(),
            resource: resource.to_string(),
            subresource: subresource.to_string(),
        }
    }
}

impl Metrics {
    /// Records one finished request.
    pub fn record(&self, method: &str, code: u16, took: Duration) {
        let labels: Labels = vec![("method", method.to_string()), ("code", code.to_string())];
        self.requests.get_or_create(&labels).inc();
        self.request_seconds.get_or_create(&labels).inc_by(took.as_secs_f64());
    }

    /// Records one answered request to an object endpoint.
    pub fn record_resource(&self, info: RequestInfo, code: u16) {
        let labels: Labels = vec![
            ("verb", info.verb.to_string()),
            ("group", info.group),
            ("version", info.version),
            ("resource", info.resource),
            ("subresource", info.subresource),
            ("code", code.to_string()),
        ];
        self.resource_requests.get_or_create(&labels).inc();
    }

    /// The metrics in Prometheus text format.
    pub fn render(&self) -> String {
        let open = self.watchers.snapshot();
        let mut scrape = Scrape::new();
        scrape.gauge("oxplane_apiserver_watchers", "Watch streams currently open", [(Labels::new(), open.values().sum::<i64>())]);
        scrape.gauge(
            "oxplane_apiserver_resource_watchers",
            "Watch streams currently open, by resource",
            open.into_iter().map(|((group, resource), count)| (vec![("group", group), ("resource", resource)], count)),
        );
        oxplane_metrics::encode(&self.registry) + &scrape.render()
    }
}

/// Open watch streams by (group, resource).
#[derive(Default)]
pub struct WatchGauge {
    open: Mutex<BTreeMap<(String, String), i64>>,
}

impl WatchGauge {
    /// Counts a stream on `group`/`resource` that just opened, for as long as the guard lives.
    pub fn open(self: &Arc<Self>, group: &str, resource: &str) -> WatchGuard {
        let key = (group.to_string(), resource.to_string());
        *lock(&self.open).entry(key.clone()).or_default() += 1;
        WatchGuard { gauge: self.clone(), key }
    }

    /// The open streams by resource; resources with none are left out.
    pub fn snapshot(&self) -> BTreeMap<(String, String), i64> {
        lock(&self.open).clone()
    }
}

/// Counts one open watch stream for as long as it lives.
pub struct WatchGuard {
    gauge: Arc<WatchGauge>,
    key: (String, String),
}

impl Drop for WatchGuard {
    fn drop(&mut self) {
        let mut open = lock(&self.gauge.open);
        if let Some(count) = open.get_mut(&self.key) {
            *count -= 1;
            if *count <= 0 {
                open.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(method: Method, group: &str, rest: &str, query: Option<&str>) -> (&'static str, String, String) {
        let i = RequestInfo::parse(&method, group, "v1", rest, query);
        (i.verb, i.resource, i.subresource)
    }

    #[test]
    fn request_info_reads_verb_resource_and_subresource_from_the_path() {
        let t = |verb: &'static str, resource: &str, sub: &str| (verb, resource.to_string(), sub.to_string());
        assert_eq!(info(Method::GET, "", "namespaces/a/configmaps", None), t("LIST", "configmaps", ""));
        assert_eq!(info(Method::GET, "", "namespaces/a/configmaps", Some("watch=true&resourceVersion=5")), t("WATCH", "configmaps", ""));
        assert_eq!(info(Method::GET, "", "namespaces/a/configmaps", Some("watch=1")), t("WATCH", "configmaps", ""));
        assert_eq!(info(Method::GET, "", "namespaces/a/configmaps", Some("watch=false")), t("LIST", "configmaps", ""));
        assert_eq!(info(Method::GET, "", "namespaces/a/configmaps/b", None), t("GET", "configmaps", ""));
        assert_eq!(info(Method::GET, "", "namespaces", None), t("LIST", "namespaces", ""));
        assert_eq!(info(Method::GET, "", "namespaces/a", None), t("GET", "namespaces", ""));
        assert_eq!(info(Method::PUT, "", "namespaces/a/finalize", None), t("PUT", "namespaces", "finalize"));
        assert_eq!(info(Method::PATCH, "", "namespaces/a/status", None), t("PATCH", "namespaces", "status"));
        assert_eq!(info(Method::PATCH, "nop.crossplane.io", "nopresources/n/status", None), t("PATCH", "nopresources", "status"));
        assert_eq!(info(Method::GET, "nop.crossplane.io", "nopresources", Some("watch=true")), t("WATCH", "nopresources", ""));
        assert_eq!(info(Method::POST, "x.io", "namespaces/a/things", None), t("POST", "things", ""));
        assert_eq!(info(Method::DELETE, "x.io", "namespaces/a/things", None), t("DELETECOLLECTION", "things", ""));
        assert_eq!(info(Method::DELETE, "x.io", "namespaces/a/things/b", None), t("DELETE", "things", ""));
        assert_eq!(info(Method::HEAD, "x.io", "things", None), t("OTHER", "things", ""));
    }

    #[test]
    fn watch_gauge_counts_streams_by_resource_and_forgets_closed_ones() {
        let metrics = Metrics::default();
        let a = metrics.watchers.open("", "configmaps");
        let b = metrics.watchers.open("", "configmaps");
        let c = metrics.watchers.open("nop.crossplane.io", "nopresources");
        let text = metrics.render();
        assert!(text.contains("oxplane_apiserver_watchers 3\n"), "{text}");
        assert!(text.contains("oxplane_apiserver_resource_watchers{group=\"\",resource=\"configmaps\"} 2\n"), "{text}");
        drop((a, c));
        let text = metrics.render();
        assert!(text.contains("oxplane_apiserver_watchers 1\n"), "{text}");
        assert!(!text.contains("nopresources"), "{text}");
        drop(b);
        assert!(metrics.render().contains("oxplane_apiserver_watchers 0\n"));
    }

    #[test]
    fn resource_requests_are_counted_by_labels_and_code() {
        let metrics = Metrics::default();
        let list = RequestInfo::parse(&Method::GET, "nop.crossplane.io", "v1alpha1", "nopresources", None);
        metrics.record_resource(list.clone(), 200);
        metrics.record_resource(list.clone(), 200);
        metrics.record_resource(list, 404);
        let text = metrics.render();
        let line = "oxplane_apiserver_resource_requests_total{verb=\"LIST\",group=\"nop.crossplane.io\",version=\"v1alpha1\",resource=\"nopresources\",subresource=\"\",code=";
        assert!(text.contains(&format!("{line}\"200\"}} 2\n")), "{text}");
        assert!(text.contains(&format!("{line}\"404\"}} 1\n")), "{text}");
    }
}
