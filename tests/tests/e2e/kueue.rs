//! Kueue where the platform runs it (issue 61): the team mapping names a
//! LocalQueue per namespace; krayne labels the namespace's RayClusters for
//! it and leaves admission to Kueue (the sandbox's simulated Kueue
//! v0.19.2), its own quota only informational; every read, list, watch
//! and `krayne get` shows Kueue's view — `queued` with Kueue's reason and
//! place (from the visibility API), then admitted, or `preempted`.

use std::time::{Duration, Instant};

use krayne_tests::{
    EnvOptions, Rest, TEAMS, krayne_binary,
    watch::{Framing, Watch},
};
use serde_json::{Value, json};

fn mapping() -> String {
    format!("{TEAMS}quotas:\n  ml-team: {{ gpus: 2 }}\nqueues:\n  ml-team: lq-ml\n  other-team: lq-other\n")
}

/// A cohort `research` of two 4-GPU ClusterQueues, `cq-ml` and
/// `cq-other`, each with a LocalQueue in its team's namespace; `reclaim`:
/// whether a lender takes back what it lent.
async fn kueue_objects(env: &krayne_tests::Env, reclaim: &str) {
    let base = format!("{}/apis/kueue.x-k8s.io/v1beta2", env.sandbox.url());
    let http = reqwest::Client::new();
    let post = async |path: String, body: Value| {
        let answer = http.post(format!("{base}{path}")).json(&body).send().await.unwrap();
        assert!(answer.status().is_success(), "{path}: {}", answer.text().await.unwrap());
    };
    post(
        "/resourceflavors".into(),
        json!({"metadata": {"name": "gpu"}, "spec": {}}),
    )
    .await;
    for (cq, ns, lq) in [("cq-ml", "ml-team", "lq-ml"), ("cq-other", "other-team", "lq-other")] {
        let spec = json!({
            "cohortName": "research",
            "queueingStrategy": "StrictFIFO",
            "preemption": {"reclaimWithinCohort": reclaim},
            "resourceGroups": [{"coveredResources": ["cpu", "memory", "nvidia.com/gpu"], "flavors": [{
                "name": "gpu",
                "resources": [{"name": "cpu", "nominalQuota": "32"}, {"name": "memory", "nominalQuota": "128Gi"},
                              {"name": "nvidia.com/gpu", "nominalQuota": "4"}],
            }]}],
        });
        post("/clusterqueues".into(), json!({"metadata": {"name": cq}, "spec": spec})).await;
        post(
            format!("/namespaces/{ns}/localqueues"),
            json!({"metadata": {"name": lq}, "spec": {"clusterQueue": cq}}),
        )
        .await;
    }
}

fn gpu_cluster(name: &str, gpus: u32) -> Value {
    json!({"name": name, "worker_groups": [{"name": "gpu", "replicas": 1, "max_replicas": 1, "gpus": gpus}]})
}

