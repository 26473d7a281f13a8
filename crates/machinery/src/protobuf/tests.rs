//! Tests for the protobuf codec: round trips, kubectl-shaped bodies, and hostile input.

use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::runtime::Unknown;
use prost::Message;
use serde_json::{Value, json};

use super::*;

// ---------------------------------------------------------------------------------------------
// A tiny independent protobuf writer, to build bodies byte by byte the way Go's encoder does.

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn field_bytes(out: &mut Vec<u8>, field: u64, bytes: &[u8]) {
    varint(out, (field << 3) | 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn field_varint(out: &mut Vec<u8>, field: u64, v: u64) {
    varint(out, field << 3);
    varint(out, v);
}

/// A map entry as Go writes it: key is field 1, value field 2.
fn map_entry(out: &mut Vec<u8>, field: u64, key: &str, value: &[u8]) {
    let mut entry = Vec::new();
    field_bytes(&mut entry, 1, key.as_bytes());
    field_bytes(&mut entry, 2, value);
    field_bytes(out, field, &entry);
}

/// `ObjectMeta` with only a name, exactly as gogo-protobuf writes it: every non-pointer field is
/// present with its zero value, and the zero `creationTimestamp` is an empty message.
fn go_object_meta(name: &str) -> Vec<u8> {
    let mut m = Vec::new();
    field_bytes(&mut m, 1, name.as_bytes()); // name
    for field in 2..=6 {
        field_bytes(&mut m, field, b""); // generateName, namespace, selfLink, uid, resourceVersion
    }
    field_varint(&mut m, 7, 0); // generation
    field_bytes(&mut m, 8, b""); // creationTimestamp (zero time)
    m
}

/// The `k8s\0` + `runtime.Unknown` envelope as Go's protobuf serializer writes it.
fn go_envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut type_meta = Vec::new();
    field_bytes(&mut type_meta, 1, api_version.as_bytes());
    field_bytes(&mut type_meta, 2, kind.as_bytes());
    let mut body = b"k8s\0".to_vec();
    field_bytes(&mut body, 1, &type_meta);
    field_bytes(&mut body, 2, raw);
    field_bytes(&mut body, 3, b""); // contentEncoding
    field_bytes(&mut body, 4, b""); // contentType
    body
}

fn envelope_with(unknown: &Unknown) -> Vec<u8> {
    let mut body = MAGIC.to_vec();
    body.extend_from_slice(&unknown.encode_to_vec());
    body
}

fn configmap_envelope(raw: Vec<u8>) -> Unknown {
    Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some("v1".into()),
            kind: Some("ConfigMap".into()),
        }),
        raw: Some(raw),
        content_encoding: None,
        content_type: None,
    }
}

// ---------------------------------------------------------------------------------------------
// Realistic objects of each kind, in canonical Kubernetes JSON.

fn metadata(name: &str, namespace: Option<&str>) -> Value {
    let mut m = json!({
        "name": name,
        "uid": "0b3a4f1e-6c1d-4a55-9d0e-8f2a7c1b2d3e",
        "resourceVersion": "12345",
        "generation": 3,
        "creationTimestamp": "2024-01-02T03:04:05Z",
        "labels": {"app": "web", "tier": "frontend"},
        "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"a\":1}\n"},
        "ownerReferences": [{
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": "web",
            "uid": "7d9e5c2b-1111-2222-3333-444455556666",
            "controller": true,
            "blockOwnerDeletion": false
        }],
        "finalizers": ["example.com/cleanup", "kubernetes"],
        "managedFields": [{
            "manager": "kubectl-create",
            "operation": "Update",
            "apiVersion": "v1",
            "time": "2024-01-02T03:04:05Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}
        }, {
            "manager": "kubelet",
            "operation": "Apply",
            "apiVersion": "v1",
            "time": "2024-02-03T04:05:06Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:status": {}},
            "subresource": "status"
        }]
    });
    if let (Some(ns), Some(obj)) = (namespace, m.as_object_mut()) {
        obj.insert("namespace".into(), json!(ns));
    }
    m
}

