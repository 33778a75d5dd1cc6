//! krayne's server: a multi-tenant control plane for Ray clusters on
//! Kubernetes. This crate is the binary and the one composition root; the
//! parts live in crates of their own (docs/architecture.md) and are
//! re-exported here under the names the tests use.
#![forbid(unsafe_code)]

pub mod commands;
pub mod config;

pub use krayne_api::{app, edge, grpc, ops, rest, serve};
pub use krayne_control::{self as control, auth};
pub use krayne_core::{domain, manifest};
pub use krayne_kube as k8s;
#[cfg(feature = "sandbox")]
pub use krayne_sandbox as sandbox;
pub use krayne_store as store;

/// The sandbox's Rust example in docs/sandbox.md, compiled as a doc test.
#[cfg(all(doctest, feature = "sandbox"))]
#[doc = include_str!("../../docs/sandbox.md")]
struct SandboxDocs;
