//! Usage accounting (issue 58): a scripted timeline in the sandbox —
//! create, scale down, suspend, resume, delete — watched independently
//! (every pod's `startedAt` and the moment it was first seen gone, polled
//! from the API server), matched by the API's answer to within a second
//! per interval; then the recorder's leader killed while a pod ends, and
//! its end recorded once, marked estimated.

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use jiff::Timestamp;
use krayne_tests::{Env, EnvOptions, Rest, TEAMS};
use serde_json::{Value, json};

const NS: &str = "/v1/namespaces/ml-team/clusters";
/// The recorder runs under the lifecycle Lease, with the reaper off (the
/// chart's default): a short Lease, so that a successor takes over soon.
const LEADER: [&str; 2] = ["--lifecycle-lease-seconds", "3"];

/// A server recording usage, on `database_url` (SQLite of its own when
/// `None`), with `args` more.
async fn recording_env(database_url: Option<String>, args: &[&str]) -> Env {
    Env::start_with(EnvOptions {
        server_args: LEADER.iter().chain(args).map(ToString::to_string).collect(),
        teams: TEAMS.to_owned(),
        database_url,
        ..EnvOptions::default()
    })
    .await
}

/// A cluster `name` whose one worker has one GPU.
fn one_gpu_worker(name: &str) -> Value {
    json!({"name": name, "worker_groups": [{"name": "gpu", "replicas": 1, "max_replicas": 1, "gpus": 1}]})
}

/// A pod as the watcher saw it: its charge, when it ran, when it was
/// last seen and first seen gone.
#[derive(Debug, Clone)]
struct Seen {
    gpus: f64,
    cpus: f64,
    memory_gib: f64,
    started: Timestamp,
    last_present: Timestamp,
    gone: Option<Timestamp>,
}

/// Polls the sandbox's pods of ml-team, every 100 ms, until told to stop.
struct Watcher {
    pods: std::sync::Arc<std::sync::Mutex<BTreeMap<String, Seen>>>,
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

fn quantity(v: &Value) -> f64 {
    let text = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
    for (suffix, factor) in [
        ("Ki", 1024.0),
        ("Mi", 1024.0 * 1024.0),
        ("Gi", GIB),
        ("Ti", GIB * 1024.0),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("m", 1e-3),
    ] {
        if let Some(number) = text.strip_suffix(suffix) {
            return number.parse::<f64>().unwrap_or(0.0) * factor;
        }
    }
    text.parse().unwrap_or(0.0)
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

impl Watcher {
    fn start(env: &Env) -> Self {
        let url = format!("{}/api/v1/namespaces/ml-team/pods", env.sandbox.url());
        let pods = std::sync::Arc::new(std::sync::Mutex::new(BTreeMap::<String, Seen>::new()));
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let seen = pods.clone();
        let task = tokio::spawn(async move {
            let client = reqwest::Client::new();
            loop {
                let list: Value = client.get(&url).send().await.unwrap().json().await.unwrap();
                let now = Timestamp::now();
                let mut present = Vec::new();
                for pod in list["items"].as_array().unwrap() {
                    let uid = pod["metadata"]["uid"].as_str().unwrap().to_owned();
                    let started = pod["status"]["containerStatuses"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|c| c["state"]["running"]["startedAt"].as_str())
                        .filter_map(|t| t.parse::<Timestamp>().ok())
                        .min();
                    if pod["status"]["phase"] != "Running" {
                        continue;
                    }
                    let Some(started) = started else { continue };
                    present.push(uid.clone());
                    let containers = pod["spec"]["containers"].as_array().unwrap();
                    let sum = |name: &str| -> f64 {
                        containers
                            .iter()
                            .map(|c| {
                                let r = &c["resources"];
                                let v = if r["requests"][name].is_null() {
                                    &r["limits"][name]
                                } else {
                                    &r["requests"][name]
                                };
                                if v.is_null() { 0.0 } else { quantity(v) }
                            })
                            .sum()
                    };
                    let mut all = seen.lock().unwrap();
                    let entry = all.entry(uid).or_insert(Seen {
                        gpus: sum("nvidia.com/gpu"),
                        cpus: sum("cpu"),
                        memory_gib: sum("memory") / GIB,
                        started,
                        last_present: now,
                        gone: None,
                    });
                    entry.last_present = now;
                }
                for (uid, pod) in seen.lock().unwrap().iter_mut() {
                    if pod.gone.is_none() && !present.contains(uid) {
                        pod.gone = Some(now);
                    }
                }
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(100)) => {}
                    _ = stopped.changed() => return,
                }
            }
        });
        Self { pods, stop, task }
    }

