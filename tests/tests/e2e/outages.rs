//! Dependencies going away under load: the audit database and the
//! Kubernetes API. krayne refuses quickly and cleanly, changes nothing it
//! cannot audit, and recovers on its own when they return.

use std::{
    collections::HashSet,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use krayne_tests::{Env, EnvOptions, PgServer, Rest};
use serde_json::json;
use sqlx::{Connection as _, PgConnection};
use tokio::sync::Mutex;

const NS: &str = "/v1/namespaces/ml-team/clusters";

/// One mutation's answer and when it was asked.
struct Answer {
    what: &'static str,
    started: Instant,
    took: Duration,
    status: u16,
    code: String,
}

/// Creates, scales and deletes clusters until `stop`, recording answers.
async fn churn(rest: Rest, worker: usize, stop: Arc<AtomicBool>, answers: Arc<Mutex<Vec<Answer>>>) {
    let mut i = 0;
    while !stop.load(Ordering::SeqCst) {
        i += 1;
        let name = format!("churn-{worker}-{i}");
        let step = async |what: &'static str, reply: krayne_tests::Reply, started: Instant| {
            let code = reply.body["code"].as_str().unwrap_or_default().to_owned();
            let status = reply.status;
            answers.lock().await.push(Answer {
                what,
                started,
                took: started.elapsed(),
                status,
                code,
            });
            status
        };
        let t = Instant::now();
        let created = rest
            .post(
                NS,
                &json!({"name": name, "worker_groups": [{"replicas": 0, "min_replicas": 0}]}),
            )
            .await;
        if step("create", created, t).await != 201 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        let t = Instant::now();
        let scaled = rest
            .post(
                &format!("{NS}/{name}/scale"),
                &json!({"worker_group": "worker", "replicas": 1}),
            )
            .await;
        step("scale", scaled, t).await;
        let t = Instant::now();
        let deleted = rest.delete(&format!("{NS}/{name}")).await;
        step("delete", deleted, t).await;
    }
}

