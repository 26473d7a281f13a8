//! Calling a function served over gRPC.
//!
//! A [`GrpcFunction`] owns one HTTP/2 channel to one endpoint; every call multiplexes over it
//! (the channel connects on first use and reconnects by itself after a failure). A call first
//! speaks `apiextensions.fn.proto.v1` and, when the function answers `Unimplemented`, repeats
//! itself in `v1beta1`, as Crossplane does for functions built before v1 existed.

use std::fmt;
use std::time::Duration;

use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};
use tonic::{Code, Status};

use super::proto::{v1, v1beta1};
use super::{MAX_MESSAGE_BYTES, convert, twin};
use crate::protocol::{Function, FunctionError, RunFunctionRequest, RunFunctionResponse};

/// How long one call may take: Crossplane's `runFunctionTimeout`.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// How long establishing a connection may take: Crossplane's `dialFunctionTimeout`.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where a function is served and how to reach it.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct FunctionEndpoint {
    /// `HOST:PORT` (a `dns:///` prefix, as Crossplane writes endpoints, is accepted).
    pub address: String,
    /// Mutual TLS; `None` speaks plain-text gRPC.
    pub tls: Option<ClientTls>,
}

impl FunctionEndpoint {
    /// A plain-text endpoint.
    pub fn insecure(address: impl Into<String>) -> Self {
        FunctionEndpoint { address: address.into(), tls: None }
    }

    /// The endpoint as `status.endpoint` shows it.
    pub fn display_address(&self) -> String {
        host_port(&self.address).to_string()
    }
}

impl fmt::Debug for FunctionEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FunctionEndpoint").field("address", &self.address).field("tls", &self.tls.is_some()).finish()
    }
}

/// The client side of mutual TLS: whom to trust and who we are.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ClientTls {
    /// PEM of the certificate authority the function's server certificate must chain to.
    pub ca_pem: String,
    /// PEM of our client certificate.
    pub cert_pem: String,
    /// PEM of our client certificate's private key.
    pub key_pem: String,
    /// The name the function's certificate must carry (default: the endpoint's host).
    pub server_name: Option<String>,
}

/// A function reached over gRPC.
pub struct GrpcFunction {
    name: String,
    endpoint: FunctionEndpoint,
    channel: Channel,
    connector: Endpoint,
    timeout: Duration,
}

impl GrpcFunction {
    /// A client of the function `name` (used in messages) at `endpoint`. No connection is made
    /// until the first call.
    pub fn new(name: &str, endpoint: FunctionEndpoint, timeout: Duration) -> Result<Self, FunctionError> {
        let address = host_port(&endpoint.address);
        let scheme = if endpoint.tls.is_some() { "https" } else { "http" };
        let mut builder = Endpoint::from_shared(format!("{scheme}://{address}"))
            .map_err(|e| FunctionError::Unavailable(format!("invalid endpoint {address:?}: {e}")))?
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_nodelay(true)
            .http2_keep_alive_interval(Duration::from_secs(30))
            .keep_alive_while_idle(true);
        if let Some(tls) = &endpoint.tls {
            let host = address.rsplit_once(':').map_or(address, |(host, _)| host).trim_matches(['[', ']']);
            let config = ClientTlsConfig::new()
                .ca_certificate(Certificate::from_pem(&tls.ca_pem))
                .identity(Identity::from_pem(&tls.cert_pem, &tls.key_pem))
                .domain_name(tls.server_name.clone().unwrap_or_else(|| host.to_string()));
            builder = builder.tls_config(config).map_err(|e| FunctionError::Unavailable(format!("invalid TLS configuration for {address}: {e}")))?;
        }
        Ok(GrpcFunction { name: name.to_string(), channel: builder.connect_lazy(), connector: builder, endpoint, timeout })
    }

    /// The endpoint this client calls.
    pub fn endpoint(&self) -> &FunctionEndpoint {
        &self.endpoint
    }