fn sample_objects() -> Vec<Value> {
    let mut deleting = metadata("doomed", None);
    if let Some(obj) = deleting.as_object_mut() {
        obj.insert("generateName".into(), json!("doomed-"));
        obj.insert("deletionTimestamp".into(), json!("2024-03-04T05:06:07Z"));
        obj.insert("deletionGracePeriodSeconds".into(), json!(0));
    }
    vec![
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": metadata("settings", Some("default")),
            "immutable": false,
            "data": {"a": "b", "config.yaml": "key: value\nlist:\n  - 1\n", "empty": ""},
            "binaryData": {"logo.png": "iVBORw0KGgo=", "zeros": "AAAA"}
        }),
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": metadata("creds", Some("prod")),
            "immutable": true,
            "data": {"binary": "/wD+gA==", "password": "aHVudGVyMg=="},
            "stringData": {"extra": "plain text"},
            "type": "Opaque"
        }),
        json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": deleting,
            "spec": {"finalizers": ["kubernetes"]},
            "status": {
                "phase": "Terminating",
                "conditions": [{
                    "type": "NamespaceDeletionContentFailure",
                    "status": "False",
                    "lastTransitionTime": "2024-03-04T05:06:08Z",
                    "reason": "ContentDeleted",
                    "message": "All content successfully deleted"
                }]
            }
        }),
        json!({
            "apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": metadata("builder", Some("ci")),
            "secrets": [{"kind": "Secret", "namespace": "ci", "name": "builder-token", "uid": "u-1",
                         "apiVersion": "v1", "resourceVersion": "9", "fieldPath": "data"}],
            "imagePullSecrets": [{"name": "registry"}, {}],
            "automountServiceAccountToken": false
        }),
        json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": metadata("web-1.17a1b2c3d4e5f607", Some("default")),
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web-1", "uid": "p-1",
                               "apiVersion": "v1", "resourceVersion": "77",
                               "fieldPath": "spec.containers{web}"},
            "reason": "Pulled",
            "message": "Successfully pulled image \"nginx\"",
            "source": {"component": "kubelet", "host": "node-1"},
            "firstTimestamp": "2024-01-02T03:04:05Z",
            "lastTimestamp": "2024-01-02T03:14:05Z",
            "count": 4,
            "type": "Normal",
            "eventTime": "2024-01-02T03:04:05.123456Z",
            "series": {"count": 3, "lastObservedTime": "2024-01-02T03:14:05.000001Z"},
            "action": "Pulling",
            "related": {"kind": "Node", "name": "node-1"},
            "reportingComponent": "kubelet",
            "reportingInstance": "node-1"
        }),
        json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": metadata("kube-scheduler", Some("kube-system")),
            "spec": {
                "holderIdentity": "node-1_2b5c",
                "leaseDurationSeconds": 15,
                "acquireTime": "2024-01-02T03:04:05.000000Z",
                "renewTime": "2024-01-02T03:04:20.654321Z",
                "leaseTransitions": 0,
                "strategy": "OldestEmulationVersion",
                "preferredHolder": ""
            }
        }),
        json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": metadata("web-1.17a1b2c3d4e5f608", Some("default")),
            "eventTime": "2024-01-02T03:04:05.999999Z",
            "series": {"count": 2, "lastObservedTime": "2024-01-02T03:05:05.500000Z"},
            "reportingController": "example.com/controller",
            "reportingInstance": "controller-0",
            "action": "Scale",
            "reason": "ScaledUp",
            "regarding": {"kind": "Deployment", "namespace": "default", "name": "web",
                          "apiVersion": "apps/v1"},
            "related": {"kind": "ReplicaSet", "name": "web-abc"},
            "note": "Scaled up replica set web-abc to 3",
            "type": "Normal",
            "deprecatedSource": {"component": "deployment-controller"},
            "deprecatedFirstTimestamp": "2024-01-02T03:04:05Z",
            "deprecatedLastTimestamp": "2024-01-02T03:05:05Z",
            "deprecatedCount": 2
        }),
        json!({
            "apiVersion": "meta.k8s.io/v1", "kind": "DeleteOptions",
            "gracePeriodSeconds": 0,
            "preconditions": {"uid": "0b3a4f1e", "resourceVersion": "12345"},
            "orphanDependents": false,
            "propagationPolicy": "Foreground",
            "dryRun": ["All"],
            "ignoreStoreReadErrorWithClusterBreakingPotential": true
        }),
    ]
}