#[tokio::test]
async fn postgres_stopped_under_load_refuses_mutations_and_loses_no_audit_row() {
    let pg = PgServer::start().await;
    let env = Env::start_with(EnvOptions {
        database_url: Some(pg.url.clone()),
        server_args: vec!["--rate-limit-per-second".into(), "0".into()],
        ..EnvOptions::default()
    })
    .await;
    let rest = env.rest(&env.alice());
    let (stop, answers) = (Arc::new(AtomicBool::new(false)), Arc::new(Mutex::new(Vec::new())));
    let workers: Vec<_> = (0..6)
        .map(|w| tokio::spawn(churn(rest.clone(), w, stop.clone(), answers.clone())))
        .collect();

    tokio::time::sleep(Duration::from_secs(2)).await;
    pg.stop();
    let stopped = Instant::now();
    tokio::time::sleep(Duration::from_secs(4)).await;
    // Reads do not need the audit log (they come from the watch cache).
    rest.get(NS).await.expect(200);
    // A refusal's row waits in the batching writer for the database.
    rest.get("/v1/namespaces/other-team/clusters").await.expect(403);
    // Still ready throughout: it serves reads, and says what is down.
    krayne_tests::dependency_becomes(&env.ops(), "audit_database", "down", Duration::from_secs(10)).await;
    let resuming = Instant::now();
    pg.resume().await;
    let resumed = Instant::now();
    krayne_tests::dependency_becomes(&env.ops(), "audit_database", "up", Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::SeqCst);
    for w in workers {
        w.await.unwrap();
    }

    let answers = answers.lock().await;
    // Asked while the database was down (after the stop had taken effect).
    let during: Vec<&Answer> = answers
        .iter()
        .filter(|a| a.started > stopped + Duration::from_millis(200) && a.started + a.took < resuming)
        .collect();
    assert!(
        during.len() >= 5,
        "too little traffic during the outage: {}",
        during.len()
    );
    let slowest = during.iter().map(|a| a.took).max().unwrap_or_default();
    eprintln!(
        "{} mutations during the outage, slowest refusal {slowest:?}",
        during.len()
    );
    for a in &during {
        assert_eq!(
            (a.status, a.code.as_str()),
            (503, "unavailable"),
            "{} during the outage",
            a.what
        );
        assert!(a.took < Duration::from_secs(2), "{} took {:?}", a.what, a.took);
    }
    let recovered = answers
        .iter()
        .filter(|a| a.started > resumed && a.what == "create" && a.status == 201)
        .count();
    assert!(recovered > 0, "no create succeeded after the database came back");
    let unexpected: Vec<_> = answers
        .iter()
        .filter(|a| ![200, 201, 204, 503].contains(&a.status))
        .map(|a| (a.what, a.status, a.code.clone()))
        .collect();
    assert!(unexpected.is_empty(), "{unexpected:?}");

    // Every change Kubernetes saw has its audit row (join by request id),
    // and outcomes written late (retried) leave nothing pending.
    let changed: HashSet<String> = env
        .raycluster_writes()
        .into_iter()
        .map(|r| r.request_id.expect("krayne sends its request id to Kubernetes"))
        .collect();
    let mut db = PgConnection::connect(&pg.url).await.unwrap();
    let audited: HashSet<String> = sqlx::query_scalar::<_, String>("SELECT request_id FROM audit_events")
        .fetch_all(&mut db)
        .await
        .unwrap()
        .into_iter()
        .collect();
    let unaudited: Vec<_> = changed.difference(&audited).collect();
    assert!(
        unaudited.is_empty(),
        "{} Kubernetes changes without an audit row: {unaudited:?}",
        unaudited.len()
    );
    let started = Instant::now();
    loop {
        let pending: i64 = sqlx::query_scalar("SELECT count(*) FROM audit_events WHERE outcome = 'pending'")
            .fetch_one(&mut db)
            .await
            .unwrap();
        let denied: i64 = sqlx::query_scalar("SELECT count(*) FROM audit_events WHERE namespace = 'other-team'")
            .fetch_one(&mut db)
            .await
            .unwrap();
        if pending == 0 && denied == 1 {
            break;
        }
        if started.elapsed() >= Duration::from_secs(30) {
            let rows: Vec<(String, String, String)> = sqlx::query_as(
                "SELECT action, request_id, occurred_at::text FROM audit_events WHERE outcome = 'pending'",
            )
            .fetch_all(&mut db)
            .await
            .unwrap();
            panic!("{pending} rows still pending ({rows:?}), {denied} refusal rows of the outage written");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The outage was waited out, not taken for rows the database refuses.
    let metrics = env.ops().get("/metrics").await.text;
    assert_eq!(krayne_tests::metric_total(&metrics, "krayne_audit_dropped_total"), 0.0);
}

/// Time and answer of one REST call.
async fn timed(call: impl Future<Output = krayne_tests::Reply>) -> (Duration, krayne_tests::Reply) {
    let started = Instant::now();
    let reply = call.await;
    (started.elapsed(), reply)
}

#[tokio::test]
async fn kubernetes_down_fails_fast_and_recovers_without_restart() {
    let mut env = Env::start().await;
    let rest = env.rest(&env.alice());
    rest.post(NS, &json!({"name": "steady"})).await.expect(201);
    krayne_tests::dependency_becomes(&env.ops(), "kubernetes", "up", Duration::from_secs(10)).await;

    env.sandbox.stop_api().await;
    // Still ready: its answers are quick, clear refusals, not connection
    // errors from a Service left without endpoints.
    krayne_tests::dependency_becomes(&env.ops(), "kubernetes", "down", Duration::from_secs(10)).await;
    let calls = [
        ("get", timed(rest.get(&format!("{NS}/steady"))).await),
        ("list", timed(rest.get(NS)).await),
        ("create", timed(rest.post(NS, &json!({"name": "during"}))).await),
        (
            "scale",
            timed(rest.post(
                &format!("{NS}/steady/scale"),
                &json!({"worker_group": "worker", "replicas": 2}),
            ))
            .await,
        ),
        ("delete", timed(rest.delete(&format!("{NS}/steady"))).await),
    ];
    for (what, (took, reply)) in calls {
        let reply = reply.problem(503, "unavailable");
        assert!(took < Duration::from_secs(2), "{what} took {took:?}: {}", reply.text);
    }
    let mut grpc = env.grpc(&env.alice()).await;
    let started = Instant::now();
    let status = grpc
        .clusters
        .get_cluster(krayne_proto::v1::GetClusterRequest {
            namespace: "ml-team".into(),
            name: "steady".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    assert!(started.elapsed() < Duration::from_secs(2));

    env.sandbox.start_api().await.unwrap();
    krayne_tests::dependency_becomes(&env.ops(), "kubernetes", "up", Duration::from_secs(30)).await;
    rest.get(&format!("{NS}/steady")).await.expect(200);
    rest.post(NS, &json!({"name": "after"})).await.expect(201);
    rest.delete(&format!("{NS}/steady")).await.expect(204);
}

#[tokio::test]
async fn slow_kubernetes_gets_deadline_exceeded_not_a_hang() {
    let env = Env::start_with(EnvOptions::with_args(&["--kube-timeout-seconds", "2"])).await;
    let uncached = env.spawn_server(&["--cache", "false"]).await;
    let rest = env.rest(&env.alice());
    let direct = Rest::new(&format!("http://{}", uncached.api), Some(env.alice()));
    rest.post(NS, &json!({"name": "steady"})).await.expect(201);

    env.sandbox.set_latency(Duration::from_secs(6));
    let calls = [
        ("create", timed(rest.post(NS, &json!({"name": "slow"}))).await),
        (
            "scale",
            timed(rest.post(
                &format!("{NS}/steady/scale"),
                &json!({"worker_group": "worker", "replicas": 2}),
            ))
            .await,
        ),
        ("uncached get", timed(direct.get(&format!("{NS}/steady"))).await),
        ("uncached list", timed(direct.get(NS)).await),
    ];
    for (what, (took, reply)) in calls {
        let reply = reply.problem(504, "deadline_exceeded");
        assert!(took < Duration::from_secs(4), "{what} took {took:?}: {}", reply.text);
    }
    // The watch cache keeps serving reads while its watches are healthy.
    let (took, reply) = timed(rest.get(&format!("{NS}/steady"))).await;
    reply.expect(200);
    assert!(took < Duration::from_secs(1), "cached get took {took:?}");
    // Readiness never waits on the slow API server, and stays ready.
    let ops = Rest::new(&format!("http://{}", uncached.ops), None);
    let (took, reply) = timed(ops.get("/readyz")).await;
    reply.expect(200);
    assert!(took < Duration::from_secs(1), "/readyz took {took:?}");
    let body = krayne_tests::dependency_becomes(&ops, "kubernetes", "down", Duration::from_secs(15)).await;
    assert!(
        body["dependencies"]["kubernetes"]["error"]
            .as_str()
            .unwrap()
            .contains("within"),
        "{body}"
    );

    env.sandbox.set_latency(Duration::ZERO);
    krayne_tests::dependency_becomes(&ops, "kubernetes", "up", Duration::from_secs(15)).await;
    rest.post(NS, &json!({"name": "after"})).await.expect(201);
    direct.get(&format!("{NS}/steady")).await.expect(200);
    // A create that timed out may still have landed: its audit row says so.
    let admin = env.rest(&env.admin());
    let rows = admin
        .get("/v1/audit?cluster=slow&action=cluster.create")
        .await
        .expect(200);
    let outcomes: Vec<&str> = rows.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["unknown"], "{}", rows.text);
}

/// Kubernetes refusing krayne (a rule missing from its Role) is the
/// server's misconfiguration: the caller gets 500 `internal` with its
/// request id and nothing about the ServiceAccount; the log line, the
/// metric and `/readyz` name what was refused.
#[tokio::test]
async fn kubernetes_forbidding_krayne_is_an_internal_error() {
    let env = Env::start().await;
    let alice = env.rest(&env.alice());
    alice.post(NS, &json!({"name": "rbac"})).await.expect(201);
    env.sandbox.forbid("patch", "rayclusters");
    let scale = json!({"worker_group": "worker", "replicas": 1});
    let refused = alice
        .post(&format!("{NS}/rbac/scale"), &scale)
        .await
        .problem(500, "internal");
    let text = refused.text.to_lowercase();
    assert!(
        !text.contains("serviceaccount") && !text.contains("forbidden"),
        "{}",
        refused.text
    );
    let mut g = env.grpc(&env.alice()).await;
    let status = g
        .clusters
        .scale_cluster(krayne_proto::v1::ScaleClusterRequest {
            namespace: "ml-team".into(),
            name: "rbac".into(),
            worker_group: "worker".into(),
            replicas: Some(1),
            min_replicas: None,
            max_replicas: None,
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::Internal);
    let message = status.message().to_lowercase();
    assert!(
        !message.contains("serviceaccount") && !message.contains("forbidden"),
        "{status:?}"
    );
    // Reads still work: only the patch rule is missing.
    alice.get(&format!("{NS}/rbac")).await.expect(200);

    let metrics = env.ops().get("/metrics").await.text;
    let series = metrics
        .lines()
        .find(|l| l.starts_with("krayne_kube_forbidden_total{"))
        .expect("a forbidden series");
    for label in [r#"verb="patch""#, r#"resource="rayclusters""#, r#"namespace="ml-team""#] {
        assert!(series.contains(label), "{series}");
    }
    assert!(
        series.rsplit(' ').next().unwrap().parse::<f64>().unwrap() >= 2.0,
        "{series}"
    );
    let log = env.server.log.lock().unwrap().clone();
    let line = log
        .lines()
        .find(|l| l.contains("Kubernetes forbade krayne's own request"))
        .expect("an error line");
    assert!(
        line.contains("ERROR") && line.contains("patch rayclusters in namespace ml-team"),
        "{line}"
    );
    let ready = env.ops().get("/readyz").await.expect(200);
    let problems = ready.body["problems"].to_string();
    assert!(
        problems.contains("patch rayclusters in namespace ml-team"),
        "{}",
        ready.text
    );
}
