//! Ray's Jobs REST API on the dashboard stand-in, checked against what a
//! real Ray 2.60 head answers (`shared/reference/ray/jobs-api.md`): status
//! codes, bodies, content types, statuses and their transitions, logs
//! (whole and tailed over WebSocket), packages, and Ray's guard against
//! browsers.

use std::{io::Write as _, time::Duration};

use futures::StreamExt as _;
use kube::{Api, api::DeleteParams};
use reqwest::{Client, Response, StatusCode};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::{Message, protocol::frame::coding::CloseCode};

use crate::{
    eventually,
    standins::{head, running_head},
    start,
};

/// A client as Ray's `JobSubmissionClient` is (python-requests' agent).
fn ray_client() -> Client {
    Client::builder().user_agent("python-requests/2.34.2").build().unwrap()
}

async fn body(response: Response) -> (StatusCode, String, String) {
    let status = response.status();
    let kind = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, kind, response.text().await.unwrap())
}

async fn get_json(http: &Client, url: &str) -> Value {
    let (status, kind, text) = body(http.get(url).send().await.unwrap()).await;
    assert_eq!(
        (status, kind.as_str()),
        (StatusCode::OK, "application/json; charset=utf-8"),
        "{text}"
    );
    serde_json::from_str(&text).unwrap()
}

async fn submit(http: &Client, base: &str, job: Value) -> Value {
    let (status, _, text) = body(http.post(format!("{base}/api/jobs/")).json(&job).send().await.unwrap()).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    serde_json::from_str(&text).unwrap()
}

/// The job once its status is terminal.
async fn finished(http: &Client, base: &str, id: &str) -> Value {
    let url = format!("{base}/api/jobs/{id}");
    eventually(&format!("job {id} to end"), || {
        let url = url.clone();
        async move {
            let job = get_json(http, &url).await;
            ["SUCCEEDED", "FAILED", "STOPPED"]
                .contains(&job["status"].as_str().unwrap())
                .then_some(job)
        }
    })
    .await
}

/// A stored zip holding `files`, as Ray's client packs a working dir.
fn zip_of(files: &[(&str, &str)]) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    let mut w = zip::ZipWriter::new(&mut out);
    let opts = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for (name, text) in files {
        w.start_file(*name, opts).unwrap();
        w.write_all(text.as_bytes()).unwrap();
    }
    w.finish().unwrap();
    out.into_inner()
}

async fn dashboard(name: &str) -> (crate::Sandbox, kube::Client, String) {
    let (sb, client) = start().await;
    let (_, ip) = running_head(&client, name).await;
    let base = format!("http://{ip}:8265");
    eventually("the dashboard to answer", || {
        let url = format!("{base}/api/version");
        async move { ray_client().get(url).send().await.ok() }
    })
    .await;
    (sb, client, base)
}

