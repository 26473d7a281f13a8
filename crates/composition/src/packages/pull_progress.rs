//! A slow pull's progress, shown while it runs: for Configurations, Providers and Functions
//! alike, each second past the first the package's `Installed=False/UnpackingPackage` message
//! (Crossplane's own condition for a package being unpacked; it has none for progress) says
//! `pulling package REF: 3.0 MiB of 12.0 MiB, 0 of 2 layers`, and a log line says the same.

use std::future::Future;
use std::time::Duration;

use oxplane_runtime::client::Kube;
use oxplane_runtime::conditions::{self, Condition};
use oxplane_runtime::kinds::Kind;
use oxplane_runtime::object;
use oxplane_xpkg::registry::Progress;
use serde_json::{Value, json};

/// How often a slow pull's progress is reported.
const INTERVAL: Duration = Duration::from_secs(1);

/// Runs `work`, which pulls `image` and sends its progress to `progress`, reporting it on
/// `package` (of `kind`) while it runs longer than a second. The conditions the package had are
/// put back afterwards (and its `resourceVersion` taken from that write), so the caller's own
/// status write of the outcome is neither skipped as unchanged nor refused as stale.
pub(super) async fn reporting<T>(
    kube: &Kube,
    kind: &Kind,
    package: &mut Value,
    image: &str,
    progress: tokio::sync::watch::Receiver<Progress>,
    work: impl Future<Output = T>,
) -> Result<T, String> {
    tokio::pin!(work);
    let mut ticks = tokio::time::interval(INTERVAL);
    ticks.tick().await;
    let name = object::name(package).unwrap_or_default().to_string();
    let mut shown: Option<Progress> = None;
    let done = loop {
        tokio::select! {
            done = &mut work => break done,
            _ = ticks.tick() => {
                let now = *progress.borrow();
                if now.total_layers == 0 || shown == Some(now) {
                    continue;
                }
                let message = format!("pulling package {image}: {}", now.describe());
                tracing::info!(kind = %kind.gvk.kind, package = %name, "{message}");
                let mut reporting = package.clone();
                conditions::set(&mut reporting, Condition::new("Installed", "False", "UnpackingPackage").with_message(message));
                let patch = json!({"status": {"conditions": reporting.pointer("/status/conditions").cloned().unwrap_or(Value::Null)}});
                // A report that cannot be written is only a report: the pull goes on.
                if let Err(error) = kube.merge_patch_status(kind, None, &name, &patch).await {
                    tracing::debug!(package = %name, %error, "cannot report the pull's progress");
                }
                shown = Some(now);
            }
        }
    };
    if shown.is_some() {
        let restore = json!({"status": {"conditions": package.pointer("/status/conditions").cloned().unwrap_or(Value::Null)}});
        let restored = kube.merge_patch_status(kind, None, &name, &restore).await.map_err(|e| format!("cannot update the package's status: {e}"))?;
        if let Some(version) = restored.pointer("/metadata/resourceVersion") {
            package["metadata"]["resourceVersion"] = version.clone();
        }
    }
    Ok(done)
}
