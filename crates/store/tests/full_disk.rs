//! A full disk fails writes with a clear error and loses nothing already acknowledged.
//!
//! The child (this test binary, re-run with the ignored `full_disk_child` test) runs in a
//! private mount namespace with a small tmpfs as its data directory, so the disk really fills
//! up. It needs the rights to create a mount namespace (root, as in CI, or unprivileged user
//! namespaces).

use std::path::Path;
use std::process::Command;

use bytes::Bytes;
use oxplane_store::sqlite::{SqliteOptions, SqliteStore};
use oxplane_store::{CompactionPolicy, RangeRequest, Store, StoreError, Write, WriteResult};

const DIR_VAR: &str = "OXPLANE_FULL_DISK_DIR";

fn options() -> SqliteOptions {
    SqliteOptions { compaction: CompactionPolicy::disabled(), ..SqliteOptions::default() }
}

#[test]
#[ignore = "runs only as the child of `a_full_disk_fails_writes_and_loses_nothing`"]
fn full_disk_child() {
    let Ok(dir) = std::env::var(DIR_VAR) else { return };
    let dir = Path::new(&dir);
    // Reserve some space to free later.
    let filler = dir.join("filler");
    std::fs::write(&filler, vec![0u8; 512 * 1024]).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let store = SqliteStore::open(dir, options()).unwrap();
        let mut acked = Vec::new();
        let value = Bytes::from(vec![b'v'; 1024]);
        let mut failure = None;
        for i in 0..100_000 {
            let key = format!("/full/{i:06}");
            match store.write(Write::Create { key: key.clone(), value: value.clone() }).await {
                Ok(WriteResult::Committed(event)) => acked.push((event.revision(), key)),
                Ok(other) => panic!("unexpected {other:?}"),
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        let failure = failure.expect("the 4 MiB disk never filled up");
        assert!(matches!(failure, StoreError::DiskFull(_)), "expected DiskFull, got {failure}");
        assert!(failure.to_string().starts_with("disk full"), "{failure}");
        assert!(acked.len() > 100, "only {} writes fit", acked.len());
        // Further writes keep failing cleanly while the disk is full.
        let again = store.write(Write::Create { key: "/full/again".into(), value: value.clone() }).await;
        assert!(again.is_err(), "{again:?}");
        // Everything acknowledged is readable, and the revision did not move.
        let current = store.current_revision().await.unwrap();
        assert_eq!(current, acked.last().unwrap().0);
        let all = store.range(RangeRequest { prefix: "/full/".into(), ..Default::default() }).await.unwrap();
        assert_eq!(all.kvs.len(), acked.len());
        // Free space: writing works again, continuing the revisions without a gap.
        std::fs::remove_file(&filler).unwrap();
        match store.write(Write::Create { key: "/full/after".into(), value: value.clone() }).await.unwrap() {
            WriteResult::Committed(event) => assert_eq!(event.revision(), current + 1),
            other => panic!("{other:?}"),
        }
        drop(store);
        // And after reopening, every acknowledged write is there.
        let store = SqliteStore::open(dir, options()).unwrap();
        for (revision, key) in &acked {
            let kv = store.get(key).await.unwrap().kv.expect("acknowledged write present");
            assert_eq!(kv.mod_revision, *revision);
        }
        assert_eq!(store.current_revision().await.unwrap(), current + 1);
        println!("FULL-DISK-OK acked={}", acked.len());
    });
}

#[test]
fn a_full_disk_fails_writes_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let script = r#"mount -t tmpfs -o size=4m oxplane-full-disk "$1" && exec "$2" full_disk::full_disk_child --exact --ignored --nocapture"#;
    // As root a plain mount namespace suffices; otherwise map ourselves to root in a user one.
    let as_root = running_as_root();
    let mut command = Command::new("unshare");
    if as_root {
        command.arg("--mount");
    } else {
        command.args(["--user", "--map-root-user", "--mount"]);
    }
    let output = command
        .args(["sh", "-c", script, "sh"])
        .arg(dir.path())
        .arg(&exe)
        .env(DIR_VAR, dir.path())
        .output()
        .expect("unshare (util-linux) must be installed");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("FULL-DISK-OK"),
        "full-disk child failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
}

fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(1) == Some("0")))
        .unwrap_or(false)
}
