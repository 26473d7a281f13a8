//! Built-in providers' integration tests on an in-process API server. One test binary, so the
//! suite links once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;
mod fakecloud;
mod fakecloud_lifecycle;
mod fakecloud_policies;
mod http;
mod nop;
mod sql_mysql;
mod sql_postgres;
