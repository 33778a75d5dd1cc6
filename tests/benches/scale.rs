//! A release server at platform scale: `serve` started against a sandbox
//! that already holds `--clusters` RayClusters (default 20 000: 10 000 in
//! one namespace, 50 in another, the rest over `--namespaces` more), each
//! with its head and `--workers` worker pods (default 9, so 200 000 pods)
//! and `--events` events (default 50 000), of which most concern other
//! workloads, as on a shared Kubernetes. Every object is shaped as the API
//! server stores what KubeRay and the kubelet write: the RayCluster is
//! krayne's own rendering with KubeRay's status, the pods come from the
//! sandbox operator's builder (`krayne_server::sandbox::kuberay_pod`:
//! KubeRay's command, environment, probes, `/dev/shm`, autoscaler sidecar,
//! init container, the API server's defaults and `managedFields`).
//!
//! Measured from outside: the time to `/readyz`, the requests and bytes the
//! replica asked of the API until then, its CPU, its peak and settled RSS;
//! then reads, each a ratio to a one-namespace caller's `whoami` in the
//! same run (a list of 50, the first page of 10 000, a describe in a
//! namespace full of other workloads' events, a get, the first page of
//! every namespace); then `--watchers` live watches fed `--changes`
//! changes; then `--replicas` fresh replicas started at once against the
//! same sandbox: requests and bytes of all their starts, and each one's
//! time to ready and RSS. `--no-watch-list` measures the same without
//! streaming lists (an API server before 1.27, or with WatchList off).
//!
//! ```sh
//! cargo build --release -p krayne-server
//! cargo bench -p krayne-tests --bench scale [-- --clusters 20000 --workers 9 --events 50000]
//! ```
//!
//! The sandbox runs without its operator: the objects are stored as they
//! would stand, so loading takes seconds instead of the simulated
//! scheduler's hours. Uses `TEST_DATABASE_URL` for the audit log (else a
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
use krayne_server::sandbox::{Resource, Sandbox, kuberay_pod};
use krayne_tests::{
    ServerProcess,
    load::{BenchEnv, closed_loop, percentile, rss_kib},
};
use serde_json::{Value, json};
use tokio::sync::Mutex;

#[derive(Parser)]
#[command(about = "Scale benchmark: start, memory, reads and live watchers at 20 000 clusters and 200 000 pods")]
struct Args {
    /// RayClusters in all: up to 10 000 (half) in one namespace, 50 in
    /// another, the rest round robin over `--namespaces` more.
    #[arg(long, default_value_t = 20_000)]
    clusters: usize,
    /// Worker pods per cluster; each also has its head.
    #[arg(long, default_value_t = 9)]
    workers: usize,
    /// Namespaces besides the big one and the 50-cluster one.
    #[arg(long, default_value_t = 998)]
    namespaces: usize,
    /// Events in all.
    #[arg(long, default_value_t = 50_000)]
    events: usize,
    /// Percent of the events that are about Ray pods; the rest are about
    /// other workloads (a tenth of those in the big namespace).
    #[arg(long, default_value_t = 21)]
    ray_event_percent: usize,
    /// Live watches open at once.
    #[arg(long, default_value_t = 1000)]
    watchers: usize,
    /// Changes each watcher is fed.
    #[arg(long, default_value_t = 20)]
    changes: usize,
    /// Fresh replicas started at once at the end.
    #[arg(long, default_value_t = 3)]
    replicas: usize,
    /// Concurrent clients of the read phases.
    #[arg(long, default_value_t = 32)]
    clients: usize,
    /// Measured seconds per read phase.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// The sandbox says it is Kubernetes 1.31 with WatchList off: replicas
    /// make their initial lists instead of streaming them (small kinds
    /// whole from the watch cache, big ones in pages from etcd).
    #[arg(long)]
    no_watch_list: bool,
    /// Passed by `cargo bench`.
    #[arg(long, hide = true)]
    bench: bool,
}

const BIG: &str = "bench-big";
const FIFTY: &str = "bench-50";
const AT: &str = "2026-11-01T00:00:00Z";

/// What was stored, for the checks and the table.
#[derive(Default)]
struct Loaded {
    clusters: usize,
    pods: usize,
    pod_bytes: usize,
    ray_events: usize,
    other_events: usize,
    /// (namespace, pod names) of each cluster, for the Ray events.
    pods_of: Vec<(String, Vec<String>)>,
}