#[test]
fn every_kind_round_trips() {
    for object in sample_objects() {
        let body = encode_object(&object).unwrap_or_else(|e| panic!("encode {object}: {e}"));
        assert!(body.starts_with(b"k8s\0"));
        let decoded = decode_object(&body).unwrap_or_else(|e| panic!("decode {object}: {e}"));
        assert_eq!(decoded, object);
    }
}

#[test]
fn minimal_objects_round_trip() {
    for object in [
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}, "spec": {}, "status": {}}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"generateName": "s-"}, "data": {"empty": ""}}),
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"}, "spec": {}}),
        json!({"apiVersion": "apps/v1", "kind": "DeleteOptions", "propagationPolicy": "Background"}),
        json!({"apiVersion": "v1", "kind": "DeleteOptions"}),
    ] {
        let body = encode_object(&object).unwrap_or_else(|e| panic!("encode {object}: {e}"));
        assert_eq!(decode_object(&body), Ok(object));
    }
}

#[test]
fn kubectl_create_configmap_body() {
    // kubectl create configmap x --from-literal=a=b
    let mut raw = Vec::new();
    field_bytes(&mut raw, 1, &go_object_meta("x"));
    map_entry(&mut raw, 2, "a", b"b");
    let body = go_envelope("v1", "ConfigMap", &raw);
    assert_eq!(
        decode_object(&body),
        Ok(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "b"}})
        )
    );
    // Our encoder produces a body that decodes identically.
    let ours = encode_object(
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "b"}}),
    );
    assert_eq!(ours.map(|b| decode_object(&b)), Ok(decode_object(&body)));
}

#[test]
fn kubectl_create_namespace_body() {
    // kubectl create namespace ns: spec and status are Go value structs, written as empty messages.
    let mut raw = Vec::new();
    field_bytes(&mut raw, 1, &go_object_meta("ns"));
    field_bytes(&mut raw, 2, b"");
    let mut status = Vec::new();
    field_bytes(&mut status, 1, b""); // phase ""
    field_bytes(&mut raw, 3, &status);
    assert_eq!(
        decode_object(&go_envelope("v1", "Namespace", &raw)),
        Ok(
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}, "spec": {}, "status": {}})
        )
    );
}

#[test]
fn kubectl_create_secret_and_serviceaccount_bodies() {
    // kubectl create secret generic s --from-file=k=<binary>
    let mut raw = Vec::new();
    field_bytes(&mut raw, 1, &go_object_meta("s"));
    map_entry(&mut raw, 2, "k", &[0xff, 0x00, 0xfe, 0x80]);
    field_bytes(&mut raw, 3, b""); // type ""
    assert_eq!(
        decode_object(&go_envelope("v1", "Secret", &raw)),
        Ok(
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"k": "/wD+gA=="}})
        )
    );

    // kubectl create serviceaccount sa
    let mut raw = Vec::new();
    field_bytes(&mut raw, 1, &go_object_meta("sa"));
    assert_eq!(
        decode_object(&go_envelope("v1", "ServiceAccount", &raw)),
        Ok(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa"}}))
    );
}

