//! Ray jobs from the CLI and the SDK (issue 23): `krayne submit` packs a
//! working dir as Ray does, uploads it once, follows the log and exits by
//! the job's end; `krayne jobs …`; the SDK shares packages with Ray's own
//! `JobSubmissionClient` (one uploads, the other finds it there).

use std::{path::Path, time::Duration};

use krayne_client::{Client, SubmitJob, package::PackOptions, proto::JobStatus};
use krayne_tests::Env;

use crate::support::Krayne;

fn write(dir: &Path, files: &[(&str, &str)]) {
    for (path, contents) in files {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, contents).unwrap();
    }
}

/// `args` with `-n ml-team` after the command's name (`submit`, `jobs VERB`).
fn in_team<'a>(args: &[&'a str]) -> Vec<&'a str> {
    let at = if args.first() == Some(&"jobs") { 2 } else { 1 };
    let mut with = args.to_vec();
    with.splice(at..at, ["-n", "ml-team"]);
    with
}

async fn package_uploads(env: &Env, cluster: &str) -> usize {
    let rows = env
        .rest(&env.admin())
        .get(&format!("/v1/audit?action=package.upload&cluster={cluster}"))
        .await
        .expect(200)
        .body;
    rows["events"].as_array().map_or(0, Vec::len)
}

