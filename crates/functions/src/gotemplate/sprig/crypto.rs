//! Sprig's password, key, certificate and AES functions: `bcrypt`, `htpasswd`,
//! `derivePassword`, `genPrivateKey`, `buildCustomCert`, `genCA`(`WithKey`),
//! `genSelfSignedCert`(`WithKey`), `genSignedCert`(`WithKey`), `encryptAES`, `decryptAES`.
//!
//! Every primitive comes from a RustCrypto or ring-based crate (`bcrypt`, `scrypt`, `hmac`,
//! `rsa`, `dsa`, `p256`, `aes`/`cbc`, `rcgen` for X.509); what is written here is only Sprig's
//! glue: its key formats (PKCS#1 `RSA PRIVATE KEY`, SEC1 `EC PRIVATE KEY`, OpenSSL's
//! `DSA PRIVATE KEY`, PKCS#8 `PRIVATE KEY` for Ed25519), its certificate templates (RSA 2048
//! keys, a random 128-bit serial, digital signature and key encipherment usages, server and
//! client auth), its AES-256-CBC layout (IV first, PKCS#7 padding, a password zero-padded or
//! cut to 32 bytes) and the Master Password algorithm (v3) behind `derivePassword`.
//! Like Sprig, the functions that return a plain string report failures as that string
//! (`Unknown type x`, `failed to encrypt string with bcrypt: ...`); the others as the call's
//! error.

use base64::Engine;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType, SerialNumber,
};
use serde_json::{Map, Value, json};

use super::{i, s};
use crate::gotemplate::{Func, Funcs, P};

const RSA_CERT_BITS: usize = 2048;
const RSA_KEY_BITS: usize = 4096;

/// Registers the functions.
pub(super) fn add(f: &mut Funcs) {
    use P::{Int, Map as M, Slice, Str};
    f.insert("bcrypt", Func::pure(&[Str], |a| Ok(Value::String(bcrypt_hash(s(a[0]))))));
    f.insert("htpasswd", Func::pure(&[Str, Str], |a| Ok(Value::String(htpasswd(s(a[0]), s(a[1]))))));
    f.insert("derivePassword", Func::pure(&[Int, Str, Str, Str, Str], |a| {
        let counter = u32::try_from(i(a[0])).map_err(|_| format!("counter {} is not a uint32", i(a[0])))?;
        Ok(Value::String(derive_password(counter, s(a[1]), s(a[2]), s(a[3]), s(a[4]))))
    }));
    f.insert("genPrivateKey", Func::pure(&[Str], |a| Ok(Value::String(gen_private_key(s(a[0]))))));
    f.insert("buildCustomCert", Func::pure(&[Str, Str], |a| build_custom_cert(s(a[0]), s(a[1]))));
    f.insert("genCA", Func::pure(&[Str, Int], |a| {
        let key = PrivateKey::rsa(RSA_CERT_BITS)?;
        gen_ca(s(a[0]), i(a[1]), &key)
    }));
    f.insert("genCAWithKey", Func::pure(&[Str, Int, Str], |a| {
        let key = PrivateKey::parse(s(a[2])).map_err(|e| format!("parsing private key: {e}"))?;
        gen_ca(s(a[0]), i(a[1]), &key)
    }));
    f.insert("genSelfSignedCert", Func::pure(&[Str, Slice, Slice, Int], |a| {
        let key = PrivateKey::rsa(RSA_CERT_BITS)?;
        gen_cert(s(a[0]), a[1], a[2], i(a[3]), &key, None)
    }));
    f.insert("genSelfSignedCertWithKey", Func::pure(&[Str, Slice, Slice, Int, Str], |a| {
        let key = PrivateKey::parse(s(a[4])).map_err(|e| format!("parsing private key: {e}"))?;
        gen_cert(s(a[0]), a[1], a[2], i(a[3]), &key, None)
    }));
    f.insert("genSignedCert", Func::pure(&[Str, Slice, Slice, Int, M], |a| {
        let key = PrivateKey::rsa(RSA_CERT_BITS)?;
        gen_cert(s(a[0]), a[1], a[2], i(a[3]), &key, Some(a[4]))
    }));
    f.insert("genSignedCertWithKey", Func::pure(&[Str, Slice, Slice, Int, M, Str], |a| {
        let key = PrivateKey::parse(s(a[5])).map_err(|e| format!("parsing private key: {e}"))?;
        gen_cert(s(a[0]), a[1], a[2], i(a[3]), &key, Some(a[4]))
    }));
    f.insert("encryptAES", Func::pure(&[Str, Str], |a| Ok(Value::String(encrypt_aes(s(a[0]), s(a[1]))))));
    f.insert("decryptAES", Func::pure(&[Str, Str], |a| decrypt_aes(s(a[0]), s(a[1])).map(Value::String)));
}

