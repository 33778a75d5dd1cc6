//! krayne's server: a multi-tenant control plane for Ray clusters on
//! Kubernetes. See `docs/architecture.md` for how the modules fit.
#![forbid(unsafe_code)]

pub mod audit;
pub mod auth;
pub mod domain;
pub mod k8s;
pub mod manifest;
pub mod sandbox;
pub mod service;
