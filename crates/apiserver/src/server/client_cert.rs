//! Client certificates signed by the server's CA (`oxplane kubeconfig`): the subject names the
//! user in its common name and each group in an organization (O) of its own, as
//! `openssl req -subj "/CN=alice/O=app-team/O=ops"` does and as kube-apiserver reads them.
//!
//! rcgen, which makes the CA and the serving certificate, keeps one value per attribute type in
//! a name, so it cannot write a second O: the certificate is built with RustCrypto's
//! `x509-cert` builder instead, and signed by the CA's rcgen key through [`CaSigner`], so any CA
//! key rcgen reads (ECDSA, Ed25519, RSA, the server's own or one brought with
//! [`super::tls::install_ca`]) can sign.

use std::path::Path;
use std::str::FromStr;
use std::time::{Duration, SystemTime};

use rcgen::{KeyPair, PublicKeyData};
use x509_cert::builder::{Builder, CertificateBuilder, Profile};
use x509_cert::der::asn1::{BitString, OctetString, SetOfVec, Utf8StringRef};
use x509_cert::der::pem::LineEnding;
use x509_cert::der::referenced::OwnedToRef;
use x509_cert::der::{Any, Decode, DecodePem, EncodePem};
use x509_cert::ext::pkix::{AuthorityKeyIdentifier, BasicConstraints, ExtendedKeyUsage, KeyUsage, KeyUsages, SubjectKeyIdentifier};
use x509_cert::name::{Name, RdnSequence, RelativeDistinguishedName};
use x509_cert::serial_number::SerialNumber;
use x509_cert::spki::{AlgorithmIdentifierOwned, DynSignatureAlgorithmIdentifier, EncodePublicKey, ObjectIdentifier, SignatureBitStringEncoding, SubjectPublicKeyInfoOwned};
use x509_cert::Certificate;
use x509_cert::attr::AttributeTypeAndValue;
use x509_cert::time::{Time, Validity};

use crate::ServeError;

const COMMON_NAME: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.4.3");
const ORGANIZATION: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.4.10");
const CLIENT_AUTH: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.3.2");

/// A subject: `CN=<user>`, then one `O=<group>` per group, each a relative distinguished name of
/// its own, the values UTF-8 strings (any text is a valid user or group name).
pub fn subject(user: &str, groups: &[String]) -> Result<Name, String> {
    let rdn = |oid: ObjectIdentifier, value: &str| -> Result<RelativeDistinguishedName, String> {
        let value = Any::encode_from(&Utf8StringRef::new(value).map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
        let set = SetOfVec::try_from(vec![AttributeTypeAndValue { oid, value }]).map_err(|e| e.to_string())?;
        Ok(RelativeDistinguishedName::from(set))
    };
    let mut names = vec![rdn(COMMON_NAME, user)?];
    for group in groups {
        names.push(rdn(ORGANIZATION, group)?);
    }
    Ok(RdnSequence(names))
}

/// The CA's rcgen key as the signer `x509-cert`'s builder asks for.
struct CaSigner<'a> {
    key: &'a KeyPair,
    algorithm: AlgorithmIdentifierOwned,
}

/// The CA's public key (SubjectPublicKeyInfo DER).
#[derive(Clone)]
struct CaPublicKey(Vec<u8>);

impl EncodePublicKey for CaPublicKey {
    fn to_public_key_der(&self) -> x509_cert::spki::Result<x509_cert::der::Document> {
        Ok(x509_cert::der::Document::try_from(self.0.as_slice())?)
    }
}

/// A signature as rcgen's key makes it (DER for ECDSA, raw for Ed25519 and RSA): the bytes of
/// the certificate's signature BIT STRING.
struct RawSignature(Vec<u8>);

impl SignatureBitStringEncoding for RawSignature {
    fn to_bitstring(&self) -> x509_cert::der::Result<BitString> {
        BitString::from_bytes(&self.0)
    }
}

impl signature::Keypair for CaSigner<'_> {
    type VerifyingKey = CaPublicKey;

    fn verifying_key(&self) -> CaPublicKey {
        CaPublicKey(self.key.subject_public_key_info())
    }
}

impl DynSignatureAlgorithmIdentifier for CaSigner<'_> {
    fn signature_algorithm_identifier(&self) -> x509_cert::spki::Result<AlgorithmIdentifierOwned> {
        Ok(self.algorithm.clone())
    }
}

impl signature::Signer<RawSignature> for CaSigner<'_> {
    fn try_sign(&self, message: &[u8]) -> Result<RawSignature, signature::Error> {
        rcgen::SigningKey::sign(self.key, message).map(RawSignature).map_err(signature::Error::from_source)
    }
}

