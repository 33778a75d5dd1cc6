//! Load on a release server with the sandbox as its Kubernetes: throughput
//! and latency of get, list, describe and create/delete over REST and gRPC
//! from concurrent clients, beside two ceilings measured in the same run
//! (the cheapest authenticated route, and the same reads made straight to
//! the sandbox with kube-rs), the same reads through a read-through server
//! (`--cache false`), and how many Kubernetes requests 1 000 reads cost.
//!
//! ```sh
//! cargo build --release -p krayne-server
//! cargo bench -p krayne-tests --bench load [-- --clients 32 --seconds 5]
//! ```
//!
//! Uses `TEST_DATABASE_URL` for the audit log (else a throwaway Postgres).
//! Prints a table and one JSON line.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::panic,
    missing_docs
)]

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use clap::Parser;
use comfy_table::{Table, presets::ASCII_MARKDOWN};
use futures::FutureExt as _;
use k8s_openapi::api::core::v1::{Event, Pod};
use krayne_proto::v1::{
    ClusterSpec, CreateClusterRequest, DeleteClusterRequest, DescribeClusterRequest, GetClusterRequest,
    ListClustersRequest, WhoAmIRequest, WorkerGroupSpec, create_cluster_request::Source,
};
use krayne_tests::{
    Env, Grpc, ServerProcess,
    load::{BenchEnv, Measured, Op, bench_namespace, closed_loop},
};
use kube::{
    Api,
    api::{DynamicObject, GroupVersionKind, ListParams},
    discovery::ApiResource,
};
use serde_json::{Value, json};

#[derive(Parser)]
#[command(about = "Load benchmark: krayne-server over REST and gRPC against the sandbox")]
struct Args {
    /// Concurrent clients in each phase.
    #[arg(long, default_value_t = 32)]
    clients: usize,
    /// Measured seconds per phase (after one second of warm-up).
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Clusters loaded before the reads.
    #[arg(long, default_value_t = 1000)]
    clusters: usize,
    /// Namespaces they are spread over.
    #[arg(long, default_value_t = 20)]
    namespaces: usize,
    /// Run only the phases whose "transport operation" contains this
    /// (e.g. `REST get`, `gRPC`, `cache false`).
    #[arg(long)]
    only: Option<String>,
    /// Passed by `cargo bench`.
    #[arg(long, hide = true)]
    bench: bool,
}

fn spec(name: &str) -> Value {
    json!({"name": name, "worker_groups": [{"name": "cpu", "replicas": 1}]})
}

/// What every phase needs to build its requests.
#[derive(Clone)]
struct Target {
    base: String,
    token: String,
    http: reqwest::Client,
    clusters: usize,
    namespaces: usize,
    next: Arc<AtomicUsize>,
}

impl Target {
    fn new(base: String, token: &str, args: &Args) -> Self {
        Self {
            base,
            token: token.to_owned(),
            http: reqwest::Client::builder()
                .pool_max_idle_per_host(args.clients)
                .build()
                .unwrap(),
            clusters: args.clusters,
            namespaces: args.namespaces,
            next: Arc::default(),
        }
    }

    /// The next loaded cluster, round robin: (namespace, name).
    fn pick(&self) -> (String, String) {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.clusters;
        (bench_namespace(i, self.namespaces), format!("c-{i:05}"))
    }

    /// A REST GET of the path `path(self)` builds, successful on 2xx.
    fn rest_get(&self, path: fn(&Target) -> String) -> Op {
        let t = self.clone();
        Arc::new(move |_| {
            let request = t.http.get(format!("{}{}", t.base, path(&t))).bearer_auth(&t.token);
            async move {
                let res = request.send().await.ok()?;
                let ok = res.status().is_success();
                Some(res.bytes().await.is_ok() && ok)
            }
            .boxed()
        })
    }
}

fn get_path(t: &Target) -> String {
    let (ns, name) = t.pick();
    format!("/v1/namespaces/{ns}/clusters/{name}")
}