/// Go's `bcrypt.DefaultCost`.
const BCRYPT_COST: u32 = 10;

/// A `$2a$` hash at cost 10, as Go's `golang.org/x/crypto/bcrypt` writes it.
fn bcrypt_hash(password: &str) -> String {
    if password.len() > 72 {
        // Go's bcrypt refuses what it would otherwise cut silently.
        return "failed to encrypt string with bcrypt: bcrypt: password length exceeds 72 bytes".into();
    }
    match bcrypt::hash_with_result(password, BCRYPT_COST) {
        Ok(parts) => parts.format_for_version(bcrypt::Version::TwoA),
        Err(e) => format!("failed to encrypt string with bcrypt: {e}"),
    }
}

fn htpasswd(user: &str, password: &str) -> String {
    if user.contains(':') {
        return format!("invalid username: {user}");
    }
    format!("{user}:{}", bcrypt_hash(password))
}

/// The Master Password algorithm's salt scope.
const MASTER_PASSWORD_SCOPE: &[u8] = b"com.lyndir.masterpassword";

/// Master Password's password templates per type.
fn password_templates(kind: &str) -> Option<&'static [&'static str]> {
    Some(match kind {
        "maximum" => &["anoxxxxxxxxxxxxxxxxx", "axxxxxxxxxxxxxxxxxno"],
        "long" => &[
            "CvcvnoCvcvCvcv", "CvcvCvcvnoCvcv", "CvcvCvcvCvcvno", "CvccnoCvcvCvcv", "CvccCvcvnoCvcv",
            "CvccCvcvCvcvno", "CvcvnoCvccCvcv", "CvcvCvccnoCvcv", "CvcvCvccCvcvno", "CvcvnoCvcvCvcc",
            "CvcvCvcvnoCvcc", "CvcvCvcvCvccno", "CvccnoCvccCvcv", "CvccCvccnoCvcv", "CvccCvccCvcvno",
            "CvcvnoCvccCvcc", "CvcvCvccnoCvcc", "CvcvCvccCvccno", "CvccnoCvcvCvcc", "CvccCvcvnoCvcc",
            "CvccCvcvCvccno",
        ],
        "medium" => &["CvcnoCvc", "CvcCvcno"],
        "short" => &["Cvcn"],
        "basic" => &["aaanaaan", "aannaaan", "aaannaaa"],
        "pin" => &["nnnn"],
        _ => return None,
    })
}

/// The characters one template letter stands for.
fn template_characters(c: u8) -> &'static [u8] {
    match c {
        b'V' => b"AEIOU",
        b'C' => b"BCDFGHJKLMNPQRSTVWXYZ",
        b'v' => b"aeiou",
        b'c' => b"bcdfghjklmnpqrstvwxyz",
        b'A' => b"AEIOUBCDFGHJKLMNPQRSTVWXYZ",
        b'a' => b"AEIOUaeiouBCDFGHJKLMNPQRSTVWXYZbcdfghjklmnpqrstvwxyz",
        b'n' => b"0123456789",
        b'o' => b"@&%?,=[]_:-+*$#!'^~;()/.",
        _ => b"AEIOUaeiouBCDFGHJKLMNPQRSTVWXYZbcdfghjklmnpqrstvwxyz0123456789!@#$%^&*()",
    }
}

