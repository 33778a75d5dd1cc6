//! Replicas sharing one audit database (issue 40): a starting replica
//! resolves only the rows replicas that are gone left pending, never a
//! live replica's open tunnel; quota admission in many namespaces at once
//! holds no database connection while Kubernetes is called, so audit
//! writes are never starved.

use std::time::Duration;

use krayne_tests::{
    Env, EnvOptions, TEAMS,
    echo_tunnel::{self, echo},
    test_database,
};
use serde_json::json;
use sqlx::{Connection as _, Executor as _, PgConnection};

/// The outcome of the one row matching `condition`.
async fn outcome(db: &mut PgConnection, condition: &str) -> String {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT outcome FROM audit_events WHERE {condition}"
    )))
    .fetch_one(db)
    .await
    .unwrap()
}

#[tokio::test]
async fn a_starting_replica_leaves_another_replicas_open_tunnel_alone() {
    let db = test_database().await;
    let env = Env::start_with(EnvOptions::with_database(&db.url)).await;
    env.ready_cluster("held").await;
    let mut tunnel = echo_tunnel::open(&env, "held").await;
    assert_eq!(echo(&mut tunnel).await.unwrap(), b"ping\n");

    // The tunnel has been open for an hour, as far as its row says; and a
    // replica that crashed ten minutes ago left a create pending.
    let mut sql = PgConnection::connect(&db.url).await.unwrap();
    let tunnel_row = "action = 'service.connect' AND cluster = 'held'";
    assert_eq!(outcome(&mut sql, tunnel_row).await, "pending");
    sql.execute(sqlx::AssertSqlSafe(format!(
        "UPDATE audit_events SET occurred_at = now() - interval '1 hour' WHERE {tunnel_row}"
    )))
    .await
    .unwrap();
    sql.execute(
        "INSERT INTO krayne_replicas (id, seen_at) VALUES ('crashed-replica', now() - interval '10 minutes'); \
         INSERT INTO audit_events (id, occurred_at, request_id, actor_subject, transport, action, namespace, \
         cluster, outcome, served_by) VALUES (gen_random_uuid(), now() - interval '10 minutes', 'req-crashed', \
         'alice@example.com', 'rest', 'cluster.create', 'ml-team', 'crashed', 'pending', 'crashed-replica')",
    )
    .await
    .unwrap();

    // A second replica starts: its first upkeep round sweeps before it
    // serves.
    let second = env.spawn_server(&[]).await;
    assert_eq!(outcome(&mut sql, "cluster = 'crashed'").await, "unknown");
    assert_eq!(
        outcome(&mut sql, tunnel_row).await,
        "pending",
        "a live replica's tunnel stays open"
    );
    // Resolved once, by the new replica's start-up sweep (or, on a slow
    // machine, by the first replica's periodic one).
    let logs = [
        env.server.log.lock().unwrap().clone(),
        second.log.lock().unwrap().clone(),
    ]
    .concat();
    assert_eq!(
        logs.matches("resolved a pending audit row as unknown").count(),
        1,
        "{logs}"
    );
    assert_eq!(
        echo(&mut tunnel).await.unwrap(),
        b"ping\n",
        "the tunnel still carries bytes"
    );

    tunnel.close(None).await.unwrap();
    for _ in 0..100 {
        if outcome(&mut sql, tunnel_row).await != "pending" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(outcome(&mut sql, tunnel_row).await, "succeeded");
}

#[tokio::test]
async fn twenty_namespaces_admitting_at_once_leave_audit_writes_their_connections() {
    const N: usize = 20;
    let namespaces: Vec<String> = (0..N).map(|i| format!("team-{i:02}")).collect();
    let mut teams = format!(
        "{TEAMS}  - name: many\n    members: {{ subjects: [many@example.com] }}\n    namespaces: {{ \"team-*\": editor }}\nquotas:\n"
    );
    for namespace in &namespaces {
        teams.push_str(&format!("  {namespace}: {{ clusters: 3 }}\n"));
    }
    let db = test_database().await;
    let mut options = EnvOptions {
        teams,
        // A small pool: twenty admissions each holding a connection for
        // the length of a create would leave audit writes none.
        server_args: ["--rate-limit-per-second", "0", "--database-max-connections", "4"]
            .map(str::to_owned)
            .to_vec(),
        ..EnvOptions::with_database(&db.url)
    };
    options.sandbox.namespaces.extend(namespaces.iter().cloned());
    let env = Env::start_with(options).await;
    let many = env.rest(&env.token("many@example.com", &[]));
    // Every Kubernetes call now takes a second and a half.
    env.sandbox.set_latency(Duration::from_millis(1500));
    let creates = namespaces
        .iter()
        .flat_map(|namespace| (0..2).map(move |i| (namespace.clone(), format!("c{i}"))));
    let answers = futures::future::join_all(creates.map(|(namespace, name)| {
        let many = many.clone();
        async move {
            let answer = many
                .post(&format!("/v1/namespaces/{namespace}/clusters"), &json!({"name": name}))
                .await;
            (namespace, name, answer.status, answer.text)
        }
    }))
    .await;
    let refused: Vec<_> = answers.iter().filter(|a| a.2 != 201).collect();
    assert!(
        refused.is_empty(),
        "{} of {} refused: {refused:?}",
        refused.len(),
        answers.len()
    );
    env.sandbox.set_latency(Duration::ZERO);

    let mut sql = PgConnection::connect(&db.url).await.unwrap();
    let audited: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM audit_events WHERE action = 'cluster.create' AND outcome = 'succeeded'",
    )
    .fetch_one(&mut sql)
    .await
    .unwrap();
    assert_eq!(audited, (2 * N) as i64);
    // Leases are given back just after the answer.
    let mut leases: i64 = -1;
    for _ in 0..50 {
        leases = sqlx::query_scalar("SELECT count(*) FROM quota_admissions")
            .fetch_one(&mut sql)
            .await
            .unwrap();
        if leases == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(leases, 0, "every admission gave its lease back");
    // Admission still counts: a fourth cluster does not fit a quota of 3.
    let ns = "/v1/namespaces/team-00/clusters";
    many.post(ns, &json!({"name": "c2"})).await.expect(201);
    many.post(ns, &json!({"name": "c3"})).await.expect(429);
}
