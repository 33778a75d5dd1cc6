//! Soak: minutes of mixed traffic over both transports. Errors must not
//! appear, memory must level off, and tasks and connections must stay flat
//! and go back to where they were. `KRAYNE_SOAK_SECONDS` sets the length:
//! the suite runs 60 s; RELIABILITY.md records a 10-minute run. The heap
//! grows to its working size over the first few minutes, so memory is
//! held to its bound only in runs of 5 minutes or more.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use futures::StreamExt as _;
use krayne_proto::v1::{self as pb, create_cluster_request::Source};
use krayne_tests::{Env, EnvOptions, Grpc, Rest, load::rss_kib, metric, test_database};
use serde_json::json;
use tokio::sync::Mutex;

const NS: &str = "/v1/namespaces/ml-team/clusters";

/// Clients, each with its own principal, half over REST, half over gRPC.
const WORKERS: usize = 6;

/// Unexpected answers, by what was asked.
type Errors = Arc<Mutex<Vec<String>>>;

async fn rest_cycle(rest: &Rest, name: &str, errors: &Errors) -> u64 {
    let mut bad = Vec::new();
    let mut check = |what: &str, status: u16, want: u16| {
        if status != want {
            bad.push(format!("REST {what} {name}: {status}"));
        }
    };
    let config = json!({"name": name, "worker_groups": [{"replicas": 1}]});
    check("create", rest.post(NS, &config).await.status, 201);
    check("get", rest.get(&format!("{NS}/{name}")).await.status, 200);
    check("list", rest.get(NS).await.status, 200);
    check("list all", rest.get("/v1/clusters").await.status, 200);
    check("describe", rest.get(&format!("{NS}/{name}/details")).await.status, 200);
    let scale = json!({"worker_group": "worker", "replicas": 2});
    check(
        "scale",
        rest.post(&format!("{NS}/{name}/scale"), &scale).await.status,
        200,
    );
    let waited = rest.get(&format!("{NS}/{name}/wait?timeout_seconds=30")).await;
    check("wait", waited.status, 200);
    check("whoami", rest.get("/v1/whoami").await.status, 200);
    check("delete", rest.delete(&format!("{NS}/{name}")).await.status, 204);
    let failures = bad.len() as u64;
    errors.lock().await.extend(bad);
    9 - failures
}

async fn grpc_cycle(g: &mut Grpc, name: &str, errors: &Errors) -> u64 {
    let mut bad = Vec::new();
    let mut check = |what: &str, result: Result<(), tonic::Status>| {
        if let Err(s) = result {
            bad.push(format!("gRPC {what} {name}: {:?} {}", s.code(), s.message()));
        }
    };
    let (ns, n) = ("ml-team".to_owned(), name.to_owned());
    let yaml = format!("name: {name}\nnamespace: ml-team\nworker_groups:\n  - replicas: 1\n");
    let create = pb::CreateClusterRequest {
        source: Some(Source::ConfigYaml(yaml)),
        dry_run: false,
        field_validation: 0,
        queue: None,
    };
    check("create", g.clusters.create_cluster(create).await.map(|_| ()));
    let get = pb::GetClusterRequest {
        namespace: ns.clone(),
        name: n.clone(),
    };
    check("get", g.clusters.get_cluster(get).await.map(|_| ()));
    let list = pb::ListClustersRequest {
        namespace: ns.clone(),
        ..Default::default()
    };
    check("list", g.clusters.list_clusters(list).await.map(|_| ()));
    let describe = pb::DescribeClusterRequest {
        namespace: ns.clone(),
        name: n.clone(),
    };
    check("describe", g.clusters.describe_cluster(describe).await.map(|_| ()));
    let scale = pb::ScaleClusterRequest {
        namespace: ns.clone(),
        name: n.clone(),
        worker_group: "worker".into(),
        replicas: Some(2),
        ..Default::default()
    };
    check("scale", g.clusters.scale_cluster(scale).await.map(|_| ()));
    let wait = pb::WaitClusterRequest {
        namespace: ns.clone(),
        name: n.clone(),
        timeout_seconds: 30,
    };
    let waited = match g.clusters.wait_cluster(wait).await {
        Ok(stream) => {
            let mut stream = stream.into_inner();
            let mut last = Ok(());
            while let Some(update) = stream.next().await {
                last = update.map(|_| ());
            }
            last
        }
        Err(s) => Err(s),
    };
    check("wait", waited);
    check("whoami", g.identity.who_am_i(pb::WhoAmIRequest {}).await.map(|_| ()));
    let delete = pb::DeleteClusterRequest { namespace: ns, name: n };
    check("delete", g.clusters.delete_cluster(delete).await.map(|_| ()));
    let failures = bad.len() as u64;
    errors.lock().await.extend(bad);
    8 - failures
}

/// One sample of the server's health.
#[derive(Debug, Clone, Copy)]
struct Sample {
    at: Duration,
    requests: u64,
    errors: usize,
    rss_kib: u64,
    tasks: f64,
    connections: f64,
    cached_events: f64,
}