fn describe_path(t: &Target) -> String {
    format!("{}/details", get_path(t))
}

fn list_namespace_path(t: &Target) -> String {
    format!("/v1/namespaces/{}/clusters", t.pick().0)
}

fn list_all_path(_: &Target) -> String {
    "/v1/clusters?page_size=1000".into()
}

fn whoami_path(_: &Target) -> String {
    "/v1/whoami".into()
}

/// gRPC calls, one channel (connection) per client.
fn grpc_op<F, Fut>(clients: &Arc<Vec<Grpc>>, target: &Target, call: F) -> Op
where
    F: Fn(Grpc, Target) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = bool> + Send + 'static,
{
    let (clients, target) = (clients.clone(), target.clone());
    let call = Arc::new(call);
    Arc::new(move |client| {
        let grpc = clients[client % clients.len()].clone();
        let fut = call(grpc, target.clone());
        async move { Some(fut.await) }.boxed()
    })
}

fn grpc_reads(grpc: &Arc<Vec<Grpc>>, t: &Target) -> Vec<(&'static str, Op)> {
    vec![
        (
            "no-op (WhoAmI)",
            grpc_op(grpc, t, |mut g, _| async move {
                g.identity.who_am_i(WhoAmIRequest {}).await.is_ok()
            }),
        ),
        (
            "get",
            grpc_op(grpc, t, |mut g, t| async move {
                let (namespace, name) = t.pick();
                g.clusters
                    .get_cluster(GetClusterRequest { namespace, name })
                    .await
                    .is_ok()
            }),
        ),
        (
            "describe",
            grpc_op(grpc, t, |mut g, t| async move {
                let (namespace, name) = t.pick();
                let request = DescribeClusterRequest { namespace, name };
                g.clusters.describe_cluster(request).await.is_ok()
            }),
        ),
        (
            "list namespace",
            grpc_op(grpc, t, |mut g, t| async move {
                let request = ListClustersRequest {
                    namespace: t.pick().0,
                    ..Default::default()
                };
                g.clusters.list_clusters(request).await.is_ok()
            }),
        ),
        (
            "list all (1 page)",
            grpc_op(grpc, t, |mut g, _| async move {
                let request = ListClustersRequest {
                    page_size: 1000,
                    ..Default::default()
                };
                g.clusters.list_clusters(request).await.is_ok()
            }),
        ),
    ]
}

fn rest_reads(t: &Target) -> Vec<(&'static str, Op)> {
    vec![
        ("no-op (whoami)", t.rest_get(whoami_path)),
        ("get", t.rest_get(get_path)),
        ("describe", t.rest_get(describe_path)),
        ("list namespace", t.rest_get(list_namespace_path)),
        ("list all (1 page)", t.rest_get(list_all_path)),
    ]
}

/// The same reads made straight to the sandbox: what a client with
/// kube-rs and cluster-wide access would see, without krayne in between.
fn kube_reads(client: &kube::Client, t: &Target) -> Vec<(&'static str, Op)> {
    vec![
        (
            "get",
            kube_op(client, t, |client, t| async move {
                let (ns, name) = t.pick();
                rayclusters(client, Some(&ns)).get(&name).await.is_ok()
            }),
        ),
        (
            "describe (3 requests)",
            kube_op(client, t, |client, t| async move {
                let (ns, name) = t.pick();
                let pods_of = ListParams::default().labels(&format!("ray.io/cluster={name}"));
                let all_events = ListParams::default();
                let (rc, pods) = (
                    rayclusters(client.clone(), Some(&ns)),
                    Api::<Pod>::namespaced(client.clone(), &ns),
                );
                let events = Api::<Event>::namespaced(client, &ns);
                let (c, p, e) = tokio::join!(rc.get(&name), pods.list(&pods_of), events.list(&all_events));
                c.is_ok() && p.is_ok() && e.is_ok()
            }),
        ),
        (
            "list namespace",
            kube_op(client, t, |client, t| async move {
                let ns = t.pick().0;
                rayclusters(client, Some(&ns))
                    .list(&ListParams::default())
                    .await
                    .is_ok()
            }),
        ),
        (
            "list all (1 page)",
            kube_op(client, t, |client, _| async move {
                rayclusters(client, None).list(&ListParams::default()).await.is_ok()
            }),
        ),
    ]
}

