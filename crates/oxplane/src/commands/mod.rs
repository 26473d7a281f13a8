//! The commands that look at a control plane from outside, as a user would: each owns its
//! flags (a clap `Args` struct) and its output, and talks to the API server through the user's
//! kubeconfig or works offline on files.

pub mod controllers;
pub mod diff;
pub mod function;
pub mod import;
pub mod kube;
pub mod kubeconfig;
pub mod load;
pub mod logs;
pub mod render;
pub mod trace;
pub mod validate;
pub mod xpkg;
pub mod yaml;
