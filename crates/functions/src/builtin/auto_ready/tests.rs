#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};

use super::{is_healthy, run};
use crate::protocol::{Ready, Resource, RunFunctionRequest, Severity, State};

fn obj(api_version: &str, kind: &str, rest: Value) -> Value {
    let mut v = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "x", "generation": 2}});
    if let (Value::Object(map), Value::Object(rest)) = (&mut v, rest) {
        map.extend(rest);
    }
    v
}

fn conditions(list: &[(&str, &str)]) -> Value {
    Value::Array(list.iter().map(|(t, s)| json!({"type": t, "status": s})).collect())
}

#[test]
fn deployment() {
    let healthy = obj(
        "apps/v1",
        "Deployment",
        json!({"spec": {"replicas": 3}, "status": {
        "observedGeneration": 2, "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3, "availableReplicas": 3,
        "conditions": conditions(&[("Available", "True"), ("Progressing", "True")])}}),
    );
    assert!(is_healthy(&healthy));
    let rolling = obj(
        "apps/v1",
        "Deployment",
        json!({"spec": {"replicas": 3}, "status": {
        "observedGeneration": 2, "updatedReplicas": 1, "availableReplicas": 3,
        "conditions": conditions(&[("Available", "True")])}}),
    );
    assert!(!is_healthy(&rolling));
    let unavailable = obj(
        "apps/v1",
        "Deployment",
        json!({"spec": {"replicas": 1}, "status": {
        "observedGeneration": 2, "updatedReplicas": 1, "availableReplicas": 1,
        "conditions": conditions(&[("Available", "False")])}}),
    );
    assert!(!is_healthy(&unavailable));
    let stale = obj(
        "apps/v1",
        "Deployment",
        json!({"spec": {"replicas": 1}, "status": {
        "observedGeneration": 1, "updatedReplicas": 1, "availableReplicas": 1,
        "conditions": conditions(&[("Available", "True")])}}),
    );
    assert!(!is_healthy(&stale));
    // Scaled to zero: Kubernetes leaves the zero counters out.
    let zero = obj(
        "apps/v1",
        "Deployment",
        json!({"spec": {"replicas": 0}, "status": {
        "observedGeneration": 2, "conditions": conditions(&[("Available", "True")])}}),
    );
    assert!(is_healthy(&zero));
    // spec.replicas defaults to 1; counters may arrive as float64.
    let defaulted = obj(
        "apps/v1",
        "Deployment",
        json!({"spec": {}, "status": {
        "observedGeneration": 2.0, "updatedReplicas": 1.0, "availableReplicas": 1.0,
        "conditions": conditions(&[("Available", "True")])}}),
    );
    assert!(is_healthy(&defaulted));
    assert!(!is_healthy(&obj("apps/v1", "Deployment", json!({"spec": {"replicas": 1}}))));
}

#[test]
fn stateful_set() {
    let healthy = obj(
        "apps/v1",
        "StatefulSet",
        json!({"spec": {"replicas": 2}, "status": {
        "observedGeneration": 2, "replicas": 2, "readyReplicas": 2, "currentReplicas": 2,
        "currentRevision": "web-1", "updateRevision": "web-1"}}),
    );
    assert!(is_healthy(&healthy));
    let updating = obj(
        "apps/v1",
        "StatefulSet",
        json!({"spec": {"replicas": 2}, "status": {
        "observedGeneration": 2, "replicas": 2, "readyReplicas": 2, "currentReplicas": 2,
        "currentRevision": "web-1", "updateRevision": "web-2"}}),
    );
    assert!(!is_healthy(&updating));
    let not_ready = obj(
        "apps/v1",
        "StatefulSet",
        json!({"spec": {"replicas": 2}, "status": {
        "observedGeneration": 2, "replicas": 2, "readyReplicas": 1, "currentReplicas": 2,
        "currentRevision": "web-1", "updateRevision": "web-1"}}),
    );
    assert!(!is_healthy(&not_ready));
    assert!(!is_healthy(&obj("apps/v1", "StatefulSet", json!({"spec": {"replicas": 0}}))));
}

