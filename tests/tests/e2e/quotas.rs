//! Team quotas (issue 24): a cluster charged its upper bound; creates,
//! dry runs and scales refused past a limit with the numbers; scale-downs
//! always allowed; clusters made behind krayne's back counted; a lowered
//! quota taking effect on reload; and admission serialized across two
//! replicas sharing Kubernetes and the audit database.

use std::time::Duration;

use krayne_proto::v1::{self as pb, create_cluster_request::Source};
use krayne_tests::{EnvOptions, TEAMS};
use serde_json::{Value, json};

const NS: &str = "/v1/namespaces/ml-team/clusters";

fn with_quota(quota: &str) -> String {
    format!("{TEAMS}quotas:\n  ml-team: {quota}\n")
}

/// A cluster whose one worker asks for `gpus` GPUs (no autoscaling room:
/// its charge is exactly its head and that worker).
fn gpu_cluster(name: &str, gpus: u32) -> Value {
    json!({"name": name, "worker_groups": [{"name": "gpu", "replicas": 1, "max_replicas": 1, "gpus": gpus}]})
}

async fn gpus_used(env: &krayne_tests::Env) -> String {
    let quota = env
        .rest(&env.alice())
        .get("/v1/namespaces/ml-team/quota")
        .await
        .expect(200)
        .body;
    let gpus = quota["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == "gpus")
        .unwrap()
        .clone();
    gpus["used"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_gpu_quota_refuses_growth_with_the_numbers_and_counts_every_cluster() {
    let env = krayne_tests::Env::start_with(EnvOptions {
        teams: with_quota("{ gpus: 4 }"),
        server_args: vec!["--teams-watch".into(), "false".into()],
        ..EnvOptions::default()
    })
    .await;
    let alice = env.rest(&env.alice());
    alice.post(NS, &gpu_cluster("two", 2)).await.expect(201);
    assert_eq!(gpus_used(&env).await, "2");
    let gauge = |name: &'static str| env.metric(name, "namespace=\"ml-team\",resource=\"gpus\"");
    assert_eq!(
        (gauge("krayne_quota_used").await, gauge("krayne_quota_limit").await),
        (2.0, 4.0)
    );

    let refused = alice.post(NS, &gpu_cluster("three", 3)).await.expect(429);
    assert_eq!(refused.body["code"], "quota_exceeded");
    assert_eq!(
        refused.body["quota_violations"],
        json!([{"resource": "gpus", "requested": "3", "in_use": "2", "limit": "4",
                "cluster_would_hold": "3", "namespace_would_hold": "5"}])
    );
    assert!(refused.headers.get("retry-after").is_none(), "waiting frees no quota");
    let dry = alice
        .post(&format!("{NS}?dry_run=true"), &gpu_cluster("three", 3))
        .await
        .expect(429);
    assert_eq!(dry.body["quota_violations"][0]["requested"], "3");

    // gRPC: RESOURCE_EXHAUSTED with the numbers.
    let mut grpc = env.grpc(&env.alice()).await;
    let spec = pb::ClusterSpec {
        name: "three".into(),
        namespace: Some("ml-team".into()),
        worker_groups: vec![pb::WorkerGroupSpec {
            name: Some("gpu".into()),
            replicas: Some(1),
            max_replicas: Some(1),
            gpus: Some(3),
            ..Default::default()
        }],
        ..Default::default()
    };
    let status = grpc
        .clusters
        .create_cluster(pb::CreateClusterRequest {
            source: Some(Source::Spec(spec)),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    assert!(
        status
            .message()
            .contains("gpus: the cluster would hold 3 (3 more), the namespace 5 of its limit 4 (2 in use)"),
        "{}",
        status.message()
    );

    // Scale beyond: refused; down: allowed.
    let scale = |replicas: u32, max: u32| json!({"worker_group": "gpu", "replicas": replicas, "max_replicas": max});
    let beyond = alice.post(&format!("{NS}/two/scale"), &scale(3, 3)).await.expect(429);
    assert_eq!(beyond.body["quota_violations"][0]["requested"], "4");
    alice.post(&format!("{NS}/two/scale"), &scale(0, 1)).await.expect(200);

    // A cluster made behind krayne's back counts.
    let manifest = alice
        .post(&format!("{NS}?dry_run=true"), &gpu_cluster("kubectl-made", 1))
        .await
        .expect(200)
        .body["manifest"]
        .clone();
    let manifest = krayne_tests::made_elsewhere(manifest);
    let made = reqwest::Client::new()
        .post(format!(
            "{}/apis/ray.io/v1/namespaces/ml-team/rayclusters",
            env.sandbox.url()
        ))
        .json(&manifest)
        .send()
        .await
        .unwrap();
    assert!(made.status().is_success(), "{}", made.text().await.unwrap());
    let started = std::time::Instant::now();
    while gpus_used(&env).await != "3" {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the kubectl cluster is counted"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let over = alice.post(NS, &gpu_cluster("two-more", 2)).await.expect(429);
    assert_eq!(over.body["quota_violations"][0]["in_use"], "3");
    alice.post(NS, &gpu_cluster("one-more", 1)).await.expect(201);

    // Lowered below usage by a reload: nothing is touched, growth refused,
    // shrinking still allowed.
    std::fs::write(env.teams_file(), with_quota("{ gpus: 1 }")).unwrap();
    env.server.signal("HUP");
    // Until the reload lands, a 1-GPU cluster may still fit (it is taken
    // away again); then it is refused against the new limit.
    let started = std::time::Instant::now();
    loop {
        let answer = alice.post(NS, &gpu_cluster("after-reload", 1)).await;
        if answer.status == 429 && answer.body["quota_violations"][0]["limit"] == "1" {
            break;
        }
        if answer.status == 201 {
            alice.delete(&format!("{NS}/after-reload")).await.expect(204);
        } else {
            assert_eq!(answer.status, 429, "{}", answer.text);
        }
        assert!(started.elapsed() < Duration::from_secs(10), "the reload takes effect");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    alice.get(&format!("{NS}/two")).await.expect(200);
    alice.post(&format!("{NS}/two/scale"), &scale(0, 1)).await.expect(200);

    // Refusals are audited with their violations.
    let rows = env
        .rest(&env.admin())
        .get("/v1/audit?action=cluster.create&outcome=invalid")
        .await
        .expect(200)
        .body;
    let refused_row = rows["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["request_summary"]["quota_violations"].is_array())
        .cloned()
        .unwrap_or_default();
    assert_eq!(refused_row["http_status"], 429, "{rows}");
}

#[tokio::test]
async fn concurrent_creates_on_two_replicas_admit_exactly_what_fits() {
    let db = krayne_tests::test_database().await;
    let env = krayne_tests::Env::start_with(EnvOptions {
        teams: with_quota("{ clusters: 5 }"),
        database_url: Some(db.url.clone()),
        server_args: vec!["--rate-limit-per-second".into(), "0".into()],
        ..EnvOptions::default()
    })
    .await;
    let second = env.spawn_server(&[]).await;
    let bases = [env.url(), format!("http://{}", second.api)];
    let token = env.alice();
    let http = reqwest::Client::new();
    for round in 0..20 {
        let creates = (0..20).map(|i| {
            let (http, token) = (http.clone(), token.clone());
            let url = format!("{}{NS}", bases[i % 2]);
            async move {
                http.post(url)
                    .bearer_auth(token)
                    .json(&json!({"name": format!("r{round}-c{i}")}))
                    .send()
                    .await
                    .unwrap()
                    .status()
                    .as_u16()
            }
        });
        let statuses = futures::future::join_all(creates).await;
        let admitted = statuses.iter().filter(|s| **s == 201).count();
        let refused = statuses.iter().filter(|s| **s == 429).count();
        assert_eq!((admitted, refused), (5, 15), "round {round}: {statuses:?}");
        // Empty the namespace for the next round.
        let alice = env.rest(&token);
        for i in 0..20 {
            alice.delete(&format!("{NS}/r{round}-c{i}")).await;
        }
        let started = std::time::Instant::now();
        loop {
            let listed = http
                .get(format!(
                    "{}/apis/ray.io/v1/namespaces/ml-team/rayclusters",
                    env.sandbox.url()
                ))
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap();
            if listed["items"].as_array().is_none_or(Vec::is_empty) {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "round {round}: clusters linger"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

#[tokio::test]
async fn no_admission_lock_means_no_create_in_a_namespace_with_a_quota() {
    let pg = krayne_tests::PgServer::start().await;
    let env = krayne_tests::Env::start_with(EnvOptions {
        teams: format!("{TEAMS}quotas:\n  ml-team: {{ clusters: 5 }}\n"),
        database_url: Some(pg.url.clone()),
        ..EnvOptions::default()
    })
    .await;
    let alice = env.rest(&env.alice());
    alice.post(NS, &json!({"name": "before"})).await.expect(201);
    pg.stop();
    let refused = alice.post(NS, &json!({"name": "during"})).await;
    assert_eq!(refused.status, 503, "{}", refused.text);
    assert!(refused.text.contains("nothing was created"), "{}", refused.text);
    let scale = json!({"worker_group": "worker", "replicas": 1});
    let scaled = alice.post(&format!("{NS}/before/scale"), &scale).await;
    assert_eq!(scaled.status, 503, "growth needs the lock too: {}", scaled.text);
    pg.resume().await;
    let started = std::time::Instant::now();
    loop {
        let answer = alice.post(NS, &json!({"name": "after"})).await;
        if answer.status == 201 {
            break;
        }
        assert_eq!(answer.status, 503, "{}", answer.text);
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "admission resumes with the database"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Nothing was created while the lock could not be had.
    alice.get(&format!("{NS}/during")).await.expect(404);
}

/// The second review's finding 1: on an autoscaling cluster a scale that
/// sends only `replicas` raises `maxReplicas` to it, so it must be charged
/// that maximum, not the one it left unchanged.
#[tokio::test]
async fn a_scale_is_charged_what_it_writes_not_what_it_sends() {
    let env = krayne_tests::Env::start_with(EnvOptions {
        teams: with_quota("{ cpus: 64, gpus: 2 }"),
        server_args: vec!["--teams-watch".into(), "false".into()],
        ..EnvOptions::default()
    })
    .await;
    let alice = env.rest(&env.alice());
    let stored_max = async |name: &str| {
        let url = format!(
            "{}/apis/ray.io/v1/namespaces/ml-team/rayclusters/{name}",
            env.sandbox.url()
        );
        let object: Value = reqwest::get(url).await.unwrap().json().await.unwrap();
        object["spec"]["workerGroupSpecs"][0]["maxReplicas"].clone()
    };

    // The default cluster autoscales: head 1 CPU + one worker of 1 CPU.
    alice.post(NS, &json!({"name": "auto"})).await.expect(201);
    let refused = alice
        .post(
            &format!("{NS}/auto/scale"),
            &json!({"worker_group": "worker", "replicas": 70}),
        )
        .await
        .expect(429);
    assert_eq!(
        refused.body["quota_violations"],
        json!([{"resource": "cpus", "requested": "69", "in_use": "2", "limit": "64",
                "cluster_would_hold": "71", "namespace_would_hold": "71"}])
    );
    assert_eq!(stored_max("auto").await, 1, "nothing written");

    alice
        .post(
            NS,
            &json!({"name": "gpu", "worker_groups": [{"name": "gpu", "replicas": 0, "max_replicas": 1, "gpus": 1}]}),
        )
        .await
        .expect(201);
    assert_eq!(gpus_used(&env).await, "1");
    let refused = alice
        .post(
            &format!("{NS}/gpu/scale"),
            &json!({"worker_group": "gpu", "replicas": 16}),
        )
        .await
        .expect(429);
    assert_eq!(
        refused.body["quota_violations"],
        json!([{"resource": "gpus", "requested": "15", "in_use": "1", "limit": "2",
                "cluster_would_hold": "16", "namespace_would_hold": "16"}])
    );
    let mut grpc = env.grpc(&env.alice()).await;
    let status = grpc
        .clusters
        .scale_cluster(pb::ScaleClusterRequest {
            namespace: "ml-team".into(),
            name: "gpu".into(),
            worker_group: "gpu".into(),
            replicas: Some(16),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    assert_eq!(stored_max("gpu").await, 1, "nothing written");
    assert_eq!(gpus_used(&env).await, "1");

    // What fits is admitted and written as charged.
    alice
        .post(
            &format!("{NS}/gpu/scale"),
            &json!({"worker_group": "gpu", "replicas": 2}),
        )
        .await
        .expect(200);
    assert_eq!(stored_max("gpu").await, 2);
    assert_eq!(gpus_used(&env).await, "2");
}

/// The admission lease is renewed while held, and lapses soon when its
/// holder dies (issue 61: the admitter serves lines under it every
/// second). An admission slower than the 10 s lease (a Kubernetes that
/// takes 6 s a call) still holds it past 10 s; a holder SIGKILLed
/// mid-admission holds the namespace no longer than the lease, so the
/// other replica's create is admitted, not refused after its 30 s wait.
#[tokio::test]
async fn a_slow_admission_keeps_its_lease_and_a_dead_holders_lapses() {
    use sqlx::Connection as _;
    let db = krayne_tests::test_database().await;
    let env = krayne_tests::Env::start_with(EnvOptions {
        teams: with_quota("{ clusters: 5 }"),
        database_url: Some(db.url.clone()),
        server_args: [
            "--kube-timeout-seconds",
            "40",
            "--request-timeout-seconds",
            "120",
            "--rate-limit-per-second",
            "0",
        ]
        .map(String::from)
        .to_vec(),
        ..EnvOptions::default()
    })
    .await;
    let second = env.spawn_server(&[]).await;
    let token = env.alice();
    let post = |base: String, name: &'static str| {
        let token = token.clone();
        async move {
            reqwest::Client::new()
                .post(format!("{base}{NS}"))
                .bearer_auth(token)
                .json(&json!({"name": name}))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    let mut sql = sqlx::PgConnection::connect(&db.url).await.unwrap();
    let lease = async |sql: &mut sqlx::PgConnection| -> Option<(String, bool)> {
        sqlx::query_as("SELECT holder, expires_at > now() FROM quota_admissions WHERE namespace = 'ml-team'")
            .fetch_optional(sql)
            .await
            .unwrap()
    };
    env.sandbox.set_latency(Duration::from_secs(6));
    let slow = tokio::spawn(post(env.url(), "slow"));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (holder, live) = lease(&mut sql).await.expect("the admission holds the lease");
    assert!(live);
    tokio::time::sleep(Duration::from_secs(12)).await;
    assert_eq!(
        lease(&mut sql).await,
        Some((holder, true)),
        "past the 10 s lease, a live admission has renewed it"
    );
    assert_eq!(slow.await.unwrap(), 201);

    let dying = tokio::spawn(post(env.url(), "dying"));
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(lease(&mut sql).await.is_some_and(|(_, live)| live));
    env.server.signal("KILL");
    let _ = dying.await;
    env.sandbox.set_latency(Duration::ZERO);
    // Refused with 503 were the namespace held past the 30 s wait.
    let after = post(format!("http://{}", second.api), "after").await;
    assert_eq!(after, 201, "admitted once the dead holder's lease lapsed");
}
