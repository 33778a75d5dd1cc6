//! A rolling restart as Kubernetes does it (issue 40): two replicas behind
//! a Service, each replaced in turn (the new one first, then SIGTERM to
//! the old, which drains). Through it an SDK watch, a followed job log and
//! a tunnel are open, and clusters are being created; the SDK reconnects
//! and nothing is lost or repeated.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::StreamExt as _;
use krayne_client::{Client, RetryPolicy, SubmitJob, TunnelStream, WatchFrom, event_type_name};
use krayne_tests::{Balancer, Env, EnvOptions, Rest, ServerProcess};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const NS: &str = "ml-team";

/// Sends a line through `tunnel` and reads it back.
async fn echo(tunnel: &mut TunnelStream, line: &str) {
    tunnel.write_all(line.as_bytes()).await.unwrap();
    let mut back = vec![0; line.len()];
    tokio::time::timeout(Duration::from_secs(10), tunnel.read_exact(&mut back))
        .await
        .expect("the echo in time")
        .unwrap();
    assert_eq!(back, line.as_bytes());
}

/// Opens a tunnel to the head's Ray client stand-in (a greeting, then
/// echo) and reads its greeting.
async fn echo_tunnel(client: &Client) -> TunnelStream {
    let mut tunnel = client.open_tunnel(NS, "roll", "client").await.unwrap();
    let mut banner = Vec::new();
    while !banner.ends_with(b"\n") {
        let mut byte = [0u8; 1];
        tokio::time::timeout(Duration::from_secs(10), tunnel.read_exact(&mut byte))
            .await
            .expect("the greeting in time")
            .unwrap();
        banner.push(byte[0]);
    }
    assert!(banner.starts_with(b"krayne-sandbox ray client"), "{banner:?}");
    tunnel
}

/// gRPC tunnels opened on `server`, by its metrics.
async fn grpc_tunnels(server: &ServerProcess) -> f64 {
    let metrics = Rest::new(&format!("http://{}", server.ops), None).get("/metrics").await;
    krayne_tests::metric(&metrics.text, "krayne_tunnels_opened_total", "via=\"grpc\"")
}

/// Rolls `old` over to `new` the way a rolling update does: `new` is in
/// the rotation before `old` gets SIGTERM. `tunnel`, when given, is open on
/// `old`: it still carries bytes while `old` drains, and ends with it.
/// Returns once `old` has exited cleanly.
async fn roll(balancer: &Balancer, mut old: ServerProcess, new: &ServerProcess, tunnel: Option<&mut TunnelStream>) {
    balancer.add(new);
    while !balancer.is_ready(new) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    old.terminate();
    // Past the drain delay: the old replica accepts nothing more, but its
    // open tunnels go on until its grace period ends.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    if let Some(tunnel) = tunnel {
        echo(tunnel, "draining\n").await;
        assert_eq!(old.exit_code().await, Some(0), "the old replica did not stop cleanly");
        // Its grace period over, the replica closed the tunnel.
        let mut rest = Vec::new();
        let ended = tokio::time::timeout(Duration::from_secs(5), tunnel.read_to_end(&mut rest)).await;
        assert!(ended.is_ok(), "the tunnel outlived its replica");
        // The watch was on the same connection: the replica ended it,
        // telling the SDK to resume elsewhere.
        let log = old.log.lock().unwrap().clone();
        assert!(
            log.contains("watch ended by the server") && log.contains("reason=\"shutdown\""),
            "the watch was not ended by the drain"
        );
    } else {
        assert_eq!(old.exit_code().await, Some(0), "the old replica did not stop cleanly");
    }
}

