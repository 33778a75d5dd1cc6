//! krayne's server: a multi-tenant control plane for Ray clusters on
//! Kubernetes. See `docs/architecture.md` for how the modules fit.
#![forbid(unsafe_code)]

pub mod app;
pub mod audit;
pub mod auth;
pub mod commands;
pub mod config;
pub mod domain;
pub mod edge;
pub mod grpc;
pub mod k8s;
pub mod manifest;
pub mod ops;
pub mod rest;
pub mod sandbox;
pub mod serve;
pub mod service;
