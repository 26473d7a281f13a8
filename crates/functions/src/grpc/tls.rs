//! oxplane's certificate authority for function calls, kept in a directory of the data dir.
//!
//! One CA signs both sides of every mutual-TLS function call: oxplane's client certificate
//! (which every function's server trusts through its `ca.crt`) and each function's server
//! certificate (which oxplane trusts through the same CA). A function's server certificate
//! directory is written in the layout the function SDKs read from `TLS_SERVER_CERTS_DIR`:
//! `tls.crt`, `tls.key`, `ca.crt`.
//!
//! Files in the CA directory: `ca.crt`, `ca.key`, `client.crt`, `client.key` and
//! `client.not-after` (the client certificate's expiry, in Unix seconds, so rotation needs no
//! certificate parser).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use time::OffsetDateTime;

use super::client::ClientTls;
use super::server::ServerTls;

/// How long the CA is valid.
const CA_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);
/// How long a client or server certificate is valid.
pub const LEAF_VALIDITY: Duration = Duration::from_secs(365 * 24 * 3600);
/// A client certificate with less than this left is replaced.
pub const ROTATE_BEFORE: Duration = Duration::from_secs(30 * 24 * 3600);
/// The common name of oxplane's client certificate.
pub const CLIENT_NAME: &str = "oxplane";

/// Why the certificate authority could not do its work.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// Reading or writing a file failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// Which file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// Generating a key or certificate failed.
    #[error("cannot generate a certificate: {0}")]
    Generate(#[from] rcgen::Error),
}

/// The certificate authority, loaded from (or created in) its directory.
pub struct CertificateAuthority {
    dir: PathBuf,
    ca_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl CertificateAuthority {
    /// Loads the CA from `dir`, creating it (and the directory) on first use.
    pub fn load_or_create(dir: &Path) -> Result<Self, TlsError> {
        let (cert, key) = (dir.join("ca.crt"), dir.join("ca.key"));
        if !cert.exists() || !key.exists() {
            let key_pair = KeyPair::generate()?;
            let certificate = ca_params(SystemTime::now())?.self_signed(&key_pair)?;
            write(&cert, certificate.pem().as_bytes(), false)?;
            write(&key, key_pair.serialize_pem().as_bytes(), true)?;
        }
        let ca_pem = read(&cert)?;
        let key_pair = KeyPair::from_pem(&read(&key)?)?;
        // The issuer needs only the CA's subject and key: issued certificates name the subject
        // and are verified with the key.
        let issuer = Issuer::new(ca_params(SystemTime::now())?, key_pair);
        Ok(CertificateAuthority { dir: dir.to_path_buf(), ca_pem, issuer })
    }

    /// PEM of the CA certificate.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// A server certificate for a function reached under `names` (host names or IP addresses).
    pub fn issue_server(&self, names: &[String]) -> Result<ServerTls, TlsError> {
        let (cert_pem, key_pem) = self.issue(names, names.first().map_or("function", String::as_str), ExtendedKeyUsagePurpose::ServerAuth, SystemTime::now())?;
        Ok(ServerTls { cert_pem, key_pem, ca_pem: self.ca_pem.clone() })
    }

    /// A client certificate (PEM certificate and key) for `names`: what a provider package's
    /// `tls.crt` and `tls.key` of its client certificate directory hold.
    pub fn issue_client(&self, names: &[String]) -> Result<(String, String), TlsError> {
        self.issue(names, names.first().map_or("client", String::as_str), ExtendedKeyUsagePurpose::ClientAuth, SystemTime::now())
    }

    /// Writes a function's server certificate directory (`tls.crt`, `tls.key`, `ca.crt`) for
    /// `names` into `out`.
    pub fn write_server_dir(&self, out: &Path, names: &[String]) -> Result<(), TlsError> {
        let server = self.issue_server(names)?;
        write(&out.join("tls.crt"), server.cert_pem.as_bytes(), false)?;
        write(&out.join("tls.key"), server.key_pem.as_bytes(), true)?;
        write(&out.join("ca.crt"), server.ca_pem.as_bytes(), false)
    }

    /// oxplane's client certificate, issued on first use and issued again when less than
    /// [`ROTATE_BEFORE`] of it is left (or `now` is past it).
    pub fn client_tls(&self, now: SystemTime) -> Result<ClientTls, TlsError> {
        let (cert, key, not_after) = (self.dir.join("client.crt"), self.dir.join("client.key"), self.dir.join("client.not-after"));
        let expiry = std::fs::read_to_string(&not_after).ok().and_then(|s| s.trim().parse::<u64>().ok());
        let due = now.checked_add(ROTATE_BEFORE).and_then(|t| t.duration_since(UNIX_EPOCH).ok()).map_or(u64::MAX, |d| d.as_secs());
        if expiry.is_none_or(|e| e <= due) || !cert.exists() || !key.exists() {
            let (cert_pem, key_pem) = self.issue(&[CLIENT_NAME.to_string()], CLIENT_NAME, ExtendedKeyUsagePurpose::ClientAuth, now)?;
            write(&key, key_pem.as_bytes(), true)?;
            write(&cert, cert_pem.as_bytes(), false)?;
            let expires = now.checked_add(LEAF_VALIDITY).and_then(|t| t.duration_since(UNIX_EPOCH).ok()).map_or(0, |d| d.as_secs());
            write(&not_after, expires.to_string().as_bytes(), false)?;
            tracing::info!(dir = %self.dir.display(), "issued oxplane's client certificate for function calls");
        }
        Ok(ClientTls { ca_pem: self.ca_pem.clone(), cert_pem: read(&cert)?, key_pem: read(&key)?, server_name: None })
    }

    fn issue(&self, names: &[String], common_name: &str, usage: ExtendedKeyUsagePurpose, now: SystemTime) -> Result<(String, String), TlsError> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(names.to_vec())?;
        params.distinguished_name.push(DnType::CommonName, common_name);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        params.extended_key_usages = vec![usage];
        params.not_before = at(now.checked_sub(Duration::from_secs(3600)).unwrap_or(now));
        params.not_after = at(now.checked_add(LEAF_VALIDITY).unwrap_or(now));
        let certificate = params.signed_by(&key, &self.issuer)?;
        Ok((certificate.pem(), key.serialize_pem()))
    }
}

fn ca_params(now: SystemTime) -> Result<CertificateParams, rcgen::Error> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, "oxplane-functions-ca");
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    params.not_before = at(now.checked_sub(Duration::from_secs(3600)).unwrap_or(now));
    params.not_after = at(now.checked_add(CA_VALIDITY).unwrap_or(now));
    Ok(params)
}

fn at(time: SystemTime) -> OffsetDateTime {
    OffsetDateTime::from(time)
}

fn read(path: &Path) -> Result<String, TlsError> {
    std::fs::read_to_string(path).map_err(|source| TlsError::Io { what: "cannot read", path: path.display().to_string(), source })
}

/// Writes a file (creating its directory), readable only by its owner when `private`.
fn write(path: &Path, contents: &[u8], private: bool) -> Result<(), TlsError> {
    let io = |source| TlsError::Io { what: "cannot write", path: path.display().to_string(), source };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(if private { 0o600 } else { 0o644 });
    }
    let _ = private;
    use std::io::Write;
    let mut file = options.open(path).map_err(io)?;
    file.write_all(contents).map_err(io)
}
