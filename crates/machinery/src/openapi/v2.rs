//! `/openapi/v2`: an OpenAPI v2 document with no definitions.
//!
//! Everything kubectl validates against or explains is in `/openapi/v3`. kubectl reads v2 in one
//! case that matters: an object whose group-version v3 does not list (a kind nobody serves
//! yet, such as a composite applied before its XRD is established) is validated client-side
//! against v2. With v2 missing that fails as "the server could not find the requested
//! resource"; against a v2 document that does not define the kind, kubectl skips client-side
//! validation and reports what kube-apiserver users see: `no matches for kind ... ensure CRDs
//! are installed first`. Kinds that are served are still validated, by the server.
//!
//! kubectl asks for gnostic's `openapi_v2.Document` in protobuf; other clients get JSON.

use bytes::Bytes;
use prost::Message;
use serde_json::json;

/// The protobuf media type kubectl asks for (an older spelling with `@v1.0`, which is not a
/// valid media type, is accepted too).
pub const PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// Whether an `Accept` header asks for the protobuf document.
pub fn wants_protobuf(accept: &str) -> bool {
    accept.contains(PROTOBUF) || accept.contains("application/com.github.proto-openapi.spec.v2@v1.0+protobuf")
}

/// The fields of gnostic's `openapi_v2.Document` this server fills (their tags are gnostic's).
#[derive(Clone, PartialEq, Message)]
struct Document {
    #[prost(string, tag = "1")]
    swagger: String,
    #[prost(message, optional, tag = "2")]
    info: Option<Info>,
    #[prost(message, optional, tag = "8")]
    paths: Option<Paths>,
}

#[derive(Clone, PartialEq, Message)]
struct Info {
    #[prost(string, tag = "1")]
    title: String,
    #[prost(string, tag = "2")]
    version: String,
}

/// An empty `openapi_v2.Paths`.
#[derive(Clone, PartialEq, Message)]
struct Paths {}

/// The document in protobuf (`protobuf`) or JSON, with its content type.
pub fn document(version: &str, protobuf: bool) -> (Bytes, &'static str) {
    if protobuf {
        let document = Document {
            swagger: "2.0".into(),
            info: Some(Info { title: "oxplane".into(), version: version.into() }),
            paths: Some(Paths {}),
        };
        (Bytes::from(document.encode_to_vec()), PROTOBUF)
    } else {
        let document = json!({"swagger": "2.0", "info": {"title": "oxplane", "version": version}, "paths": {}});
        (Bytes::from(document.to_string()), "application/json")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protobuf_carries_the_swagger_version_info_and_empty_paths_under_gnostics_tags() {
        let (bytes, content_type) = document("v1.32.0", true);
        assert_eq!(content_type, PROTOBUF);
        let mut expected = vec![0x0a, 3];
        expected.extend_from_slice(b"2.0");
        expected.extend_from_slice(&[0x12, 18, 0x0a, 7]);
        expected.extend_from_slice(b"oxplane");
        expected.extend_from_slice(&[0x12, 7]);
        expected.extend_from_slice(b"v1.32.0");
        expected.extend_from_slice(&[0x42, 0]);
        assert_eq!(bytes.as_ref(), expected.as_slice());
    }

    #[test]
    fn both_spellings_of_the_protobuf_type_are_understood() {
        assert!(wants_protobuf("application/com.github.proto-openapi.spec.v2@v1.0+protobuf, application/json"));
        assert!(wants_protobuf(PROTOBUF));
        assert!(!wants_protobuf("application/json"));
    }

    #[test]
    fn json_for_other_clients() {
        let (bytes, content_type) = document("v1.32.0", false);
        assert_eq!(content_type, "application/json");
        let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(value["swagger"], "2.0");
        assert_eq!(value["paths"], json!({}));
    }
}
