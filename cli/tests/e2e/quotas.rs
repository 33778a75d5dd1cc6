//! `krayne quota`, the quota column of `krayne namespaces`, and the SDK's
//! `quota` (issue 24), against a mapping that gives `ml-team` 4 GPUs.

use krayne_client::Client;
use krayne_tests::{Env, EnvOptions, TEAMS};
use serde_json::json;

use crate::support::Krayne;

#[tokio::test]
async fn krayne_quota_shows_limits_usage_and_bars() {
    let env = Env::start_with(EnvOptions {
        teams: format!("{TEAMS}quotas:\n  ml-team: {{ gpus: 4, clusters: 10 }}\n"),
        ..EnvOptions::default()
    })
    .await;
    env.rest(&env.alice())
        .post(
            "/v1/namespaces/ml-team/clusters",
            &json!({"name": "gpu", "worker_groups": [{"name": "g", "replicas": 1, "max_replicas": 1, "gpus": 2}]}),
        )
        .await
        .expect(201);
    let krayne = Krayne::new(&env, &env.alice());
    let table = krayne.run(&["quota", "-n", "ml-team"]).await.code(0).stdout();
    assert!(table.contains("[##########..........] 2/4 gpus"), "{table}");
    assert!(table.contains("1/10 clusters"), "{table}");
    assert!(table.contains("(no limit)"), "cpus and memory: {table}");
    let data = krayne.run(&["quota", "-n", "ml-team", "-o", "json"]).await.json();
    let gpus = data["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == "gpus")
        .unwrap();
    assert_eq!(
        (gpus["used"].as_str(), gpus["remaining"].as_str()),
        (Some("2"), Some("2"))
    );
    let namespaces = krayne.run(&["namespaces"]).await.code(0).stdout();
    assert!(namespaces.contains("gpus 2/4"), "{namespaces}");

    let client = Client::connect(env.url()).await.unwrap().with_token(env.alice());
    let quota = client.quota("ml-team").await.unwrap();
    assert_eq!(quota.resources.len(), 4);
    assert_eq!(quota.resources[3].used_fraction, Some(0.5));
    let refused = client.quota("other-team").await.unwrap_err();
    assert_eq!(refused.code(), krayne_client::Code::PermissionDenied);
}

/// `krayne keep` (issue 44): within the policy's keep_max it keeps, and
/// `describe` says until when; past it, exit 2 naming the limit; in a
/// namespace without a policy, exit 1 saying so; a bad duration never
/// reaches the server.
#[tokio::test]
async fn krayne_keep_keeps_within_the_policy_and_says_why_not() {
    let env = Env::start_with(EnvOptions {
        teams: format!("{TEAMS}lifecycle:\n  ml-team: {{ max_lifetime: 7d, keep_max: 1d }}\n"),
        ..EnvOptions::default()
    })
    .await;
    let admin = Krayne::new(&env, &env.admin());
    let k = Krayne::new(&env, &env.alice());
    k.run(&["create", "kept", "-n", "ml-team", "--no-wait"]).await.code(0);
    let kept = k
        .run(&["keep", "kept", "-n", "ml-team", "--for", "4h", "-o", "json"])
        .await
        .code(0);
    assert!(kept.stderr().contains("kept until"), "{}", kept.stderr());
    let until = kept.json()["kept_until"].as_str().unwrap_or_default().to_owned();
    assert!(until.ends_with('Z'), "{until}");
    let described = k.run(&["describe", "kept", "-n", "ml-team"]).await.code(0);
    assert!(
        described.stdout().contains("Kept until") && described.stdout().contains(&until),
        "{}",
        described.stdout()
    );
    let too_long = k.run(&["keep", "kept", "-n", "ml-team", "--for", "3d"]).await.code(2);
    assert!(too_long.stderr().contains("longest keep"), "{}", too_long.stderr());
    let bad = k.run(&["keep", "kept", "-n", "ml-team", "--for", "soon"]).await.code(2);
    assert!(bad.stderr().contains("try 30m"), "{}", bad.stderr());
    let neither = k.run(&["keep", "kept", "-n", "ml-team"]).await.code(2);
    assert!(neither.stderr().contains("--for"), "{}", neither.stderr());
    admin
        .run(&["create", "elsewhere", "-n", "other-team", "--no-wait"])
        .await
        .code(0);
    let no_policy = admin
        .run(&["keep", "elsewhere", "-n", "other-team", "--for", "1h"])
        .await
        .code(1);
    assert!(
        no_policy.stderr().contains("no lifecycle policy"),
        "{}",
        no_policy.stderr()
    );
}

/// `krayne create --queue --wait` (issue 61): past the quota it waits in
/// line, printing its place, and once a delete frees the quota it waits
/// on until ready; `krayne get` shows the place meanwhile.
#[tokio::test]
async fn create_queue_wait_waits_through_the_line_then_until_ready() {
    let env = Env::start_with(EnvOptions {
        teams: format!("{TEAMS}quotas:\n  ml-team: {{ clusters: 1 }}\n"),
        ..EnvOptions::default()
    })
    .await;
    let k = Krayne::new(&env, &env.alice());
    k.run(&["create", "first", "-n", "ml-team"]).await.code(0);
    let refused = k.run(&["create", "second", "-n", "ml-team", "--no-wait"]).await.code(1);
    assert!(refused.stderr().contains("quota"), "{}", refused.stderr());

    let waiting = k.run(&["create", "second", "-n", "ml-team", "--queue", "--timeout", "90s"]);
    let freeing = async {
        let rest = env.rest(&env.alice());
        loop {
            let got = rest.get("/v1/namespaces/ml-team/clusters/second").await;
            if got.status == 200 && got.body["status"] == "queued" {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        let table = k.run(&["get", "-n", "ml-team"]).await.code(0).stdout();
        assert!(table.contains("queued #1"), "{table}");
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        k.run(&["delete", "first", "-n", "ml-team", "--yes"]).await.code(0);
    };
    let (done, ()) = tokio::join!(waiting, freeing);
    let done = done.code(0);
    let stderr = done.stderr();
    assert!(
        stderr.contains("waiting in line for quota: queued, #1 in line (clusters: needs 1, 0 of 1 free)"),
        "{stderr}"
    );
    assert!(stderr.contains("is ready after"), "{stderr}");
    assert!(done.stdout().contains("ready"), "{}", done.stdout());
}

/// `krayne run --queue` (issues 60 and 61): past the quota the run waits
/// in line, printing its place, `krayne rayjobs` shows it, and once a
/// delete frees the quota its cluster is made and its job runs to its
/// exit code.
#[tokio::test]
async fn run_queue_waits_through_the_line_then_runs_to_its_exit_code() {
    let env = Env::start_with(EnvOptions {
        teams: format!("{TEAMS}quotas:\n  ml-team: {{ clusters: 1 }}\n"),
        server_args: vec!["--rayjobs-interval-seconds".into(), "1".into()],
        ..EnvOptions::default()
    })
    .await;
    let k = Krayne::new(&env, &env.alice());
    k.run(&["create", "first", "-n", "ml-team"]).await.code(0);
    let dir = tempfile::tempdir().unwrap();
    let wd = dir.path().to_str().unwrap();
    let refused = k
        .run(&[
            "run",
            "--name",
            "eager",
            "-n",
            "ml-team",
            "--working-dir",
            wd,
            "--",
            "true",
        ])
        .await
        .code(1);
    assert!(refused.stderr().contains("quota"), "{}", refused.stderr());

    let args = [
        "run",
        "--name",
        "patient",
        "-n",
        "ml-team",
        "--working-dir",
        wd,
        "--queue",
        "--",
        "sh",
        "-c",
        "echo done waiting; exit 3",
    ];
    let waiting = k.run(&args);
    let freeing = async {
        let rest = env.rest(&env.alice());
        loop {
            let got = rest.get("/v1/namespaces/ml-team/rayjobs/patient").await;
            if got.status == 200 && got.body["state"] == "queued" {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        let table = k.run(&["rayjobs", "-n", "ml-team"]).await.code(0).stdout();
        assert!(table.contains("queued #1"), "{table}");
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        k.run(&["delete", "first", "-n", "ml-team", "--yes"]).await.code(0);
    };
    let (done, ()) = tokio::join!(waiting, freeing);
    let done = done.code(3);
    let stderr = done.stderr();
    assert!(
        stderr.contains("rayjob patient: queued, #1 in line (clusters: needs 1, 0 of 1 free)"),
        "{stderr}"
    );
    assert!(stderr.contains("failed with exit code 3"), "{stderr}");
    assert!(done.stdout().contains("done waiting"), "{}", done.stdout());
}