/// `ns/name`'s summary once `done` holds for it.
async fn until(rest: &Rest, ns: &str, name: &str, done: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let got = rest.get(&format!("/v1/namespaces/{ns}/clusters/{name}")).await;
        if got.status == 200 && done(&got.body) {
            return got.body;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{ns}/{name}: {}", got.text);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn running(c: &Value) -> bool {
    c["suspended"] == false && c["queue_position"].is_null() && c["queue_reason"].is_null()
}

#[tokio::test]
async fn a_lender_waits_in_kueue_with_its_reason_and_place_then_is_admitted() {
    let env = krayne_tests::Env::start_with(EnvOptions {
        teams: mapping(),
        ..EnvOptions::default()
    })
    .await;
    kueue_objects(&env, "Never").await;
    let (alice, bob) = (
        env.rest(&env.alice()),
        env.rest(&env.token("bob@example.com", &["other-team"])),
    );

    // krayne's own quota (2 GPUs) is informational where Kueue admits.
    let quota = alice.get("/v1/namespaces/ml-team/quota").await.expect(200).body;
    assert_eq!(quota["kueue_local_queue"], "lq-ml", "{quota}");

    // The other team borrows ml-team's idle GPUs: 8 of the cohort's 8.
    for name in ["borrow-1", "borrow-2"] {
        let created = bob
            .post("/v1/namespaces/other-team/clusters", &gpu_cluster(name, 4))
            .await
            .expect(202);
        assert_eq!(
            created.body["manifest"]["metadata"]["labels"]["kueue.x-k8s.io/queue-name"],
            "lq-other"
        );
        assert_eq!(created.body["manifest"]["spec"]["suspend"], true);
        let admitted = until(&bob, "other-team", name, running).await;
        assert!(admitted["status"] != "queued", "{admitted}");
    }

    // The lender's own cluster waits, live on a watch, with Kueue's reason
    // and its place in its LocalQueue.
    let bearer = format!("Bearer {}", env.alice());
    let mut watch = Watch::open(
        &format!("{}/v1/namespaces/ml-team/clusters?watch=true", env.url()),
        &[("authorization", &bearer)],
        Framing::Ndjson,
    )
    .await
    .unwrap();
    let accepted = alice
        .post("/v1/namespaces/ml-team/clusters", &gpu_cluster("mine", 4))
        .await
        .expect(202);
    assert_eq!(accepted.body["cluster"]["status"], "queued");
    let mine = until(&alice, "ml-team", "mine", |c| c["queue_position"] == 1).await;
    assert_eq!(mine["status"], "queued");
    // Kueue suspends and resumes it: krayne's own are refused.
    for verb in ["suspend", "resume"] {
        let refused = alice
            .post(&format!("/v1/namespaces/ml-team/clusters/mine/{verb}"), &json!({}))
            .await
            .expect(409);
        assert!(
            refused.text.contains("admitted by Kueue (LocalQueue lq-ml)"),
            "{}",
            refused.text
        );
    }
    assert_eq!(
        mine["queue_reason"],
        "couldn't assign flavors to pod set head: insufficient quota for nvidia.com/gpu in flavor gpu, 4 more needed"
    );
    watch
        .until(Duration::from_secs(30), |f| {
            f.cluster() == Some("mine") && f.json["cluster"]["queue_position"] == 1
        })
        .await;
    let table = std::process::Command::new(krayne_binary())
        .args(["get", "-n", "ml-team", "--server", &env.url(), "--token", &env.alice()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&table.stdout);
    assert!(
        stdout.contains("queued #1"),
        "{stdout}{}",
        String::from_utf8_lossy(&table.stderr)
    );

    // The borrower ends: Kueue admits the lender's cluster; krayne shows it
    // running, live, and its lifetime counts from now.
    bob.delete("/v1/namespaces/other-team/clusters/borrow-2")
        .await
        .expect(204);
    let admitted = until(&alice, "ml-team", "mine", running).await;
    assert!(
        !["queued", "suspended"].contains(&admitted["status"].as_str().unwrap()),
        "{admitted}"
    );
    watch
        .until(Duration::from_secs(30), |f| {
            f.cluster() == Some("mine") && f.json["cluster"]["suspended"] == false
        })
        .await;
    // Its place is cleared from the RayCluster and its admission recorded.
    let started = Instant::now();
    loop {
        let raw = env
            .kube_get("/apis/ray.io/v1/namespaces/ml-team/rayclusters/mine")
            .await;
        let annotations = &raw["metadata"]["annotations"];
        if annotations["krayne.dev/admitted-at"].is_string() && annotations["krayne.dev/queued-since"].is_null() {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{annotations}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // krayne's own admitter left Kueue's line alone.
    let rows = env
        .rest(&env.admin())
        .get("/v1/audit?action=queue.admit")
        .await
        .expect(200)
        .body;
    assert_eq!(rows["events"], json!([]), "{rows}");
}

#[tokio::test]
async fn a_borrower_preempted_by_a_reclaiming_lender_shows_preempted_with_the_reason() {
    let env = krayne_tests::Env::start_with(EnvOptions {
        teams: mapping(),
        ..EnvOptions::default()
    })
    .await;
    kueue_objects(&env, "Any").await;
    let (alice, bob) = (
        env.rest(&env.alice()),
        env.rest(&env.token("bob@example.com", &["other-team"])),
    );
    for name in ["borrow-1", "borrow-2"] {
        bob.post("/v1/namespaces/other-team/clusters", &gpu_cluster(name, 4))
            .await
            .expect(202);
        until(&bob, "other-team", name, running).await;
    }
    alice
        .post("/v1/namespaces/ml-team/clusters", &gpu_cluster("mine", 4))
        .await
        .expect(202);
    until(&alice, "ml-team", "mine", running).await;
    let preempted = until(&bob, "other-team", "borrow-2", |c| c["status"] == "preempted").await;
    let reason = preempted["queue_reason"].as_str().unwrap_or_default();
    assert!(
        reason.starts_with("preempted: Preempted to accommodate a workload")
            && reason.contains("reclamation within the cohort"),
        "{preempted}"
    );
    assert_eq!(preempted["suspended"], true);
}

/// A ClusterQueue `cq-small` of 1.5 CPUs (no cohort) with LocalQueue `lq-ml`
/// in ml-team.
async fn small_queue(env: &krayne_tests::Env) {
    let base = format!("{}/apis/kueue.x-k8s.io/v1beta2", env.sandbox.url());
    let http = reqwest::Client::new();
    for (path, body) in [
        (
            "/resourceflavors".to_owned(),
            json!({"metadata": {"name": "default"}, "spec": {}}),
        ),
        (
            "/clusterqueues".to_owned(),
            json!({"metadata": {"name": "cq-small"}, "spec": {
                "queueingStrategy": "StrictFIFO",
                "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [{"name": "default",
                    "resources": [{"name": "cpu", "nominalQuota": "1500m"}, {"name": "memory", "nominalQuota": "16Gi"}]}]}],
            }}),
        ),
        (
            "/namespaces/ml-team/localqueues".to_owned(),
            json!({"metadata": {"name": "lq-ml"}, "spec": {"clusterQueue": "cq-small"}}),
        ),
    ] {
        let answer = http.post(format!("{base}{path}")).json(&body).send().await.unwrap();
        assert!(answer.status().is_success(), "{path}: {}", answer.text().await.unwrap());
    }
}

