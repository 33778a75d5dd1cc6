//! The audit log end to end: one row per mutation on both transports and
//! both databases, refusals too, never a token; fail-closed; crash recovery.

use std::time::{Duration, Instant};

use krayne_proto::v1 as pb;
use krayne_tests::{Env, EnvOptions, test_database};
use serde_json::{Value, json};
use tonic::Code;

const NS: &str = "/v1/namespaces/ml-team/clusters";

/// The audit rows visible to a global admin, newest first.
async fn rows(env: &Env, query: &str) -> Vec<Value> {
    let r = env
        .rest(&env.admin())
        .get(&format!("/v1/audit?page_size=1000{query}"))
        .await
        .expect(200);
    r.body["events"].as_array().unwrap().clone()
}

async fn every_mutation_is_audited_once(env: Env) {
    let alice_token = env.alice();
    let alice = env.rest(&alice_token);
    alice
        .post(NS, &json!({"name": "a1", "worker_groups": [{"replicas": 1}]}))
        .await
        .expect(201);
    alice
        .post(
            &format!("{NS}/a1/scale"),
            &json!({"worker_group": "worker", "replicas": 2}),
        )
        .await
        .expect(200);
    alice.delete(&format!("{NS}/a1")).await.expect(204);
    alice.post(NS, &json!({"name": "Bad_Name"})).await.expect(400);
    alice
        .post("/v1/namespaces/other-team/clusters", &json!({"name": "x"}))
        .await
        .expect(403);
    env.rest("forged.token.here").get("/v1/whoami").await.expect(401);

    let mut g = env.grpc(&alice_token).await;
    let spec = pb::ClusterSpec {
        name: "g1".into(),
        namespace: Some("ml-team".into()),
        ..Default::default()
    };
    let create = pb::CreateClusterRequest {
        source: Some(pb::create_cluster_request::Source::Spec(spec)),
        dry_run: false,
        field_validation: 0,
        queue: None,
    };
    g.clusters.create_cluster(create).await.unwrap();
    let scale = pb::ScaleClusterRequest {
        namespace: "ml-team".into(),
        name: "g1".into(),
        worker_group: "worker".into(),
        replicas: Some(1),
        ..Default::default()
    };
    g.clusters.scale_cluster(scale).await.unwrap();
    g.clusters
        .delete_cluster(pb::DeleteClusterRequest {
            namespace: "ml-team".into(),
            name: "g1".into(),
        })
        .await
        .unwrap();

    // Refusals go through the batching writer: give it a moment.
    let mut all = Vec::new();
    for _ in 0..100 {
        all = rows(&env, "").await;
        if all.len() >= 9 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let find = |action: &str, cluster: &str, transport: &str| -> Vec<Value> {
        all.iter()
            .filter(|r| r["action"] == action && r["cluster"] == cluster && r["transport"] == transport)
            .cloned()
            .collect()
    };
    for (transport, cluster) in [("rest", "a1"), ("grpc", "g1")] {
        for (action, http) in [("cluster.create", 201), ("cluster.scale", 200), ("cluster.delete", 204)] {
            let found = find(action, cluster, transport);
            assert_eq!(found.len(), 1, "{action} {cluster} over {transport}: {found:#?}");
            let r = &found[0];
            assert_eq!(r["outcome"], "succeeded", "{r}");
            assert_eq!(
                (r["http_status"].as_u64(), r["grpc_code"].as_str()),
                (Some(http), Some("OK")),
                "{r}"
            );
            assert_eq!(r["actor"]["subject"], "alice@example.com");
            assert_eq!(r["actor"]["teams"], json!(["ml-research"]));
            assert_eq!(r["namespace"], "ml-team");
            assert!(r["completed_at"].is_string() && r["duration_ms"].is_u64(), "{r}");
            assert!(r["request_id"].as_str().is_some_and(|id| !id.is_empty()));
            assert_eq!(r["source_ip"], "127.0.0.1");
        }
    }
    let created = &find("cluster.create", "a1", "rest")[0];
    assert_eq!(created["request_summary"]["spec"]["worker_groups"][0]["replicas"], 1);
    let invalid: Vec<&Value> = all.iter().filter(|r| r["outcome"] == "invalid").collect();
    assert_eq!(invalid.len(), 1);
    assert_eq!(invalid[0]["http_status"], 400);
    let denied: Vec<&Value> = all
        .iter()
        .filter(|r| r["outcome"] == "denied" && r["action"] == "cluster.create")
        .collect();
    assert_eq!((denied.len(), denied[0]["namespace"].as_str()), (1, Some("other-team")));
    let unauthenticated: Vec<&Value> = all.iter().filter(|r| r["action"] == "auth.denied").collect();
    assert_eq!(unauthenticated.len(), 1);
    assert_eq!(unauthenticated[0]["http_status"], 401);
    assert!(
        !all.iter().any(|r| r["outcome"] == "pending"),
        "no row may stay pending"
    );

    // The token appears in no column of any row.
    let text = serde_json::to_string(&all).unwrap();
    for secret in [
        alice_token.as_str(),
        alice_token.split('.').nth(2).unwrap(),
        "forged.token.here",
    ] {
        assert!(!text.contains(secret), "a token reached the audit log");
    }

    // Filters, over gRPC too.
    assert_eq!(rows(&env, "&action=cluster.scale").await.len(), 2);
    assert_eq!(rows(&env, "&outcome=denied&namespace=other-team").await.len(), 1);
    let mut admin = env.grpc(&env.admin()).await;
    let by_cluster = pb::ListAuditEventsRequest {
        cluster: "g1".into(),
        page_size: 2,
        ..Default::default()
    };
    let page = admin
        .audit
        .list_audit_events(by_cluster.clone())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(page.events.len(), 2);
    let rest = pb::ListAuditEventsRequest {
        page_token: page.next_page_token,
        ..by_cluster
    };
    let next = admin.audit.list_audit_events(rest).await.unwrap().into_inner();
    assert_eq!((next.events.len(), next.next_page_token.as_str()), (1, ""));
    assert!(page.events.iter().chain(&next.events).all(|e| e.transport == "grpc"));

    // Only admins read it.
    alice.get("/v1/audit").await.problem(403, "permission_denied");
    let mut g = env.grpc(&alice_token).await;
    let denied = g
        .audit
        .list_audit_events(pb::ListAuditEventsRequest::default())
        .await
        .unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied);
    env.rest(&env.admin())
        .get("/v1/audit?since=yesterday")
        .await
        .problem(400, "invalid_argument");
}