/// Master Password v3: scrypt(password, scope ‖ len(user) ‖ user, N=32768, r=8, p=2) as the
/// key of an HMAC-SHA256 over scope ‖ len(site) ‖ site ‖ counter, whose bytes pick the template
/// and each character.
fn derive_password(counter: u32, kind: &str, password: &str, user: &str, site: &str) -> String {
    use hmac::Mac;
    let Some(templates) = password_templates(kind) else {
        return format!("cannot find password template {kind}");
    };
    let mut salt = MASTER_PASSWORD_SCOPE.to_vec();
    salt.extend_from_slice(&(user.len() as u32).to_be_bytes());
    salt.extend_from_slice(user.as_bytes());
    let mut key = [0u8; 64];
    let derived = scrypt::Params::new(15, 8, 2, 64)
        .map_err(|e| e.to_string())
        .and_then(|params| scrypt::scrypt(password.as_bytes(), &salt, &params, &mut key).map_err(|e| e.to_string()));
    if let Err(e) = derived {
        return format!("failed to derive password: {e}");
    }
    let mut message = MASTER_PASSWORD_SCOPE.to_vec();
    message.extend_from_slice(&(site.len() as u32).to_be_bytes());
    message.extend_from_slice(site.as_bytes());
    message.extend_from_slice(&counter.to_be_bytes());
    let Ok(mut mac) = hmac::Hmac::<sha2::Sha256>::new_from_slice(&key) else {
        return "failed to derive password: invalid key length".into();
    };
    mac.update(&message);
    let seed = mac.finalize().into_bytes();
    let template = templates[usize::from(seed[0]) % templates.len()];
    template
        .bytes()
        .enumerate()
        .map(|(n, c)| {
            let chars = template_characters(c);
            char::from(chars[usize::from(seed[n + 1]) % chars.len()])
        })
        .collect()
}

/// A private key of a kind Sprig generates or reads.
enum PrivateKey {
    Rsa(Box<rsa::RsaPrivateKey>),
    Ec(p256::SecretKey),
    /// Ed25519, as its PKCS#8 v1 document.
    Ed25519(Vec<u8>),
    /// DSA: Go cannot sign certificates with it, so it is only ever printed.
    Dsa(Vec<u8>),
}

/// A key's PEM with the line endings Go's `pem.Encode` writes.
fn pem_text(tag: &str, der: &[u8]) -> String {
    pem::encode_config(&pem::Pem::new(tag, der), pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF))
}

/// The OID of Ed25519 keys (RFC 8410).
const ED25519_OID: &str = "1.3.101.112";

impl PrivateKey {
    fn rsa(bits: usize) -> Result<PrivateKey, String> {
        rsa::RsaPrivateKey::new(&mut rsa::rand_core::OsRng, bits)
            .map(|k| PrivateKey::Rsa(Box::new(k)))
            .map_err(|e| format!("error generating rsa key: {e}"))
    }

    fn ed25519() -> Result<PrivateKey, String> {
        use rand::RngCore;
        let mut seed = [0u8; 32];
        rand::rng().fill_bytes(&mut seed);
        // PKCS#8 v1 (no public key), as Go's MarshalPKCS8PrivateKey writes it.
        let mut inner = vec![0x04, 0x20];
        inner.extend_from_slice(&seed);
        let der = yasna::construct_der(|w| {
            w.write_sequence(|w| {
                w.next().write_u8(0);
                w.next().write_sequence(|w| w.next().write_oid(&yasna::models::ObjectIdentifier::from_slice(&[1, 3, 101, 112])));
                w.next().write_bytes(&inner);
            })
        });
        Ok(PrivateKey::Ed25519(der))
    }

    fn dsa() -> Result<PrivateKey, String> {
        let mut rng = rsa::rand_core::OsRng;
        let components = dsa::Components::generate(&mut rng, dsa::KeySize::DSA_2048_256);
        let key = dsa::SigningKey::generate(&mut rng, components);
        let public = key.verifying_key();
        let c = public.components();
        // OpenSSL's DSAPrivateKey: SEQUENCE { version 0, p, q, g, y, x }.
        let der = yasna::construct_der(|w| {
            w.write_sequence(|w| {
                w.next().write_u8(0);
                for n in [c.p(), c.q(), c.g(), public.y(), key.x()] {
                    w.next().write_bigint_bytes(&n.to_bytes_be(), true);
                }
            })
        });
        Ok(PrivateKey::Dsa(der))
    }

