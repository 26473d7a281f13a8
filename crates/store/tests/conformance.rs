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