#[tokio::test]
async fn every_mutation_is_audited_once_on_postgres() {
    let db = test_database().await;
    let env = Env::start_with(EnvOptions {
        database_url: Some(db.url.clone()),
        ..EnvOptions::default()
    })
    .await;
    every_mutation_is_audited_once(env).await;
}

#[tokio::test]
async fn every_mutation_is_audited_once_on_sqlite() {
    every_mutation_is_audited_once(Env::start().await).await;
}

const NS_ADMIN_TEAMS: &str = r#"
admins: { groups: [platform-admins] }
teams:
  - name: ml-research
    members: { groups: [ml-research] }
    namespaces: { ml-team: admin, shared-data: editor }
  - name: other
    members: { groups: [other-team] }
    namespaces: { other-team: editor }
"#;

#[tokio::test]
async fn namespace_admins_read_only_their_namespaces() {
    let env = Env::start_with(EnvOptions {
        teams: NS_ADMIN_TEAMS.into(),
        ..EnvOptions::default()
    })
    .await;
    let lead = env.rest(&env.token("lead@example.com", &["ml-research"]));
    lead.post(NS, &json!({"name": "mine"})).await.expect(201);
    env.rest(&env.token("bob@example.com", &["other-team"]))
        .post("/v1/namespaces/other-team/clusters", &json!({"name": "theirs"}))
        .await
        .expect(201);
    let seen = lead.get("/v1/audit").await.expect(200);
    let namespaces: Vec<&str> = seen.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["namespace"].as_str())
        .collect();
    assert_eq!(namespaces, ["ml-team"], "{}", seen.text);
    lead.get("/v1/audit?namespace=other-team")
        .await
        .problem(403, "permission_denied");
    lead.get("/v1/audit?namespace=shared-data")
        .await
        .problem(403, "permission_denied");
}

