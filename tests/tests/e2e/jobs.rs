//! Ray jobs through krayne (issue 23), against the sandbox's Ray head
//! stand-in in both upstream modes: a working dir uploaded as a package
//! and read by the job, env vars, a failing job, logs followed as they
//! grow (chunked text and SSE), stop, delete, idempotent submission ids,
//! the package limit, roles, and Ray's quirks answered cleanly.

use std::{
    io::Write as _,
    time::{Duration, Instant},
};

use krayne_tests::{Env, EnvOptions};
use serde_json::{Value, json};

const DIRECT: &[&str] = &["--service-upstream", "direct"];
const PORT_FORWARD: &[&str] = &["--service-upstream", "port-forward"];

fn jobs_path(cluster: &str) -> String {
    format!("/v1/namespaces/ml-team/clusters/{cluster}/jobs")
}

fn package_path(cluster: &str, package: &str) -> String {
    format!("/v1/namespaces/ml-team/clusters/{cluster}/packages/{package}")
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

async fn put_package(env: &Env, token: &str, cluster: &str, package: &str, body: Vec<u8>) -> (u16, Value) {
    let response = reqwest::Client::new()
        .put(format!("{}{}", env.url(), package_path(cluster, package)))
        .bearer_auth(token)
        .header("content-type", "application/zip")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Waits (at most 30 s) until job `id` has ended; returns it.
async fn ended(env: &Env, cluster: &str, id: &str) -> Value {
    let started = Instant::now();
    loop {
        let job = env
            .rest(&env.alice())
            .get(&format!("{}/{id}", jobs_path(cluster)))
            .await
            .expect(200)
            .body;
        if ["SUCCEEDED", "FAILED", "STOPPED"].contains(&job["status"].as_str().unwrap()) {
            return job;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{job}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn a_working_dir_env_vars_and_a_failure(args: &[&str]) {
    let env = Env::start_with(EnvOptions::with_args(args)).await;
    env.ready_cluster("runs").await;
    let alice = env.rest(&env.alice());
    let package = "_ray_pkg_0123456789abcdef.zip";
    let zip = zipped(&[
        ("data/input.txt", "forty-two\n"),
        ("main.sh", "cat data/input.txt; echo \"epochs=$EPOCHS\"\n"),
    ]);
    alice.get(&package_path("runs", package)).await.expect(404);
    let (status, uploaded) = put_package(&env, &env.alice(), "runs", package, zip.clone()).await;
    assert_eq!(status, 200, "{uploaded}");
    assert_eq!(uploaded["working_dir"], format!("gcs://{package}"));
    assert_eq!(uploaded["bytes"], zip.len());
    alice.get(&package_path("runs", package)).await.expect(204);

    let submitted = alice
        .post(
            &jobs_path("runs"),
            &json!({"entrypoint": "sh main.sh", "submission_id": "wd-1",
                    "runtime_env": {"working_dir": package, "env_vars": {"EPOCHS": "3"}},
                    "metadata": {"owner": "alice"}}),
        )
        .await
        .expect(201)
        .body;
    assert_eq!(submitted["id"], "wd-1");
    assert_eq!(submitted["metadata"]["owner"], "alice");
    let job = ended(&env, "runs", "wd-1").await;
    assert_eq!(job["status"], "SUCCEEDED", "{job}");
    assert_eq!(job["driver_exit_code"], 0);
    let logs = alice.get(&format!("{}/wd-1/logs", jobs_path("runs"))).await.expect(200);
    assert!(
        logs.text.contains("forty-two") && logs.text.contains("epochs=3"),
        "{}",
        logs.text
    );

    // The same submission id again: the first job, not a second.
    let again = alice
        .post(
            &jobs_path("runs"),
            &json!({"entrypoint": "echo other", "submission_id": "wd-1"}),
        )
        .await
        .expect(200)
        .body;
    assert_eq!(again["entrypoint"], "sh main.sh");

    let failing = alice
        .post(&jobs_path("runs"), &json!({"entrypoint": "echo about-to-fail; exit 3"}))
        .await
        .expect(201)
        .body;
    let id = failing["id"].as_str().unwrap();
    assert!(id.starts_with("raysubmit_"), "{id}");
    let failed = ended(&env, "runs", id).await;
    assert_eq!(failed["status"], "FAILED");
    assert_eq!(failed["driver_exit_code"], 3);
    assert_eq!(failed["error_type"], "JOB_ENTRYPOINT_COMMAND_ERROR");
    assert!(failed["message"].as_str().unwrap().contains("exit code 3"), "{failed}");

    let listed = alice.get(&jobs_path("runs")).await.expect(200).body;
    let ids: Vec<&str> = listed["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"wd-1") && ids.contains(&id), "{ids:?}");

    // Audited: the submission with env var names, never their values.
    let rows = env
        .rest(&env.admin())
        .get("/v1/audit?action=job.submit&cluster=runs")
        .await
        .expect(200)
        .body;
    let rows = rows["events"].as_array().unwrap();
    let first = rows
        .iter()
        .find(|r| r["request_summary"]["entrypoint"] == "sh main.sh")
        .unwrap();
    assert_eq!(first["request_summary"]["env_vars"], json!(["EPOCHS"]));
    assert_eq!(first["http_status"], 201);
    let again_row = rows
        .iter()
        .find(|r| r["request_summary"]["entrypoint"] == "echo other")
        .unwrap();
    assert_eq!(again_row["http_status"], 200, "the first job was returned");
    assert_eq!(first["request_summary"]["package"], package);
    assert!(!first.to_string().contains("\"3\""), "{first}");
    let uploads = env
        .rest(&env.admin())
        .get("/v1/audit?action=package.upload&cluster=runs")
        .await
        .expect(200)
        .body;
    assert_eq!(uploads["events"][0]["request_summary"]["package"], package);
}

#[tokio::test]
async fn a_job_runs_in_its_working_dir_through_port_forward() {
    a_working_dir_env_vars_and_a_failure(PORT_FORWARD).await;
}

#[tokio::test]
async fn a_job_runs_in_its_working_dir_direct() {
    a_working_dir_env_vars_and_a_failure(DIRECT).await;
}

#[tokio::test]
async fn logs_follow_as_they_grow_and_a_long_job_stops() {
    let env = Env::start().await;
    env.ready_cluster("follow").await;
    let alice = env.rest(&env.alice());
    alice
        .post(
            &jobs_path("follow"),
            &json!({"entrypoint": "for i in 1 2 3 4; do echo line$i; sleep 1; done", "submission_id": "slow"}),
        )
        .await
        .expect(201);
    let response = reqwest::Client::new()
        .get(format!("{}{}/slow/logs?follow=true", env.url(), jobs_path("follow")))
        .bearer_auth(env.alice())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut response = response;
    let mut seen = String::new();
    let mut status_when_line1 = None;
    while let Some(chunk) = tokio::time::timeout(Duration::from_secs(20), response.chunk())
        .await
        .unwrap()
        .unwrap()
    {
        seen.push_str(&String::from_utf8_lossy(&chunk));
        if status_when_line1.is_none() && seen.contains("line1") {
            let job = alice
                .get(&format!("{}/slow", jobs_path("follow")))
                .await
                .expect(200)
                .body;
            status_when_line1 = Some(job["status"].as_str().unwrap().to_owned());
        }
    }
    assert_eq!(
        status_when_line1.as_deref(),
        Some("RUNNING"),
        "lines arrive before it ends"
    );
    assert!(seen.contains("line4"), "{seen}");
    assert_eq!(ended(&env, "follow", "slow").await["status"], "SUCCEEDED");

    // Server-Sent Events for a browser.
    let events = reqwest::Client::new()
        .get(format!("{}{}/slow/logs?follow=true", env.url(), jobs_path("follow")))
        .bearer_auth(env.alice())
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert!(
        events.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let text = tokio::time::timeout(Duration::from_secs(20), events.text())
        .await
        .unwrap()
        .unwrap();
    assert!(text.contains("event: log\ndata: ") && text.contains("line4"), "{text}");
    assert!(text.contains("event: end"), "{text}");

    // A long job: deleting it while it runs is refused, stopping works,
    // then it can be deleted.
    alice
        .post(
            &jobs_path("follow"),
            &json!({"entrypoint": "sleep 60", "submission_id": "long"}),
        )
        .await
        .expect(201);
    let refused = alice.delete(&format!("{}/long", jobs_path("follow"))).await.expect(409);
    assert!(refused.text.contains("stop it first"), "{}", refused.text);
    let stopped = alice
        .post(&format!("{}/long/stop", jobs_path("follow")), &json!({}))
        .await
        .expect(200)
        .body;
    assert_eq!(stopped["stopped"], true);
    assert_eq!(ended(&env, "follow", "long").await["status"], "STOPPED");
    let again = alice
        .post(&format!("{}/long/stop", jobs_path("follow")), &json!({}))
        .await
        .expect(200)
        .body;
    assert_eq!(again["stopped"], false, "stopping an ended job is not an error");
    alice.delete(&format!("{}/long", jobs_path("follow"))).await.expect(204);
    alice.get(&format!("{}/long", jobs_path("follow"))).await.expect(404);
    tokio::time::sleep(Duration::from_secs(2)).await;
    alice.get(&format!("{}/long", jobs_path("follow"))).await.expect(404);
    let kinds: Vec<String> = env
        .rest(&env.admin())
        .get("/v1/audit?cluster=follow")
        .await
        .expect(200)
        .body["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| format!("{} {}", r["action"].as_str().unwrap(), r["outcome"].as_str().unwrap()))
        .collect();
    for expected in ["job.stop succeeded", "job.delete succeeded", "job.delete failed"] {
        assert!(kinds.iter().any(|k| k == expected), "{expected} in {kinds:?}");
    }
}

#[tokio::test]
async fn packages_over_the_limit_roles_and_bad_input_are_refused_before_the_head() {
    let env = Env::start().await;
    env.ready_cluster("guarded").await;
    let package = "_ray_pkg_fedcba9876543210.zip";
    // Declared over the limit: refused from the headers, before a byte of
    // the body is read (or the head sees anything).
    let declared = format!(
        "PUT {} HTTP/1.1\r\nHost: krayne\r\nAuthorization: Bearer {}\r\nContent-Length: {}",
        package_path("guarded", package),
        env.alice(),
        101 * 1024 * 1024
    );
    let mut early = krayne_tests::raw::Http1::send(env.server.api, &declared, b"").await;
    let (answer, _) = early.answer(Duration::from_secs(10)).await.expect("an answer");
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    // Streamed without a length (chunked): cut when it passes the limit.
    let head = format!(
        "PUT {} HTTP/1.1\r\nHost: krayne\r\nAuthorization: Bearer {}\r\nTransfer-Encoding: chunked",
        package_path("guarded", package),
        env.alice()
    );
    let mut chunked = Vec::new();
    for _ in 0..101 {
        chunked.extend_from_slice(b"100000\r\n");
        chunked.extend_from_slice(&vec![0u8; 1024 * 1024]);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    let mut streamed = krayne_tests::raw::Http1::send(env.server.api, &head, &chunked).await;
    let (answer, _) = streamed.answer(Duration::from_secs(30)).await.expect("an answer");
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    let alice = env.rest(&env.alice());
    alice.get(&package_path("guarded", package)).await.expect(404);
    alice.get(&package_path("guarded", "evil.zip")).await.expect(400);

    let invalid = alice
        .post(
            &jobs_path("guarded"),
            &json!({"entrypoint": "", "submission_id": "a/b", "runtime_env": {"working_dir": "s3://x"}}),
        )
        .await
        .expect(400);
    for field in ["entrypoint", "submission_id", "runtime_env.working_dir"] {
        assert!(invalid.text.contains(field), "{field}: {}", invalid.text);
    }
    alice
        .post(&jobs_path("guarded"), &json!({"entrypoint": "x", "bogus": 1}))
        .await
        .expect(400);
    alice.get(&format!("{}/nope", jobs_path("guarded"))).await.expect(404);

    // Another team: as for clusters.
    let other = env.rest(&env.token("bob@example.com", &["other-team"]));
    other.get(&jobs_path("guarded")).await.expect(403);
    other
        .post(&jobs_path("guarded"), &json!({"entrypoint": "id"}))
        .await
        .expect(403);

    // A viewer reads jobs and logs but submits nothing.
    let admin = env.rest(&env.admin());
    admin
        .post("/v1/namespaces/shared-data/clusters", &json!({"name": "viewed"}))
        .await
        .expect(201);
    admin
        .get("/v1/namespaces/shared-data/clusters/viewed/wait?timeout_seconds=60")
        .await
        .expect(200);
    let viewed = "/v1/namespaces/shared-data/clusters/viewed/jobs";
    admin
        .post(
            viewed,
            &json!({"entrypoint": "echo for viewers", "submission_id": "v1"}),
        )
        .await
        .expect(201);
    alice.get(viewed).await.expect(200);
    alice.get(&format!("{viewed}/v1/logs")).await.expect(200);
    alice.post(viewed, &json!({"entrypoint": "id"})).await.expect(403);
    alice.post(&format!("{viewed}/v1/stop"), &json!({})).await.expect(403);
    alice.delete(&format!("{viewed}/v1")).await.expect(403);

    // A cluster that is not ready, in Krayne's words.
    alice
        .post("/v1/namespaces/ml-team/clusters", &json!({"name": "young"}))
        .await
        .expect(201);
    let early = alice.get(&jobs_path("young")).await;
    if early.status == 409 {
        assert!(
            early.text.contains("cluster 'young' is not ready (status: "),
            "{}",
            early.text
        );
    }
}
