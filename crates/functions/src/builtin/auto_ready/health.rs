//! Health of the standard Kubernetes kinds, from what their status fields mean (in the
//! spirit of Argo CD's checks, which function-auto-ready follows), keyed by `apiVersion` and
//! `kind` as function-auto-ready registers them. Anything else is healthy when its `Ready`
//! condition is `True`.
//!
//! Kubernetes omits zero-valued counters from status (`availableReplicas: 0` is simply not
//! there), so a missing counter counts as zero; a controller that has not caught up with the
//! latest spec (`status.observedGeneration` below `metadata.generation`) is never healthy.

use serde_json::Value;

/// Whether the observed object is healthy (ready).
pub fn is_healthy(object: &Value) -> bool {
    let api_version = str_at(object, "/apiVersion").unwrap_or_default();
    let kind = str_at(object, "/kind").unwrap_or_default();
    match (api_version, kind) {
        ("apps/v1", "Deployment") => deployment(object),
        ("apps/v1", "StatefulSet") => stateful_set(object),
        ("apps/v1", "DaemonSet") => daemon_set(object),
        ("apps/v1", "ReplicaSet") => replica_set(object),
        ("v1", "Pod") => pod(object),
        ("batch/v1", "Job") => job(object),
        ("batch/v1", "CronJob") => cron_job(object),
        ("v1", "Service") => service(object),
        ("networking.k8s.io/v1", "Ingress") => has_load_balancer_ingress(object),
        ("v1", "PersistentVolumeClaim") => str_at(object, "/status/phase") == Some("Bound"),
        ("autoscaling/v2", "HorizontalPodAutoscaler") => horizontal_pod_autoscaler(object),
        ("v1", "Namespace") => str_at(object, "/status/phase") != Some("Terminating"),
        // Objects without a status: ready once they exist.
        ("v1", "ServiceAccount" | "Secret" | "ConfigMap") => true,
        _ => condition(object, "Ready") == Some("True"),
    }
}

fn str_at<'a>(object: &'a Value, pointer: &str) -> Option<&'a str> {
    object.pointer(pointer).and_then(Value::as_str)
}

/// An integer field (observed numbers may arrive as floats).
fn int_at(object: &Value, pointer: &str) -> Option<i64> {
    let v = object.pointer(pointer)?;
    v.as_i64().or_else(|| v.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
}

/// A status counter; Kubernetes leaves zeros out.
fn counter(object: &Value, pointer: &str) -> i64 {
    int_at(object, pointer).unwrap_or(0)
}

/// The status of the condition of this type, if there is one.
fn condition<'a>(object: &'a Value, condition_type: &str) -> Option<&'a str> {
    object
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(condition_type))?
        .get("status")?
        .as_str()
}

/// Whether the controller has seen the latest spec.
fn generation_observed(object: &Value) -> bool {
    match int_at(object, "/metadata/generation") {
        Some(generation) => counter(object, "/status/observedGeneration") >= generation,
        None => true,
    }
}

/// `spec.replicas`, which defaults to 1.
fn desired_replicas(object: &Value) -> i64 {
    int_at(object, "/spec/replicas").unwrap_or(1)
}

/// Every replica updated and available, and the `Available` condition true.
fn deployment(object: &Value) -> bool {
    let replicas = desired_replicas(object);
    generation_observed(object)
        && counter(object, "/status/updatedReplicas") == replicas
        && counter(object, "/status/availableReplicas") == replicas
        && condition(object, "Available") == Some("True")
}

/// Every replica ready and at the current revision, and the rollout finished.
fn stateful_set(object: &Value) -> bool {
    let replicas = desired_replicas(object);
    object.pointer("/status").is_some_and(Value::is_object)
        && generation_observed(object)
        && counter(object, "/status/readyReplicas") == replicas
        && counter(object, "/status/currentReplicas") == replicas
        && str_at(object, "/status/currentRevision").unwrap_or_default()
            == str_at(object, "/status/updateRevision").unwrap_or_default()
}

/// Every node that should run a pod runs an updated, ready, available one.
fn daemon_set(object: &Value) -> bool {
    // desiredNumberScheduled and numberReady are always written once there is a status.
    let (Some(desired), Some(ready)) =
        (int_at(object, "/status/desiredNumberScheduled"), int_at(object, "/status/numberReady"))
    else {
        return false;
    };
    generation_observed(object)
        && ready == desired
        && counter(object, "/status/updatedNumberScheduled") == desired
        && counter(object, "/status/numberAvailable") == desired
}

/// Enough available replicas and no replica failure.
fn replica_set(object: &Value) -> bool {
    generation_observed(object)
        && condition(object, "ReplicaFailure") != Some("True")
        && counter(object, "/status/availableReplicas") >= desired_replicas(object)
}

/// Succeeded, or running with restarts (`restartPolicy: Always`, the default) and ready.
fn pod(object: &Value) -> bool {
    match str_at(object, "/status/phase") {
        Some("Succeeded") => true,
        Some("Running") => {
            str_at(object, "/spec/restartPolicy").unwrap_or("Always") == "Always"
                && condition(object, "Ready") == Some("True")
        }
        _ => false,
    }
}

/// Completed, and neither failed nor suspended.
fn job(object: &Value) -> bool {
    if condition(object, "Failed") == Some("True") || condition(object, "Suspended") == Some("True") {
        return false;
    }
    condition(object, "Complete") == Some("True")
}

/// Suspended (a state the user chose), running a job, or its last run succeeded.
fn cron_job(object: &Value) -> bool {
    if object.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true) {
        return true;
    }
    let Some(last_schedule) = str_at(object, "/status/lastScheduleTime") else {
        return false;
    };
    if object.pointer("/status/active").and_then(Value::as_array).is_some_and(|a| !a.is_empty()) {
        return true;
    }
    let Some(last_success) = str_at(object, "/status/lastSuccessfulTime") else {
        return false;
    };
    match (last_success.parse::<jiff::Timestamp>(), last_schedule.parse::<jiff::Timestamp>()) {
        (Ok(success), Ok(schedule)) => success >= schedule,
        _ => false,
    }
}

/// A load balancer Service once it has an address; any other Service at once.
fn service(object: &Value) -> bool {
    if str_at(object, "/spec/type").unwrap_or("ClusterIP") != "LoadBalancer" {
        return true;
    }
    has_load_balancer_ingress(object)
}

fn has_load_balancer_ingress(object: &Value) -> bool {
    object.pointer("/status/loadBalancer/ingress").and_then(Value::as_array).is_some_and(|a| !a.is_empty())
}

/// Scaling (actively or at a limit), and no failure to read scale or metrics.
fn horizontal_pod_autoscaler(object: &Value) -> bool {
    let failing = ["FailedGetScale", "FailedUpdateScale", "FailedGetResourceMetric", "InvalidSelector"];
    if failing.iter().any(|t| condition(object, t) == Some("True")) {
        return false;
    }
    condition(object, "ScalingActive") == Some("True") || condition(object, "ScalingLimited") == Some("True")
}