/// Stores cluster `name` in `ns`: krayne's rendering with KubeRay's status,
/// and its head and `workers` worker pods as KubeRay builds them, running.
fn store_cluster(
    sandbox: &Sandbox,
    manifest: &Value,
    ns: &str,
    name: &str,
    workers: usize,
    ip: &mut u32,
    loaded: &mut Loaded,
) {
    let mut rc = manifest.clone();
    rc["metadata"]["name"] = json!(name);
    rc["metadata"]["namespace"] = json!(ns);
    rc["spec"]["workerGroupSpecs"][0]["replicas"] = json!(workers);
    let group = rc["spec"]["workerGroupSpecs"][0].clone();
    let group_name = group["groupName"].as_str().unwrap().to_owned();
    let mut pods = Vec::with_capacity(workers + 1);
    for w in 0..=workers {
        let pod_name = if w == 0 {
            format!("{name}-head-{:05x}", *ip & 0xfffff)
        } else {
            format!("{name}-{group_name}-worker-{:05x}", (*ip + 7) & 0xfffff)
        };
        let mut pod = kuberay_pod::build(&rc, (w > 0).then_some(&group), &pod_name);
        *ip += 1;
        let address = format!("10.{}.{}.{}", (*ip >> 16) & 255, (*ip >> 8) & 255, *ip & 255);
        kuberay_pod::running(&mut pod, &format!("gpu-node-{}", *ip % 500), &address, AT);
        kuberay_pod::stored(&mut pod, AT);
        pods.push(pod);
    }
    rc["metadata"]["generation"] = json!(1);
    kuberay_pod::with_status(&mut rc, &pods);
    let uid = sandbox.insert(Resource::RayCluster, ns, rc).unwrap();
    let mut names = Vec::with_capacity(pods.len());
    for mut pod in pods {
        pod["metadata"]["ownerReferences"][0]["uid"] = json!(uid);
        loaded.pod_bytes += serde_json::to_vec(&pod).unwrap().len();
        names.push(pod["metadata"]["name"].as_str().unwrap().to_owned());
        sandbox.insert(Resource::Pod, ns, pod).unwrap();
        loaded.pods += 1;
    }
    loaded.clusters += 1;
    loaded.pods_of.push((ns.to_owned(), names));
}

/// An event as the kubelet or a controller records it.
fn event(ns: &str, kind: &str, object: &str, reason: &str, message: &str, n: usize) -> Value {
    let component = if kind == "Pod" {
        "kubelet"
    } else {
        "replicaset-controller"
    };
    json!({"metadata": {"name": format!("{object}.{:016x}", n.wrapping_mul(0x9e37_79b9_7f4a_7c15)), "namespace": ns},
        "involvedObject": {"apiVersion": if kind == "Pod" { "v1" } else { "apps/v1" }, "kind": kind, "name": object,
                           "namespace": ns, "uid": format!("{:08x}-0000-4000-8000-{:012x}", n, n), "resourceVersion": "1"},
        "reason": reason, "message": message, "type": "Normal", "count": 1,
        "source": {"component": component, "host": "gpu-node-1"},
        "firstTimestamp": AT, "lastTimestamp": AT, "eventTime": null,
        "reportingComponent": component, "reportingInstance": "gpu-node-1"})
}

