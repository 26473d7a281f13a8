//! Per-kind conversions between the protobuf messages of `k8s-pb` and Kubernetes JSON.
//!
//! Each `*_to_json` function returns the object's fields without `apiVersion`/`kind` (the
//! envelope supplies those); each `*_from_json` reads them back, ignoring unknown fields like a
//! non-strict Kubernetes decoder.

use k8s_pb::api::coordination::v1 as coordination;
use k8s_pb::api::core::v1 as core;
use k8s_pb::api::events::v1 as events;

use super::json::{In, JsonMap, Out};
use super::meta::{object_meta_from_json, object_meta_to_json};

/// Emits `metadata` when the message carried it.
pub(super) fn metadata(
    o: &mut Out,
    m: Option<k8s_pb::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
) -> Result<(), String> {
    let meta = m.map(|m| object_meta_to_json(m, "metadata")).transpose()?;
    o.object("metadata", meta);
    Ok(())
}

/// Reads `metadata` when present.
pub(super) fn metadata_from(
    r: &In<'_>,
) -> Result<Option<k8s_pb::apimachinery::pkg::apis::meta::v1::ObjectMeta>, String> {
    r.object("metadata")?
        .as_ref()
        .map(object_meta_from_json)
        .transpose()
}

/// Converts a core/v1 `ConfigMap`.
pub(super) fn config_map_to_json(m: core::ConfigMap) -> Result<JsonMap, String> {
    let mut o = Out::new("");
    metadata(&mut o, m.metadata)?;
    o.opt_bool("immutable", m.immutable);
    o.string_map("data", m.data);
    o.bytes_map("binaryData", m.binary_data);
    Ok(o.finish())
}

/// Reads a core/v1 `ConfigMap`.
pub(super) fn config_map_from_json(r: &In<'_>) -> Result<core::ConfigMap, String> {
    Ok(core::ConfigMap {
        metadata: metadata_from(r)?,
        immutable: r.boolean("immutable")?,
        data: r.string_map("data")?,
        binary_data: r.bytes_map("binaryData")?,
    })
}

