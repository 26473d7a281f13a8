//! The server's certificate authority and serving certificate, generated on first start and
//! kept in the data directory so that a kubeconfig stays valid across restarts.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::ServeError;

/// PEM files of the CA and the serving certificate.
#[derive(Debug, Clone)]
pub struct Certificates {
    /// The CA certificate clients trust (it goes into the kubeconfig).
    pub ca_pem: String,
    /// The serving certificate.
    pub cert_pem: String,
    /// The serving certificate's private key.
    pub key_pem: String,
}

/// The CA certificate's file in `<data dir>/pki`.
pub(super) const CA_CERT: &str = "ca.crt";
/// The CA key's file.
pub(super) const CA_KEY: &str = "ca.key";
const SERVER_CERT: &str = "server.crt";
const SERVER_KEY: &str = "server.key";
const SERVER_NAMES: &str = "server.names";

/// Loads the certificates from `dir/pki`, generating them when missing or when the serving
/// certificate does not cover `names` (host names and IP addresses clients will use). An
/// existing CA is kept, so kubeconfigs made before stay valid.
pub fn ensure(dir: &Path, names: &[String]) -> Result<Certificates, ServeError> {
    let pki = dir.join("pki");
    let path = |f: &str| -> PathBuf { pki.join(f) };
    let wanted = names.join("\n");
    let existing = std::fs::read_to_string(path(SERVER_NAMES)).ok();
    if existing.as_deref() == Some(wanted.as_str()) {
        let read = |f: &str| {
            std::fs::read_to_string(path(f)).map_err(|e| ServeError::io(format!("reading {}", path(f).display()), e))
        };
        return Ok(Certificates { ca_pem: read(CA_CERT)?, cert_pem: read(SERVER_CERT)?, key_pem: read(SERVER_KEY)? });
    }
    let (ca_pem, ca_key_pem) = ensure_ca(dir)?;
    let generated = serving_certificate(&ca_pem, &ca_key_pem, names)?;
    for (file, contents, private) in [
        (SERVER_CERT, generated.cert_pem.as_str(), false),
        (SERVER_KEY, generated.key_pem.as_str(), true),
        (SERVER_NAMES, wanted.as_str(), false),
    ] {
        super::files::write_private(&path(file), contents.as_bytes(), private)?;
    }
    tracing::info!(dir = %pki.display(), "issued a serving certificate");
    Ok(generated)
}

/// A new CA and a serving certificate it signed for `names` (DNS names or IP addresses), kept
/// in memory only: what a webhook server oxplane starts (or a test starts) serves with, its CA
/// going into the configuration's `caBundle`.
pub fn generate_serving(names: &[String]) -> Result<Certificates, ServeError> {
    let (ca_pem, ca_key_pem) = generate_ca()?;
    serving_certificate(&ca_pem, &ca_key_pem, names)
}

/// The CA certificate and key (PEM) in `dir/pki`, generated when missing.
pub fn ensure_ca(dir: &Path) -> Result<(String, String), ServeError> {
    let pki = dir.join("pki");
    if let (Ok(cert), Ok(key)) =
        (std::fs::read_to_string(pki.join(CA_CERT)), std::fs::read_to_string(pki.join(CA_KEY)))
    {
        return Ok((cert, key));
    }
    let (cert, key) = generate_ca()?;
    install_ca(dir, &cert, &key)?;
    tracing::info!(dir = %pki.display(), "generated a CA");
    Ok((cert, key))
}

/// Makes `cert` and `key` the CA in `dir/pki`; a serving certificate signed by another CA is
/// reissued at the next [`ensure`].
pub fn install_ca(dir: &Path, cert: &str, key: &str) -> Result<(), ServeError> {
    let pki = dir.join("pki");
    std::fs::create_dir_all(&pki).map_err(|e| ServeError::io(format!("creating {}", pki.display()), e))?;
    if std::fs::read_to_string(pki.join(CA_CERT)).ok().as_deref() == Some(cert)
        && std::fs::read_to_string(pki.join(CA_KEY)).ok().as_deref() == Some(key)
    {
        return Ok(());
    }
    let _ = std::fs::remove_file(pki.join(SERVER_NAMES));
    super::files::write_private(&pki.join(CA_CERT), cert.as_bytes(), false)?;
    super::files::write_private(&pki.join(CA_KEY), key.as_bytes(), true)
}

/// A serving certificate for `names` signed by the CA.
fn serving_certificate(ca_pem: &str, ca_key_pem: &str, names: &[String]) -> Result<Certificates, ServeError> {
    let tls = |e: rcgen::Error| ServeError::Tls(e.to_string());
    let issuer = Issuer::from_ca_cert_pem(ca_pem, KeyPair::from_pem(ca_key_pem).map_err(tls)?).map_err(tls)?;
    let key = KeyPair::generate().map_err(tls)?;
    let mut server = CertificateParams::new(names.to_vec()).map_err(tls)?;
    server.distinguished_name.push(DnType::CommonName, "oxplane");
    server.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = server.signed_by(&key, &issuer).map_err(tls)?;
    Ok(Certificates { ca_pem: ca_pem.to_string(), cert_pem: cert.pem(), key_pem: key.serialize_pem() })
}

/// Generates a CA: its certificate and key, PEM.
fn generate_ca() -> Result<(String, String), ServeError> {
    let tls = |e: rcgen::Error| ServeError::Tls(e.to_string());
    let ca_key = KeyPair::generate().map_err(tls)?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(tls)?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "oxplane-ca");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    let ca_cert = ca.self_signed(&ca_key).map_err(tls)?;
    Ok((ca_cert.pem(), ca_key.serialize_pem()))
}

/// A rustls server configuration serving HTTP/2 and HTTP/1.1 with the serving certificate,
/// asking clients for a certificate through `client_auth` (see [`crate::authn::x509`]).
pub fn server_config(
    certs: &Certificates,
    client_auth: Arc<dyn rustls::server::danger::ClientCertVerifier>,
) -> Result<Arc<rustls::ServerConfig>, ServeError> {
    let tls = |e: &dyn std::fmt::Display| ServeError::Tls(e.to_string());
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(certs.cert_pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| tls(&e))?;
    let key = PrivateKeyDer::from_pem_slice(certs.key_pem.as_bytes()).map_err(|e| tls(&e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls(&e))?
        .with_client_cert_verifier(client_auth)
        .with_single_cert(chain, key)
        .map_err(|e| tls(&e))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// How long [`issue_client_certificate`]'s certificates are valid: a year.
pub const CLIENT_CERTIFICATE_VALIDITY: std::time::Duration = std::time::Duration::from_secs(365 * 24 * 3600);

/// A client certificate for `user` in `groups` (common name and organizations), signed by the
/// CA in `dir/pki`, valid for a year; returns the certificate and its key as PEM.
pub fn issue_client_certificate(dir: &Path, user: &str, groups: &[String]) -> Result<(String, String), ServeError> {
    issue_client_certificate_for(dir, user, groups, CLIENT_CERTIFICATE_VALIDITY)
}

/// [`issue_client_certificate`], valid from a minute ago for `validity` (one O per group: see
/// [`super::client_cert`]).
pub fn issue_client_certificate_for(dir: &Path, user: &str, groups: &[String], validity: std::time::Duration) -> Result<(String, String), ServeError> {
    super::client_cert::issue_in(dir, user, groups, validity)
}
