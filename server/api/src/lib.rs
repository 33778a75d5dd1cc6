//! krayne's transports over its use cases (crate `krayne-control`): REST
//! (`rest`, axum + utoipa) and gRPC (`grpc`, tonic), with what every
//! request passes first (`edge`), the listeners (`serve`, `app`) and the
//! ops endpoints. It sees Kubernetes and the audit log only through the
//! core's ports: it never depends on kube or sqlx.
#![forbid(unsafe_code)]

pub mod app;
mod browser;
pub mod edge;
pub mod grpc;
pub mod ops;
pub mod rest;
pub mod serve;

use krayne_control::{self as control, auth};
use krayne_core::domain;
