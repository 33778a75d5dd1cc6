//! krayne's API: the use cases (`service`: authorize → validate → act →
//! audit) and both transports over them, REST (`rest`, axum + utoipa) and
//! gRPC (`grpc`, tonic), with what every request passes first (`edge`),
//! authentication (`auth`), the listeners (`serve`, `app`) and the ops
//! endpoints. It sees Kubernetes and the audit log only through the core's
//! ports: it never depends on kube or sqlx.
#![forbid(unsafe_code)]

pub mod app;
pub mod auth;
pub mod edge;
pub mod grpc;
pub mod ops;
pub mod rest;
pub mod serve;
pub mod service;

use krayne_core::{domain, manifest};
