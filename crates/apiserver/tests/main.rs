//! The API server's integration tests: each module drives a real server (HTTPS on loopback, or
//! in-process) with kube-rs or raw HTTP. One test binary, so the suite links once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;
mod admission;
mod apply;
mod at_rest;
mod authn;
mod authz;
mod controller;
mod crds;
mod events;
mod fuzz_bodies;
mod in_process;
mod kube_client;
mod lifecycle;
mod requests;
mod schemas;
mod watch_expiry;
mod watch_streams;
mod webhooks;