#[test]
fn go_zero_values_are_omitted_but_pointers_are_kept() {
    // core/v1 Event as Go writes it with mostly empty fields.
    let mut reference = Vec::new();
    for field in 1..=7 {
        field_bytes(&mut reference, field, b"");
    }
    let mut raw = Vec::new();
    field_bytes(&mut raw, 1, &go_object_meta("e"));
    field_bytes(&mut raw, 2, &reference); // involvedObject, all strings empty
    field_bytes(&mut raw, 3, b"Started"); // reason
    field_bytes(&mut raw, 4, b""); // message
    field_bytes(&mut raw, 5, b""); // source {}
    field_bytes(&mut raw, 6, b""); // firstTimestamp: zero
    field_bytes(&mut raw, 7, &[0x08, 0x00, 0x10, 0x00]); // lastTimestamp: the Unix epoch
    field_varint(&mut raw, 8, 0); // count
    field_bytes(&mut raw, 10, b""); // eventTime: zero
    field_bytes(&mut raw, 14, b""); // reportingComponent
    assert_eq!(
        decode_object(&go_envelope("v1", "Event", &raw)),
        Ok(json!({
            "apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"},
            "involvedObject": {}, "reason": "Started", "source": {},
            "lastTimestamp": "1970-01-01T00:00:00Z"
        }))
    );

    // Lease spec fields are pointers: present zero values are emitted.
    let mut spec = Vec::new();
    field_bytes(&mut spec, 1, b"");
    field_varint(&mut spec, 2, 0);
    field_varint(&mut spec, 5, 0);
    let mut raw = Vec::new();
    field_bytes(&mut raw, 2, &spec);
    assert_eq!(
        decode_object(&go_envelope("coordination.k8s.io/v1", "Lease", &raw)),
        Ok(json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "spec": {"holderIdentity": "", "leaseDurationSeconds": 0, "leaseTransitions": 0}
        }))
    );
}

#[test]
fn encoded_values_match_protobuf_fields() {
    let body = encode_object(&sample_objects()[1]).unwrap_or_default();
    let envelope = Unknown::decode(&body[4..]).unwrap_or_default();
    assert_eq!(envelope.content_type.as_deref(), Some(""));
    let secret =
        core::Secret::decode(envelope.raw.unwrap_or_default().as_slice()).unwrap_or_default();
    assert_eq!(
        secret.data.get("binary"),
        Some(&vec![0xff, 0x00, 0xfe, 0x80])
    );
    assert_eq!(
        secret.data.get("password").map(Vec::as_slice),
        Some(b"hunter2".as_slice())
    );
    let meta = secret.metadata.unwrap_or_default();
    let created = meta.creation_timestamp.unwrap_or_default();
    assert_eq!(created.seconds, Some(1_704_164_645));
    let fields = meta.managed_fields[0]
        .fields_v1
        .clone()
        .unwrap_or_default()
        .raw
        .unwrap_or_default();
    assert_eq!(
        serde_json::from_slice::<Value>(&fields).ok(),
        Some(json!({"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}))
    );
}

#[test]
fn unusual_envelopes() {
    // No raw at all: an empty object.
    let mut unknown = configmap_envelope(Vec::new());
    unknown.raw = None;
    assert_eq!(
        decode_object(&envelope_with(&unknown)),
        Ok(json!({"apiVersion": "v1", "kind": "ConfigMap"}))
    );
    // An explicit protobuf content type is fine.
    unknown.content_type = Some(format!("{MEDIA_TYPE}; charset=binary"));
    assert!(decode_object(&envelope_with(&unknown)).is_ok());
    // Unknown fields (from newer Kubernetes versions) are skipped.
    let mut raw = Vec::new();
    field_bytes(&mut raw, 99, b"future");
    field_varint(&mut raw, 100, 7);
    map_entry(&mut raw, 2, "a", b"b");
    assert_eq!(
        decode_object(&envelope_with(&configmap_envelope(raw))),
        Ok(json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "b"}}))
    );
}

// ---------------------------------------------------------------------------------------------
// Errors.

#[test]
fn bad_magic() {
    for body in [
        &b""[..],
        b"k8s",
        b"k8s\x01\x0a\x00",
        b"{\"kind\":\"ConfigMap\"}",
        b"K8S\0",
    ] {
        assert_eq!(
            decode_object(body),
            Err(ProtobufError::BadMagic),
            "{body:?}"
        );
    }
}

