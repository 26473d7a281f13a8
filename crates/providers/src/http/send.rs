//! Sending one HTTP request for provider-http: hyper's client over rustls, with the TLS
//! settings of the resource or its ProviderConfig (CA bundle, client certificate, or no
//! verification at all), bounded by `waitTimeout`.
//!
//! Failures are classified by whether the request may have reached the server: a refused
//! connection or an invalid request certainly did not; a timeout or a connection dropped
//! mid-exchange may have.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use serde_json::{Value, json};

/// Headers as provider-http keeps them: name → values.
pub type Headers = BTreeMap<String, Vec<String>>;

/// A request about to be sent (secrets already injected).
#[derive(Clone, Debug, PartialEq)]
pub struct Outgoing {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The full URL.
    pub url: String,
    /// The body (none when empty).
    pub body: String,
    /// The headers.
    pub headers: Headers,
}

/// An answer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Answer {
    /// The status code.
    pub status: u16,
    /// The body as text.
    pub body: String,
    /// The headers, names in Go's canonical form (`Content-Type`) as upstream shows them.
    pub headers: Headers,
}

impl Answer {
    /// `{statusCode, body, headers}` with the body parsed when it is JSON: what jq
    /// expressions and checks see as `.response`.
    pub fn to_context(&self) -> Value {
        json!({"statusCode": self.status, "body": parse_body(&self.body), "headers": self.headers})
    }

    /// Whether the status is an error (400–599) not listed in `allowed`.
    pub fn is_error(&self, allowed: &[u16]) -> bool {
        (400..600).contains(&self.status) && !allowed.contains(&self.status)
    }
}

/// A body parsed as JSON when it is JSON, else the text.
pub fn parse_body(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|_| Value::String(body.to_string()))
}

/// Why a request failed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SendError {
    /// It could not be built (bad URL, method or header): nothing was sent.
    #[error("invalid request {method} {url}: {message}")]
    Invalid {
        /// Method.
        method: String,
        /// URL.
        url: String,
        /// Why.
        message: String,
    },
    /// The server could not be reached: nothing was sent.
    #[error("cannot reach {url}: {message}")]
    Unreachable {
        /// URL.
        url: String,
        /// Why.
        message: String,
    },
    /// No complete answer within the wait timeout: it may have been processed.
    #[error("{method} {url}: no answer within the wait timeout of {timeout:?}")]
    Timeout {
        /// Method.
        method: String,
        /// URL.
        url: String,
        /// The timeout.
        timeout: Duration,
    },
    /// The exchange broke after the request was sent: it may have been processed.
    #[error("{method} {url}: {message}")]
    Transport {
        /// Method.
        method: String,
        /// URL.
        url: String,
        /// Why.
        message: String,
    },
    /// The TLS settings are unusable.
    #[error("TLS configuration: {0}")]
    Tls(String),
}

impl SendError {
    /// Whether the request certainly did not reach the server.
    pub fn is_definite(&self) -> bool {
        matches!(self, SendError::Invalid { .. } | SendError::Unreachable { .. } | SendError::Tls(_))
    }
}

/// TLS settings, PEM encoded.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tls {
    /// CA certificates to trust instead of the system's.
    pub ca_pem: Option<Vec<u8>>,
    /// A client certificate chain.
    pub client_cert_pem: Option<Vec<u8>>,
    /// Its private key.
    pub client_key_pem: Option<Vec<u8>>,
    /// Accept any server certificate.
    pub insecure_skip_verify: bool,
}

/// Accepts any server certificate (`insecureSkipTLSVerify`), still checking that the
/// handshake is signed by the key the certificate holds. rustls has no switch for this; it
/// asks for a verifier, and this is the smallest one.
#[derive(Debug)]
struct AcceptAnyServer(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyServer {
    fn verify_server_cert(&self, _: &CertificateDer<'_>, _: &[CertificateDer<'_>], _: &ServerName<'_>, _: &[u8], _: UnixTime) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

fn tls_config(tls: &Tls) -> Result<rustls::ClientConfig, SendError> {
    let bad = |e: &dyn std::fmt::Display| SendError::Tls(e.to_string());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone()).with_safe_default_protocol_versions().map_err(|e| bad(&e))?;
    let builder = if tls.insecure_skip_verify {
        builder.dangerous().with_custom_certificate_verifier(Arc::new(AcceptAnyServer(provider)))
    } else {
        let mut roots = rustls::RootCertStore::empty();
        match &tls.ca_pem {
            Some(pem) => {
                for cert in CertificateDer::pem_slice_iter(pem) {
                    roots.add(cert.map_err(|e| bad(&format!("CA bundle: {e}")))?).map_err(|e| bad(&format!("CA bundle: {e}")))?;
                }
                if roots.is_empty() {
                    return Err(SendError::Tls("CA bundle holds no certificate".into()));
                }
            }
            None => {
                for cert in rustls_native_certs::load_native_certs().certs {
                    let _ = roots.add(cert);
                }
            }
        }
        builder.with_root_certificates(roots)
    };
    match (&tls.client_cert_pem, &tls.client_key_pem) {
        (Some(cert), Some(key)) => {
            let chain = CertificateDer::pem_slice_iter(cert).collect::<Result<Vec<_>, _>>().map_err(|e| bad(&format!("client certificate: {e}")))?;
            let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| bad(&format!("client key: {e}")))?;
            builder.with_client_auth_cert(chain, key).map_err(|e| bad(&format!("client certificate: {e}")))
        }
        (None, None) => Ok(builder.with_no_client_auth()),
        _ => Err(SendError::Tls("a client certificate needs both the certificate and the key".into())),
    }
}