#[tokio::test]
async fn a_run_is_kueues_workload_waits_with_kueues_reason_then_runs_once_admitted() {
    let env = krayne_tests::Env::start_with(EnvOptions {
        teams: mapping(),
        server_args: vec!["--rayjobs-interval-seconds".into(), "1".into()],
        ..EnvOptions::default()
    })
    .await;
    small_queue(&env).await;
    let alice = env.rest(&env.alice());
    // A default cluster's head asks 1 CPU of the 1.5: a second does not fit.
    alice
        .post("/v1/namespaces/ml-team/clusters", &json!({"name": "first"}))
        .await
        .expect(202);
    until(&alice, "ml-team", "first", running).await;

    let runs = "/v1/namespaces/ml-team/rayjobs";
    let created = alice
        .post(runs, &json!({"name": "train", "entrypoint": "sh -c 'echo trained'"}))
        .await
        .expect(202)
        .body;
    let manifest = &created["manifest"];
    assert_eq!(
        manifest["metadata"]["labels"]["kueue.x-k8s.io/queue-name"], "lq-ml",
        "{manifest}"
    );
    assert_eq!(manifest["spec"]["suspend"], true);
    assert_eq!(created["rayjob"]["state"], "queued", "{created}");
    // One that keeps its cluster is refused: Kueue takes only RayJobs
    // that shut theirs down.
    let keeps = alice
        .post(
            runs,
            &json!({"name": "keeps", "entrypoint": "true", "shutdown_after_job_finishes": false}),
        )
        .await
        .expect(400);
    assert!(keeps.text.contains("Kueue"), "{}", keeps.text);

    // Kueue's Workload is the RayJob's; its reason and place are shown.
    let started = Instant::now();
    let waiting = loop {
        let job = alice.get(&format!("{runs}/train")).await.expect(200).body;
        if job["queue_position"] == 1
            && job["queue_reason"]
                .as_str()
                .is_some_and(|r| r.contains("insufficient quota for cpu"))
        {
            break job;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "{job}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(waiting["state"], "queued", "{waiting}");
    let workloads = env
        .kube_get("/apis/kueue.x-k8s.io/v1beta2/namespaces/ml-team/workloads")
        .await;
    let of_job = workloads["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["metadata"]["ownerReferences"][0]["kind"] == "RayJob")
        .count();
    assert_eq!(of_job, 1, "{workloads}");

    // The cluster goes: Kueue admits the RayJob, KubeRay makes its
    // cluster (not a workload of its own), the job runs, its Workload
    // finishes.
    alice.delete("/v1/namespaces/ml-team/clusters/first").await.expect(204);
    let started = Instant::now();
    let done = loop {
        let job = alice.get(&format!("{runs}/train")).await.expect(200).body;
        if job["state"] == "succeeded" && !job["exit_code"].is_null() {
            break job;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "{job}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        done["queue_position"].is_null() && done["queued_since"].is_null(),
        "{done}"
    );
    assert_eq!(done["exit_code"], 0);
    let workloads = env
        .kube_get("/apis/kueue.x-k8s.io/v1beta2/namespaces/ml-team/workloads")
        .await;
    let items = workloads["items"].as_array().unwrap();
    assert!(
        items
            .iter()
            .all(|w| w["metadata"]["ownerReferences"][0]["kind"] == "RayJob"),
        "the job's cluster is no workload of its own: {workloads}"
    );
    let finished = items[0]["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["type"] == "Finished" && c["status"] == "True");
    assert!(finished, "{workloads}");
}