#[test]
fn garbage_after_magic() {
    for garbage in [
        &b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"[..],
        b"\x0a\xff\xff\xff\xff\x0f",
        b"\x07",
        b"\x0a\x05ab",
    ] {
        let mut body = MAGIC.to_vec();
        body.extend_from_slice(garbage);
        assert!(
            matches!(decode_object(&body), Err(ProtobufError::Envelope(_))),
            "{garbage:?}"
        );
    }
    // Magic alone is an empty envelope: no kind.
    assert_eq!(decode_object(MAGIC), Err(ProtobufError::MissingKind));
}

#[test]
fn truncated_bodies_fail() {
    let body = encode_object(&sample_objects()[0]).unwrap_or_default();
    let raw_end = body.len() - 4; // the envelope ends with contentEncoding "" and contentType ""
    let type_meta_end = MAGIC.len() + 2 + usize::from(body[5]);
    assert!(body.len() > 100);
    let mut decoded = 0;
    for len in 0..body.len() {
        match decode_object(&body[..len]) {
            Ok(_) => decoded += 1,
            // Any cut inside the raw object (which ends 4 bytes before the end) is an error.
            Err(_) => continue,
        }
        assert!(
            len >= raw_end || len == type_meta_end,
            "prefix of length {len} decoded"
        );
    }
    // Only cuts exactly between envelope fields decode: after typeMeta, raw and contentEncoding.
    assert_eq!(decoded, 3);
}

#[test]
fn unsupported_kinds() {
    let err = decode_object(&go_envelope("apps/v1", "Deployment", b"")).err();
    assert_eq!(
        err,
        Some(ProtobufError::UnsupportedKind {
            api_version: "apps/v1".into(),
            kind: "Deployment".into()
        })
    );
    let message = err.map(|e| e.to_string()).unwrap_or_default();
    assert!(
        message.contains("\"Deployment\"") && message.contains("application/json"),
        "{message}"
    );
    // Right kind, wrong group version.
    assert!(matches!(
        decode_object(&go_envelope("coordination.k8s.io/v1beta1", "Lease", b"")),
        Err(ProtobufError::UnsupportedKind { .. })
    ));
    assert!(matches!(
        encode_object(&json!({"apiVersion": "v1", "kind": "Pod"})),
        Err(ProtobufError::UnsupportedKind { .. })
    ));
}

#[test]
fn raw_that_is_not_a_valid_message() {
    for raw in [
        vec![0x0a, 0x10, 0x01],                   // metadata longer than the input
        vec![0xff],                               // truncated varint tag
        vec![0x0a, 0x02, 0x0a, 0x01],             // name longer than metadata
        vec![0x0a, 0x03, 0x0a, 0x01, 0xff],       // name is not UTF-8
        vec![0x08, 0x01],                         // metadata with the varint wire type
        vec![0x13, 0x0a],                         // unterminated group
        vec![0x12, 0x04, 0x0a, 0x02, 0xc3, 0x28], // data key not UTF-8
    ] {
        let result = decode_object(&go_envelope("v1", "ConfigMap", &raw));
        match result {
            Err(ProtobufError::Decode { kind, detail }) => {
                assert_eq!(kind, "ConfigMap");
                assert!(!detail.is_empty());
            }
            other => panic!("{raw:?}: {other:?}"),
        }
    }
}

