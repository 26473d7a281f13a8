//! The store's integration tests: conformance of every backend (etcd against a real cluster), a model-based property test,
//! crash and full-disk behaviour of the SQLite file. One test binary, so the suite links once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod conformance;
mod crash;
mod etcd;
mod full_disk;
mod model;
mod sqlite_files;
