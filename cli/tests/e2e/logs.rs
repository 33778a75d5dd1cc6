//! Issue 43: why did my cluster fail? `krayne logs` reads a cluster's pod
//! logs through the server (no kubeconfig), `describe` ends with the
//! head's last lines when a cluster is not ready, and only the cluster's
//! own pods, for callers with a role, can be read.

use std::time::Duration;

use krayne_tests::Env;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, BufReader};

use crate::support::Krayne;

/// Creates `name` in ml-team as another tool would, with the sandbox's
/// fault annotation: its pods crash-loop (a head command that fails).
pub(crate) async fn crash_looping(env: &Env, k: &Krayne, name: &str) {
    let mut manifest = k
        .run(&["create", name, "-n", "ml-team", "--dry-run", "-o", "json"])
        .await
        .json();
    manifest["metadata"]["annotations"] = json!({"sandbox.krayne.dev/fault": "crash-loop"});
    let manifest = krayne_tests::made_elsewhere(manifest);
    let created = reqwest::Client::new()
        .post(format!(
            "{}/apis/ray.io/v1/namespaces/ml-team/rayclusters",
            env.sandbox.url()
        ))
        .json(&manifest)
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201, "{}", created.text().await.unwrap_or_default());
}

/// Runs `args` until it exits 0, for at most 30 s; returns stdout.
async fn eventually(k: &Krayne, args: &[&str]) -> String {
    for _ in 0..300 {
        let run = k.run(args).await;
        if run.0.status.success() {
            return run.stdout();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{args:?} never succeeded: {}", k.run(args).await.stderr());
}

#[tokio::test]
async fn krayne_logs_shows_a_heads_output_and_why_it_crashed() {
    let env = Env::start().await;
    let k = Krayne::new(&env, &env.alice());
    k.run(&["create", "fine", "-n", "ml-team", "--workers", "1"])
        .await
        .code(0);

    let run = k.run(&["logs", "fine", "-n", "ml-team"]).await.code(0);
    assert!(run.stdout().contains("Ray runtime started."), "{}", run.stdout());
    assert!(run.stderr().contains("container ray-head"), "{}", run.stderr());
    let last = k
        .run(&["logs", "fine", "-n", "ml-team", "--tail", "1"])
        .await
        .code(0)
        .stdout();
    assert_eq!(last.lines().count(), 1, "{last}");
    let worker = k
        .run(&["logs", "fine", "-n", "ml-team", "--worker", "-o", "json"])
        .await
        .json();
    assert!(worker["pod"].as_str().unwrap().contains("-worker-"), "{worker}");
    assert!(
        !worker["text"].as_str().unwrap().contains("ray.init()"),
        "a worker's, not the head's: {worker}"
    );

    // No pod of another cluster, and no container a pod does not have.
    k.run(&["create", "--no-wait", "other", "-n", "ml-team"]).await.code(0);
    let other: Value = k
        .run(&["describe", "other", "-n", "ml-team", "-o", "json"])
        .await
        .json();
    let other_pod = other["pods"][0]["name"].as_str().unwrap_or("other-head-x").to_owned();
    let refused = k
        .run(&["logs", "fine", "-n", "ml-team", "--pod", &other_pod])
        .await
        .code(2);
    assert!(
        refused.stderr().contains("cluster fine has no pod"),
        "{}",
        refused.stderr()
    );
    let refused = k.run(&["logs", "fine", "-n", "ml-team", "-c", "sidecar"]).await.code(2);
    assert!(
        refused.stderr().contains("has no container \"sidecar\""),
        "{}",
        refused.stderr()
    );

    // A crash-looping head: the crashed container's output says why.
    crash_looping(&env, &k, "crashy").await;
    let previous = eventually(&k, &["logs", "crashy", "-n", "ml-team", "--previous"]).await;
    assert!(
        previous.contains("ModuleNotFoundError: No module named 'ray.scripts'"),
        "{previous}"
    );
    let described = k.run(&["describe", "crashy", "-n", "ml-team"]).await.code(0).stdout();
    assert!(
        described.contains("Head's last lines") && described.contains("ModuleNotFoundError"),
        "{described}"
    );

    // Another team's caller reads nothing; nor does a caller without a token.
    let bob = Krayne::new(&env, &env.token("bob@example.com", &["other-team"]));
    let refused = bob.run(&["logs", "fine", "-n", "ml-team"]).await.code(4);
    assert!(refused.stderr().contains("ml-team"), "{}", refused.stderr());
    let anonymous = reqwest::get(format!("{}/v1/namespaces/ml-team/clusters/fine/logs", env.url()))
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
}

#[tokio::test]
async fn a_viewer_reads_logs_over_rest_and_a_followed_log_ends_with_its_pod() {
    let env = Env::start().await;
    let admin = Krayne::new(&env, &env.admin());
    admin.run(&["create", "shared", "-n", "shared-data"]).await.code(0);
    // Alice is a viewer on shared-*: she reads, as text with the pod named.
    let read = reqwest::Client::new()
        .get(format!(
            "{}/v1/namespaces/shared-data/clusters/shared/logs?tail_lines=3",
            env.url()
        ))
        .bearer_auth(env.alice())
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), 200);
    assert!(
        read.headers()["x-krayne-pod"]
            .to_str()
            .unwrap()
            .starts_with("shared-head-")
    );
    assert_eq!(read.headers()["x-krayne-container"], "ray-head");
    assert_eq!(read.text().await.unwrap().lines().count(), 3);
    let alice = Krayne::new(&env, &env.alice());
    alice
        .run(&["delete", "shared", "-n", "shared-data", "--yes"])
        .await
        .code(4);

    // At most 8 followed logs per caller (the admin here, so that alice's
    // follow below is not held up by places still being given back): the
    // 9th is refused (429) until one ends.
    let follow_url = format!(
        "{}/v1/namespaces/shared-data/clusters/shared/logs?follow=true",
        env.url()
    );
    let http = reqwest::Client::new();
    let mut open = Vec::new();
    for _ in 0..8 {
        let answer = http.get(&follow_url).bearer_auth(env.admin()).send().await.unwrap();
        assert_eq!(answer.status(), 200);
        open.push(answer);
    }
    let ninth = http.get(&follow_url).bearer_auth(env.admin()).send().await.unwrap();
    assert_eq!(ninth.status(), 429);
    drop(open.pop());
    let again = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let answer = http.get(&follow_url).bearer_auth(env.admin()).send().await.unwrap();
            if answer.status() == 200 {
                return answer;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("a place again once one ended");
    drop((open, again));

    let mut follow = alice.spawn(&["logs", "shared", "-n", "shared-data", "-f"]);
    let mut lines = BufReader::new(follow.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("a line within 20 s")
        .unwrap()
        .unwrap_or_default();
    assert!(first.contains("Usage stats"), "{first}");
    admin
        .run(&["delete", "shared", "-n", "shared-data", "--yes"])
        .await
        .code(0);
    let status = tokio::time::timeout(Duration::from_secs(30), follow.wait())
        .await
        .expect("the follow ends when the pod does")
        .unwrap();
    assert!(status.success(), "{status}");
}

/// Ray's own log files through the head's dashboard log API, as a real
/// Ray 2.60 head answers it (the sandbox's stand-in): listed, read,
/// a missing one a 404, a job's driver log among them, every file fetched
/// into a directory.
#[tokio::test]
async fn rays_own_log_files_are_listed_read_and_downloaded() {
    let env = Env::start().await;
    env.ready_cluster("rayl").await;
    let k = Krayne::new(&env, &env.alice());
    let dir = tempfile::tempdir().unwrap();
    let wd = dir.path().join("wd");
    std::fs::create_dir(&wd).unwrap();
    let submitted = k
        .run(&[
            "submit",
            "rayl",
            "-n",
            "ml-team",
            "--working-dir",
            wd.to_str().unwrap(),
            "--submission-id",
            "driver-1",
            "--",
            "echo",
            "from-the-driver",
        ])
        .await
        .code(0);
    assert!(submitted.stdout().contains("from-the-driver"));

    let listed = k
        .run(&["logs", "rayl", "-n", "ml-team", "--ray", "-o", "json"])
        .await
        .json();
    assert_eq!(listed["node_id"].as_str().map(str::len), Some(56), "{listed}");
    assert_eq!(listed["is_head_node"], true);
    let group = |name: &str| -> Vec<String> {
        listed["groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["component"] == name)
            .map(|g| {
                g["files"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|f| f.as_str().unwrap().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert!(group("raylet").contains(&"raylet.out".to_owned()), "{listed}");
    assert_eq!(group("driver"), ["job-driver-driver-1.log"], "{listed}");

    let last = k
        .run(&[
            "logs",
            "rayl",
            "-n",
            "ml-team",
            "--ray",
            "--file",
            "gcs_server.out",
            "--tail",
            "2",
        ])
        .await
        .code(0)
        .stdout();
    assert_eq!(last.lines().count(), 2, "{last}");
    assert!(last.ends_with("Exporter initialized.\n"), "{last}");
    let driver = k
        .run(&[
            "logs",
            "rayl",
            "-n",
            "ml-team",
            "--ray",
            "--file",
            "job-driver-driver-1.log",
        ])
        .await
        .code(0)
        .stdout();
    assert!(driver.contains("from-the-driver"), "{driver}");
    let missing = k
        .run(&["logs", "rayl", "-n", "ml-team", "--ray", "--file", "nope.log"])
        .await
        .code(3);
    assert!(
        missing.stderr().contains(r#"log file "nope.log" not found"#),
        "{}",
        missing.stderr()
    );
    k.run(&["logs", "rayl", "-n", "ml-team", "--ray", "--file", "../etc/passwd"])
        .await
        .code(2);
    // Another team's caller lists and reads nothing.
    let bob = Krayne::new(&env, &env.token("bob@example.com", &["other-team"]));
    bob.run(&["logs", "rayl", "-n", "ml-team", "--ray"]).await.code(4);
    bob.run(&["logs", "rayl", "-n", "ml-team", "--ray", "--file", "raylet.out"])
        .await
        .code(4);

    // Followed: the last lines come, and the stream stays open.
    let mut follow = k.spawn(&["logs", "rayl", "-n", "ml-team", "--ray", "--file", "raylet.out", "-f"]);
    let mut lines = BufReader::new(follow.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("a line within 20 s")
        .unwrap()
        .unwrap_or_default();
    assert!(first.contains("Setting cluster ID"), "{first}");
    assert!(follow.try_wait().unwrap().is_none(), "still following");
    follow.kill().await.unwrap();

    let into = dir.path().join("logs");
    let fetched = k
        .run(&[
            "logs",
            "rayl",
            "-n",
            "ml-team",
            "--ray",
            "--download",
            into.to_str().unwrap(),
        ])
        .await
        .code(0);
    assert!(fetched.stderr().contains("wrote"), "{}", fetched.stderr());
    let node = std::fs::read_dir(&into).unwrap().next().unwrap().unwrap().path();
    let raylet = std::fs::read_to_string(node.join("raylet.out")).unwrap();
    assert!(raylet.contains("Raylet of id started"), "{raylet}");
    let driver = std::fs::read_to_string(node.join("job-driver-driver-1.log")).unwrap();
    assert!(driver.contains("from-the-driver"), "{driver}");
    assert!(!node.join("events").exists(), "directories are not files");
}

/// Reliability 29a and 29g (issue 53, items 1 and 7): what a hostile head
/// sends neither writes outside `--download`'s folder nor reaches the
/// terminal as escapes.
#[tokio::test]
async fn a_hostile_heads_names_and_escapes_stay_harmless() {
    let env = Env::start().await;
    let k = Krayne::new(&env, &env.alice());
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::create_dir(&victim).unwrap();

    // A node named by a path: refused by the server, nothing written.
    env.hostile_cluster("paths", "paths").await;
    let into = dir.path().join("into");
    let download = |cluster: &'static str| {
        let into = into.to_str().unwrap().to_owned();
        let k = &k;
        async move {
            k.run(&["logs", cluster, "-n", "ml-team", "--ray", "--download", &into])
                .await
        }
    };
    let refused = download("paths").await;
    assert_ne!(refused.0.status.code(), Some(0), "{}", refused.stderr());
    assert!(refused.stderr().contains("not a node id"), "{}", refused.stderr());

    // A real node listing files named to escape: only its own file lands,
    // under a folder named here.
    env.hostile_cluster("names", "names").await;
    let fetched = download("names").await.code(0);
    let mut written: Vec<String> = walk(dir.path())
        .into_iter()
        .map(|p| p.strip_prefix(dir.path()).unwrap().display().to_string())
        .collect();
    written.sort();
    assert_eq!(
        written,
        [
            "into/node-10.244.0.9/authorized_keys",
            "into/node-10.244.0.9/raylet.out"
        ],
        "{}",
        fetched.stderr()
    );
    assert!(std::fs::read_dir(&victim).unwrap().next().is_none());
    // Again into the same folder: refused, nothing overwritten.
    download("names").await.code(1);

    // Escapes in jobs and in a head's error text reach the terminal shown,
    // never acted on.
    env.hostile_cluster("escapes", "escapes").await;
    let listed = k.run(&["jobs", "list", "escapes", "-n", "ml-team"]).await.code(0);
    assert!(!listed.stdout().contains('\u{1b}'), "{:?}", listed.stdout());
    assert!(listed.stdout().contains("\\u{1b}]0;owned"), "{}", listed.stdout());
    let failed = k.run(&["logs", "escapes", "-n", "ml-team", "--ray"]).await;
    assert!(!failed.stderr().contains('\u{1b}'), "{:?}", failed.stderr());
}

/// Every file under `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}