#[test]
fn invalid_contents_after_decoding() {
    // FieldsV1 that is not JSON.
    let mut fields_v1 = Vec::new();
    field_bytes(&mut fields_v1, 1, b"{not json");
    let mut entry = Vec::new();
    field_bytes(&mut entry, 7, &fields_v1);
    let mut meta = Vec::new();
    field_bytes(&mut meta, 17, &entry);
    let mut raw = Vec::new();
    field_bytes(&mut raw, 1, &meta);
    let err = decode_object(&go_envelope("v1", "Secret", &raw))
        .err()
        .map(|e| e.to_string());
    assert!(
        err.as_deref()
            .is_some_and(|e| e.contains("metadata.managedFields[0].fieldsV1: invalid JSON")),
        "{err:?}"
    );

    // A creationTimestamp far outside the representable range.
    let mut time = Vec::new();
    field_varint(&mut time, 1, i64::MAX as u64);
    let mut meta = Vec::new();
    field_bytes(&mut meta, 8, &time);
    let mut raw = Vec::new();
    field_bytes(&mut raw, 1, &meta);
    let err = decode_object(&go_envelope("v1", "ConfigMap", &raw))
        .err()
        .map(|e| e.to_string());
    assert!(
        err.as_deref()
            .is_some_and(|e| e.contains("metadata.creationTimestamp: time out of range")),
        "{err:?}"
    );

    // Compressed or non-protobuf payloads.
    let mut unknown = configmap_envelope(Vec::new());
    unknown.content_encoding = Some("gzip".into());
    assert_eq!(
        decode_object(&envelope_with(&unknown)),
        Err(ProtobufError::UnsupportedContentEncoding("gzip".into()))
    );
    let mut unknown = configmap_envelope(b"{}".to_vec());
    unknown.content_type = Some("application/json".into());
    assert_eq!(
        decode_object(&envelope_with(&unknown)),
        Err(ProtobufError::UnsupportedContentType(
            "application/json".into()
        ))
    );
    // No kind.
    let mut unknown = configmap_envelope(Vec::new());
    unknown.type_meta = None;
    assert_eq!(
        decode_object(&envelope_with(&unknown)),
        Err(ProtobufError::MissingKind)
    );
}

#[test]
fn encode_rejects_invalid_objects() {
    assert!(matches!(
        encode_object(&json!([1])),
        Err(ProtobufError::InvalidObject(_))
    ));
    assert!(matches!(
        encode_object(&json!({"kind": "ConfigMap"})),
        Err(ProtobufError::InvalidObject(_))
    ));
    assert!(matches!(
        encode_object(&json!({"apiVersion": "v1", "kind": 3})),
        Err(ProtobufError::InvalidObject(_))
    ));
    let cases = [
        (
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"labels": {"a": 1}}}),
            "metadata.labels.a: expected a string",
        ),
        (
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": "x"}),
            "metadata: expected an object",
        ),
        (
            json!({"apiVersion": "v1", "kind": "Secret", "data": {"k": "not base64!"}}),
            "data.k: invalid base64",
        ),
        (
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"generation": 1.5}}),
            "metadata.generation: expected a 64-bit integer",
        ),
        (
            json!({"apiVersion": "v1", "kind": "Event", "count": 4_294_967_296_u64}),
            "count: expected a 32-bit integer",
        ),
        (
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"creationTimestamp": "today"}}),
            "metadata.creationTimestamp: invalid RFC 3339 time",
        ),
        (
            json!({"apiVersion": "v1", "kind": "Namespace", "spec": {"finalizers": ["a", 2]}}),
            "spec.finalizers[1]: expected a string",
        ),
        (
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "secrets": [{"name": "a"}, 5]}),
            "secrets[1]: expected an object",
        ),
        (
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "automountServiceAccountToken": "yes"}),
            "automountServiceAccountToken: expected a boolean",
        ),
        (
            json!({"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": 1}}),
            "preconditions.uid: expected a string",
        ),
    ];
    for (object, expected) in cases {
        match encode_object(&object) {
            Err(ProtobufError::Encode { detail, .. }) => {
                assert!(detail.starts_with(expected), "{detail}")
            }
            other => panic!("{object}: {other:?}"),
        }
    }
}

#[test]
fn encode_accepts_nulls_and_drops_unknown_fields() {
    let object = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "x", "creationTimestamp": null, "labels": null},
        "data": {"a": "b"},
        "status": {"whatever": true}
    });
    let decoded = encode_object(&object).and_then(|b| decode_object(&b));
    assert_eq!(
        decoded,
        Ok(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "b"}})
        )
    );
}

// ---------------------------------------------------------------------------------------------
// Hostile input: random and mutated bodies must never panic.

/// A small deterministic xorshift generator (no extra dev-dependency needed).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn random_bodies_never_panic() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for i in 0..20_000 {
        let len = rng.below(64);
        let mut body: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        if i % 2 == 0 {
            body.splice(0..0, MAGIC.iter().copied());
        }
        let _ = decode_object(&body);
    }
}

