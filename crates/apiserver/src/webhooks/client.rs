//! Calling a webhook: where it is served (a `url`, or a `service` resolved to an address, see
//! [`resolve`]), and one HTTPS POST of a JSON review trusting only the webhook's `caBundle`
//! (the system's roots when it has none), within its timeout.
//!
//! A hyper HTTP/1.1 connection over tokio-rustls per call rather than a pooled client: a
//! webhook call is rare next to the request it guards, and a fresh connection picks up a
//! changed `caBundle` or Service address at once. Errors read as kube-apiserver's (Go's)
//! do: `Post "https://…?timeout=10s": dial tcp 127.0.0.1:9443: connect: connection refused`.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::Value;

use super::config::ClientConfig;
use crate::cache::WatchCache;

/// Largest webhook response read (kube-apiserver reads at most 3 MiB more than the request).
const MAX_RESPONSE: usize = 6 * 1024 * 1024;

/// Annotation on a Service naming the local address (`HOST:PORT`) its port is served at.
pub const ADDRESS_ANNOTATION: &str = "oxplane.io/address";

/// Where a call goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// Host to connect to.
    pub host: String,
    /// Port to connect to.
    pub port: u16,
    /// Path (and nothing else) of the request.
    pub path: String,
    /// The name the server's certificate must carry.
    pub server_name: String,
}

impl Target {
    /// The URL as error messages show it (the host as configured).
    pub fn url(&self, timeout: Duration) -> String {
        let host = if self.host.contains(':') { format!("[{}]", self.host) } else { self.host.clone() };
        format!("https://{}:{}{}?timeout={}s", self.server_name_or(&host), self.port, self.path, timeout.as_secs())
    }

    fn server_name_or<'a>(&'a self, host: &'a str) -> &'a str {
        if self.server_name.is_empty() { host } else { &self.server_name }
    }
}

/// Where a webhook of `config` is reached. A `url` names its host; a `service` is found as a
/// Service object: `type: ExternalName` services reach `spec.externalName` at the webhook's
/// port (as kube-apiserver resolves them), any other Service needs the
/// [`ADDRESS_ANNOTATION`] saying where on this machine the process serving it listens (there
/// is no cluster network to route a cluster IP). The certificate must name
/// `<service>.<namespace>.svc`, as in Kubernetes.
pub fn resolve(cache: &WatchCache, config: &ClientConfig) -> Result<Target, String> {
    if let Some(url) = &config.url {
        let rest = url.strip_prefix("https://").ok_or_else(|| format!("unsupported URL {url:?}: only https is allowed"))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], rest[i..].to_string()),
            None => (rest, "/".to_string()),
        };
        let (host, port) = split_host_port(authority, 443)?;
        return Ok(Target { server_name: host.clone(), host, port, path });
    }
    let Some(service) = &config.service else { return Err("neither url nor service is set".into()) };
    let port = service.port.unwrap_or(443);
    let path = service.path.clone().unwrap_or_else(|| "/".into());
    let server_name = format!("{}.{}.svc", service.name, service.namespace);
    let key = format!("/registry/core/services/{}/{}", service.namespace, service.name);
    let Some(found) = cache.get(&key).0 else {
        return Err(format!("service \"{}/{}\" not found", service.namespace, service.name));
    };
    let port_u16 = u16::try_from(port).map_err(|_| format!("invalid port {port}"))?;
    if found["spec"]["type"].as_str() == Some("ExternalName") {
        let host = found["spec"]["externalName"].as_str().filter(|h| !h.is_empty()).ok_or_else(|| {
            format!("service \"{}/{}\" is of type ExternalName but has no spec.externalName", service.namespace, service.name)
        })?;
        return Ok(Target { host: host.to_string(), port: port_u16, path, server_name });
    }
    let ports = found["spec"]["ports"].as_array().cloned().unwrap_or_default();
    if !ports.iter().any(|p| p["port"].as_i64() == Some(port)) {
        return Err(format!("service \"{}/{}\" has no port {port}", service.namespace, service.name));
    }
    let address = found["metadata"]["annotations"][ADDRESS_ANNOTATION].as_str().ok_or_else(|| {
        format!(
            "service \"{}/{}\" has no address: annotate it with {ADDRESS_ANNOTATION}: HOST:PORT, or make it type ExternalName",
            service.namespace, service.name
        )
    })?;
    let (host, port) = split_host_port(address, port_u16)?;
    Ok(Target { host, port, path, server_name })
}