#[tokio::test]
async fn mutations_fail_closed_when_the_database_is_gone() {
    let db = test_database().await;
    let (proxy, url) = db.behind_proxy().await;
    let env = Env::start_with(EnvOptions {
        database_url: Some(url),
        ..EnvOptions::default()
    })
    .await;
    let alice = env.rest(&env.alice());
    alice
        .post(NS, &json!({"name": "before", "worker_groups": [{"replicas": 1}]}))
        .await
        .expect(201);

    proxy.down();
    let mutating_before = mutating_requests(&env);
    for (what, started, reply) in [
        (
            "create",
            Instant::now(),
            alice.post(NS, &json!({"name": "during"})).await,
        ),
        (
            "scale",
            Instant::now(),
            alice
                .post(
                    &format!("{NS}/before/scale"),
                    &json!({"worker_group": "worker", "replicas": 3}),
                )
                .await,
        ),
        ("delete", Instant::now(), alice.delete(&format!("{NS}/before")).await),
    ] {
        let reply = reply.problem(503, "unavailable");
        assert!(
            reply.body["detail"].as_str().unwrap().contains("nothing was changed"),
            "{what}: {}",
            reply.text
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{what} took {:?}",
            started.elapsed()
        );
    }
    assert_eq!(
        mutating_requests(&env),
        mutating_before,
        "Kubernetes was changed without an audit row"
    );
    // Reads do not need the audit log.
    let got = alice.get(&format!("{NS}/before")).await.expect(200);
    assert_eq!(got.body["num_workers"], 1);
    alice.get(NS).await.expect(200);
    // Still ready (reads serve), saying what is down.
    let ops = krayne_tests::Rest::new(&format!("http://{}", env.server.ops), None);
    krayne_tests::dependency_becomes(&ops, "audit_database", "down", Duration::from_secs(10)).await;

    proxy.up();
    for _ in 0..100 {
        if alice.post(NS, &json!({"name": "after"})).await.status == 201 {
            krayne_tests::dependency_becomes(&ops, "audit_database", "up", Duration::from_secs(10)).await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("mutations did not recover after the database returned");
}

fn mutating_requests(env: &Env) -> usize {
    env.raycluster_writes().len()
}

#[tokio::test]
async fn a_row_left_pending_by_a_crash_is_resolved_at_start_up() {
    let db = test_database().await;
    let first = Env::start_with(EnvOptions {
        database_url: Some(db.url.clone()),
        ..EnvOptions::default()
    })
    .await;
    first
        .rest(&first.alice())
        .post(NS, &json!({"name": "done"}))
        .await
        .expect(201);
    drop(first);

    // What a crash between the Kubernetes call and the outcome write leaves.
    let store = krayne_server::store::Store::connect(&krayne_server::store::DatabaseOptions {
        url: db.url.clone(),
        max_connections: 1,
        statement_timeout: Duration::from_secs(5),
        acquire_timeout: Duration::from_secs(5),
        ca_file: None,
    })
    .unwrap();
    let rows = store.query(&Default::default(), 10, None).await.unwrap();
    let mut stuck = rows[0].clone();
    stuck.id = uuid::Uuid::now_v7().to_string();
    stuck.cluster = Some("crashed".into());
    stuck.outcome = krayne_server::domain::audit::Outcome::Pending;
    stuck.completed_at = None;
    stuck.occurred_at = jiff::Timestamp::now()
        .checked_sub(jiff::SignedDuration::from_mins(10))
        .unwrap()
        .to_string();
    store.insert(&[stuck]).await.unwrap();

    let second = Env::start_with(EnvOptions {
        database_url: Some(db.url.clone()),
        ..EnvOptions::default()
    })
    .await;
    let crashed = rows_where(&second, "crashed").await;
    assert_eq!(crashed.len(), 1);
    assert_eq!(crashed[0]["outcome"], "unknown", "{}", crashed[0]);
    assert!(crashed[0]["error"].as_str().unwrap().contains("check the cluster"));
    assert_eq!(rows_where(&second, "done").await[0]["outcome"], "succeeded");
}

async fn rows_where(env: &Env, cluster: &str) -> Vec<Value> {
    rows(env, &format!("&cluster={cluster}")).await
}

/// Names Postgres could not keep in a row (NUL; 8 000 characters, past an
/// index entry's limit) arrive in ordinary requests. Each is the caller's
/// mistake on both transports (never a 503), each is audited, and the
/// audit writer goes on: nothing is dropped, nothing stays pending.
#[tokio::test]
async fn names_no_object_can_have_are_refused_and_audited_on_postgres() {
    let db = test_database().await;
    let env = Env::start_with(EnvOptions::with_database(&db.url)).await;
    let token = env.admin();
    let admin = env.rest(&token);
    admin
        .post(NS, &json!({"name": "h1", "worker_groups": [{"replicas": 1}]}))
        .await
        .expect(201);
    let noise: String = (0..8_000).map(|_| fastrand::lowercase()).collect();
    let scale = json!({"worker_group": "worker", "replicas": 1});
    admin
        .get(&format!("{NS}/{noise}"))
        .await
        .problem(400, "invalid_argument");
    let r = admin
        .post(&format!("{NS}/{noise}/scale"), &scale)
        .await
        .problem(400, "invalid_argument");
    assert_eq!(r.violation_fields(), ["name"]);
    let r = admin
        .delete(&format!("/v1/namespaces/{noise}/clusters/h1"))
        .await
        .problem(400, "invalid_argument");
    assert_eq!(r.violation_fields(), ["namespace"]);
    admin
        .delete("/v1/namespaces/ml%00team/clusters/h1")
        .await
        .problem(400, "invalid_argument");
    admin
        .post(
            &format!("{NS}/h1/scale"),
            &json!({"worker_group": "w\u{0}", "replicas": 1}),
        )
        .await
        .problem(400, "invalid_argument");
    let mut g = env.grpc(&token).await;
    let get = pb::GetClusterRequest {
        namespace: "ml-team".into(),
        name: noise.clone(),
    };
    let e = g.clusters.get_cluster(get).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    let delete = pb::DeleteClusterRequest {
        namespace: "ml\0team".into(),
        name: "h1".into(),
    };
    let e = g.clusters.delete_cluster(delete).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    admin.get(&format!("{NS}/h1")).await.expect(200);

    let mut invalid = Vec::new();
    for _ in 0..100 {
        invalid = rows(&env, "&outcome=invalid").await;
        if invalid.len() >= 7 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(invalid.len(), 7, "every refusal is audited: {invalid:#?}");
    let namespaces: Vec<&str> = invalid.iter().filter_map(|r| r["namespace"].as_str()).collect();
    assert!(namespaces.contains(&"ml\u{FFFD}team"), "{namespaces:?}");
    assert!(
        invalid
            .iter()
            .all(|r| r["cluster"].as_str().is_none_or(|c| c.len() <= 256))
    );
    // A worker group the cluster lacks is a bad value (issue 56), audited
    // with the name as it came, made printable.
    let scaled = rows(&env, "&outcome=invalid&action=cluster.scale").await;
    let lacking = scaled
        .iter()
        .find(|r| r["request_summary"]["worker_group"] == "w\u{FFFD}")
        .unwrap_or_else(|| panic!("{scaled:#?}"));
    assert_eq!(lacking["http_status"], 400);
    assert!(rows(&env, "&outcome=failed&action=cluster.scale").await.is_empty());
    assert!(rows(&env, "&outcome=pending").await.is_empty());
    let metrics = env.ops().get("/metrics").await.text;
    assert_eq!(krayne_tests::metric_total(&metrics, "krayne_audit_dropped_total"), 0.0);

    // Filters in the same hostile terms find those rows; a token that is
    // not one of the list's is the caller's mistake.
    assert_eq!(rows(&env, &format!("&cluster={noise}")).await.len(), 3);
    assert!(rows(&env, "&actor=a%00b").await.is_empty());
    let urn_token = "dXJuOnV1aWQ6MDE5M2ExYjItYzNkNC03ZTVmLThhOWItMGMxZDJlM2Y0YTVi"; // urn:uuid:…
    admin
        .get(&format!("/v1/audit?page_token={urn_token}"))
        .await
        .expect(200);
    for bad in [
        "namespace=ml%00team",
        "page_token=Z2FyYmFnZQ", // "garbage"
        "since=0000-01-01T00:00:00Z",
    ] {
        admin
            .get(&format!("/v1/audit?{bad}"))
            .await
            .problem(400, "invalid_argument");
    }
    let ancient = pb::ListAuditEventsRequest {
        since: Some(prost_types::Timestamp {
            seconds: -62_135_596_801,
            nanos: 0,
        }),
        ..Default::default()
    };
    let e = g.audit.list_audit_events(ancient).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
}

#[tokio::test]
async fn reads_are_audited_only_when_asked() {
    let quiet = Env::start().await;
    quiet.rest(&quiet.alice()).get(NS).await.expect(200);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(rows(&quiet, "&action=cluster.list").await.is_empty());

    let options = EnvOptions {
        server_args: vec!["--audit-reads".into()],
        ..EnvOptions::default()
    };
    let loud = Env::start_with(options).await;
    loud.rest(&loud.alice()).get(NS).await.expect(200);
    for _ in 0..50 {
        if !rows(&loud, "&action=cluster.list").await.is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the read was not audited");
}

fn server(args: &[&str]) -> std::process::Output {
    std::process::Command::new(krayne_tests::server_binary())
        .args(args)
        .output()
        .unwrap()
}

#[tokio::test]
async fn migrate_and_prune_from_the_command_line() {
    let db = test_database().await;
    let migrated = server(&["migrate", "--database-url", &db.url]);
    assert!(
        migrated.status.success(),
        "{}",
        String::from_utf8_lossy(&migrated.stderr)
    );
    assert!(String::from_utf8_lossy(&migrated.stdout).contains("migrations applied"));
    let again = server(&["migrate", "--database-url", &db.url]);
    assert!(again.status.success(), "migrations are idempotent");
    // A RayJob's run kept 100 days ago goes with the audit rows of its
    // time; one kept yesterday stays.
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&db.url)
        .await
        .unwrap();
    for (uid, kept_at) in [("old-run", "2026-01-01T00:00:00Z"), ("new-run", "2099-01-01T00:00:00Z")] {
        sqlx::query(
            "INSERT INTO rayjob_runs (uid, namespace, name, job_id, status, kept_at) \
             VALUES ($1, 'ml-team', $1, $1, 'SUCCEEDED', $2)",
        )
        .bind(uid)
        .bind(kept_at)
        .execute(&mut conn)
        .await
        .unwrap();
    }
    let pruned = server(&["audit", "prune", "--older-than", "90d", "--database-url", &db.url]);
    assert!(pruned.status.success(), "{}", String::from_utf8_lossy(&pruned.stderr));
    let said = String::from_utf8_lossy(&pruned.stdout);
    assert!(said.contains("deleted 0 audit rows"), "{said}");
    assert!(said.contains("deleted 1 kept RayJob runs"), "{said}");
    let left: Vec<(String,)> = sqlx::query_as("SELECT uid FROM rayjob_runs")
        .fetch_all(&mut conn)
        .await
        .unwrap();
    assert_eq!(left, [("new-run".to_owned(),)]);
    let bad = server(&["migrate", "--database-url", "mysql://nope"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("postgres:// or sqlite:"));
}

#[tokio::test]
async fn replicas_may_migrate_one_database_at_once() {
    let db = test_database().await;
    let options = || EnvOptions {
        database_url: Some(db.url.clone()),
        ..EnvOptions::default()
    };
    let (a, b) = tokio::join!(Env::start_with(options()), Env::start_with(options()));
    a.rest(&a.alice())
        .post(NS, &json!({"name": "from-a"}))
        .await
        .expect(201);
    b.rest(&b.alice())
        .post(NS, &json!({"name": "from-b"}))
        .await
        .expect(201);
    assert_eq!(
        rows(&a, "&action=cluster.create").await.len(),
        2,
        "both replicas write one log"
    );
}
