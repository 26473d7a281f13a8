//! End-to-end tests: each module starts the real `oxplane` binary and drives it with the real
//! `kubectl`, kube-rs or the Python client. One test binary, so the suite links once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;
mod cli;
mod composition;
mod conversion_webhooks;
mod conformance;
mod deletion;
mod external_functions;
mod gc_crash;
mod go_templating;
mod kubectl_apply;
mod kubectl_lifecycle;
mod kubectl_resources;
mod operations;
mod leader_election;
mod managed_crash;
mod providers;
mod python_client;
mod realtime;
mod render;
mod sql;
mod trace;
mod up;
mod usages;
mod validate;
