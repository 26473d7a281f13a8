//! The providers of an encryption rule and the stored formats they read and write, the ones
//! kube-apiserver uses, so a value says how it was written:
//!
//! - `aesgcm`: `k8s:enc:aesgcm:v1:<key name>:` + 12-byte random nonce + AES-GCM ciphertext and
//!   tag, with the store key as additional authenticated data (a value moved to another key
//!   does not decrypt);
//! - `aescbc`: `k8s:enc:aescbc:v1:<key name>:` + 16-byte random IV + AES-CBC ciphertext with
//!   PKCS#7 padding (kept for configurations that name it; it does not authenticate);
//! - `identity`: the plain value, which never starts with `k8s:enc:`.

use aes_gcm::aead::{Aead, KeyInit, Payload};
use cbc::cipher::block_padding::Pkcs7;
use cbc::cipher::{BlockDecryptMut, BlockEncryptMut, KeyIvInit};
use rand::RngCore;

/// What every encrypted value starts with.
pub const ENCRYPTED_PREFIX: &[u8] = b"k8s:enc:";

/// A provider's cipher.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProviderKind {
    /// AES-GCM, authenticated.
    AesGcm,
    /// AES-CBC with PKCS#7 padding.
    AesCbc,
    /// No encryption.
    Identity,
}

impl ProviderKind {
    fn name(self) -> &'static str {
        match self {
            ProviderKind::AesGcm => "aesgcm",
            ProviderKind::AesCbc => "aescbc",
            ProviderKind::Identity => "identity",
        }
    }
}

/// One provider of a rule: a cipher and its keys, the first of which encrypts.
#[derive(Debug)]
pub struct Provider {
    kind: ProviderKind,
    keys: Vec<Key>,
}

struct Key {
    /// `k8s:enc:<provider>:v1:<name>:`
    prefix: Vec<u8>,
    secret: Vec<u8>,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print key material.
        f.debug_struct("Key").field("prefix", &String::from_utf8_lossy(&self.prefix)).finish_non_exhaustive()
    }
}

/// Why a stored value could not be read or a value could not be written.
#[derive(Debug, thiserror::Error)]
pub enum CryptError {
    /// No configured provider or key wrote this value.
    #[error("no provider in the encryption configuration can read it (it starts with {0:?}); add the key it was written with")]
    NoProvider(String),
    /// The key named by the value is configured but the value does not decrypt with it.
    #[error("it does not decrypt with key {0:?} (the key's secret changed, or the value is damaged)")]
    Damaged(String),
    /// The cipher refused to encrypt (a key of the wrong size).
    #[error("encrypting with key {0:?} failed")]
    Encrypt(String),
}

impl Provider {
    /// The identity provider.
    pub fn identity() -> Provider {
        Provider { kind: ProviderKind::Identity, keys: Vec::new() }
    }

    /// A keyed provider; `keys` are (name, secret of 16, 24 or 32 bytes), checked by the caller.
    pub fn keyed(kind: ProviderKind, keys: Vec<(String, Vec<u8>)>) -> Provider {
        let keys = keys
            .into_iter()
            .map(|(name, secret)| Key { prefix: format!("k8s:enc:{}:v1:{name}:", kind.name()).into_bytes(), secret })
            .collect();
        Provider { kind, keys }
    }

    /// Whether `value` was written by this provider with its first key, the one it writes with.
    pub fn wrote_with_first_key(&self, value: &[u8]) -> bool {
        match (self.kind, self.keys.first()) {
            (ProviderKind::Identity, _) => !value.starts_with(ENCRYPTED_PREFIX),
            (_, Some(key)) => value.starts_with(&key.prefix),
            (_, None) => false,
        }
    }

    /// Encrypts `plain`, stored under `store_key`, with the first key.
    pub fn encrypt(&self, store_key: &str, plain: &[u8]) -> Result<Vec<u8>, CryptError> {
        let Some(key) = self.keys.first() else { return Ok(plain.to_vec()) };
        let failed = || CryptError::Encrypt(String::from_utf8_lossy(&key.prefix).into_owned());
        let mut out = key.prefix.clone();
        match self.kind {
            ProviderKind::Identity => return Ok(plain.to_vec()),
            ProviderKind::AesGcm => {
                let mut nonce = [0u8; 12];
                rand::rng().fill_bytes(&mut nonce);
                out.extend_from_slice(&nonce);
                out.extend(gcm(&key.secret, &nonce, store_key, plain, true).ok_or_else(failed)?);
            }
            ProviderKind::AesCbc => {
                let mut iv = [0u8; 16];
                rand::rng().fill_bytes(&mut iv);
                out.extend_from_slice(&iv);
                out.extend(cbc_encrypt(&key.secret, &iv, plain).ok_or_else(failed)?);
            }
        }
        Ok(out)
    }

    /// Decrypts `stored` if this provider wrote it: `None` when it did not.
    pub fn decrypt(&self, store_key: &str, stored: &[u8]) -> Option<Result<Vec<u8>, CryptError>> {
        if self.kind == ProviderKind::Identity {
            return (!stored.starts_with(ENCRYPTED_PREFIX)).then(|| Ok(stored.to_vec()));
        }
        let key = self.keys.iter().find(|k| stored.starts_with(&k.prefix))?;
        let body = &stored[key.prefix.len()..];
        let name = || String::from_utf8_lossy(&key.prefix).into_owned();
        Some(match self.kind {
            ProviderKind::AesGcm if body.len() >= 12 => {
                gcm(&key.secret, &body[..12], store_key, &body[12..], false).ok_or_else(|| CryptError::Damaged(name()))
            }
            ProviderKind::AesCbc if body.len() >= 16 => {
                cbc_decrypt(&key.secret, &body[..16], &body[16..]).ok_or_else(|| CryptError::Damaged(name()))
            }
            _ => Err(CryptError::Damaged(name())),
        })
    }
}

