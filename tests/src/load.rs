//! Load generation for the benchmarks: closed-loop clients, latency
//! percentiles, and how much memory a process holds.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use futures::{StreamExt as _, future::BoxFuture};
use krayne_server::sandbox::{NodeCapacity, SandboxOptions};
use serde_json::json;

use crate::{Env, EnvOptions, TestDb};

/// The team mapping of the benchmarks: team `bench` edits `bench-*`.
const BENCH_TEAMS: &str = r#"
admins: { groups: [platform-admins], subjects: [] }
teams:
  - name: bench
    members: { groups: [bench] }
    namespaces: { "bench-*": editor }
  - name: solo
    members: { groups: [solo] }
    namespaces: { "bench-50": viewer }
"#;

/// Namespace `bench-NN` of cluster number `i`, round robin over `of`.
pub fn bench_namespace(i: usize, of: usize) -> String {
    format!("bench-{:02}", i % of)
}

/// A benchmark's world: the sandbox with `namespaces` namespaces and nodes
/// with room for every pod, a release server on it with the audit log in
/// Postgres, and a token of team `bench`.
pub struct BenchEnv {
    /// Server and sandbox.
    pub env: Env,
    /// Bearer token of `bench@example.com`.
    pub token: String,
    /// A shared HTTP client.
    pub http: reqwest::Client,
    /// How many `bench-NN` namespaces exist.
    pub namespaces: usize,
    _db: TestDb,
}

impl BenchEnv {
    /// Starts it; `tune` adjusts the sandbox first.
    pub async fn start(namespaces: usize, tune: impl FnOnce(&mut SandboxOptions)) -> Self {
        let db = crate::test_database().await;
        let mut sandbox = SandboxOptions::fast();
        sandbox.namespaces = (0..namespaces).map(|i| bench_namespace(i, namespaces)).collect();
        sandbox.operator.nodes = NodeCapacity::uniform(256, 1024, "8192Gi", 0);
        tune(&mut sandbox);
        let env = Env::start_with(EnvOptions {
            sandbox,
            teams: BENCH_TEAMS.into(),
            database_url: Some(db.url.clone()),
            // One principal drives the whole load: no rate limit, and no
            // debug log (the tests' default) to slow the server down.
            server_args: ["--log", "info", "--rate-limit-per-second", "0"]
                .map(str::to_owned)
                .to_vec(),
            ..EnvOptions::default()
        })
        .await;
        let token = env.token("bench@example.com", &["bench"]);
        Self {
            env,
            token,
            http: reqwest::Client::new(),
            namespaces,
            _db: db,
        }
    }

    /// Namespace and name of loaded cluster number `i`.
    pub fn cluster(&self, i: usize) -> (String, String) {
        (bench_namespace(i, self.namespaces), format!("c-{i:05}"))
    }

    /// Creates cluster `name` in `bench-00` (a head, no workers) and waits
    /// until it is ready.
    pub async fn ready_cluster(&self, name: &str) {
        let clusters = format!("{}/v1/namespaces/bench-00/clusters", self.env.url());
        let created = self
            .http
            .post(&clusters)
            .bearer_auth(&self.token)
            .json(&json!({"name": name}))
            .send()
            .await
            .expect("create");
        assert!(created.status().is_success(), "{}", created.status());
        let ready: serde_json::Value = self
            .http
            .get(format!("{clusters}/{name}/wait?timeout_seconds=120"))
            .bearer_auth(&self.token)
            .send()
            .await
            .expect("wait")
            .json()
            .await
            .expect("a cluster");
        assert_eq!(ready["status"], "ready", "{ready}");
    }

    /// Sends the requests `request(0..n)` 16 at a time, authenticated;
    /// how many succeeded.
    pub async fn each(&self, n: usize, request: impl Fn(usize) -> reqwest::RequestBuilder) -> usize {
        futures::stream::iter(0..n)
            .map(|i| request(i).bearer_auth(&self.token).send())
            .buffer_unordered(16)
            .filter(|r| std::future::ready(r.as_ref().is_ok_and(|r| r.status().is_success())))
            .count()
            .await
    }

