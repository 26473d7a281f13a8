//! provider-nop: managed resources that drive nothing. `spec.forProvider.conditionAfter`
//! says which conditions to show once the resource is a given age, and
//! `spec.forProvider.connectionDetails` which connection details to publish; the external
//! resource always "exists" and is always up to date, so Create and Update are never called.
//! Every composition test uses it.
//!
//! Two API layouts, chosen by the package tag: up to `v0.4.x`, `NopResource` is
//! cluster-scoped; from `v0.5.0` on, `NopResource` is namespaced and `ClusterNopResource` is
//! its cluster-scoped twin. A reference without a version tag gets the `v0.4` layout.

use std::sync::Arc;
use std::time::Duration;

use oxplane_runtime::Runtime;
use oxplane_runtime::conditions::Condition;
use oxplane_runtime::managed::crd::ManagedCrd;
use oxplane_runtime::managed::{
    self, ConnectContext, ExternalClient, ExternalConnector, ExternalCreation, ExternalDelete, ExternalError, ExternalObservation,
    ExternalUpdate, Managed, ManagedSettings,
};
use oxplane_runtime::provider::{BuiltinProvider, ProviderHandle, package_tag, semver};
use serde_json::{Value, json};

/// The API group.
pub const GROUP: &str = "nop.crossplane.io";
/// The version.
pub const VERSION: &str = "v1alpha1";
/// provider-nop's poll interval (the upstream default).
pub const POLL_INTERVAL: Duration = Duration::from_secs(10);

/// provider-nop.
pub struct NopProvider;

/// Whether a package reference asks for the v0.5 layout (namespaced `NopResource`).
fn namespaced_layout(package: &str) -> bool {
    package_tag(package).and_then(semver).is_some_and(|v| v >= (0, 5, 0))
}

fn for_provider_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "conditionAfter": {
                "type": "array",
                "description": "Conditions to set once the resource is at least `time` old. Without an entry for Ready, the resource never becomes Ready.",
                "items": {
                    "type": "object",
                    "required": ["conditionStatus", "conditionType", "time"],
                    "properties": {
                        "time": {"type": "string", "description": "A duration, e.g. 30s."},
                        "conditionType": {"type": "string"},
                        "conditionStatus": {"type": "string"},
                        "conditionReason": {"type": "string"}
                    }
                }
            },
            "connectionDetails": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["name", "value"],
                    "properties": {"name": {"type": "string"}, "value": {"type": "string"}}
                }
            },
            "fields": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "description": "Anything; a target for patches."}
        }
    })
}

fn crd(kind: &str, plural: &str, namespaced: bool) -> ManagedCrd {
    ManagedCrd {
        group: GROUP.into(),
        version: VERSION.into(),
        kind: kind.into(),
        plural: plural.into(),
        namespaced,
        categories: vec!["nop".into()],
        for_provider: for_provider_schema(),
        at_provider: json!({"type": "object", "properties": {
            "fields": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
        }}),
        extra_columns: Vec::new(),
        for_provider_required: true,
    }
}

/// The managed kinds of a package reference.
pub fn kinds(package: &str) -> Vec<ManagedCrd> {
    if namespaced_layout(package) {
        vec![crd("NopResource", "nopresources", true), crd("ClusterNopResource", "clusternopresources", false)]
    } else {
        vec![crd("NopResource", "nopresources", false)]
    }
}

impl BuiltinProvider for NopProvider {
    fn name(&self) -> &'static str {
        "provider-nop"
    }

    fn crds(&self, package: &str) -> Vec<Value> {
        kinds(package).iter().map(ManagedCrd::render).collect()
    }

    fn start(&self, runtime: &Runtime, package: &str) -> ProviderHandle {
        let controllers = kinds(package)
            .iter()
            .map(|crd| managed::start_controller(runtime, ManagedSettings::new(crd.kind(), Arc::new(NopConnector), POLL_INTERVAL)))
            .collect();
        ProviderHandle::new(controllers)
    }
}

/// Connects to nothing.
pub struct NopConnector;

#[async_trait::async_trait]
impl ExternalConnector for NopConnector {
    async fn connect(&self, _context: &ConnectContext<'_>, _managed: &Managed) -> Result<Box<dyn ExternalClient>, ExternalError> {
        Ok(Box::new(NopClient))
    }
}

/// The client of a resource that drives nothing.
pub struct NopClient;

