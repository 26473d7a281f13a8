//! Sprig's crypto functions through templates: fixed outputs where Sprig documents them
//! (Master Password's test vectors, error texts), properties where the output is random
//! (hashes verify, PEM keys parse and match their certificates, signatures verify, what is
//! encrypted decrypts).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use serde_json::{Value, json};
use x509_parser::prelude::*;

use crate::gotemplate::{Template, sprig};

fn render(text: &str) -> Result<String, String> {
    let mut funcs = crate::gotemplate::builtin_funcs();
    funcs.extend(sprig::funcs());
    let mut t = Template::new("t", Arc::new(funcs));
    t.parse(text).map_err(|e| e.0)?;
    t.execute(&json!({})).map_err(|e| e.0)
}

/// Renders a template printing `toJson` of a `certificate`, and returns its Cert and Key.
fn cert_and_key(text: &str) -> (String, String) {
    let out = render(text).unwrap();
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    (v["Cert"].as_str().unwrap().to_string(), v["Key"].as_str().unwrap().to_string())
}

fn der_of(pem_text: &str, tag: &str) -> Vec<u8> {
    let block = ::pem::parse(pem_text).unwrap();
    assert_eq!(block.tag(), tag, "{pem_text}");
    block.contents().to_vec()
}

#[test]
fn derive_password_matches_master_password_vectors() {
    for (text, want) in [
        (r#"{{derivePassword 1 "long" "password" "user" "example.com"}}"#, "ZedaFaxcZaso9*"),
        (r#"{{derivePassword 2 "long" "password" "user" "example.com"}}"#, "Fovi2@JifpTupx"),
        (r#"{{derivePassword 1 "maximum" "password" "user" "example.com"}}"#, "pf4zS1LjCg&LjhsZ7T2~"),
        (r#"{{derivePassword 1 "medium" "password" "user" "example.com"}}"#, "ZedJuz8$"),
        (r#"{{derivePassword 1 "basic" "password" "user" "example.com"}}"#, "pIS54PLs"),
        (r#"{{derivePassword 1 "short" "password" "user" "example.com"}}"#, "Zed5"),
        (r#"{{derivePassword 1 "pin" "password" "user" "example.com"}}"#, "6685"),
        (r#"{{derivePassword 1 "nope" "password" "user" "example.com"}}"#, "cannot find password template nope"),
    ] {
        assert_eq!(render(text).unwrap(), want, "{text}");
    }
}

#[test]
fn bcrypt_and_htpasswd_hashes_verify() {
    let hash = render(r#"{{bcrypt "myPassword"}}"#).unwrap();
    assert!(hash.starts_with("$2a$10$") && hash.len() == 60, "{hash}");
    assert!(bcrypt::verify("myPassword", &hash).unwrap());
    assert!(!bcrypt::verify("other", &hash).unwrap());
    let line = render(r#"{{htpasswd "myUser" "myPassword"}}"#).unwrap();
    let (user, hash) = line.split_once(':').unwrap();
    assert_eq!(user, "myUser");
    assert!(bcrypt::verify("myPassword", hash).unwrap());
    assert_eq!(render(r#"{{htpasswd "my:User" "p"}}"#).unwrap(), "invalid username: my:User");
    let long = "x".repeat(73);
    assert_eq!(
        render(&format!("{{{{bcrypt {long:?}}}}}")).unwrap(),
        "failed to encrypt string with bcrypt: bcrypt: password length exceeds 72 bytes"
    );
}

#[test]
fn aes_round_trips_and_reads_sprigs_documented_ciphertext() {
    assert_eq!(render(r#"{{"plaintext" | encryptAES "secretkey" | decryptAES "secretkey"}}"#).unwrap(), "plaintext");
    assert_eq!(render(r#"{{"30tEfhuJSVRhpG97XCuWgz2okj7L8vQ1s6V9zVUPeDQ=" | decryptAES "secretkey"}}"#).unwrap(), "plaintext");
    // A fresh IV each time: two encryptions differ, both decrypt.
    let a = render(r#"{{encryptAES "k" "sixteen bytes!!!"}}"#).unwrap();
    let b = render(r#"{{encryptAES "k" "sixteen bytes!!!"}}"#).unwrap();
    assert_ne!(a, b);
    // IV + two blocks (a full block of padding after 16 bytes).
    use base64::Engine;
    assert_eq!(base64::engine::general_purpose::STANDARD.decode(&a).unwrap().len(), 48);
    assert_eq!(render(&format!("{{{{decryptAES \"k\" {b:?}}}}}")).unwrap(), "sixteen bytes!!!");
    // A password longer than 32 bytes is cut, as Go's copy does.
    let long = "p".repeat(40);
    let c = render(&format!("{{{{encryptAES {long:?} \"x\"}}}}")).unwrap();
    assert_eq!(render(&format!("{{{{decryptAES {:?} {c:?}}}}}", "p".repeat(32))).unwrap(), "x");
    assert_eq!(render(r#"{{encryptAES "k" ""}}|{{decryptAES "k" ""}}"#).unwrap(), "|");
    let short = render(r#"{{decryptAES "k" "AAAA"}}"#).unwrap_err();
    assert!(short.ends_with("error calling decryptAES: runtime error: slice bounds out of range [:16] with capacity 3"), "{short}");
    let ragged = render(r#"{{decryptAES "k" "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}}"#).unwrap_err();
    assert!(ragged.ends_with("crypto/cipher: input not full blocks"), "{ragged}");
    let bad = render(r#"{{decryptAES "k" "!!!"}}"#).unwrap_err();
    assert!(bad.ends_with("illegal base64 data at input byte 0"), "{bad}");
}

#[test]
fn private_keys_parse_in_sprigs_formats() {
    use rsa::pkcs1::DecodeRsaPrivateKey;
    use rsa::traits::PublicKeyParts;
    assert_eq!(render(r#"{{genPrivateKey "foo"}}"#).unwrap(), "Unknown type foo");

    let ec = render(r#"{{genPrivateKey "ecdsa"}}"#).unwrap();
    p256::SecretKey::from_sec1_der(&der_of(&ec, "EC PRIVATE KEY")).unwrap();

    let ed = render(r#"{{genPrivateKey "ed25519"}}"#).unwrap();
    let der = der_of(&ed, "PRIVATE KEY");
    ring::signature::Ed25519KeyPair::from_pkcs8_maybe_unchecked(&der).unwrap();

    let rsa_pem = render(r#"{{genPrivateKey "rsa"}}"#).unwrap();
    let key = rsa::RsaPrivateKey::from_pkcs1_der(&der_of(&rsa_pem, "RSA PRIVATE KEY")).unwrap();
    assert_eq!(key.size() * 8, 4096);
    key.validate().unwrap();

    let dsa_pem = render(r#"{{genPrivateKey "dsa"}}"#).unwrap();
    let der = der_of(&dsa_pem, "DSA PRIVATE KEY");
    let ints = yasna::parse_der(&der, |r| {
        r.read_sequence(|r| {
            assert_eq!(r.next().read_i64()?, 0);
            (0..5).map(|_| r.next().read_bigint_bytes().map(|(b, _)| rsa::BigUint::from_bytes_be(&b))).collect::<Result<Vec<_>, _>>()
        })
    })
    .unwrap();
    let [p, q, g, y, x] = <[rsa::BigUint; 5]>::try_from(ints).unwrap();
    assert_eq!(p.bits(), 2048);
    assert_eq!(q.bits(), 256);
    assert_eq!(g.modpow(&x, &p), y, "y = g^x mod p");
    assert_eq!((&p - 1u32) % &q, rsa::BigUint::from(0u32), "q divides p - 1");
}

/// The certificate's public key is the one of the PEM key Sprig returned beside it.
fn assert_key_matches(cert: &X509Certificate<'_>, key_pem: &str) {
    let block = ::pem::parse(key_pem).unwrap();
    let public = match block.tag() {
        "RSA PRIVATE KEY" => {
            use rsa::pkcs1::DecodeRsaPrivateKey;
            use rsa::pkcs8::EncodePublicKey;
            let key = rsa::RsaPrivateKey::from_pkcs1_der(block.contents()).unwrap();
            key.to_public_key().to_public_key_der().unwrap().as_bytes().to_vec()
        }
        "EC PRIVATE KEY" => {
            use p256::pkcs8::EncodePublicKey;
            p256::SecretKey::from_sec1_der(block.contents()).unwrap().public_key().to_public_key_der().unwrap().as_bytes().to_vec()
        }
        other => panic!("unexpected key type {other}"),
    };
    assert_eq!(cert.public_key().raw, public.as_slice());
}

fn cn(name: &X509Name<'_>) -> String {
    name.iter_common_name().next().unwrap().as_str().unwrap().to_string()
}

#[test]
fn ca_and_signed_certificates_verify() {
    let out = render(
        r#"{{- $ca := genCA "foo-ca" 365 -}}
{{- $cert := genSignedCert "foo.com" (list "10.0.0.1" "10.0.0.2") (list "bar.com" "bat.com") 30 $ca -}}
{{- dict "ca" $ca "cert" $cert | toJson -}}"#,
    )
    .unwrap();
    let v: Value = serde_json::from_str(&out).unwrap();
    let ca_der = der_of(v["ca"]["Cert"].as_str().unwrap(), "CERTIFICATE");
    let (_, ca) = parse_x509_certificate(&ca_der).unwrap();
    assert_eq!(cn(ca.subject()), "foo-ca");
    assert_eq!(cn(ca.issuer()), "foo-ca");
    assert!(ca.is_ca());
    assert!(ca.key_usage().unwrap().unwrap().value.key_cert_sign());
    let days = (ca.validity().not_after.timestamp() - ca.validity().not_before.timestamp()) / 86400;
    assert_eq!(days, 365);
    ca.verify_signature(None).unwrap();
    assert_key_matches(&ca, v["ca"]["Key"].as_str().unwrap());

    let der = der_of(v["cert"]["Cert"].as_str().unwrap(), "CERTIFICATE");
    let (_, cert) = parse_x509_certificate(&der).unwrap();
    assert_eq!(cn(cert.subject()), "foo.com");
    assert_eq!(cert.issuer(), ca.subject());
    assert!(!cert.is_ca());
    cert.verify_signature(Some(ca.public_key())).unwrap();
    assert!(cert.verify_signature(None).is_err(), "not self-signed");
    let sans: Vec<String> = cert
        .subject_alternative_name()
        .unwrap()
        .unwrap()
        .value
        .general_names
        .iter()
        .map(|n| match n {
            GeneralName::DNSName(d) => d.to_string(),
            GeneralName::IPAddress(ip) => ip.iter().map(u8::to_string).collect::<Vec<_>>().join("."),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(sans, ["10.0.0.1", "10.0.0.2", "bar.com", "bat.com"]);
    let eku = cert.extended_key_usage().unwrap().unwrap().value;
    assert!(eku.server_auth && eku.client_auth);
    let usage = cert.key_usage().unwrap().unwrap().value;
    assert!(usage.digital_signature() && usage.key_encipherment() && !usage.key_cert_sign());
    assert_key_matches(&cert, v["cert"]["Key"].as_str().unwrap());
}

#[test]
fn certificates_with_given_keys_and_custom_cas() {
    // An EC key for a self-signed certificate; the key comes back as given.
    let (cert_pem, key_pem) = cert_and_key(
        r#"{{- $key := genPrivateKey "ecdsa" -}}{{- genSelfSignedCertWithKey "me" nil nil 1 $key | toJson -}}"#,
    );
    let der = der_of(&cert_pem, "CERTIFICATE");
    let (_, cert) = parse_x509_certificate(&der).unwrap();
    cert.verify_signature(None).unwrap();
    assert!(cert.subject_alternative_name().unwrap().is_none());
    assert_key_matches(&cert, &key_pem);

    // A CA rebuilt from base64 by buildCustomCert signs like the one genCAWithKey made.
    let out = render(
        r#"{{- $ca := genCAWithKey "ca" 10 (genPrivateKey "ecdsa") -}}
{{- $custom := buildCustomCert ($ca.Cert | b64enc) ($ca.Key | b64enc) -}}
{{- $cert := genSignedCertWithKey "leaf" nil (list "leaf.local") 1 $custom (genPrivateKey "ecdsa") -}}
{{- dict "ca" $ca "custom" $custom "cert" $cert | toJson -}}"#,
    )
    .unwrap();
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["ca"], v["custom"]);
    let ca_der = der_of(v["ca"]["Cert"].as_str().unwrap(), "CERTIFICATE");
    let (_, ca) = parse_x509_certificate(&ca_der).unwrap();
    let der = der_of(v["cert"]["Cert"].as_str().unwrap(), "CERTIFICATE");
    let (_, leaf) = parse_x509_certificate(&der).unwrap();
    leaf.verify_signature(Some(ca.public_key())).unwrap();
    assert_key_matches(&leaf, v["cert"]["Key"].as_str().unwrap());
}

#[test]
fn certificate_errors_are_sprigs() {
    for (text, want) in [
        (r#"{{buildCustomCert "!!" "a2V5"}}"#, "error calling buildCustomCert: unable to decode base64 certificate"),
        (r#"{{buildCustomCert "Y2VydA==" "!!"}}"#, "error calling buildCustomCert: unable to decode base64 private key"),
        (r#"{{buildCustomCert "Y2VydA==" "a2V5"}}"#, "error calling buildCustomCert: unable to decode certificate"),
        (r#"{{genCAWithKey "x" 1 "no pem"}}"#, "error calling genCAWithKey: parsing private key: no PEM data in input"),
        (
            r#"{{genSelfSignedCert "x" (list "not-an-ip") nil 1}}"#,
            "error calling genSelfSignedCert: error parsing ip: not-an-ip",
        ),
        (r#"{{genSelfSignedCert "x" (list 1) nil 1}}"#, "error calling genSelfSignedCert: error parsing ip: 1 is not a string"),
        (
            r#"{{genCAWithKey "x" 1 (genPrivateKey "dsa")}}"#,
            "error calling genCAWithKey: error creating certificate: x509: certificate private key does not implement crypto.Signer",
        ),
        (
            r#"{{genSignedCert "x" nil nil 1 (dict "Cert" "" "Key" "")}}"#,
            "error calling genSignedCert: unable to decode certificate",
        ),
    ] {
        let got = render(text).unwrap_err();
        assert!(got.ends_with(want), "{text}\n want …{want}\n  got {got}");
    }
}
