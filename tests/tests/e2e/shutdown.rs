//! SIGTERM: requests in flight finish, waits end with a status that says
//! to wait again, no audit row is left pending; new connections are
//! refused.

use krayne_tests::{Env, EnvOptions};
use serde_json::json;

#[tokio::test]
async fn a_wait_in_flight_at_sigterm_ends_at_once_with_unavailable() {
    let mut options = EnvOptions::default();
    // Slow pods keep the wait below in flight when the signal comes.
    options.sandbox.operator.start_delay = std::time::Duration::from_secs(30);
    let mut env = Env::start_with(options).await;
    let alice = env.rest(&env.alice());
    alice
        .post("/v1/namespaces/ml-team/clusters", &json!({"name": "slow"}))
        .await
        .expect(201);
    let waiting = tokio::spawn({
        let alice = alice.clone();
        async move {
            alice
                .get("/v1/namespaces/ml-team/clusters/slow/wait?timeout_seconds=60")
                .await
        }
    });
    env.await_metric("krayne_waits_open", 1.0).await;
    let signalled = std::time::Instant::now();
    env.server.terminate();
    let answer = waiting.await.unwrap().problem(503, "unavailable");
    assert!(
        answer.body["detail"].as_str().unwrap().contains("wait again"),
        "{}",
        answer.text
    );
    assert_eq!(env.server.exit_code().await, Some(0));
    assert!(signalled.elapsed() < std::time::Duration::from_secs(5));
    let log = env.server.log.lock().unwrap().clone();
    assert!(log.contains("shutting down"), "{log}");
    // Stopped: nothing listens any more.
    assert!(std::net::TcpStream::connect(env.server.api).is_err());
}

/// What one request in flight at SIGTERM got.
#[derive(Debug)]
enum Ended {
    Finished,
    WaitCut(String),
}

