//! A release server at scale: `serve` started against a sandbox that
//! already holds `--clusters` RayClusters (default 10 000, each with a head
//! and a worker pod, and an event for every other cluster), measured from
//! outside: its peak RSS while the watch cache first loads and its settled
//! RSS; then, each a ratio to the no-op route in the same run, a list of a
//! 50-cluster namespace and the first page (100) of the namespace holding
//! the 10 000; then `--watchers` (default 1 000) live watches, each fed
//! every one of `--changes` changes, with the delivery latency, the
//! server's CPU per change and its RSS.
//!
//! ```sh
//! cargo build --release -p krayne-server
//! cargo bench -p krayne-tests --bench scale [-- --clusters 10000 --watchers 1000]
//! ```
//!
//! The sandbox runs without its operator: the objects are written as they
//! would stand, so loading takes seconds instead of the simulated
//! scheduler's minutes. Uses `TEST_DATABASE_URL` for the audit log (else a
//! throwaway Postgres). Prints a table and one JSON line.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::panic,
    missing_docs
)]

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use clap::Parser;
use comfy_table::{Table, presets::ASCII_MARKDOWN};
use futures::{StreamExt as _, stream};
use krayne_tests::{
    ServerProcess,
    load::{BenchEnv, closed_loop, percentile, rss_kib},
};
use serde_json::{Value, json};
use tokio::sync::Mutex;

#[derive(Parser)]
#[command(about = "Scale benchmark: memory at start, page-first lists and live watchers at 10 000 clusters")]
struct Args {
    /// Clusters in the big namespace.
    #[arg(long, default_value_t = 10_000)]
    clusters: usize,
    /// Live watches open at once.
    #[arg(long, default_value_t = 1000)]
    watchers: usize,
    /// Changes each watcher is fed.
    #[arg(long, default_value_t = 20)]
    changes: usize,
    /// Concurrent clients of the read phases.
    #[arg(long, default_value_t = 32)]
    clients: usize,
    /// Measured seconds per read phase.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Passed by `cargo bench`.
    #[arg(long, hide = true)]
    bench: bool,
}

const BIG: &str = "bench-big";
const FIFTY: &str = "bench-50";

/// A RayCluster as it stands once ready, and its two pods and an event.
fn objects(manifest: &Value, ns: &str, i: usize) -> (Value, Vec<Value>, Value) {
    let name = format!("c-{i:05}");
    let ip = format!("10.{}.{}.{}", (i >> 16) & 255, (i >> 8) & 255, i & 255);
    let mut cluster = manifest.clone();
    cluster["metadata"]["name"] = json!(name);
    cluster["metadata"]["namespace"] = json!(ns);
    cluster["status"] = json!({"state": "ready", "readyWorkerReplicas": 1, "head": {"podIP": ip, "serviceIP": ip},
        "conditions": [{"type": "HeadPodReady", "status": "True", "reason": "HeadPodRunningAndReady",
                        "message": "", "lastTransitionTime": "2026-11-01T00:00:00Z"},
                       {"type": "RayClusterProvisioned", "status": "True", "reason": "AllPodRunningAndReadyFirstTime",
                        "message": "", "lastTransitionTime": "2026-11-01T00:00:00Z"}]});
    let pod = |kind: &str, suffix: &str| {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("{name}-{suffix}"), "namespace": ns,
                "labels": {"ray.io/cluster": name, "ray.io/node-type": kind, "ray.io/group": if kind == "head" { "headgroup" } else { "cpu" },
                           "ray.io/is-ray-node": "yes", "app.kubernetes.io/created-by": "kuberay-operator", "app.kubernetes.io/name": "kuberay"}},
            "spec": {"nodeName": "node-1", "containers": [{"name": "ray-head", "image": "rayproject/ray:2.43.0"}]},
            "status": {"phase": "Running", "podIP": ip,
                "conditions": [{"type": "Initialized", "status": "True"}, {"type": "Ready", "status": "True"},
                               {"type": "ContainersReady", "status": "True"}, {"type": "PodScheduled", "status": "True"}],
                "containerStatuses": [{"name": "ray-head", "ready": true, "restartCount": 0, "state": {"running": {}}}]}})
    };
    let event = json!({"apiVersion": "v1", "kind": "Event",
        "metadata": {"name": format!("{name}.started"), "namespace": ns},
        "involvedObject": {"kind": "Pod", "name": format!("{name}-head"), "namespace": ns},
        "reason": "Started", "message": "Started container ray-head", "type": "Normal", "count": 1});
    (cluster, vec![pod("head", "head"), pod("worker", "cpu-worker")], event)
}

