#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

pub mod auth;
mod base_path;
#[macro_use]
mod client;
mod error;
mod jobs;
pub mod json;
mod live;
mod logs;
pub mod package;
mod pod_logs;
mod rayjobs;
mod spec;
mod tunnel;
mod usage;
mod watch;

pub use auth::TokenProvider;
pub use client::{AuditQuery, Client, ClientBuilder, ClusterSource, CreateOptions, Created, Keep, RetryPolicy, Scale};
pub use error::{ClientError, FieldViolation};
pub use jobs::{MAX_PACKAGE, SubmitJob, SubmittedJob, is_terminal, pack_working_dir};
/// Krayne's cluster defaults: what a spec leaves out becomes these.
pub use krayne_proto::defaults;
/// Generated `krayne.v1` messages and stubs.
pub use krayne_proto::v1 as proto;
pub use live::{WatchFrom, event_type_name, watch_event_type_name};
pub use pod_logs::FollowedLog;
pub use rayjobs::{RunHandle, RunJob, RunOutcome, run_is_over};
pub use spec::{ClusterConfig, ClusterSpecBuilder, WorkerGroupBuilder, load_cluster_spec};
/// gRPC status codes, as [`ClientError::code`] returns them.
pub use tonic::Code;
pub use tunnel::{Counts, Forwarder, TunnelStream, proxy_url};
pub use usage::UsageQuery;

/// The Rust examples of the docs that use the SDK, compiled as doc tests
/// (issue 41: one had stopped compiling unseen).
#[cfg(doctest)]
mod docs {
    #[doc = include_str!("../../docs/auth.md")]
    struct Auth;
    #[doc = include_str!("../../docs/jobs.md")]
    struct Jobs;
    #[doc = include_str!("../../docs/services.md")]
    struct Services;
    #[doc = include_str!("../../docs/watch.md")]
    struct Watch;
}