    /// Go's `parsePrivateKeyPEM`: PKCS#8, PKCS#1 RSA, SEC1 EC or OpenSSL DSA.
    fn parse(text: &str) -> Result<PrivateKey, String> {
        use rsa::pkcs1::DecodeRsaPrivateKey;
        use rsa::pkcs8::DecodePrivateKey;
        let block = first_pem(text).ok_or("no PEM data in input")?;
        let tag = block.tag();
        if tag == "PRIVATE KEY" {
            let info = rsa::pkcs8::PrivateKeyInfo::try_from(block.contents())
                .map_err(|e| format!("decoding PEM as PKCS#8: x509: failed to parse private key: {e}"))?;
            let oid = info.algorithm.oid.to_string();
            return match oid.as_str() {
                "1.2.840.113549.1.1.1" => rsa::RsaPrivateKey::from_pkcs8_der(block.contents())
                    .map(|k| PrivateKey::Rsa(Box::new(k)))
                    .map_err(|e| format!("decoding PEM as PKCS#8: x509: failed to parse RSA private key embedded in PKCS#8: {e}")),
                "1.2.840.10045.2.1" => p256::SecretKey::from_pkcs8_der(block.contents())
                    .map(PrivateKey::Ec)
                    .map_err(|_| "decoding PEM as PKCS#8: x509: failed to parse EC private key embedded in PKCS#8: x509: unsupported elliptic curve (oxplane: only P-256)".to_string()),
                ED25519_OID => Ok(PrivateKey::Ed25519(block.contents().to_vec())),
                other => Err(format!("decoding PEM as PKCS#8: x509: PKCS#8 wrapping contained private key with unknown algorithm: {other}")),
            };
        }
        let Some(kind) = tag.strip_suffix(" PRIVATE KEY") else {
            return Err(format!("no private key data in PEM block of type {tag}"));
        };
        match kind {
            "RSA" => rsa::RsaPrivateKey::from_pkcs1_der(block.contents())
                .map(|k| PrivateKey::Rsa(Box::new(k)))
                .map_err(|e| format!("parsing RSA private key from PEM: {e}")),
            "EC" => p256::SecretKey::from_sec1_der(block.contents())
                .map(PrivateKey::Ec)
                .map_err(|_| "parsing EC private key from PEM: x509: failed to parse EC private key (oxplane: only P-256)".to_string()),
            "DSA" => {
                let parsed = yasna::parse_der(block.contents(), |r| {
                    r.read_sequence(|r| {
                        r.next().read_i64()?;
                        for _ in 0..5 {
                            r.next().read_bigint_bytes()?;
                        }
                        Ok(())
                    })
                });
                parsed.map(|()| PrivateKey::Dsa(block.contents().to_vec())).map_err(|e| format!("parsing DSA private key from PEM: {e}"))
            }
            _ => Err(format!("invalid private key type {tag}")),
        }
    }

    /// The key's PEM in Sprig's format for its kind.
    fn pem(&self) -> Result<String, String> {
        use rsa::pkcs1::EncodeRsaPrivateKey;
        Ok(match self {
            PrivateKey::Rsa(k) => pem_text("RSA PRIVATE KEY", k.to_pkcs1_der().map_err(|e| e.to_string())?.as_bytes()),
            PrivateKey::Ec(k) => pem_text("EC PRIVATE KEY", &k.to_sec1_der().map_err(|e| e.to_string())?),
            PrivateKey::Ed25519(der) => pem_text("PRIVATE KEY", der),
            PrivateKey::Dsa(der) => pem_text("DSA PRIVATE KEY", der),
        })
    }

    /// The key as rcgen signs with it.
    fn signer(&self) -> Result<KeyPair, String> {
        use rsa::pkcs8::EncodePrivateKey;
        let der = match self {
            PrivateKey::Rsa(k) => k.to_pkcs8_der().map_err(|e| e.to_string())?.as_bytes().to_vec(),
            PrivateKey::Ec(k) => k.to_pkcs8_der().map_err(|e| e.to_string())?.as_bytes().to_vec(),
            PrivateKey::Ed25519(der) => der.clone(),
            // Go: *dsa.PrivateKey is no crypto.Signer.
            PrivateKey::Dsa(_) => return Err("x509: certificate private key does not implement crypto.Signer".into()),
        };
        let der = rustls::pki_types::PrivatePkcs8KeyDer::from(der);
        KeyPair::try_from(&der).map_err(|e| e.to_string())
    }
}

