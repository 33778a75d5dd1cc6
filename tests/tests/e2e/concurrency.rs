//! Many clients at once on one cluster: exactly one create wins, and
//! concurrent scales never lose each other's changes.

use std::{collections::BTreeMap, sync::Arc};

use krayne_proto::v1::{self as pb, create_cluster_request::Source};
use krayne_tests::{Env, EnvOptions, test_database};
use serde_json::json;
use sqlx::{Connection as _, PgConnection};
use tokio::sync::Barrier;

const NS: &str = "/v1/namespaces/ml-team/clusters";

/// `(outcome, rows)` of the audit rows of `action` on `cluster`.
async fn audit_outcomes(database: &str, action: &str, cluster: &str) -> BTreeMap<String, i64> {
    let mut db = PgConnection::connect(database).await.unwrap();
    let rows: Vec<(String, i64)> = sqlx::query_as(
        "SELECT outcome, count(*) FROM audit_events WHERE action = $1 AND cluster = $2 GROUP BY outcome",
    )
    .bind(action)
    .bind(cluster)
    .fetch_all(&mut db)
    .await
    .unwrap();
    rows.into_iter().collect()
}

#[tokio::test]
async fn fifty_concurrent_creates_of_one_name_make_one_cluster() {
    let db = test_database().await;
    let env = Env::start_with(EnvOptions::with_database(&db.url)).await;
    let token = env.alice();
    let rest = env.rest(&token);
    let grpc = env.grpc(&token).await;
    let start = Arc::new(Barrier::new(50));
    let mut tasks = Vec::new();
    for i in 0..50 {
        let (rest, mut grpc, start) = (rest.clone(), grpc.clone(), start.clone());
        tasks.push(tokio::spawn(async move {
            start.wait().await;
            // Half over each transport: both must agree on the answer.
            if i % 2 == 0 {
                let reply = rest.post(NS, &json!({"name": "contested"})).await;
                match reply.status {
                    201 => "created".to_owned(),
                    _ => reply.problem(409, "already_exists").body["code"].to_string(),
                }
            } else {
                let created = grpc
                    .clusters
                    .create_cluster(pb::CreateClusterRequest {
                        source: Some(Source::ConfigYaml("name: contested\nnamespace: ml-team\n".into())),
                        dry_run: false,
                        field_validation: 0,
                        queue: None,
                    })
                    .await;
                match created {
                    Ok(_) => "created".to_owned(),
                    Err(status) => {
                        assert_eq!(status.code(), tonic::Code::AlreadyExists, "{status:?}");
                        "\"already_exists\"".to_owned()
                    }
                }
            }
        }));
    }
    let mut answers: BTreeMap<String, usize> = BTreeMap::new();
    for t in tasks {
        *answers.entry(t.await.unwrap()).or_default() += 1;
    }
    assert_eq!(answers.get("created"), Some(&1), "{answers:?}");
    assert_eq!(answers.get("\"already_exists\""), Some(&49), "{answers:?}");

    let listed = env.rest(&env.admin()).get(NS).await.expect(200);
    assert_eq!(listed.names(), ["contested"]);
    let creates = env.raycluster_writes().iter().filter(|r| r.method == "POST").count();
    assert_eq!(creates, 50, "every request reached Kubernetes once, no retries");

    let outcomes = audit_outcomes(&db.url, "cluster.create", "contested").await;
    assert_eq!(outcomes.values().sum::<i64>(), 50, "{outcomes:?}");
    assert_eq!(outcomes.get("succeeded"), Some(&1), "{outcomes:?}");
    assert_eq!(outcomes.get("failed"), Some(&49), "{outcomes:?}");
}

/// One scale's answer: the group, the replicas asked for and, on success,
/// the resourceVersion of the write.
struct Scaled {
    group: &'static str,
    replicas: u32,
    version: Option<u64>,
}

#[tokio::test]
async fn concurrent_scales_are_serialized_without_lost_updates() {
    let db = test_database().await;
    let env = Env::start_with(EnvOptions::with_database(&db.url)).await;
    let token = env.alice();
    let rest = env.rest(&token);
    let grpc = env.grpc(&token).await;
    let config = json!({"name": "shared", "worker_groups": [
        {"name": "a", "replicas": 1}, {"name": "b", "replicas": 1}]});
    rest.post(NS, &config).await.expect(201);
    let before = rest.get(&format!("{NS}/shared/details")).await.expect(200).body;

    // Ten clients resize group a, ten group b, all at once; values 2..=11
    // so that a lost update (a write based on a stale read putting back
    // the old count) would leave 1, or a value older than the last write.
    let start = Arc::new(Barrier::new(20));
    let mut tasks = Vec::new();
    for i in 0..20u32 {
        let (rest, mut grpc, start) = (rest.clone(), grpc.clone(), start.clone());
        let group = if i % 2 == 0 { "a" } else { "b" };
        let replicas = i / 2 + 2;
        tasks.push(tokio::spawn(async move {
            start.wait().await;
            let version = if i % 4 < 2 {
                let reply = rest
                    .post(
                        &format!("{NS}/shared/scale"),
                        &json!({"worker_group": group, "replicas": replicas}),
                    )
                    .await;
                match reply.status {
                    200 => reply.body["resource_version"].as_str().map(|v| v.parse().unwrap()),
                    _ => {
                        reply.problem(409, "conflict");
                        None
                    }
                }
            } else {
                let scaled = grpc
                    .clusters
                    .scale_cluster(pb::ScaleClusterRequest {
                        namespace: "ml-team".into(),
                        name: "shared".into(),
                        worker_group: group.into(),
                        replicas: Some(replicas),
                        ..Default::default()
                    })
                    .await;
                match scaled {
                    Ok(r) => r
                        .into_inner()
                        .cluster
                        .unwrap()
                        .resource_version
                        .map(|v| v.parse().unwrap()),
                    Err(status) => {
                        assert_eq!(status.code(), tonic::Code::Aborted, "{status:?}");
                        None
                    }
                }
            };
            Scaled {
                group,
                replicas,
                version,
            }
        }));
    }
    let mut results = Vec::new();
    for t in tasks {
        results.push(t.await.unwrap());
    }
    let details = rest.get(&format!("{NS}/shared/details")).await.expect(200);
    for group in ["a", "b"] {
        // Without a successful write (every one lost its race), the
        // group must still hold its first value.
        let last_write = results
            .iter()
            .filter(|r| r.group == group && r.version.is_some())
            .max_by_key(|r| r.version)
            .map_or(1, |r| r.replicas);
        let now = details.body["worker_groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["name"] == group)
            .unwrap();
        assert_eq!(
            now["replicas"], last_write,
            "group {group} must hold its latest successful write"
        );
        let was = before["worker_groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["name"] == group)
            .unwrap();
        for field in ["min_replicas", "cpus", "memory", "gpus", "image"] {
            assert_eq!(now[field], was[field], "group {group}: {field} changed");
        }
        assert!(now["max_replicas"].as_u64() >= now["replicas"].as_u64(), "{now}");
    }
    for field in ["head", "ray_version", "services"] {
        assert_eq!(details.body[field], before[field], "{field} changed");
    }
    let succeeded = results.iter().filter(|r| r.version.is_some()).count();
    let outcomes = audit_outcomes(&db.url, "cluster.scale", "shared").await;
    assert_eq!(outcomes.values().sum::<i64>(), 20, "{outcomes:?}");
    assert_eq!(
        outcomes.get("succeeded").copied(),
        Some(succeeded as i64),
        "{outcomes:?}"
    );
}