#[test]
fn daemon_set() {
    let healthy = obj(
        "apps/v1",
        "DaemonSet",
        json!({"status": {"observedGeneration": 2,
        "desiredNumberScheduled": 3, "numberReady": 3, "updatedNumberScheduled": 3, "numberAvailable": 3}}),
    );
    assert!(is_healthy(&healthy));
    let partial = obj(
        "apps/v1",
        "DaemonSet",
        json!({"status": {"observedGeneration": 2,
        "desiredNumberScheduled": 3, "numberReady": 2, "updatedNumberScheduled": 3, "numberAvailable": 2}}),
    );
    assert!(!is_healthy(&partial));
    assert!(!is_healthy(&obj("apps/v1", "DaemonSet", json!({}))));
}

#[test]
fn replica_set() {
    let healthy = obj(
        "apps/v1",
        "ReplicaSet",
        json!({"spec": {"replicas": 2}, "status": {"observedGeneration": 2, "availableReplicas": 2}}),
    );
    assert!(is_healthy(&healthy));
    let short = obj(
        "apps/v1",
        "ReplicaSet",
        json!({"spec": {"replicas": 2}, "status": {"observedGeneration": 2, "availableReplicas": 1}}),
    );
    assert!(!is_healthy(&short));
    let failing = obj(
        "apps/v1",
        "ReplicaSet",
        json!({"spec": {"replicas": 0}, "status": {"observedGeneration": 2,
        "conditions": conditions(&[("ReplicaFailure", "True")])}}),
    );
    assert!(!is_healthy(&failing));
}

#[test]
fn pod() {
    let running_ready = obj(
        "v1",
        "Pod",
        json!({"spec": {"restartPolicy": "Always"}, "status": {"phase": "Running",
        "conditions": conditions(&[("Ready", "True")])}}),
    );
    assert!(is_healthy(&running_ready));
    let running_not_ready = obj(
        "v1",
        "Pod",
        json!({"spec": {}, "status": {"phase": "Running",
        "conditions": conditions(&[("Ready", "False")])}}),
    );
    assert!(!is_healthy(&running_not_ready));
    // A run-to-completion pod is healthy when it has succeeded, not while running.
    let job_pod = obj(
        "v1",
        "Pod",
        json!({"spec": {"restartPolicy": "Never"}, "status": {"phase": "Running",
        "conditions": conditions(&[("Ready", "True")])}}),
    );
    assert!(!is_healthy(&job_pod));
    assert!(is_healthy(&obj("v1", "Pod", json!({"status": {"phase": "Succeeded"}}))));
    assert!(!is_healthy(&obj("v1", "Pod", json!({"status": {"phase": "Pending"}}))));
    assert!(!is_healthy(&obj("v1", "Pod", json!({"status": {"phase": "Failed"}}))));
}

#[test]
fn job_and_cron_job() {
    assert!(is_healthy(&obj(
        "batch/v1",
        "Job",
        json!({"status": {"conditions": conditions(&[("Complete", "True")])}})
    )));
    assert!(!is_healthy(&obj("batch/v1", "Job", json!({"status": {"active": 1}}))));
    assert!(!is_healthy(&obj(
        "batch/v1",
        "Job",
        json!({"status": {"conditions": conditions(&[("Failed", "True")])}})
    )));
    assert!(!is_healthy(&obj(
        "batch/v1",
        "Job",
        json!({"status": {"conditions": conditions(&[("Suspended", "True")])}})
    )));

    let cron =
        |spec: Value, status: Value| obj("batch/v1", "CronJob", json!({"spec": spec, "status": status}));
    assert!(is_healthy(&cron(json!({"suspend": true}), json!({}))));
    assert!(!is_healthy(&cron(json!({}), json!({}))));
    assert!(is_healthy(&cron(
        json!({}),
        json!({"lastScheduleTime": "2026-01-01T00:00:00Z", "active": [{"name": "j"}]})
    )));
    assert!(is_healthy(&cron(
        json!({}),
        json!({"lastScheduleTime": "2026-01-01T00:00:00Z", "lastSuccessfulTime": "2026-01-01T00:00:30Z"})
    )));
    assert!(is_healthy(&cron(
        json!({}),
        json!({"lastScheduleTime": "2026-01-01T00:00:00Z", "lastSuccessfulTime": "2026-01-01T00:00:00Z"})
    )));
    // The last run has not succeeded (it failed, or is not done and not active).
    assert!(!is_healthy(&cron(
        json!({}),
        json!({"lastScheduleTime": "2026-01-02T00:00:00Z", "lastSuccessfulTime": "2026-01-01T00:00:30Z"})
    )));
    assert!(!is_healthy(&cron(json!({}), json!({"lastScheduleTime": "2026-01-01T00:00:00Z"}))));
}

