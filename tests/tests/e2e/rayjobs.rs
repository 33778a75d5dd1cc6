//! Jobs with a cluster of their own (issue 60) through REST: a run becomes
//! a KubeRay RayJob the sandbox's operator runs, with create's tenancy,
//! checks, quota and audit; krayne submits its job once the head holds its
//! working dir, keeps its exit code and log past its cluster's TTL, and
//! deleting it removes its cluster.

use std::{io::Write as _, time::Duration};

use krayne_tests::{Env, EnvOptions, TEAMS};
use serde_json::{Value, json};

const RUNS: &str = "/v1/namespaces/ml-team/rayjobs";

/// The RayJob runner goes round every second.
fn runner_every_second() -> EnvOptions {
    EnvOptions {
        server_args: vec!["--rayjobs-interval-seconds".into(), "1".into()],
        ..EnvOptions::default()
    }
}

/// A stored zip of `files` (path, contents), as Ray packs a working dir.
fn zipped(files: &[(&str, &str)]) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let stored = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for (path, contents) in files {
        zip.start_file(*path, stored).unwrap();
        zip.write_all(contents.as_bytes()).unwrap();
    }
    zip.finish().unwrap().into_inner()
}

/// The RayJobs the sandbox holds in `namespace`.
async fn rayjobs_in_kubernetes(env: &Env, namespace: &str) -> Vec<Value> {
    let url = format!("{}/apis/ray.io/v1/namespaces/{namespace}/rayjobs", env.sandbox.url());
    let list: Value = reqwest::get(url).await.unwrap().json().await.unwrap();
    list["items"].as_array().cloned().unwrap_or_default()
}

/// The RayJob once `done` holds for krayne's view of it (20 s at most).
async fn rayjob_when(env: &Env, name: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    rayjob_when_within(env, name, what, Duration::from_secs(20), done).await
}