/// Stores the events: `ray` about Ray pods (ten about the big namespace's
/// first cluster, which is described), the rest about other workloads'
/// pods and ReplicaSets, a tenth of them in the big namespace.
fn store_events(sandbox: &Sandbox, args: &Args, namespaces: &[String], loaded: &mut Loaded) {
    let ray = args.events * args.ray_event_percent / 100;
    let reasons = [
        ("Scheduled", "Successfully assigned {ns}/{pod} to gpu-node-1"),
        (
            "Pulled",
            "Container image \"rayproject/ray:2.43.0-py312\" already present on machine",
        ),
        ("Created", "Created container: ray-worker"),
        ("Started", "Started container ray-worker"),
    ];
    for n in 0..args.events {
        let (ns, kind, object) = if n < ray {
            let (ns, pods) = &loaded.pods_of[if n < 10 { 0 } else { n % loaded.pods_of.len() }];
            (ns.clone(), "Pod", pods[n % pods.len()].clone())
        } else if n % 10 == 0 {
            (BIG.to_owned(), "Pod", format!("web-7d4b9c8f6-{:05x}", n))
        } else if n % 3 == 0 {
            (
                namespaces[n % namespaces.len()].clone(),
                "ReplicaSet",
                format!("etl-{:08x}", n),
            )
        } else {
            (
                namespaces[n % namespaces.len()].clone(),
                "Pod",
                format!("api-5f6d8b7c9-{:05x}", n),
            )
        };
        let (reason, message) = reasons[n % reasons.len()];
        let message = message.replace("{ns}", &ns).replace("{pod}", &object);
        let (reason, message) = if kind == "ReplicaSet" {
            ("SuccessfulCreate", format!("Created pod: {object}-{:05x}", n))
        } else {
            (reason, message)
        };
        sandbox
            .insert(Resource::Event, &ns, event(&ns, kind, &object, reason, &message, n))
            .unwrap();
        if n < ray {
            loaded.ray_events += 1;
        } else {
            loaded.other_events += 1;
        }
    }
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

/// How a replica started: seconds to `/readyz`, the API's requests and
/// bytes meanwhile, and its CPU seconds by then.
struct Start {
    ready_seconds: f64,
    requests: usize,
    bytes: u64,
    cpu_seconds: f64,
}

/// Starts `count` replicas at once and waits until each answers `/readyz`.
async fn start_replicas(
    bench: &BenchEnv,
    count: usize,
    extra: &[&str],
) -> (Vec<ServerProcess>, Vec<Start>, usize, u64) {
    let sandbox = &bench.env.sandbox;
    let (requests_before, bytes_before) = (sandbox.requests().len(), sandbox.bytes_served());
    let started = Instant::now();
    let servers = futures::future::join_all((0..count).map(|_| bench.env.spawn_server_unready(extra))).await;
    let http = reqwest::Client::new();
    let mut starts = Vec::new();
    for server in &servers {
        let url = format!("http://{}/readyz", server.ops);
        loop {
            if http.get(&url).send().await.is_ok_and(|r| r.status() == 200) {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(600),
                "a replica was not ready in 600 s"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        starts.push(Start {
            ready_seconds: started.elapsed().as_secs_f64(),
            requests: sandbox.requests().len() - requests_before,
            bytes: sandbox.bytes_served() - bytes_before,
            cpu_seconds: cpu_seconds(server.pid()),
        });
    }
    let requests = sandbox.requests().len() - requests_before;
    let bytes = sandbox.bytes_served() - bytes_before;
    (servers, starts, requests, bytes)
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let big = (args.clusters / 2).min(10_000);
    let spread = args.clusters.saturating_sub(big + 50);
    let others: Vec<String> = (0..args.namespaces.max(1))
        .map(|i| format!("bench-ns-{i:04}"))
        .collect();
    let mut bench = BenchEnv::start(1, |sandbox| {
        sandbox.run_operator = false;
        sandbox.watch_list = !args.no_watch_list;
        // `default` holds the lifecycle Lease: the replica that leads
        // records usage, as the chart's default.
        sandbox.namespaces = ["default", BIG, FIFTY]
            .iter()
            .map(|s| (*s).to_owned())
            .chain(others.iter().cloned())
            .collect();
        sandbox.history_limit = 100_000;
        // The events are dated at the start of the month.
        sandbox.event_ttl = Duration::from_secs(400 * 86_400);
    })
    .await;
    let http = reqwest::Client::new();
    let sandbox_url = bench.env.sandbox.url();
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

    eprintln!(
        "storing {} clusters with {} pods each and {} events…",
        args.clusters,
        args.workers + 1,
        args.events
    );
    let started = Instant::now();
    let mut loaded = Loaded::default();
    let mut ip = 0u32;
    let sandbox = &bench.env.sandbox;
    for i in 0..big {
        store_cluster(
            sandbox,
            &manifest,
            BIG,
            &format!("c-{i:05}"),
            args.workers,
            &mut ip,
            &mut loaded,
        );
    }
    for i in 0..50 {
        store_cluster(
            sandbox,
            &manifest,
            FIFTY,
            &format!("c-{i:05}"),
            args.workers,
            &mut ip,
            &mut loaded,
        );
    }
    for i in 0..spread {
        let ns = &others[i % others.len()];
        store_cluster(
            sandbox,
            &manifest,
            ns,
            &format!("s-{i:05}"),
            args.workers,
            &mut ip,
            &mut loaded,
        );
    }
    store_events(sandbox, &args, &others, &mut loaded);
    let load_seconds = started.elapsed().as_secs_f64();
    eprintln!(
        "{} clusters, {} pods ({:.1} KB each as JSON), {} + {} events in {load_seconds:.0} s",
        loaded.clusters,
        loaded.pods,
        loaded.pod_bytes as f64 / loaded.pods as f64 / 1e3,
        loaded.ray_events,
        loaded.other_events
    );

    // One replica started against the loaded sandbox.
    let watches = args.watchers.to_string();
    let requests_before = bench.env.sandbox.requests().len();
    let (mut servers, starts, _, _) = start_replicas(
        &bench,
        1,
        &[
            "--max-watches-per-caller",
            &watches,
            "--max-watches-per-namespace",
            &watches,
        ],
    )
    .await;
    let mut kinds = std::collections::BTreeMap::<String, usize>::new();
    for r in &bench.env.sandbox.requests()[requests_before..] {
        let path = r.uri.split('?').next().unwrap_or_default();
        let parts: Vec<&str> = path.split('/').collect();
        let what = match parts.iter().position(|p| *p == "namespaces") {
            // The resource, not each object's name: `…/networkpolicies/*`.
            Some(i) if parts.len() > i + 2 => format!(
                "{} …/namespaces/*/{}{}",
                r.method,
                parts[i + 2],
                if parts.len() > i + 3 { "/*" } else { "" }
            ),
            _ => format!("{} {path}", r.method),
        };
        *kinds.entry(what).or_default() += 1;
    }
    eprintln!("requests until ready, by kind: {kinds:?}");
    let server = servers.remove(0);
    let start = &starts[0];
    let pid = server.pid();
    let (_, peak_at_ready) = rss_kib(pid).unwrap();
    assert_eq!(cached(&http, &server, "rayclusters").await as usize, loaded.clusters);
    assert_eq!(cached(&http, &server, "pods").await as usize, loaded.pods);
    let events_cached = cached(&http, &server, "events").await as usize;
    eprintln!(
        "ready in {:.1} s after {} requests ({:.1} MB); {events_cached} events cached",
        start.ready_seconds,
        start.requests,
        start.bytes as f64 / 1e6
    );
    // Settled: after the usage recorder's first rounds (every 15 s).
    tokio::time::sleep(Duration::from_secs(20)).await;
    let (settled, peak) = rss_kib(pid).unwrap();
    eprintln!(
        "RSS at ready (peak so far) {:.1} MiB, settled {:.1} MiB, peak {:.1} MiB",
        mib(peak_at_ready),
        mib(settled),
        mib(peak)
    );

    // Reads, each against a one-namespace caller's whoami in the same run.
    let solo = bench.env.token("solo@example.com", &["solo"]);
    let base = format!("http://{}", server.api);
    let phase = |path: String, token: &str| {
        let (http, token, url) = (http.clone(), token.to_owned(), format!("{base}{path}"));
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
    for (what, path, token) in [
        ("whoami of a one-namespace caller", "/v1/whoami".to_owned(), &solo),
        ("list namespace (50)", format!("/v1/namespaces/{FIFTY}/clusters"), &solo),
        (
            "first page (100) of 10 000",
            format!("/v1/namespaces/{BIG}/clusters"),
            &bench.token,
        ),
        (
            "describe (namespace of 10 000 clusters and other workloads' events)",
            format!("/v1/namespaces/{BIG}/clusters/c-00000/details"),
            &bench.token,
        ),
        ("get", format!("/v1/namespaces/{BIG}/clusters/c-00000"), &bench.token),
        (
            "first page (100) of every namespace",
            "/v1/clusters".to_owned(),
            &bench.token,
        ),
    ] {
        let m = closed_loop(args.clients, warm, secs, phase(path, token)).await;
        eprintln!("{what}: {:.0}/s", m.per_second());
        reads.push((what, m));
    }
    let noop = reads[0].1.per_second();
    let sandbox = sandbox_url;
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
        let status = response.status();
        assert_eq!(
            status,
            200,
            "a watch was refused: {}",
            response.text().await.unwrap_or_default()
        );
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

    drop(server);

    // Fresh replicas started at once on the same sandbox.
    eprintln!("starting {} replicas at once…", args.replicas);
    let (replicas, replica_starts, replica_requests, replica_bytes) = start_replicas(&bench, args.replicas, &[]).await;
    tokio::time::sleep(Duration::from_secs(20)).await;
    let replica_rss: Vec<(u64, u64)> = replicas.iter().map(|r| rss_kib(r.pid()).unwrap()).collect();
    drop(replicas);

    let mut table = Table::new();
    table.load_style(ASCII_MARKDOWN).set_header(["measure", "value"]);
    let rows = [
        (
            "objects stored in the sandbox".to_owned(),
            format!(
                "{} clusters ({big} in one namespace, 50 in another, {spread} over {}), {} pods ({:.1} KB each as JSON), {} events ({} about Ray pods), in {load_seconds:.0} s",
                loaded.clusters,
                others.len(),
                loaded.pods,
                loaded.pod_bytes as f64 / loaded.pods as f64 / 1e3,
                loaded.ray_events + loaded.other_events,
                loaded.ray_events
            ),
        ),
        ("time to /readyz".to_owned(), format!("{:.1} s", start.ready_seconds)),
        (
            "requests to the API until ready".to_owned(),
            format!("{} ({:.1} MB of responses)", start.requests, start.bytes as f64 / 1e6),
        ),
        ("CPU until ready".to_owned(), format!("{:.1} s", start.cpu_seconds)),
        ("events cached".to_owned(), format!("{events_cached}")),
        ("peak RSS at ready".to_owned(), format!("{:.1} MiB", mib(peak_at_ready))),
        (
            "settled RSS (20 s after ready)".to_owned(),
            format!("{:.1} MiB", mib(settled)),
        ),
        (
            "peak ÷ settled".to_owned(),
            format!(
                "{:.1} MiB ÷ {:.1} = {:.2}",
                mib(peak),
                mib(settled),
                peak as f64 / settled as f64
            ),
        ),
    ];
    for (k, v) in rows {
        table.add_row([k, v]);
    }
    for (what, m) in &reads {
        table.add_row([
            format!("REST {what}"),
            format!(
                "{:.0}/s, p50 {:.2} ms, p99 {:.2} ms, {} errors, {:.2}× whoami",
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
    table.add_row([
        format!("{} replicas started at once: requests to the API", args.replicas),
        format!("{replica_requests} ({:.1} MB of responses)", replica_bytes as f64 / 1e6),
    ]);
    for (i, (s, (rss, hwm))) in replica_starts.iter().zip(&replica_rss).enumerate() {
        table.add_row([
            format!("replica {}: ready, CPU, settled RSS (peak)", i + 1),
            format!(
                "{:.1} s, {:.1} s, {:.1} MiB ({:.1})",
                s.ready_seconds,
                s.cpu_seconds,
                mib(*rss),
                mib(*hwm)
            ),
        ]);
    }
    println!(
        "scale: {} clusters, {} pods, {} events, {} watchers",
        loaded.clusters, loaded.pods, args.events, args.watchers
    );
    println!("{table}");
    println!(
        "{}",
        json!({
            "bench": "scale", "clusters": loaded.clusters, "pods": loaded.pods, "events": args.events,
            "ready_seconds": start.ready_seconds, "start_requests": start.requests, "start_bytes": start.bytes,
            "start_cpu_seconds": start.cpu_seconds, "events_cached": events_cached,
            "rss_peak_mib": mib(peak), "rss_settled_mib": mib(settled),
            "reads": reads.iter().map(|(w, m)| json!({"what": w, "per_second": m.per_second(), "ratio": m.per_second() / noop})).collect::<Vec<_>>(),
            "watch_p50_ms": p(0.5), "watch_p99_ms": p(0.99), "watch_max_ms": p(1.0),
            "cpu_ms_per_change": cpu / args.changes as f64 * 1e3, "rss_with_watchers_mib": mib(open_rss),
            "replicas": replica_starts.iter().zip(&replica_rss).map(|(s, (rss, hwm))| json!({
                "ready_seconds": s.ready_seconds, "cpu_seconds": s.cpu_seconds,
                "rss_settled_mib": mib(*rss), "rss_peak_mib": mib(*hwm)})).collect::<Vec<_>>(),
            "replica_start_requests": replica_requests, "replica_start_bytes": replica_bytes,
        })
    );
}