#[test]
fn service_and_ingress() {
    assert!(is_healthy(&obj("v1", "Service", json!({"spec": {"type": "ClusterIP"}}))));
    assert!(is_healthy(&obj("v1", "Service", json!({"spec": {}}))));
    assert!(!is_healthy(&obj(
        "v1",
        "Service",
        json!({"spec": {"type": "LoadBalancer"}, "status": {"loadBalancer": {}}})
    )));
    assert!(is_healthy(&obj(
        "v1",
        "Service",
        json!({"spec": {"type": "LoadBalancer"},
        "status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}]}}})
    )));
    assert!(!is_healthy(&obj(
        "networking.k8s.io/v1",
        "Ingress",
        json!({"status": {"loadBalancer": {"ingress": []}}})
    )));
    assert!(is_healthy(&obj(
        "networking.k8s.io/v1",
        "Ingress",
        json!({"status": {"loadBalancer": {"ingress": [{"hostname": "lb"}]}}})
    )));
}

#[test]
fn pvc_hpa_and_status_less_kinds() {
    assert!(is_healthy(&obj("v1", "PersistentVolumeClaim", json!({"status": {"phase": "Bound"}}))));
    assert!(!is_healthy(&obj("v1", "PersistentVolumeClaim", json!({"status": {"phase": "Pending"}}))));
    assert!(!is_healthy(&obj("v1", "PersistentVolumeClaim", json!({"status": {"phase": "Lost"}}))));

    let hpa = |c: &[(&str, &str)]| {
        obj("autoscaling/v2", "HorizontalPodAutoscaler", json!({"status": {"conditions": conditions(c)}}))
    };
    assert!(is_healthy(&hpa(&[("AbleToScale", "True"), ("ScalingActive", "True")])));
    assert!(is_healthy(&hpa(&[("ScalingLimited", "True")])));
    assert!(!is_healthy(&hpa(&[("ScalingActive", "True"), ("FailedGetResourceMetric", "True")])));
    assert!(!is_healthy(&hpa(&[("AbleToScale", "True")])));

    assert!(is_healthy(&obj("v1", "Namespace", json!({"status": {"phase": "Active"}}))));
    assert!(!is_healthy(&obj("v1", "Namespace", json!({"status": {"phase": "Terminating"}}))));
    for kind in ["ServiceAccount", "Secret", "ConfigMap"] {
        assert!(is_healthy(&obj("v1", kind, json!({}))), "{kind}");
    }
}

#[test]
fn other_kinds_use_the_ready_condition() {
    let mr = |status: &str| {
        obj(
            "nop.crossplane.io/v1alpha1",
            "NopResource",
            json!({"status": {"conditions": conditions(&[("Synced", "True"), ("Ready", status)])}}),
        )
    };
    assert!(is_healthy(&mr("True")));
    assert!(!is_healthy(&mr("False")));
    assert!(!is_healthy(&obj("nop.crossplane.io/v1alpha1", "NopResource", json!({}))));
    // A standard kind under another API version is judged like any other kind.
    let hpa_v1 = obj(
        "autoscaling/v1",
        "HorizontalPodAutoscaler",
        json!({"status": {"conditions": conditions(&[("ScalingActive", "True")])}}),
    );
    assert!(!is_healthy(&hpa_v1));
}

fn resource(value: Value, ready: Ready) -> Resource {
    Resource { resource: value, ready, ..Default::default() }
}

fn ready_mr() -> Value {
    obj(
        "nop.crossplane.io/v1alpha1",
        "NopResource",
        json!({"status": {"conditions": conditions(&[("Ready", "True")])}}),
    )
}

fn unready_mr() -> Value {
    obj(
        "nop.crossplane.io/v1alpha1",
        "NopResource",
        json!({"status": {"conditions": conditions(&[("Ready", "False")])}}),
    )
}

#[test]
fn marks_only_observed_unspecified_resources_and_never_sets_false() {
    let desired = BTreeMap::from([
        ("ready".to_string(), resource(json!({"kind": "NopResource"}), Ready::Unspecified)),
        ("unready".to_string(), resource(json!({"kind": "NopResource"}), Ready::Unspecified)),
        ("not-observed".to_string(), resource(json!({"kind": "NopResource"}), Ready::Unspecified)),
        ("decided-false".to_string(), resource(json!({"kind": "NopResource"}), Ready::False)),
        ("deployment".to_string(), resource(json!({"kind": "Deployment"}), Ready::Unspecified)),
    ]);
    let observed = BTreeMap::from([
        ("ready".to_string(), resource(ready_mr(), Ready::Unspecified)),
        ("unready".to_string(), resource(unready_mr(), Ready::Unspecified)),
        ("decided-false".to_string(), resource(ready_mr(), Ready::Unspecified)),
        (
            "deployment".to_string(),
            resource(
                obj(
                    "apps/v1",
                    "Deployment",
                    json!({"spec": {"replicas": 1}, "status": {"observedGeneration": 2,
                    "updatedReplicas": 1, "availableReplicas": 1, "conditions": conditions(&[("Available", "True")])}}),
                ),
                Ready::Unspecified,
            ),
        ),
    ]);
    let request = RunFunctionRequest {
        observed: State {
            composite: Some(resource(json!({"kind": "XR"}), Ready::Unspecified)),
            resources: observed,
        },
        desired: State { composite: None, resources: desired },
        ..Default::default()
    };
    let rsp = run(&request);
    assert!(rsp.results.is_empty());
    let ready_of = |name: &str| rsp.desired.resources[name].ready;
    assert_eq!(ready_of("ready"), Ready::True);
    assert_eq!(ready_of("unready"), Ready::Unspecified);
    assert_eq!(ready_of("not-observed"), Ready::Unspecified);
    // An earlier step's opinion stands, even when the resource looks ready.
    assert_eq!(ready_of("decided-false"), Ready::False);
    assert_eq!(ready_of("deployment"), Ready::True);
    // The resources themselves pass through untouched.
    for (name, r) in &request.desired.resources {
        assert_eq!(rsp.desired.resources[name].resource, r.resource);
    }
    assert_eq!(rsp.meta.ttl, Some(Duration::from_secs(60)));
}

#[test]
fn input_ttl() {
    let mut request = RunFunctionRequest {
        input: Some(
            json!({"apiVersion": "autoready.fn.crossplane.io/v1beta1", "kind": "Input", "ttl": "2m30s"}),
        ),
        ..Default::default()
    };
    assert_eq!(run(&request).meta.ttl, Some(Duration::from_secs(150)));
    request.input = Some(json!({"apiVersion": "autoready.fn.crossplane.io/v1beta1", "kind": "Input"}));
    assert_eq!(run(&request).meta.ttl, Some(Duration::from_secs(60)));
    request.input = Some(json!({"ttl": "soon"}));
    let rsp = run(&request);
    assert_eq!(rsp.results.len(), 1);
    assert_eq!(rsp.results[0].severity, Severity::Fatal);
    assert_eq!(
        rsp.results[0].message,
        "invalid Function input: cannot parse ttl: time: invalid duration \"soon\""
    );
    // CEL customisation is accepted and ignored.
    request.input = Some(json!({"celHealthCheckCustomization": {"example.org/v1, Kind=Thing": "true"}}));
    assert!(run(&request).results.is_empty());
}