#[tokio::test]
async fn mixed_traffic_soak_keeps_errors_memory_and_tasks_flat() {
    let seconds: u64 = std::env::var("KRAYNE_SOAK_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let db = test_database().await;
    let mut options = EnvOptions {
        // The debug log of ten minutes' traffic would fill the test's memory.
        server_args: vec!["--log".into(), "info".into()],
        ..EnvOptions::with_database(&db.url)
    };
    // Events expire as kube-apiserver's --event-ttl makes them, sooner, so
    // the cache reaches its steady size early in the run.
    options.sandbox.event_ttl = Duration::from_secs(15);
    let env = Env::start_with(options).await;
    let ops = env.ops();
    let pid = env.server.pid();
    // Idle is the server once its background tasks run (the keeper's first
    // round ends after the leader's tasks have started) and its task count
    // holds still: sampled earlier, on a loaded machine, it missed tasks
    // that start a moment after readiness.
    env.keeper_first_round().await;
    let alive = || async { metric(&ops.get("/metrics").await.text, "krayne_runtime_alive_tasks", "") };
    let mut idle_tasks = alive().await;
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = alive().await;
        if now == idle_tasks {
            break;
        }
        idle_tasks = now;
    }

    let (stop, errors, done) = (
        Arc::new(AtomicBool::new(false)),
        Errors::default(),
        Arc::new(AtomicU64::new(0)),
    );
    let mut workers = Vec::new();
    for w in 0..WORKERS {
        // One principal per worker, each well under the rate limit.
        let token = env.token(&format!("soak-{w}@example.com"), &["ml-research"]);
        let rest = env.rest(&token);
        let mut grpc = env.grpc(&token).await;
        let (stop, errors, done) = (stop.clone(), errors.clone(), done.clone());
        workers.push(tokio::spawn(async move {
            let mut i = 0u64;
            while !stop.load(Ordering::SeqCst) {
                i += 1;
                let name = format!("soak-{w}-{i}");
                let ok = if w % 2 == 0 {
                    rest_cycle(&rest, &name, &errors).await
                } else {
                    grpc_cycle(&mut grpc, &name, &errors).await
                };
                done.fetch_add(ok, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }));
    }

    let started = Instant::now();
    let every = Duration::from_secs((seconds / 12).max(5));
    let mut samples = Vec::new();
    while started.elapsed() < Duration::from_secs(seconds) {
        tokio::time::sleep(every).await;
        let text = ops.get("/metrics").await.text;
        samples.push(Sample {
            at: started.elapsed(),
            requests: done.load(Ordering::Relaxed),
            errors: errors.lock().await.len(),
            rss_kib: rss_kib(pid).unwrap().0,
            tasks: metric(&text, "krayne_runtime_alive_tasks", ""),
            connections: metric(&text, "krayne_http_connections_open", "listener=\"api\""),
            cached_events: metric(&text, "krayne_cache_objects", "kind=\"events\""),
        });
    }
    stop.store(true, Ordering::SeqCst);
    for w in workers {
        w.await.unwrap();
    }
    for s in &samples {
        eprintln!("soak {s:?}");
    }

    let errors = errors.lock().await;
    assert!(
        errors.is_empty(),
        "{} errors, e.g. {:?}",
        errors.len(),
        &errors[..errors.len().min(5)]
    );
    assert!(
        samples.iter().all(|s| s.errors == 0),
        "errors during the soak: {samples:?}"
    );
    let last = samples.last().expect("samples");
    // Six workers hold one REST pool and one gRPC channel each; more
    // connections, or tasks growing with time, would be leaks.
    let warm_tasks = samples[samples.len() / 3].tasks;
    for s in &samples {
        assert!(
            s.connections <= 24.0,
            "{} API connections open at {:?}",
            s.connections,
            s.at
        );
        assert!(
            s.tasks <= warm_tasks * 1.5 + 20.0,
            "{} tasks at {:?} (warm: {warm_tasks})",
            s.tasks,
            s.at
        );
    }
    assert!(last.requests > seconds * 10, "too little traffic: {}", last.requests);
    // Memory: after warming up (a third of the run), within 10%.
    let warm = samples[samples.len() / 3];
    let growth = last.rss_kib as f64 / warm.rss_kib as f64 - 1.0;
    eprintln!(
        "soak: {} requests, RSS {:+.1}% from {:?} to {:?}",
        last.requests,
        growth * 100.0,
        warm.at,
        last.at
    );
    assert!(
        seconds < 300 || growth.abs() <= 0.10,
        "RSS went from {} KiB at {:?} to {} KiB at {:?} ({:+.1}%; cached events {} then {})",
        warm.rss_kib,
        warm.at,
        last.rss_kib,
        last.at,
        growth * 100.0,
        warm.cached_events,
        last.cached_events,
    );
    // Tasks and connections: back to idle once the clients are gone, but
    // for the Kubernetes client's pool, which keeps a connection (a task)
    // for each request it had in flight at once: at most one per worker,
    // and one for the background's own calls (the leader renewing its
    // Lease) in flight beside them. A leak grows with the thousands of
    // requests made, not by one.
    let pooled = WORKERS + 1;
    let settle = Instant::now();
    loop {
        let text = ops.get("/metrics").await.text;
        let tasks = metric(&text, "krayne_runtime_alive_tasks", "");
        let connections = metric(&text, "krayne_http_connections_open", "listener=\"api\"");
        if tasks <= idle_tasks + pooled as f64 && connections == 0.0 {
            eprintln!(
                "back to idle {:?} after the soak: {tasks} tasks (idle: {idle_tasks})",
                settle.elapsed()
            );
            break;
        }
        assert!(
            settle.elapsed() < Duration::from_secs(10),
            "after the soak: {tasks} tasks (idle: {idle_tasks}), {connections} API connections open"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
