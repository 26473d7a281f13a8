//! Test support: an in-process API server with Crossplane's core running on it (built-in
//! functions installed by Function objects), and helpers to wait on objects.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use oxplane_apiserver::testing::RunningServer;
use oxplane_composition::core::{Core, CoreOptions};
use oxplane_runtime::Runtime;
use oxplane_runtime::kinds::Kind;
use serde_json::Value;

/// A server with the core on it.
pub struct Plane {
    pub server: RunningServer,
    pub runtime: Runtime,
    pub core: Core,
}

impl Plane {
    /// Starts the server and the core, and installs both built-in functions.
    pub async fn start() -> Plane {
        let server = RunningServer::start().await.unwrap();
        let runtime = Runtime::new(kube::Client::new(server.local_service(), "default"), Duration::from_millis(500));
        let functions = oxplane_functions::builtin_names().into_iter().filter_map(|n| Some((n, oxplane_functions::builtin(n)?))).collect();
        let core = Core::start(&runtime, CoreOptions { providers: Vec::new(), functions, install: Vec::new(), reassert: Duration::from_secs(2) })
            .await
            .unwrap();
        let plane = Plane { server, runtime, core };
        for name in ["function-patch-and-transform", "function-auto-ready"] {
            plane
                .apply_yaml(&format!(
                    "apiVersion: pkg.crossplane.io/v1\nkind: Function\nmetadata:\n  name: {name}\nspec:\n  package: xpkg.crossplane.io/crossplane-contrib/{name}:v0.8.0\n"
                ))
                .await;
        }
        plane.wait("functions installed", async |p| p.core.functions.get("function-auto-ready").is_some().then_some(())).await;
        plane
    }

    /// Creates objects from YAML documents (kind resolved through discovery).
    pub async fn apply_yaml(&self, yaml: &str) -> Vec<Value> {
        let mut created = Vec::new();
        for document in serde_saphyr::from_multiple::<Value>(yaml).unwrap() {
            if document.is_null() {
                continue;
            }
            let kind = self.kind_of(&document).await;
            created.push(self.runtime.kube.create(&kind, &document).await.unwrap_or_else(|e| panic!("create {document}: {e}")));
        }
        created
    }

    /// The served kind of an object, waiting for it to be served.
    pub async fn kind_of(&self, object: &Value) -> Kind {
        let gvk = oxplane_runtime::kinds::Gvk::of(object).unwrap();
        self.wait(&format!("{gvk} to be served"), async |p| {
            p.runtime.watches.kinds().forget(&gvk);
            p.runtime.watches.kinds().resolve(&gvk).await.ok()
        })
        .await
    }

    /// Polls `check` every 50 ms until it answers, failing after 60 s.
    pub async fn wait<T>(&self, what: &str, mut check: impl AsyncFnMut(&Plane) -> Option<T>) -> T {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(found) = check(self).await {
                return found;
            }
            assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until an object satisfies `check`.
    pub async fn wait_object(&self, kind: &Kind, namespace: Option<&str>, name: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let object = self.runtime.kube.get(kind, namespace, name).await.unwrap();
            if let Some(object) = &object
                && check(object)
            {
                return object.clone();
            }
            assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}; last seen: {object:#?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Events on an object, as `(type, reason, message)`.
    pub async fn events_of(&self, object: &Value) -> Vec<(String, String, String)> {
        oxplane_runtime::events::events_of(&self.runtime.kube, object).await.unwrap()
    }
}

/// Whether a condition of `type_` is `True`.
pub fn is_true(object: &Value, type_: &str) -> bool {
    oxplane_runtime::conditions::is_true(object, type_)
}
