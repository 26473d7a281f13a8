//! Serving a [`Function`] over gRPC, as the function SDKs do: `FunctionRunnerService` in both
//! `apiextensions.fn.proto.v1` and `v1beta1`, 4 MiB message limits, and mutual TLS from a
//! directory laid out as `TLS_SERVER_CERTS_DIR` (`tls.crt`, `tls.key`, `ca.crt`) with client
//! certificates required, or plain text when asked.

use std::future::Future;
use std::path::Path;
use std::sync::Arc;

use tokio::net::TcpListener;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};
use tonic::{Request, Response, Status};

use super::proto::{v1, v1beta1};
use super::{MAX_MESSAGE_BYTES, convert, twin};
use crate::protocol::Function;

/// The server side of mutual TLS.
#[derive(Clone)]
pub struct ServerTls {
    /// PEM of the server certificate (`tls.crt`).
    pub cert_pem: String,
    /// PEM of its private key (`tls.key`).
    pub key_pem: String,
    /// PEM of the authority client certificates must chain to (`ca.crt`).
    pub ca_pem: String,
}

impl ServerTls {
    /// Reads `tls.crt`, `tls.key` and `ca.crt` from a certificate directory.
    pub fn from_dir(dir: &Path) -> Result<Self, String> {
        let read = |name: &str| std::fs::read_to_string(dir.join(name)).map_err(|e| format!("cannot read {}: {e}", dir.join(name).display()));
        Ok(ServerTls { cert_pem: read("tls.crt")?, key_pem: read("tls.key")?, ca_pem: read("ca.crt")? })
    }
}

/// Serves `function` on `listener` until `shutdown` completes.
pub async fn serve(
    function: Arc<dyn Function>,
    listener: TcpListener,
    tls: Option<ServerTls>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), String> {
    let mut builder = Server::builder();
    if let Some(tls) = tls {
        let config = ServerTlsConfig::new()
            .identity(Identity::from_pem(&tls.cert_pem, &tls.key_pem))
            .client_ca_root(Certificate::from_pem(&tls.ca_pem));
        builder = builder.tls_config(config).map_err(|e| format!("invalid TLS configuration: {e}"))?;
    }
    let runner = Runner { function };
    let v1 = v1::function_runner_service_server::FunctionRunnerServiceServer::new(runner.clone())
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES);
    let v1beta1 = v1beta1::function_runner_service_server::FunctionRunnerServiceServer::new(runner)
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES);
    builder
        .tcp_nodelay(true)
        .add_service(v1)
        .add_service(v1beta1)
        .serve_with_incoming_shutdown(TcpIncoming::from(listener).with_nodelay(Some(true)), shutdown)
        .await
        .map_err(|e| format!("function server failed: {e}"))
}

#[derive(Clone)]
struct Runner {
    function: Arc<dyn Function>,
}

impl Runner {
    async fn run(&self, request: &v1::RunFunctionRequest) -> Result<v1::RunFunctionResponse, Status> {
        let request = convert::request_from_proto(request).map_err(|e| Status::invalid_argument(format!("invalid request: {e}")))?;
        let response = self.function.run(request).await.map_err(|e| Status::internal(e.to_string()))?;
        convert::response_to_proto(&response).map_err(|e| Status::internal(format!("cannot encode the response: {e}")))
    }
}

#[tonic::async_trait]
impl v1::function_runner_service_server::FunctionRunnerService for Runner {
    async fn run_function(&self, request: Request<v1::RunFunctionRequest>) -> Result<Response<v1::RunFunctionResponse>, Status> {
        self.run(request.get_ref()).await.map(Response::new)
    }
}

#[tonic::async_trait]
impl v1beta1::function_runner_service_server::FunctionRunnerService for Runner {
    async fn run_function(&self, request: Request<v1beta1::RunFunctionRequest>) -> Result<Response<v1beta1::RunFunctionResponse>, Status> {
        let request: v1::RunFunctionRequest = twin(request.get_ref()).map_err(|e| Status::invalid_argument(format!("invalid request: {e}")))?;
        let response = self.run(&request).await?;
        twin(&response).map(Response::new).map_err(|e| Status::internal(format!("cannot encode the response: {e}")))
    }
}