#[tokio::test]
async fn krayne_submit_runs_a_working_dir_follows_its_log_and_exits_by_its_end() {
    let env = Env::start().await;
    env.ready_cluster("cli-jobs").await;
    let krayne = Krayne::new(&env, &env.alice());
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        &[
            ("data/input.txt", "forty-two\n"),
            (
                "main.sh",
                "cat data/input.txt; echo \"epochs=$EPOCHS\"; for i in 1 2 3; do echo tick$i; sleep 1; done\n",
            ),
            (".gitignore", "scratch/\n"),
            ("scratch/huge.bin", "left out\n"),
        ],
    );
    let wd = dir.path().to_str().unwrap();
    let run = krayne
        .run(&in_team(&[
            "submit",
            "cli-jobs",
            "--working-dir",
            wd,
            "--env",
            "EPOCHS=3",
            "--submission-id",
            "cli-1",
            "--",
            "sh",
            "main.sh",
        ]))
        .await
        .code(0);
    let (out, err) = (run.stdout(), run.stderr());
    for line in ["forty-two", "epochs=3", "tick1", "tick3"] {
        assert!(out.contains(line), "{line} in {out}");
    }
    assert!(err.contains("uploaded") && err.contains("_ray_pkg_"), "{err}");
    assert!(err.contains("job 'cli-1' succeeded"), "{err}");
    assert_eq!(package_uploads(&env, "cli-jobs").await, 1);

    // The same dir again (Krayne's -c form): on the cluster already.
    let again = krayne
        .run(&in_team(&[
            "submit",
            "-c",
            "cli-jobs",
            "--working-dir",
            wd,
            "--no-wait",
            "--",
            "sh",
            "-c",
            "ls data",
        ]))
        .await
        .code(0);
    assert!(again.stderr().contains("on the cluster already"), "{}", again.stderr());
    let id = again.stdout().trim().to_owned();
    assert!(id.starts_with("raysubmit_"), "{id}");
    assert_eq!(package_uploads(&env, "cli-jobs").await, 1, "not uploaded twice");

    // Exit 3: the command fails with Ray's message.
    let failed = krayne
        .run(&in_team(&[
            "submit",
            "cli-jobs",
            "--working-dir",
            wd,
            "--",
            "sh",
            "-c",
            "echo about-to-fail; exit 3",
        ]))
        .await
        .code(1);
    assert!(failed.stdout().contains("about-to-fail"), "{}", failed.stdout());
    assert!(
        failed.stderr().contains("FAILED")
            && failed.stderr().contains("exit code 3 (its log is above)")
            && !failed.stderr().contains("last available logs"),
        "{}",
        failed.stderr()
    );

    let listed = krayne
        .run(&in_team(&["jobs", "list", "cli-jobs", "-o", "json"]))
        .await
        .json();
    let ids: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"cli-1") && ids.contains(&id.as_str()), "{ids:?}");
    let shown = krayne
        .run(&in_team(&["jobs", "get", "cli-jobs", "cli-1"]))
        .await
        .code(0);
    assert!(shown.stdout().contains("SUCCEEDED"), "{}", shown.stdout());
    let logs = krayne
        .run(&in_team(&["jobs", "logs", "cli-jobs", "cli-1"]))
        .await
        .code(0);
    assert!(logs.stdout().contains("forty-two"), "{}", logs.stdout());
    let followed = krayne
        .run(&in_team(&["jobs", "logs", "cli-jobs", "cli-1", "-f"]))
        .await
        .code(0);
    assert!(followed.stdout().contains("tick3"), "{}", followed.stdout());

    // A long job: stopped, then deleted.
    krayne
        .run(&in_team(&[
            "submit",
            "cli-jobs",
            "--working-dir",
            wd,
            "--no-wait",
            "--submission-id",
            "long-1",
            "--",
            "sleep",
            "60",
        ]))
        .await
        .code(0);
    let refused = krayne
        .run(&in_team(&["jobs", "delete", "cli-jobs", "long-1"]))
        .await
        .code(1);
    assert!(refused.stderr().contains("stop it first"), "{}", refused.stderr());
    let stopped = krayne
        .run(&in_team(&["jobs", "stop", "cli-jobs", "long-1"]))
        .await
        .code(0);
    assert!(stopped.stderr().contains("stopping"), "{}", stopped.stderr());
    let client = Client::connect(env.url()).await.unwrap().with_token(env.alice());
    let ended = client
        .wait_job("ml-team", "cli-jobs", "long-1", Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(ended.status(), JobStatus::Stopped);
    krayne
        .run(&in_team(&["jobs", "delete", "cli-jobs", "long-1"]))
        .await
        .code(0);
    krayne
        .run(&in_team(&["jobs", "get", "cli-jobs", "long-1"]))
        .await
        .code(3);

    // Krayne's messages for bad input; nothing sent.
    let missing = krayne
        .run(&in_team(&["submit", "cli-jobs", "--working-dir", wd]))
        .await
        .code(2);
    assert!(
        missing
            .stderr()
            .contains("Missing entrypoint. Pass the command to run on the cluster after --"),
        "{}",
        missing.stderr()
    );
    let nowhere = krayne
        .run(&in_team(&[
            "submit",
            "cli-jobs",
            "--working-dir",
            "/no/such/dir",
            "--",
            "true",
        ]))
        .await
        .code(2);
    assert!(
        nowhere.stderr().contains("Working directory not found: /no/such/dir"),
        "{}",
        nowhere.stderr()
    );
    let big = tempfile::tempdir().unwrap();
    std::fs::File::create(big.path().join("weights.bin"))
        .unwrap()
        .set_len(101 * 1024 * 1024)
        .unwrap();
    let too_big = krayne
        .run(&in_team(&[
            "submit",
            "cli-jobs",
            "--working-dir",
            big.path().to_str().unwrap(),
            "--",
            "true",
        ]))
        .await
        .code(2);
    assert!(too_big.stderr().contains("limited to 100 MiB"), "{}", too_big.stderr());
    assert_eq!(package_uploads(&env, "cli-jobs").await, 1, "nothing sent");

    // Not ready yet: Krayne's words.
    env.rest(&env.alice())
        .post("/v1/namespaces/ml-team/clusters", &serde_json::json!({"name": "young"}))
        .await
        .expect(201);
    let early = krayne
        .run(&in_team(&["submit", "young", "--working-dir", wd, "--", "true"]))
        .await;
    if !early.stderr().contains("submitted") {
        assert!(
            early.stderr().contains("Cluster 'young' is not ready (status: "),
            "{}",
            early.stderr()
        );
    }
}

/// A Python with Ray's `JobSubmissionClient` (as the sandbox's tests find
/// it): `$RAY_PYTHON`, else the venv `.ci/run` makes; `None` (the test
/// skips) only outside CI.
#[expect(clippy::print_stderr, reason = "a skipped test says so")]
fn python_with_ray() -> Option<String> {
    let venv = std::env::var("XDG_CACHE_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|_| std::env::var("HOME").map(|h| Path::new(&h).join(".cache")))
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
            "CI needs Ray's Python client (.ci/run installs it)"
        );
        eprintln!("SKIPPED: no Python with ray installed");
    }
    python.filter(|_| has_ray)
}

const RAY_SUBMIT: &str = r#"
import sys
from ray.job_submission import JobSubmissionClient
address, token, working_dir, entrypoint = sys.argv[1:5]
client = JobSubmissionClient(address, headers={"Authorization": "Bearer " + token})
sid = client.submit_job(entrypoint=entrypoint, runtime_env={"working_dir": working_dir})
print(client.get_job_info(sid).runtime_env["working_dir"])
"#;

