//! Secrets at rest: encrypted in the database file (grepped), read back in the clear, kept
//! across restarts, re-encrypted when a new key is put first; the data directory, database and
//! WAL private to the owner.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use kube::api::{ObjectMeta, PostParams};

use crate::support::TestServer;

const VALUE: &str = "correct-horse-battery-staple-0451";
/// A ConfigMap's value, stored in the clear: the grep must find it.
const PLAIN: &str = "plain-to-see-7b1e";

/// The database file and its WAL, as bytes (recent writes may be in either).
fn stored_bytes(dir: &Path) -> Vec<u8> {
    let mut bytes = std::fs::read(dir.join("oxplane.db")).unwrap();
    if let Ok(wal) = std::fs::read(dir.join("oxplane.db-wal")) {
        bytes.extend(wal);
    }
    bytes
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

async fn read_secret(server: &TestServer) -> Vec<u8> {
    let secrets: Api<Secret> = Api::namespaced(server.client().await, "default");
    let secret = secrets.get("db").await.unwrap();
    secret.data.unwrap()["password"].0.clone()
}

/// An encryption configuration with `keys` (name, base64 secret) for Secrets, in that order.
fn write_config(path: &Path, keys: &[(String, String)]) {
    let keys: Vec<_> = keys.iter().map(|(name, secret)| serde_json::json!({"name": name, "secret": secret})).collect();
    let config = serde_json::json!({
        "apiVersion": "apiserver.config.k8s.io/v1",
        "kind": "EncryptionConfiguration",
        "resources": [{"resources": ["secrets"], "providers": [{"aesgcm": {"keys": keys}}]}],
    });
    std::fs::write(path, config.to_string()).unwrap();
}

#[tokio::test]
async fn secrets_are_encrypted_at_rest_and_keys_rotate_by_rewriting() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("data");
    let server = TestServer::start_in_configured(&dir, |_| {}).await;
    let client = server.client().await;
    let secret = Secret {
        metadata: ObjectMeta { name: Some("db".into()), ..Default::default() },
        data: Some([("password".to_string(), ByteString(VALUE.as_bytes().to_vec()))].into()),
        ..Default::default()
    };
    Api::<Secret>::namespaced(client.clone(), "default").create(&PostParams::default(), &secret).await.unwrap();
    let config_map = ConfigMap {
        metadata: ObjectMeta { name: Some("plain".into()), ..Default::default() },
        data: Some([("note".to_string(), PLAIN.to_string())].into()),
        ..Default::default()
    };
    Api::<ConfigMap>::namespaced(client, "default").create(&PostParams::default(), &config_map).await.unwrap();
    assert_eq!(read_secret(&server).await, VALUE.as_bytes());

    // Private files: the directory oxplane created, the database, its WAL, the key.
    assert_eq!(mode(&dir), 0o700);
    for file in ["oxplane.db", "oxplane.db-wal", "encryption-config.yaml", "admin.token"] {
        assert_eq!(mode(&dir.join(file)), 0o600, "{file}");
    }
    // The ConfigMap's value is in the file in the clear (the grep finds what is there); the
    // Secret's is not, neither as sent (base64 in JSON) nor decoded.
    let bytes = stored_bytes(&dir);
    assert!(contains(&bytes, PLAIN.as_bytes()));
    let base64 = base64_of(VALUE);
    assert!(!contains(&bytes, VALUE.as_bytes()) && !contains(&bytes, base64.as_bytes()), "a Secret's value is in the database in the clear");
    assert!(contains(&bytes, b"k8s:enc:aesgcm:v1:key1:"));
    server.stop().await;

    // A restart reads what the generated key wrote.
    let server = TestServer::start_in_configured(&dir, |_| {}).await;
    assert_eq!(read_secret(&server).await, VALUE.as_bytes());
    server.stop().await;

    // Rotation: a new key first, the old one second; the start rewrites the Secret with key2.
    let generated = std::fs::read_to_string(dir.join("encryption-config.yaml")).unwrap();
    let generated: serde_json::Value = serde_saphyr::from_str(&generated).unwrap();
    let old_secret = generated["resources"][0]["providers"][0]["aesgcm"]["keys"][0]["secret"].as_str().unwrap().to_string();
    let new_secret = base64_of("0123456789abcdef0123456789abcdef");
    let rotated = parent.path().join("rotated.yaml");
    write_config(&rotated, &[("key2".into(), new_secret.clone()), ("key1".into(), old_secret)]);
    let server = TestServer::start_in_configured(&dir, |c| c.encryption_provider_config = Some(rotated.clone())).await;
    assert_eq!(read_secret(&server).await, VALUE.as_bytes());
    assert!(contains(&stored_bytes(&dir), b"k8s:enc:aesgcm:v1:key2:"));
    server.stop().await;

    // The old key can go now: nothing current needs it.
    let only_new = parent.path().join("only-new.yaml");
    write_config(&only_new, &[("key2".into(), new_secret)]);
    let server = TestServer::start_in_configured(&dir, |c| c.encryption_provider_config = Some(only_new.clone())).await;
    assert_eq!(read_secret(&server).await, VALUE.as_bytes());
    server.stop().await;
}

#[tokio::test]
async fn a_bad_encryption_configuration_stops_the_start_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("bad.yaml");
    write_config(&config, &[("key1".into(), base64_of("short"))]);
    let mut server = oxplane_apiserver::server::ServerConfig::new(dir.path().join("data"), "127.0.0.1:0");
    server.encryption_provider_config = Some(config);
    let error = match oxplane_apiserver::server::Server::start(server).await {
        Ok(_) => panic!("a 5-byte AES key was accepted"),
        Err(error) => error.to_string(),
    };
    assert!(error.contains("keys[0].secret: an AES key is 16, 24 or 32 bytes, this one is 5"), "{error}");
}

fn base64_of(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}
