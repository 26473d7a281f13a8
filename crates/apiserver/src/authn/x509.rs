//! Client certificates: a certificate signed by the server's CA names its user in the subject's
//! common name and its groups in the organizations, as kube-apiserver's `--client-ca-file`
//! authenticator reads them.
//!
//! The TLS handshake asks for a certificate without requiring one (token clients connect with
//! none) and accepts any certificate whose holder proves it has the key; whether the CA signed
//! it is checked here, per connection, so a certificate from another CA is answered with a 401
//! Status rather than a failed handshake the client cannot explain.

use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};

use super::UserInfo;

/// What a connection's client certificate says, attached to each of its requests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeerCertificate {
    /// Signed by the CA, valid now: its user.
    Valid(UserInfo),
    /// Presented but not acceptable: why.
    Invalid(String),
}

/// Asks clients for a certificate, accepts a connection with or without one, and leaves the
/// chain check to [`CertificateAuthenticator::check`] (see the module documentation).
#[derive(Debug)]
pub struct RequestClientCert {
    inner: Arc<dyn ClientCertVerifier>,
}

impl ClientCertVerifier for RequestClientCert {
    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(&self, _: &CertificateDer<'_>, _: &[CertificateDer<'_>], _: UnixTime) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// Checks client certificates against the server's CA.
#[derive(Clone, Debug)]
pub struct CertificateAuthenticator {
    verifier: Arc<dyn ClientCertVerifier>,
}

impl CertificateAuthenticator {
    /// An authenticator trusting the CA certificate(s) in `ca_pem`.
    pub fn new(ca_pem: &str) -> Result<Self, String> {
        use rustls::pki_types::pem::PemObject;
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            roots.add(cert.map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
            .allow_unauthenticated()
            .build()
            .map_err(|e| e.to_string())?;
        Ok(CertificateAuthenticator { verifier })
    }

    /// The verifier the TLS configuration uses.
    pub fn tls_verifier(&self) -> Arc<dyn ClientCertVerifier> {
        Arc::new(RequestClientCert { inner: self.verifier.clone() })
    }

    /// The user a connection's certificate chain (leaf first) names, or why it names none.
    pub fn check(&self, chain: &[CertificateDer<'_>]) -> PeerCertificate {
        let Some((leaf, intermediates)) = chain.split_first() else {
            return PeerCertificate::Invalid("no certificate".into());
        };
        if let Err(error) = self.verifier.verify_client_cert(leaf, intermediates, UnixTime::now()) {
            return PeerCertificate::Invalid(format!("x509: {error}"));
        }
        match user_of(leaf) {
            Ok(user) => PeerCertificate::Valid(user),
            Err(why) => PeerCertificate::Invalid(why),
        }
    }
}

/// The user a certificate names: common name → user name, organizations → groups.
fn user_of(der: &[u8]) -> Result<UserInfo, String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).map_err(|e| format!("x509: {e}"))?;
    let subject = cert.subject();
    let name = subject
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .filter(|cn| !cn.is_empty())
        .ok_or_else(|| "x509: the certificate's subject has no common name".to_string())?;
    let groups: Vec<String> = subject.iter_organization().filter_map(|o| o.as_str().ok()).map(str::to_string).collect();
    Ok(UserInfo::new(name, groups))
}