/// The signature AlgorithmIdentifier of what rcgen's `key` signs with (RFC 5758, 8410, 4055).
fn signature_algorithm(key: &KeyPair) -> Result<AlgorithmIdentifierOwned, String> {
    let algorithm = key.algorithm();
    let (oid, null_parameters) = if algorithm == &rcgen::PKCS_ECDSA_P256_SHA256 {
        ("1.2.840.10045.4.3.2", false)
    } else if algorithm == &rcgen::PKCS_ECDSA_P384_SHA384 {
        ("1.2.840.10045.4.3.3", false)
    } else if algorithm == &rcgen::PKCS_ED25519 {
        ("1.3.101.112", false)
    } else if algorithm == &rcgen::PKCS_RSA_SHA256 {
        ("1.2.840.113549.1.1.11", true)
    } else if algorithm == &rcgen::PKCS_RSA_SHA384 {
        ("1.2.840.113549.1.1.12", true)
    } else if algorithm == &rcgen::PKCS_RSA_SHA512 {
        ("1.2.840.113549.1.1.13", true)
    } else {
        return Err(format!("the CA's key ({algorithm:?}) cannot sign client certificates: use an ECDSA P-256/P-384, Ed25519 or RSA key"));
    };
    let oid = ObjectIdentifier::from_str(oid).map_err(|e| e.to_string())?;
    let parameters = null_parameters.then(|| Any::from(x509_cert::der::asn1::Null));
    Ok(AlgorithmIdentifierOwned { oid, parameters })
}

/// A client certificate for `user` in `groups`, signed by the CA (`ca_pem`, `ca_key_pem`),
/// valid from a minute ago for `validity`: the certificate and its new key, PEM.
pub fn issue(ca_pem: &str, ca_key_pem: &str, user: &str, groups: &[String], validity: Duration) -> Result<(String, String), ServeError> {
    let tls = |e: &dyn std::fmt::Display| ServeError::Tls(format!("issuing a client certificate: {e}"));
    let ca = Certificate::from_pem(ca_pem.as_bytes()).map_err(|e| tls(&e))?;
    let ca_key = KeyPair::from_pem(ca_key_pem).map_err(|e| tls(&e))?;
    let signer = CaSigner { key: &ca_key, algorithm: signature_algorithm(&ca_key).map_err(|e| tls(&e))? };
    let key = KeyPair::generate().map_err(|e| tls(&e))?;
    let public_key = SubjectPublicKeyInfoOwned::from_der(&key.subject_public_key_info()).map_err(|e| tls(&e))?;

    let now = SystemTime::now();
    let time = |at: SystemTime| Time::try_from(at).map_err(|e| tls(&e));
    let validity = Validity { not_before: time(now - Duration::from_secs(60))?, not_after: time(now + validity)? };
    // A random positive serial of 16 bytes (RFC 5280 allows up to 20).
    let mut serial: [u8; 16] = rand::random();
    serial[0] = (serial[0] & 0x7f) | 0x01;
    let serial = SerialNumber::new(&serial).map_err(|e| tls(&e))?;

    let issuer = ca.tbs_certificate.subject.clone();
    let mut builder = CertificateBuilder::new(Profile::Manual { issuer: Some(issuer) }, serial, validity, subject(user, groups).map_err(|e| tls(&e))?, public_key.clone(), &signer)
        .map_err(|e| tls(&e))?;
    builder.add_extension(&BasicConstraints { ca: false, path_len_constraint: None }).map_err(|e| tls(&e))?;
    builder.add_extension(&KeyUsage(KeyUsages::DigitalSignature | KeyUsages::KeyEncipherment)).map_err(|e| tls(&e))?;
    builder.add_extension(&ExtendedKeyUsage(vec![CLIENT_AUTH])).map_err(|e| tls(&e))?;
    builder.add_extension(&SubjectKeyIdentifier::try_from(public_key.owned_to_ref()).map_err(|e| tls(&e))?).map_err(|e| tls(&e))?;
    // The authority key identifier is the CA's own subject key identifier, when it has one.
    if let Some(ca_key_id) = subject_key_identifier(&ca) {
        let authority = AuthorityKeyIdentifier { key_identifier: Some(ca_key_id), authority_cert_issuer: None, authority_cert_serial_number: None };
        builder.add_extension(&authority).map_err(|e| tls(&e))?;
    }
    let certificate = builder.build::<RawSignature>().map_err(|e| tls(&e))?;
    let pem = certificate.to_pem(LineEnding::LF).map_err(|e| tls(&e))?;
    Ok((pem, key.serialize_pem()))
}

/// The subject key identifier extension of `certificate`, if it has one.
fn subject_key_identifier(certificate: &Certificate) -> Option<OctetString> {
    use x509_cert::der::oid::AssociatedOid;
    let extension = certificate.tbs_certificate.extensions.as_ref()?.iter().find(|e| e.extn_id == SubjectKeyIdentifier::OID)?;
    SubjectKeyIdentifier::from_der(extension.extn_value.as_bytes()).ok().map(|id| id.0)
}

