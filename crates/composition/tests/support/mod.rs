//! Test support: an in-process API server with Crossplane's core running on it (built-in
//! functions installed by Function objects), and helpers to wait on objects.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use oxplane_apiserver::testing::RunningServer;
use oxplane_composition::core::{Core, CoreOptions};
use oxplane_runtime::Runtime;
use oxplane_runtime::kinds::Kind;
use serde_json::Value;

/// A v2 XRD of namespaced `XApp`s (`example.org/v1`) with a `spec.color` string.
pub const XAPP_XRD: &str = r#"
apiVersion: apiextensions.crossplane.io/v2
kind: CompositeResourceDefinition
metadata:
  name: xapps.example.org
spec:
  group: example.org
  names: {kind: XApp, plural: xapps}
  versions:
  - name: v1
    served: true
    referenceable: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              color: {type: string}
"#;

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
        let core = Core::start(&runtime, CoreOptions {
            providers: Vec::new(),
            functions,
            function_tls_dir: Some(server.path().join("pki/functions")),
            function_response_cache: None,
            install: Vec::new(),
            reassert: Duration::from_secs(2),
            circuit: oxplane_runtime::circuit::CircuitConfig::default(),
            operations: None,
            package_cache_dir: None,
            package_runtime_dir: None,
            dependency_versions: Default::default(),
            default_activations: vec!["*".to_string()],
            package_sources: Default::default(),
            provider_runtime: None,
            identities: None,
        })
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

impl Plane {
    /// The Event objects recorded on an object (matched by uid), oldest first.
    pub async fn event_objects(&self, object: &Value) -> Vec<Value> {
        let uid = oxplane_runtime::object::uid(object).unwrap().to_string();
        let events = Kind::new("", "v1", "Event", "events", true);
        let mut found: Vec<Value> =
            self.runtime.kube.list(&events, None, None).await.unwrap().into_iter().filter(|e| e["involvedObject"]["uid"] == uid.as_str()).collect();
        found.sort_by_key(|e| e["firstTimestamp"].as_str().unwrap_or_default().to_string());
        found
    }

    /// Waits until an event `(type, reason, message)` is recorded on `object`.
    pub async fn wait_event(&self, object: &Value, type_: &str, reason: &str, message: &str) {
        let wanted = (type_.to_string(), reason.to_string(), message.to_string());
        self.wait(&format!("event {wanted:?}"), async |p| p.events_of(object).await.contains(&wanted).then_some(())).await;
    }

    /// How many reconciles the controller `name` has finished.
    pub fn reconciles(&self, controller: &str) -> u64 {
        self.runtime.metrics.reconcile_count(controller)
    }
}

/// `apiextensions.crossplane.io/v1` `Composition`.
pub fn compositions() -> Kind {
    Kind::new("apiextensions.crossplane.io", "v1", "Composition", "compositions", false)
}

/// `apiextensions.crossplane.io/v1` `CompositionRevision`.
pub fn revisions() -> Kind {
    Kind::new("apiextensions.crossplane.io", "v1", "CompositionRevision", "compositionrevisions", false)
}

/// `apiextensions.crossplane.io/v1` `CompositeResourceDefinition`.
pub fn xrds() -> Kind {
    Kind::new("apiextensions.crossplane.io", "v1", "CompositeResourceDefinition", "compositeresourcedefinitions", false)
}

/// Core `v1` `ConfigMap`.
pub fn config_maps() -> Kind {
    Kind::new("", "v1", "ConfigMap", "configmaps", true)
}

/// The condition `type_` of an object, if set.
pub fn condition(object: &Value, type_: &str) -> Option<oxplane_runtime::conditions::Condition> {
    oxplane_runtime::conditions::get(object, type_)
}

/// A function server on 127.0.0.1, stopped when dropped.
pub struct Served {
    /// `127.0.0.1:PORT`.
    pub address: String,
    /// Dropping it stops the server.
    pub stop: tokio::sync::oneshot::Sender<()>,
}

/// Serves `function` over gRPC on `listener`, insecure or with mutual TLS.
pub async fn serve_on(
    function: std::sync::Arc<dyn oxplane_functions::Function>,
    listener: tokio::net::TcpListener,
    tls: Option<oxplane_functions::grpc::ServerTls>,
) -> Served {
    let address = listener.local_addr().unwrap().to_string();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(oxplane_functions::grpc::serve(function, listener, tls, async move {
        let _ = stopped.await;
    }));
    Served { address, stop }
}

/// Serves `function` over gRPC on a free port.
pub async fn serve_function(function: std::sync::Arc<dyn oxplane_functions::Function>, tls: Option<oxplane_functions::grpc::ServerTls>) -> Served {
    serve_on(function, tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(), tls).await
}

/// `pkg.crossplane.io/v1` `Function`.
pub fn functions() -> Kind {
    Kind::new("pkg.crossplane.io", "v1", "Function", "functions", false)
}

/// The namespaced `XApp`s of [`XAPP_XRD`].
pub fn xapps() -> Kind {
    Kind::new("example.org", "v1", "XApp", "xapps", true)
}
