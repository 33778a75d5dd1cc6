//! Jobs with a cluster of their own (issue 60) through REST: a run becomes
//! a KubeRay RayJob the sandbox's operator runs, with create's tenancy,
//! checks, quota and audit; deleting it removes its cluster.

use std::time::Duration;

use krayne_tests::{Env, EnvOptions, TEAMS};
use serde_json::{Value, json};

const RUNS: &str = "/v1/namespaces/ml-team/rayjobs";

/// The RayJobs the sandbox holds in `namespace`.
async fn rayjobs_in_kubernetes(env: &Env, namespace: &str) -> Vec<Value> {
    let url = format!("{}/apis/ray.io/v1/namespaces/{namespace}/rayjobs", env.sandbox.url());
    let list: Value = reqwest::get(url).await.unwrap().json().await.unwrap();
    list["items"].as_array().cloned().unwrap_or_default()
}

/// The RayJob once `done` holds for krayne's view of it (20 s at most).
async fn rayjob_when(env: &Env, name: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let alice = env.rest(&env.alice());
    for _ in 0..200 {
        let job = alice.get(&format!("{RUNS}/{name}")).await.expect(200).body;
        if done(&job) {
            return job;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{name} never {what}");
}

#[tokio::test]
async fn a_run_is_a_rayjob_whose_cluster_krayne_serves_and_delete_removes_both() {
    let env = Env::start().await;
    let alice = env.rest(&env.alice());
    let run = json!({
        "name": "train-1",
        "cluster": {"worker_groups": [{"name": "cpu", "replicas": 1}]},
        "entrypoint": "python train.py",
        "runtime_env": {"env_vars": {"SECRET_TOKEN": "never-in-the-audit"}, "pip": ["numpy==2.1.3"]},
        "ttl_seconds_after_finished": 60,
    });
    let dry = alice.post(&format!("{RUNS}?dry_run=true"), &run).await.expect(200).body;
    assert_eq!(dry["manifest"]["kind"], "RayJob");
    assert_eq!(dry["manifest"]["spec"]["submissionMode"], "InteractiveMode");
    assert!(
        rayjobs_in_kubernetes(&env, "ml-team").await.is_empty(),
        "a dry run creates nothing"
    );

    let created = alice.post(RUNS, &run).await.expect(201).body;
    assert_eq!(created["rayjob"]["name"], "train-1");
    assert_eq!(created["rayjob"]["job_id"], "train-1");
    assert_eq!(created["rayjob"]["created_by"], "alice@example.com");
    let stored = rayjobs_in_kubernetes(&env, "ml-team").await;
    assert_eq!(stored.len(), 1);
    let spec = &stored[0]["spec"];
    assert_eq!(
        (&spec["ttlSecondsAfterFinished"], &spec["shutdownAfterJobFinishes"]),
        (&json!(60), &json!(true))
    );
    assert_eq!(spec["rayClusterSpec"]["workerGroupSpecs"][0]["replicas"], 1);

    // KubeRay makes the cluster; krayne serves it as any of the namespace's.
    let ready = rayjob_when(&env, "train-1", "had a ready cluster", |j| {
        j["cluster_status"] == "ready"
    })
    .await;
    assert_eq!(ready["state"], "submitting", "{ready}");
    let cluster = ready["cluster"].as_str().unwrap().to_owned();
    assert!(cluster.starts_with("train-1-"), "{cluster}");
    let info = alice
        .get(&format!("/v1/namespaces/ml-team/clusters/{cluster}"))
        .await
        .expect(200)
        .body;
    assert_eq!(info["created_by"], "alice@example.com");
    let listed = alice.get(RUNS).await.expect(200).body;
    assert_eq!(listed["rayjobs"][0]["cluster"], cluster.as_str());

    let rows = env.audit_rows_eventually("action=rayjob.create", 1).await;
    let summary = &rows[0]["request_summary"];
    assert_eq!(summary["entrypoint"], "python train.py");
    assert_eq!(summary["env_vars"], json!(["SECRET_TOKEN"]));
    assert!(
        !rows[0].to_string().contains("never-in-the-audit"),
        "env values stay out"
    );

    alice.delete(&format!("{RUNS}/train-1")).await.expect(204);
    alice.get(&format!("{RUNS}/train-1")).await.expect(404);
    for _ in 0..100 {
        let gone = alice.get(&format!("/v1/namespaces/ml-team/clusters/{cluster}")).await;
        if gone.status == 404 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    alice
        .get(&format!("/v1/namespaces/ml-team/clusters/{cluster}"))
        .await
        .expect(404);
    env.audit_rows_eventually("action=rayjob.delete", 1).await;
}

#[tokio::test]
async fn another_team_is_refused_and_nothing_is_made() {
    let env = Env::start().await;
    let other = env.rest(&env.token("bob@example.com", &["other-team"]));
    let run = json!({"name": "theirs", "entrypoint": "echo no"});
    let refused = other.post(RUNS, &run).await.expect(403);
    assert_eq!(refused.body["code"], "permission_denied");
    assert!(rayjobs_in_kubernetes(&env, "ml-team").await.is_empty());
    env.rest(&env.alice()).post(RUNS, &run).await.expect(201);
    other.get(&format!("{RUNS}/theirs")).await.expect(403);
    other.get(RUNS).await.expect(403);
    other.delete(&format!("{RUNS}/theirs")).await.expect(403);
    assert_eq!(rayjobs_in_kubernetes(&env, "ml-team").await.len(), 1, "still there");
    let viewer = env.rest(&env.token("carol@example.com", &["ml-research"]));
    viewer.get("/v1/namespaces/shared-data/rayjobs").await.expect(200);
    viewer
        .post("/v1/namespaces/shared-data/rayjobs", &run)
        .await
        .expect(403);
    env.audit_rows_eventually("action=rayjob.create&outcome=denied", 2)
        .await;
}

#[tokio::test]
async fn a_quota_refuses_a_run_before_anything_is_created_and_counts_a_cluster_not_yet_made() {
    let env = Env::start_with(EnvOptions {
        teams: format!("{TEAMS}quotas:\n  ml-team: {{ gpus: 2 }}\n"),
        ..EnvOptions::default()
    })
    .await;
    let alice = env.rest(&env.alice());
    let gpus = |n: u32| json!({"worker_groups": [{"name": "gpu", "replicas": 1, "max_replicas": 1, "gpus": n}]});
    let too_big = json!({"name": "big", "entrypoint": "echo", "cluster": gpus(3)});
    let refused = alice.post(RUNS, &too_big).await.expect(429);
    assert_eq!(refused.body["code"], "quota_exceeded");
    assert!(rayjobs_in_kubernetes(&env, "ml-team").await.is_empty());
    let secrets: Value = reqwest::get(format!("{}/api/v1/namespaces/ml-team/secrets", env.sandbox.url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(secrets["items"].as_array().map(Vec::len), Some(0), "no token staged");

    // The first run's cluster is charged at once, before KubeRay makes it.
    alice
        .post(
            RUNS,
            &json!({"name": "first", "entrypoint": "echo", "cluster": gpus(2)}),
        )
        .await
        .expect(201);
    let second = alice
        .post(
            RUNS,
            &json!({"name": "second", "entrypoint": "echo", "cluster": gpus(1)}),
        )
        .await
        .expect(429);
    assert_eq!(second.body["code"], "quota_exceeded");
    let rows = env
        .audit_rows_eventually("action=rayjob.create&outcome=invalid", 2)
        .await;
    assert!(rows.iter().all(|r| r["http_status"] == 429), "{rows:?}");
    assert!(rows[0]["request_summary"]["quota_violations"].is_array(), "{rows:?}");
}

#[tokio::test]
async fn bad_runs_are_refused_with_every_field() {
    let env = Env::start().await;
    let alice = env.rest(&env.alice());
    let refused = alice
        .post(
            RUNS,
            &json!({
                "name": "a-name-far-too-long-for-kuberay-to-give-its-cluster-a-suffix",
                "entrypoint": "",
                "cluster": {"head": {"cpus": "many"}},
                "shutdown_after_job_finishes": false,
                "ttl_seconds_after_finished": 60,
                "colour": "blue",
            }),
        )
        .await
        .expect(400);
    let fields: Vec<&str> = refused.body["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["field"].as_str().unwrap())
        .collect();
    for field in [
        "name",
        "entrypoint",
        "cluster.head.cpus",
        "ttl_seconds_after_finished",
        "colour",
    ] {
        assert!(fields.contains(&field), "{field} not in {fields:?}");
    }
    let yaml = "name: from-yaml\nentrypoint: python x.py\ncluster:\n  worker_groups: [{replicas: 0}]\n";
    let created = alice.post_yaml(RUNS, yaml).await.expect(201);
    assert_eq!(created.body["rayjob"]["name"], "from-yaml");
    alice.post_yaml(RUNS, yaml).await.expect(409);
    alice.get(&format!("{RUNS}/nothing-here")).await.expect(404);
}