#[test]
fn mutated_bodies_never_panic() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let bodies: Vec<Vec<u8>> = sample_objects()
        .iter()
        .filter_map(|o| encode_object(o).ok())
        .chain([go_envelope("v1", "ConfigMap", &go_object_meta("x"))])
        .collect();
    assert_eq!(bodies.len(), sample_objects().len() + 1);
    for body in &bodies {
        // Every single-byte replacement with a few interesting values.
        for pos in MAGIC.len()..body.len() {
            for byte in [0x00, 0x01, 0x7f, 0x80, 0xff, body[pos] ^ 0x08] {
                let mut mutated = body.clone();
                mutated[pos] = byte;
                let _ = decode_object(&mutated);
            }
        }
        // Random multi-byte mutations, insertions and deletions.
        for _ in 0..2_000 {
            let mut mutated = body.clone();
            for _ in 0..1 + rng.below(4) {
                let pos = MAGIC.len() + rng.below(mutated.len() - MAGIC.len());
                match rng.below(3) {
                    0 => mutated[pos] = rng.next() as u8,
                    1 => mutated.insert(pos, rng.next() as u8),
                    _ => {
                        mutated.remove(pos);
                    }
                }
                if mutated.len() <= MAGIC.len() {
                    break;
                }
            }
            let _ = decode_object(&mutated);
        }
    }
}

#[test]
fn huge_declared_lengths_are_rejected() {
    // typeMeta claiming 2^62 bytes, and raw claiming 2 GiB, in tiny bodies.
    let mut body = MAGIC.to_vec();
    varint(&mut body, (1 << 3) | 2);
    varint(&mut body, 1 << 62);
    assert!(matches!(
        decode_object(&body),
        Err(ProtobufError::Envelope(_))
    ));

    let mut body = MAGIC.to_vec();
    let mut type_meta = Vec::new();
    field_bytes(&mut type_meta, 2, b"ConfigMap");
    field_bytes(&mut body, 1, &type_meta);
    varint(&mut body, (2 << 3) | 2);
    varint(&mut body, 1 << 31);
    assert!(matches!(
        decode_object(&body),
        Err(ProtobufError::Envelope(_))
    ));

    // Inside raw: a data map entry claiming a 1 GiB value.
    let mut raw = Vec::new();
    varint(&mut raw, (2 << 3) | 2);
    varint(&mut raw, 1 << 30);
    assert!(matches!(
        decode_object(&go_envelope("v1", "ConfigMap", &raw)),
        Err(ProtobufError::Decode { .. })
    ));
}

#[test]
fn access_control_kinds_round_trip() {
    let objects = [
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "r", "namespace": "a"},
            "rules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["settings"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "system:x"},
            "rules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}],
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"a": "true"}, "matchExpressions": [{"key": "b", "operator": "In", "values": ["c"]}]}]}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "rb", "namespace": "a"},
            "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"}, {"kind": "ServiceAccount", "name": "robot", "namespace": "a"}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "crb"},
            "subjects": [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "app-team"}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}}),
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "metadata": {},
            "spec": {"resourceAttributes": {"namespace": "a", "verb": "create", "resource": "configmaps"}}}),
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "metadata": {},
            "spec": {"nonResourceAttributes": {"path": "/metrics", "verb": "get"}, "user": "alice", "groups": ["g"], "extra": {"k": ["v"]}}}),
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "LocalSubjectAccessReview", "metadata": {"namespace": "a"},
            "spec": {"resourceAttributes": {"verb": "get", "resource": "secrets", "name": "s"}, "user": "bob"}}),
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "metadata": {}, "spec": {"namespace": "a"}}),
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "metadata": {"name": "robot", "namespace": "a"},
            "spec": {"audiences": ["https://example.org"], "expirationSeconds": 600}}),
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "metadata": {}, "spec": {"token": "t", "audiences": ["x"]}}),
    ];
    for object in objects {
        let body = encode_object(&object).unwrap();
        assert_eq!(decode_object(&body).unwrap(), object);
    }
}