/// RayClusters of one namespace, or of all.
fn rayclusters(client: kube::Client, namespace: Option<&str>) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("ray.io", "v1", "RayCluster"));
    match namespace {
        Some(ns) => Api::namespaced_with(client, ns, &resource),
        None => Api::all_with(client, &resource),
    }
}

/// Requests made with kube-rs, from a shared client.
fn kube_op<F, Fut>(client: &kube::Client, target: &Target, call: F) -> Op
where
    F: Fn(kube::Client, Target) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = bool> + Send + 'static,
{
    let (client, target) = (client.clone(), target.clone());
    Arc::new(move |_| {
        let fut = call(client.clone(), target.clone());
        async move { Some(fut.await) }.boxed()
    })
}

/// Creates clusters named by `prefix` round robin over the namespaces, over
/// REST; every name it created goes into `created`.
fn rest_create(t: &Target, prefix: &'static str, created: &Arc<Mutex<Vec<(String, String)>>>) -> Op {
    let (t, created) = (t.clone(), created.clone());
    Arc::new(move |_| {
        let i = t.next.fetch_add(1, Ordering::Relaxed);
        let (ns, name) = (bench_namespace(i, t.namespaces), format!("{prefix}-{i:06}"));
        let request = t
            .http
            .post(format!("{}/v1/namespaces/{ns}/clusters", t.base))
            .bearer_auth(&t.token)
            .json(&spec(&name));
        let created = created.clone();
        async move {
            let ok = request.send().await.ok()?.status().is_success();
            if ok {
                created.lock().unwrap().push((ns, name));
            }
            Some(ok)
        }
        .boxed()
    })
}

/// Deletes what `created` holds, over REST, until it is empty.
fn rest_delete(t: &Target, created: &Arc<Mutex<Vec<(String, String)>>>) -> Op {
    let (t, created) = (t.clone(), created.clone());
    Arc::new(move |_| {
        let next = created.lock().unwrap().pop();
        let request = next.map(|(ns, name)| {
            t.http
                .delete(format!("{}/v1/namespaces/{ns}/clusters/{name}", t.base))
                .bearer_auth(&t.token)
        });
        async move { Some(request?.send().await.ok()?.status().is_success()) }.boxed()
    })
}

fn grpc_create(grpc: &Arc<Vec<Grpc>>, t: &Target, created: &Arc<Mutex<Vec<(String, String)>>>) -> Op {
    let created = created.clone();
    grpc_op(grpc, t, move |mut g, t| {
        let i = t.next.fetch_add(1, Ordering::Relaxed);
        let (ns, name) = (bench_namespace(i, t.namespaces), format!("g-{i:06}"));
        let created = created.clone();
        async move {
            let spec = ClusterSpec {
                name: name.clone(),
                namespace: Some(ns.clone()),
                worker_groups: vec![WorkerGroupSpec {
                    name: Some("cpu".into()),
                    replicas: Some(1),
                    ..Default::default()
                }],
                ..Default::default()
            };
            let request = CreateClusterRequest {
                source: Some(Source::Spec(spec)),
                dry_run: false,
                field_validation: 0,
                queue: None,
            };
            let ok = g.clusters.create_cluster(request).await.is_ok();
            if ok {
                created.lock().unwrap().push((ns, name));
            }
            ok
        }
    })
}

fn grpc_delete(grpc: &Arc<Vec<Grpc>>, created: &Arc<Mutex<Vec<(String, String)>>>) -> Op {
    let (grpc, created) = (grpc.clone(), created.clone());
    Arc::new(move |client| {
        let next = created.lock().unwrap().pop();
        let mut g = grpc[client % grpc.len()].clone();
        async move {
            let (namespace, name) = next?;
            Some(
                g.clusters
                    .delete_cluster(DeleteClusterRequest { namespace, name })
                    .await
                    .is_ok(),
            )
        }
        .boxed()
    })
}

