//! End-to-end tests: each module starts the real `oxplane` binary and drives it with the real
//! `kubectl`, kube-rs or the Python client. One test binary, so the suite links once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;
mod audit;
mod cli;
mod composition;
mod configurations;
mod conversion_webhooks;
mod conformance;
mod crossplane_crds;
mod controllers_only;
mod deletion;
mod diff;
mod drift;
mod etcd;
mod external_functions;
mod function_parity;
mod gc_crash;
mod go_templating;
mod http_crash;
mod kubernetes_provider;
mod kubectl_apply;
mod kubectl_lifecycle;
mod kubectl_rbac;
mod kubectl_resources;
mod operations;
mod leader_election;
mod managed_crash;
mod operations_logs;
mod providers;
mod python_client;
mod realtime;
mod render;
mod replicas;
mod service_accounts;
mod sql;
mod sql_composition;
mod sql_examples;
mod sql_mysql;
mod trace;
mod up;
mod usages;
mod validate;
mod webapp_example;
mod xpkg;