#[tokio::test]
async fn a_job_reads_its_uploaded_working_dir_and_its_env_vars() {
    let (_sb, _client, base) = dashboard("jobs-wd").await;
    let http = ray_client();
    let package = format!("{base}/api/packages/gcs/_ray_pkg_6bb64f4d946aae18.zip");

    let (status, kind, text) = body(http.get(&package).send().await.unwrap()).await;
    assert_eq!(
        (status, kind.as_str(), text.as_str()),
        (
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "Package gcs://_ray_pkg_6bb64f4d946aae18.zip does not exist"
        )
    );
    // Ray's client sends the raw zip with no Content-Type.
    let zip = zip_of(&[("data.txt", "from the working dir\n"), ("pkg/inner.txt", "nested\n")]);
    let put = http.put(&package).body(zip).send().await.unwrap();
    assert_eq!(put.status(), StatusCode::OK);
    assert_eq!(put.text().await.unwrap(), "");
    let (status, _, text) = body(http.get(&package).send().await.unwrap()).await;
    assert_eq!((status, text.as_str()), (StatusCode::OK, ""));

    let raw = http
        .post(format!("{base}/api/jobs/"))
        .json(&json!({
            "entrypoint": "cat data.txt pkg/inner.txt; echo \"A=$A B=$B\"",
            "submission_id": "wd-1",
            "runtime_env": {
                "working_dir": "gcs://_ray_pkg_6bb64f4d946aae18.zip",
                "env_vars": {"A": "1", "B": "two words"},
            },
            "metadata": {"k": "v"},
            "entrypoint_num_cpus": 0.5,
        }))
        .send()
        .await
        .unwrap();
    let (status, kind, text) = body(raw).await;
    assert_eq!(
        (status, kind.as_str(), text.as_str()),
        (
            StatusCode::OK,
            "application/json; charset=utf-8",
            r#"{"job_id": "wd-1", "submission_id": "wd-1"}"#
        )
    );

    let job = finished(&http, &base, "wd-1").await;
    assert_eq!(job["status"], "SUCCEEDED", "{job}");
    assert_eq!(job["message"], "Job finished successfully.");
    assert_eq!(
        (job["driver_exit_code"].as_i64(), job["error_type"].is_null()),
        (Some(0), true)
    );
    assert_eq!(
        (job["type"].as_str(), job["job_id"].is_null()),
        (Some("SUBMISSION"), true)
    );
    assert_eq!(job["metadata"], json!({"k": "v"}));
    assert_eq!(job["runtime_env"]["env_vars"]["B"], "two words");
    let (start, end) = (job["start_time"].as_i64().unwrap(), job["end_time"].as_i64().unwrap());
    assert!(
        start > 1_700_000_000_000 && start <= end,
        "epoch milliseconds: {start}, {end}"
    );
    assert!(job["driver_agent_http_address"].as_str().unwrap().ends_with(":52365"));
    assert_eq!(job["driver_node_id"].as_str().unwrap().len(), 56);

    let logs = get_json(&http, &format!("{base}/api/jobs/wd-1/logs")).await;
    let logs = logs["logs"].as_str().unwrap();
    assert!(logs.contains("Running entrypoint for job wd-1: cat data.txt"), "{logs}");
    assert!(
        logs.contains("from the working dir\nnested\nA=1 B=two words\n"),
        "{logs}"
    );

    let (status, _, text) = body(
        http.post(format!("{base}/api/jobs/"))
            .json(&json!({"entrypoint": "true", "submission_id": "wd-1"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(
        text.starts_with("Traceback (most recent call last):")
            && text.trim_end().ends_with(
                "ValueError: Job with submission_id wd-1 already exists. Please use a different submission_id."
            ),
        "{text}"
    );
}

#[tokio::test]
async fn exit_code_3_fails_the_job_with_the_code_and_the_last_lines() {
    let (_sb, _client, base) = dashboard("jobs-exit").await;
    let http = ray_client();
    let reply = submit(
        &http,
        &base,
        json!({"entrypoint": "echo about-to-fail; exit 3", "metadata": {}}),
    )
    .await;
    let id = reply["submission_id"].as_str().unwrap();
    assert!(id.starts_with("raysubmit_") && reply["job_id"] == id, "{reply}");

    let job = finished(&http, &base, id).await;
    assert_eq!(
        (job["status"].as_str(), job["driver_exit_code"].as_i64()),
        (Some("FAILED"), Some(3))
    );
    assert_eq!(job["error_type"], "JOB_ENTRYPOINT_COMMAND_ERROR");
    let message = job["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "Job entrypoint command failed with exit code 3, last available logs (truncated to 20,000 chars):\n"
        ) && message.contains("about-to-fail"),
        "{message}"
    );
}

#[tokio::test]
async fn a_stopped_job_is_stopped_within_two_seconds_and_only_terminal_jobs_delete() {
    let (_sb, _client, base) = dashboard("jobs-stop").await;
    let http = ray_client();
    submit(
        &http,
        &base,
        json!({"entrypoint": "sleep 60", "submission_id": "sleeper"}),
    )
    .await;
    let url = format!("{base}/api/jobs/sleeper");
    eventually("the job to run", || async {
        (get_json(&http, &url).await["status"] == "RUNNING").then_some(())
    })
    .await;

    let (status, _, text) = body(http.delete(&url).send().await.unwrap()).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(
        text.trim_end()
            .ends_with("RuntimeError: Attempted to delete job 'sleeper', but it is in a non-terminal state RUNNING."),
        "{text}"
    );

    let asked = std::time::Instant::now();
    let (status, _, text) = body(http.post(format!("{url}/stop")).send().await.unwrap()).await;
    assert_eq!((status, text.as_str()), (StatusCode::OK, r#"{"stopped": true}"#));
    let job = finished(&http, &base, "sleeper").await;
    assert!(
        asked.elapsed() < Duration::from_secs(2),
        "stopped after {:?}",
        asked.elapsed()
    );
    assert_eq!(job["status"], "STOPPED");
    assert_eq!(job["message"], "Job was intentionally stopped.");
    assert!(
        job["driver_exit_code"].is_null() && job["error_type"].is_null(),
        "{job}"
    );

    let (_, _, text) = body(http.post(format!("{url}/stop")).send().await.unwrap()).await;
    assert_eq!(text, r#"{"stopped": false}"#, "a finished job is not stopped again");
    let (status, _, text) = body(http.delete(&url).send().await.unwrap()).await;
    assert_eq!((status, text.as_str()), (StatusCode::OK, r#"{"deleted": true}"#));
    for response in [
        http.get(&url).send().await.unwrap(),
        http.get(format!("{url}/logs")).send().await.unwrap(),
        http.post(format!("{url}/stop")).send().await.unwrap(),
        http.delete(&url).send().await.unwrap(),
    ] {
        let (status, kind, text) = body(response).await;
        assert_eq!(
            (status, kind.as_str(), text.as_str()),
            (
                StatusCode::NOT_FOUND,
                "text/plain; charset=utf-8",
                "Job sleeper does not exist"
            )
        );
    }
    submit(&http, &base, json!({"entrypoint": "true", "submission_id": "sleeper"})).await;
}

#[tokio::test]
async fn logs_come_whole_and_tailed_over_a_websocket_that_closes_normally() {
    let (_sb, _client, base) = dashboard("jobs-tail").await;
    let http = ray_client();
    submit(
        &http,
        &base,
        json!({"entrypoint": "for i in 1 2 3 4; do echo line$i; sleep 0.2; done", "submission_id": "tail-1"}),
    )
    .await;
    let ws_url = format!("{}/api/jobs/tail-1/logs/tail", base.replacen("http", "ws", 1));
    let (mut socket, _) = tokio_tungstenite::connect_async(&ws_url).await.unwrap();
    let mut tailed = String::new();
    let close = loop {
        match tokio::time::timeout(Duration::from_secs(10), socket.next())
            .await
            .expect("a frame")
        {
            Some(Ok(Message::Text(t))) => tailed.push_str(&t),
            Some(Ok(Message::Close(frame))) => break frame,
            Some(Ok(other)) => panic!("only text frames and a close: {other:?}"),
            Some(Err(e)) => panic!("{e}"),
            None => panic!("the stream ended without a close frame"),
        }
    };
    assert_eq!(close.map(|f| f.code), Some(CloseCode::Normal));
    assert!(tailed.contains("line1\nline2\nline3\nline4\n"), "{tailed}");

    let logs = get_json(&http, &format!("{base}/api/jobs/tail-1/logs")).await;
    assert_eq!(logs["logs"].as_str().unwrap(), tailed, "the tail is the whole log");

    let (status, _, text) = body(
        http.get(format!("{base}/api/jobs/nope/logs/tail"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, text.as_str()),
        (StatusCode::NOT_FOUND, "Job nope does not exist")
    );
}

#[tokio::test]
async fn lists_errors_and_the_browser_guard_are_rays() {
    let (_sb, _client, base) = dashboard("jobs-misc").await;
    let http = ray_client();
    assert_eq!(get_json(&http, &format!("{base}/api/jobs/")).await, json!([]));
    for id in ["first", "second"] {
        submit(
            &http,
            &base,
            json!({"entrypoint": "true", "submission_id": id, "runtime_env": {"env_vars": {"TOKEN": "s3cret"}}}),
        )
        .await;
    }
    let list = get_json(&http, &format!("{base}/api/jobs/")).await;
    let ids: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["submission_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["first", "second"]);

    let (status, kind, text) = body(http.get(format!("{base}/api/jobs")).send().await.unwrap()).await;
    assert_eq!(
        (status, kind.as_str(), text.as_str()),
        (StatusCode::NOT_FOUND, "text/plain; charset=utf-8", "404: Not Found"),
        "no trailing slash, no route"
    );
    let (status, _, text) = body(
        http.post(format!("{base}/api/jobs/"))
            .json(&json!({"entrypoint": "true", "bogus": 1}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        text.trim_end()
            .ends_with("TypeError: JobSubmitRequest.__init__() got an unexpected keyword argument 'bogus'"),
        "{text}"
    );
    let not_json = http.post(format!("{base}/api/jobs/")).body("{").send().await.unwrap();
    assert_eq!(not_json.status(), StatusCode::INTERNAL_SERVER_ERROR);

    let browser = Client::builder()
        .user_agent("Mozilla/5.0 (X11; Linux x86_64) Chrome/156")
        .build()
        .unwrap();
    let (status, _, text) = body(
        browser
            .post(format!("{base}/api/jobs/"))
            .json(&json!({"entrypoint": "true"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, text.as_str()),
        (
            StatusCode::METHOD_NOT_ALLOWED,
            "'POST' method not allowed for browser traffic."
        )
    );
    let refused = http
        .delete(format!("{base}/api/jobs/first"))
        .header("origin", "http://portal.example")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::METHOD_NOT_ALLOWED);
    let seen = get_json(&browser, &format!("{base}/api/jobs/first")).await;
    assert_eq!(seen["runtime_env"]["env_vars"]["TOKEN"], "<redacted>");
    let seen = get_json(&http, &format!("{base}/api/jobs/first")).await;
    assert_eq!(seen["runtime_env"]["env_vars"]["TOKEN"], "s3cret");

    let (status, _, text) = body(
        http.put(format!("{base}/api/packages/s3/x.zip"))
            .body("x")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(
        text.contains("upload_package_to_gcs should not be called with a remote path."),
        "{text}"
    );

    submit(
        &http,
        &base,
        json!({"entrypoint": "true", "submission_id": "no-pkg", "runtime_env": {"working_dir": "gcs://_ray_pkg_missing.zip"}}),
    )
    .await;
    let job = finished(&http, &base, "no-pkg").await;
    assert_eq!(
        (job["status"].as_str(), job["error_type"].as_str()),
        (Some("FAILED"), Some("RUNTIME_ENV_SETUP_FAILURE"))
    );
    assert!(
        job["message"]
            .as_str()
            .unwrap()
            .starts_with("runtime_env setup failed:"),
        "{job}"
    );
    assert_eq!(
        get_json(&http, &format!("{base}/api/jobs/no-pkg/logs")).await,
        json!({"logs": ""})
    );
}

#[tokio::test]
async fn a_jobs_processes_end_with_its_head_pod() {
    let (_sb, client, base) = dashboard("jobs-head-gone").await;
    let http = ray_client();
    let (_dir, pid) = job_with_a_child(&http, &base, "orphan?", "").await;
    assert!(is_alive(pid));

    let (pod, _) = head(&client, "jobs-head-gone", None).await;
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), "ml");
    pods.delete(&pod, &DeleteParams::default()).await.unwrap();
    eventually("the job's child to be killed", || async move {
        (!is_alive(pid)).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_job_ignoring_sigterm_is_killed_three_seconds_after_the_stop() {
    let (_sb, _client, base) = dashboard("jobs-stubborn").await;
    let http = ray_client();
    let (_dir, pid) = job_with_a_child(&http, &base, "stubborn", "trap '' TERM; ").await;
    let url = format!("{base}/api/jobs/stubborn");
    let (_, _, text) = body(http.post(format!("{url}/stop")).send().await.unwrap()).await;
    assert_eq!(text, r#"{"stopped": true}"#);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(get_json(&http, &url).await["status"], "RUNNING", "SIGTERM is ignored");
    assert!(is_alive(pid), "the child ignores SIGTERM too");
    let job = finished(&http, &base, "stubborn").await;
    assert_eq!(job["status"], "STOPPED");
    eventually(
        "the child to be killed",
        || async move { (!is_alive(pid)).then_some(()) },
    )
    .await;
}

#[tokio::test]
async fn a_job_stopped_before_it_runs_never_runs() {
    let (_sb, _client, base) = dashboard("jobs-early-stop").await;
    let http = ray_client();
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let package = format!("{base}/api/packages/gcs/_ray_pkg_00000000000000aa.zip");
    http.put(&package).body(zip_of(&[("a.txt", "a")])).send().await.unwrap();
    submit(
        &http,
        &base,
        json!({
            "entrypoint": format!("touch {}", marker.display()),
            "submission_id": "early",
            "runtime_env": {"working_dir": "gcs://_ray_pkg_00000000000000aa.zip"},
        }),
    )
    .await;
    let (_, _, text) = body(http.post(format!("{base}/api/jobs/early/stop")).send().await.unwrap()).await;
    assert_eq!(text, r#"{"stopped": true}"#);
    let job = finished(&http, &base, "early").await;
    assert_eq!(job["status"], "STOPPED");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!marker.exists(), "the entrypoint ran after its stop");
}

#[tokio::test]
async fn a_finished_jobs_tail_sends_all_of_it_in_bounded_frames() {
    let (_sb, _client, base) = dashboard("jobs-late-tail").await;
    let http = ray_client();
    let entrypoint = "head -c 50000 /dev/zero | tr '\\0' x; echo; printf tail-without-newline";
    submit(&http, &base, json!({"entrypoint": entrypoint, "submission_id": "late"})).await;
    assert_eq!(finished(&http, &base, "late").await["status"], "SUCCEEDED");
    let ws_url = format!("{}/api/jobs/late/logs/tail", base.replacen("http", "ws", 1));
    let (mut socket, _) = tokio_tungstenite::connect_async(&ws_url).await.unwrap();
    let mut frames = Vec::new();
    while let Some(message) = tokio::time::timeout(Duration::from_secs(10), socket.next())
        .await
        .unwrap()
    {
        match message.unwrap() {
            Message::Text(t) => frames.push(t.to_string()),
            Message::Close(_) => break,
            other => panic!("{other:?}"),
        }
    }
    assert!(
        frames.iter().all(|f| f.len() <= 20_000),
        "{:?}",
        frames.iter().map(String::len).collect::<Vec<_>>()
    );
    let tailed = frames.concat();
    assert!(
        tailed.ends_with(&format!("{}\ntail-without-newline", "x".repeat(50_000))),
        "{}",
        &tailed[tailed.len() - 40..]
    );
    let logs = get_json(&http, &format!("{base}/api/jobs/late/logs")).await;
    assert_eq!(logs["logs"].as_str().unwrap(), tailed);
}

#[tokio::test]
async fn a_jobs_processes_end_with_the_sandbox() {
    let (sb, _client, base) = dashboard("jobs-sandbox-gone").await;
    let http = ray_client();
    let (_dir, pid) = job_with_a_child(&http, &base, "outlive", "").await;
    sb.shutdown().await;
    eventually("the job's child to be killed", || async move {
        (!is_alive(pid)).then_some(())
    })
    .await;
}

/// Submits job `id`, `{prefix}sleep 600 & …; wait`, and returns the pid of
/// its background `sleep` once it runs (and the directory of its pid file).
async fn job_with_a_child(http: &Client, base: &str, id: &str, prefix: &str) -> (tempfile::TempDir, u32) {
    let dir = tempfile::tempdir().unwrap();
    // A sandbox run as root runs jobs as nobody, who writes here too.
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let pid_file = dir.path().join("pid");
    let entrypoint = format!("{prefix}sleep 600 & echo $! > {}; wait", pid_file.display());
    submit(http, base, json!({"entrypoint": entrypoint, "submission_id": id})).await;
    let pid = eventually("the job's child to start", || {
        let pid_file = pid_file.clone();
        async move { std::fs::read_to_string(pid_file).ok()?.trim().parse().ok() }
    })
    .await;
    (dir, pid)
}

/// Whether process `pid` runs (a zombie waiting for its reaper does not).
fn is_alive(pid: u32) -> bool {
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    !state.is_empty() && !state.contains(") Z ")
}

/// A Python with Ray's `JobSubmissionClient`: `$RAY_PYTHON`, else the
/// venv `.ci/run` makes (`~/.cache/krayne/ray-venv`); `None` (the test
/// skips) only outside CI.
#[allow(clippy::print_stderr, reason = "a skipped test says so")]
fn python_with_ray() -> Option<String> {
    let venv = std::env::var("XDG_CACHE_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|_| std::env::var("HOME").map(|h| std::path::Path::new(&h).join(".cache")))
        .map(|cache| cache.join("krayne/ray-venv/bin/python").display().to_string());
    let python = std::env::var("RAY_PYTHON").or(venv).ok();
    let has_ray = python.as_ref().is_some_and(|p| {
        std::process::Command::new(p)
            .args(["-c", "from ray.job_submission import JobSubmissionClient"])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if !has_ray {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI needs Ray's Python client in ~/.cache/krayne/ray-venv or $RAY_PYTHON (.ci/run installs it)"
        );
        eprintln!("SKIPPED: no Python with ray installed (~/.cache/krayne/ray-venv or $RAY_PYTHON)");
    }
    python.filter(|_| has_ray)
}

#[tokio::test]
async fn rays_own_job_submission_client_works_unchanged() {
    let Some(python) = python_with_ray() else { return };
    let (_sb, _client, base) = dashboard("jobs-ray-client").await;
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sandbox/ray_job_client.py");
    let run = tokio::process::Command::new(&python)
        .arg(&script)
        .arg(&base)
        .env("RAY_USAGE_STATS_ENABLED", "0")
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("the Ray client's script ends within 120 s")
        .unwrap();
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).trim_end().ends_with("ok"),
        "Ray's JobSubmissionClient failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
