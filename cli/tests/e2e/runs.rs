//! Jobs with a cluster of their own from the CLI and the SDK (issue 60):
//! `krayne run` uploads a working dir once the job's cluster serves,
//! follows the log, exits with the job's code, and the log outlives the
//! cluster; `Client::run_job` does the same for a pipeline, and stopping a
//! run removes its cluster.

use std::{path::Path, time::Duration};

use futures::StreamExt as _;
use krayne_client::{Client, RunJob, proto::RunState};
use krayne_tests::{Env, EnvOptions};
use serde_json::Value;

use crate::support::Krayne;

fn write(dir: &Path, files: &[(&str, &str)]) {
    for (path, contents) in files {
        std::fs::write(dir.join(path), contents).unwrap();
    }
}

/// The RayJob runner goes round every second.
async fn env() -> Env {
    Env::start_with(EnvOptions {
        server_args: vec!["--rayjobs-interval-seconds".into(), "1".into()],
        ..EnvOptions::default()
    })
    .await
}

/// The RayJob as REST shows it, once `done` holds (within `within`).
async fn rayjob_when(env: &Env, name: &str, within: Duration, done: impl Fn(&Value) -> bool) -> Value {
    let alice = env.rest(&env.alice());
    let started = std::time::Instant::now();
    loop {
        let job = alice
            .get(&format!("/v1/namespaces/ml-team/rayjobs/{name}"))
            .await
            .expect(200)
            .body;
        if done(&job) {
            return job;
        }
        assert!(started.elapsed() < within, "{name}: {job}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn krayne_run_prints_its_jobs_output_exits_with_its_code_and_the_log_outlives_the_cluster() {
    let env = env().await;
    let krayne = Krayne::new(&env, &env.alice());
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        &[
            ("main.sh", "echo \"hello from $WHO\"; cat data.txt; exit \"$CODE\"\n"),
            ("data.txt", "forty-two\n"),
        ],
    );
    let wd = dir.path().to_str().unwrap();
    for (name, code) in [("run-zero", "0"), ("run-three", "3")] {
        let run = krayne
            .run(&[
                "run",
                "--name",
                name,
                "-n",
                "ml-team",
                "--working-dir",
                wd,
                "--env",
                "WHO=the cli",
                "--env",
                &format!("CODE={code}"),
                "--ttl",
                "30s",
                "--",
                "sh",
                "main.sh",
            ])
            .await
            .code(code.parse().unwrap());
        let (out, err) = (run.stdout(), run.stderr());
        assert!(out.contains("hello from the cli\nforty-two"), "{out}\n{err}");
        assert!(err.contains(&format!("rayjob ml-team/{name} created")), "{err}");
        assert!(err.contains("is ready; uploading the working dir"), "{err}");
        if code == "0" {
            assert!(err.contains("succeeded; its cluster goes in 30s"), "{err}");
        } else {
            assert!(err.contains("failed with exit code 3"), "{err}");
        }
    }
    let listed = krayne.run(&["rayjobs", "-n", "ml-team"]).await.code(0).stdout();
    assert!(listed.contains("run-three") && listed.contains("failed"), "{listed}");

    // KubeRay deletes the cluster 30 s after the end; the log stays.
    rayjob_when(&env, "run-three", Duration::from_secs(60), |j| {
        j["cluster_status"].is_null()
    })
    .await;
    let kept = krayne
        .run(&["rayjob", "logs", "run-three", "-n", "ml-team"])
        .await
        .code(0)
        .stdout();
    assert!(kept.contains("hello from the cli\nforty-two"), "{kept}");
    let got = krayne
        .run(&["rayjob", "get", "run-three", "-n", "ml-team", "-o", "json"])
        .await
        .code(0)
        .stdout();
    let got: Value = serde_json::from_str(&got).unwrap();
    assert_eq!(
        (&got["state"], &got["exit_code"]),
        (&Value::from("failed"), &Value::from(3))
    );
    krayne
        .run(&["rayjob", "delete", "run-three", "-n", "ml-team"])
        .await
        .code(0);
    krayne
        .run(&["rayjob", "get", "run-three", "-n", "ml-team"])
        .await
        .code(3);
}

#[tokio::test]
async fn a_pipeline_runs_a_job_on_its_own_cluster_through_the_sdk_and_stops_another() {
    let env = env().await;
    let client = Client::connect(env.url()).await.unwrap().with_token(env.alice());
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), &[("train.sh", "for e in 1 2; do echo epoch $e; done\n")]);
    let run = client
        .run_job(
            "ml-team",
            RunJob::new("sdk-train", "sh train.sh")
                .working_dir(dir.path())
                .cluster_yaml("worker_groups: [{name: cpu, replicas: 1}]")
                .ttl(Duration::from_secs(30)),
        )
        .await
        .unwrap();
    // The handle follows its RayJob on the server's watch, not by asking.
    let ops = env.ops();
    let watched = tokio::spawn(async move {
        for _ in 0..600 {
            let text = ops.get("/metrics").await.text;
            if krayne_tests::metric_total(&text, "krayne_watches_open") >= 1.0 {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    });
    let mut states = Vec::new();
    let started = run.started(|rj| states.push(rj.state())).await.unwrap();
    assert!(states.contains(&RunState::Submitting), "{states:?}");
    assert!(watched.await.unwrap(), "no watch was open while the run started");
    assert!(!started.cluster.is_empty());
    let mut log = String::new();
    let mut lines = std::pin::pin!(run.logs().await.unwrap());
    while let Some(chunk) = lines.next().await {
        log.push_str(&chunk.unwrap());
    }
    assert!(log.contains("epoch 1\nepoch 2"), "{log}");
    let outcome = run.wait(Duration::from_secs(60)).await.unwrap();
    assert!(outcome.succeeded(), "{:?}", outcome.rayjob);
    assert_eq!(outcome.exit_code, Some(0));

    // A run stopped from the pipeline: the RayJob and its cluster go.
    let long = client
        .run_job("ml-team", RunJob::new("sdk-long", "sleep 600"))
        .await
        .unwrap();
    let running = long.started(|_| {}).await.unwrap();
    assert_eq!(running.state(), RunState::Running);
    long.stop().await.unwrap();
    let gone = client.rayjob("ml-team", "sdk-long").await.unwrap_err();
    assert_eq!(gone.code(), krayne_client::Code::NotFound);
    let alice = env.rest(&env.alice());
    for _ in 0..100 {
        if alice
            .get(&format!("/v1/namespaces/ml-team/clusters/{}", running.cluster))
            .await
            .status
            == 404
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the stopped run's cluster stayed");
}