/// The conditions due at `age`: for each type, the entry with the latest time not after `age`
/// (so Ready can go True, then False, then True again as the resource ages), and how long
/// until the next entry is due.
pub fn due_conditions(for_provider: &Value, age: Duration) -> (Vec<Condition>, Option<Duration>) {
    let mut entries: Vec<(Duration, &Value)> = for_provider
        .get("conditionAfter")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|entry| Some((managed::annotations::parse_go_duration_or_zero(entry.get("time")?.as_str()?)?, entry)))
        .collect();
    // Latest first, stable for equal times: the first entry per type wins.
    entries.sort_by_key(|entry| std::cmp::Reverse(entry.0));
    let mut seen = std::collections::BTreeSet::new();
    let mut conditions = Vec::new();
    let mut next: Option<Duration> = None;
    for (time, entry) in entries {
        if time > age {
            let wait = time - age;
            next = Some(next.map_or(wait, |n| n.min(wait)));
            continue;
        }
        let Some(type_) = entry.get("conditionType").and_then(Value::as_str) else { continue };
        if !seen.insert(type_.to_string()) {
            continue;
        }
        let status = entry.get("conditionStatus").and_then(Value::as_str).unwrap_or("Unknown");
        let reason = entry.get("conditionReason").and_then(Value::as_str).unwrap_or("");
        conditions.push(Condition::new(type_, status, reason));
    }
    (conditions, next)
}

#[async_trait::async_trait]
impl ExternalClient for NopClient {
    async fn observe(&mut self, managed: &mut Managed) -> Result<ExternalObservation, ExternalError> {
        if oxplane_runtime::object::is_deleting(&managed.object) {
            return Ok(ExternalObservation::default());
        }
        let for_provider = managed.for_provider();
        let (conditions, next) = due_conditions(&for_provider, oxplane_runtime::object::age(&managed.object));
        for condition in conditions {
            managed.set_condition(condition);
        }
        let connection_details = for_provider
            .get("connectionDetails")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|d| Some((d.get("name")?.as_str()?.to_string(), d.get("value")?.as_str()?.as_bytes().to_vec())))
            .collect();
        Ok(ExternalObservation {
            resource_exists: true,
            resource_up_to_date: true,
            connection_details,
            // Observe again exactly when the next condition is due, not a poll later.
            requeue_after: next.map(|n| n + Duration::from_millis(50)),
            ..Default::default()
        })
    }

    async fn create(&mut self, _managed: &mut Managed) -> Result<ExternalCreation, ExternalError> {
        Ok(ExternalCreation::default())
    }

    async fn update(&mut self, _managed: &mut Managed) -> Result<ExternalUpdate, ExternalError> {
        Ok(ExternalUpdate::default())
    }

    async fn delete(&mut self, _managed: &mut Managed) -> Result<ExternalDelete, ExternalError> {
        Ok(ExternalDelete {})
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn states(for_provider: Value, age_s: u64) -> (Vec<(String, String, String)>, Option<Duration>) {
        let (conditions, next) = due_conditions(&for_provider, Duration::from_secs(age_s));
        (conditions.into_iter().map(|c| (c.type_, c.status, c.reason)).collect(), next)
    }

    #[test]
    fn the_latest_due_entry_per_type_wins() {
        let spec = json!({"conditionAfter": [
            {"time": "30s", "conditionType": "Ready", "conditionStatus": "True"},
            {"time": "60s", "conditionType": "Ready", "conditionStatus": "False"},
            {"time": "90s", "conditionType": "Ready", "conditionStatus": "True", "conditionReason": "Back"},
            {"time": "5s", "conditionType": "Green", "conditionStatus": "True", "conditionReason": "Ok"}
        ]});
        assert_eq!(states(spec.clone(), 1), (vec![], Some(Duration::from_secs(4))));
        assert_eq!(states(spec.clone(), 40).0, vec![("Ready".into(), "True".into(), "".into()), ("Green".into(), "True".into(), "Ok".into())]);
        assert_eq!(states(spec.clone(), 40).1, Some(Duration::from_secs(20)));
        assert_eq!(states(spec.clone(), 61).0[0], ("Ready".into(), "False".into(), "".into()));
        assert_eq!(states(spec.clone(), 100).0[0], ("Ready".into(), "True".into(), "Back".into()));
        assert_eq!(states(spec, 100).1, None);
    }

    #[test]
    fn zero_durations_and_no_entries() {
        assert_eq!(states(json!({"conditionAfter": [{"time": "0s", "conditionType": "Ready", "conditionStatus": "True"}]}), 0).0.len(), 1);
        assert_eq!(states(json!({}), 10), (vec![], None));
        assert_eq!(states(json!({"conditionAfter": [{"time": "soon", "conditionType": "Ready", "conditionStatus": "True"}]}), 10), (vec![], None));
    }

    #[test]
    fn layouts_follow_the_tag() {
        let v4 = kinds("xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0");
        assert_eq!(v4.len(), 1);
        assert!(!v4[0].namespaced);
        let v5 = kinds("xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.5.1");
        assert_eq!(v5.iter().map(|k| (k.kind.as_str(), k.namespaced)).collect::<Vec<_>>(), [("NopResource", true), ("ClusterNopResource", false)]);
        assert!(!kinds("provider-nop")[0].namespaced);
    }
}