/// The RayJob once `done` holds for krayne's view of it, within `within`.
async fn rayjob_when_within(
    env: &Env,
    name: &str,
    what: &str,
    within: Duration,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let alice = env.rest(&env.alice());
    let started = std::time::Instant::now();
    loop {
        let job = alice.get(&format!("{RUNS}/{name}")).await.expect(200).body;
        if done(&job) {
            return job;
        }
        assert!(started.elapsed() < within, "{name} never {what}: {job}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
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

#[tokio::test]
async fn a_run_waits_for_its_working_dir_then_its_exit_code_and_log_outlive_its_cluster() {
    let env = Env::start_with(runner_every_second()).await;
    let alice = env.rest(&env.alice());
    let package = "_ray_pkg_00000000000000e3.zip";
    let run = json!({
        "name": "three",
        "entrypoint": "sh job.sh",
        "runtime_env": {"working_dir": package, "env_vars": {"WHO": "the job"}},
        "ttl_seconds_after_finished": 30,
    });
    alice.post(RUNS, &run).await.expect(201);
    let ready = rayjob_when(&env, "three", "had a ready cluster", |j| j["cluster_status"] == "ready").await;
    let cluster = ready["cluster"].as_str().unwrap().to_owned();
    // Two rounds of the runner: nothing is submitted without the package.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let waiting = alice.get(&format!("{RUNS}/three")).await.expect(200).body;
    assert_eq!(
        (&waiting["state"], &waiting["job_status"]),
        (&json!("submitting"), &Value::Null)
    );

    let script = "echo \"hello from $WHO\"; echo line two; exit 3\n";
    let uploaded = reqwest::Client::new()
        .put(format!(
            "{}/v1/namespaces/ml-team/clusters/{cluster}/packages/{package}",
            env.url()
        ))
        .bearer_auth(env.alice())
        .body(zipped(&[("job.sh", script)]))
        .send()
        .await
        .unwrap();
    assert_eq!(uploaded.status().as_u16(), 200);
    let failed = rayjob_when(&env, "three", "failed", |j| {
        j["state"] == "failed" && !j["exit_code"].is_null()
    })
    .await;
    assert_eq!(
        (&failed["exit_code"], &failed["reason"]),
        (&json!(3), &json!("AppFailed")),
        "{failed}"
    );
    let log = alice.get(&format!("{RUNS}/three/logs")).await.expect(200).text;
    assert!(log.contains("hello from the job\nline two"), "{log}");
    let submitted = env
        .audit_rows_eventually(&format!("action=job.submit&cluster={cluster}"), 1)
        .await;
    assert_eq!(
        submitted[0]["actor"]["subject"],
        krayne_server::control::LIFECYCLE_SUBJECT
    );
    assert_eq!(submitted[0]["request_summary"]["rayjob"], "three");

    // KubeRay deletes the cluster 30 s after the end; the log and the exit
    // code stay readable.
    let gone = rayjob_when_within(&env, "three", "lost its cluster", Duration::from_secs(60), |j| {
        j["cluster_status"].is_null()
    })
    .await;
    assert_eq!((&gone["state"], &gone["exit_code"]), (&json!("failed"), &json!(3)));
    alice
        .get(&format!("/v1/namespaces/ml-team/clusters/{cluster}"))
        .await
        .expect(404);
    let kept = alice.get(&format!("{RUNS}/three/logs")).await.expect(200).text;
    assert!(kept.contains("hello from the job\nline two"), "{kept}");
    let followed = alice
        .get(&format!("{RUNS}/three/logs?follow=true"))
        .await
        .expect(200)
        .text;
    assert_eq!(followed, kept);
}

#[tokio::test]
async fn a_run_without_a_working_dir_starts_by_itself_and_its_log_is_followed_to_the_end() {
    let env = Env::start_with(runner_every_second()).await;
    let alice = env.rest(&env.alice());
    let run = json!({"name": "ok", "entrypoint": "sh -c 'echo one; sleep 1; echo two'"});
    alice.post(RUNS, &run).await.expect(201);
    let early = alice.get(&format!("{RUNS}/ok/logs")).await.expect(409);
    assert!(
        early.body["detail"].as_str().unwrap().contains("has not started"),
        "{}",
        early.text
    );
    rayjob_when(&env, "ok", "ran", |j| {
        j["state"] == "running" || j["state"] == "succeeded"
    })
    .await;
    let followed = alice.get(&format!("{RUNS}/ok/logs?follow=true")).await.expect(200).text;
    assert!(followed.contains("one\ntwo"), "{followed}");
    let done = rayjob_when(&env, "ok", "succeeded", |j| {
        j["state"] == "succeeded" && !j["exit_code"].is_null()
    })
    .await;
    assert_eq!(done["exit_code"], 0);
}

#[tokio::test]
async fn deleting_a_running_run_stops_its_job_and_removes_its_cluster() {
    let env = Env::start_with(runner_every_second()).await;
    let alice = env.rest(&env.alice());
    alice
        .post(RUNS, &json!({"name": "long", "entrypoint": "sleep 600"}))
        .await
        .expect(201);
    let running = rayjob_when(&env, "long", "ran", |j| j["state"] == "running").await;
    let cluster = running["cluster"].as_str().unwrap().to_owned();
    let pods = format!(
        "{}/api/v1/namespaces/ml-team/pods?labelSelector=ray.io/cluster={cluster}",
        env.sandbox.url()
    );
    alice.delete(&format!("{RUNS}/long")).await.expect(204);
    alice.get(&format!("{RUNS}/long")).await.expect(404);
    for _ in 0..100 {
        let left: Value = reqwest::get(&pods).await.unwrap().json().await.unwrap();
        if left["items"].as_array().is_some_and(Vec::is_empty) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let left: Value = reqwest::get(&pods).await.unwrap().json().await.unwrap();
    assert_eq!(
        left["items"].as_array().map(Vec::len),
        Some(0),
        "the head (and its job) went"
    );
    alice
        .get(&format!("/v1/namespaces/ml-team/clusters/{cluster}"))
        .await
        .expect(404);
}

#[tokio::test]
async fn the_teams_policy_gives_a_runs_ttl_and_bounds_its_deadline() {
    let env = Env::start_with(EnvOptions {
        teams: format!(
            "{TEAMS}lifecycle:\n  ml-team: {{ max_lifetime: 2h, job_ttl: 45s }}\n  shared-*: {{ job_ttl: 5s }}\n"
        ),
        ..EnvOptions::default()
    })
    .await;
    let alice = env.rest(&env.alice());
    let spec_of = |reply: krayne_tests::Reply| reply.body["manifest"]["spec"].clone();
    let plain = spec_of(
        alice
            .post(
                &format!("{RUNS}?dry_run=true"),
                &json!({"name": "p", "entrypoint": "echo"}),
            )
            .await
            .expect(200),
    );
    assert_eq!(
        (&plain["ttlSecondsAfterFinished"], &plain["activeDeadlineSeconds"]),
        (&json!(45), &json!(7200)),
        "the team's job_ttl, and its lifetime as the deadline"
    );
    let asked = spec_of(
        alice
            .post(
                &format!("{RUNS}?dry_run=true"),
                &json!({"name": "p", "entrypoint": "echo", "ttl_seconds_after_finished": 600,
                        "active_deadline_seconds": 36000}),
            )
            .await
            .expect(200),
    );
    assert_eq!(
        (&asked["ttlSecondsAfterFinished"], &asked["activeDeadlineSeconds"]),
        (&json!(600), &json!(7200)),
        "the run's TTL; its deadline within the team's lifetime"
    );
    let shorter = spec_of(
        alice
            .post(
                &format!("{RUNS}?dry_run=true"),
                &json!({"name": "p", "entrypoint": "echo", "active_deadline_seconds": 60}),
            )
            .await
            .expect(200),
    );
    assert_eq!(shorter["activeDeadlineSeconds"], 60);
    // A team TTL below the 30 s krayne needs to keep the log is raised to it.
    let admin = env.rest(&env.admin());
    let shared = spec_of(
        admin
            .post(
                "/v1/namespaces/shared-data/rayjobs?dry_run=true",
                &json!({"name": "p", "entrypoint": "echo"}),
            )
            .await
            .expect(200),
    );
    assert_eq!(
        (&shared["ttlSecondsAfterFinished"], &shared["activeDeadlineSeconds"]),
        (&json!(30), &Value::Null)
    );
}

#[tokio::test]
async fn a_runs_cluster_is_fenced_at_once_not_at_the_keepers_next_round() {
    let env = Env::start_with(runner_every_second()).await;
    // The keeper's next round is ten minutes away (its default interval).
    env.keeper_first_round().await;
    let alice = env.rest(&env.alice());
    alice
        .post(RUNS, &json!({"name": "fenced", "entrypoint": "sleep 600"}))
        .await
        .expect(201);
    let job = rayjob_when(&env, "fenced", "had a cluster", |j| j["cluster"].is_string()).await;
    let cluster = job["cluster"].as_str().unwrap().to_owned();
    let url = format!(
        "{}/apis/networking.k8s.io/v1/namespaces/ml-team/networkpolicies/{cluster}-krayne-ingress",
        env.sandbox.url()
    );
    let started = std::time::Instant::now();
    let policy = loop {
        let reply = reqwest::get(&url).await.unwrap();
        if reply.status() == 200 {
            break reply.json::<Value>().await.unwrap();
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{cluster} was never fenced"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let owner = &policy["metadata"]["ownerReferences"][0];
    assert_eq!(
        (&owner["kind"], &owner["name"]),
        (&json!("RayCluster"), &json!(cluster))
    );
    assert_eq!(
        policy["spec"]["podSelector"]["matchLabels"]["ray.io/cluster"],
        cluster.as_str()
    );
    let rows = env.audit_rows_eventually("action=cluster.protect", 1).await;
    assert_eq!(rows[0]["cluster"], cluster.as_str(), "{rows:?}");
    assert_eq!(rows[0]["outcome"], "succeeded", "{rows:?}");
}

#[tokio::test]
async fn a_runs_token_secret_goes_with_its_rayjob_when_no_cluster_is_ever_made() {
    let mut options = EnvOptions::default();
    // No KubeRay: the RayJob is never reconciled, as when KubeRay refuses it.
    options.sandbox.run_operator = false;
    let env = Env::start_with(options).await;
    let alice = env.rest(&env.alice());
    alice
        .post(RUNS, &json!({"name": "unmade", "entrypoint": "echo"}))
        .await
        .expect(201);
    let secrets_url = format!("{}/api/v1/namespaces/ml-team/secrets", env.sandbox.url());
    let secrets = || async {
        let list: Value = reqwest::get(&secrets_url).await.unwrap().json().await.unwrap();
        list["items"].as_array().cloned().unwrap_or_default()
    };
    let staged = secrets().await;
    assert_eq!(staged.len(), 1, "{staged:?}");
    let owner = &staged[0]["metadata"]["ownerReferences"][0];
    assert_eq!((&owner["kind"], &owner["name"]), (&json!("RayJob"), &json!("unmade")));
    let rayjob = &rayjobs_in_kubernetes(&env, "ml-team").await[0];
    assert_eq!(owner["uid"], rayjob["metadata"]["uid"]);
    alice.delete(&format!("{RUNS}/unmade")).await.expect(204);
    for _ in 0..100 {
        if secrets().await.is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the token Secret outlived its RayJob: {:?}", secrets().await);
}

#[tokio::test]
async fn an_ended_run_is_deleted_after_its_retention_once_its_cluster_is_gone() {
    let mut options = runner_every_second();
    options
        .server_args
        .extend(["--rayjob-retention-seconds".into(), "1".into()]);
    let env = Env::start_with(options).await;
    let alice = env.rest(&env.alice());
    let ttl = json!({"ttl_seconds_after_finished": 30});
    for (name, extra) in [
        ("done", ttl.clone()),
        ("keeps", json!({"shutdown_after_job_finishes": false})),
    ] {
        let mut run = json!({"name": name, "entrypoint": "echo ran"});
        for (k, v) in extra.as_object().unwrap() {
            run[k] = v.clone();
        }
        alice.post(RUNS, &run).await.expect(201);
    }
    for name in ["done", "keeps"] {
        rayjob_when(&env, name, "succeeded", |j| {
            j["state"] == "succeeded" && !j["exit_code"].is_null()
        })
        .await;
    }
    // Past its retention but with its cluster still there (its TTL), it
    // stays: its run is kept first, nothing of it is cut short.
    tokio::time::sleep(Duration::from_secs(3)).await;
    alice.get(&format!("{RUNS}/done")).await.expect(200);
    // Once KubeRay has deleted its cluster, krayne deletes it, audited.
    let started = std::time::Instant::now();
    while alice.get(&format!("{RUNS}/done")).await.status != 404 {
        assert!(started.elapsed() < Duration::from_secs(60), "never deleted");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let rows = env.audit_rows_eventually("action=rayjob.delete&cluster=done", 1).await;
    assert_eq!(rows[0]["actor"]["subject"], "system:krayne-lifecycle", "{rows:?}");
    assert_eq!(rows[0]["request_summary"]["reason"], "retention");
    // The one that keeps its cluster is its owner's to delete.
    let kept = alice.get(&format!("{RUNS}/keeps")).await.expect(200).body;
    assert!(kept["cluster_status"].is_string(), "{kept}");
}