#[tokio::test]
async fn a_rolling_restart_loses_no_watch_event_log_line_or_tunnel() {
    let db = krayne_tests::test_database().await;
    let mut env = Env::start_with(EnvOptions {
        server_args: [
            "--shutdown-delay-seconds",
            "1",
            "--shutdown-grace-seconds",
            "3",
            "--rate-limit-per-second",
            "0",
        ]
        .map(str::to_owned)
        .to_vec(),
        ..EnvOptions::with_database(&db.url)
    })
    .await;
    env.ready_cluster("roll").await;
    let balancer = Balancer::start().await;
    let second = env.spawn_server(&[]).await;
    balancer.add(&env.server);
    balancer.add(&second);
    while !(balancer.is_ready(&env.server) && balancer.is_ready(&second)) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let client = Client::builder(balancer.url())
        .retry(RetryPolicy {
            max_retries: 50,
            min_delay: Duration::from_millis(50),
            max_delay: Duration::from_millis(500),
        })
        .token(env.alice())
        .connect()
        .await
        .unwrap();

    // A watch from the clusters there are now.
    let mut watch = client
        .watch_clusters(
            Some(NS),
            WatchFrom {
                resource_version: None,
                send_initial_events: true,
            },
        )
        .await
        .unwrap()
        .boxed();
    let events = Arc::new(Mutex::new(Vec::<(String, String, String)>::new()));
    let seen = events.clone();
    let watching = tokio::spawn(async move {
        while let Some(event) = watch.next().await {
            let event = event.expect("the watch resumes instead of failing");
            let name = event.cluster.as_ref().map(|c| c.name.clone()).unwrap_or_default();
            seen.lock()
                .unwrap()
                .push((event_type_name(&event).to_owned(), name, event.resource_version.clone()));
        }
    });

    // A job printing a line every 50 ms for about ten seconds, followed.
    let job = SubmitJob::new("for i in $(seq 1 200); do echo line-$i; sleep 0.05; done").submission_id("steady");
    client.submit_job(NS, "roll", job).await.unwrap();
    let mut tail = client.tail_job_logs(NS, "roll", "steady").await.unwrap();
    let following = tokio::spawn(async move {
        let mut text = String::new();
        while let Some(chunk) = tail.next().await {
            text.push_str(&chunk.expect("the log follow resumes instead of failing"));
        }
        text
    });

    // A tunnel opened before the rollout.
    let mut tunnel = echo_tunnel(&client).await;
    echo(&mut tunnel, "before\n").await;

    // Clusters created through the Service all along, each on a new
    // connection (as many clients do), so each is routed afresh.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (url, token, stopped) = (balancer.url(), env.alice(), stop.clone());
    let creator = tokio::spawn(async move {
        let mut answers = BTreeMap::new();
        let mut i = 0;
        while !stopped.load(std::sync::atomic::Ordering::SeqCst) {
            let name = format!("during-{i:03}");
            let answer = Rest::new(&url, Some(token.clone()))
                .post(
                    &format!("/v1/namespaces/{NS}/clusters"),
                    &serde_json::json!({"name": name}),
                )
                .await;
            answers.insert(name, answer.status);
            i += 1;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        answers
    });

    // The replica holding the tunnel goes first: the tunnel lives through
    // its drain and ends with it.
    let replacement = env.spawn_server(&[]).await;
    let first = std::mem::replace(&mut env.server, replacement);
    let (holder, other) = if grpc_tunnels(&first).await == 1.0 {
        (first, second)
    } else {
        assert_eq!(grpc_tunnels(&second).await, 1.0, "the tunnel is on neither replica");
        (second, first)
    };
    roll(&balancer, holder, &env.server, Some(&mut tunnel)).await;
    let replacement = env.spawn_server(&[]).await;
    roll(&balancer, other, &replacement, None).await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let answers = creator.await.unwrap();

    // Every create through the Service was answered 201: the Service sent
    // nothing to a replica that had stopped accepting.
    let refused: Vec<_> = answers.iter().filter(|(_, status)| **status != 201).collect();
    assert!(refused.is_empty(), "{refused:?}");
    assert!(
        answers.len() >= 10,
        "too few creates during the rollout: {}",
        answers.len()
    );

    // A new tunnel reaches the service through the new replicas.
    let mut after = echo_tunnel(&client).await;
    echo(&mut after, "after\n").await;

    // The followed log is the job's whole log, once.
    let text = tokio::time::timeout(Duration::from_secs(60), following)
        .await
        .expect("the job ends")
        .unwrap();
    let lines: String = (1..=200).map(|i| format!("line-{i}\n")).collect();
    assert!(
        text.ends_with(&lines),
        "the followed log lost or repeated lines:\n{text}"
    );
    assert_eq!(text, client.job_logs(NS, "roll", "steady").await.unwrap());

    // The watch saw every cluster created during the rollout added, once.
    let started = std::time::Instant::now();
    loop {
        let added: Vec<String> = events
            .lock()
            .unwrap()
            .iter()
            .filter(|(kind, name, _)| kind == "ADDED" && name.starts_with("during-"))
            .map(|(_, name, _)| name.clone())
            .collect();
        let mut unique = added.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), added.len(), "an event came twice: {added:?}");
        if unique == answers.keys().cloned().collect::<Vec<_>>() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "watch missed clusters: saw {unique:?} of {:?}",
            answers.keys()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let delivered = events.lock().unwrap().clone();
    let mut distinct = delivered.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), delivered.len(), "a resumed watch repeated an event");
    watching.abort();
}
