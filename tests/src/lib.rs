//! Harness for krayne's end-to-end tests: the real `krayne-server` binary on
//! port 0, the sandbox as its Kubernetes, real tokens, and clients for both
//! transports that check what they get.
#![forbid(unsafe_code)]
// A test harness: failing loudly, with the reason, is its job.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod balancer;
pub mod chart;
mod clients;
pub mod docs;
pub mod echo_tunnel;
pub mod heads;
pub mod load;
mod postgres;
mod proxy;
pub mod pty;
pub mod raw;
mod secrets;
mod server;
pub mod sites;
pub mod watch;

pub use balancer::Balancer;
pub use clients::{Bearer, Grpc, Reply, Rest, bad_request_fields};
pub use postgres::{PgServer, PgSetup, TestDb, test_database, unrelated_ca};
pub use proxy::Proxy;
pub use secrets::{E2E_SESSION_SECRET, register_secret, secrets_in};
pub use server::{Env, EnvOptions, ServerProcess, TEAMS, krayne_binary, serve_refusal, server_binary};

/// A krayne dry-run `manifest` as another tool (kubectl, a pipeline) would
/// create it: without Ray's token authentication, which only krayne's own
/// create sets up (the cluster's Secret and the nonce its token is derived
/// with).
pub fn made_elsewhere(mut manifest: serde_json::Value) -> serde_json::Value {
    if let Some(spec) = manifest["spec"].as_object_mut() {
        spec.remove("authOptions");
    }
    manifest
}

/// `serve` flags for a lifecycle reaper that acts at once: policies
/// without a settle time (a new policy's settle is
/// `lifecycle::a_mapping_edit_*`'s), a pass a second, a 3 s Lease.
pub const FAST_REAPER: [&str; 8] = [
    "--lifecycle-policy-settle",
    "0s",
    "--lifecycle",
    "act",
    "--lifecycle-interval-seconds",
    "1",
    "--lifecycle-lease-seconds",
    "3",
];

/// Where `tool` is on the `PATH`, if it is.
pub fn which(tool: &str) -> Option<std::path::PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(tool))
        .find(|p| p.is_file())
}

/// A metric's value in Prometheus text: the first series of `name` whose
/// labels contain `labels` (0 when there is none).
pub fn metric(text: &str, name: &str, labels: &str) -> f64 {
    series(text, name, labels).next().unwrap_or(0.0)
}

/// The sum of every series of `name` (0 when there is none).
pub fn metric_total(text: &str, name: &str) -> f64 {
    series(text, name, "").sum()
}

fn series<'a>(text: &'a str, name: &'a str, labels: &'a str) -> impl Iterator<Item = f64> + 'a {
    text.lines()
        .filter(move |l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']) && l.contains(labels))
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
}

/// Polls `/readyz` on `ops` until it reports `dependency` (`kubernetes`,
/// `audit_database`) as `status` (`up`, `down`); asserts that the replica
/// stays ready meanwhile (dependencies do not decide readiness). Returns
/// the last body.
///
/// # Panics
/// When it does not within `within`, or `/readyz` is not 200.
pub async fn dependency_becomes(
    ops: &Rest,
    dependency: &str,
    status: &str,
    within: std::time::Duration,
) -> serde_json::Value {
    let started = std::time::Instant::now();
    loop {
        let ready = ops.get("/readyz").await.expect(200);
        if ready.body["dependencies"][dependency]["status"] == status {
            return ready.body;
        }
        assert!(
            started.elapsed() < within,
            "{dependency} not {status} within {within:?}: {}",
            ready.text
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// Polls `/readyz` on `ops` until it answers 200 (the watch cache has
/// listed once).
///
/// # Panics
/// When it does not within `within`.
pub async fn becomes_ready(ops: &Rest, within: std::time::Duration) {
    let started = std::time::Instant::now();
    loop {
        let ready = ops.get("/readyz").await;
        if ready.status == 200 {
            return;
        }
        assert!(
            started.elapsed() < within,
            "not ready within {within:?}: {}",
            ready.text
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
