//! End-to-end: the real `krayne-server` binary, on port 0, against the
//! sandbox, over REST and gRPC.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod audit_database;
mod audit_log;
mod audit_store;
mod auth;
mod browser_guard;
mod cache;
mod chart;
mod chart_rbac;
mod concurrency;
mod docs;
mod errors;
mod field_validation;
mod grpc_lifecycle;
mod hardening;
mod hardening_grpc;
mod hostile_heads;
mod hostile_input;
mod idle;
mod isolation;
mod issuers;
mod jobs;
mod keys;
mod lifecycle;
mod limits;
mod network_policy;
mod operations;
mod outages;
mod portal;
mod quotas;
mod real_head;
mod replicas;
mod rest_lifecycle;
mod sandbox_command;
mod secrets;
mod sessions;
mod shutdown;
mod sign_in;
mod soak;
mod stream_ends;
mod suspend;
mod tenancy;
mod tunnels;
mod watch;
