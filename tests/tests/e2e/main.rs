//! End-to-end: the real `krayne-server` binary, on port 0, against the
//! sandbox, over REST and gRPC.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod audit_log;
mod audit_store;
mod auth;
mod cache;
mod chart;
mod chart_rbac;
mod errors;
mod grpc_lifecycle;
mod keys;
mod operations;
mod rest_lifecycle;
mod sandbox_command;
mod shutdown;
mod tenancy;