/// Loads `args.clusters` clusters over REST and waits until all are ready.
async fn load_clusters(bench: &BenchEnv, t: &Target, args: &Args) {
    let created = bench.create_clusters(args.clusters).await;
    assert_eq!(created, args.clusters, "not every cluster was created");
    loop {
        let list: Value = t
            .http
            .get(format!("{}/v1/clusters?page_size=1000", t.base))
            .bearer_auth(&t.token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let clusters = list["clusters"].as_array().cloned().unwrap_or_default();
        let ready = clusters.iter().filter(|c| c["status"] == "ready").count();
        if clusters.len() >= args.clusters.min(1000) && ready == clusters.len() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Kubernetes requests the sandbox saw per 1 000 reads of each kind.
async fn kube_requests_per_1000(env: &Env, t: &Target) -> Vec<(&'static str, usize)> {
    let mut out = Vec::new();
    for (name, op) in rest_reads(t) {
        let before = env.sandbox.requests().len();
        for _ in 0..1000 {
            assert_eq!(op(0).await, Some(true), "{name} failed");
        }
        out.push((name, env.sandbox.requests().len() - before));
    }
    out
}

struct Row {
    transport: &'static str,
    operation: &'static str,
    measured: Measured,
    baseline: Option<f64>,
}

async fn phase(args: &Args, op: Op) -> Measured {
    closed_loop(
        args.clients,
        Duration::from_secs(1),
        Duration::from_secs_f64(args.seconds),
        op,
    )
    .await
}

impl Args {
    fn runs(&self, transport: &str, operation: &str) -> bool {
        self.only
            .as_deref()
            .is_none_or(|only| format!("{transport} {operation}").contains(only))
    }
}

async fn reads(args: &Args, transport: &'static str, ops: Vec<(&'static str, Op)>, rows: &mut Vec<Row>) {
    let mut noop = None;
    for (operation, op) in ops {
        if !args.runs(transport, operation) {
            continue;
        }
        eprintln!("{transport} {operation}…");
        let measured = phase(args, op).await;
        if operation.starts_with("no-op") {
            noop = Some(measured.per_second());
        }
        rows.push(Row {
            transport,
            operation,
            measured,
            baseline: noop,
        });
    }
}

async fn grpc_clients(url: &str, token: &str, n: usize) -> Arc<Vec<Grpc>> {
    Arc::new(futures::future::join_all((0..n).map(|_| Grpc::connect(url, token))).await)
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let bench = BenchEnv::start(args.namespaces, |_| ()).await;
    let (env, token) = (&bench.env, &bench.token);
    let cached = Target::new(env.url(), token, &args);
    eprintln!(
        "krayne-server pid {}; loading {} clusters…",
        env.server.pid(),
        args.clusters
    );
    load_clusters(&bench, &cached, &args).await;

    let mut rows = Vec::new();
    let grpc = grpc_clients(&env.url(), token, args.clients).await;
    reads(&args, "REST", rest_reads(&cached), &mut rows).await;
    reads(&args, "gRPC", grpc_reads(&grpc, &cached), &mut rows).await;
    let kube = kube::Client::try_from(kube::Config::new(env.sandbox.url().parse().unwrap())).unwrap();
    reads(&args, "kube-rs → sandbox", kube_reads(&kube, &cached), &mut rows).await;
    let full = args.only.is_none();
    let per_1000_cached = if full {
        kube_requests_per_1000(env, &cached).await
    } else {
        Vec::new()
    };

    let read_through: ServerProcess = env.spawn_server(&["--cache", "false"]).await;
    let uncached = Target::new(format!("http://{}", read_through.api), token, &args);
    reads(&args, "REST, --cache false", rest_reads(&uncached), &mut rows).await;
    let per_1000_uncached = if full {
        kube_requests_per_1000(env, &uncached).await
    } else {
        Vec::new()
    };
    drop(read_through);

    let created = Arc::new(Mutex::new(Vec::new()));
    for (transport, operation, op) in [
        ("REST", "create", rest_create(&cached, "r", &created)),
        ("REST", "delete", rest_delete(&cached, &created)),
        ("gRPC", "create", grpc_create(&grpc, &cached, &created)),
        ("gRPC", "delete", grpc_delete(&grpc, &created)),
    ] {
        if !args.runs(transport, operation) {
            continue;
        }
        eprintln!("{transport} {operation}…");
        rows.push(Row {
            transport,
            operation,
            measured: phase(&args, op).await,
            baseline: None,
        });
    }
    report(&args, &rows, &per_1000_cached, &per_1000_uncached);
}

fn report(args: &Args, rows: &[Row], cached: &[(&str, usize)], uncached: &[(&str, usize)]) {
    let ms = |d: Duration| (d.as_secs_f64() * 1e5).round() / 100.0;
    let direct = |operation: &str| {
        rows.iter()
            .find(|r| r.transport.starts_with("kube-rs") && r.operation.starts_with(operation))
            .map(|r| r.measured.per_second())
    };
    let mut table = Table::new();
    table.load_style(ASCII_MARKDOWN).set_header([
        "transport",
        "operation",
        "req/s",
        "p50 ms",
        "p99 ms",
        "errors",
        "÷ no-op",
        "÷ kube-rs",
    ]);
    let mut json_rows = Vec::new();
    for r in rows {
        let rps = r.measured.per_second();
        let of_noop = r
            .baseline
            .filter(|_| !r.operation.starts_with("no-op"))
            .map(|b| rps / b);
        let of_direct = (!r.transport.starts_with("kube-rs"))
            .then(|| direct(r.operation.split(' ').next().unwrap_or_default()))
            .flatten()
            .map(|d| rps / d);
        let ratio = |x: Option<f64>| x.map_or(String::new(), |x| format!("{x:.2}"));
        table.add_row([
            r.transport.to_owned(),
            r.operation.to_owned(),
            format!("{rps:.0}"),
            format!("{:.2}", ms(r.measured.percentile(0.5))),
            format!("{:.2}", ms(r.measured.percentile(0.99))),
            r.measured.errors.to_string(),
            ratio(of_noop),
            ratio(of_direct),
        ]);
        json_rows.push(json!({
            "transport": r.transport, "operation": r.operation, "req_per_s": rps.round(),
            "p50_ms": ms(r.measured.percentile(0.5)), "p99_ms": ms(r.measured.percentile(0.99)),
            "requests": r.measured.requests, "errors": r.measured.errors,
            "of_noop": of_noop, "of_kube_rs": of_direct,
        }));
    }
    println!(
        "load: {} clients, {} s per phase, {} clusters in {} namespaces",
        args.clients, args.seconds, args.clusters, args.namespaces
    );
    println!("{table}");
    let mut per_1000 = Table::new();
    per_1000.load_style(ASCII_MARKDOWN).set_header([
        "1 000 REST reads of",
        "Kubernetes requests (cache)",
        "(--cache false)",
    ]);
    for ((name, c), (_, u)) in cached.iter().zip(uncached) {
        per_1000.add_row([(*name).to_owned(), c.to_string(), u.to_string()]);
    }
    println!("{per_1000}");
    let map = |v: &[(&str, usize)]| {
        v.iter()
            .map(|(k, n)| ((*k).to_owned(), json!(n)))
            .collect::<serde_json::Map<_, _>>()
    };
    println!(
        "{}",
        json!({
            "bench": "load", "clients": args.clients, "seconds": args.seconds, "clusters": args.clusters,
            "namespaces": args.namespaces, "rows": json_rows,
            "kube_requests_per_1000_reads": {"cache": map(cached), "read_through": map(uncached)},
        })
    );
}