    async fn finish(self) -> Vec<Seen> {
        let _ = self.stop.send(true);
        let _ = self.task.await;
        self.pods.lock().unwrap().values().cloned().collect()
    }
}

fn hours(from: Timestamp, to: Timestamp) -> f64 {
    to.duration_since(from).as_secs_f64() / 3600.0
}

/// Until `cluster` has `n` running pods (60 s at most).
async fn running_pods(env: &Env, cluster: &str, n: usize) {
    let url = format!(
        "{}/api/v1/namespaces/ml-team/pods?labelSelector=ray.io%2Fcluster%3D{cluster}",
        env.sandbox.url()
    );
    let started = Instant::now();
    loop {
        let list: Value = reqwest::get(&url).await.unwrap().json().await.unwrap();
        let running = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["status"]["phase"] == "Running")
            .count();
        if running == n && list["items"].as_array().unwrap().len() == n {
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "{list}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Deletes ml-team's first worker pod straight at the API server, as a
/// node failure would end it (KubeRay makes another).
async fn end_a_worker(env: &Env) {
    let pods: Value = reqwest::get(format!(
        "{}/api/v1/namespaces/ml-team/pods?labelSelector=ray.io%2Fnode-type%3Dworker",
        env.sandbox.url()
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let worker = pods["items"][0]["metadata"]["name"].as_str().unwrap().to_owned();
    reqwest::Client::new()
        .delete(format!("{}/api/v1/namespaces/ml-team/pods/{worker}", env.sandbox.url()))
        .send()
        .await
        .unwrap();
}

/// The usage report of ml-team since `from`, grouped `by`, as alice.
async fn usage(env: &Env, from: Timestamp, by: &str) -> Value {
    usage_at(&env.rest(&env.alice()), from, by).await
}

/// [`usage`] through `rest` (a replica of alice's).
async fn usage_at(rest: &Rest, from: Timestamp, by: &str) -> Value {
    rest.get(&format!("/v1/namespaces/ml-team/usage?from={from}&by={by}"))
        .await
        .expect(200)
        .body
}

/// Until the report's GPU-hours stop moving (every end recorded).
async fn settled(env: &Env, from: Timestamp) -> Value {
    settled_at(&env.rest(&env.alice()), from).await
}

/// [`settled`] through `rest`.
async fn settled_at(rest: &Rest, from: Timestamp) -> Value {
    let mut last = usage_at(rest, from, "cluster").await;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let now = usage_at(rest, from, "cluster").await;
        if now["totals"]["gpu_hours"] == last["totals"]["gpu_hours"] {
            return now;
        }
        last = now;
    }
    last
}

#[tokio::test]
async fn a_timelines_hours_match_the_pods_lives_within_a_second_each() {
    let env = recording_env(None, &[]).await;
    let alice = env.rest(&env.alice());
    let from = Timestamp::now();
    let watcher = Watcher::start(&env);
    alice
        .post(
            NS,
            &json!({"name": "acct", "worker_groups": [{"name": "gpu", "replicas": 2, "max_replicas": 2, "gpus": 1}]}),
        )
        .await
        .expect(201);
    running_pods(&env, "acct", 3).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    alice
        .post(
            &format!("{NS}/acct/scale"),
            &json!({"worker_group": "gpu", "replicas": 1}),
        )
        .await
        .expect(200);
    running_pods(&env, "acct", 2).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    alice.post(&format!("{NS}/acct/suspend"), &json!({})).await.expect(200);
    running_pods(&env, "acct", 0).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    alice.post(&format!("{NS}/acct/resume"), &json!({})).await.expect(200);
    running_pods(&env, "acct", 2).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    alice.delete(&format!("{NS}/acct")).await.expect(204);
    running_pods(&env, "acct", 0).await;
    // The watcher's next poll sees the last ones gone.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let pods = watcher.finish().await;
    assert_eq!(
        pods.len(),
        5,
        "a head and two workers, then a head and one worker after the resume: {pods:?}"
    );

    let mut expected_gpu = 0.0;
    let mut expected_cpu = 0.0;
    let mut expected_memory = 0.0;
    for pod in &pods {
        let end = pod.gone.expect("every pod ended");
        let h = hours(pod.started, end);
        expected_gpu += pod.gpus * h;
        expected_cpu += pod.cpus * h;
        expected_memory += pod.memory_gib * h;
    }
    let report = settled(&env, from).await;
    let totals = &report["totals"];
    // Within a second per interval (and the watcher's 100 ms poll).
    let slack = |per_hour: f64| pods.len() as f64 * per_hour * 1.1 / 3600.0;
    let gpus_per_pod = pods.iter().map(|p| p.gpus).fold(0.0, f64::max);
    let cpus_per_pod = pods.iter().map(|p| p.cpus).fold(0.0, f64::max);
    let gpu = totals["gpu_hours"].as_f64().unwrap();
    let cpu = totals["cpu_hours"].as_f64().unwrap();
    assert!(expected_gpu > 0.0 && gpus_per_pod >= 1.0, "{pods:?}");
    assert!(
        (gpu - expected_gpu).abs() <= slack(gpus_per_pod),
        "GPU-hours {gpu} vs {expected_gpu} (±{}): {report}",
        slack(gpus_per_pod)
    );
    assert!(
        (cpu - expected_cpu).abs() <= slack(cpus_per_pod),
        "CPU-hours {cpu} vs {expected_cpu}: {report}"
    );
    let memory_per_pod = pods.iter().map(|p| p.memory_gib).fold(0.0, f64::max);
    let memory = totals["memory_gib_hours"].as_f64().unwrap();
    assert!(expected_memory > 0.0, "{pods:?}");
    assert!(
        (memory - expected_memory).abs() <= slack(memory_per_pod),
        "GiB-hours {memory} vs {expected_memory}: {report}"
    );
    let suspended = totals["suspended_hours"].as_f64().unwrap() * 3600.0;
    assert!((1.0..8.0).contains(&suspended), "suspended for about 2 s: {report}");
    let existed = totals["cluster_hours"].as_f64().unwrap() * 3600.0;
    assert!(existed > 9.0, "the cluster existed the whole timeline: {report}");
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{report}");
    assert_eq!(rows[0]["cluster"], "acct");
    assert_eq!(rows[0]["estimated"], false);

    let by_group = usage(&env, from, "worker_group").await;
    let groups: Vec<&str> = by_group["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["worker_group"].as_str().unwrap())
        .collect();
    assert!(groups.contains(&"gpu"), "{by_group}");
    let by_creator = usage(&env, from, "creator").await;
    assert_eq!(by_creator["rows"][0]["creator"], "alice@example.com", "{by_creator}");
    let by_team = usage(&env, from, "team,day").await;
    assert_eq!(by_team["rows"][0]["team"], "ml-research", "{by_team}");
    // The counters went up with the GPUs' seconds, within a round's.
    let counted = env
        .metric(
            "krayne_usage_gpu_seconds_total",
            "namespace=\"ml-team\",team=\"ml-research\"",
        )
        .await;
    assert!(
        counted >= (gpu * 3600.0 - 16.0).max(1.0) && counted <= gpu * 3600.0 + 1.0,
        "{counted} GPU-seconds counted, {gpu} GPU-hours recorded"
    );
    // And CPU and memory alike: each at most what was recorded, and short
    // of it by at most a round's (15 s) of the largest pod's share.
    let labels = "namespace=\"ml-team\",team=\"ml-research\"";
    let cpu_seconds = env.metric("krayne_usage_cpu_seconds_total", labels).await;
    assert!(
        cpu_seconds >= cpu * 3600.0 - 16.0 * cpus_per_pod * 2.0 && cpu_seconds <= cpu * 3600.0 + 1.0,
        "{cpu_seconds} CPU-seconds counted, {cpu} CPU-hours recorded"
    );
    let byte_seconds = env.metric("krayne_usage_memory_byte_seconds_total", labels).await;
    let recorded_bytes = memory * 3600.0 * GIB;
    assert!(
        byte_seconds >= recorded_bytes - 16.0 * memory_per_pod * GIB * 2.0 && byte_seconds <= recorded_bytes + GIB,
        "{byte_seconds} byte-seconds counted, {memory} GiB-hours recorded"
    );
}

#[tokio::test]
async fn a_pod_that_ends_while_no_recorder_runs_is_closed_once_and_marked_estimated() {
    let mut env = recording_env(None, &[]).await;
    let from = Timestamp::now();
    let alice = env.rest(&env.alice());
    alice.post(NS, &one_gpu_worker("gap")).await.expect(201);
    running_pods(&env, "gap", 2).await;
    let before = settled(&env, from).await;
    assert!(before["totals"]["gpu_hours"].as_f64().unwrap() > 0.0, "{before}");

    // The leader goes; the worker pod ends meanwhile (KubeRay makes
    // another, which the next leader finds).
    env.stop_server().await;
    end_a_worker(&env).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    env.start_server().await;
    running_pods(&env, "gap", 2).await;
    let alice = env.rest(&env.alice());
    let after = settled(&env, from).await;
    let rows = after["rows"].as_array().unwrap();
    assert_eq!(
        rows[0]["estimated"], true,
        "the ended worker's end is estimated: {after}"
    );
    // Counted once: the GPU-hours are at most the time since `from` (one
    // GPU at a time), never the ended worker's and its successor's twice.
    let elapsed = hours(from, Timestamp::now());
    let gpu = after["totals"]["gpu_hours"].as_f64().unwrap();
    assert!(gpu <= elapsed + 1.0 / 3600.0, "{gpu} > {elapsed}: {after}");
    alice.delete(&format!("{NS}/gap")).await.expect(204);
}

#[tokio::test]
async fn callers_see_only_their_namespaces_usage() {
    let env = recording_env(None, &[]).await;
    let alice = env.rest(&env.alice());
    alice.get("/v1/namespaces/other-team/usage").await.expect(403);
    let mine = alice.get("/v1/usage").await.expect(200).body;
    for row in mine["rows"].as_array().unwrap() {
        assert_ne!(row["namespace"], "other-team", "{mine}");
    }
    alice.get("/v1/usage?by=month").await.expect(400);
    alice
        .get("/v1/usage?from=2026-11-02T00:00:00Z&to=2026-11-01T00:00:00Z")
        .await
        .expect(400);
    env.rest(&env.admin()).get("/v1/usage?by=team").await.expect(200);
    let allocation = alice
        .get("/v1/usage/allocation?window=7d&aggregate=label:krayne.dev/team")
        .await
        .expect(200)
        .body;
    assert_eq!(allocation["code"], 200, "{allocation}");
    assert!(allocation["data"][0].is_object(), "{allocation}");
    alice.get("/v1/usage/allocation?window=forever").await.expect(400);
    alice
        .get("/v1/usage/allocation?window=7d&aggregate=label:app")
        .await
        .expect(400);

    let mut grpc = env.grpc(&env.alice()).await;
    let mine = grpc
        .usage
        .get_usage(krayne_proto::v1::GetUsageRequest {
            namespace: "ml-team".into(),
            by: vec!["cluster".into()],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(mine.totals.is_some() && mine.from.is_some());
    let refused = grpc
        .usage
        .get_usage(krayne_proto::v1::GetUsageRequest {
            namespace: "other-team".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::PermissionDenied);
    let bad = grpc
        .usage
        .get_usage(krayne_proto::v1::GetUsageRequest {
            by: vec!["month".into()],
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(bad.code(), tonic::Code::InvalidArgument);
}

#[tokio::test]
async fn a_pod_that_ends_while_the_database_is_down_is_recorded_at_its_end() {
    let db = krayne_tests::test_database().await;
    let (proxy, url) = db.behind_proxy().await;
    let env = recording_env(Some(url), &[]).await;
    let from = Timestamp::now();
    let watcher = Watcher::start(&env);
    let alice = env.rest(&env.alice());
    alice.post(NS, &one_gpu_worker("dbout")).await.expect(201);
    running_pods(&env, "dbout", 2).await;
    tokio::time::sleep(Duration::from_secs(1)).await;

    // The database goes; a worker ends meanwhile and KubeRay makes another.
    proxy.down();
    end_a_worker(&env).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    proxy.up();
    let report = settled(&env, from).await;
    let now = Timestamp::now();
    let pods = watcher.finish().await;
    assert_eq!(pods.len(), 3, "a head, the ended worker and its successor: {pods:?}");
    let expected: f64 = pods
        .iter()
        .map(|p| p.gpus * hours(p.started, p.gone.unwrap_or(now)))
        .sum();
    let gpu = report["totals"]["gpu_hours"].as_f64().unwrap();
    // The ended worker is closed when it ended, not when the database came
    // back (4 s later), and counted once; the open ones up to the report.
    let report_time = report["to"].as_str().unwrap().parse::<Timestamp>().unwrap();
    let expected_then: f64 = pods
        .iter()
        .map(|p| p.gpus * hours(p.started, p.gone.unwrap_or(report_time).min(report_time)))
        .sum();
    assert!(
        (gpu - expected_then).abs() <= 3.0 * 1.1 / 3600.0,
        "GPU-hours {gpu} vs {expected_then} (now {expected}): {report}"
    );
    assert_eq!(
        report["rows"][0]["estimated"], false,
        "its end was seen, not estimated: {report}"
    );
}

#[tokio::test]
async fn a_killed_leaders_successor_records_on_and_counts_nothing_twice() {
    let db = krayne_tests::test_database().await;
    let env = recording_env(Some(db.url.clone()), &[]).await;
    let second = env.spawn_server(&[]).await;
    let from = Timestamp::now();
    let watcher = Watcher::start(&env);
    env.rest(&env.alice())
        .post(NS, &one_gpu_worker("failover"))
        .await
        .expect(201);
    running_pods(&env, "failover", 2).await;
    let before = settled(&env, from).await;
    assert!(before["totals"]["gpu_hours"].as_f64().unwrap() > 0.0, "{before}");

    // SIGKILL to whichever replica records: it closes nothing, releases
    // nothing. A worker ends before the Lease lapses; KubeRay makes
    // another.
    let survivor = env.kill_lease_holder(&second).await;
    end_a_worker(&env).await;
    running_pods(&env, "failover", 2).await;
    let survivor = Rest::new(&format!("http://{survivor}"), Some(env.alice()));
    let started = Instant::now();
    let report = loop {
        let report = settled_at(&survivor, from).await;
        if report["rows"][0]["estimated"] == true {
            break report;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the successor never closed the ended worker: {report}"
        );
    };
    let report_time = report["to"].as_str().unwrap().parse::<Timestamp>().unwrap();
    let pods = watcher.finish().await;
    assert_eq!(pods.len(), 3, "a head, the ended worker and its successor: {pods:?}");
    let expected: f64 = pods
        .iter()
        .map(|p| p.gpus * hours(p.started, p.gone.unwrap_or(report_time).min(report_time)))
        .sum();
    let gpu = report["totals"]["gpu_hours"].as_f64().unwrap();
    // Nothing twice: at most the pods' lives (a second each). The ended
    // worker's end is estimated at the killed leader's last round, at
    // most a round (15 s) and the Lease (3 s) before it really ended.
    assert!(
        gpu <= expected + 3.0 * 1.1 / 3600.0,
        "GPU-hours {gpu} > {expected}: {report}"
    );
    assert!(
        gpu >= expected - 19.0 / 3600.0,
        "GPU-hours {gpu} lost more than a round of {expected}: {report}"
    );
    survivor.delete(&format!("{NS}/failover")).await.expect(204);
}

#[tokio::test]
async fn with_usage_accounting_off_nothing_is_recorded_and_no_lease_is_asked_for() {
    let env = recording_env(None, &["--usage-accounting", "false"]).await;
    let from = Timestamp::now();
    let alice = env.rest(&env.alice());
    alice.post(NS, &one_gpu_worker("unrecorded")).await.expect(201);
    running_pods(&env, "unrecorded", 2).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let report = usage(&env, from, "cluster").await;
    assert_eq!(report["totals"]["gpu_hours"], 0.0, "{report}");
    assert_eq!(report["rows"], json!([]), "{report}");
    assert_eq!(env.lease_holder().await, "", "no Lease was asked for");
    alice.delete(&format!("{NS}/unrecorded")).await.expect(204);
}