fn split_host_port(authority: &str, default_port: u16) -> Result<(String, u16), String> {
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or_else(|| format!("invalid address {authority:?}"))?;
        (host.to_string(), after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host.to_string(), Some(port)),
            None => (authority.to_string(), None),
        }
    };
    let port = match port {
        Some(p) => p.parse().map_err(|_| format!("invalid port in {authority:?}"))?,
        None => default_port,
    };
    if host.is_empty() {
        return Err(format!("no host in {authority:?}"));
    }
    Ok((host, port))
}

/// The TLS client configuration trusting `ca_pem` (or the system's roots).
fn tls_config(ca_pem: Option<&[u8]>) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = rustls::RootCertStore::empty();
    match ca_pem {
        Some(pem) => {
            for cert in CertificateDer::pem_slice_iter(pem) {
                let cert = cert.map_err(|e| format!("caBundle: {e}"))?;
                roots.add(cert).map_err(|e| format!("caBundle: {e}"))?;
            }
            if roots.is_empty() {
                return Err("caBundle holds no certificate".into());
            }
        }
        None => {
            for cert in rustls_native_certs::load_native_certs().certs {
                let _ = roots.add(cert);
            }
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// POSTs `body` (JSON) to `target` and parses the JSON answer; the error reads as Go's
/// `Post "URL": cause`.
pub async fn post(target: &Target, ca_pem: Option<&[u8]>, body: Vec<u8>, timeout: Duration) -> Result<Value, String> {
    let url = target.url(timeout);
    let call = async {
        let config = tls_config(ca_pem)?;
        let tcp = tokio::net::TcpStream::connect((target.host.as_str(), target.port))
            .await
            .map_err(|e| format!("dial tcp {}:{}: connect: {}", target.host, target.port, io_text(&e)))?;
        let _ = tcp.set_nodelay(true);
        let name = ServerName::try_from(target.server_name.clone()).map_err(|e| format!("invalid server name: {e}"))?;
        let tls = tokio_rustls::TlsConnector::from(config)
            .connect(name, tcp)
            .await
            .map_err(|e| format!("tls: failed to verify certificate: {e}"))?;
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.map_err(|e| e.to_string())?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        let path = format!("{}?timeout={}s", target.path, timeout.as_secs());
        let request = http::Request::post(path)
            .header(http::header::HOST, format!("{}:{}", target.server_name, target.port))
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json, */*")
            .body(Full::new(bytes::Bytes::from(body)))
            .map_err(|e| e.to_string())?;
        let response = sender.send_request(request).await.map_err(|e| e.to_string())?;
        let status = response.status();
        let bytes = Limited::new(response.into_body(), MAX_RESPONSE)
            .collect()
            .await
            .map_err(|e| format!("reading the response: {e}"))?
            .to_bytes();
        if !status.is_success() {
            let text = String::from_utf8_lossy(&bytes);
            return Err(format!("the server responded with the status code {} but did not return more information: {}", status.as_u16(), text.trim()));
        }
        serde_json::from_slice::<Value>(&bytes).map_err(|e| format!("the response is not JSON: {e}"))
    };
    match tokio::time::timeout(timeout, call).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(cause)) => Err(format!("Post \"{url}\": {cause}")),
        Err(_) => Err(format!("Post \"{url}\": context deadline exceeded")),
    }
}

/// An I/O error as Go prints it (`connection refused`, not `Connection refused (os error 111)`).
fn io_text(error: &std::io::Error) -> String {
    match error.kind() {
        std::io::ErrorKind::ConnectionRefused => "connection refused".into(),
        std::io::ErrorKind::TimedOut => "i/o timeout".into(),
        _ => error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn addresses_split_as_go_splits_them() {
        assert_eq!(split_host_port("127.0.0.1:9443", 443).unwrap(), ("127.0.0.1".into(), 9443));
        assert_eq!(split_host_port("localhost", 443).unwrap(), ("localhost".into(), 443));
        assert_eq!(split_host_port("[::1]:8443", 443).unwrap(), ("::1".into(), 8443));
        assert!(split_host_port("host:port", 443).is_err());
        assert!(split_host_port(":1", 443).is_err());
    }
}