    /// Whether the function can be reached: a fresh connection (TCP, the TLS handshake both
    /// ways, HTTP/2) within [`CONNECT_TIMEOUT`], apart from the channel calls use. The error
    /// is the cause.
    pub async fn probe(&self) -> Result<(), String> {
        match self.connector.connect().await {
            Ok(_) => Ok(()),
            Err(error) => {
                let mut causes = vec![error.to_string()];
                let mut source = std::error::Error::source(&error);
                while let Some(cause) = source {
                    let text = cause.to_string();
                    if !causes.iter().any(|c| c.contains(&text)) {
                        causes.push(text);
                    }
                    source = cause.source();
                }
                Err(causes.join(": "))
            }
        }
    }

    /// Runs the function once with a wire request: v1, then v1beta1 if the function does not
    /// serve v1. The error is the cause, without the function's name.
    pub async fn run_wire(&self, request: v1::RunFunctionRequest) -> Result<v1::RunFunctionResponse, String> {
        let timed_out = || format!("no response within {:?}", self.timeout);
        // The function learns our deadline from the request and may give up first.
        let describe = |status: Status| match status.code() {
            Code::DeadlineExceeded => timed_out(),
            Code::Cancelled if status.message() == "Timeout expired" => timed_out(),
            _ => describe(&status),
        };
        let call = async {
            let mut client = v1::function_runner_service_client::FunctionRunnerServiceClient::new(self.channel.clone())
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES);
            match client.run_function(self.request(request.clone())).await {
                Ok(response) => return Ok(response.into_inner()),
                Err(status) if status.code() == Code::Unimplemented => {}
                Err(status) => return Err(describe(status)),
            }
            let beta: v1beta1::RunFunctionRequest = twin(&request).map_err(|e| format!("cannot convert the request to v1beta1: {e}"))?;
            let mut client = v1beta1::function_runner_service_client::FunctionRunnerServiceClient::new(self.channel.clone())
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES);
            let response = client.run_function(self.request(beta)).await.map_err(describe)?.into_inner();
            twin(&response).map_err(|e| format!("cannot convert the v1beta1 response: {e}"))
        };
        match tokio::time::timeout(self.timeout, call).await {
            Ok(result) => result,
            Err(_) => Err(timed_out()),
        }
    }

    fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        // Tells the function when we stop waiting, so it can stop working too.
        request.set_timeout(self.timeout);
        request
    }

    fn error(&self, cause: impl fmt::Display) -> FunctionError {
        FunctionError::Remote { function: self.name.clone(), cause: cause.to_string() }
    }
}

#[async_trait::async_trait]
impl Function for GrpcFunction {
    async fn run(&self, request: RunFunctionRequest) -> Result<RunFunctionResponse, FunctionError> {
        let wire = convert::request_to_proto(&request).map_err(|e| self.error(format!("cannot encode the request: {e}")))?;
        let response = self.run_wire(wire).await.map_err(|cause| self.error(cause))?;
        convert::response_from_proto(&response).map_err(|e| self.error(format!("invalid response: {e}")))
    }
}

/// `HOST:PORT` without Crossplane's `dns:///` scheme prefix.
fn host_port(address: &str) -> &str {
    address.strip_prefix("dns:///").or_else(|| address.strip_prefix("dns:")).unwrap_or(address)
}

/// A gRPC failure as a user reads it: what went wrong first, then the lowest-level cause the
/// transport reported (refused connection, TLS alert, ...).
fn describe(status: &Status) -> String {
    let mut causes: Vec<String> = Vec::new();
    let mut source = std::error::Error::source(status);
    while let Some(error) = source {
        let text = error.to_string();
        if !text.is_empty() && !causes.iter().any(|c| c.contains(&text)) {
            causes.push(text);
        }
        source = error.source();
    }
    let message = status.message();
    let detail = match causes.last() {
        Some(cause) if !message.contains(cause.as_str()) => format!("{message}: {cause}"),
        _ => message.to_string(),
    };
    format!("rpc error: code = {:?} desc = {detail}", status.code())
}