/// Header names as Go's `net/http` writes them (`content-type` → `Content-Type`).
pub fn canonical_header(name: &str) -> String {
    name.split('-')
        .map(|part| {
            let mut chars = part.chars();
            match chars.next() {
                Some(first) => first.to_ascii_uppercase().to_string() + &chars.as_str().to_ascii_lowercase(),
                None => String::new(),
            }
        })
        .collect::<Vec<_>>()
        .join("-")
}

/// Sends requests with one TLS configuration and timeout.
pub struct Sender {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    timeout: Duration,
}

impl Sender {
    /// A sender.
    pub fn new(tls: &Tls, timeout: Duration) -> Result<Sender, SendError> {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(Some(timeout));
        let connector = hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(tls_config(tls)?).https_or_http().enable_http1().wrap_connector(http);
        let client = Client::builder(TokioExecutor::new()).build(connector);
        Ok(Sender { client, timeout })
    }

    /// The wait timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Sends a request. `committed` is called once the answer has begun to arrive (the
    /// server has processed the request), before its body is read.
    pub async fn send(&self, request: &Outgoing, committed: impl FnOnce()) -> Result<Answer, SendError> {
        let invalid = |message: String| SendError::Invalid { method: request.method.clone(), url: request.url.clone(), message };
        let method = http::Method::from_bytes(request.method.as_bytes()).map_err(|e| invalid(e.to_string()))?;
        let uri: http::Uri = request.url.parse().map_err(|e: http::uri::InvalidUri| invalid(e.to_string()))?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) {
            return Err(invalid("the URL must be http:// or https://".into()));
        }
        let mut builder = http::Request::builder().method(method).uri(uri);
        for (name, values) in &request.headers {
            for value in values {
                builder = builder.header(name.as_str(), value.as_str());
            }
        }
        let http_request = builder.body(Full::new(Bytes::from(request.body.clone()))).map_err(|e| invalid(e.to_string()))?;
        let exchange = async {
            let response = self.client.request(http_request).await.map_err(|e| {
                if e.is_connect() {
                    SendError::Unreachable { url: request.url.clone(), message: error_chain(&e) }
                } else {
                    SendError::Transport { method: request.method.clone(), url: request.url.clone(), message: error_chain(&e) }
                }
            })?;
            committed();
            let status = response.status().as_u16();
            let mut headers = Headers::new();
            for (name, value) in response.headers() {
                headers.entry(canonical_header(name.as_str())).or_default().push(String::from_utf8_lossy(value.as_bytes()).into_owned());
            }
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| SendError::Transport { method: request.method.clone(), url: request.url.clone(), message: format!("reading the answer: {e}") })?
                .to_bytes();
            Ok(Answer { status, body: String::from_utf8_lossy(&body).into_owned(), headers })
        };
        match tokio::time::timeout(self.timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(SendError::Timeout { method: request.method.clone(), url: request.url.clone(), timeout: self.timeout }),
        }
    }
}

/// An error with its causes (`error sending request: connection refused`).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_names_are_canonical() {
        assert_eq!(canonical_header("content-type"), "Content-Type");
        assert_eq!(canonical_header("x-request-ID"), "X-Request-Id");
        assert_eq!(canonical_header("etag"), "Etag");
    }

    #[test]
    fn error_statuses_respect_the_allowed_list() {
        let answer = |status| Answer { status, ..Default::default() };
        assert!(answer(404).is_error(&[]));
        assert!(!answer(404).is_error(&[404]));
        assert!(!answer(201).is_error(&[]));
        assert!(answer(503).is_error(&[404]));
    }
}