/// Writes `objects` straight to the sandbox's API, 32 at a time.
async fn write_all(http: &reqwest::Client, sandbox: &str, objects: Vec<(String, Value)>) {
    let failures = stream::iter(objects)
        .map(|(path, body)| {
            let request = http.post(format!("{sandbox}{path}")).json(&body).send();
            async move {
                let res = request.await.unwrap();
                if res.status().is_success() {
                    None
                } else {
                    Some(res.text().await.unwrap_or_default())
                }
            }
        })
        .buffer_unordered(32)
        .filter_map(std::future::ready)
        .collect::<Vec<_>>()
        .await;
    assert!(
        failures.is_empty(),
        "the sandbox refused {} objects, e.g. {}",
        failures.len(),
        failures[0]
    );
}

/// `krayne_cache_objects` of `kind` on a server's ops port.
async fn cached(http: &reqwest::Client, server: &ServerProcess, kind: &str) -> f64 {
    let text = http
        .get(format!("http://{}/metrics", server.ops))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    krayne_tests::metric(&text, "krayne_cache_objects", &format!("kind=\"{kind}\""))
}

/// User and system CPU seconds of process `pid` so far.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let mut bench = BenchEnv::start(1, |sandbox| {
        sandbox.run_operator = false;
        sandbox.namespaces = vec![BIG.into(), FIFTY.into()];
        sandbox.history_limit = args.clusters * 8;
    })
    .await;
    let http = reqwest::Client::new();
    let sandbox = bench.env.sandbox.url();
    let manifest = http
        .post(format!(
            "{}/v1/namespaces/{FIFTY}/clusters?dry_run=true",
            bench.env.url()
        ))
        .bearer_auth(&bench.token)
        .json(&json!({"name": "template", "worker_groups": [{"name": "cpu", "replicas": 1}]}))
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap()["manifest"]
        .clone();
    bench.env.stop_server().await;

    eprintln!("writing {} + 50 clusters with their pods and events…", args.clusters);
    let started = Instant::now();
    let mut writes = Vec::new();
    for (ns, n) in [(BIG, args.clusters), (FIFTY, 50)] {
        for i in 0..n {
            let (cluster, pods, event) = objects(&manifest, ns, i);
            writes.push((format!("/apis/ray.io/v1/namespaces/{ns}/rayclusters"), cluster));
            for pod in pods {
                writes.push((format!("/api/v1/namespaces/{ns}/pods"), pod));
            }
            if i % 2 == 0 {
                writes.push((format!("/api/v1/namespaces/{ns}/events"), event));
            }
        }
    }
    let written = writes.len();
    write_all(&http, &sandbox, writes).await;
    eprintln!("{written} objects in {:.0} s", started.elapsed().as_secs_f64());

    // serve started against the loaded sandbox: peak while its cache loads.
    let started = Instant::now();
    let server = bench
        .env
        .spawn_server(&["--max-watches-per-caller", &args.watchers.to_string()])
        .await;
    let pid = server.pid();
    let total = args.clusters + 50;
    while cached(&http, &server, "rayclusters").await < total as f64
        || cached(&http, &server, "pods").await < 2.0 * total as f64
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let load_seconds = started.elapsed().as_secs_f64();
    let (_, peak_loading) = rss_kib(pid).unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (settled, _) = rss_kib(pid).unwrap();

    // Reads, each against the no-op route of the same run.
    let base = format!("http://{}", server.api);
    let phase = |path: String| {
        let (http, token, url) = (http.clone(), bench.token.clone(), format!("{base}{path}"));
        let op: krayne_tests::load::Op = Arc::new(move |_| {
            let request = http.get(&url).bearer_auth(&token);
            Box::pin(async move {
                let res = request.send().await.ok()?;
                let ok = res.status().is_success();
                Some(res.bytes().await.is_ok() && ok)
            })
        });
        op
    };
    let (warm, secs) = (Duration::from_secs(1), Duration::from_secs_f64(args.seconds));
    let mut reads = Vec::new();
    for (what, path) in [
        ("no-op (whoami)", "/v1/whoami".to_owned()),
        ("list namespace (50)", format!("/v1/namespaces/{FIFTY}/clusters")),
        ("first page (100) of 10 000", format!("/v1/namespaces/{BIG}/clusters")),
        ("first page (100) of every namespace", "/v1/clusters".to_owned()),
    ] {
        let m = closed_loop(args.clients, warm, secs, phase(path)).await;
        eprintln!("{what}: {:.0}/s", m.per_second());
        reads.push((what, m));
    }
    let noop = reads[0].1.per_second();

    // Live watchers on the 50-cluster namespace, fed one change at a time.
    eprintln!("opening {} watches…", args.watchers);
    let arrivals: Arc<Mutex<Vec<(usize, Instant)>>> = Arc::default();
    let (cpu_before, rss_before) = (cpu_seconds(pid), rss_kib(pid).unwrap().0);
    let mut tasks = Vec::new();
    for _ in 0..args.watchers {
        let client = reqwest::Client::new();
        let response = client
            .get(format!("{base}/v1/namespaces/{FIFTY}/clusters?watch=true"))
            .bearer_auth(&bench.token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "a watch was refused");
        let arrivals = arrivals.clone();
        tasks.push(tokio::spawn(async move {
            let mut response = response;
            let mut buffer = Vec::new();
            while let Ok(Some(chunk)) = response.chunk().await {
                buffer.extend_from_slice(&chunk);
                while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buffer.drain(..=end).collect();
                    let event: Value = serde_json::from_slice(&line).unwrap();
                    let tick = event["cluster"]["created_by"]
                        .as_str()
                        .and_then(|t| t.strip_prefix("tick-"));
                    if let Some(tick) = tick.and_then(|t| t.parse().ok()) {
                        arrivals.lock().await.push((tick, Instant::now()));
                    }
                }
            }
        }));
    }
    let open_rss = rss_kib(pid).unwrap().0;
    let mut latencies = Vec::new();
    for tick in 0..args.changes {
        let sent = Instant::now();
        let patch = json!({"metadata": {"annotations": {"krayne.dev/created-by": format!("tick-{tick}")}}});
        let res = http
            .patch(format!(
                "{sandbox}/apis/ray.io/v1/namespaces/{FIFTY}/rayclusters/c-00000"
            ))
            .header("content-type", "application/merge-patch+json")
            .json(&patch)
            .send()
            .await
            .unwrap();
        assert!(res.status().is_success(), "{}", res.text().await.unwrap());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let seen: Vec<Instant> = arrivals
                .lock()
                .await
                .iter()
                .filter(|(t, _)| *t == tick)
                .map(|(_, at)| *at)
                .collect();
            if seen.len() >= args.watchers {
                latencies.extend(seen.iter().map(|at| at.saturating_duration_since(sent)));
                break;
            }
            assert!(
                Instant::now() < deadline,
                "change {tick} reached {} of the watchers",
                seen.len()
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    let cpu = cpu_seconds(pid) - cpu_before;
    latencies.sort();
    for t in tasks {
        t.abort();
    }

    let mut table = Table::new();
    table.load_style(ASCII_MARKDOWN).set_header(["measure", "value"]);
    let rows = [
        (
            "objects written to the sandbox".to_owned(),
            format!(
                "{written} ({} + 50 clusters, 2 pods each, an event per 2)",
                args.clusters
            ),
        ),
        ("cache loaded after start".to_owned(), format!("{load_seconds:.1} s")),
        (
            "peak RSS while the cache loads".to_owned(),
            format!("{:.1} MiB", mib(peak_loading)),
        ),
        ("settled RSS".to_owned(), format!("{:.1} MiB", mib(settled))),
        (
            "peak ÷ settled".to_owned(),
            format!("{:.2}", peak_loading as f64 / settled as f64),
        ),
    ];
    for (k, v) in rows {
        table.add_row([k, v]);
    }
    for (what, m) in &reads {
        table.add_row([
            format!("REST {what}"),
            format!(
                "{:.0}/s, p50 {:.2} ms, p99 {:.2} ms, {} errors, {:.2}× no-op",
                m.per_second(),
                m.percentile(0.5).as_secs_f64() * 1e3,
                m.percentile(0.99).as_secs_f64() * 1e3,
                m.errors,
                m.per_second() / noop
            ),
        ]);
    }
    let p = |q: f64| percentile(&latencies, q).as_secs_f64() * 1e3;
    table.add_row([
        format!("{} watchers × {} changes: delivery", args.watchers, args.changes),
        format!("p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms", p(0.5), p(0.99), p(1.0)),
    ]);
    table.add_row([
        "server CPU per change (all watchers)".to_owned(),
        format!("{:.1} ms", cpu / args.changes as f64 * 1e3),
    ]);
    table.add_row([
        "RSS before / with the watchers".to_owned(),
        format!("{:.1} / {:.1} MiB", mib(rss_before), mib(open_rss)),
    ]);
    println!("scale: {} clusters, {} watchers", args.clusters, args.watchers);
    println!("{table}");
    println!(
        "{}",
        json!({
            "bench": "scale", "clusters": args.clusters, "load_seconds": load_seconds,
            "rss_peak_loading_mib": mib(peak_loading), "rss_settled_mib": mib(settled),
            "reads": reads.iter().map(|(w, m)| json!({"what": w, "per_second": m.per_second(), "ratio": m.per_second() / noop})).collect::<Vec<_>>(),
            "watch_p50_ms": p(0.5), "watch_p99_ms": p(0.99), "watch_max_ms": p(1.0),
            "cpu_ms_per_change": cpu / args.changes as f64 * 1e3, "rss_with_watchers_mib": mib(open_rss),
        })
    );
}