#[tokio::test]
async fn sigterm_under_load_finishes_requests_and_ends_waits_cleanly() {
    use futures::StreamExt as _;
    use krayne_proto::v1::{self as pb, create_cluster_request::Source};
    use sqlx::{Connection as _, PgConnection};
    use std::time::{Duration, Instant};

    const NS: &str = "/v1/namespaces/ml-team/clusters";
    let db = krayne_tests::test_database().await;
    let mut env = Env::start_with(EnvOptions {
        server_args: vec!["--rate-limit-per-second".into(), "0".into()],
        ..EnvOptions::with_database(&db.url)
    })
    .await;
    let rest = env.rest(&env.alice());
    let grpc = env.grpc(&env.alice()).await;
    for i in 0..30 {
        rest.post(NS, &json!({"name": format!("pre-{i}")})).await.expect(201);
    }
    // Their head fits on no node (a wait gives up on that only after a
    // minute): waits on them stay open.
    for i in 0..10 {
        let config = json!({"name": format!("stuck-{i}"), "head": {"cpus": "64"}, "worker_groups": []});
        rest.post(NS, &config).await.expect(201);
    }

    // Every Kubernetes call now takes 1.5 s: the mutations below are all
    // in flight when the signal comes.
    env.sandbox.set_latency(Duration::from_millis(1500));
    let before = env.raycluster_writes().len();
    let mut unary = Vec::new();
    for i in 0..100 {
        let (rest, mut grpc) = (rest.clone(), grpc.clone());
        unary.push(tokio::spawn(async move {
            let scale = json!({"worker_group": "worker", "replicas": 2});
            match i % 10 {
                0..=3 => rest.post(NS, &json!({"name": format!("new-{i}")})).await.status,
                4..=6 => {
                    let yaml = format!("name: new-{i}\nnamespace: ml-team\n");
                    let created = grpc
                        .clusters
                        .create_cluster(pb::CreateClusterRequest {
                            source: Some(Source::ConfigYaml(yaml)),
                            dry_run: false,
                            field_validation: 0,
                            queue: None,
                        })
                        .await;
                    created.map_or_else(|s| panic!("create new-{i}: {s:?}"), |_| 201)
                }
                7 | 8 => {
                    rest.post(&format!("{NS}/pre-{}/scale", i / 10 * 3 + i % 10 - 7), &scale)
                        .await
                        .status
                }
                _ => {
                    let scaled = grpc
                        .clusters
                        .scale_cluster(pb::ScaleClusterRequest {
                            namespace: "ml-team".into(),
                            name: format!("pre-{}", i / 10 * 3 + 2),
                            worker_group: "worker".into(),
                            replicas: Some(2),
                            ..Default::default()
                        })
                        .await;
                    scaled.map_or_else(|s| panic!("scale: {s:?}"), |_| 200)
                }
            }
        }));
    }
    let mut waits = Vec::new();
    for i in 0..10 {
        let (rest, mut grpc) = (rest.clone(), grpc.clone());
        waits.push(tokio::spawn(async move {
            let name = format!("stuck-{i}");
            if i % 2 == 0 {
                let reply = rest.get(&format!("{NS}/{name}/wait?timeout_seconds=120")).await;
                let reply = reply.problem(503, "unavailable");
                Ended::WaitCut(reply.body["detail"].as_str().unwrap().to_owned())
            } else {
                let request = pb::WaitClusterRequest {
                    namespace: "ml-team".into(),
                    name,
                    timeout_seconds: 120,
                };
                let mut stream = grpc.clusters.wait_cluster(request).await.unwrap().into_inner();
                loop {
                    match stream.next().await {
                        Some(Ok(_)) => continue,
                        Some(Err(status)) => {
                            assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
                            return Ended::WaitCut(status.message().to_owned());
                        }
                        None => return Ended::Finished,
                    }
                }
            }
        }));
    }
    // Signal once the 10 waits are open and Kubernetes has all 100
    // mutations (each is then held 1.5 s).
    env.await_metric("krayne_waits_open", 10.0).await;
    let sent = Instant::now();
    while env.raycluster_writes().len() < before + 100 {
        assert!(
            sent.elapsed() < Duration::from_secs(10),
            "the mutations did not all reach Kubernetes"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let signalled = Instant::now();
    env.server.terminate();

    for (i, t) in unary.into_iter().enumerate() {
        let status = t.await.unwrap();
        assert!(
            [200, 201].contains(&status),
            "request {i} in flight at SIGTERM got {status}"
        );
    }
    for t in waits {
        match t.await.unwrap() {
            Ended::WaitCut(message) => assert!(message.contains("shutting down"), "{message}"),
            other => panic!("a wait ended without a status: {other:?}"),
        }
    }
    assert_eq!(env.server.exit_code().await, Some(0));
    assert!(
        signalled.elapsed() < Duration::from_secs(15),
        "{:?}",
        signalled.elapsed()
    );

    let mut conn = PgConnection::connect(&db.url).await.unwrap();
    let pending: i64 = sqlx::query_scalar("SELECT count(*) FROM audit_events WHERE outcome = 'pending'")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(pending, 0, "audit rows left pending by the shutdown");
    let succeeded: i64 =
        sqlx::query_scalar("SELECT count(*) FROM audit_events WHERE outcome = 'succeeded' AND cluster LIKE 'new-%'")
            .fetch_one(&mut conn)
            .await
            .unwrap();
    assert_eq!(succeeded, 70);
}

/// The drain a rollout needs: on SIGTERM the replica reports not ready at
/// once but goes on serving new connections for the drain delay (while
/// endpoints forget it); then it stops accepting, and an open tunnel goes
/// on until the grace period ends, when it is closed saying why, its audit
/// row finished.
#[tokio::test]
async fn sigterm_drains_then_stops_accepting_and_tunnels_outlive_the_drain() {
    use futures::StreamExt as _;
    use sqlx::Connection as _;
    use std::time::{Duration, Instant};
    use tokio_tungstenite::tungstenite::Message;

    use krayne_tests::echo_tunnel::{echo as echoed, open};

    let db = krayne_tests::test_database().await;
    let mut env = Env::start_with(EnvOptions {
        server_args: ["--shutdown-delay-seconds", "2", "--shutdown-grace-seconds", "4"]
            .map(str::to_owned)
            .to_vec(),
        ..EnvOptions::with_database(&db.url)
    })
    .await;
    env.ready_cluster("drain").await;
    let mut tunnel = open(&env, "drain").await;
    assert_eq!(echoed(&mut tunnel).await.unwrap(), b"ping\n");

    let ops = env.ops();
    let signalled = Instant::now();
    env.server.terminate();
    let draining = loop {
        let answer = ops.get("/readyz").await;
        if answer.status == 503 {
            break answer;
        }
        assert!(
            signalled.elapsed() < Duration::from_secs(1),
            "still ready: {}",
            answer.text
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(draining.body["status"], "draining", "{}", draining.text);
    // Still serving, on new connections too, while it drains.
    let fresh = krayne_tests::Rest::new(&env.url(), Some(env.alice()));
    fresh.get("/v1/namespaces/ml-team/clusters").await.expect(200);
    assert!(
        signalled.elapsed() < Duration::from_secs(2),
        "{:?}",
        signalled.elapsed()
    );

    // After the delay nothing is accepted, but the tunnel carries on.
    tokio::time::sleep(Duration::from_millis(2500).saturating_sub(signalled.elapsed())).await;
    assert!(
        std::net::TcpStream::connect(env.server.api).is_err(),
        "accepting after the drain delay"
    );
    assert_eq!(
        echoed(&mut tunnel).await.unwrap(),
        b"ping\n",
        "the tunnel outlives the drain"
    );

    // The grace period over, the server closes it, saying why.
    let close = loop {
        match tokio::time::timeout(Duration::from_secs(10), tunnel.next())
            .await
            .unwrap()
        {
            Some(Ok(Message::Close(frame))) => break frame.map(|f| f.reason.to_string()).unwrap_or_default(),
            Some(Ok(_)) => {}
            other => panic!("{other:?}"),
        }
    };
    assert!(close.contains("shutting down"), "{close}");
    let ended = signalled.elapsed();
    assert!(ended >= Duration::from_secs(5), "the tunnel was cut early: {ended:?}");
    assert_eq!(env.server.exit_code().await, Some(0));
    assert!(
        signalled.elapsed() < Duration::from_secs(12),
        "{:?}",
        signalled.elapsed()
    );

    let mut sql = sqlx::PgConnection::connect(&db.url).await.unwrap();
    let tunnel_row: (String, Option<String>) =
        sqlx::query_as("SELECT outcome, error FROM audit_events WHERE action = 'service.connect'")
            .fetch_one(&mut sql)
            .await
            .unwrap();
    assert_ne!(tunnel_row.0, "pending", "{tunnel_row:?}");
}
