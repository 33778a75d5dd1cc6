//! Rust SDK for krayne, the multi-tenant control plane for Ray clusters on
//! Kubernetes. It speaks krayne's gRPC API; the `krayne` CLI is built on it.
//!
//! ```no_run
//! use std::time::Duration;
//!
//! use futures::TryStreamExt as _;
//! use krayne_client::{Client, ClusterSpecBuilder, WorkerGroupBuilder};
//!
//! # async fn pipeline() -> Result<(), krayne_client::ClientError> {
//! let client = Client::connect("http://127.0.0.1:8080")
//!     .await?
//!     .with_token(std::env::var("KRAYNE_TOKEN").unwrap_or_default());
//!
//! let spec = ClusterSpecBuilder::new("train")
//!     .namespace("ml-team")
//!     .worker_group(WorkerGroupBuilder::new("worker").replicas(2))
//!     .build();
//! client.create(spec).await?;
//! let ready = client.wait_until_ready("ml-team", "train", Duration::from_secs(600)).await?;
//! println!("dashboard at {}", ready.dashboard_url.unwrap_or_default());
//!
//! let clusters: Vec<_> = client.list(Some("ml-team")).try_collect().await?;
//! println!("{} clusters", clusters.len());
//! client.delete("ml-team", "train").await?;
//! # Ok(())
//! # }
//! ```
//!
//! Krayne config files work as they are, with Krayne's dot-notation
//! overrides ([`ClusterConfig`], [`load_cluster_spec`]). Every failure is a
//! [`ClientError`] carrying the gRPC code, the server's message and any
//! field violations. Reads, waits and scales are retried with jittered
//! backoff while the server is unavailable ([`RetryPolicy`]); creates and
//! deletes are not, because a repeat could act twice.
//!
//! `examples/pipeline.rs` is a complete program: create, wait, use, delete.
#![forbid(unsafe_code)]

mod auth;
#[macro_use]
mod client;
mod error;
mod jobs;
pub mod json;
mod live;
pub mod package;
mod spec;
mod tunnel;
mod watch;

pub use auth::TokenProvider;
pub use client::{AuditQuery, Client, ClientBuilder, ClusterSource, CreateOptions, Created, RetryPolicy, Scale};
pub use error::{ClientError, FieldViolation};
pub use jobs::{MAX_PACKAGE, SubmitJob, SubmittedJob, is_terminal};
/// Generated `krayne.v1` messages and stubs.
pub use krayne_proto::v1 as proto;
pub use live::{WatchFrom, event_type_name};
pub use spec::{ClusterConfig, ClusterSpecBuilder, WorkerGroupBuilder, load_cluster_spec};
/// gRPC status codes, as [`ClientError::code`] returns them.
pub use tonic::Code;
pub use tunnel::{Counts, Forwarder, TunnelStream};
