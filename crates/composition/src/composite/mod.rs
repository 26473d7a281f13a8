//! Composite resources: one controller per XRD, named `composite/<xrd-name>`.
//!
//! - `shape.rs`: where Crossplane's machinery lives in an XR (modern or legacy).
//! - `select.rs`: Composition and revision selection.
//! - `pipeline.rs`: running the function pipeline.
//! - `plan.rs`: what composing an object would do, in dry run (not yet served).
//! - `compose.rs`: composed resources' metadata, namespaces, garbage collection.
//! - `names.rs`: deterministic composed resource names.
//! - `dependencies.rs`: realtime watches of composed and required kinds, counted.
//! - `observe.rs`: the observed state functions are told (composite and composed resources).
//! - `reconciler.rs`: the XR reconcile loop.

pub mod compose;
pub mod dependencies;
pub mod names;
pub mod observe;
pub mod pipeline;
pub mod plan;
pub mod reconciler;
pub mod select;
pub mod shape;

use std::sync::Arc;
use std::time::Duration;

use oxplane_runtime::Runtime;
use oxplane_runtime::circuit::{Breaker, CircuitConfig};
use oxplane_runtime::controller::{Controller, ControllerConfig, spec_or_metadata_changed};
use oxplane_runtime::object::{self, ObjectKey};
use oxplane_runtime::queue::Backoff;
use oxplane_runtime::watches::WatchEvent;

use crate::compositions::{LABEL_COMPOSITION_NAME, revision_kind};
use crate::packages::FunctionRegistry;
use dependencies::Dependencies;
use reconciler::XrReconciler;
use shape::XrType;

/// How XR controllers run.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    /// How often dependency watches are rebuilt from the composites' stored references.
    pub reassert: Duration,
    /// The watch circuit breaker of each composite.
    pub circuit: CircuitConfig,
}

/// A running XR controller: its controller, its dependency watches, and the task that
/// re-asserts them.
pub struct XrController {
    /// The controller.
    pub controller: Arc<Controller>,
    /// The realtime watches.
    pub dependencies: Arc<Dependencies>,
    reassert: tokio::task::JoinHandle<()>,
}

impl XrController {
    /// Stops everything, locally.
    pub fn stop(&self) {
        self.reassert.abort();
        self.controller.stop();
        // Dependency watches are owned by the controller's subscriptions; dropping the index's
        // handles happens with the index.
        self.dependencies.clear();
    }
}

impl Drop for XrController {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Starts the controller of one composite type. Every `reassert` the dependency watches are
/// rebuilt from the composites' stored references.
pub fn start(runtime: &Runtime, xr_type: XrType, functions: Arc<FunctionRegistry>, settings: Settings) -> XrController {
    let name = xr_type.controller_name();
    let breaker = Breaker::new(name.clone(), settings.circuit, runtime.metrics.clone());
    let dependencies = Dependencies::new(runtime.watches.clone(), xr_type.kind.clone(), breaker);
    let reassert = settings.reassert;
    let refs_pointer = format!("{}/resourceRefs", xr_type.machinery_pointer());
    let machinery = xr_type.machinery_pointer().to_string();
    let kind = xr_type.kind.clone();
    let reconciler = Arc::new(XrReconciler::new(runtime.clone(), xr_type, functions, dependencies.clone()));
    let config = ControllerConfig { backoff: Backoff { base: Duration::from_secs(1), max: Duration::from_secs(30) }, ..ControllerConfig::new(name) };
    let controller = Controller::start(config, reconciler, runtime.metrics.clone());
    dependencies.attach(&controller);
    runtime.watches.kinds().insert(kind.clone());
    controller.watch_own(&runtime.watches, &kind.gvk, spec_or_metadata_changed);
    // A new revision of a composition wakes the composites that use the composition.
    // The composites come from the controller's own informer, captured here: a watch handler
    // must never call back into the watch registry.
    let composites = runtime.watches.informer(&kind.gvk);
    controller.watch_mapped(&runtime.watches, &revision_kind().gvk, move |event| {
        let WatchEvent::Applied { new, .. } = event else { return Vec::new() };
        let Some(composition) = object::label(new, LABEL_COMPOSITION_NAME) else { return Vec::new() };
        let Some(informer) = &composites else { return Vec::new() };
        informer
            .list()
            .iter()
            .filter(|xr| xr.pointer(&format!("{machinery}/compositionRef/name")).and_then(|n| n.as_str()) == Some(composition))
            .filter_map(|xr| ObjectKey::of(xr))
            .collect()
    });
    let weak_dependencies = Arc::downgrade(&dependencies);
    let watches = runtime.watches.clone();
    let reassert = tokio::spawn(async move {
        loop {
            tokio::time::sleep(reassert).await;
            let Some(dependencies) = weak_dependencies.upgrade() else { return };
            let Some(informer) = watches.informer(&kind.gvk) else { continue };
            dependencies.reassert(&informer.list(), &refs_pointer);
        }
    });
    XrController { controller, dependencies, reassert }
}
