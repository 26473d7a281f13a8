//! The conformance suite, run against every backend.

mod memory {
    oxplane_store::conformance_suite!(oxplane_store::memory::MemoryStore::default());
}

mod sqlite {
    use oxplane_store::CompactionPolicy;
    use oxplane_store::sqlite::{SqliteOptions, SqliteStore};

    /// A fresh durable store in a temporary directory removed after the test.
    fn open() -> (SqliteStore, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("temp dir");
        let options = SqliteOptions { compaction: CompactionPolicy::disabled(), ..SqliteOptions::default() };
        (SqliteStore::open(dir.path(), options).expect("open store"), dir)
    }

    oxplane_store::conformance_suite!(open());
}

mod etcd {
    // A fresh prefix of the process's shared 3-member etcd cluster per check; the checks run
    // one at a time, since etcd's revision counter is shared by every prefix.
    oxplane_store::conformance_suite!(oxplane_store::etcd::testing::fresh_store("conformance"));
}