/// AES-GCM with a 16, 24 or 32-byte key, the store key as associated data.
fn gcm(secret: &[u8], nonce: &[u8], store_key: &str, data: &[u8], encrypt: bool) -> Option<Vec<u8>> {
    fn run<C: Aead + KeyInit>(secret: &[u8], nonce: &[u8], aad: &[u8], data: &[u8], encrypt: bool) -> Option<Vec<u8>> {
        let cipher = C::new_from_slice(secret).ok()?;
        let nonce = aes_gcm::Nonce::<C::NonceSize>::from_slice(nonce);
        let payload = Payload { msg: data, aad };
        if encrypt { cipher.encrypt(nonce, payload).ok() } else { cipher.decrypt(nonce, payload).ok() }
    }
    let aad = store_key.as_bytes();
    match secret.len() {
        16 => run::<aes_gcm::Aes128Gcm>(secret, nonce, aad, data, encrypt),
        24 => run::<aes_gcm::AesGcm<aes::Aes192, aes_gcm::aead::consts::U12>>(secret, nonce, aad, data, encrypt),
        32 => run::<aes_gcm::Aes256Gcm>(secret, nonce, aad, data, encrypt),
        _ => None,
    }
}

fn cbc_encrypt(secret: &[u8], iv: &[u8], data: &[u8]) -> Option<Vec<u8>> {
    fn run<C>(secret: &[u8], iv: &[u8], data: &[u8]) -> Option<Vec<u8>>
    where
        cbc::Encryptor<C>: KeyIvInit + BlockEncryptMut,
        C: cbc::cipher::BlockCipher + cbc::cipher::BlockEncryptMut,
    {
        Some(cbc::Encryptor::<C>::new_from_slices(secret, iv).ok()?.encrypt_padded_vec_mut::<Pkcs7>(data))
    }
    match secret.len() {
        16 => run::<aes::Aes128>(secret, iv, data),
        24 => run::<aes::Aes192>(secret, iv, data),
        32 => run::<aes::Aes256>(secret, iv, data),
        _ => None,
    }
}

fn cbc_decrypt(secret: &[u8], iv: &[u8], data: &[u8]) -> Option<Vec<u8>> {
    fn run<C>(secret: &[u8], iv: &[u8], data: &[u8]) -> Option<Vec<u8>>
    where
        cbc::Decryptor<C>: KeyIvInit + BlockDecryptMut,
        C: cbc::cipher::BlockCipher + cbc::cipher::BlockDecryptMut,
    {
        cbc::Decryptor::<C>::new_from_slices(secret, iv).ok()?.decrypt_padded_vec_mut::<Pkcs7>(data).ok()
    }
    match secret.len() {
        16 => run::<aes::Aes128>(secret, iv, data),
        24 => run::<aes::Aes192>(secret, iv, data),
        32 => run::<aes::Aes256>(secret, iv, data),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn provider(kind: ProviderKind, len: usize) -> Provider {
        Provider::keyed(kind, vec![("k2".into(), vec![7; len]), ("k1".into(), vec![9; len])])
    }

    proptest! {
        #[test]
        fn every_cipher_and_key_size_round_trips(plain in proptest::collection::vec(any::<u8>(), 0..300), size in 0usize..3, cbc in any::<bool>()) {
            let kind = if cbc { ProviderKind::AesCbc } else { ProviderKind::AesGcm };
            let p = provider(kind, [16, 24, 32][size]);
            let stored = p.encrypt("/registry/core/secrets/ns/a", &plain).unwrap();
            prop_assert!(p.wrote_with_first_key(&stored));
            prop_assert!(stored.starts_with(ENCRYPTED_PREFIX));
            prop_assert!(plain.len() < 8 || !stored.windows(plain.len()).any(|w| w == plain.as_slice()));
            prop_assert_eq!(p.decrypt("/registry/core/secrets/ns/a", &stored).unwrap().unwrap(), plain);
        }
    }

    #[test]
    fn gcm_binds_the_value_to_its_key_and_detects_tampering() {
        let p = provider(ProviderKind::AesGcm, 32);
        let stored = p.encrypt("/registry/core/secrets/ns/a", b"hunter2").unwrap();
        assert!(matches!(p.decrypt("/registry/core/secrets/ns/b", &stored), Some(Err(CryptError::Damaged(_)))));
        let mut tampered = stored.clone();
        if let Some(last) = tampered.last_mut() {
            *last ^= 1;
        }
        assert!(matches!(p.decrypt("/registry/core/secrets/ns/a", &tampered), Some(Err(CryptError::Damaged(_)))));
    }

    #[test]
    fn older_keys_read_and_only_the_first_writes() {
        let old = Provider::keyed(ProviderKind::AesGcm, vec![("k1".into(), vec![9; 32])]);
        let stored = old.encrypt("/k", b"v").unwrap();
        assert!(stored.starts_with(b"k8s:enc:aesgcm:v1:k1:"));
        let rotated = provider(ProviderKind::AesGcm, 32);
        assert!(!rotated.wrote_with_first_key(&stored));
        assert_eq!(rotated.decrypt("/k", &stored).unwrap().unwrap(), b"v");
        assert!(Provider::identity().decrypt("/k", &stored).is_none());
        assert_eq!(Provider::identity().decrypt("/k", b"{}").unwrap().unwrap(), b"{}");
    }
}