#[tokio::test]
async fn the_sdk_and_rays_own_client_share_working_dir_packages() {
    let Some(python) = python_with_ray() else { return };
    let env = Env::start().await;
    env.ready_cluster("shared-pkg").await;
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        &[
            ("data/input.txt", "from ray\n"),
            (".rayignore", "notes.txt\n"),
            ("notes.txt", "x\n"),
            ("__pycache__/m.pyc", "c"),
        ],
    );
    // Ray's client, through krayne's proxy with a bearer token, uploads.
    let address = format!(
        "{}/v1/namespaces/ml-team/clusters/shared-pkg/services/dashboard/proxy",
        env.url()
    );
    let ray = tokio::process::Command::new(&python)
        .args([
            "-c",
            RAY_SUBMIT,
            &address,
            &env.alice(),
            dir.path().to_str().unwrap(),
            "cat data/input.txt",
        ])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&ray.stderr);
    assert!(ray.status.success(), "{stderr}");
    let uri = String::from_utf8_lossy(&ray.stdout).trim().to_owned();
    assert!(uri.starts_with("gcs://_ray_pkg_"), "{uri}: {stderr}");

    // The SDK names the dir the same and finds it there.
    let client = Client::connect(env.url()).await.unwrap().with_token(env.alice());
    let (package, uploaded) = client
        .upload_working_dir("ml-team", "shared-pkg", dir.path(), &PackOptions::default(), |_, _| {})
        .await
        .unwrap();
    assert_eq!(format!("gcs://{package}"), uri);
    assert!(!uploaded, "Ray's upload is reused");
    let submitted = client
        .submit_job(
            "ml-team",
            "shared-pkg",
            SubmitJob::new("cat data/input.txt").working_dir(dir.path()),
        )
        .await
        .unwrap();
    assert!(!submitted.uploaded);
    let job = client
        .wait_job("ml-team", "shared-pkg", &submitted.job.id, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(job.status(), JobStatus::Succeeded, "{job:?}");
    let logs = client.job_logs("ml-team", "shared-pkg", &job.id).await.unwrap();
    assert!(logs.contains("from ray"), "{logs}");
}

#[tokio::test]
async fn ctrl_c_stops_following_not_the_job_and_says_how_to_stop_it() {
    use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, BufReader};
    let env = Env::start().await;
    env.ready_cluster("interrupted").await;
    let krayne = Krayne::new(&env, &env.alice());
    let dir = tempfile::tempdir().unwrap();
    let mut child = krayne.spawn(&in_team(&[
        "submit",
        "interrupted",
        "--working-dir",
        dir.path().to_str().unwrap(),
        "--submission-id",
        "keeps-going",
        "--",
        "sh",
        "-c",
        "echo started; sleep 60",
    ]));
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let line = stdout.next_line().await.unwrap().expect("a line before the job ends");
            if line.contains("started") {
                return line;
            }
        }
    })
    .await
    .expect("the job's output while it runs");
    assert!(first.contains("started"));
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id().unwrap()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("krayne exits on Ctrl-C")
        .unwrap();
    assert_eq!(status.code(), Some(130), "an interrupt, as the shell reports one");
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).await.unwrap();
    assert!(
        stderr.contains("keeps running") && stderr.contains("krayne jobs stop interrupted keeps-going -n ml-team"),
        "{stderr}"
    );
    let client = Client::connect(env.url()).await.unwrap().with_token(env.alice());
    let job = client.job("ml-team", "interrupted", "keeps-going").await.unwrap();
    assert_eq!(job.status(), JobStatus::Running, "the job was not stopped");
    client.stop_job("ml-team", "interrupted", "keeps-going").await.unwrap();
}

#[tokio::test]
async fn an_upload_over_the_servers_limit_is_refused_and_leaves_nothing() {
    let env = Env::start_with(krayne_tests::EnvOptions::with_args(&["--max-package-mib", "1"])).await;
    env.ready_cluster("small").await;
    let dir = tempfile::tempdir().unwrap();
    let noise: String = (0..3 * 1024 * 1024)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    write(dir.path(), &[("data.txt", noise.as_str())]);
    let client = Client::connect(env.url()).await.unwrap().with_token(env.alice());
    let refused = client
        .upload_working_dir("ml-team", "small", dir.path(), &PackOptions::default(), |_, _| {})
        .await
        .unwrap_err();
    assert_eq!(refused.code(), krayne_client::Code::ResourceExhausted, "{refused}");
    assert!(refused.message().contains("limit of 1 MiB"), "{refused}");
    let name = krayne_client::package::package_name(dir.path(), &PackOptions::default()).unwrap();
    let (_, uploaded) = client
        .upload_working_dir(
            "ml-team",
            "small",
            tempfile::tempdir().unwrap().path(),
            &PackOptions::default(),
            |_, _| {},
        )
        .await
        .unwrap();
    assert!(uploaded, "a small one goes through");
    let rows = env
        .rest(&env.admin())
        .get(&format!("/v1/namespaces/ml-team/clusters/small/packages/{name}"))
        .await;
    assert_eq!(rows.status, 404, "the head kept nothing of the refused one");
}