/// The first PEM block of a text, skipping anything around it as Go's `pem.Decode` does.
fn first_pem(text: &str) -> Option<pem::Pem> {
    let start = text.find("-----BEGIN ")?;
    pem::parse_many(&text[start..]).ok()?.into_iter().next()
}

/// `genPrivateKey`: a new key's PEM, or Sprig's message for an unknown type.
fn gen_private_key(kind: &str) -> String {
    let key = match kind {
        "" | "rsa" => PrivateKey::rsa(RSA_KEY_BITS),
        "dsa" => PrivateKey::dsa(),
        "ecdsa" => Ok(PrivateKey::Ec(p256::SecretKey::random(&mut rsa::rand_core::OsRng))),
        "ed25519" => PrivateKey::ed25519(),
        other => return format!("Unknown type {other}"),
    };
    match key.and_then(|k| k.pem()) {
        Ok(pem) => pem,
        Err(e) => format!("failed to generate private key: {e}"),
    }
}

/// Sprig's `certificate` struct as template data.
fn certificate(cert: String, key: String) -> Value {
    json!({"Cert": cert, "Key": key})
}

fn build_custom_cert(b64_cert: &str, b64_key: &str) -> Result<Value, String> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let cert = b64.decode(b64_cert).map_err(|_| "unable to decode base64 certificate")?;
    let key = b64.decode(b64_key).map_err(|_| "unable to decode base64 private key")?;
    let cert = String::from_utf8_lossy(&cert).into_owned();
    let key = String::from_utf8_lossy(&key).into_owned();
    let block = first_pem(&cert).ok_or("unable to decode certificate")?;
    x509_parser::parse_x509_certificate(block.contents())
        .map_err(|e| format!("error parsing certificate: decodedCert.Bytes: x509: malformed certificate ({e})"))?;
    PrivateKey::parse(&key).map_err(|e| format!("error parsing private key: {e}"))?;
    Ok(certificate(cert, key))
}

/// Sprig's base template: CN, IP and DNS names, now to now + days, a random 128-bit serial,
/// digital signature and key encipherment, server and client auth, basic constraints set.
fn base_params(cn: &str, ips: &Value, dns: &Value, days: i64) -> Result<CertificateParams, String> {
    let mut params = CertificateParams::default();
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, cn);
    params.distinguished_name = name;
    for ip in ips.as_array().into_iter().flatten() {
        let Some(text) = ip.as_str() else {
            return Err(format!("error parsing ip: {} is not a string", crate::gotemplate::sprig::strval(ip)));
        };
        let addr = text.parse().map_err(|_| format!("error parsing ip: {text}"))?;
        params.subject_alt_names.push(SanType::IpAddress(addr));
    }
    for name in dns.as_array().into_iter().flatten() {
        let Some(text) = name.as_str() else {
            return Err(format!(
                "error processing alternate dns name: {} is not a string",
                crate::gotemplate::sprig::strval(name)
            ));
        };
        let ia5 = text.to_string().try_into().map_err(|_| format!("error processing alternate dns name: {text} is not ASCII"))?;
        params.subject_alt_names.push(SanType::DnsName(ia5));
    }
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now;
    params.not_after = now + time::Duration::days(days);
    let mut serial = [0u8; 16];
    {
        use rand::RngCore;
        rand::rng().fill_bytes(&mut serial);
    }
    params.serial_number = Some(SerialNumber::from_slice(&serial));
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
    params.is_ca = IsCa::ExplicitNoCa;
    Ok(params)
}

fn gen_ca(cn: &str, days: i64, key: &PrivateKey) -> Result<Value, String> {
    let mut params = base_params(cn, &Value::Null, &Value::Null, days)?;
    params.key_usages.push(KeyUsagePurpose::KeyCertSign);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let signer = key.signer().map_err(|e| format!("error creating certificate: {e}"))?;
    let cert = params.self_signed(&signer).map_err(|e| format!("error creating certificate: {e}"))?;
    Ok(certificate(cert.pem(), key.pem()?))
}

