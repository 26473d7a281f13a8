//! Crossplane's function protocol over gRPC: the wire messages, their conversion to and from
//! [`crate::protocol`] values, a client that calls a function served elsewhere, and a server
//! that serves any [`crate::Function`] to callers such as Crossplane.
//!
//! - `proto`: the messages and services generated from `proto/v1` (and its v1beta1 twin).
//! - [`convert`]: wire messages <-> protocol values, lossless both ways.
//! - [`client`]: [`GrpcFunction`], one HTTP/2 channel to one endpoint, with the v1 -> v1beta1
//!   fallback, Crossplane's call timeout and message limits.
//! - [`server`]: [`serve`], a function server speaking both package versions, with the SDKs'
//!   TLS layout.
//! - [`tls`]: oxplane's certificate authority and the certificate directories it writes.

pub mod client;
pub mod convert;
pub mod server;
pub mod tls;

pub use client::{ClientTls, FunctionEndpoint, GrpcFunction};
pub use server::{ServerTls, serve};

use prost::Message;
use sha2::{Digest, Sha256};

use crate::protocol::RunFunctionRequest;

/// The generated protocol messages and services.
#[allow(missing_docs, clippy::all, clippy::unwrap_used, clippy::expect_used)]
pub mod proto {
    /// `apiextensions.fn.proto.v1`.
    pub mod v1 {
        tonic::include_proto!("apiextensions.r#fn.proto.v1");
    }
    /// `apiextensions.fn.proto.v1beta1`: the same messages under the older package.
    pub mod v1beta1 {
        tonic::include_proto!("apiextensions.r#fn.proto.v1beta1");
    }
}

/// The largest message either side accepts: 4 MiB, gRPC's default receive limit that both
/// Crossplane and the function SDKs keep.
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// A request's `meta.tag` as Crossplane computes it: the hex SHA-256 of the request's
/// deterministic protobuf encoding (map entries sorted by key), without its `meta`. Identical
/// requests share a tag, which is what the response cache is keyed by.
pub fn tag(request: &RunFunctionRequest) -> String {
    let bytes = match convert::request_to_proto(request) {
        Ok(mut wire) => {
            wire.meta = None;
            wire.encode_to_vec()
        }
        // A request with no wire form (an input that is not an object) can never be sent;
        // any stable hash serves to tag it.
        Err(_) => {
            let mut clean = request.clone();
            clean.meta = Default::default();
            format!("{clean:?}").into_bytes()
        }
    };
    hex::encode(Sha256::digest(&bytes))
}

/// The wire message as its other package's twin: the v1 and v1beta1 messages are identical
/// field for field, so re-decoding the encoding is exact.
pub(crate) fn twin<A: Message, B: Message + Default>(message: &A) -> Result<B, prost::DecodeError> {
    B::decode(message.encode_to_vec().as_slice())
}
