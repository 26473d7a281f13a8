//! Test support: an in-process API server with the runtime on it, and a way to install a
//! built-in provider as the package manager would (CRDs established, controllers started).

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use oxplane_apiserver::testing::RunningServer;
use oxplane_runtime::Runtime;
use oxplane_runtime::conditions;
use oxplane_runtime::kinds::Kind;
use oxplane_runtime::object;
use oxplane_runtime::provider::{BuiltinProvider, ProviderHandle};
use serde_json::Value;

/// The CRD kind.
pub fn crd_kind() -> Kind {
    Kind::new("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", false)
}

/// Polls `check` every 50 ms until it answers, failing after 90 s.
pub async fn wait_for<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        if let Some(found) = check().await {
            return found;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A server and a runtime on it.
pub async fn start() -> (RunningServer, Runtime) {
    let server = RunningServer::start().await.unwrap();
    let runtime = Runtime::new(kube::Client::new(server.local_service(), "default"), Duration::from_secs(1));
    (server, runtime)
}

/// Installs a provider's CRDs, waits for them, starts its controllers.
pub async fn install(runtime: &Runtime, provider: &dyn BuiltinProvider, package: &str) -> ProviderHandle {
    for crd in provider.crds(package) {
        runtime.kube.create(&crd_kind(), &crd).await.unwrap();
        let name = object::name(&crd).unwrap().to_string();
        wait_for("the CRD to be established", async || {
            let crd = runtime.kube.get(&crd_kind(), None, &name).await.unwrap()?;
            conditions::is_true(&crd, "Established").then_some(())
        })
        .await;
    }
    provider.start(runtime, package)
}

/// Waits until an object satisfies `check`, returning it.
pub async fn wait_object(runtime: &Runtime, kind: &Kind, namespace: Option<&str>, name: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    wait_for(what, async || {
        let object = runtime.kube.get(kind, namespace, name).await.unwrap()?;
        check(&object).then_some(object)
    })
    .await
}

/// Events recorded on an object (by its uid), as `(type, reason, message)`.
pub async fn events_of(runtime: &Runtime, object: &Value) -> Vec<(String, String, String)> {
    oxplane_runtime::events::events_of(&runtime.kube, object).await.unwrap()
}
