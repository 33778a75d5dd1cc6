//! Harness for krayne's end-to-end tests: the real `krayne-server` binary on
//! port 0, the sandbox as its Kubernetes, real tokens, and clients for both
//! transports that check what they get.
#![forbid(unsafe_code)]
// A test harness: failing loudly, with the reason, is its job.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod chart;
mod clients;
pub mod load;
mod postgres;
mod proxy;
mod server;

pub use clients::{Bearer, Grpc, Reply, Rest};
pub use postgres::{TestDb, test_database};
pub use proxy::Proxy;
pub use server::{Env, EnvOptions, ServerProcess, TEAMS, krayne_binary, server_binary};