    /// Creates clusters `0..n` (a head and one worker each) over REST; how
    /// many were created.
    pub async fn create_clusters(&self, n: usize) -> usize {
        self.each(n, |i| {
            let (ns, name) = self.cluster(i);
            self.http
                .post(format!("{}/v1/namespaces/{ns}/clusters", self.env.url()))
                .json(&json!({"name": name, "worker_groups": [{"name": "cpu", "replicas": 1}]}))
        })
        .await
    }
}

/// One request of a load phase, made by client number `usize`: `Some(ok)`
/// when it ran, `None` when the client has nothing left to do.
pub type Op = Arc<dyn Fn(usize) -> BoxFuture<'static, Option<bool>> + Send + Sync>;

/// What one load phase measured.
#[derive(Debug, Clone)]
pub struct Measured {
    /// Requests completed in the measured window.
    pub requests: usize,
    /// Of which failed.
    pub errors: usize,
    /// From the window's start to the last completion.
    pub elapsed: Duration,
    latencies: Vec<Duration>,
}

impl Measured {
    /// Completed requests per second.
    pub fn per_second(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64().max(f64::EPSILON)
    }

    /// The latency below which a fraction `p` of requests finished.
    pub fn percentile(&self, p: f64) -> Duration {
        percentile(&self.latencies, p)
    }
}

/// The `p` quantile (0.0–1.0) of `sorted` latencies; zero when empty.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Runs `op` from `clients` concurrent clients, each sending its next
/// request when the previous one answered, for `warmup` (not measured,
/// to open connections and fill caches) and then `duration`.
pub async fn closed_loop(clients: usize, warmup: Duration, duration: Duration, op: Op) -> Measured {
    let start = Instant::now() + warmup;
    let end = start + duration;
    let tasks: Vec<_> = (0..clients)
        .map(|client| {
            let op = op.clone();
            tokio::spawn(async move {
                let mut seen = Vec::new();
                while Instant::now() < end {
                    let sent = Instant::now();
                    let Some(ok) = op(client).await else { break };
                    let done = Instant::now();
                    if sent >= start {
                        seen.push((done - sent, ok, done));
                    }
                }
                seen
            })
        })
        .collect();
    let mut latencies = Vec::new();
    let (mut errors, mut last) = (0, start);
    for task in tasks {
        for (latency, ok, done) in task.await.unwrap_or_default() {
            latencies.push(latency);
            errors += usize::from(!ok);
            last = last.max(done);
        }
    }
    latencies.sort();
    Measured {
        requests: latencies.len(),
        errors,
        elapsed: last.saturating_duration_since(start),
        latencies,
    }
}

/// Resident memory of process `pid` now and at its peak, in KiB (Linux
/// `/proc/<pid>/status` `VmRSS` and `VmHWM`).
pub fn rss_kib(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_pick_the_nearest_rank() {
        let ms: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&ms, 0.5), Duration::from_millis(51));
        assert_eq!(percentile(&ms, 0.99), Duration::from_millis(99));
        assert_eq!(percentile(&ms, 1.0), Duration::from_millis(100));
        assert_eq!(percentile(&[], 0.5), Duration::ZERO);
    }

    #[tokio::test]
    async fn a_closed_loop_counts_requests_and_errors_in_its_window() {
        let op: Op = Arc::new(|client| {
            Box::pin(async move {
                tokio::time::sleep(Duration::from_millis(5)).await;
                Some(client != 0)
            })
        });
        let m = closed_loop(2, Duration::from_millis(20), Duration::from_millis(200), op).await;
        assert!(m.requests > 10, "{m:?}");
        assert!(m.errors > 0 && m.errors < m.requests, "{m:?}");
        assert!(m.percentile(0.5) >= Duration::from_millis(5));
    }

    #[test]
    fn this_process_has_a_resident_size() {
        let (now, peak) = rss_kib(std::process::id()).unwrap();
        assert!(now > 0 && peak >= now);
    }
}
