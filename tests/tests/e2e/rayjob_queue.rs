//! RayJobs in line (issues 60 and 61): a run whose cluster does not fit
//! the quota waits in its namespace's line beside waiting clusters, as a
//! suspended RayJob KubeRay makes no cluster for; the admitter admits it in
//! its turn (audited, an Event on the RayJob), KubeRay makes its cluster
//! and the job runs; a wait past `max_wait` ends as the policy says.

use std::time::{Duration, Instant};

use krayne_tests::{Env, EnvOptions, Rest, TEAMS};
use serde_json::{Value, json};

const RUNS: &str = "/v1/namespaces/ml-team/rayjobs";
const CLUSTERS: &str = "/v1/namespaces/ml-team/clusters";

fn options(quota: &str, queueing: &str) -> EnvOptions {
    EnvOptions {
        teams: format!("{TEAMS}quotas:\n  ml-team: {quota}\n{queueing}"),
        server_args: vec![
            "--teams-watch".into(),
            "false".into(),
            "--rayjobs-interval-seconds".into(),
            "1".into(),
        ],
        ..EnvOptions::default()
    }
}

/// What krayne shows at `path` once `done` holds for it, within `limit`.
async fn until(rest: &Rest, path: &str, limit: Duration, done: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let got = rest.get(path).await;
        if got.status == 200 && done(&got.body) {
            return got.body;
        }
        assert!(started.elapsed() < limit, "{path} never got there: {}", got.text);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The RayJob as Kubernetes holds it.
async fn rayjob_in_kubernetes(env: &Env, name: &str) -> Value {
    env.kube_get(&format!("/apis/ray.io/v1/namespaces/ml-team/rayjobs/{name}"))
        .await
}

/// The names of the RayClusters KubeRay made for RayJobs.
async fn job_clusters(env: &Env) -> Vec<String> {
    let listed = env
        .kube_get("/apis/ray.io/v1/namespaces/ml-team/rayclusters?labelSelector=ray.io%2Foriginated-from-crd%3DRayJob")
        .await;
    listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["metadata"]["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_run_waits_in_line_with_clusters_is_admitted_in_its_turn_and_runs() {
    let env = Env::start_with(options("{ clusters: 1 }", "")).await;
    let alice = env.rest(&env.alice());
    alice.post(CLUSTERS, &json!({"name": "holder"})).await.expect(201);
    let run = json!({"name": "train", "entrypoint": "sh -c 'echo trained'", "ttl_seconds_after_finished": 30});
    let queued = alice.post(&format!("{RUNS}?queue=true"), &run).await.expect(202).body;
    let job = &queued["rayjob"];
    assert_eq!(job["state"], "queued", "{job}");
    assert_eq!(job["queue_position"], 1, "{job}");
    assert_eq!(job["queue_reason"], "clusters: needs 1, 0 of 1 free", "{job}");
    assert!(job["queued_since"].is_string(), "{job}");
    // A cluster asking after it waits behind it, in the same line.
    let behind = alice
        .post(&format!("{CLUSTERS}?queue=true"), &json!({"name": "later"}))
        .await
        .expect(202)
        .body;
    assert_eq!(behind["cluster"]["queue_position"], 2, "{behind}");
    // Without `queue` a run is refused as before; `queue: true` in the
    // body waits as the query does.
    let refused = alice
        .post(RUNS, &json!({"name": "eager", "entrypoint": "true"}))
        .await
        .expect(429);
    assert!(refused.text.contains("clusters"), "{}", refused.text);
    let in_body = alice
        .post(RUNS, &json!({"name": "patient", "entrypoint": "true", "queue": true}))
        .await
        .expect(202)
        .body;
    assert_eq!(in_body["rayjob"]["queue_position"], 3, "{in_body}");
    // A RayJob that keeps its cluster cannot be suspended by KubeRay.
    let keeps = alice
        .post(
            &format!("{RUNS}?queue=true"),
            &json!({"name": "keeps", "entrypoint": "true", "shutdown_after_job_finishes": false}),
        )
        .await
        .expect(400);
    assert!(keeps.text.contains("shutdown_after_job_finishes"), "{}", keeps.text);

    // In Kubernetes: suspended, KubeRay holds it without a cluster; it
    // holds no quota.
    let stored = rayjob_in_kubernetes(&env, "train").await;
    assert_eq!(stored["spec"]["suspend"], true, "{stored}");
    let held = until(&alice, &format!("{RUNS}/train"), Duration::from_secs(10), |j| {
        j["deployment_status"] == "Suspended"
    })
    .await;
    assert_eq!(held["state"], "queued", "{held}");
    assert!(job_clusters(&env).await.is_empty());
    let quota = alice.get("/v1/namespaces/ml-team/quota").await.expect(200).body;
    assert_eq!(quota["resources"][0]["used"], "1", "{quota}");
    let listed = alice.get(RUNS).await.expect(200).body;
    let patient = listed["rayjobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["name"] == "patient")
        .cloned()
        .unwrap();
    assert_eq!(patient["queue_position"], 3, "{patient}");

    // The holder goes: the run is admitted first, its cluster made, its
    // job run; the cluster behind it moves up and still waits.
    alice.delete(&format!("{CLUSTERS}/holder")).await.expect(204);
    let started = until(&alice, &format!("{RUNS}/train"), Duration::from_secs(20), |j| {
        j["state"] != "queued"
    })
    .await;
    assert!(started["queue_position"].is_null(), "{started}");
    let stored = rayjob_in_kubernetes(&env, "train").await;
    assert_eq!(stored["spec"]["suspend"], false, "{stored}");
    assert!(
        stored["metadata"]["annotations"]["krayne.dev/queued-since"].is_null(),
        "the place is off before KubeRay copies the annotations to its cluster: {stored}"
    );
    let later = until(&alice, &format!("{CLUSTERS}/later"), Duration::from_secs(10), |c| {
        c["queue_position"] == 1
    })
    .await;
    assert_eq!(later["status"], "queued", "{later}");
    let done = until(&alice, &format!("{RUNS}/train"), Duration::from_secs(60), |j| {
        j["state"] == "succeeded" && !j["exit_code"].is_null()
    })
    .await;
    assert_eq!(done["exit_code"], 0, "{done}");
    let made = job_clusters(&env).await;
    assert_eq!(made.len(), 1, "{made:?}");
    let cluster = env
        .kube_get(&format!("/apis/ray.io/v1/namespaces/ml-team/rayclusters/{}", made[0]))
        .await;
    assert!(
        cluster["metadata"]["annotations"]["krayne.dev/queued-since"].is_null(),
        "the job's cluster is not in line: {cluster}"
    );
    let logs = alice.get(&format!("{RUNS}/train/logs")).await.expect(200).text;
    assert!(logs.contains("trained"), "{logs}");

    // Audited: created to wait (202), admitted by krayne's own principal
    // as a RayJob, an Event on the RayJob.
    let creates = env
        .audit_rows_eventually("action=rayjob.create&outcome=succeeded", 2)
        .await;
    assert!(creates.iter().all(|r| r["http_status"] == 202), "{creates:?}");
    let train = creates.iter().find(|r| r["cluster"] == "train").unwrap();
    assert_eq!(train["request_summary"]["queue"]["queue_position"], 1, "{train}");
    let admits = env.audit_rows_eventually("action=queue.admit", 1).await;
    assert_eq!(admits[0]["cluster"], "train", "{admits:?}");
    assert_eq!(admits[0]["request_summary"]["kind"], "RayJob");
    assert_eq!(admits[0]["actor"]["subject"], "system:krayne-queue");
    let events = env.kube_get("/api/v1/namespaces/ml-team/events").await;
    assert!(
        events["items"].as_array().unwrap().iter().any(|e| {
            e["reason"] == "QueueAdmitted"
                && e["involvedObject"]["kind"] == "RayJob"
                && e["involvedObject"]["name"] == "train"
        }),
        "{events}"
    );

    // Its cluster goes after its TTL: the next in line (the cluster) is
    // admitted, then the last run.
    until(&alice, &format!("{CLUSTERS}/later"), Duration::from_secs(90), |c| {
        c["status"] != "queued"
    })
    .await;
    let patient = alice.get(&format!("{RUNS}/patient")).await.expect(200).body;
    assert_eq!(
        (patient["state"].clone(), patient["queue_position"].clone()),
        (json!("queued"), json!(1)),
        "{patient}"
    );
    // A queued run leaves the line when deleted, nothing made.
    alice.delete(&format!("{RUNS}/patient")).await.expect(204);
    alice.get(&format!("{RUNS}/patient")).await.expect(404);
}

#[tokio::test]
async fn a_run_past_max_wait_is_deleted_as_the_policy_says_and_grpc_waits_too() {
    let env = Env::start_with(options(
        "{ clusters: 1 }",
        "queueing:\n  ml-team: { queue: default, max_wait: 3s, on_max_wait: delete }\n",
    ))
    .await;
    let alice = env.rest(&env.alice());
    alice.post(CLUSTERS, &json!({"name": "holder"})).await.expect(201);
    // The namespace queues by default: no flag needed.
    let queued = alice
        .post(RUNS, &json!({"name": "late", "entrypoint": "true"}))
        .await
        .expect(202)
        .body;
    assert_eq!(queued["rayjob"]["state"], "queued", "{queued}");
    let expired = env.audit_rows_eventually("action=queue.expire", 1).await;
    assert_eq!(expired[0]["cluster"], "late", "{expired:?}");
    assert_eq!(expired[0]["request_summary"]["outcome"], "deleted");
    assert_eq!(expired[0]["request_summary"]["kind"], "RayJob");
    let started = Instant::now();
    while alice.get(&format!("{RUNS}/late")).await.status != 404 {
        assert!(started.elapsed() < Duration::from_secs(10), "never deleted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Over gRPC: `queue` on the request, the place on the RayJob.
    let client = krayne_client::Client::builder(env.url())
        .token(env.alice())
        .connect()
        .await
        .unwrap();
    let answer = client
        .run_job("ml-team", krayne_client::RunJob::new("grpc-run", "true").queue(true))
        .await
        .unwrap();
    let status = answer.status().await.unwrap();
    assert_eq!(status.state(), krayne_client::proto::RunState::Queued, "{status:?}");
    assert_eq!(status.queue_position, Some(1));
    assert!(status.queued_since.is_some() && status.queue_reason.is_some());
    let refused = client
        .run_job("ml-team", krayne_client::RunJob::new("grpc-now", "true").queue(false))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::ResourceExhausted, "{refused:?}");
}