/// Issue 55: Ray's own CLI through `krayne tunnel`, raw to the dashboard:
/// refused without Ray's token, submitting with the one `krayne
/// ray-credentials` hands out (audited), in Ray's own environment
/// variables.
#[tokio::test]
async fn rays_own_cli_submits_through_a_tunnel_with_the_token_krayne_hands_out() {
    let Some(python) = python_with_ray() else { return };
    let ray = Path::new(&python).with_file_name("ray");
    let env = Env::start().await;
    env.ready_cluster("ray-cli").await;
    let krayne = Krayne::new(&env, &env.alice());
    let opened = krayne
        .run(&["tunnel", "ray-cli", "dashboard", "-n", "ml-team", "--detach"])
        .await
        .code(0);
    assert!(
        opened.stderr().contains("export RAY_AUTH_TOKEN="),
        "the tunnel says how Ray's clients get the token: {}",
        opened.stderr()
    );
    let port = opened
        .stdout()
        .split("http://127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("no local URL in {}", opened.stdout()));
    let address = format!("http://127.0.0.1:{port}");
    let token = crate::tunnels::ray_token(&krayne, "ray-cli").await;
    let submit = |auth: Option<&str>| {
        let mut command = tokio::process::Command::new(&ray);
        command
            .args([
                "job",
                "submit",
                "--address",
                &address,
                "--no-wait",
                "--",
                "echo",
                "from-ray-cli",
            ])
            .env_remove("RAY_AUTH_MODE")
            .env_remove("RAY_AUTH_TOKEN");
        if let Some(token) = auth {
            command.env("RAY_AUTH_MODE", "token").env("RAY_AUTH_TOKEN", token);
        }
        async move { command.output().await.expect("ray runs") }
    };
    let refused = submit(None).await;
    let said = String::from_utf8_lossy(&refused.stderr).into_owned() + &String::from_utf8_lossy(&refused.stdout);
    assert!(!refused.status.success(), "Ray's head refused no token: {said}");
    assert!(said.contains("401") || said.contains("Unauthorized"), "{said}");
    let submitted = submit(Some(&token)).await;
    let said = String::from_utf8_lossy(&submitted.stderr).into_owned() + &String::from_utf8_lossy(&submitted.stdout);
    assert!(submitted.status.success(), "{said}");
    let id = said
        .split("Job '")
        .nth(1)
        .and_then(|rest| rest.split('\'').next())
        .unwrap_or_else(|| panic!("no job id in {said}"))
        .to_owned();
    // krayne sees the job Ray's CLI submitted.
    let listed = krayne
        .run(&in_team(&["jobs", "list", "ray-cli"]))
        .await
        .code(0)
        .stdout();
    assert!(listed.contains(&id), "{listed}");
    krayne.run(&["tun-close", "ray-cli", "-n", "ml-team"]).await.code(0);
    // Every ask is audited (the tunnel's and ray-credentials'), without
    // the token.
    let rows = env
        .audit_rows_eventually("action=cluster.credentials&cluster=ray-cli", 2)
        .await;
    assert!(
        rows.iter()
            .all(|r| r["outcome"] != "failed" && !r.to_string().contains(&token)),
        "{rows:?}"
    );
}

/// Issue 56, item 1: `krayne submit` in a folder holding a link to nothing
/// (an editor's lock file, say), with the working dir its default `.`:
/// the link is left out and named, the job runs (it used to fail with a
/// bare `No such file or directory`, naming no file).
#[tokio::test]
async fn submit_leaves_out_a_link_to_nothing_names_it_and_runs() {
    let env = Env::start().await;
    env.ready_cluster("links").await;
    let krayne = Krayne::new(&env, &env.alice());
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), &[("train.py", "print(1)\n")]);
    std::os::unix::fs::symlink("/no/such/target", dir.path().join(".#train.py")).unwrap();
    let run = krayne
        .run_in(
            dir.path(),
            &in_team(&["submit", "links", "--", "echo", "ran-without-the-link"]),
        )
        .await
        .code(0);
    assert!(run.stdout().contains("ran-without-the-link"), "{}", run.stdout());
    assert!(
        run.stderr().contains("left out .#train.py (a link to nothing"),
        "the link is named: {}",
        run.stderr()
    );
}