/// A certificate for `key`, self-signed or signed by `ca` (Sprig's `certificate`).
fn gen_cert(cn: &str, ips: &Value, dns: &Value, days: i64, key: &PrivateKey, ca: Option<&Value>) -> Result<Value, String> {
    let params = base_params(cn, ips, dns, days)?;
    let signer = key.signer().map_err(|e| format!("error creating certificate: {e}"))?;
    let cert = match ca {
        None => params.self_signed(&signer),
        Some(ca) => {
            let ca = ca.as_object().cloned().unwrap_or_else(Map::new);
            let ca_cert = ca.get("Cert").and_then(Value::as_str).unwrap_or_default();
            let ca_key = ca.get("Key").and_then(Value::as_str).unwrap_or_default();
            let block = first_pem(ca_cert).ok_or("unable to decode certificate")?;
            x509_parser::parse_x509_certificate(block.contents())
                .map_err(|e| format!("error parsing certificate: decodedSignerCert.Bytes: x509: malformed certificate ({e})"))?;
            let ca_key = PrivateKey::parse(ca_key).map_err(|e| format!("error parsing private key: {e}"))?;
            let ca_signer = ca_key.signer().map_err(|e| format!("error creating certificate: {e}"))?;
            let issuer = Issuer::from_ca_cert_pem(&pem_text("CERTIFICATE", block.contents()), ca_signer)
                .map_err(|e| format!("error parsing certificate: decodedSignerCert.Bytes: {e}"))?;
            params.signed_by(&signer, &issuer)
        }
    }
    .map_err(|e| format!("error creating certificate: {e}"))?;
    Ok(certificate(cert.pem(), key.pem()?))
}

/// The password as an AES-256 key: zero-padded or cut to 32 bytes.
fn aes_key(password: &str) -> [u8; 32] {
    let mut key = [0u8; 32];
    let n = password.len().min(32);
    key[..n].copy_from_slice(&password.as_bytes()[..n]);
    key
}

/// AES-256-CBC with a random IV written first and PKCS#7 padding, in base64.
fn encrypt_aes(password: &str, plaintext: &str) -> String {
    use aes::cipher::{BlockEncryptMut, KeyIvInit, block_padding::Pkcs7};
    if plaintext.is_empty() {
        return String::new();
    }
    let mut iv = [0u8; 16];
    {
        use rand::RngCore;
        rand::rng().fill_bytes(&mut iv);
    }
    let encryptor = cbc::Encryptor::<aes::Aes256>::new(&aes_key(password).into(), &iv.into());
    let mut out = iv.to_vec();
    out.extend(encryptor.encrypt_padded_vec_mut::<Pkcs7>(plaintext.as_bytes()));
    base64::engine::general_purpose::STANDARD.encode(out)
}

/// The inverse of [`encrypt_aes`]; the padding is taken off as Sprig does (by the last
/// byte's value, unchecked). Input Go would panic on is an error naming the cause.
fn decrypt_aes(password: &str, text: &str) -> Result<String, String> {
    use aes::cipher::{BlockDecryptMut, KeyIvInit, block_padding::NoPadding};
    if text.is_empty() {
        return Ok(String::new());
    }
    let data = base64::engine::general_purpose::STANDARD.decode(text).map_err(|e| super::misc::base64_error(&e))?;
    if data.len() < 16 {
        return Err(format!("runtime error: slice bounds out of range [:16] with capacity {}", data.len()));
    }
    let (iv, body) = data.split_at(16);
    if body.len() % 16 != 0 {
        return Err("crypto/cipher: input not full blocks".into());
    }
    let mut iv_block = [0u8; 16];
    iv_block.copy_from_slice(iv);
    let decryptor = cbc::Decryptor::<aes::Aes256>::new(&aes_key(password).into(), &iv_block.into());
    let plain = decryptor.decrypt_padded_vec_mut::<NoPadding>(body).map_err(|e| e.to_string())?;
    let Some(&pad) = plain.last() else {
        return Err("runtime error: index out of range [-1]".into());
    };
    let end = plain.len().checked_sub(usize::from(pad)).ok_or_else(|| {
        format!("runtime error: slice bounds out of range [:{}]", plain.len() as i64 - i64::from(pad))
    })?;
    Ok(String::from_utf8_lossy(&plain[..end]).into_owned())
}

#[cfg(test)]
mod tests;