/// [`issue`] with the CA in `dir/pki`.
pub fn issue_in(dir: &Path, user: &str, groups: &[String], validity: Duration) -> Result<(String, String), ServeError> {
    let pki = dir.join("pki");
    let read = |f: &str| {
        let path = pki.join(f);
        std::fs::read_to_string(&path).map_err(|e| ServeError::io(format!("reading {}", path.display()), e))
    };
    issue(&read(super::tls::CA_CERT)?, &read(super::tls::CA_KEY)?, user, groups, validity)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ca() -> (String, String) {
        let dir = tempfile::tempdir().unwrap();
        super::super::tls::ensure_ca(dir.path()).unwrap()
    }

    #[test]
    fn every_group_is_an_organization_of_the_subject() {
        let (ca_pem, ca_key) = ca();
        let groups = vec!["app-team".to_string(), "ops".to_string(), "système, \"quoted\"".to_string()];
        let (cert, key) = issue(&ca_pem, &ca_key, "alice", &groups, Duration::from_secs(3600)).unwrap();
        assert!(key.contains("PRIVATE KEY"));
        let (_, der) = x509_parser::pem::parse_x509_pem(cert.as_bytes()).unwrap();
        let (_, parsed) = x509_parser::parse_x509_certificate(&der.contents).unwrap();
        let organizations: Vec<&str> = parsed.subject().iter_organization().map(|o| o.as_str().unwrap()).collect();
        assert_eq!(organizations, ["app-team", "ops", "système, \"quoted\""]);
        assert_eq!(parsed.subject().iter_common_name().next().unwrap().as_str().unwrap(), "alice");
        // Signed by the CA, for client authentication.
        let (_, ca_der) = x509_parser::pem::parse_x509_pem(ca_pem.as_bytes()).unwrap();
        let (_, ca_cert) = x509_parser::parse_x509_certificate(&ca_der.contents).unwrap();
        parsed.verify_signature(Some(ca_cert.public_key())).unwrap();
        assert_eq!(parsed.issuer(), ca_cert.subject());
        let eku = parsed.extended_key_usage().unwrap().unwrap();
        assert!(eku.value.client_auth && !eku.value.server_auth);
        assert!(!parsed.is_ca());
        let authority = parsed.get_extension_unique(&x509_parser::oid_registry::OID_X509_EXT_AUTHORITY_KEY_IDENTIFIER).unwrap().unwrap();
        let ca_subject_key = ca_cert.get_extension_unique(&x509_parser::oid_registry::OID_X509_EXT_SUBJECT_KEY_IDENTIFIER).unwrap().unwrap();
        match (authority.parsed_extension(), ca_subject_key.parsed_extension()) {
            (x509_parser::extensions::ParsedExtension::AuthorityKeyIdentifier(a), x509_parser::extensions::ParsedExtension::SubjectKeyIdentifier(s)) => {
                assert_eq!(a.key_identifier.as_ref().unwrap().0, s.0)
            }
            other => panic!("{other:?}"),
        }
        let lifetime = parsed.validity().not_after.timestamp() - parsed.validity().not_before.timestamp();
        assert_eq!(lifetime, 3600 + 60);
    }

    #[test]
    fn a_user_with_no_group_has_a_common_name_alone() {
        let (ca_pem, ca_key) = ca();
        let (cert, _) = issue(&ca_pem, &ca_key, "bob", &[], Duration::from_secs(60)).unwrap();
        let (_, der) = x509_parser::pem::parse_x509_pem(cert.as_bytes()).unwrap();
        let (_, parsed) = x509_parser::parse_x509_certificate(&der.contents).unwrap();
        assert_eq!(parsed.subject().to_string(), "CN=bob");
    }

    #[test]
    fn a_ca_of_each_key_kind_rcgen_reads_signs() {
        for algorithm in [&rcgen::PKCS_ECDSA_P384_SHA384, &rcgen::PKCS_ED25519] {
            let key = KeyPair::generate_for(algorithm).unwrap();
            let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
            params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
            params.distinguished_name.push(rcgen::DnType::CommonName, "other-ca");
            let ca = params.self_signed(&key).unwrap();
            let (cert, _) = issue(&ca.pem(), &key.serialize_pem(), "carol", &["a".into(), "b".into()], Duration::from_secs(60)).unwrap();
            let (_, der) = x509_parser::pem::parse_x509_pem(cert.as_bytes()).unwrap();
            let (_, parsed) = x509_parser::parse_x509_certificate(&der.contents).unwrap();
            let (_, ca_der) = x509_parser::pem::parse_x509_pem(ca.pem().as_bytes()).unwrap();
            let (_, ca_cert) = x509_parser::parse_x509_certificate(&ca_der.contents).unwrap();
            parsed.verify_signature(Some(ca_cert.public_key())).unwrap_or_else(|e| panic!("{algorithm:?}: {e}"));
            assert_eq!(parsed.subject().iter_organization().count(), 2);
        }
    }
}