/// Converts a core/v1 `Secret`.
pub(super) fn secret_to_json(m: core::Secret) -> Result<JsonMap, String> {
    let mut o = Out::new("");
    metadata(&mut o, m.metadata)?;
    o.opt_bool("immutable", m.immutable);
    o.bytes_map("data", m.data);
    o.string_map("stringData", m.string_data);
    o.string("type", m.r#type);
    Ok(o.finish())
}

/// Reads a core/v1 `Secret`.
pub(super) fn secret_from_json(r: &In<'_>) -> Result<core::Secret, String> {
    Ok(core::Secret {
        metadata: metadata_from(r)?,
        immutable: r.boolean("immutable")?,
        data: r.bytes_map("data")?,
        string_data: r.string_map("stringData")?,
        r#type: r.string("type")?,
    })
}

/// Converts a core/v1 `Namespace`.
pub(super) fn namespace_to_json(m: core::Namespace) -> Result<JsonMap, String> {
    let mut o = Out::new("");
    metadata(&mut o, m.metadata)?;
    o.object(
        "spec",
        m.spec.map(|s| {
            let mut o = Out::new("spec");
            o.strings("finalizers", s.finalizers);
            o.finish()
        }),
    );
    let status = match m.status {
        None => None,
        Some(s) => {
            let mut so = Out::new("status");
            so.string("phase", s.phase);
            let conditions = s
                .conditions
                .into_iter()
                .enumerate()
                .map(|(i, c)| {
                    let mut co = Out::new(&so.path_of_item("conditions", i));
                    co.string("type", c.r#type);
                    co.string("status", c.status);
                    co.time("lastTransitionTime", c.last_transition_time)?;
                    co.string("reason", c.reason);
                    co.string("message", c.message);
                    Ok(co.finish())
                })
                .collect::<Result<Vec<_>, String>>()?;
            so.objects("conditions", conditions);
            Some(so.finish())
        }
    };
    o.object("status", status);
    Ok(o.finish())
}

/// Reads a core/v1 `Namespace`.
pub(super) fn namespace_from_json(r: &In<'_>) -> Result<core::Namespace, String> {
    let spec = r
        .object("spec")?
        .map(|s| -> Result<_, String> {
            Ok(core::NamespaceSpec {
                finalizers: s.strings("finalizers")?,
            })
        })
        .transpose()?;
    let status = r
        .object("status")?
        .map(|s| -> Result<_, String> {
            let conditions = s
                .objects("conditions")?
                .iter()
                .map(|c| -> Result<_, String> {
                    Ok(core::NamespaceCondition {
                        r#type: c.string("type")?,
                        status: c.string("status")?,
                        last_transition_time: c.time("lastTransitionTime")?,
                        reason: c.string("reason")?,
                        message: c.string("message")?,
                    })
                })
                .collect::<Result<_, _>>()?;
            Ok(core::NamespaceStatus {
                phase: s.string("phase")?,
                conditions,
            })
        })
        .transpose()?;
    Ok(core::Namespace {
        metadata: metadata_from(r)?,
        spec,
        status,
    })
}

fn object_reference_to_json(m: core::ObjectReference) -> JsonMap {
    let mut o = Out::new("");
    o.string("kind", m.kind);
    o.string("namespace", m.namespace);
    o.string("name", m.name);
    o.string("uid", m.uid);
    o.string("apiVersion", m.api_version);
    o.string("resourceVersion", m.resource_version);
    o.string("fieldPath", m.field_path);
    o.finish()
}

fn object_reference_from_json(r: &In<'_>) -> Result<core::ObjectReference, String> {
    Ok(core::ObjectReference {
        kind: r.string("kind")?,
        namespace: r.string("namespace")?,
        name: r.string("name")?,
        uid: r.string("uid")?,
        api_version: r.string("apiVersion")?,
        resource_version: r.string("resourceVersion")?,
        field_path: r.string("fieldPath")?,
    })
}

/// Reads an optional nested `ObjectReference`.
fn object_reference_from(r: &In<'_>, key: &str) -> Result<Option<core::ObjectReference>, String> {
    r.object(key)?
        .as_ref()
        .map(object_reference_from_json)
        .transpose()
}

/// Converts a core/v1 `ServiceAccount`.
pub(super) fn service_account_to_json(m: core::ServiceAccount) -> Result<JsonMap, String> {
    let mut o = Out::new("");
    metadata(&mut o, m.metadata)?;
    o.objects(
        "secrets",
        m.secrets
            .into_iter()
            .map(object_reference_to_json)
            .collect(),
    );
    o.objects(
        "imagePullSecrets",
        m.image_pull_secrets
            .into_iter()
            .map(|s| {
                let mut o = Out::new("");
                o.string("name", s.name);
                o.finish()
            })
            .collect(),
    );
    o.opt_bool(
        "automountServiceAccountToken",
        m.automount_service_account_token,
    );
    Ok(o.finish())
}

/// Reads a core/v1 `ServiceAccount`.
pub(super) fn service_account_from_json(r: &In<'_>) -> Result<core::ServiceAccount, String> {
    Ok(core::ServiceAccount {
        metadata: metadata_from(r)?,
        secrets: r
            .objects("secrets")?
            .iter()
            .map(object_reference_from_json)
            .collect::<Result<_, _>>()?,
        image_pull_secrets: r
            .objects("imagePullSecrets")?
            .iter()
            .map(|s| {
                Ok(core::LocalObjectReference {
                    name: s.string("name")?,
                })
            })
            .collect::<Result<_, String>>()?,
        automount_service_account_token: r.boolean("automountServiceAccountToken")?,
    })
}

fn event_source_to_json(m: core::EventSource) -> JsonMap {
    let mut o = Out::new("");
    o.string("component", m.component);
    o.string("host", m.host);
    o.finish()
}

fn event_source_from(r: &In<'_>, key: &str) -> Result<Option<core::EventSource>, String> {
    r.object(key)?
        .map(|s| -> Result<_, String> {
            Ok(core::EventSource {
                component: s.string("component")?,
                host: s.string("host")?,
            })
        })
        .transpose()
}

/// Converts an `EventSeries` (identical in core/v1 and events.k8s.io/v1).
fn event_series_to_json(
    count: Option<i32>,
    last_observed_time: Option<k8s_pb::apimachinery::pkg::apis::meta::v1::MicroTime>,
) -> Result<JsonMap, String> {
    let mut o = Out::new("series");
    o.int("count", count);
    o.micro_time("lastObservedTime", last_observed_time)?;
    Ok(o.finish())
}

/// Converts a core/v1 `Event`.
pub(super) fn core_event_to_json(m: core::Event) -> Result<JsonMap, String> {
    let mut o = Out::new("");
    metadata(&mut o, m.metadata)?;
    o.object(
        "involvedObject",
        m.involved_object.map(object_reference_to_json),
    );
    o.string("reason", m.reason);
    o.string("message", m.message);
    o.object("source", m.source.map(event_source_to_json));
    o.time("firstTimestamp", m.first_timestamp)?;
    o.time("lastTimestamp", m.last_timestamp)?;
    o.int("count", m.count);
    o.string("type", m.r#type);
    o.micro_time("eventTime", m.event_time)?;
    let series = m
        .series
        .map(|s| event_series_to_json(s.count, s.last_observed_time))
        .transpose()?;
    o.object("series", series);
    o.string("action", m.action);
    o.object("related", m.related.map(object_reference_to_json));
    o.string("reportingComponent", m.reporting_component);
    o.string("reportingInstance", m.reporting_instance);
    Ok(o.finish())
}

/// Reads a core/v1 `Event`.
pub(super) fn core_event_from_json(r: &In<'_>) -> Result<core::Event, String> {
    let series = r
        .object("series")?
        .map(|s| -> Result<_, String> {
            Ok(core::EventSeries {
                count: s.int32("count")?,
                last_observed_time: s.micro_time("lastObservedTime")?,
            })
        })
        .transpose()?;
    Ok(core::Event {
        metadata: metadata_from(r)?,
        involved_object: object_reference_from(r, "involvedObject")?,
        reason: r.string("reason")?,
        message: r.string("message")?,
        source: event_source_from(r, "source")?,
        first_timestamp: r.time("firstTimestamp")?,
        last_timestamp: r.time("lastTimestamp")?,
        count: r.int32("count")?,
        r#type: r.string("type")?,
        event_time: r.micro_time("eventTime")?,
        series,
        action: r.string("action")?,
        related: object_reference_from(r, "related")?,
        reporting_component: r.string("reportingComponent")?,
        reporting_instance: r.string("reportingInstance")?,
    })
}

/// Converts an events.k8s.io/v1 `Event`.
pub(super) fn events_event_to_json(m: events::Event) -> Result<JsonMap, String> {
    let mut o = Out::new("");
    metadata(&mut o, m.metadata)?;
    o.micro_time("eventTime", m.event_time)?;
    let series = m
        .series
        .map(|s| event_series_to_json(s.count, s.last_observed_time))
        .transpose()?;
    o.object("series", series);
    o.string("reportingController", m.reporting_controller);
    o.string("reportingInstance", m.reporting_instance);
    o.string("action", m.action);
    o.string("reason", m.reason);
    o.object("regarding", m.regarding.map(object_reference_to_json));
    o.object("related", m.related.map(object_reference_to_json));
    o.string("note", m.note);
    o.string("type", m.r#type);
    o.object(
        "deprecatedSource",
        m.deprecated_source.map(event_source_to_json),
    );
    o.time("deprecatedFirstTimestamp", m.deprecated_first_timestamp)?;
    o.time("deprecatedLastTimestamp", m.deprecated_last_timestamp)?;
    o.int("deprecatedCount", m.deprecated_count);
    Ok(o.finish())
}

/// Reads an events.k8s.io/v1 `Event`.
pub(super) fn events_event_from_json(r: &In<'_>) -> Result<events::Event, String> {
    let series = r
        .object("series")?
        .map(|s| -> Result<_, String> {
            Ok(events::EventSeries {
                count: s.int32("count")?,
                last_observed_time: s.micro_time("lastObservedTime")?,
            })
        })
        .transpose()?;
    Ok(events::Event {
        metadata: metadata_from(r)?,
        event_time: r.micro_time("eventTime")?,
        series,
        reporting_controller: r.string("reportingController")?,
        reporting_instance: r.string("reportingInstance")?,
        action: r.string("action")?,
        reason: r.string("reason")?,
        regarding: object_reference_from(r, "regarding")?,
        related: object_reference_from(r, "related")?,
        note: r.string("note")?,
        r#type: r.string("type")?,
        deprecated_source: event_source_from(r, "deprecatedSource")?,
        deprecated_first_timestamp: r.time("deprecatedFirstTimestamp")?,
        deprecated_last_timestamp: r.time("deprecatedLastTimestamp")?,
        deprecated_count: r.int32("deprecatedCount")?,
    })
}

/// Converts a coordination.k8s.io/v1 `Lease`.
pub(super) fn lease_to_json(m: coordination::Lease) -> Result<JsonMap, String> {
    let mut o = Out::new("");
    metadata(&mut o, m.metadata)?;
    let spec = match m.spec {
        None => None,
        Some(s) => {
            // Every LeaseSpec field is a pointer in Go: present means emitted.
            let mut so = Out::new("spec");
            so.opt_string("holderIdentity", s.holder_identity);
            so.opt_int("leaseDurationSeconds", s.lease_duration_seconds);
            so.micro_time("acquireTime", s.acquire_time)?;
            so.micro_time("renewTime", s.renew_time)?;
            so.opt_int("leaseTransitions", s.lease_transitions);
            so.opt_string("strategy", s.strategy);
            so.opt_string("preferredHolder", s.preferred_holder);
            Some(so.finish())
        }
    };
    o.object("spec", spec);
    Ok(o.finish())
}

/// Reads a coordination.k8s.io/v1 `Lease`.
pub(super) fn lease_from_json(r: &In<'_>) -> Result<coordination::Lease, String> {
    let spec = r
        .object("spec")?
        .map(|s| -> Result<_, String> {
            Ok(coordination::LeaseSpec {
                holder_identity: s.string("holderIdentity")?,
                lease_duration_seconds: s.int32("leaseDurationSeconds")?,
                acquire_time: s.micro_time("acquireTime")?,
                renew_time: s.micro_time("renewTime")?,
                lease_transitions: s.int32("leaseTransitions")?,
                strategy: s.string("strategy")?,
                preferred_holder: s.string("preferredHolder")?,
            })
        })
        .transpose()?;
    Ok(coordination::Lease {
        metadata: metadata_from(r)?,
        spec,
    })
}
